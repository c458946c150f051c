//! Full-text postings at rest: segments of per-stem blocks, written by folds in the background.
//!
//! A fold takes a path's pending batch ([`super::text_pending`]) and writes it as one segment:
//! per stem one block of postings in position order — delta-coded LSNs, sub-change, term
//! frequency and length as varints, about five bytes a posting where an index entry per
//! posting took forty — and, in the same batch, the path's meta record: the mark (every
//! version at or before it is in a segment), the segment list and the next segment number.
//! Segments merge as tantivy's and Lucene's do, a level at a time (four of one size make one of
//! the next), dropping postings whose version the change feed no longer holds — the merged
//! segments' blocks deleted in the merge's own write —, so a stem is a handful of point reads
//! whatever the corpus's age. Keys, beside the path's other entries
//! (`cid | gen | segments path id`, so a generation's purge takes them too):
//!
//! * `… | 0x00`: the meta record;
//! * `… | 0x01 | segment (u64) | stem`: a stem's block in a segment.

pub use super::text_pending::Segment;
use super::text_pending::{Batch, Fast, PathKey, PathText, Pos, Posting, TextPending};
use crate::store::engine::{Engine, Op, Space};
use crate::store::index::path_prefix;
use crate::store::keys;
use crate::store::StoreError;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// A path's meta record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Meta {
    pub mark: u64,
    pub next_seq: u64,
    pub segments: Vec<Segment>,
}

/// Takes one entry (key, value) of a scan.
type EntryVisitor<'a> = crate::store::engine::EntryVisitor<'a, StoreError>;

/// Segments of one level that make a merge.
const MERGE_WIDTH: usize = 4;

/// Entries a merge reads at once.
const SCAN: usize = 1024;

pub fn meta_key(cid: u32, path: PathKey) -> Vec<u8> {
    let mut k = path_prefix(cid, path.0, &path.1);
    k.push(0);
    k
}

/// Where segment `seq`'s blocks begin.
pub fn segment_prefix(cid: u32, path: PathKey, seq: u64) -> Vec<u8> {
    let mut k = path_prefix(cid, path.0, &path.1);
    k.push(1);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

pub fn block_key(cid: u32, path: PathKey, seq: u64, stem: &[u8]) -> Vec<u8> {
    let mut k = segment_prefix(cid, path, seq);
    k.extend_from_slice(stem);
    k
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        v |= u64::from(byte & 0x7F) << shift;
        if byte < 0x80 {
            return Some(v);
        }
    }
    None
}

/// A block of postings, sorted by position and without duplicates.
pub fn encode_block(postings: &[Posting]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + postings.len() * 5);
    put_varint(&mut out, postings.len() as u64);
    let mut last = 0u64;
    for p in postings {
        put_varint(&mut out, p.pos.0 - last);
        put_varint(&mut out, u64::from(p.pos.1));
        put_varint(&mut out, u64::from(p.tf));
        put_varint(&mut out, u64::from(p.dl));
        last = p.pos.0;
    }
    out
}

/// Appends a block's postings to `out`; `None` (and nothing appended) for a damaged block.
pub fn decode_block(b: &[u8], out: &mut Vec<Posting>) -> Option<()> {
    let mut at = 0;
    let n = varint(b, &mut at)? as usize;
    let mut got = Vec::with_capacity(n.min(b.len()));
    let mut lsn = 0u64;
    for _ in 0..n {
        lsn = lsn.checked_add(varint(b, &mut at)?)?;
        let sub = u32::try_from(varint(b, &mut at)?).ok()?;
        let tf = u32::try_from(varint(b, &mut at)?).ok()?;
        let dl = u32::try_from(varint(b, &mut at)?).ok()?;
        got.push(Posting {
            pos: (lsn, sub),
            tf,
            dl,
        });
    }
    out.extend(got);
    Some(())
}

pub fn encode_meta(m: &Meta) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, m.mark);
    put_varint(&mut out, m.next_seq);
    put_varint(&mut out, m.segments.len() as u64);
    for s in &m.segments {
        put_varint(&mut out, s.seq);
        put_varint(&mut out, s.postings);
    }
    out
}

pub fn decode_meta(b: &[u8]) -> Option<Meta> {
    let mut at = 0;
    let mut m = Meta {
        mark: varint(b, &mut at)?,
        next_seq: varint(b, &mut at)?,
        ..Meta::default()
    };
    for _ in 0..varint(b, &mut at)? {
        let seq = varint(b, &mut at)?;
        let postings = varint(b, &mut at)?;
        m.segments.push(Segment { seq, postings });
    }
    Some(m)
}

