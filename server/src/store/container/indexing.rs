//! What a write does to the container's index and unique keys: the entries of the old
//! version out, the new version's in, and a unique value another document of the logical
//! partition holds refused — all in the write's own transaction, so the index never
//! disagrees with the documents after a crash.

use super::*;

impl Txn<'_> {
    /// Whether writes maintain index entries or unique keys at all.
    pub(super) fn indexes(&self) -> bool {
        !self.index.policy.is_none() || !self.index.unique.is_empty()
    }

    /// Moves the index entries and unique keys of the document at `key` from `old` to `new`
    /// (either absent for a create or a delete). A unique value another document of the
    /// logical partition holds is a conflict.
    pub(super) fn maintain(
        &mut self,
        epk: &str,
        id: &str,
        key: &[u8],
        old: Option<&Value>,
        new: Option<&Value>,
    ) -> Result<(), StoreError> {
        let cid = self.c.cid;
        for ix in self.vector_paths.iter() {
            // Pushed even without a vector: the old version (not always parsed) may have had one.
            let v = new.and_then(|d| ix.extract(d));
            self.vector_changes.push((Arc::clone(ix), key.to_vec(), v));
        }
        if !self.index.policy.is_none() {
            let before = old.map(|d| self.index.entries(d)).unwrap_or_default();
            let after = new.map(|d| self.index.entries(d)).unwrap_or_default();
            let (removed, added) = index::diff(&before, &after);
            let gen = self.index.gen;
            for e in removed {
                self.tx
                    .delete(Space::Index, index::entry_key(cid, gen, e, &key[4..]));
            }
            for e in added {
                self.tx.put(
                    Space::Index,
                    index::entry_key(cid, gen, e, &key[4..]),
                    Vec::new(),
                );
            }
        }
        if self.index.unique.is_empty() {
            return Ok(());
        }
        let unique = std::sync::Arc::clone(&self.index.unique);
        let codec = self.c.codec;
        let before = old
            .map(|d| unique.rows(cid, codec, epk, d))
            .unwrap_or_default();
        let after = new
            .map(|d| unique.rows(cid, codec, epk, d))
            .unwrap_or_default();
        for row in &after {
            if before.contains(row) {
                continue;
            }
            if let Some(owner) = self.unique_owner(row)? {
                if owner != id && !self.owner_expired(epk, &owner)? {
                    return Err(StoreError::Conflict(
                        "Unique index constraint violation: another item in this logical partition already has these unique key values.".into(),
                    ));
                }
            }
            self.tx
                .put(Space::Unique, row.clone(), id.as_bytes().to_vec());
            self.stage_unique(row.clone(), Some(id.to_string()));
        }
        for row in before {
            // Only the row's owner removes it (an expired owner may have been displaced).
            if !after.contains(&row) && self.unique_owner(&row)?.as_deref() == Some(id) {
                self.tx.delete(Space::Unique, row.clone());
                self.stage_unique(row, None);
            }
        }
        Ok(())
    }

    fn unique_owner(&self, row: &[u8]) -> Result<Option<String>, StoreError> {
        if let Some(v) = self.unique_staged.get(row) {
            return Ok(v.clone());
        }
        Ok(self
            .tx
            .get(Space::Unique, row)?
            .map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    /// Whether the document holding a unique value is gone in effect (expired by TTL, not
    /// purged yet): its values no longer block others.
    fn owner_expired(&self, epk: &str, owner: &str) -> Result<bool, StoreError> {
        Ok(self.get(epk, owner)?.is_none())
    }
}
