//! The container's view of its partition map: which physical partition holds a key, the
//! partitions a range overlaps, a consistent snapshot for the partitions view and the query
//! planner, and the per-partition query counters.

use super::{read, Container, RangeState};
use crate::store::partition_map::{PartitionsView, RangeSnapshot};
use std::sync::atomic::Ordering;
use strata_query::pk::EpkRange;

impl Container {
    /// Id of the physical partition holding `epk`.
    pub fn range_id_of(&self, epk: &str) -> u32 {
        let map = read(&self.map);
        map.ranges[map.index_of(epk)].rec.id
    }

    /// How many physical partitions the container has now.
    pub fn physical_partitions(&self) -> usize {
        read(&self.map).ranges.len()
    }

    /// Splits `ranges` along physical partition boundaries: the units of parallel work of a
    /// query.
    pub fn split_by_partition(&self, ranges: &[EpkRange]) -> Vec<EpkRange> {
        let map = read(&self.map);
        let mut out = Vec::new();
        for r in ranges {
            for s in map.overlapping(r) {
                if let Some(x) = s.epk_range().intersect(r) {
                    out.push(x);
                }
            }
        }
        out
    }

    pub fn throughput_split_pending(&self) -> bool {
        self.needs_split() && read(&self.map).ranges.len() < self.partitions_for_throughput()
    }

    /// A consistent view of the physical partitions, in EPK order, with the map's generation
    /// (which changes with every split).
    pub fn partitions(&self) -> PartitionsView {
        let map = read(&self.map);
        let snapshot = |r: &RangeState| RangeSnapshot {
            splitting: map.splitting.contains(&r.rec.id),
            ..r.snapshot()
        };
        PartitionsView {
            generation: map.generation,
            ranges: map.ranges.iter().map(snapshot).collect(),
        }
    }

    /// The live document count of the physical partition whose range is exactly `r`, if one
    /// is (BM25's document count per ranked query, without a snapshot of the whole map).
    pub fn count_of_partition(&self, r: &EpkRange) -> Option<u64> {
        let map = read(&self.map);
        let found = map
            .ranges
            .iter()
            .find(|s| s.rec.min == r.min && s.rec.max == r.max);
        found.map(|s| s.count)
    }

    /// The EPK range of a live physical partition; `None` once it split (or if it never was).
    pub fn range_of_id(&self, id: u32) -> Option<EpkRange> {
        read(&self.map).by_id(id).map(RangeState::epk_range)
    }

    /// Ids of the physical partitions overlapping `range`, in EPK order.
    pub fn ranges_overlapping(&self, range: &EpkRange) -> Vec<u32> {
        read(&self.map)
            .overlapping(range)
            .iter()
            .map(|r| r.rec.id)
            .collect()
    }

    /// Counts one query on each of these physical partitions (for the partitions view).
    pub fn count_queries(&self, ids: &[u32]) {
        let map = read(&self.map);
        for id in ids {
            if let Some(r) = map.by_id(*id) {
                r.queries.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