/// `list` sorted by position, one posting per position, without the versions `dead` names.
pub fn settle(list: &mut Vec<Posting>, dead: impl Fn(&Posting) -> bool) {
    list.sort_unstable();
    list.dedup_by_key(|p| p.pos);
    list.retain(|p| !dead(p));
}

/// A segment's level: four of a level merge into one of the next.
fn level(postings: u64) -> u32 {
    let units = (postings / 4096).max(1);
    units.ilog2() / 2
}

/// What a fold needs of its container, owned, so it can run on a thread of its own.
#[derive(Clone)]
pub struct Folder {
    pub engine: Engine,
    pub cid: u32,
    pub text: Arc<TextPending>,
    /// The index generation current when the fold started: other generations' pending
    /// postings are dropped (a policy change made them moot).
    pub gen: u16,
}

impl Folder {
    /// Folds every path's pending postings into a segment and merges what a level fills.
    pub fn fold_all(&self) -> Result<(), StoreError> {
        let paths: Vec<PathKey> = {
            let mut g = self.text.lock();
            g.paths.retain(|k, _| k.0 == self.gen);
            g.paths.keys().copied().collect()
        };
        for path in paths {
            self.fold(path)?;
            while let Some(group) = self.merge_candidates(path) {
                self.merge(path, &group)?;
            }
        }
        Ok(())
    }

    /// Writes `path`'s pending batch as a segment (see the module's doc).
    fn fold(&self, path: PathKey) -> Result<(), StoreError> {
        let (batch, meta) = {
            let mut g = self.text.lock();
            let applied = g.applied;
            let Some(p) = g.paths.get_mut(&path) else {
                return Ok(());
            };
            if p.folding.is_some() || (p.active.postings == 0 && p.mark >= applied) {
                return Ok(());
            }
            let batch = Arc::new(std::mem::take(&mut p.active));
            p.folding = Some(Arc::clone(&batch));
            let mut meta = meta_of(p);
            meta.mark = applied.max(p.mark);
            (batch, meta)
        };
        let (ops, meta) = self.fold_ops(path, &batch, meta);
        // Not awaited: a fold the disk lost is done again from the change feed, its documents
        // being older in the journal than the fold.
        match self.engine.write(ops) {
            Ok(_) => {
                let mut g = self.text.lock();
                if let Some(p) = g.paths.get_mut(&path) {
                    p.segments = meta.segments;
                    p.next_seq = meta.next_seq;
                    p.mark = meta.mark;
                    p.version += 1;
                    p.folding = None;
                }
                Ok(())
            }
            Err(e) => {
                self.text.unfold(path, &batch);
                Err(e.into())
            }
        }
    }

    /// The writes of a fold of `batch`, and the meta record they leave.
    fn fold_ops(&self, path: PathKey, batch: &Batch, mut meta: Meta) -> (Vec<Op>, Meta) {
        let mut ops = Vec::with_capacity(batch.stems.len() + 1);
        let seq = meta.next_seq;
        let mut total = 0u64;
        for (stem, list) in &batch.stems {
            // A batch takes postings in commit order, so its lists are settled already unless
            // a fold given back (`TextPending::unfold`) or a replaced version mixed them.
            let settled = list.windows(2).all(|w| w[0].pos < w[1].pos)
                && !list.iter().any(|p| batch.dead.contains(&p.pos));
            let owned;
            let list = if settled {
                &list[..]
            } else {
                let mut l = list.clone();
                settle(&mut l, |p| batch.dead.contains(&p.pos));
                owned = l;
                &owned[..]
            };
            if list.is_empty() {
                continue;
            }
            total += list.len() as u64;
            let key = block_key(self.cid, path, seq, stem);
            ops.push(Op::Put(Space::Index, key, encode_block(list)));
        }
        if total > 0 {
            meta.segments.push(Segment {
                seq,
                postings: total,
            });
            meta.next_seq += 1;
        }
        ops.push(Op::Put(
            Space::Index,
            meta_key(self.cid, path),
            encode_meta(&meta),
        ));
        (ops, meta)
    }

