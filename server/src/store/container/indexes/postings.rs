//! Decoded full-text postings, kept in memory per stem until a write changes that stem.
//!
//! A stem's postings are index entries, one per document: BM25 and `FullTextContains` read
//! every one of them per query, and reading an LSM entry (merging the tables' iterators,
//! copying its key) cost about as much as everything else a query does — 60–70% of a BM25
//! query's server CPU over a million documents. Read once, a stem's postings are a few plain
//! arrays (document keys back to back, term frequencies, lengths) that the next query scans in
//! nanoseconds per posting, as tantivy scans its memory-mapped segments.
//!
//! The entries stay the truth: a list is built from them (and counted as reading them, so a
//! query's charge does not depend on what is cached), and is used only while no write has
//! touched its stem since. Each write's transaction notes the stems whose postings it adds or
//! removes ([`touched`]); after it commits, their versions move on ([`PostingsCache::bump`]), so
//! a list built before — or during — that commit is never served again. Versions live in a
//! fixed table of buckets by hash of (path, stem): two stems that share a bucket invalidate
//! each other, never the reverse. The lists are held within a byte budget, the oldest dropped
//! first; a list larger than the budget is not kept.

use crate::store::container::{lock, DocPos};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Version buckets (see the module's doc).
const BUCKETS: usize = 4096;

/// Bytes of decoded lists the process keeps, over every container.
pub const BUDGET: usize = 64 << 20;

/// Bytes held by every container's lists (see [`BUDGET`]).
static HELD: AtomicUsize = AtomicUsize::new(0);

/// One stem's postings in item key order: the item keys back to back, and per document the
/// posting's term (`stem \x01 tf \x01 length`) decoded. Stored in key order (the entries
/// come by frequency and length first, see [`Gathered`]), so merges and seeks across lists
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

/// Postings gathered in the order the index entries come (by frequency and length, then
/// key), made a [`Postings`] in key order by [`Gathered::finish`].
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
pub(super) type Key = (u16, [u8; 8], Vec<u8>);

/// A container's lists and the versions that keep them honest (see the module's doc).
pub struct PostingsCache {
    pub(super) versions: Box<[AtomicU64]>,
    lists: Mutex<Lists>,
}

#[derive(Default)]
struct Lists {
    map: HashMap<Key, (u64, Arc<Postings>)>,
    order: VecDeque<Key>,
    bytes: usize,
}

impl Lists {
    fn release(&mut self, n: usize) {
        self.bytes -= n;
        HELD.fetch_sub(n, Ordering::AcqRel);
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
            lists: Mutex::new(Lists::default()),
        }
    }
}

pub(super) fn bucket(pid: &[u8; 8], lo: &[u8]) -> usize {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(pid);
    h.update(lo);
    (h.digest() % BUCKETS as u64) as usize
}

/// The bucket of a posting entry `(pid, term)` a write adds or removes: its term up to the
/// first `\x01`, as its stem's span starts. `None` for terms that are not postings.
pub fn touched(pid: u64, term: &[u8]) -> Option<usize> {
    let cut = term.iter().skip(1).position(|&b| b == 1)? + 2;
    Some(bucket(&pid.to_be_bytes(), &term[..cut]))
}

impl PostingsCache {
    /// Moves the versions of the buckets a committed write touched.
    pub fn bump(&self, buckets: &[usize]) {
        for &b in buckets {
            if let Some(v) = self.versions.get(b) {
                v.fetch_add(1, Ordering::AcqRel);
            }
        }
    }

    pub(super) fn get(&self, key: &Key, version: u64) -> Option<Arc<Postings>> {
        let lists = lock(&self.lists);
        let (v, p) = lists.map.get(key)?;
        (*v == version).then(|| Arc::clone(p))
    }

    /// Keeps `p` if it fits the process's budget once this container's oldest lists are
    /// dropped (another container's lists are its own to drop).
    pub(super) fn keep(&self, key: Key, version: u64, p: Arc<Postings>) {
        let cost = p.bytes();
        if cost > BUDGET / 4 {
            return;
        }
        let mut lists = lock(&self.lists);
        if let Some((_, old)) = lists.map.remove(&key) {
            lists.release(old.bytes());
        }
        while HELD.load(Ordering::Acquire) + cost > BUDGET {
            let Some(k) = lists.order.pop_front() else {
                return;
            };
            if let Some((_, p)) = lists.map.remove(&k) {
                lists.release(p.bytes());
            }
        }
        if !lists.order.contains(&key) {
            lists.order.push_back(key.clone());
        }
        lists.map.insert(key, (version, p));
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
    use serde_json::Value;
    use strata_query::index::fulltext::stem_span;
    use strata_query::index::term;

    /// A posting's term and its stem's span land in the same bucket; a stem with `\x01` in it
    /// is not one the reader caches.
    #[test]
    fn a_posting_and_its_stem_span_share_a_bucket() {
        let pid = 0x1234_5678_9abc_def0u64;
        for stem in ["swim", "a", "déjà", "x\u{0}y"] {
            let t = term::encode(&Value::String(format!("{stem}\u{1}3\u{1}17")));
            let span = stem_span(stem);
            assert_eq!(
                touched(pid, &t),
                Some(bucket(&pid.to_be_bytes(), &span.lo)),
                "{stem:?}"
            );
        }
        assert_eq!(touched(pid, &term::encode(&Value::from(5))), None);
    }

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

    /// A list built under a version is served only under that version; the budget drops the
    /// oldest lists.
    #[test]
    fn a_bumped_bucket_retires_its_lists() {
        let cache = PostingsCache::default();
        let mut p = Gathered::default();
        p.push(b"doc-1", (2, 9));
        let p = p.finish();
        let key: Key = (0, [1; 8], b"s".to_vec());
        let b = bucket(&key.1, &key.2);
        cache.keep(key.clone(), 0, Arc::new(p));
        let got = cache.get(&key, 0).expect("cached");
        assert_eq!((got.key(0), got.tf_dl[0]), (&b"doc-1"[..], (2, 9)));
        cache.bump(&[b]);
        let now = cache.versions[b].load(Ordering::Acquire);
        assert!(cache.get(&key, now).is_none(), "a write retired it");
        for i in 0..(BUDGET / (1 << 20) + 8) {
            let mut big = Gathered::default();
            big.push(&vec![0u8; 1 << 20], (1, 1));
            let big = big.finish();
            cache.keep((0, [2; 8], i.to_be_bytes().to_vec()), 0, Arc::new(big));
        }
        assert!(cache.held_bytes() <= BUDGET, "{}", cache.held_bytes());
    }
}
