//! Reading the change feed (latest-version mode) of a container: every write moves the item's
//! entry in the feed index to the write's LSN, so reading the index in LSN order yields each
//! item once, in its latest version, in modification order.

use super::container::Container;
use super::engine::Space;
use super::item::StoredItem;
use super::{catalog, keys, StoreError};
use std::ops::Bound;
use strata_query::pk::EpkRange;

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
        let upper = keys::feed_key(self.cid, upto);
        let mut cursor = keys::feed_key(self.cid, after);
        loop {
            let chunk = self.engine.scan(
                Space::Feed,
                Bound::Excluded(&cursor[..]),
                Bound::Included(&upper[..]),
                1024,
                false,
            )?;
            if chunk.is_empty() {
                return Ok(out);
            }
            for (k, suffix) in &chunk {
                let Some((_, lsn)) = keys::parse_feed_key(k) else {
                    continue;
                };
                // A page ends between transactions, never inside one (positions are LSNs).
                if out.items.len() >= limit && out.last != Some(lsn) {
                    out.exhausted = false;
                    return Ok(out);
                }
                let Some((epk, _)) = keys::split_item_suffix(suffix) else {
                    continue;
                };
                if !range.contains(epk) || exact.is_some_and(|e| e != epk) {
                    continue;
                }
                let mut key = keys::container_prefix(self.cid);
                key.extend_from_slice(suffix);
                let Some(raw) = self.engine.get(Space::Items, &key)? else {
                    continue;
                };
                let Some(item) = StoredItem::decode(raw) else {
                    continue;
                };
                if item.feed_key(self.cid) != *k || item.is_expired(default_ttl, now) {
                    continue;
                }
                if since.is_some_and(|s| item.ts < s) {
                    continue;
                }
                out.items.push((lsn, item));
                out.last = Some(lsn);
            }
            cursor = chunk.last().map(|(k, _)| k.clone()).unwrap_or_default();
        }
    }
}
