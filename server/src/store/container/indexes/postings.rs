//! Decoded full-text postings, kept in memory per stem until a write changes that stem.
//!
//! A stem's postings are kept by document version (pending, and in segments: see
//! [`super::text_segments`]), and a query needs them by document: each version resolved
//! through the change feed to its item key, one point read per posting. Read once, a stem's
//! postings are a few plain arrays (document keys back to back, term frequencies, lengths)
//! that the next query scans in nanoseconds per posting, as tantivy scans its memory-mapped
//! segments.
//!
//! The segments stay the truth: a list is built from them (and counted as reading them, so a
//! query's charge does not depend on what is cached) and then kept current by the writes
//! themselves. Each write's transaction notes, per stem whose posting of the document it
//! changes, the document's posting now ([`Patch`]); after it commits, a list held takes the
//! patch — applied, in one merge, when the list is next read — and a stem with no list held has
//! its version bucket moved ([`PostingsCache::patch`]), so a list being read during that commit
//! is not kept ([`PostingsCache::keep`]). Reading a stem again costs a point read of the change
//! feed per posting (`postings_read`); a patch costs a copy of the list. Versions live in a
//! fixed table of buckets by hash of (path, stem): two stems that share a bucket only make each
//! other's reads not kept, never the reverse. The lists are held within a byte budget, the
//! oldest dropped first; a list larger than the budget is not kept.

use crate::store::container::{lock, DocPos};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Version buckets (see the module's doc).
const BUCKETS: usize = 4096;

/// Bytes of decoded lists the process keeps, over every container.
pub const BUDGET: usize = 64 << 20;

/// Bytes held by every container's lists (see [`BUDGET`]).
static HELD: AtomicUsize = AtomicUsize::new(0);

/// One stem's postings in item key order: the item keys back to back, and per document the
/// term frequency and length. Stored in key order (postings come by version, see
/// [`Gathered`]), so merges and seeks across lists
/// walk each list's arrays front to back rather than hopping through a permutation —
/// a common word's list is megabytes, and a hop per posting was a cache miss per posting.
#[derive(Debug, Default)]
pub struct Postings {
    keys: Vec<u8>,
    ends: Vec<u32>,
    /// Each key's bytes 4..28 (after the container's number) as three numbers: comparing two
    /// keys' numbers orders most pairs without a byte comparison (see [`Postings::sort_key`]).
    /// Three, because the documents of one logical partition share the 16 bytes of their
    /// EPK: the third reaches into the id. The first apart from the other two: a seek's
    /// probes read the first alone, eight keys to a cache line.
    firsts: Vec<u64>,
    rests: Vec<(u64, u64)>,
    /// (term frequency, document length); (0, 0) when a posting could not be decoded.
    pub tf_dl: Vec<(u32, u32)>,
    /// The postings by impact (worked out the first time a ranking asks).
    by_impact: OnceLock<Impact>,
}

/// Postings gathered in the order they are read (by version), made a [`Postings`] in key
/// order by [`Gathered::finish`].
#[derive(Debug, Default)]
pub struct Gathered {
    keys: Vec<u8>,
    ends: Vec<u32>,
    tf_dl: Vec<(u32, u32)>,
}

impl Gathered {
    /// Adds a document's posting (one per document).
    pub fn push(&mut self, key: &[u8], tf_dl: (u32, u32)) {
        self.keys.extend_from_slice(key);
        self.ends.push(self.keys.len() as u32);
        self.tf_dl.push(tf_dl);
    }

    /// The postings in item key order.
    pub fn finish(self) -> Postings {
        let key = |i: usize| {
            let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
            &self.keys[start..self.ends[i] as usize]
        };
        let heads: Vec<Head> = (0..self.ends.len()).map(|i| head_of(key(i))).collect();
        let mut order: Vec<u32> = (0..self.ends.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| {
            let (a, b) = (a as usize, b as usize);
            (heads[a], key(a)).cmp(&(heads[b], key(b)))
        });
        let mut out = Postings {
            keys: Vec::with_capacity(self.keys.len()),
            ends: Vec::with_capacity(order.len()),
            firsts: Vec::with_capacity(order.len()),
            rests: Vec::with_capacity(order.len()),
            tf_dl: Vec::with_capacity(order.len()),
            by_impact: OnceLock::new(),
        };
        for i in order {
            let i = i as usize;
            out.append(key(i), heads[i], self.tf_dl[i]);
        }
        out
    }
}

/// A key's bytes 4..28 as numbers, zeros past its end (see [`Postings::sort_key`]).
pub type Head = (u64, u64, u64);

/// A key's [`Head`]: its bytes 4..28, zeros past its end.
fn head_of(key: &[u8]) -> Head {
    let mut head = [0u8; 24];
    let tail = key.get(4..).unwrap_or_default();
    let n = tail.len().min(24);
    head[..n].copy_from_slice(&tail[..n]);
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&head[i * 8..i * 8 + 8]);
        u64::from_be_bytes(w)
    };
    (word(0), word(1), word(2))
}

