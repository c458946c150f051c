//! How many superseded item versions a container's key ranges may still hold where a scan
//! reads them, so that a scan can read the items themselves when few are left.
//!
//! A scan of the items reads each document in one ordered pass, where the item directory
//! costs a second ordered pass and a point read per document (together a fifth of a
//! single-partition query's server CPU). But an LSM store keeps every version of a key in
//! its memtable until it flushes it, and a scan meets them all: a partition whose item was
//! updated 100,000 times was once scanned at a twelfth of its speed through the items, hence
//! the directory. So each write that supersedes a version (a replace, an upsert of an
//! existing item, a delete) counts itself against the first byte of its item key after the
//! container's prefix (the EPK's first byte: a physical partition's keys are a run of these),
//! with the store's generation then ([`crate::store::kv::Kv::generation`]); counts of
//! generations the store has flushed since ([`crate::store::kv::Kv::unsettled_from`]) no
//! longer count. A scan reads the items directly when at most [`MAX_SUPERSEDED`] versions
//! may lie in its range, else through the directory.
//!
//! A count is never too low: a write counts after it commits (whether or not the commit
//! succeeded), a generation's count carries into the next until it is flushed, and a
//! container opens with every byte full until what the store replayed from its journal is
//! flushed ([`crate::store::kv::Kv::replayed`]; a clean stop leaves nothing to replay).
//! Counts decide only how fast a scan is, never what it returns: either way it reads each
//! item's newest version.

use std::sync::atomic::{AtomicU64, Ordering};

/// Superseded versions a scan may step over rather than walk the directory: about the cost
/// of the directory's point reads of a ten-document partition.
pub(super) const MAX_SUPERSEDED: u64 = 64;

/// Bits of a mark that hold the count; the generation takes the others.
const COUNT_BITS: u32 = 20;
const COUNT_MAX: u64 = (1 << COUNT_BITS) - 1;

fn unpack(m: u64) -> (u64, u64) {
    (m >> COUNT_BITS, m & COUNT_MAX)
}

fn pack(generation: u64, count: u64) -> u64 {
    (generation << COUNT_BITS) | count.min(COUNT_MAX)
}

/// Per first key byte: the newest generation it was superseded in and how many versions
/// since its last flushed generation.
pub(super) struct Superseded {
    marks: Box<[AtomicU64]>,
}

impl Superseded {
    /// A container as it opens: every byte full up to generation `replayed` when the store
    /// replayed writes it may hold (until that generation is flushed), else empty.
    pub(super) fn new(replayed: Option<u64>) -> Self {
        let mark = match replayed {
            Some(g) => pack(g, COUNT_MAX),
            None => 0,
        };
        Self {
            marks: (0..256).map(|_| AtomicU64::new(mark)).collect(),
        }
    }

    /// Counts one superseded version of each item key of `keys` (each `cid | suffix`),
    /// written at generation `g`; `unsettled_from` is asked when a byte's generation moves
    /// on.
    pub(super) fn count<'a>(
        &self,
        keys: impl Iterator<Item = &'a [u8]>,
        g: u64,
        unsettled_from: impl Fn() -> u64,
    ) {
        for k in keys {
            let mark = &self.marks[usize::from(k.get(4).copied().unwrap_or(0))];
            let mut cur = mark.load(Ordering::Relaxed);
            loop {
                let (at, n) = unpack(cur);
                let next = if at >= g {
                    pack(at, n + 1)
                } else if at < unsettled_from() {
                    pack(g, 1)
                } else {
                    pack(g, n + 1)
                };
                match mark.compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => break,
                    Err(now) => cur = now,
                }
            }
        }
    }

    /// How many superseded versions the item keys of `[start, end)` (both `cid | …`; an
    /// `end` past the container's prefix reaches its last byte) may hold, given the oldest
    /// generation not yet flushed.
    pub(super) fn within(&self, start: &[u8], end: &[u8], unsettled_from: u64) -> u64 {
        let first = usize::from(start.get(4).copied().unwrap_or(0));
        let last = match (end.get(..4), end.get(4)) {
            (Some(p), Some(&b)) if start.get(..4) == Some(p) => usize::from(b),
            _ => 255,
        };
        self.marks
            .get(first..=last.max(first))
            .unwrap_or_default()
            .iter()
            .map(|m| unpack(m.load(Ordering::Relaxed)))
            .filter(|(at, _)| *at >= unsettled_from)
            .map(|(_, n)| n)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_generations_until_flushed() {
        assert_eq!(
            Superseded::new(None).within(&[0, 0, 0, 7], &[0, 0, 0, 8], 1),
            0
        );
        let s = Superseded::new(Some(1));
        let key = |b: u8| vec![0, 0, 0, 7, b, 9, 9];
        let k = key(0x40);
        let one = |s: &Superseded, from| s.within(&k, &k, from);
        // Opened full: nothing is known until generation 1 is flushed.
        assert_eq!(s.within(&k, &key(0x41), 1), 2 * COUNT_MAX);
        assert_eq!(s.within(&k, &key(0x41), 2), 0);
        // Generation 1 flushed: counting starts over.
        s.count([&k[..]].into_iter(), 2, || 2);
        s.count([&k[..]].into_iter(), 2, || 2);
        assert_eq!(one(&s, 2), 2);
        // Generation 2 not flushed when 3 counts: carried over.
        s.count([&k[..]].into_iter(), 3, || 2);
        assert_eq!(one(&s, 2), 3);
        assert_eq!(one(&s, 3), 3);
        // 3 flushed when 4 counts: one.
        s.count([&k[..]].into_iter(), 4, || 4);
        assert_eq!(one(&s, 4), 1);
        // A count that read an older generation adds to the newer one.
        s.count([&k[..]].into_iter(), 3, || 4);
        assert_eq!(one(&s, 4), 2);
        // Everything flushed: nothing.
        assert_eq!(one(&s, 5), 0);
        // Other bytes are not affected; the container's whole range sums them all.
        assert_eq!(s.within(&key(0x41), &key(0x80), 4), 0);
        assert_eq!(s.within(&[0, 0, 0, 7], &[0, 0, 0, 8], 4), 2);
    }
}
