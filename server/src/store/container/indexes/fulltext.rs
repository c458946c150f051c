//! Full-text postings: per indexed path, one entry per stem of a document's text (carrying the
//! term frequency and document length BM25 scores with) and one for its length, under
//! synthetic paths of their own beside the range index (see
//! `strata_query::index::fulltext`). `FullTextContains*` and `ORDER BY RANK FullTextScore` read
//! them.

use super::entries::EntryReader;
use super::{sorted, EntryIndex, IndexKind};
use crate::store::container::{lock, read};
use crate::store::index::path_id_of;
use crate::store::lookup::IndexStats;
use crate::store::StoreError;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
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

/// A total's lengths path (its id) and a hash of its EPK range: looked up per range per ranked
/// query, so without making strings; the range itself is kept with the total and compared.
type SumKey = ([u8; 8], u64);

/// A kept total: its range (min, max), the versions it was counted at (see
/// [`WordTotals`]), and the total.
type Sum = (String, String, Versions, u64);

/// The range's last write (its partitions' LSN) and the container's length changes
/// ([`WordTotals::bump`]), each with the index's generation.
type Versions = (u64, u64);

/// Total words of a full-text path's texts per EPK range (BM25's average document length
/// needs it), kept while no document length in the range has changed: the sum reads one
/// length entry per document. A length changed in a range only if both moved since the sum:
/// the range's last write (its partitions' LSN) and the container's count of commits that
/// touched a length (bumped after such a commit, as the postings' versions are). Either one
/// unmoved keeps the total: a write elsewhere, or one that leaves the texts alone (any write
/// in the range dropped the total before — a one-word BM25 query over 200,000 documents took
/// 54 ms after any write, 1 ms otherwise). Kept per range, so a split counts afresh. The
/// container's own, dropped with it.
#[derive(Default)]
pub struct WordTotals {
    /// (lengths path, range min, range max) → (version counted at, total).
    sums: Mutex<HashMap<SumKey, Sum>>,
    /// One query sums while the others wait for its answer (a burst of cold queries would
    /// otherwise each read every length entry at once).
    summing: Mutex<()>,
    /// Commits that added or removed a length entry.
    version: AtomicU64,
}

impl WordTotals {
    /// A committed write added or removed a document length.
    pub fn bump(&self) {
        self.version.fetch_add(1, Ordering::AcqRel);
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
        // Read before the sum: a commit during it moves them on, and the sum it may have
        // missed is not served again.
        let gen = u64::from(self.state.gen) << 48;
        let lsn = read(&self.c.map)
            .overlapping(range)
            .iter()
            .map(|r| r.lsn)
            .max()
            .unwrap_or(0);
        let changed = self.c.word_totals.version.load(Ordering::Acquire);
        let now: Versions = (lsn ^ gen, changed ^ gen);
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        h.update(range.min.as_bytes());
        h.update(&[0]);
        h.update(range.max.as_bytes());
        let key = (path_id_of(lengths), h.digest());
        let totals = &self.c.word_totals;
        // Valid if either version is unmoved since the sum. The versions it was counted at
        // are never moved forward on a hit: between a commit that changes a length (its LSN
        // already seen) and its bump, such a refresh would make the stale total look current
        // for good.
        let cached = || {
            lock(&totals.sums)
                .get(&key)
                .filter(|(min, max, v, _)| {
                    (v.0 == now.0 || v.1 == now.1) && *min == range.min && *max == range.max
                })
                .map(|(.., n)| *n)
        };
        if let Some(n) = cached() {
            return Ok(Some(n));
        }
        let _one = lock(&totals.summing);
        if let Some(n) = cached() {
            return Ok(Some(n));
        }
        let (lo, hi) = term::type_bounds(term::NUMBER);
        let mut sum = 0u64;
        let walked = self.walk(
            lengths,
            &Span { lo, hi },
            range,
            false,
            stats,
            &mut |t, _| {
                sum += strata_query::index::fulltext::parse_length(t).unwrap_or(0);
                true
            },
        )?;
        if walked.is_none() {
            return Ok(None);
        }
        let mut sums = lock(&totals.sums);
        if sums.len() > 4096 {
            sums.clear();
        }
        sums.insert(key, (range.min.clone(), range.max.clone(), now, sum));
        Ok(Some(sum))
    }
}