/// A stem's postings in runs of equal term frequency, each run by length, then key: BM25
/// falls (or stays) along a run whatever the corpus's statistics, so a run's first posting
/// bounds the rest of it, and a top k needs only the heads of the runs.
#[derive(Debug, Default)]
pub struct Impact {
    /// Posting numbers, run after run (ascending term frequency).
    pub order: Vec<u32>,
    /// Each run's end in `order`.
    pub runs: Vec<u32>,
}

impl Impact {
    /// The runs, each as its postings.
    pub fn runs(&self) -> impl Iterator<Item = &[u32]> {
        let starts = std::iter::once(0).chain(self.runs.iter().copied());
        starts
            .zip(self.runs.iter())
            .map(|(a, &b)| &self.order[a as usize..b as usize])
    }
}

impl Postings {
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The document of posting `i`.
    pub fn pos(&self, i: usize) -> DocPos {
        DocPos(self.key(i).to_vec())
    }

    /// The item key of posting `i`.
    #[inline]
    pub fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.keys[start..self.ends[i] as usize]
    }

    /// Posting `i`'s key's numbers (see [`Postings::sort_key`]).
    #[inline]
    pub fn head(&self, i: usize) -> Head {
        let (b, c) = self.rests[i];
        (self.firsts[i], b, c)
    }

    /// Posting `i`'s key as it sorts: its [`head`](Postings::head) numbers, then its bytes.
    /// Ordered as the bytes are — the number is the bytes it covers (zeros past a short
    /// key's end, where a prefix sorts first anyway) — and merges and seeks across lists
    /// compare numbers, not bytes, for almost every pair.
    #[inline]
    pub fn sort_key(&self, i: usize) -> (Head, &[u8]) {
        (self.head(i), self.key(i))
    }

    /// The first posting at or after `at` and before `end` whose key is not below `k`
    /// (`end` if none): doubling steps forward, then a binary search within the last step —
    /// a rare word's documents looked for in a common word's list cost a few comparisons
    /// each, not a walk of the list.
    pub fn seek(&self, at: usize, end: usize, k: (Head, &[u8])) -> usize {
        // The first number, then the others, then the bytes, each only when the last ties.
        let below = |n: usize| match self.firsts[n].cmp(&k.0 .0) {
            std::cmp::Ordering::Equal => match self.rests[n].cmp(&(k.0 .1, k.0 .2)) {
                std::cmp::Ordering::Equal => self.key(n) < k.1,
                o => o.is_lt(),
            },
            o => o.is_lt(),
        };
        if at >= end || !below(at) {
            return at;
        }
        // `below(lo)` holds throughout; `hi` is `end` or not below.
        let (mut lo, mut step) = (at, 1usize);
        let mut hi = loop {
            let next = lo + step;
            if next >= end || !below(next) {
                break next.min(end);
            }
            lo = next;
            step *= 2;
        };
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if below(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    }

    /// The postings by impact (see [`Impact`]), worked out once per list.
    pub fn by_impact(&self) -> &Impact {
        self.by_impact.get_or_init(|| {
            let mut order: Vec<u32> = (0..self.len() as u32).collect();
            order.sort_unstable_by(|&a, &b| {
                let (x, y) = (self.tf_dl[a as usize], self.tf_dl[b as usize]);
                // Posting numbers are in key order.
                x.cmp(&y).then(a.cmp(&b))
            });
            let mut runs = Vec::new();
            for i in 1..order.len() {
                if self.tf_dl[order[i] as usize].0 != self.tf_dl[order[i - 1] as usize].0 {
                    runs.push(i as u32);
                }
            }
            if !order.is_empty() {
                runs.push(order.len() as u32);
            }
            Impact { order, runs }
        })
    }

    /// The postings whose item keys `keep` accepts, in the same order, with this list's
    /// impact order carried over (filtering keeps it), so a query over some partitions does
    /// not sort its share of a word's postings again.
    pub(super) fn filtered(&self, keep: impl Fn(&[u8]) -> bool) -> Postings {
        let mut out = Postings::default();
        // Each posting's number in `out`, if kept.
        let mut kept = vec![u32::MAX; self.len()];
        for (i, to) in kept.iter_mut().enumerate() {
            if keep(self.key(i)) {
                *to = out.len() as u32;
                out.append(self.key(i), self.head(i), self.tf_dl[i]);
            }
        }
        let carry = |order: &[u32]| -> Vec<u32> {
            order
                .iter()
                .map(|&i| kept[i as usize])
                .filter(|&n| n != u32::MAX)
                .collect()
        };
        let impact = self.by_impact();
        let mut order = Vec::with_capacity(out.len());
        let mut runs = Vec::new();
        for run in impact.runs() {
            order.extend(carry(run));
            if runs.last().copied().unwrap_or(0) < order.len() as u32 {
                runs.push(order.len() as u32);
            }
        }
        let _ = out.by_impact.set(Impact { order, runs });
        out
    }

    /// This list with `patches` applied in order (the last for a document wins): each sets
    /// the document's posting, or removes it. One merge in key order.
    pub fn patched(&self, patches: &[DocPatch]) -> Postings {
        let mut last: Vec<(&[u8], TfDl)> = Vec::with_capacity(patches.len());
        let mut order: Vec<usize> = (0..patches.len()).collect();
        // By key, later patches after earlier ones: the last of each key is kept.
        order.sort_by(|&a, &b| patches[a].0.cmp(&patches[b].0).then(a.cmp(&b)));
        for i in order {
            let (k, now) = (&patches[i].0[..], patches[i].1);
            match last.last_mut() {
                Some(l) if l.0 == k => l.1 = now,
                _ => last.push((k, now)),
            }
        }
        let mut out = Postings::default();
        let mut at = 0;
        for (k, now) in last {
            while at < self.len() && self.key(at) < k {
                out.append(self.key(at), self.head(at), self.tf_dl[at]);
                at += 1;
            }
            if at < self.len() && self.key(at) == k {
                at += 1;
            }
            if let Some(tf_dl) = now {
                out.append(k, head_of(k), tf_dl);
            }
        }
        while at < self.len() {
            out.append(self.key(at), self.head(at), self.tf_dl[at]);
            at += 1;
        }
        out
    }

    /// Appends the posting that follows the list's last in key order.
    fn append(&mut self, key: &[u8], head: Head, tf_dl: (u32, u32)) {
        self.keys.extend_from_slice(key);
        self.ends.push(self.keys.len() as u32);
        self.firsts.push(head.0);
        self.rests.push((head.1, head.2));
        self.tf_dl.push(tf_dl);
    }

    fn bytes(&self) -> usize {
        // With the impact order rankings add.
        self.keys.capacity()
            + self.ends.capacity() * 8
            + self.firsts.capacity() * 8
            + self.rests.capacity() * 16
            + self.tf_dl.capacity() * 8
            + 128
    }
}

