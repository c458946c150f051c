//! The full-text index's maintainer: per indexed path, a document's length, kept in its
//! directory entry ([`super::text_lengths`]), and its postings — one change per path handed
//! to the pending batch when the write commits ([`super::text_pending`]), folded into
//! segments in the background ([`super::text_segments`]). `FullTextContains*` and
//! `ORDER BY RANK FullTextScore` read them.

use super::entries::EntryReader;
use super::text_pending::{NewPostings, PathKey, TextChange};
use super::{postings, text_lengths, DocRef, IndexKind, IndexMaintainer, Old, Text};
use crate::store::container::{lock, Txn};
use crate::store::engine::Space;
use crate::store::index::path_id_of;
use crate::store::lookup::IndexStats;
use crate::store::StoreError;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use strata_query::index::fulltext::{lengths_path, postings_path, segments_path, TextPostings};
use strata_query::index::policy::Seg;
use strata_query::index::term;
use strata_query::pk::EpkRange;
use strata_query::sql::fulltext::Language;

pub struct FullTextIndex {
    paths: Vec<(Vec<Seg>, Language)>,
    /// Per path: where its postings are kept, and the id its decoded lists are cached under.
    keys: Vec<(PathKey, [u8; 8])>,
    /// Per path: the id its lengths are kept under.
    lengths: Vec<u64>,
    gen: u16,
}

impl FullTextIndex {
    pub fn new(paths: Vec<(Vec<Seg>, Language)>, gen: u16) -> Self {
        let keys = paths
            .iter()
            .map(|(segs, _)| {
                let at = (gen, path_id_of(&segments_path(segs)));
                (at, path_id_of(&postings_path(segs)))
            })
            .collect();
        let lengths = paths
            .iter()
            .map(|(segs, _)| term::path_id(&lengths_path(segs)))
            .collect();
        Self {
            paths,
            keys,
            lengths,
            gen,
        }
    }

    /// (lengths path id, words) of a document's postings, sorted.
    fn lengths(&self, p: &[TextPostings]) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = p
            .iter()
            .map(|t| (self.lengths[t.path], u64::from(t.length)))
            .collect();
        out.sort_unstable();
        out
    }

    /// One change per path: the replaced version `was` dies, the new one's postings (if its
    /// text is there) are added.
    fn changes(
        &self,
        t: &mut Txn<'_>,
        was: Option<super::text_pending::Pos>,
        at: super::text_pending::Pos,
        new: Vec<TextPostings>,
    ) {
        // The batch's mark moves with every write the index sees (see `TextPending::apply`).
        t.text_seen = true;
        let mut new: Vec<Option<TextPostings>> = new.into_iter().map(Some).collect();
        for (i, (key, _)) in self.keys.iter().enumerate() {
            let mine = new
                .iter_mut()
                .find(|p| p.as_ref().is_some_and(|p| p.path == i));
            let now = mine.and_then(Option::take).map(|p| NewPostings {
                pos: at,
                length: p.length,
                stems: p.stems,
            });
            if was.is_none() && now.is_none() {
                continue;
            }
            t.text_changes.push(TextChange {
                path: *key,
                was,
                now,
            });
        }
    }
}

/// (path, stem, term frequency, length) of each posting, sorted: what a cached list holds.
fn held(p: &[TextPostings]) -> Vec<(usize, &[u8], u32, u32)> {
    let mut out: Vec<_> = p
        .iter()
        .flat_map(|t| {
            t.stems
                .iter()
                .map(move |(s, tf)| (t.path, &s[..], *tf, t.length))
        })
        .collect();
    out.sort_unstable();
    out
}

impl IndexMaintainer for FullTextIndex {
    fn kind(&self) -> IndexKind {
        IndexKind::FullText
    }

    fn update(
        &self,
        t: &mut Txn<'_>,
        doc: DocRef<'_>,
        old: Option<&Old<'_>>,
        new: Option<&Text<'_>>,
    ) -> Result<(), StoreError> {
        let new = new.map(Text::doc).transpose()?;
        let text = |d: Option<&Value>| {
            d.map(|d| strata_query::index::fulltext::postings(d, &self.paths))
                .unwrap_or_default()
        };
        let (before, after) = (text(old.map(Old::doc).transpose()?), text(new));
        // Decoded lists of the stems whose (frequency, length) of this document changes take a
        // patch when this commits; a rewrite that keeps them leaves the lists as they are.
        let (b, a) = (held(&before), held(&after));
        let mut changed: Vec<(usize, &[u8])> = b
            .iter()
            .filter(|x| a.binary_search(x).is_err())
            .chain(a.iter().filter(|x| b.binary_search(x).is_err()))
            .map(|x| (x.0, x.1))
            .collect();
        changed.sort_unstable();
        changed.dedup();
        for (path, stem) in changed {
            let now = a
                .iter()
                .find(|x| x.0 == path && x.1 == stem)
                .map(|x| (x.2, x.3));
            let pid = self.keys[path].1;
            let b = postings::bucket(&pid, stem);
            if !t.c.postings.holds(b) {
                // No list of that bucket held: nothing to patch, only readers to warn.
                t.postings_touched.push(b);
                continue;
            }
            t.postings_patches.push(postings::Patch {
                key: (self.gen, pid, stem.to_vec()),
                item: doc.key.to_vec(),
                now,
            });
        }
        let (lb, la) = (self.lengths(&before), self.lengths(&after));
        // The directory entry takes the lengths when they change (a create writes it anyway),
        // and the kept word totals the difference when this commits.
        if new.is_some() && (old.is_none() || lb != la) {
            t.text_lengths = Some(text_lengths::encode(self.gen, &la));
        }
        let change = |(path, words): &(u64, u64), sign: i64| LengthChange {
            path: *path,
            epk: doc.epk.to_owned(),
            words: sign * *words as i64,
        };
        let removed = lb.iter().filter(|l| !la.contains(l)).map(|l| change(l, -1));
        let added = la.iter().filter(|l| !lb.contains(l)).map(|l| change(l, 1));
        let changes: Vec<LengthChange> = removed.chain(added).collect();
        t.length_changes.extend(changes);
        self.changes(t, doc.was, doc.at, after);
        Ok(())
    }

    fn backfill(&self, t: &mut Txn<'_>, doc: DocRef<'_>, d: &Value) -> Result<(), StoreError> {
        let text = strata_query::index::fulltext::postings(d, &self.paths);
        let lengths = text_lengths::encode(self.gen, &self.lengths(&text));
        t.put_raw(Space::Directory, doc.key.to_vec(), lengths);
        self.changes(t, None, doc.at, text);
        Ok(())
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
/// lengths it adds and subtracts those it removes. Counting reads the range's directory
/// entries ([`super::text_lengths`]); before the counters, any write that changed a length
/// dropped the totals it touched and the next ranked query counted again.
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
        if !self.state.ready {
            return Ok(None);
        }
        let words = self.c.count_words(gen, key.0, range, stats)?;
        let mut sums = lock(&totals.sums);
        if sums.len() >= KEPT {
            sums.clear();
        }
        let range = range.clone();
        sums.insert(key, Sum { gen, range, words });
        Ok(Some(words))
    }
}
