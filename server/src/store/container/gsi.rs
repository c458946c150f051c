//! The storage side of global secondary indexes (the copying is `crate::gsi`'s).
//!
//! A global secondary index is a container whose `globalSecondaryIndexDefinition` names a
//! source container of the same database and a query that projects its items; the index
//! holds one copy of each source item, under its own partition key, kept in sync from the
//! source's all-versions history. Three facts live here:
//!
//! * the [`Definition`], checked when the index is created (the service's rules: one level of
//!   properties or `*`, no alias, clause or function);
//! * the source's *history holds*: while an index has not applied the source's changes past
//!   some LSN, the source logs every change (as with a change feed retention) and never
//!   purges past that LSN, so nothing the index still needs is gone;
//! * per source item, the index's *link* (where its copy lives: the copy's partition key and
//!   id) and the index's *cursor* (the last source LSN applied), written in the same
//!   transaction as the copies, so a crash loses or repeats nothing.
//!
//! Page: <https://learn.microsoft.com/azure/cosmos-db/nosql/global-secondary-indexes>.

use super::{lock, Container, Txn};
use crate::store::engine::Space;
use crate::store::StoreError;
use serde_json::{Map, Value};
use std::sync::atomic::Ordering;
use strata_query::sql::ast::{Expr, Projection, SourceKind};

/// The container property that makes a container a global secondary index.
pub const PROP: &str = "globalSecondaryIndexDefinition";
/// The name the Python SDK also sends the definition under (the feature's preview name).
pub const PREVIEW_PROP: &str = "materializedViewDefinition";
/// Most indexes one source container may have.
pub const MAX_PER_SOURCE: usize = 5;

/// An index's definition: its source container and what of each item it copies.
#[derive(Debug, Clone, PartialEq)]
pub struct Definition {
    pub source: String,
    pub query: String,
    /// The top-level properties copied; `None` for `SELECT *`.
    pub fields: Option<Vec<String>>,
}

fn bad(message: impl Into<String>) -> StoreError {
    StoreError::BadRequest(message.into())
}

impl Definition {
    /// The definition a container's properties carry, checked (`None`: not an index).
    pub fn of(props: &Map<String, Value>) -> Result<Option<Self>, StoreError> {
        let Some(v) = props.get(PROP).or_else(|| props.get(PREVIEW_PROP)) else {
            return Ok(None);
        };
        let text = |name: &str| {
            v.get(name)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .ok_or_else(|| {
                    bad(format!(
                        "The '{PROP}' of a global secondary index needs a non-empty '{name}'."
                    ))
                })
        };
        let (source, query) = (text("sourceCollectionId")?, text("definition")?);
        let fields = projection(query).map_err(|why| {
            bad(format!(
                "The global secondary index definition '{query}' is not supported: {why}"
            ))
        })?;
        Ok(Some(Self {
            source: source.to_string(),
            query: query.to_string(),
            fields,
        }))
    }

