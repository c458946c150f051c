//! A vector path's index: its in-memory set (see [`crate::vector`]) learns each written
//! document's vector after the commit, in commit order, so a failed write never reaches it.
//! The set is rebuilt from the documents at start, not backfilled here.

use super::{DocRef, IndexKind, IndexMaintainer, Txn};
use crate::store::container::vectors::PathIndex;
use crate::store::StoreError;
use serde_json::Value;
use std::sync::Arc;

pub struct VectorIndex {
    path: Arc<PathIndex>,
}

impl VectorIndex {
    pub fn new(path: Arc<PathIndex>) -> Self {
        Self { path }
    }
}

impl IndexMaintainer for VectorIndex {
    fn kind(&self) -> IndexKind {
        IndexKind::Vector
    }

    /// The set replaces a document's vector by key; the old one is not needed.
    fn needs_old(&self) -> bool {
        false
    }

    fn update(
        &self,
        t: &mut Txn<'_>,
        doc: DocRef<'_>,
        _old: Option<&Value>,
        new: Option<&Value>,
    ) -> Result<(), StoreError> {
        // Staged even without a vector: the old version (not parsed) may have had one.
        let v = new.and_then(|d| self.path.extract(d));
        t.vector_changes
            .push((Arc::clone(&self.path), doc.key.to_vec(), v));
        Ok(())
    }

    fn backfill(&self, _t: &mut Txn<'_>, _doc: DocRef<'_>, _d: &Value) -> Result<(), StoreError> {
        Ok(())
    }

    fn explain(&self) -> String {
        let p = &self.path.params;
        format!(
            "{} vector index on {} ({} dimensions, {:?})",
            self.path.kind_name(),
            self.path.path,
            p.dims,
            p.metric
        )
    }
}
