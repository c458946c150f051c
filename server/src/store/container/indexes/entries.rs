//! Reading the range index (and the full-text and spatial entries beside it) of a physical
//! partition: candidate documents for a lookup, counts that need no documents, and entries in
//! value order for ORDER BY — the read side of the [`EntryIndex`](super::EntryIndex) kinds.
//!
//! A reader holds the index state it was made with, so one query reads one generation.
//! Every read takes the partition as an EPK range and filters entries by the EPK inside
//! their key (see [`crate::store::index`]); a single-term lookup seeks straight to the
//! partition's run of that term. Each returns `None` when the index cannot answer — it is
//! being rebuilt, or the lookup would read more entries than scanning the partition reads
//! documents — and the executor then scans.

use super::found::Found;
use super::postings::Postings;
use crate::store::container::lookup::{in_range, IndexStats, CHUNK};
use crate::store::container::{read, Container, DocPos};
use crate::store::engine::Space;
use crate::store::index::{
    self, item_key_of, path_id_of, path_prefix, span_bounds, split_entry, IndexState,
};
use crate::store::StoreError;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Instant;
use strata_query::index::{OrderPath, Probe, Seg, Span};
use strata_query::pk::EpkRange;

/// Reads a container's index entries at one index state (see the module's doc).
pub struct EntryReader<'a> {
    pub(super) c: &'a Container,
    pub(super) state: IndexState,
}

impl Container {
    /// A reader of the index entries at the current index state.
    pub fn entries(&self) -> EntryReader<'_> {
        EntryReader {
            c: self,
            state: self.index_state(),
        }
    }
}

