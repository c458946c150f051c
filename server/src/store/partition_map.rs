//! A container's partition map: its physical partitions (partition key ranges) in EPK order,
//! with the statistics splits and the partitions view read.

use super::catalog::RangeRecord;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use strata_query::pk::EpkRange;

/// One physical partition (partition key range) and what we know about it.
#[derive(Debug)]
pub struct RangeState {
    pub rec: RangeRecord,
    pub bytes: u64,
    pub count: u64,
    /// LSN of the last write that landed in this range.
    pub lsn: u64,
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub queries: AtomicU64,
    /// Item count at which this range was found to hold one logical partition (cannot
    /// split); `u64::MAX` when unknown.
    pub unsplittable_at: AtomicU64,
}

impl RangeState {
    pub fn new(rec: RangeRecord, lsn: u64) -> Self {
        Self {
            rec,
            bytes: 0,
            count: 0,
            lsn,
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            queries: AtomicU64::new(0),
            unsplittable_at: AtomicU64::new(u64::MAX),
        }
    }

    pub fn epk_range(&self) -> EpkRange {
        EpkRange::new(self.rec.min.clone(), self.rec.max.clone())
    }
}

/// A copy of one partition's state, for reporting.
#[derive(Debug, Clone)]
pub struct RangeSnapshot {
    pub id: u32,
    pub range: EpkRange,
    pub parents: Vec<String>,
    pub count: u64,
    pub bytes: u64,
    pub lsn: u64,
    pub reads: u64,
    pub writes: u64,
    pub queries: u64,
    /// Announced as splitting (see [`PartitionMap::splitting`]).
    pub splitting: bool,
}

impl RangeState {
    pub fn snapshot(&self) -> RangeSnapshot {
        RangeSnapshot {
            id: self.rec.id,
            range: self.epk_range(),
            parents: self.rec.parents.clone(),
            count: self.count,
            bytes: self.bytes,
            lsn: self.lsn,
            reads: self.reads.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            queries: self.queries.load(Ordering::Relaxed),
            splitting: false,
        }
    }
}

/// The physical partitions of a container at one moment.
#[derive(Debug, Clone)]
pub struct PartitionsView {
    pub generation: u64,
    pub ranges: Vec<RangeSnapshot>,
}

/// The container's physical partitions, sorted by `min`, covering `["", "FF")` without gaps.
#[derive(Debug)]
pub struct PartitionMap {
    pub ranges: Vec<RangeState>,
    pub next_range_id: u32,
    pub generation: u64,
    /// Ids of ranges that were split away, with their children (for 410 and lineage).
    pub retired: HashMap<u32, Vec<u32>>,
    /// Ids of ranges being replaced by a split or merge asked for by name (410/1007).
    pub swapping: Vec<u32>,
    /// Ids of ranges a throughput split has announced and not yet made: the partition key
    /// range feed reports them with `"status": "splitting"`, as the service does while a
    /// scale-up's split is under way (they keep serving).
    pub splitting: Vec<u32>,
}

impl PartitionMap {
    /// Index of the range holding `epk`.
    pub fn index_of(&self, epk: &str) -> usize {
        // ranges[i].min <= epk < ranges[i].max; the first range starts at "".
        let mut lo = 0;
        let mut hi = self.ranges.len();
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if strata_query::pk::epk::cmp_epk(&self.ranges[mid].rec.min, epk).is_le() {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }

    pub fn by_id(&self, id: u32) -> Option<&RangeState> {
        self.ranges.iter().find(|r| r.rec.id == id)
    }

    /// Ranges overlapping `r`, in EPK order.
    pub fn overlapping(&self, r: &EpkRange) -> Vec<&RangeState> {
        self.ranges
            .iter()
            .filter(|s| strata_query::pk::epk::overlap(&s.rec.min, &s.rec.max, &r.min, &r.max))
            .collect()
    }
}
