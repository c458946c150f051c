//! The full-text postings of recent writes, in memory until a fold writes them as a segment
//! ([`super::text_segments`]).
//!
//! A write's transaction carries no posting: it records the document (and its change-feed
//! entry, which every write moves to its own position anyway), and after it commits its
//! postings join the container's pending batch here. That is what makes a full-text index
//! cheap to write: one document's fifteen-odd stems were fifteen-odd LSM entries, each a
//! skip-list insert on the write's path. Nothing acknowledged can be lost: the documents are
//! the truth, and a restart re-reads the postings of every document written after the last
//! fold's mark from the change feed (`Container::catch_up_text`).
//!
//! A document version is named by its change-feed position (LSN and sub-change): stable across
//! splits, unique per version, and live exactly while the feed still holds that position (a
//! later write or a delete moves or removes it). Readers resolve positions through the feed,
//! so a posting of a replaced version is never served, whether it is pending or folded.

use crate::store::container::lock;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// A document version: the (LSN, sub-change) of its change-feed entry.
pub type Pos = (u64, u32);

/// A document's posting of one stem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Posting {
    pub pos: Pos,
    pub tf: u32,
    pub dl: u32,
}

/// A segment of a path's postings (see [`super::text_segments`]): its number and postings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub seq: u64,
    pub postings: u64,
}

/// Which path's postings: the index generation and the id of the path's segments path.
pub type PathKey = (u16, [u8; 8]);

/// What one write does to one full-text path: the version it replaces (whose postings die)
/// and the postings of the version it writes, if that has text there.
#[derive(Debug, Clone)]
pub struct TextChange {
    pub path: PathKey,
    pub was: Option<Pos>,
    pub now: Option<NewPostings>,
}

/// A new version's postings: its position, length and (stem, term frequency) pairs.
#[derive(Debug, Clone)]
pub struct NewPostings {
    pub pos: Pos,
    pub length: u32,
    pub stems: Vec<(Vec<u8>, u32)>,
}

/// Hashes stems and positions (xxh3: SipHash was most of a batch's upkeep per write).
pub type Fast = xxhash_rust::xxh3::Xxh3DefaultBuilder;

/// Postings not yet in a segment, by stem, and the versions among them already replaced.
#[derive(Debug, Default)]
pub struct Batch {
    pub stems: HashMap<Vec<u8>, Vec<Posting>, Fast>,
    pub dead: HashSet<Pos, Fast>,
    pub postings: usize,
}

impl Batch {
    fn add(&mut self, p: &NewPostings) {
        for (stem, tf) in &p.stems {
            let posting = Posting {
                pos: p.pos,
                tf: *tf,
                dl: p.length,
            };
            match self.stems.get_mut(stem) {
                Some(list) => list.push(posting),
                None => {
                    self.stems.insert(stem.clone(), vec![posting]);
                }
            }
        }
        self.postings += p.stems.len();
    }

    /// Takes back a batch a fold could not write.
    fn absorb(&mut self, other: &Batch) {
        for (stem, list) in &other.stems {
            self.stems
                .entry(stem.clone())
                .or_default()
                .extend_from_slice(list);
        }
        self.dead.extend(other.dead.iter().copied());
        self.postings += other.postings;
    }

    fn live_of(&self, stem: &[u8], out: &mut Vec<Posting>) {
        if let Some(list) = self.stems.get(stem) {
            out.extend(list.iter().filter(|p| !self.dead.contains(&p.pos)));
        }
    }
}

/// One path's postings: the pending batch, the batch a fold is writing, and the segments.
#[derive(Debug, Default)]
pub struct PathText {
    pub active: Batch,
    pub folding: Option<Arc<Batch>>,
    pub segments: Vec<Segment>,
    /// Moves whenever the segments change: a reader that saw it move reads again.
    pub version: u64,
    /// Every document version at or before this LSN is in a segment (or replaced).
    pub mark: u64,
    pub next_seq: u64,
}

/// A container's pending postings and segment lists, per path.
#[derive(Default)]
pub struct TextPending {
    pub(super) paths: Mutex<Pending>,
    /// Set while a fold runs (one at a time per container).
    pub(super) folding: AtomicBool,
}

#[derive(Default)]
pub struct Pending {
    pub paths: HashMap<PathKey, PathText>,
    /// The last LSN whose transaction's changes were applied: a fold's mark.
    pub applied: u64,
}

/// Postings pending in a container beyond which a write starts a fold.
pub const FOLD_AT: usize = 262_144;

