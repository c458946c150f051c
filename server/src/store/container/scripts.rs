//! A container's server-side scripts — stored procedures, triggers and user-defined
//! functions — as durable catalog records (`script/ | cid | kind | id`), kept in memory per
//! container as one immutable set that changes by replacement, so executing a script or a
//! query with UDFs takes a snapshot without holding a lock.
//!
//! Scripts are stored as written: like the service, a body is compiled when it runs, so a
//! script that does not compile fails its executions (400), not its creation.

use super::{read, write, Container};
use crate::store::catalog::{self, coll_rid_bytes};
use crate::store::engine::{Op, Space};
use crate::store::{Store, StoreError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The three kinds of script a container holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ScriptKind {
    Sproc,
    Trigger,
    Udf,
}

impl ScriptKind {
    /// The kind named by a resource path segment (`sprocs`, `triggers`, `udfs`).
    pub fn from_segment(s: &str) -> Option<Self> {
        match s {
            "sprocs" => Some(Self::Sproc),
            "triggers" => Some(Self::Trigger),
            "udfs" => Some(Self::Udf),
            _ => None,
        }
    }

    pub fn segment(self) -> &'static str {
        match self {
            Self::Sproc => "sprocs",
            Self::Trigger => "triggers",
            Self::Udf => "udfs",
        }
    }

    /// The resource's name in messages.
    pub fn noun(self) -> &'static str {
        match self {
            Self::Sproc => "stored procedure",
            Self::Trigger => "trigger",
            Self::Udf => "user-defined function",
        }
    }

    /// The list key of a feed of this kind (`{"StoredProcedures": [...]}`).
    pub fn feed_key(self) -> &'static str {
        match self {
            Self::Sproc => "StoredProcedures",
            Self::Trigger => "Triggers",
            Self::Udf => "UserDefinedFunctions",
        }
    }

    fn tag(self) -> u8 {
        match self {
            Self::Sproc => b's',
            Self::Trigger => b't',
            Self::Udf => b'u',
        }
    }

    /// The last byte of the kind's resource ids (the service marks the resource type there).
    fn rid_marker(self) -> u8 {
        match self {
            Self::Sproc => 0x80,
            Self::Trigger => 0x70,
            Self::Udf => 0x60,
        }
    }
}

/// When a trigger runs, and on which operations.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TriggerSpec {
    /// `Pre` or `Post`, as the client wrote it (matched case-insensitively).
    pub trigger_type: String,
    /// `All`, `Create`, `Replace`, `Delete` or `Upsert`.
    pub trigger_operation: String,
}

/// One stored script.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScriptRecord {
    pub kind: ScriptKind,
    pub id: String,
    pub body: String,
    #[serde(default)]
    pub trigger: Option<TriggerSpec>,
    /// Numbers the script within its container (its `_rid`); kept across replaces.
    pub seq: u64,
    pub ts: u64,
    pub etag_seq: u64,
}

impl ScriptRecord {
    pub fn rid(&self, c: &Container) -> String {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&coll_rid_bytes(c.db_seq, c.cid));
        b[8..15].copy_from_slice(&self.seq.to_le_bytes()[..7]);
        b[15] = self.kind.rid_marker();
        catalog::rid(&b)
    }

    pub fn etag(&self) -> String {
        catalog::etag(0, self.etag_seq)
    }
}

/// A container's scripts at one moment.
#[derive(Debug, Default)]
pub struct Scripts {
    by_key: BTreeMap<(ScriptKind, String), Arc<ScriptRecord>>,
    next_seq: u64,
    /// Changes with every write, so compiled UDFs can be cached by it.
    pub version: u64,
}

impl Scripts {
    /// Rebuilds the set from stored records.
    pub fn load(records: Vec<ScriptRecord>) -> Self {
        let mut s = Scripts::default();
        for r in records {
            s.next_seq = s.next_seq.max(r.seq);
            s.version = s.version.max(r.etag_seq);
            s.by_key.insert((r.kind, r.id.clone()), Arc::new(r));
        }
        s
    }

    /// A script by id, or by `_rid` (rid-based links).
    pub fn get(&self, c: &Container, kind: ScriptKind, id: &str) -> Option<Arc<ScriptRecord>> {
        if let Some(r) = self.by_key.get(&(kind, id.to_string())) {
            return Some(Arc::clone(r));
        }
        self.of(kind).find(|r| r.rid(c) == id).cloned()
    }

    pub fn of(&self, kind: ScriptKind) -> impl Iterator<Item = &Arc<ScriptRecord>> {
        self.by_key
            .range((kind, String::new())..)
            .take_while(move |((k, _), _)| *k == kind)
            .map(|(_, r)| r)
    }
}

impl Container {
    /// The container's scripts now (a snapshot).
    pub fn scripts(&self) -> Arc<Scripts> {
        Arc::clone(&read(&self.scripts))
    }
}

/// The catalog key of a script: `script/ | cid | kind tag | id`.
fn script_key(cid: u32, kind: ScriptKind, id: &str) -> Vec<u8> {
    let mut k = script_prefix(cid);
    k.push(kind.tag());
    k.extend_from_slice(id.as_bytes());
    k
}

