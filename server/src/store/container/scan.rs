//! Reading a container's items in key order: through the item directory, or the items
//! themselves where few superseded versions lie among them (see [`super::settled`]).

use super::*;

impl Container {
    /// The id of the item of logical partition `epk` whose `_rid` carries `doc_seq` (rid-based
    /// links address items by `_rid`; there is no rid index, so this scans the one logical
    /// partition the request names).
    pub fn id_by_doc_seq(&self, epk: &str, doc_seq: u64) -> Result<Option<String>, StoreError> {
        let start = self.codec.item_key(self.cid, epk, "");
        let end = crate::store::engine::prefix_end(&start).unwrap_or_default();
        let mut found = None;
        let codec = self.codec;
        self.walk(&start, &end, None, &mut |k, item| {
            if item.doc_seq == doc_seq {
                found = codec.parse_item_key(&k).map(|(_, _, id)| id.to_string());
                return false;
            }
            true
        })?;
        Ok(found)
    }

    /// Reads up to `limit` live items with EPK in `range`, in key order, starting after the
    /// item key `after` (exclusive) when given.
    pub fn scan_items(
        &self,
        range: &EpkRange,
        after: Option<&DocPos>,
        limit: usize,
    ) -> Result<Vec<(DocPos, StoredItem)>, StoreError> {
        let (start, end) = self.key_bounds(range);
        let default_ttl = self.default_ttl();
        let now = catalog::now_secs();
        let mut out = Vec::with_capacity(limit.min(256));
        if limit == 0 {
            return Ok(out);
        }
        let after = after.map(|p| &p.0[..]);
        let keep = |k: Vec<u8>, item: StoredItem, out: &mut Vec<(DocPos, StoredItem)>| {
            if !item.is_expired(default_ttl, now) {
                out.push((DocPos(k), item));
            }
            out.len() < limit
        };
        if !self.is_logical_partition(range) {
            self.walk(&start, &end, after, &mut |k, item| keep(k, item, &mut out))?;
            return Ok(out);
        }
        // One logical partition: from the cache of hot ones (see `hot`), or read whole from
        // the store and offered to it (a small partition; past the cache's bound, only what
        // the page needs).
        let ticket = match self.hot.get_partition(&start) {
            Ok(members) => {
                let from = after.map_or(0, |a| members.partition_point(|(k, _)| &k[..] <= a));
                for (k, item) in &members[from..] {
                    if !keep(k.to_vec(), item.clone(), &mut out) {
                        break;
                    }
                }
                return Ok(out);
            }
            Err(ticket) => ticket,
        };
        let mut whole = after.is_none().then(Vec::new);
        let mut bytes = 0;
        self.walk(&start, &end, after, &mut |k, item| {
            if let Some(members) = &mut whole {
                bytes += hot::item_cost(&k, &item);
                if members.len() < hot::PARTITION_ITEMS && bytes <= hot::PARTITION_BYTES {
                    members.push((k.clone(), item.clone()));
                } else {
                    whole = None;
                }
            }
            let more = out.len() < limit && keep(k, item, &mut out);
            more || whole.is_some()
        })?;
        if let Some(members) = whole {
            self.hot.offer_partition(ticket, &start, &members);
        }
        Ok(out)
    }

    /// Whether the cache of hot items holds logical partition `epk` whole.
    #[cfg(test)]
    pub(in crate::store) fn partition_is_hot(&self, epk: &str) -> bool {
        let key = self.codec.partition_key(self.cid, epk);
        self.hot.get_partition(&key).is_ok()
    }

    /// Whether `range` is the one-point range of a full partition key (`[E, E+1)`) whose
    /// items are all the items with keys in it, so that a write to any of them names the
    /// partition: its EPK has the length every item's has (hash version 2, hierarchical or
    /// not; a legacy hash's EPKs vary in length, a longer one could fall in the range, and a
    /// container without a partition key gives its items the empty EPK) and is spelled as
    /// items' EPKs are (upper-case hex).
    fn is_logical_partition(&self, range: &EpkRange) -> bool {
        use strata_query::pk::PartitionKind;
        let fixed = match (self.pk.kind, self.pk.version) {
            _ if self.pk.system_key => return false,
            (PartitionKind::MultiHash, _) | (PartitionKind::Hash, 2) => 32 * self.pk.paths.len(),
            _ => return false,
        };
        let upper_hex = |d: u8| d.is_ascii_digit() || (b'A'..=b'F').contains(&d);
        range.min.len() == fixed
            && range.max.len() == fixed
            && range.min.bytes().all(upper_hex)
            && strata_query::pk::epk::is_increment(&range.min, &range.max)
    }