/// (index generation, path id, the span's low bound: `stem \x01` as a term).
pub type Key = (u16, [u8; 8], Vec<u8>);

/// What a committed write does to one stem's list: the document at item key `item` now has
/// the posting `now` (term frequency, length), or none.
#[derive(Debug, Clone)]
pub struct Patch {
    pub key: Key,
    pub item: Vec<u8>,
    pub now: Option<(u32, u32)>,
}

/// A document's posting of a stem (term frequency, length), or none.
pub type TfDl = Option<(u32, u32)>;

/// A patch as a list holds it: the document's item key and its posting now.
pub type DocPatch = (Vec<u8>, TfDl);

/// Patches a list holds before they are applied (more, and the list is dropped).
const PATCHES: usize = 4096;

/// A container's lists and the versions that keep them honest (see the module's doc).
pub struct PostingsCache {
    pub(super) versions: Box<[AtomicU64]>,
    /// Lists held per bucket: a write patches only the stems of buckets that hold some (the
    /// others it passes as buckets, see [`PostingsCache::patch`]).
    held_in: Box<[AtomicU32]>,
    lists: Mutex<Lists>,
}

/// A list held: its postings and the patches committed since, applied when it is next read.
struct Held {
    list: Arc<Postings>,
    patches: Vec<DocPatch>,
}