    /// The segments of the lowest level that holds [`MERGE_WIDTH`] or more, if any.
    fn merge_candidates(&self, path: PathKey) -> Option<Vec<Segment>> {
        let g = self.text.lock();
        let p = g.paths.get(&path)?;
        let mut by_level: HashMap<u32, Vec<Segment>> = HashMap::new();
        for s in &p.segments {
            by_level.entry(level(s.postings)).or_default().push(*s);
        }
        let mut full: Vec<(u32, Vec<Segment>)> = by_level
            .into_iter()
            .filter(|(_, v)| v.len() >= MERGE_WIDTH)
            .collect();
        full.sort_by_key(|(l, _)| *l);
        full.into_iter().next().map(|(_, v)| v)
    }

    /// Merges `group` into one segment, dropping postings of versions the feed no longer
    /// holds, and deletes the merged segments' blocks in the same write (a reader that listed
    /// them sees the segments' version move and reads again).
    fn merge(&self, path: PathKey, group: &[Segment]) -> Result<(), StoreError> {
        let mut stems: HashMap<Vec<u8>, Vec<Posting>, Fast> = HashMap::default();
        let mut ops = Vec::new();
        for s in group {
            self.read_segment(path, s.seq, &mut stems, &mut ops)?;
        }
        let live = self.live_positions(&stems)?;
        let mut meta = {
            let g = self.text.lock();
            let Some(p) = g.paths.get(&path) else {
                return Ok(());
            };
            meta_of(p)
        };
        let seq = meta.next_seq;
        meta.next_seq += 1;
        meta.segments.retain(|s| !group.contains(s));
        let mut total = 0u64;
        for (stem, mut list) in stems {
            settle(&mut list, |p| !live.holds(p.pos));
            if list.is_empty() {
                continue;
            }
            total += list.len() as u64;
            let key = block_key(self.cid, path, seq, &stem);
            ops.push(Op::Put(Space::Index, key, encode_block(&list)));
        }
        if total > 0 {
            meta.segments.push(Segment {
                seq,
                postings: total,
            });
            meta.segments.sort_by_key(|s| s.seq);
        }
        ops.push(Op::Put(
            Space::Index,
            meta_key(self.cid, path),
            encode_meta(&meta),
        ));
        // Not awaited: a merge the disk lost leaves the segments it merged as they were.
        let _ = self.engine.write(ops)?;
        let mut g = self.text.lock();
        if let Some(p) = g.paths.get_mut(&path) {
            p.segments = meta.segments;
            p.next_seq = meta.next_seq;
            p.version += 1;
        }
        Ok(())
    }

    /// Adds segment `seq`'s postings to `stems`, and the deletes of its blocks to `ops`.
    fn read_segment(
        &self,
        path: PathKey,
        seq: u64,
        stems: &mut HashMap<Vec<u8>, Vec<Posting>, Fast>,
        ops: &mut Vec<Op>,
    ) -> Result<(), StoreError> {
        let lo = segment_prefix(self.cid, path, seq);
        let hi = segment_prefix(self.cid, path, seq + 1);
        self.scan_all(Space::Index, &lo, &hi, &mut |k, v| {
            ops.push(Op::Delete(Space::Index, k.to_vec()));
            let list = stems.entry(k[lo.len()..].to_vec()).or_default();
            decode_block(v, list).ok_or_else(|| {
                StoreError::Corrupt("a full-text segment has an unreadable block".into())
            })
        })
    }

    /// The positions the change feed still holds between the first and the last LSN of
    /// `stems`' postings: one walk of the feed over them.
    fn live_positions(
        &self,
        stems: &HashMap<Vec<u8>, Vec<Posting>, Fast>,
    ) -> Result<Live, StoreError> {
        let lsns = stems.values().flatten().map(|p| p.pos.0);
        let (lo, hi) = lsns.fold((u64::MAX, 0), |(lo, hi), l| (lo.min(l), hi.max(l)));
        let mut live = Live::new(lo, hi);
        if lo > hi {
            return Ok(live);
        }
        let from = keys::feed_key(self.cid, lo);
        let to = keys::feed_key(self.cid, hi.saturating_add(1));
        self.scan_all(Space::Feed, &from, &to, &mut |k, _| {
            if let Some(pos) = keys::parse_change_key(k) {
                live.add(pos);
            }
            Ok(())
        })?;
        Ok(live)
    }

    /// Hands every entry of `space` in `[lo, hi)` to `f`, a chunk at a time.
    fn scan_all(
        &self,
        space: Space,
        lo: &[u8],
        hi: &[u8],
        f: &mut EntryVisitor<'_>,
    ) -> Result<(), StoreError> {
        self.engine.scan_each(space, (lo, hi), SCAN, f)
    }
}