    /// The copy of source item `doc` (its JSON, system properties included): the projected
    /// properties, the source's `id` as `_id`, and `id` the source item's `_rid` (unique in
    /// the source and kept across its replaces), with `/` made `-` as an id allows.
    pub fn project(&self, doc: &Map<String, Value>) -> Map<String, Value> {
        let mut out = Map::new();
        match &self.fields {
            None => {
                for (k, v) in doc {
                    if !matches!(
                        k.as_str(),
                        "id" | "_rid" | "_self" | "_etag" | "_ts" | "_attachments" | "_lsn"
                    ) {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            Some(fields) => {
                for f in fields {
                    if f == "id" {
                        continue;
                    }
                    if let Some(v) = doc.get(f) {
                        out.insert(f.clone(), v.clone());
                    }
                }
            }
        }
        if let Some(id) = doc.get("id") {
            out.insert("_id".into(), id.clone());
        }
        let rid = doc.get("_rid").and_then(Value::as_str).unwrap_or_default();
        out.insert("id".into(), Value::String(rid.replace('/', "-")));
        out
    }
}

/// The properties `sql` selects (`None` for `*`), or why the service would refuse it.
fn projection(sql: &str) -> Result<Option<Vec<String>>, String> {
    let q = strata_query::sql::parser::parse(sql).map_err(|e| e.to_string())?;
    let from = q.from.as_ref().ok_or("it has no FROM clause.")?;
    if !from.joins.is_empty() {
        return Err("JOIN is not allowed.".into());
    }
    let alias = match (&from.first.kind, &from.first.alias) {
        (_, Some(a)) => a.clone(),
        (SourceKind::Value(Expr::Ident(name)), None) => name.clone(),
        _ => return Err("the FROM clause must name the container alone.".into()),
    };
    if !matches!(&from.first.kind, SourceKind::Value(Expr::Ident(_))) {
        return Err("the FROM clause must name the container alone.".into());
    }
    if q.where_.is_some() {
        return Err("WHERE is not allowed.".into());
    }
    if !q.group_by.is_empty() || q.order_by.is_some() || q.offset.is_some() || q.limit.is_some() {
        return Err("GROUP BY, ORDER BY and OFFSET LIMIT are not allowed.".into());
    }
    if q.select.distinct || q.select.top.is_some() {
        return Err("DISTINCT and TOP are not allowed.".into());
    }
    let items = match &q.select.projection {
        Projection::Star => return Ok(None),
        Projection::Value(_) => return Err("SELECT VALUE is not allowed.".into()),
        Projection::List(items) => items,
    };
    let mut fields = Vec::new();
    for item in items {
        if item.alias.is_some() {
            return Err("aliases (AS) are not allowed.".into());
        }
        match &item.expr {
            Expr::Member(on, name) if matches!(&**on, Expr::Ident(a) if *a == alias) => {
                if !fields.contains(name) {
                    fields.push(name.clone());
                }
            }
            Expr::Member(..) | Expr::Index(..) => {
                return Err(format!(
                    "only top-level properties of '{alias}' can be selected (one level of the document)."
                ))
            }
            _ => {
                return Err(
                    "only properties can be selected: no functions, expressions or subqueries."
                        .into(),
                )
            }
        }
    }
    Ok(Some(fields))
}

/// Where an index keeps the copy of one source item.
#[derive(Debug, Clone, PartialEq)]
pub struct Link {
    /// The copy's EPK (its logical partition in the index) and id.
    pub epk: String,
    pub id: String,
}

/// How far an index has applied its source: the last source LSN applied, and whether its
/// initial build is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cursor {
    pub lsn: u64,
    pub built: bool,
}

fn link_prefix(cid: u32) -> Vec<u8> {
    let mut k = b"gsilink/".to_vec();
    k.extend_from_slice(&cid.to_be_bytes());
    k
}

/// The catalog keys of index `cid`'s links (removed with the index).
pub fn link_range(cid: u32) -> (Vec<u8>, Vec<u8>) {
    (link_prefix(cid), link_prefix(cid + 1))
}

fn link_key(cid: u32, source_epk: &str, source_id: &str) -> Vec<u8> {
    let mut k = link_prefix(cid);
    k.extend_from_slice(source_epk.as_bytes());
    k.push(0);
    k.extend_from_slice(source_id.as_bytes());
    k
}

/// The catalog key of index `cid`'s [`Cursor`].
pub fn cursor_key(cid: u32) -> Vec<u8> {
    let mut k = b"gsicursor/".to_vec();
    k.extend_from_slice(&cid.to_be_bytes());
    k
}

impl Container {
    /// Keeps this container's history from LSN `after` on for index `holder` (placing its
    /// hold at start, see `Store::restore_gsi_holds`).
    pub fn hold_history(&self, holder: u32, after: u64) {
        lock(&self.history_holds).insert(holder, after);
    }

    /// Moves index `holder`'s hold to `after`, if it still has one: a sync step that ends
    /// after its index was deleted places no hold again.
    pub fn advance_history_hold(&self, holder: u32, after: u64) {
        if let Some(h) = lock(&self.history_holds).get_mut(&holder) {
            *h = after;
        }
    }

    /// Places index `holder`'s hold with writes paused, so every write after the LSN it
    /// returns is logged.
    pub fn hold_history_from_now(&self, holder: u32) -> u64 {
        self.with_writes_paused(|| {
            let now = self.current_lsn();
            lock(&self.history_holds).entry(holder).or_insert(now);
            now
        })
    }

    /// Drops index `holder`'s hold (the index was deleted).
    pub fn release_history(&self, holder: u32) {
        lock(&self.history_holds).remove(&holder);
    }

    /// The indexes holding this container's history.
    pub fn history_holders(&self) -> Vec<u32> {
        lock(&self.history_holds).keys().copied().collect()
    }

    /// The LSN after which index `holder` still needs this container's history.
    pub fn history_hold(&self, holder: u32) -> Option<u64> {
        lock(&self.history_holds).get(&holder).copied()
    }

    /// The lowest LSN after which some index still needs history (`None`: none does).
    pub(in crate::store) fn history_hold_floor(&self) -> Option<u64> {
        lock(&self.history_holds).values().min().copied()
    }

    /// This index's cursor, as last committed.
    pub fn gsi_cursor(&self) -> Result<Cursor, StoreError> {
        Ok(self
            .engine
            .get(Space::Catalog, &cursor_key(self.cid))?
            .and_then(|v| {
                let lsn = u64::from_be_bytes(v.get(..8)?.try_into().ok()?);
                Some(Cursor {
                    lsn,
                    built: v.get(8) == Some(&1),
                })
            })
            .unwrap_or_default())
    }

    /// Where this index keeps its copy of source item (`source_epk`, `source_id`).
    pub fn gsi_link(&self, source_epk: &str, source_id: &str) -> Result<Option<Link>, StoreError> {
        let Some(v) = self
            .engine
            .get(Space::Catalog, &link_key(self.cid, source_epk, source_id))?
        else {
            return Ok(None);
        };
        let v: Value = serde_json::from_slice(&v)
            .map_err(|e| StoreError::Corrupt(format!("a global secondary index link: {e}")))?;
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        Ok(match (text("epk"), text("id")) {
            (Some(epk), Some(id)) => Some(Link { epk, id }),
            _ => None,
        })
    }

    /// The index's build phase as the service names it (`status` of its definition).
    pub fn gsi_status(&self) -> &'static str {
        match self.gsi_phase.load(Ordering::Acquire) {
            0 => "Initializing",
            1 => "InitialBuildAfterCreate",
            _ => "Active",
        }
    }

    /// Sets the build phase (0 initializing, 1 building, 2 active).
    pub fn set_gsi_phase(&self, phase: u8) {
        self.gsi_phase.store(phase, Ordering::Release);
    }
}

impl Txn<'_> {
    /// Records (or, with `None`, forgets) where this index keeps a source item's copy.
    pub fn set_gsi_link(&mut self, source_epk: &str, source_id: &str, link: Option<&Link>) {
        let key = link_key(self.c.cid, source_epk, source_id);
        match link {
            Some(l) => {
                let v = serde_json::json!({"epk": l.epk, "id": l.id});
                self.tx.put(
                    Space::Catalog,
                    key,
                    serde_json::to_vec(&v).unwrap_or_default(),
                );
            }
            None => self.tx.delete(Space::Catalog, key),
        }
    }

