//! Loading the documents an index read or a scan yields, and counting a range's documents
//! from the logical partitions' sizes. Reading index entries is
//! [`EntryReader`](super::indexes::entries::EntryReader)'s.

use super::{read, Container, DocPos};
use crate::store::engine::Space;
use crate::store::record::StoredItem;
use crate::store::StoreError;
use std::ops::Bound;
use std::time::{Duration, Instant};
use strata_query::pk::EpkRange;

/// What reading the index cost, for query metrics and charges.
#[derive(Debug, Default, Clone, Copy)]
pub struct IndexStats {
    /// Index entries read.
    pub entries: u64,
    pub lookup_time: Duration,
}

impl IndexStats {
    pub fn add(&mut self, o: &IndexStats) {
        self.entries += o.entries;
        self.lookup_time += o.lookup_time;
    }
}

pub(super) const CHUNK: usize = 1024;

/// Whether an EPK (hex) lies in `range` (byte order, as item scans).
pub(super) fn in_range(epk: &str, range: &EpkRange) -> bool {
    let above_min = epk >= range.min.as_str();
    let below_max = range.max.as_str() >= "FF" || epk < range.max.as_str();
    above_min && below_max
}

impl Container {
    /// The items of `keys` read ahead in one round trip when the store is remote; nothing on a
    /// local store, whose callers read each key when they reach it, so a walk that stops early
    /// reads no more than it visits.
    pub(super) fn prefetch(
        &self,
        keys: &[Vec<u8>],
    ) -> Result<Vec<Option<bytes::Bytes>>, StoreError> {
        if !self.engine.is_remote() {
            return Ok(Vec::new());
        }
        Ok(self.engine.get_many(Space::Items, keys)?)
    }

    /// Documents in the physical partitions overlapping `range`.
    pub(super) fn partition_count(&self, range: &EpkRange) -> u64 {
        read(&self.map)
            .overlapping(range)
            .iter()
            .map(|r| r.count)
            .sum()
    }

    /// How many documents `range` holds, from the logical partitions' sizes (no documents
    /// read). Counts items whose TTL expired but that are not purged yet, so callers only ask
    /// when TTL is off.
    pub fn stored_count(
        &self,
        range: &EpkRange,
        stats: &mut IndexStats,
    ) -> Result<u64, StoreError> {
        let started = Instant::now();
        let (lo, hi) = self.key_bounds(range);
        let mut n = 0u64;
        let mut cursor = lo.clone();
        let mut first = true;
        loop {
            let start = if first {
                Bound::Included(&cursor[..])
            } else {
                Bound::Excluded(&cursor[..])
            };
            let chunk = self.engine.scan(
                Space::Partitions,
                start,
                Bound::Excluded(&hi[..]),
                CHUNK,
                false,
            )?;
            stats.entries += chunk.len() as u64;
            for (_, v) in &chunk {
                n += super::decode_lp(v).1;
            }
            match chunk.last() {
                Some((k, _)) if chunk.len() == CHUNK => {
                    cursor = k.clone();
                    first = false;
                }
                _ => break,
            }
        }
        stats.lookup_time += started.elapsed();
        Ok(n)
    }

    /// The id of the document at `pos` (its key holds it).
    pub fn doc_id<'a>(&self, pos: &'a DocPos) -> &'a str {
        pos.parts(self.codec).1
    }

    /// The live version of the item at `key` (an index entry's document), if any.
    pub fn load_item(&self, pos: &DocPos) -> Result<Option<StoredItem>, StoreError> {
        let raw = self.engine.get(Space::Items, &pos.0)?;
        self.live_item(raw)
    }

    /// [`Container::load_item`] for several positions: one round trip on a remote store.
    pub fn load_items(&self, pos: &[DocPos]) -> Result<Vec<Option<StoredItem>>, StoreError> {
        if !self.engine.is_remote() {
            return pos.iter().map(|p| self.load_item(p)).collect();
        }
        let keys: Vec<Vec<u8>> = pos.iter().map(|p| p.0.clone()).collect();
        self.engine
            .get_many(Space::Items, &keys)?
            .into_iter()
            .map(|raw| self.live_item(raw))
            .collect()
    }

    /// The values at `keys` in `space`: one round trip on a remote store.
    pub(in crate::store) fn get_all(
        &self,
        space: Space,
        keys: &[Vec<u8>],
    ) -> Result<Vec<Option<bytes::Bytes>>, StoreError> {
        if self.engine.is_remote() {
            return Ok(self.engine.get_many(space, keys)?);
        }
        keys.iter()
            .map(|k| Ok(self.engine.get(space, k)?))
            .collect()
    }

    /// Whether documents are read from this process's own store (not over the network):
    /// only then may a short read run on the async runtime's thread.
    pub fn reads_locally(&self) -> bool {
        !self.engine.is_remote()
    }

    /// How many index candidates a walk loads at once: one at a time on a local store (a
    /// walk that stops early reads no more than it visits), growing batches on a remote one
    /// (a round trip costs as much as many rows).
    pub fn load_batch(&self, loaded: usize) -> usize {
        if self.engine.is_remote() {
            (loaded + 8).min(256)
        } else {
            1
        }
    }

    fn live_item(&self, raw: Option<bytes::Bytes>) -> Result<Option<StoredItem>, StoreError> {
        let Some(raw) = raw else {
            return Ok(None);
        };
        let item = StoredItem::decode(raw)
            .ok_or_else(|| StoreError::Corrupt("an item has an unreadable record".to_string()))?;
        if item.is_expired(self.default_ttl(), crate::store::catalog::now_secs()) {
            return Ok(None);
        }
        Ok(Some(item))
    }

    /// Documents stored in `range` (expired or not).
    pub(super) fn count_in(
        &self,
        range: &EpkRange,
        stats: &mut IndexStats,
    ) -> Result<u64, StoreError> {
        let map = read(&self.map);
        let r = &map.ranges[map.index_of(&range.min)];
        if r.rec.min == range.min && r.rec.max == range.max {
            return Ok(r.count);
        }
        drop(map);
        self.stored_count(range, stats)
    }
}