/// Transactions after a path's mark beyond which a write starts a fold (a restart reads the
/// documents they wrote again).
pub const FOLD_LSNS: u64 = 65_536;

/// Held by a write across its commit and [`TextPending::apply`], so that the batch takes
/// changes in commit order and a fold's mark never passes a commit not yet applied.
pub struct Gate<'a>(MutexGuard<'a, Pending>);

impl TextPending {
    pub fn gate(&self) -> Gate<'_> {
        Gate(lock(&self.paths))
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Pending> {
        lock(&self.paths)
    }

    /// Sets the LSN a fold may mark when no write was applied yet (at open).
    pub fn start_at(&self, lsn: u64) {
        let mut p = self.lock();
        p.applied = p.applied.max(lsn);
    }

    /// Postings pending over every path.
    pub fn pending(&self) -> usize {
        self.lock().paths.values().map(|p| p.active.postings).sum()
    }

    /// Takes a committed transaction's changes (`committed` false: its outcome is unknown,
    /// so the versions it replaced are not taken as dead — the feed decides at read time).
    /// Returns whether a fold is due: enough postings pending, or a mark so far behind that a
    /// restart would read many documents again.
    pub fn apply(gate: Gate<'_>, changes: Vec<TextChange>, last_lsn: u64, committed: bool) -> bool {
        let mut g = gate.0;
        g.applied = g.applied.max(last_lsn);
        let mut total = 0;
        for ch in changes {
            let path = g.paths.entry(ch.path).or_default();
            if let (Some(was), true) = (ch.was, committed) {
                if was.0 > path.mark {
                    path.active.dead.insert(was);
                }
            }
            if let Some(now) = &ch.now {
                path.active.add(now);
            }
            total = total.max(path.active.postings);
        }
        let behind = g.paths.values().any(|p| p.mark + FOLD_LSNS < g.applied);
        total >= FOLD_AT || behind
    }

    /// Every posting of `stem` pending under `path` (replaced versions left out), the
    /// segments to read for the rest, and the version to check once they are read.
    pub fn snapshot(&self, path: PathKey, stem: &[u8]) -> (Vec<Posting>, Vec<u64>, u64) {
        let g = self.lock();
        let mut out = Vec::new();
        let Some(p) = g.paths.get(&path) else {
            return (out, Vec::new(), 0);
        };
        p.active.live_of(stem, &mut out);
        if let Some(f) = &p.folding {
            f.live_of(stem, &mut out);
        }
        let segs = p.segments.iter().map(|s| s.seq).collect();
        (out, segs, p.version)
    }

    /// The version of `path`'s segments now.
    pub fn version(&self, path: PathKey) -> u64 {
        self.lock().paths.get(&path).map_or(0, |p| p.version)
    }

    /// Gives a batch a fold could not write back to the pending one.
    pub(super) fn unfold(&self, path: PathKey, batch: &Batch) {
        let mut g = self.lock();
        if let Some(p) = g.paths.get_mut(&path) {
            p.active.absorb(batch);
            p.folding = None;
        }
    }

    /// Claims the one fold a container runs at a time.
    pub(super) fn claim(&self) -> bool {
        !self.folding.swap(true, Ordering::AcqRel)
    }

    pub(super) fn release(&self) {
        self.folding.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(pos: u64, was: Option<u64>, stems: &[&str]) -> TextChange {
        TextChange {
            path: (1, [7; 8]),
            was: was.map(|w| (w, 0)),
            now: Some(NewPostings {
                pos: (pos, 0),
                length: 3,
                stems: stems.iter().map(|s| (s.as_bytes().to_vec(), 1)).collect(),
            }),
        }
    }

    /// A replaced version's postings are not pending any more; an unknown outcome keeps them.
    #[test]
    fn replaced_versions_leave_the_batch() {
        let t = TextPending::default();
        TextPending::apply(t.gate(), vec![change(5, None, &["a", "b"])], 5, true);
        TextPending::apply(t.gate(), vec![change(6, Some(5), &["a"])], 6, true);
        let (a, _, _) = t.snapshot((1, [7; 8]), b"a");
        assert_eq!(a.iter().map(|p| p.pos.0).collect::<Vec<_>>(), vec![6]);
        assert!(t.snapshot((1, [7; 8]), b"b").0.is_empty());
        TextPending::apply(t.gate(), vec![change(7, Some(6), &["a"])], 7, false);
        assert_eq!(t.snapshot((1, [7; 8]), b"a").0.len(), 2);
        assert_eq!(t.lock().applied, 7);
    }
}