    /// Moves this index's cursor, with the copies this transaction writes.
    pub fn set_gsi_cursor(&mut self, cursor: Cursor) {
        let mut v = cursor.lsn.to_be_bytes().to_vec();
        v.push(u8::from(cursor.built));
        self.tx.put(Space::Catalog, cursor_key(self.c.cid), v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn def(query: &str) -> Result<Option<Definition>, StoreError> {
        let props = json!({PROP: {"sourceCollectionId": "src", "definition": query}});
        Definition::of(props.as_object().unwrap())
    }

    /// The page's rules: one level of properties or `*`; no alias, WHERE, JOIN, DISTINCT,
    /// GROUP BY, ORDER BY, TOP, OFFSET LIMIT or function.
    #[test]
    fn definitions_follow_the_service_rules() {
        let d = def("SELECT c.customerId, c.emailAddress FROM c")
            .unwrap()
            .unwrap();
        assert_eq!(d.source, "src");
        assert_eq!(
            d.fields,
            Some(vec!["customerId".to_string(), "emailAddress".to_string()])
        );
        assert_eq!(def("SELECT * FROM c").unwrap().unwrap().fields, None);
        assert!(def("select r.a from root r").unwrap().is_some());
        for refused in [
            "SELECT c.a AS b FROM c",
            "SELECT c.a FROM c WHERE c.a = 1",
            "SELECT c.a FROM c JOIN t IN c.tags",
            "SELECT DISTINCT c.a FROM c",
            "SELECT TOP 5 c.a FROM c",
            "SELECT c.a FROM c ORDER BY c.a",
            "SELECT c.a FROM c GROUP BY c.a",
            "SELECT c.a FROM c OFFSET 1 LIMIT 2",
            "SELECT c.a.b FROM c",
            "SELECT UPPER(c.a) FROM c",
            "SELECT VALUE c.a FROM c",
            "SELECT c.a FROM",
        ] {
            let err = def(refused).expect_err(refused);
            assert!(matches!(err, StoreError::BadRequest(_)), "{refused}");
        }
        let empty = json!({PROP: {"sourceCollectionId": " ", "definition": "SELECT * FROM c"}});
        assert!(Definition::of(empty.as_object().unwrap()).is_err());
        assert!(Definition::of(&Map::new()).unwrap().is_none());
        let preview =
            json!({PREVIEW_PROP: {"sourceCollectionId": "s", "definition": "SELECT * FROM c"}});
        assert!(Definition::of(preview.as_object().unwrap())
            .unwrap()
            .is_some());
    }

    /// A copy holds the selected properties, the source's id as `_id`, and the source's
    /// `_rid` as its id; `*` copies every property but the source's system ones.
    #[test]
    fn copies_project_the_source_item() {
        let doc = json!({"id": "a1", "pk": "p", "email": "x@y", "n": 1, "_rid": "AbC/Dw==",
                         "_etag": "\"1\"", "_ts": 5, "_self": "s"});
        let doc = doc.as_object().unwrap();
        let some = def("SELECT c.email, c.id, c.missing FROM c")
            .unwrap()
            .unwrap();
        assert_eq!(
            Value::Object(some.project(doc)),
            json!({"email": "x@y", "_id": "a1", "id": "AbC-Dw=="})
        );
        let all = def("SELECT * FROM c").unwrap().unwrap();
        assert_eq!(
            Value::Object(all.project(doc)),
            json!({"pk": "p", "email": "x@y", "n": 1, "_id": "a1", "id": "AbC-Dw=="})
        );
    }
}