    /// Visits the items with keys in `[start, end)` (after `after`, when given) in key order
    /// until `visit` returns false: read in one pass where recent writes may have left few
    /// superseded versions (see [`settled`]), else through the directory, which
    /// names them, each read by key (see [`Space::Directory`] for why; an item deleted
    /// between the two reads is skipped).
    pub(super) fn walk(
        &self,
        start: &[u8],
        end: &[u8],
        after: Option<&[u8]>,
        visit: &mut dyn FnMut(Vec<u8>, StoredItem) -> bool,
    ) -> Result<(), StoreError> {
        let mut cursor: Vec<u8> = match after {
            Some(a) if a >= start => a.to_vec(),
            _ => Vec::new(),
        };
        if self.scans_items(start, end) {
            return self.walk_items(start, end, cursor, visit);
        }
        loop {
            let lower = resume(start, &cursor);
            let chunk =
                self.engine
                    .scan(Space::Directory, lower, Bound::Excluded(end), CHUNK, false)?;
            let exhausted = chunk.len() < CHUNK;
            let keys: Vec<Vec<u8>> = chunk.into_iter().map(|(k, _)| k).collect();
            let mut batch = self.prefetch(&keys)?.into_iter();
            for k in keys {
                cursor.clone_from(&k);
                let found = batch
                    .next()
                    .map_or_else(|| self.engine.get(Space::Items, &k), Ok)?;
                let Some(raw) = found else {
                    continue;
                };
                if !decoded(k, raw, visit)? {
                    return Ok(());
                }
            }
            if exhausted {
                return Ok(());
            }
        }
    }

    /// Whether a scan of the item keys `[start, end)` reads the items themselves: when recent
    /// writes left few superseded versions there (see [`settled`]). A store a round trip
    /// away (PostgreSQL) reads through the directory as before: its pages of items would
    /// bring up to 512 whole documents at once, and that path was not measured.
    pub(in crate::store) fn scans_items(&self, start: &[u8], end: &[u8]) -> bool {
        if self.engine.is_remote() {
            return false;
        }
        let unsettled_from = self.engine.unsettled_from(Space::Items);
        self.superseded.within(start, end, unsettled_from) <= settled::MAX_SUPERSEDED
    }

    /// [`Container::walk`] over the items themselves, after `cursor` (when not empty).
    fn walk_items(
        &self,
        start: &[u8],
        end: &[u8],
        mut cursor: Vec<u8>,
        visit: &mut dyn FnMut(Vec<u8>, StoredItem) -> bool,
    ) -> Result<(), StoreError> {
        loop {
            let lower = resume(start, &cursor);
            // Read as visited (a chunk of large documents is not held at once), and begun
            // again every chunk, so that a long scan does not keep the store's current
            // tables and memtables from being replaced meanwhile.
            let mut seen = 0;
            for entry in (self.engine.range(Space::Items, lower, Bound::Excluded(end))).take(CHUNK)
            {
                let (k, raw) = entry?;
                seen += 1;
                cursor.clone_from(&k);
                if !decoded(k, raw, visit)? {
                    return Ok(());
                }
            }
            if seen < CHUNK {
                return Ok(());
            }
        }
    }

    /// Up to `limit` live documents with EPK in `range` (only those of EPK `exact`, when
    /// given), in key order, after position `after`. Positions are opaque to callers; they
    /// travel in continuation tokens as [`DocPos::to_hex`].
    pub fn scan_docs(
        &self,
        range: &EpkRange,
        exact: Option<&str>,
        after: Option<&DocPos>,
        limit: usize,
    ) -> Result<Vec<(DocPos, StoredItem)>, StoreError> {
        let mut rows = self.scan_items(range, after, limit)?;
        if let Some(e) = exact {
            rows.retain(|(p, _)| p.parts(self.codec).0 == e);
        }
        Ok(rows)
    }
}

/// Keys read at a time (the directory's) or from one iterator (the items').
const CHUNK: usize = 256;

/// Where a scan of `[start, …)` goes on: after `cursor`, the last key read, if any.
fn resume<'a>(start: &'a [u8], cursor: &'a [u8]) -> Bound<&'a [u8]> {
    if cursor.is_empty() {
        Bound::Included(start)
    } else {
        Bound::Excluded(cursor)
    }
}

/// Decodes the stored item `raw` of key `k` and visits it: whether to go on.
fn decoded(
    k: Vec<u8>,
    raw: Bytes,
    visit: &mut dyn FnMut(Vec<u8>, StoredItem) -> bool,
) -> Result<bool, StoreError> {
    let item = StoredItem::decode(raw)
        .ok_or_else(|| StoreError::Corrupt("an item has an unreadable record".to_string()))?;
    Ok(visit(k, item))
}