/// Where a container's script records begin in the catalog.
pub fn script_prefix(cid: u32) -> Vec<u8> {
    let mut k = b"script/".to_vec();
    k.extend_from_slice(&cid.to_be_bytes());
    k
}

/// Reads a container's stored scripts.
pub fn load(engine: &crate::store::Engine, cid: u32) -> Result<Scripts, StoreError> {
    let records = crate::store::scan_prefix(engine, Space::Catalog, &script_prefix(cid))?
        .into_iter()
        .map(|(_, v)| {
            serde_json::from_slice(&v)
                .map_err(|e| StoreError::Corrupt(format!("script record: {e}")))
        })
        .collect::<Result<Vec<ScriptRecord>, _>>()?;
    Ok(Scripts::load(records))
}

/// How a script write treats an existing script of the same id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutMode {
    Create,
    /// Replace the script named `id` (the body may rename it).
    Replace,
    Upsert,
}

/// A script as a client sent it.
#[derive(Debug, Clone)]
pub struct NewScript {
    pub kind: ScriptKind,
    pub id: String,
    pub body: String,
    pub trigger: Option<TriggerSpec>,
}

impl Store {
    /// Creates, replaces or upserts a script; the second value says whether it was created.
    /// `target` is the id a replace addresses.
    pub async fn put_script(
        &self,
        c: &Arc<Container>,
        new: NewScript,
        mode: PutMode,
        target: &str,
        if_match: Option<&str>,
    ) -> Result<(Arc<ScriptRecord>, bool), StoreError> {
        let _ddl = self.inner.ddl.lock().await;
        let kind = new.kind;
        let current = read(&c.scripts).clone();
        let existing = current.get(c, kind, target);
        let noun = kind.noun();
        if let (Some(m), Some(e)) = (if_match, &existing) {
            if m.trim() != "*" && m.trim().trim_matches('"') != e.etag().trim_matches('"') {
                return Err(StoreError::PreconditionFailed(format!(
                    "Operation cannot be performed because one of the specified precondition is not met: the {noun}'s etag no longer matches If-Match."
                )));
            }
        }
        match (mode, &existing) {
            (PutMode::Create, Some(_)) => {
                return Err(StoreError::Conflict(format!(
                    "Resource with specified id or name already exists: a {noun} with id '{}' already exists in container '{}'.",
                    new.id, c.id
                )))
            }
            (PutMode::Replace, None) => {
                return Err(StoreError::NotFound(format!(
                    "Resource Not Found: the {noun} '{target}' does not exist in container '{}'.",
                    c.id
                )))
            }
            _ => {}
        }
        let renamed = existing.as_ref().filter(|e| e.id != new.id);
        if renamed.is_some() && current.get(c, kind, &new.id).is_some() {
            return Err(StoreError::Conflict(format!(
                "Resource with specified id or name already exists: the {noun} '{target}' cannot be renamed to '{}', which already exists.",
                new.id
            )));
        }
        let (etag_seq, counter_op) = self.next_etag_seq();
        let rec = ScriptRecord {
            kind,
            id: new.id,
            body: new.body,
            trigger: new.trigger,
            seq: existing
                .as_ref()
                .map(|e| e.seq)
                .unwrap_or(current.next_seq + 1),
            ts: catalog::now_secs(),
            etag_seq,
        };
        let mut ops = vec![
            counter_op,
            Op::Put(
                Space::Catalog,
                script_key(c.cid, kind, &rec.id),
                serde_json::to_vec(&rec).unwrap_or_default(),
            ),
        ];
        if let Some(old) = renamed {
            ops.push(Op::Delete(Space::Catalog, script_key(c.cid, kind, &old.id)));
        }
        self.inner.engine.write_durable(ops).await?;
        let rec = Arc::new(rec);
        let mut s = write(&c.scripts);
        let mut next = Scripts {
            by_key: s.by_key.clone(),
            next_seq: s.next_seq.max(rec.seq),
            version: etag_seq,
        };
        if let Some(old) = renamed {
            next.by_key.remove(&(kind, old.id.clone()));
        }
        next.by_key.insert((kind, rec.id.clone()), Arc::clone(&rec));
        *s = Arc::new(next);
        Ok((rec, existing.is_none()))
    }

    /// Deletes a script (404 when there is none).
    pub async fn delete_script(
        &self,
        c: &Arc<Container>,
        kind: ScriptKind,
        id: &str,
    ) -> Result<(), StoreError> {
        let _ddl = self.inner.ddl.lock().await;
        let existing = read(&c.scripts).get(c, kind, id).ok_or_else(|| {
            StoreError::NotFound(format!(
                "Resource Not Found: the {} '{id}' does not exist in container '{}'.",
                kind.noun(),
                c.id
            ))
        })?;
        let (etag_seq, counter_op) = self.next_etag_seq();
        self.inner
            .engine
            .write_durable(vec![
                counter_op,
                Op::Delete(Space::Catalog, script_key(c.cid, kind, &existing.id)),
            ])
            .await?;
        let mut s = write(&c.scripts);
        let mut by_key = s.by_key.clone();
        by_key.remove(&(kind, existing.id.clone()));
        *s = Arc::new(Scripts {
            by_key,
            next_seq: s.next_seq,
            version: etag_seq,
        });
        Ok(())
    }
}
