//! The spatial index: the grid cells covering each geometry's bounding box at every level,
//! under synthetic paths of their own beside the range index (see
//! `strata_query::index::spatial`). `ST_DISTANCE`, `ST_WITHIN` and `ST_INTERSECTS` filters read
//! the cells their region covers.

use super::{sorted, EntryIndex, IndexKind};
use serde_json::Value;
use strata_query::index::policy::Seg;
use strata_query::index::term::Entry;

pub struct SpatialIndex {
    paths: Vec<Vec<Seg>>,
    gen: u16,
}

impl SpatialIndex {
    pub fn new(paths: Vec<Vec<Seg>>, gen: u16) -> Self {
        Self { paths, gen }
    }
}

impl EntryIndex for SpatialIndex {
    fn kind(&self) -> IndexKind {
        IndexKind::Spatial
    }

    fn gen(&self) -> u16 {
        self.gen
    }

    fn entries(&self, d: &Value) -> Vec<Entry> {
        let paths = self.paths.iter().map(Vec::as_slice);
        sorted(strata_query::index::spatial::entries(d, paths))
    }

    fn explain(&self) -> String {
        format!(
            "spatial cells on {} path(s), generation {}",
            self.paths.len(),
            self.gen
        )
    }
}
