//! Full-text postings: per indexed path, one entry per stem of a document's text (carrying the
//! term frequency and document length BM25 scores with) and one for its length, under
//! synthetic paths of their own beside the range index (see
//! `strata_query::index::fulltext`). `FullTextContains*` and `ORDER BY RANK FullTextScore` read
//! them.

use super::entries::EntryReader;
use super::{sorted, EntryIndex, IndexKind};
use crate::store::container::lock;
use crate::store::lookup::IndexStats;
use crate::store::StoreError;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use strata_query::index::policy::Seg;
use strata_query::index::{term, Span};
use strata_query::pk::EpkRange;
use strata_query::sql::fulltext::Language;

pub struct FullTextIndex {
    paths: Vec<(Vec<Seg>, Language)>,
    gen: u16,
}

impl FullTextIndex {
    pub fn new(paths: Vec<(Vec<Seg>, Language)>, gen: u16) -> Self {
        Self { paths, gen }
    }
}

impl EntryIndex for FullTextIndex {
    fn kind(&self) -> IndexKind {
        IndexKind::FullText
    }

    fn gen(&self) -> u16 {
        self.gen
    }

    fn entries(&self, d: &Value) -> Vec<term::Entry> {
        sorted(strata_query::index::fulltext::entries(d, &self.paths))
    }

    fn explain(&self) -> String {
        format!(
            "full-text postings on {} path(s), generation {}",
            self.paths.len(),
            self.gen
        )
    }
}

/// A document length a write adds (`words` > 0) or removes, under a lengths path (its id),
/// in the logical partition `epk`: the kept word totals take it when the write commits.
#[derive(Debug, Clone)]
pub struct LengthChange {
    pub path: u64,
    pub epk: String,
    pub words: i64,
}

/// A kept total: the index generation and EPK range it counts, and the total.
struct Sum {
    gen: u16,
    range: EpkRange,
    words: u64,
}

/// Totals kept at most; more, and the kept ones are dropped (each write looks at every total
/// of its paths, and a total is one walk of a range's lengths to make again).
const KEPT: usize = 256;

/// Total words of a full-text path's texts per EPK range (BM25's average document length
/// needs it), counted once and then kept as a counter: every committed write adds the
/// lengths it adds and subtracts those it removes. Counting reads one length entry per
/// document (54 ms for 200,000 documents); before the counters, any write that changed a
/// length dropped the totals it touched and the next ranked query counted again.
///
/// A count and a commit never overlap: the count holds [`WordTotals::gate`] from before its
/// walk until its total is kept, and a write that changes lengths holds it across its commit
/// and the adding of its changes. So a total holds either all of a write's changes (counted,
/// or added) or none, never both (a write that changes lengths waits for a count under way:
/// once per range and index generation). A write whose outcome is unknown (a remote store's dropped
/// answer) drops every total. Kept per range and generation, so a split or a rebuild counts
/// afresh; the container's own, dropped with it.
#[derive(Default)]
pub struct WordTotals {
    /// (lengths path id, hash of the range) → total.
    sums: Mutex<HashMap<(u64, u64), Sum>>,
    /// See the type's doc. A burst of cold queries also counts once: the others wait at the
    /// gate for the first one's total.
    gate: Mutex<()>,
}

impl WordTotals {
    /// Held by a write that changes lengths from before its commit until
    /// [`settle`](Self::settle).
    pub fn gate(&self) -> MutexGuard<'_, ()> {
        lock(&self.gate)
    }

    /// Adds a write's length changes to the kept totals once it committed (`committed`), or
    /// drops them all when its outcome is unknown.
    pub fn settle(&self, changes: &[LengthChange], committed: bool) {
        let mut sums = lock(&self.sums);
        if !committed {
            sums.clear();
            return;
        }
        for ch in changes {
            for ((path, _), sum) in sums.iter_mut() {
                if *path == ch.path && sum.range.contains(&ch.epk) {
                    sum.words = sum.words.saturating_add_signed(ch.words);
                }
            }
        }
    }
}

impl EntryReader<'_> {
    /// The total words of the texts whose lengths are kept under `lengths`, in `range`;
    /// `None` while the index is rebuilt.
    pub fn total_words(
        &self,
        lengths: &[Seg],
        range: &EpkRange,
        stats: &mut IndexStats,
    ) -> Result<Option<u64>, StoreError> {
        let gen = self.state.gen;
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        h.update(range.min.as_bytes());
        h.update(&[0]);
        h.update(range.max.as_bytes());
        let key = (term::path_id(lengths), h.digest());
        let totals = &self.c.word_totals;
        let cached = || {
            lock(&totals.sums)
                .get(&key)
                .filter(|s| s.gen == gen && s.range.min == range.min && s.range.max == range.max)
                .map(|s| s.words)
        };
        if let Some(n) = cached() {
            return Ok(Some(n));
        }
        let _gate = totals.gate();
        if let Some(n) = cached() {
            return Ok(Some(n));
        }
        let (lo, hi) = term::type_bounds(term::NUMBER);
        let mut words = 0u64;
        let walked = self.walk(
            lengths,
            &Span { lo, hi },
            range,
            false,
            stats,
            &mut |t, _| {
                words += strata_query::index::fulltext::parse_length(t).unwrap_or(0);
                true
            },
        )?;
        if walked.is_none() {
            return Ok(None);
        }
        let mut sums = lock(&totals.sums);
        if sums.len() >= KEPT {
            sums.clear();
        }
        let range = range.clone();
        sums.insert(key, Sum { gen, range, words });
        Ok(Some(words))
    }
}
