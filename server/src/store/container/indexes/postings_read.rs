//! Reading a stem's postings for a query: the container's decoded list from memory while no
//! write has touched the stem ([`super::postings`]), else read from the pending batch and the
//! segments ([`super::text_pending`], [`super::text_segments`]).

use super::entries::EntryReader;
use super::postings::{bucket, Gathered, Key, Postings};
use super::text_segments::{block_key, decode_block, settle};
use crate::store::container::lookup::IndexStats;
use crate::store::engine::Space;
use crate::store::index::path_id_of;
use crate::store::keys;
use crate::store::StoreError;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use strata_query::index::fulltext::segments_path;
use strata_query::index::{Seg, Span};
use strata_query::pk::EpkRange;

impl EntryReader<'_> {
    /// The postings under the full-text path `path` in a stem's `span`, over the whole
    /// container, from memory or read now; `stats` counts every entry as read either way.
    /// `None` while the index is rebuilt, or for a span that is not one stem's.
    pub fn postings(
        &self,
        path: &[Seg],
        span: &Span,
        stats: &mut IndexStats,
    ) -> Result<Option<Arc<Postings>>, StoreError> {
        // A stem's span is `stem \x01` and everything after it: one `\x01`, at its end.
        let stem_span =
            span.lo.last() == Some(&1) && span.lo.iter().filter(|&&b| b == 1).count() == 1;
        if !self.state.ready || !stem_span {
            return Ok(None);
        }
        let (key, version, held) = self.held(path, span);
        if let Some(p) = held {
            stats.entries += p.len() as u64;
            return Ok(Some(p));
        }
        let mut p = Gathered::default();
        if !self.read_postings(path, span, &[EpkRange::full()], &mut p, stats)? {
            return Ok(None);
        }
        let p = Arc::new(p.finish());
        self.c.postings.keep(key, version, Arc::clone(&p));
        Ok(Some(p))
    }

    /// The cache's key for a stem's `span` under `path`, the version of its bucket — read
    /// before anything else, so a write that commits from here on moves it past this unless
    /// it patches a held list — and the list held, if any.
    fn held(&self, path: &[Seg], span: &Span) -> (Key, u64, Option<Arc<Postings>>) {
        let pid = path_id_of(path);
        let cache = &self.c.postings;
        let version = cache.versions[bucket(&pid, &span.lo)].load(Ordering::Acquire);
        let key = (self.state.gen, pid, span.lo.clone());
        let held = cache.get(&key);
        (key, version, held)
    }
}

impl EntryReader<'_> {
    /// How many postings `stem` has under the full-text path `path`, if its list is in memory
    /// and current: what a query asks before choosing to rank on the async runtime's thread
    /// (see `exec::ranked::quick`) — nothing is read.
    pub fn cached_len(&self, path: &[Seg], stem: &str) -> Option<usize> {
        if !self.state.ready {
            return None;
        }
        let span = strata_query::index::fulltext::stem_span(stem);
        self.held(path, &span).2.map(|p| p.len())
    }

    /// The postings of `stem` under the full-text path `path` in `ranges` (physical
    /// partitions, or parts of them): the container's list in memory, filtered to the ranges
    /// unless they cover it all; else read from the entries. `None` while the index is
    /// rebuilt.
    pub fn postings_in(
        &self,
        path: &[Seg],
        stem: &str,
        ranges: &[EpkRange],
        stats: &mut IndexStats,
    ) -> Result<Option<Arc<Postings>>, StoreError> {
        let span = strata_query::index::fulltext::stem_span(stem);
        if let Some(all) = self.postings(path, &span, stats)? {
            if covers_all(ranges) {
                return Ok(Some(all));
            }
            let bounds: Vec<(Vec<u8>, Vec<u8>)> =
                ranges.iter().map(|r| self.c.key_bounds(r)).collect();
            let inside = |k: &[u8]| {
                bounds
                    .iter()
                    .any(|(lo, hi)| k >= lo.as_slice() && k < hi.as_slice())
            };
            return Ok(Some(Arc::new(all.filtered(inside))));
        }
        let mut p = Gathered::default();
        // A stem's postings of every partition are one key range (ordered by term, then
        // document): ranges that follow one another are read in one walk, not one each.
        let contiguous = ranges.windows(2).all(|w| w[0].max == w[1].min);
        let joined;
        let ranges = match (ranges.first(), ranges.last()) {
            (Some(a), Some(b)) if contiguous => {
                joined = [EpkRange::new(a.min.clone(), b.max.clone())];
                &joined[..]
            }
            _ => ranges,
        };
        if !self.read_postings(path, &span, ranges, &mut p, stats)? {
            return Ok(None);
        }
        Ok(Some(Arc::new(p.finish())))
    }

    /// Appends the postings of a stem's `span` under the postings path `path` in each of
    /// `ranges` to `p`: the pending ones and the segments' blocks, each version once, and
    /// only versions the change feed still holds (its entry names the document). False while
    /// the index is rebuilt, or for a path that is not a full-text one.
    fn read_postings(
        &self,
        path: &[Seg],
        span: &Span,
        ranges: &[EpkRange],
        p: &mut Gathered,
        stats: &mut IndexStats,
    ) -> Result<bool, StoreError> {
        let Some(text) = strata_query::index::fulltext::text_path(path) else {
            return Ok(false);
        };
        let key = (self.state.gen, path_id_of(&segments_path(text)));
        let (c, cid) = (self.c, self.c.cid);
        // A merge that lands between the snapshot and the reads deletes blocks the snapshot
        // names: read again then (its segment holds them).
        let mut list = loop {
            let (mut list, segments, version) = c.text.snapshot(key, &span.lo);
            let blocks: Vec<Vec<u8>> = segments
                .iter()
                .map(|seq| block_key(cid, key, *seq, &span.lo))
                .collect();
            for b in c.get_all(Space::Index, &blocks)?.into_iter().flatten() {
                if decode_block(&b, &mut list).is_none() {
                    return Err(StoreError::Corrupt(
                        "a full-text segment has an unreadable block".into(),
                    ));
                }
            }
            if c.text.version(key) == version {
                break list;
            }
        };
        settle(&mut list, |_| false);
        let feed: Vec<Vec<u8>> = list
            .iter()
            .map(|x| keys::change_key(cid, x.pos.0, x.pos.1))
            .collect();
        let docs = c.get_all(Space::Feed, &feed)?;
        let bounds: Vec<(Vec<u8>, Vec<u8>)> = if covers_all(ranges) {
            Vec::new()
        } else {
            ranges.iter().map(|r| c.key_bounds(r)).collect()
        };
        let mut item = keys::container_prefix(cid);
        for (posting, doc) in list.iter().zip(docs) {
            stats.entries += 1;
            let Some(suffix) = doc else {
                continue;
            };
            item.truncate(4);
            item.extend_from_slice(&suffix);
            let inside = bounds.is_empty()
                || bounds.iter().any(|(lo, hi)| {
                    item.as_slice() >= lo.as_slice() && item.as_slice() < hi.as_slice()
                });
            if inside {
                p.push(&item, (posting.tf, posting.dl));
            }
        }
        Ok(true)
    }
}

/// Whether `ranges` (in EPK order) are the whole key space, one after another.
fn covers_all(ranges: &[EpkRange]) -> bool {
    let contiguous = ranges.windows(2).all(|w| w[0].max == w[1].min);
    match (ranges.first(), ranges.last()) {
        (Some(a), Some(b)) => contiguous && a.min.is_empty() && b.max.as_str() >= "FF",
        _ => false,
    }
}