impl EntryReader<'_> {
    /// Visits the entries of `path` in `span` that belong to `range`, in key order (or
    /// reverse), passing each entry's term and document item key to `f` until it returns
    /// false. Returns false when `budget` entries were read first.
    #[allow(clippy::too_many_arguments)]
    fn walk_entries(
        &self,
        path: &[Seg],
        span: &Span,
        range: &EpkRange,
        reverse: bool,
        budget: u64,
        stats: &mut IndexStats,
        f: &mut dyn FnMut(&[u8], Vec<u8>) -> bool,
    ) -> Result<bool, StoreError> {
        // Postings are not entries (see `text_segments`): only the decoded lists serve them.
        if strata_query::index::fulltext::text_path(path).is_some() {
            return Ok(false);
        }
        let (gen, codec) = (self.state.gen, self.c.codec);
        let prefix = path_prefix(self.c.cid, gen, &path_id_of(path));
        let (mut lo, mut hi) = span_bounds(&prefix, span);
        // One term: its entries are ordered by EPK, so the partition's are one run.
        let point = span.hi.len() == span.lo.len() + 1 && span.hi.starts_with(&span.lo);
        if point {
            codec.push_bound(&mut lo, &range.min);
            if range.max.as_str() < "FF" {
                hi.truncate(hi.len() - 1);
                codec.push_bound(&mut hi, &range.max);
            }
        }
        let whole = range.min.is_empty() && range.max.as_str() >= "FF";
        let mut read_n = 0u64;
        let mut cursor: Option<Vec<u8>> = None;
        loop {
            let (start, end) = match (&cursor, reverse) {
                (None, _) => (Bound::Included(&lo[..]), Bound::Excluded(&hi[..])),
                (Some(c), false) => (Bound::Excluded(&c[..]), Bound::Excluded(&hi[..])),
                (Some(c), true) => (Bound::Included(&lo[..]), Bound::Excluded(&c[..])),
            };
            let chunk = self
                .c
                .engine
                .scan(Space::Index, start, end, CHUNK, reverse)?;
            let exhausted = chunk.len() < CHUNK;
            for (k, _) in &chunk {
                read_n += 1;
                stats.entries += 1;
                if read_n > budget {
                    return Ok(false);
                }
                let Some((term, doc)) = split_entry(&k[prefix.len()..]) else {
                    continue;
                };
                if whole {
                    // Every document is in range: no EPK to spell out and compare.
                    let mut item = Vec::with_capacity(4 + doc.len());
                    item.extend_from_slice(&self.c.cid.to_be_bytes());
                    item.extend_from_slice(doc);
                    if !f(term, item) {
                        return Ok(true);
                    }
                    continue;
                }
                let Some((item, epk)) = item_key_of(self.c.cid, codec, doc) else {
                    continue;
                };
                if in_range(&epk, range) && !f(term, item) {
                    return Ok(true);
                }
            }
            match chunk.into_iter().last() {
                Some((k, _)) if !exhausted => cursor = Some(k),
                _ => return Ok(true),
            }
        }
    }

    /// The item keys a lookup (the union of `probes`) yields in `range`, sorted and without
    /// duplicates; `None` when the index cannot serve it (see the module documentation).
    pub fn lookup(
        &self,
        probes: &[Probe],
        range: &EpkRange,
        stats: &mut IndexStats,
    ) -> Result<Option<Found>, StoreError> {
        if !self.state.ready {
            return Ok(None);
        }
        let started = Instant::now();
        // Reading more entries than the partition has documents (and then loading them) costs
        // more than scanning it.
        let budget = self.c.partition_count(range) + 256;
        let mut out: Vec<DocPos> = Vec::new();
        let mut spent = 0u64;
        for p in probes {
            let mut local = IndexStats::default();
            if let Some(both) = self.cached_conjunction(p, range, &mut local)? {
                if !spend(&mut spent, budget, &local, stats) {
                    stats.lookup_time += started.elapsed();
                    return Ok(None);
                }
                if probes.len() == 1 {
                    // Sorted and distinct already: handed over as it is (see `found`).
                    stats.lookup_time += started.elapsed();
                    return Ok(Some(both));
                }
                out.extend(both.into_keys());
                continue;
            }
            let mut mine = Vec::new();
            for q in std::iter::once(p).chain(p.and.iter()) {
                let mut found: Vec<DocPos> = Vec::new();
                for span in &q.spans {
                    let mut local = IndexStats::default();
                    if let Some(here) = self.cached_postings(&q.path, span, range, &mut local)? {
                        if !spend(&mut spent, budget, &local, stats) {
                            stats.lookup_time += started.elapsed();
                            return Ok(None);
                        }
                        found.extend(here.into_keys());
                        continue;
                    }
                    let complete = self.walk_entries(
                        &q.path,
                        span,
                        range,
                        false,
                        budget.saturating_sub(spent),
                        &mut local,
                        &mut |_, item| {
                            found.push(DocPos(item));
                            true
                        },
                    )?;
                    spent += local.entries;
                    stats.add(&local);
                    if !complete {
                        stats.lookup_time += started.elapsed();
                        return Ok(None);
                    }
                }
                if std::ptr::eq(q, p) {
                    mine = found;
                } else {
                    // The conjunction's other words: keep the documents they share.
                    found.sort_unstable();
                    mine.retain(|d| found.binary_search(d).is_ok());
                }
            }
            out.extend(mine);
        }
        out.sort_unstable();
        out.dedup();
        stats.lookup_time += started.elapsed();
        Ok(Some(Found::Keys(out)))
    }

    /// The documents of `range` with a posting of every word of a full-text probe (one stem
    /// each, and the conjunction's other words), from the decoded postings in key order: the
    /// shortest list leads, and the lists leapfrog, each galloping forward to the key another
    /// landed on (a rare word beside a common one costs the rare word's postings, not the
    /// common one's).
    /// `None` when a part is not one stem's postings (the entries are walked then).
    fn cached_conjunction(
        &self,
        p: &Probe,
        range: &EpkRange,
        stats: &mut IndexStats,
    ) -> Result<Option<Found>, StoreError> {
        let mut lists = Vec::with_capacity(1 + p.and.len());
        for q in std::iter::once(p).chain(p.and.iter()) {
            let ([span], Some(_)) = (
                &q.spans[..],
                strata_query::index::fulltext::text_path(&q.path),
            ) else {
                return Ok(None);
            };
            match self.postings(&q.path, span, stats)? {
                Some(list) => lists.push(list),
                None => return Ok(None),
            }
        }
        let shares: Vec<(usize, usize)> = lists.iter().map(|l| self.share(l, range)).collect();
        let shortest = (0..lists.len())
            .min_by_key(|&i| shares[i].1 - shares[i].0)
            .unwrap_or(0);
        let (from, to) = shares[shortest];
        let driver = Arc::clone(&lists[shortest]);
        if lists.len() == 1 {
            return Ok(Some(Found::Share {
                list: driver,
                from,
                to,
            }));
        }
        let parts: Vec<(&Postings, usize)> = lists
            .iter()
            .zip(&shares)
            .enumerate()
            .filter(|(i, _)| *i != shortest)
            .map(|(_, (list, &(_, t)))| (&**list, t))
            .collect();
        let mut at: Vec<usize> = (0..lists.len())
            .filter(|&i| i != shortest)
            .map(|i| shares[i].0)
            .collect();
        // Leapfrog: each list seeks to the key the last one landed on; a key every list lands
        // on is a pick. The driver skips ahead too, so two rare words beside each other cost
        // the stretches where both have documents, not the shorter list.
        let mut picks = Vec::new();
        let mut i = from;
        'docs: while i < to {
            let k = driver.sort_key(i);
            for (j, &(list, end)) in parts.iter().enumerate() {
                at[j] = list.seek(at[j], end, k);
                if at[j] == end {
                    break 'docs;
                }
                let found = list.sort_key(at[j]);
                if found != k {
                    i = driver.seek(i + 1, to, found);
                    continue 'docs;
                }
            }
            picks.push(i as u32);
            i += 1;
        }
        Ok(Some(Found::Picks {
            list: driver,
            picks,
        }))
    }

    /// The documents of `range` with a posting in a full-text stem's `span`, from the
    /// decoded postings ([`super::postings`]); `None` when `path` is not a postings path or
    /// the span not one stem's (the entries are walked then).
    fn cached_postings(
        &self,
        path: &[Seg],
        span: &Span,
        range: &EpkRange,
        stats: &mut IndexStats,
    ) -> Result<Option<Found>, StoreError> {
        if strata_query::index::fulltext::text_path(path).is_none() {
            return Ok(None);
        }
        let Some(list) = self.postings(path, span, stats)? else {
            return Ok(None);
        };
        let (from, to) = self.share(&list, range);
        Ok(Some(Found::Share { list, from, to }))
    }

    /// The share of `list` (in key order) inside `range`.
    fn share(&self, list: &Postings, range: &EpkRange) -> (usize, usize) {
        if range.min.is_empty() && range.max.as_str() >= "FF" {
            return (0, list.len());
        }
        let (lo, hi) = self.c.key_bounds(range);
        let below = |bound: &[u8]| {
            let (mut a, mut b) = (0, list.len());
            while a < b {
                let mid = a + (b - a) / 2;
                if list.key(mid) < bound {
                    a = mid + 1;
                } else {
                    b = mid;
                }
            }
            a
        };
        let (from, to) = (below(&lo), below(&hi));
        (from, to.max(from))
    }

    /// Visits the entries of `path` within `span` in `range` (in reverse when asked), each as
    /// its term and item key, until `f` returns false. `None` while the index is rebuilt.
    pub fn walk(
        &self,
        path: &[Seg],
        span: &Span,
        range: &EpkRange,
        reverse: bool,
        stats: &mut IndexStats,
        f: &mut dyn FnMut(&[u8], DocPos) -> bool,
    ) -> Result<Option<()>, StoreError> {
        if !self.state.ready {
            return Ok(None);
        }
        let started = Instant::now();
        self.walk_entries(
            path,
            span,
            range,
            reverse,
            u64::MAX,
            stats,
            &mut |term, item| f(term, DocPos(item)),
        )?;
        stats.lookup_time += started.elapsed();
        Ok(Some(()))
    }

    /// How many documents of `range` an exact probe matches, from its entries alone.
    pub fn count(
        &self,
        probe: &Probe,
        range: &EpkRange,
        stats: &mut IndexStats,
    ) -> Result<Option<u64>, StoreError> {
        if !self.state.ready || !probe.exact {
            return Ok(None);
        }
        let started = Instant::now();
        let mut n = 0u64;
        for span in &probe.spans {
            n += self.count_entries(&probe.path, span, range, stats)?;
        }
        stats.lookup_time += started.elapsed();
        Ok(Some(n))
    }

    /// The entries of `path` within `span` that belong to `range`.
    fn count_entries(
        &self,
        path: &[Seg],
        span: &Span,
        range: &EpkRange,
        stats: &mut IndexStats,
    ) -> Result<u64, StoreError> {
        let mut n = 0u64;
        self.walk_entries(path, span, range, false, u64::MAX, stats, &mut |_, _| {
            n += 1;
            true
        })?;
        Ok(n)
    }

    /// Visits the documents of `range` in the order of `order`'s path (entries of one term in
    /// document order, reversed when descending), from `from` (a term) on when given, passing
    /// each term and item key to `f` until it returns false. `None` when the index cannot
    /// produce the order: it is being rebuilt, or — ascending — some documents of the range
    /// lack the path (undefined sorts first, and the index has no entry for it).
    pub fn in_order(
        &self,
        order: &OrderPath,
        range: &EpkRange,
        from: Option<&[u8]>,
        stats: &mut IndexStats,
        f: &mut dyn FnMut(&[u8], DocPos) -> bool,
    ) -> Result<Option<bool>, StoreError> {
        if !self.state.ready {
            return Ok(None);
        }
        if !order.descending && !self.all_defined(&order.path, range, stats)? {
            return Ok(None);
        }
        let mut span = Span {
            lo: vec![0x00],
            hi: vec![0xFF],
        };
        if let Some(t) = from {
            if order.descending {
                span.hi = t.to_vec();
                span.hi.push(0xFF);
            } else {
                span.lo = t.to_vec();
            }
        }
        let mut finished = true;
        self.walk_entries(
            &order.path,
            &span,
            range,
            order.descending,
            u64::MAX,
            stats,
            &mut |term, item| {
                let more = f(term, DocPos(item));
                finished = more;
                more
            },
        )?;
        Ok(Some(finished))
    }

    /// Whether every document of `range` has a value at `path`.
    pub fn all_defined(
        &self,
        path: &[Seg],
        range: &EpkRange,
        stats: &mut IndexStats,
    ) -> Result<bool, StoreError> {
        Ok(self.defined_count(path, range, stats)? >= self.c.count_in(range, stats)?)
    }

    /// Documents of `range` with a value (any type) at `path`: one entry each. Cached per
    /// partition until the partition's next write.
    fn defined_count(
        &self,
        path: &[Seg],
        range: &EpkRange,
        stats: &mut IndexStats,
    ) -> Result<u64, StoreError> {
        let lsn = {
            let map = read(&self.c.map);
            map.ranges[map.index_of(&range.min)].lsn
        };
        let key = (
            index::path_id_of(path),
            self.state.gen,
            range.min.clone(),
            range.max.clone(),
        );
        if let Some((at, n)) = self
            .c
            .defined_cache
            .lock()
            .ok()
            .and_then(|m| m.get(&key).copied())
        {
            if at == lsn {
                return Ok(n);
            }
        }
        let all = Span {
            lo: vec![0x00],
            hi: vec![0xFF],
        };
        let n = self.count_entries(path, &all, range, stats)?;
        if let Ok(mut m) = self.c.defined_cache.lock() {
            if m.len() > 1024 {
                m.clear();
            }
            m.insert(key, (lsn, n));
        }
        Ok(n)
    }
}

/// Adds what one step of a lookup read (`local`) to its count and to `stats`; false once
/// the count passes `budget` (then scanning the partition costs less).
fn spend(spent: &mut u64, budget: u64, local: &IndexStats, stats: &mut IndexStats) -> bool {
    *spent += local.entries;
    stats.add(local);
    *spent <= budget
}
