//! Reading a stem's postings for a query: the container's decoded list from memory while no
//! write has touched the stem ([`super::postings`]), else read from the index entries.

use super::entries::EntryReader;
use super::postings::{bucket, Gathered, Key, Postings};
use crate::store::container::lookup::IndexStats;
use crate::store::index::path_id_of;
use crate::store::StoreError;
use std::sync::atomic::Ordering;
use std::sync::Arc;
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
    /// before any entry, so a write that commits from here on moves it past this — and the
    /// list held under that version, if any.
    fn held(&self, path: &[Seg], span: &Span) -> (Key, u64, Option<Arc<Postings>>) {
        let pid = path_id_of(path);
        let cache = &self.c.postings;
        let version = cache.versions[bucket(&pid, &span.lo)].load(Ordering::Acquire);
        let key = (self.state.gen, pid, span.lo.clone());
        let held = cache.get(&key, version);
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

    /// Appends the entries of `span` under `path` in each of `ranges` to `p`, decoded; false
    /// while the index is rebuilt.
    fn read_postings(
        &self,
        path: &[Seg],
        span: &Span,
        ranges: &[EpkRange],
        p: &mut Gathered,
        stats: &mut IndexStats,
    ) -> Result<bool, StoreError> {
        for r in ranges {
            let walked = self.walk(path, span, r, false, stats, &mut |t, d| {
                let tf_dl = strata_query::index::fulltext::parse_posting(t).unwrap_or((0, 0));
                p.push(&d.0, tf_dl);
                true
            })?;
            if walked.is_none() {
                return Ok(false);
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
