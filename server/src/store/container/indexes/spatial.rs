//! The spatial index: the grid cells covering each geometry's bounding box at every level,
//! under synthetic paths of their own beside the range index (see
//! `strata_query::index::spatial`). `ST_DISTANCE`, `ST_WITHIN` and `ST_INTERSECTS` filters read
//! the cells their region covers.

use super::{move_entries, put_entries, sorted, DocRef, IndexKind, IndexMaintainer, Txn};
use crate::store::StoreError;
use serde_json::Value;
use strata_query::index::policy::Seg;

pub struct SpatialIndex {
    paths: Vec<Vec<Seg>>,
    gen: u16,
}

impl SpatialIndex {
    pub fn new(paths: Vec<Vec<Seg>>, gen: u16) -> Self {
        Self { paths, gen }
    }

    fn entries(&self, d: Option<&Value>) -> Vec<strata_query::index::term::Entry> {
        let paths = self.paths.iter().map(Vec::as_slice);
        d.map(|d| sorted(strata_query::index::spatial::entries(d, paths)))
            .unwrap_or_default()
    }
}

impl IndexMaintainer for SpatialIndex {
    fn kind(&self) -> IndexKind {
        IndexKind::Spatial
    }

    fn update(
        &self,
        t: &mut Txn<'_>,
        doc: DocRef<'_>,
        old: Option<&Value>,
        new: Option<&Value>,
    ) -> Result<(), StoreError> {
        move_entries(t, self.gen, doc, &self.entries(old), &self.entries(new));
        Ok(())
    }

    fn backfill(&self, t: &mut Txn<'_>, doc: DocRef<'_>, d: &Value) -> Result<(), StoreError> {
        put_entries(t, self.gen, doc, &self.entries(Some(d)));
        Ok(())
    }

    fn explain(&self) -> String {
        format!(
            "spatial cells on {} path(s), generation {}",
            self.paths.len(),
            self.gen
        )
    }
}
