//! The range index of the indexing policy: one entry per indexed scalar (array elements under
//! `[]`) and one type marker per indexed array or object, keyed by path and term (see
//! [`crate::store::index`]). Equality, range, `ORDER BY` and composite lookups read it.

use super::{move_entries, put_entries, DocRef, IndexKind, IndexMaintainer, Txn};
use crate::store::StoreError;
use serde_json::Value;
use std::sync::Arc;
use strata_query::index::{term, IndexingPolicy};

pub struct RangeIndex {
    policy: Arc<IndexingPolicy>,
    gen: u16,
}

impl RangeIndex {
    pub fn new(policy: Arc<IndexingPolicy>, gen: u16) -> Self {
        Self { policy, gen }
    }
}

impl IndexMaintainer for RangeIndex {
    fn kind(&self) -> IndexKind {
        IndexKind::Range
    }

    fn update(
        &self,
        t: &mut Txn<'_>,
        doc: DocRef<'_>,
        old: Option<&Value>,
        new: Option<&Value>,
    ) -> Result<(), StoreError> {
        let entries = |d: Option<&Value>| {
            d.map(|d| term::entries(d, &self.policy))
                .unwrap_or_default()
        };
        move_entries(t, self.gen, doc, &entries(old), &entries(new));
        Ok(())
    }

    fn backfill(&self, t: &mut Txn<'_>, doc: DocRef<'_>, d: &Value) -> Result<(), StoreError> {
        put_entries(t, self.gen, doc, &term::entries(d, &self.policy));
        Ok(())
    }

    fn explain(&self) -> String {
        format!(
            "range index ({} included, {} excluded path(s), {} composite), generation {}",
            self.policy.included.len(),
            self.policy.excluded.len(),
            self.policy.composite.len(),
            self.gen
        )
    }
}