/// LSN spans up to this long are kept as a bitmap (16 MiB at most); longer ones as a set.
const BITMAP_SPAN: u64 = 1 << 27;

/// The change-feed positions of an LSN span that are live: a bit per LSN for the first
/// change of a transaction (nearly all of them), a set for the others. A merge asks once per
/// posting: a bit test, where a binary search over every live position was a cache miss a
/// step.
struct Live {
    lo: u64,
    bits: Vec<u64>,
    others: HashSet<Pos, Fast>,
}

impl Live {
    fn new(lo: u64, hi: u64) -> Self {
        let span = hi.saturating_sub(lo).saturating_add(1);
        let words = if lo <= hi && span <= BITMAP_SPAN {
            span.div_ceil(64) as usize
        } else {
            0
        };
        Live {
            lo,
            bits: vec![0; words],
            others: HashSet::default(),
        }
    }

    fn bit(&self, pos: Pos) -> Option<(usize, u64)> {
        let i = pos.0.checked_sub(self.lo)?;
        let w = usize::try_from(i / 64).ok()?;
        (pos.1 == 0 && w < self.bits.len()).then_some((w, 1 << (i % 64)))
    }

    fn add(&mut self, pos: Pos) {
        match self.bit(pos) {
            Some((w, b)) => self.bits[w] |= b,
            None => {
                self.others.insert(pos);
            }
        }
    }

    fn holds(&self, pos: Pos) -> bool {
        match self.bit(pos) {
            Some((w, b)) => self.bits[w] & b != 0,
            None => self.others.contains(&pos),
        }
    }
}

/// The record `p` stands for.
fn meta_of(p: &PathText) -> Meta {
    Meta {
        mark: p.mark,
        next_seq: p.next_seq,
        segments: p.segments.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Blocks and meta records read back as written.
        #[test]
        fn blocks_and_records_round_trip(
            raw in prop::collection::vec((0u64..1 << 40, 0u32..300, 1u32..50, 1u32..5000), 0..200),
            segs in prop::collection::vec((0u64..1000, 0u64..1 << 30), 0..12),
        ) {
            let mut list: Vec<Posting> = raw
                .iter()
                .map(|&(lsn, sub, tf, dl)| Posting { pos: (lsn, sub), tf, dl })
                .collect();
            settle(&mut list, |_| false);
            let mut back = Vec::new();
            prop_assert!(decode_block(&encode_block(&list), &mut back).is_some());
            prop_assert_eq!(&back, &list);
            let meta = Meta {
                mark: 77,
                next_seq: 1000,
                segments: segs.iter().map(|&(seq, postings)| Segment { seq, postings }).collect(),
            };
            prop_assert_eq!(decode_meta(&encode_meta(&meta)), Some(meta));
        }
    }

    #[test]
    fn a_damaged_block_appends_nothing() {
        let list = [Posting {
            pos: (5, 0),
            tf: 2,
            dl: 9,
        }];
        let mut b = encode_block(&list);
        b.pop();
        let mut out = Vec::new();
        assert!(decode_block(&b, &mut out).is_none());
        assert!(out.is_empty());
    }

    /// Live positions answer alike whether kept as bits or, past the bitmap's span, as a set;
    /// positions outside the walked span are not live.
    #[test]
    fn live_positions_as_bits_or_set() {
        for (lo, hi) in [(100, 300), (5, 5 + BITMAP_SPAN + 1)] {
            let mut live = Live::new(lo, hi);
            let held = [(lo, 0), (lo + 63, 0), (lo + 64, 0), (lo + 64, 2), (hi, 0)];
            for p in held {
                live.add(p);
            }
            for p in held {
                assert!(live.holds(p), "{p:?} in {lo}..={hi}");
            }
            for p in [
                (lo + 1, 0),
                (lo + 64, 1),
                (lo - 1, 0),
                (hi + 1, 0),
                (hi - 1, 0),
            ] {
                assert!(!live.holds(p), "{p:?} in {lo}..={hi}");
            }
        }
        assert!(!Live::new(u64::MAX, 0).holds((0, 0)));
    }

    #[test]
    fn four_of_a_level_make_one_of_the_next() {
        assert_eq!(level(1), 0);
        assert_eq!(level(4096 * 3), 0);
        assert_eq!(level(4096 * 4), 1);
        assert_eq!(level(4096 * 16), 2);
    }
}
