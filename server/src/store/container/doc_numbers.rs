//! Document numbers: the 8 bytes of a document's `_rid` after its container's, and what
//! DOCUMENTID returns.
//!
//! The service numbers documents per physical partition: DOCUMENTID "returns an integer value
//! that is unique only within a single physical partition"
//! (https://learn.microsoft.com/en-us/cosmos-db/query/documentid), while `_rid`s stay unique
//! in the container (the SDKs coalesce hybrid search rows by `_rid` across partitions, and
//! order ties by it). So a number is the physical partition's 16-bit prefix above a 48-bit
//! count the partition keeps: little-endian in the `_rid`, the count's low byte comes first,
//! and documents sort by count, then by partition — the order the SDKs' tie-breaks see.
//!
//! A partition's count is the last count it gave out, persisted with the transaction that
//! gave it (one key per partition that created documents). A partition without one starts
//! after the highest count of the partitions it was split or merged from, whose documents it
//! holds, or else after the container's floor (0, or the container-wide counter of a store
//! from before per-partition counts), so counts stay unique within every physical partition.

use super::super::engine::{Engine, Space, Tx};
use super::super::{keys, StoreError};
use std::collections::HashMap;
use std::ops::Bound;

/// Bits of a document number that count documents; the bits above hold the prefix.
const COUNT_BITS: u32 = 48;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;

/// The prefix the documents created in physical partition `range_id` carry (the low 16 bits
/// of its id; partitions whose ids share them share a count, so numbers stay unique).
pub fn prefix_of(range_id: u32) -> u16 {
    (range_id & 0xFFFF) as u16
}

/// The document number of the `count`th document created under `prefix`.
pub fn compose(prefix: u16, count: u64) -> u64 {
    (u64::from(prefix) << COUNT_BITS) | (count & COUNT_MASK)
}

/// The prefix and count a document number holds.
pub fn split(number: u64) -> (u16, u64) {
    ((number >> COUNT_BITS) as u16, number & COUNT_MASK)
}

/// The last count each prefix gave out.
#[derive(Debug, Default)]
pub struct DocCounts {
    last: HashMap<u16, u64>,
    /// Where a prefix without a count of its own starts after: the container-wide counter of
    /// stores from before per-partition counts (or their last LSN, which bounds every number
    /// given out before that counter existed).
    floor: u64,
}

impl DocCounts {
    /// The counts persisted for container `cid`; `lsn` is the last LSN persisted, the floor of
    /// a store that kept no counter at all.
    pub fn load(engine: &Engine, cid: u32, lsn: u64) -> Result<Self, StoreError> {
        let lo = keys::catalog_doc_seq(cid);
        let hi = super::super::engine::prefix_end(&lo).unwrap_or_default();
        let rows = engine.scan(
            Space::Catalog,
            Bound::Included(&lo[..]),
            Bound::Excluded(&hi[..]),
            usize::MAX,
            false,
        )?;
        let mut counts = DocCounts {
            last: HashMap::new(),
            floor: lsn,
        };
        for (key, value) in rows {
            let Ok(n) = <[u8; 8]>::try_from(&value[..]).map(u64::from_be_bytes) else {
                continue;
            };
            match key[lo.len()..] {
                [] => counts.floor = n,
                [a, b] => {
                    counts.last.insert(u16::from_be_bytes([a, b]), n);
                }
                _ => {}
            }
        }
        Ok(counts)
    }

    /// The last count `prefix` gave out; `ancestors` are the prefixes of the partitions the
    /// partition was split or merged from.
    pub fn last(&self, prefix: u16, ancestors: impl IntoIterator<Item = u16>) -> u64 {
        match self.last.get(&prefix) {
            Some(&n) => n,
            None => ancestors
                .into_iter()
                .filter_map(|a| self.last.get(&a).copied())
                .fold(self.floor, u64::max),
        }
    }

    /// Records counts a committed transaction gave out.
    pub fn settle(&mut self, taken: &[(u16, u64)]) {
        for &(prefix, n) in taken {
            self.last.insert(prefix, n);
        }
    }
}

/// Stages the counts a transaction gave out, with its writes.
pub fn persist(tx: &mut Tx<'_>, cid: u32, taken: &[(u16, u64)]) {
    for &(prefix, n) in taken {
        tx.put(
            Space::Catalog,
            keys::catalog_doc_count(cid, prefix),
            n.to_be_bytes().to_vec(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::{catalog, engine::Op};
    use super::*;

    #[test]
    fn numbers_sort_by_count_then_partition_in_a_rid() {
        let rid = |n: u64| catalog::doc_rid(1, 2, n);
        // The second document of partition 0 comes before the second of partition 1, both
        // after the first of either.
        let mut rids = [
            rid(compose(1, 2)),
            rid(compose(0, 2)),
            rid(compose(1, 1)),
            rid(compose(0, 1)),
        ];
        rids.sort();
        assert_eq!(
            rids,
            [
                rid(compose(0, 1)),
                rid(compose(1, 1)),
                rid(compose(0, 2)),
                rid(compose(1, 2)),
            ]
        );
        assert_eq!(split(compose(7, 13)), (7, 13));
        assert_eq!(compose(0, 13), 13);
    }

    #[test]
    fn a_partition_without_a_count_starts_after_its_ancestors() {
        let engine = Engine::memory();
        let mut counts = DocCounts::load(&engine, 4, 9).unwrap();
        assert_eq!(counts.last(0, []), 9);
        counts.settle(&[(0, 12), (3, 2)]);
        assert_eq!(
            (counts.last(0, []), counts.last(3, [0]), counts.last(5, [])),
            (12, 2, 9)
        );
        // A split's child starts after its parents.
        assert_eq!((counts.last(5, [0]), counts.last(6, [3, 1])), (12, 9));
        let _in_memory = engine
            .write(vec![
                Op::Put(
                    Space::Catalog,
                    keys::catalog_doc_seq(4),
                    0u64.to_be_bytes().to_vec(),
                ),
                Op::Put(
                    Space::Catalog,
                    keys::catalog_doc_count(4, 3),
                    5u64.to_be_bytes().to_vec(),
                ),
                Op::Put(
                    Space::Catalog,
                    keys::catalog_doc_count(5, 0),
                    50u64.to_be_bytes().to_vec(),
                ),
            ])
            .unwrap();
        let back = DocCounts::load(&engine, 4, 9).unwrap();
        assert_eq!(
            (back.last(3, []), back.last(0, []), back.last(1, [3])),
            (5, 0, 5)
        );
    }
}
