//! The range index of the indexing policy: one entry per indexed scalar (array elements under
//! `[]`) and one type marker per indexed array or object, keyed by path and term (see
//! [`crate::store::index`]). Equality, range, `ORDER BY` and composite lookups read it.

use super::{EntryIndex, IndexKind, Text};
use crate::store::StoreError;
use serde_json::Value;
use std::sync::Arc;
use strata_query::index::term::{self, Entry};
use strata_query::index::IndexingPolicy;

pub struct RangeIndex {
    policy: Arc<IndexingPolicy>,
    gen: u16,
}

impl RangeIndex {
    pub fn new(policy: Arc<IndexingPolicy>, gen: u16) -> Self {
        Self { policy, gen }
    }
}

impl EntryIndex for RangeIndex {
    fn kind(&self) -> IndexKind {
        IndexKind::Range
    }

    fn gen(&self) -> u16 {
        self.gen
    }

    fn entries(&self, d: &Value) -> Vec<Entry> {
        term::entries(d, &self.policy)
    }

    /// Read from the stored text, without parsing it into a document.
    fn stored_entries(&self, v: &Text<'_>) -> Result<Vec<Entry>, StoreError> {
        term::entries_of_json(v.json(), &self.policy).map_err(super::corrupt)
    }

    fn by_path(&self) -> Option<&IndexingPolicy> {
        Some(&self.policy)
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
