//! Unique keys: per logical partition, one row per unique key of the policy holding the
//! owning document's id (see [`crate::store::index::UniqueKeys`]). A write that would give a
//! value another live document of the partition holds is refused — checked against what the
//! transaction itself staged, so a batch or stored procedure sees its own changes.

use super::{DocRef, IndexKind, IndexMaintainer, Old, Text, Txn};
use crate::store::engine::Space;
use crate::store::index::UniqueKeys;
use crate::store::StoreError;
use serde_json::Value;
use std::sync::Arc;

pub struct UniqueIndex {
    keys: Arc<UniqueKeys>,
}

impl UniqueIndex {
    pub fn new(keys: Arc<UniqueKeys>) -> Self {
        Self { keys }
    }

    fn rows(&self, t: &Txn<'_>, epk: &str, d: Option<&Value>) -> Vec<Vec<u8>> {
        d.map(|d| self.keys.rows(t.c.cid, t.c.codec, epk, d))
            .unwrap_or_default()
    }
}

impl IndexMaintainer for UniqueIndex {
    fn kind(&self) -> IndexKind {
        IndexKind::Unique
    }

    fn update(
        &self,
        t: &mut Txn<'_>,
        doc: DocRef<'_>,
        old: Option<&Old<'_>>,
        new: Option<&Text<'_>>,
    ) -> Result<(), StoreError> {
        let new = new.map(Text::doc).transpose()?;
        let before = self.rows(t, doc.epk, old.map(Old::doc).transpose()?);
        let after = self.rows(t, doc.epk, new);
        for row in &after {
            if before.contains(row) {
                continue;
            }
            if let Some(owner) = owner(t, row)? {
                if owner != doc.id && t.get(doc.epk, &owner)?.is_some() {
                    return Err(StoreError::Conflict(
                        "Unique index constraint violation: another item in this logical partition already has these unique key values.".into(),
                    ));
                }
            }
            t.tx.put(Space::Unique, row.clone(), doc.id.as_bytes().to_vec());
            t.stage_unique(row.clone(), Some(doc.id.to_string()));
        }
        for row in before {
            // Only the row's owner removes it (an expired owner may have been displaced).
            if !after.contains(&row) && owner(t, &row)?.as_deref() == Some(doc.id) {
                t.tx.delete(Space::Unique, row.clone());
                t.stage_unique(row, None);
            }
        }
        Ok(())
    }

    fn backfill(&self, t: &mut Txn<'_>, doc: DocRef<'_>, d: &Value) -> Result<(), StoreError> {
        for row in self.rows(t, doc.epk, Some(d)) {
            t.put_raw(Space::Unique, row, doc.id.as_bytes().to_vec());
        }
        Ok(())
    }

    fn explain(&self) -> String {
        format!("{} unique key(s)", self.keys.0.len())
    }
}

/// The id owning a unique row as the transaction sees it (its own changes first).
fn owner(t: &Txn<'_>, row: &[u8]) -> Result<Option<String>, StoreError> {
    if let Some(v) = t.unique_staged.get(row) {
        return Ok(v.clone());
    }
    Ok(t.tx
        .get(Space::Unique, row)?
        .map(|b| String::from_utf8_lossy(&b).into_owned()))
}
