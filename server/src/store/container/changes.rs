//! Reading the change feed (latest-version mode) of a container: every write moves the item's
//! entry in the feed index to the write's LSN, so reading the index in LSN order yields each
//! item once, in its latest version, in modification order.

use super::Container;
use crate::store::engine::Space;
use crate::store::record::StoredItem;
use crate::store::{catalog, keys, StoreError};
use bytes::Bytes;
use std::ops::Bound;
use strata_query::pk::EpkRange;

/// Takes (or passes over) one log entry: its LSN, key and value; true when taken.
pub(in crate::store) type LogVisitor<'a> =
    dyn FnMut(u64, &[u8], &Bytes) -> Result<bool, StoreError> + 'a;

/// One page of changes.
pub struct Changes {
    /// The items, each with the LSN of its latest write, in LSN order.
    pub items: Vec<(u64, StoredItem)>,
    /// The LSN of the last item returned.
    pub last: Option<u64>,
    /// Whether the feed was read up to the requested LSN (else the page filled first).
    pub exhausted: bool,
}

impl Container {
    /// Up to `limit` items of `range` (only EPK `exact`, when given) written after LSN `after`
    /// and at most at `upto`, skipping expired items and, with `since`, those last modified
    /// before that time (seconds).
    pub fn changes(
        &self,
        range: &EpkRange,
        exact: Option<&str>,
        after: u64,
        upto: u64,
        since: Option<u64>,
        limit: usize,
    ) -> Result<Changes, StoreError> {
        let mut out = Changes {
            items: Vec::new(),
            last: None,
            exhausted: true,
        };
        if range.is_empty() || after >= upto {
            return Ok(out);
        }
        let default_ttl = self.default_ttl();
        let now = catalog::now_secs();
        let (last, exhausted) =
            self.walk_log(Space::Feed, after, upto, limit, &mut |lsn, k, suffix| {
                let Some((epk, _)) = self.codec.parse_doc(suffix) else {
                    return Ok(false);
                };
                if !range.contains(&epk) || exact.is_some_and(|e| e != epk) {
                    return Ok(false);
                }
                let Some(item) = self.feed_item(suffix)? else {
                    return Ok(false);
                };
                if item.feed_key(self.cid) != k
                    || item.is_expired(default_ttl, now)
                    || since.is_some_and(|s| item.ts < s)
                {
                    return Ok(false);
                }
                out.items.push((lsn, item));
                Ok(true)
            })?;
        out.last = last;
        out.exhausted = exhausted;
        Ok(out)
    }

    /// The stored item a feed entry names (by its item key suffix), if it is still there.
    pub(in crate::store) fn feed_item(
        &self,
        suffix: &[u8],
    ) -> Result<Option<StoredItem>, StoreError> {
        let mut key = keys::container_prefix(self.cid);
        key.extend_from_slice(suffix);
        Ok(self
            .engine
            .get(Space::Items, &key)?
            .and_then(StoredItem::decode))
    }

    /// Walks an LSN-keyed log (`Space::Feed` or `Space::History`: `cid | lsn` for the first
    /// change of a transaction, `cid | lsn | n` for the others) over the transactions after
    /// `after` up to `upto`, in order, handing each entry to `visit`, which says whether it
    /// took it. Once `limit` entries were taken the walk stops at the next transaction: a page
    /// never ends inside one, since positions are LSNs. Returns the LSN of the last entry
    /// taken and whether the log was read to `upto`.
    pub(in crate::store) fn walk_log(
        &self,
        space: Space,
        after: u64,
        upto: u64,
        limit: usize,
        visit: &mut LogVisitor<'_>,
    ) -> Result<(Option<u64>, bool), StoreError> {
        // Whole transactions: from the first change after `after` to the last one at `upto`.
        let mut lower = keys::feed_key(self.cid, after.saturating_add(1));
        let upper = keys::feed_key(self.cid, upto.saturating_add(1));
        let (mut taken, mut last) = (0usize, None);
        let mut first = true;
        loop {
            let start = if first {
                Bound::Included(&lower[..])
            } else {
                Bound::Excluded(&lower[..])
            };
            let chunk = self
                .engine
                .scan(space, start, Bound::Excluded(&upper[..]), 1024, false)?;
            let Some((end, _)) = chunk.last() else {
                return Ok((last, true));
            };
            let end = end.clone();
            for (k, v) in &chunk {
                let Some((_, lsn)) = keys::parse_feed_key(k) else {
                    continue;
                };
                if taken >= limit && last != Some(lsn) {
                    return Ok((last, false));
                }
                if visit(lsn, k, v)? {
                    taken += 1;
                    last = Some(lsn);
                }
            }
            lower = end;
            first = false;
        }
    }
}