#[derive(Default)]
struct Lists {
    map: HashMap<Key, Held>,
    order: VecDeque<Key>,
    bytes: usize,
}

impl Lists {
    fn release(&mut self, n: usize) {
        self.bytes -= n;
        HELD.fetch_sub(n, Ordering::AcqRel);
    }

    fn drop_list(&mut self, key: &Key, held_in: &[AtomicU32]) {
        if let Some(h) = self.map.remove(key) {
            self.release(h.list.bytes());
            held_in[bucket(&key.1, &key.2)].fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Drop for PostingsCache {
    fn drop(&mut self) {
        let held = lock(&self.lists).bytes;
        HELD.fetch_sub(held, Ordering::AcqRel);
    }
}

impl Default for PostingsCache {
    fn default() -> Self {
        Self {
            versions: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            held_in: (0..BUCKETS).map(|_| AtomicU32::new(0)).collect(),
            lists: Mutex::new(Lists::default()),
        }
    }
}

/// The version bucket of a stem's list: `lo` is its span's low bound (`stem \x01` as a
/// term), `pid` its postings path's id.
pub fn bucket(pid: &[u8; 8], lo: &[u8]) -> usize {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(pid);
    h.update(lo);
    (h.digest() % BUCKETS as u64) as usize
}

impl PostingsCache {
    /// Whether any list of bucket `b` is held: a write builds [`Patch`]es only for stems of
    /// such buckets, and passes the others' buckets to [`PostingsCache::patch`].
    pub fn holds(&self, b: usize) -> bool {
        self.held_in
            .get(b)
            .is_some_and(|n| n.load(Ordering::Acquire) > 0)
    }

    /// Takes a write's patches once it committed: a list held takes its stem's patch, to be
    /// applied when next read; a stem with no list held has its bucket's version moved, so a
    /// list being read meanwhile is not kept ([`PostingsCache::keep`]). `touched` are the
    /// buckets of stems the write changed without a patch (none of their lists was held when
    /// it ran): moved too, and a list kept there since is dropped. A write whose outcome is
    /// unknown drops the lists it may have changed instead.
    pub fn patch(&self, patches: &[Patch], touched: &[usize], committed: bool) {
        let mut lists = lock(&self.lists);
        let bump = |b: usize| {
            if let Some(v) = self.versions.get(b) {
                v.fetch_add(1, Ordering::AcqRel);
            }
        };
        for p in patches {
            match lists.map.get_mut(&p.key) {
                Some(h) if committed && h.patches.len() < PATCHES => {
                    h.patches.push((p.item.clone(), p.now));
                }
                Some(_) => lists.drop_list(&p.key, &self.held_in),
                None => {}
            }
            if !lists.map.contains_key(&p.key) {
                bump(bucket(&p.key.1, &p.key.2));
            }
        }
        for &b in touched {
            if self.holds(b) {
                let stale: Vec<Key> = lists
                    .map
                    .keys()
                    .filter(|k| bucket(&k.1, &k.2) == b)
                    .cloned()
                    .collect();
                for k in &stale {
                    lists.drop_list(k, &self.held_in);
                }
            }
            bump(b);
        }
    }

    /// The list held under `key`, its patches applied.
    pub(super) fn get(&self, key: &Key) -> Option<Arc<Postings>> {
        let (list, patches) = {
            let lists = lock(&self.lists);
            let h = lists.map.get(key)?;
            if h.patches.is_empty() {
                return Some(Arc::clone(&h.list));
            }
            (Arc::clone(&h.list), h.patches.clone())
        };
        let patched = Arc::new(list.patched(&patches));
        let mut lists = lock(&self.lists);
        let mut grew = None;
        if let Some(h) = lists.map.get_mut(key) {
            // Unless another reader (or a drop) got there first.
            if Arc::ptr_eq(&h.list, &list) && h.patches.len() >= patches.len() {
                h.patches.drain(..patches.len());
                h.list = Arc::clone(&patched);
                grew = Some((list.bytes(), patched.bytes()));
            }
        }
        if let Some((was, now)) = grew {
            lists.release(was);
            lists.bytes += now;
            HELD.fetch_add(now, Ordering::AcqRel);
        }
        Some(patched)
    }

    /// Keeps `p`, read while `key`'s bucket had `version`, unless a write committed since
    /// (the version moved: `p` may miss it) or a list is held already; and only if it fits
    /// the process's budget once this container's oldest lists are dropped (another
    /// container's lists are its own to drop).
    pub(super) fn keep(&self, key: Key, version: u64, p: Arc<Postings>) {
        let cost = p.bytes();
        if cost > BUDGET / 4 {
            return;
        }
        let mut lists = lock(&self.lists);
        let b = bucket(&key.1, &key.2);
        let moved = self.versions[b].load(Ordering::Acquire) != version;
        if moved || lists.map.contains_key(&key) {
            return;
        }
        while HELD.load(Ordering::Acquire) + cost > BUDGET {
            let Some(k) = lists.order.pop_front() else {
                return;
            };
            lists.drop_list(&k, &self.held_in);
        }
        if !lists.order.contains(&key) {
            lists.order.push_back(key.clone());
        }
        let held = Held {
            list: p,
            patches: Vec::new(),
        };
        self.held_in[b].fetch_add(1, Ordering::AcqRel);
        lists.map.insert(key, held);
        lists.bytes += cost;
        HELD.fetch_add(cost, Ordering::AcqRel);
    }

    /// Bytes of the lists held.
    pub fn held_bytes(&self) -> usize {
        lock(&self.lists).bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Postings gathered in entry order come out in key order, each with its own numbers.
    #[test]
    fn gathered_postings_are_kept_in_key_order() {
        let mut g = Gathered::default();
        // One container's keys (they share its 4-byte number), short and long.
        let long = [&[0, 0, 0, 1][..], &[7; 24], b"b"].concat();
        let longer = [&[0, 0, 0, 1][..], &[7; 24], b"ab"].concat();
        let keys: [&[u8]; 6] = [
            b"\0\0\0\x01zz",
            &longer,
            b"\0\0\0\x01a",
            &long,
            b"\0\0\0\x01a\0",
            b"\0\0\0\x01",
        ];
        for (i, k) in keys.iter().enumerate() {
            g.push(k, (i as u32, 10 + i as u32));
        }
        let p = g.finish();
        let mut sorted = keys.to_vec();
        sorted.sort();
        let got: Vec<&[u8]> = (0..p.len()).map(|i| p.key(i)).collect();
        assert_eq!(got, sorted);
        for i in 0..p.len() {
            let was = keys.iter().position(|k| *k == p.key(i)).unwrap_or(99) as u32;
            assert_eq!(p.tf_dl[i], (was, 10 + was));
            assert_eq!(p.sort_key(i).0, head_of(p.key(i)));
        }
        // A seek lands on the first key not below the one sought, within its bounds.
        assert_eq!(p.seek(0, p.len(), p.sort_key(3)), 3);
        assert_eq!(p.seek(4, p.len(), p.sort_key(3)), 4);
        assert_eq!(p.seek(0, 2, p.sort_key(3)), 2);
    }

    /// A filtered list's carried-over impact order is the one it would work out.
    #[test]
    fn a_share_of_a_list_keeps_its_orders() {
        let mut g = Gathered::default();
        for (i, tf) in [3u32, 1, 2, 1, 3, 2, 1, 1].iter().enumerate() {
            let key = format!("{}-doc-{}", (7 - i) % 3, i);
            g.push(key.as_bytes(), (*tf, 20 - i as u32 % 4));
        }
        let all = g.finish();
        for keep in [
            |k: &[u8]| k[0] != b'1',
            |k: &[u8]| k[0] == b'2',
            |_: &[u8]| false,
        ] {
            let share = all.filtered(keep);
            let mut fresh = Gathered::default();
            for i in 0..share.len() {
                fresh.push(share.key(i), share.tf_dl[i]);
            }
            let fresh = fresh.finish();
            let keys = |p: &Postings| (0..p.len()).map(|i| p.key(i).to_vec()).collect::<Vec<_>>();
            assert_eq!(keys(&share), keys(&fresh));
            assert_eq!(share.by_impact().order, fresh.by_impact().order);
            assert_eq!(share.by_impact().runs, fresh.by_impact().runs);
        }
    }

    /// A list read while a write committed is not kept; a held list takes writes as patches
    /// (the last for a document wins); the budget drops the oldest lists.
    #[test]
    fn held_lists_take_patches_and_racing_reads_are_not_kept() {
        let cache = PostingsCache::default();
        let one = |k: &[u8], tf_dl| {
            let mut p = Gathered::default();
            p.push(k, tf_dl);
            Arc::new(p.finish())
        };
        let key: Key = (0, [1; 8], b"s".to_vec());
        let b = bucket(&key.1, &key.2);
        let patch = |item: &[u8], now| Patch {
            key: key.clone(),
            item: item.to_vec(),
            now,
        };
        // Read at version 0; a write commits before the read is kept.
        cache.patch(&[patch(b"doc-2", Some((1, 3)))], &[], true);
        cache.keep(key.clone(), 0, one(b"doc-1", (2, 9)));
        assert!(cache.get(&key).is_none(), "a racing read is not kept");
        let now = cache.versions[b].load(Ordering::Acquire);
        cache.keep(key.clone(), now, one(b"doc-1", (2, 9)));
        cache.patch(
            &[
                patch(b"doc-3", Some((1, 4))),
                patch(b"doc-1", None),
                patch(b"doc-0", Some((5, 5))),
                patch(b"doc-3", Some((2, 4))),
            ],
            &[],
            true,
        );
        assert_eq!(
            cache.versions[b].load(Ordering::Acquire),
            now,
            "patched, not moved"
        );
        let got = cache.get(&key).expect("held");
        let rows: Vec<(&[u8], (u32, u32))> =
            (0..got.len()).map(|i| (got.key(i), got.tf_dl[i])).collect();
        assert_eq!(rows, vec![(&b"doc-0"[..], (5, 5)), (&b"doc-3"[..], (2, 4))]);
        assert!(
            Arc::ptr_eq(&got, &cache.get(&key).expect("held")),
            "applied once"
        );
        // An unknown outcome drops the list.
        cache.patch(&[patch(b"doc-9", Some((1, 1)))], &[], false);
        assert!(cache.get(&key).is_none());
        assert!(!cache.holds(b));
        // A list kept after a write found its bucket empty is dropped when that write commits.
        let v = cache.versions[b].load(Ordering::Acquire);
        cache.keep(key.clone(), v, one(b"doc-1", (2, 9)));
        assert!(cache.holds(b));
        cache.patch(&[], &[b], true);
        assert!(cache.get(&key).is_none() && !cache.holds(b));
        for i in 0..(BUDGET / (1 << 20) + 8) {
            let mut big = Gathered::default();
            big.push(&vec![0u8; 1 << 20], (1, 1));
            let k: Key = (0, [2; 8], i.to_be_bytes().to_vec());
            let v = cache.versions[bucket(&k.1, &k.2)].load(Ordering::Acquire);
            cache.keep(k, v, Arc::new(big.finish()));
        }
        assert!(cache.held_bytes() <= BUDGET, "{}", cache.held_bytes());
    }
}
