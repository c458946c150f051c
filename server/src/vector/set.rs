//! The vectors of one embedding path of a container, in memory, each under the key of the
//! document it came from: `f32` rows (the document's numbers, rounded to `f32`), `i8` codes
//! for the quantized kinds (of unit rows for cosine), and a [`Graph`] over them for diskANN.
//! Slots are appended; an update or delete leaves a tombstone (the key is gone, the row stays
//! as a graph waypoint).
//!
//! Each slot also knows the document version its row came from and whether the row holds
//! that version's numbers exactly (each one a `float32` value, as embeddings written from a
//! `Float32Array` or numpy `float32` are): then a search can give the `f64` score the
//! evaluator would compute from the document, and a query need not parse the document's
//! vector to order it.

mod pairs;
mod snapshot;
mod upkeep;

use pairs::Pairs;
pub use upkeep::Work;

use super::graph::Graph;
use super::kernels::{dot, l2sq, normalize};
use super::quant::{Quantizer, QueryCode};
use super::rows::{Place, Rows};
use super::{Distance, IndexKind, Params};
use hashbrown::HashTable;
use prefetch_index::prefetch_index;

/// A document key's hash in [`VectorSet`]'s table of slots.
fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

/// How far ahead [`VectorSet::measure`] fetches.
const AHEAD: usize = 2;

/// Vectors trained on before codes exist: fewer are scanned exactly.
pub const TRAIN_AT: usize = 1000;

/// Most rows the quantizer is fitted to (spread over all of them).
const TRAIN_SAMPLE: usize = 20_000;

/// The set (see the module comment).
#[derive(Debug)]
pub struct VectorSet {
    pub params: Params,
    rows: Rows,
    /// Where rows past the memory budget go (`None`: rows in memory); a copy of the set
    /// keeps its rows there too.
    place: Option<Place>,
    /// `|v|²` per slot (euclidean distances over codes; cosine's unit length).
    norms: Vec<f32>,
    /// Where each slot's row came from.
    origins: Vec<Origin>,
    codes: Vec<i8>,
    quant: Option<Quantizer>,
    /// Live vectors when the quantizer was last fitted (see [`VectorSet::train`]).
    trained_on: usize,
    /// Which copy of the set this is (see [`Work`]).
    epoch: u64,
    keys: Vec<Option<Box<[u8]>>>,
    /// The shard each slot joined (an index into `shards`).
    shard_of: Vec<u32>,
    /// Each slot's place in its shard's `members` (its graph node).
    node_of: Vec<u32>,
    /// The slot of each live key, found through `keys` (each key is held once).
    slot_of: HashTable<u32>,
    /// Bytes of the live keys.
    key_bytes: usize,
    shards: Vec<Shard>,
}

/// The slots of one shard key value (the policy's `vectorIndexShardKey`; without one, every
/// vector of the path is in one shard), with their own graph: a search pinned to a value
/// walks only that value's vectors, and one over the whole container walks one graph, not one
/// per physical partition (a search over part of the key space filters by key, and splits
/// and merges leave the shards as they are).
#[derive(Debug)]
struct Shard {
    /// The shard key value's identity (its EPK under the shard path; empty without a key).
    value: Vec<u8>,
    /// The smallest and largest key ever in the shard: a search whose key range holds both
    /// needs no filter.
    min_key: Vec<u8>,
    max_key: Vec<u8>,
    /// Global slots, in the order they joined; graph node `i` is `members[i]`.
    members: Vec<u32>,
    graph: Option<Graph>,
    /// Linked nodes whose slots were deleted since they were last taken out of the graph.
    doomed: usize,
    /// Taking them out, when under way (see `upkeep`).
    pass: Option<upkeep::Pass>,
}

/// Where a slot's row came from: its document's version (the write's LSN and place in its
/// transaction) and whether the row's `f32` values are the document's numbers exactly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Origin {
    pub lsn: u64,
    pub sub: u32,
    pub exact: bool,
}

/// One vector a search found.
#[derive(Debug)]
pub struct Hit {
    /// The set's distance (smaller is nearer).
    pub distance: f32,
    pub key: Box<[u8]>,
    pub origin: Origin,
    /// `VectorDistance`'s `f64` score of the document's vector, computed from the row as the
    /// evaluator computes it from the document, when the row is exact and the search was
    /// given the query's `f64` numbers (`None` also for cosine with a zero vector).
    pub score: Option<f64>,
}

/// What a search found: keys closest first, and whether every live vector the filter accepts
/// is among them (else a caller that needs more asks again with a larger `want`).
#[derive(Debug, Default)]
pub struct Found {
    pub keys: Vec<Hit>,
    pub exhausted: bool,
    /// Vectors whose distance was computed.
    pub scored: usize,
}

/// How a search trades exactness for speed (the `VectorDistance` options).
#[derive(Debug, Clone, Copy)]
pub struct SearchOpts {
    /// Scan every vector exactly whatever the index (`bruteForce`).
    pub brute_force: bool,
    /// Candidates re-ranked exactly per result wanted (`quantizedVectorListMultiplier`).
    pub rerank: usize,
    /// Beam length of a graph search (`searchListSizeMultiplier` × k, at least).
    pub list: usize,
}

/// A query prepared for the set's metric.
struct Query {
    v: Vec<f32>,
    norm: f32,
    code: Option<QueryCode>,
}

impl VectorSet {
    /// A set with its rows in memory.
    pub fn new(params: Params) -> Self {
        Self::with_rows_in(params, None)
    }

    /// A set whose rows past `place`'s budget go to a file in its folder when its kind
    /// searches over codes (quantizedFlat and diskANN; flat scans its rows), else in memory
    /// (see [`super::rows`]).
    pub fn with_rows_in(params: Params, place: Option<&Place>) -> Self {
        let place = place.filter(|_| params.kind != IndexKind::Flat);
        let rows = match place {
            Some(p) => Rows::in_place(params.dims, p),
            None => Rows::in_memory(params.dims),
        };
        Self {
            params,
            rows,
            place: place.cloned(),
            norms: Vec::new(),
            origins: Vec::new(),
            codes: Vec::new(),
            quant: None,
            trained_on: 0,
            epoch: 0,
            keys: Vec::new(),
            shard_of: Vec::new(),
            node_of: Vec::new(),
            slot_of: HashTable::new(),
            key_bytes: 0,
            shards: Vec::new(),
        }
    }

    /// Live vectors.
    pub fn len(&self) -> usize {
        self.slot_of.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slot_of.is_empty()
    }

    /// Slots not yet in the graph (0 without one).
    pub fn unlinked(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.graph.as_ref().map_or(0, |g| s.members.len() - g.len()))
            .sum()
    }

    /// Tombstones among the slots.
    pub fn dead(&self) -> usize {
        self.keys.len() - self.slot_of.len()
    }

    /// Bytes held (rows, codes, graph, keys).
    pub fn held_bytes(&self) -> usize {
        self.rows.held_bytes()
            + self.norms.capacity() * 4
            + self.origins.capacity() * std::mem::size_of::<Origin>()
            + self.codes.capacity()
            + self
                .shards
                .iter()
                .map(|s| s.members.capacity() * 4 + s.graph.as_ref().map_or(0, Graph::held_bytes))
                .sum::<usize>()
            + self.key_bytes
            + self.keys.len() * 24
            + self.slot_of.capacity() * 5
    }

    /// The slot of live `key`.
    fn slot(&self, key: &[u8]) -> Option<u32> {
        let keys = &self.keys;
        self.slot_of
            .find(key_hash(key), |&s| keys[s as usize].as_deref() == Some(key))
            .copied()
    }

    /// Takes live `key` out of the table; its slot.
    fn unlist(&mut self, key: &[u8]) -> Option<u32> {
        let keys = &self.keys;
        let found = self
            .slot_of
            .find_entry(key_hash(key), |&s| keys[s as usize].as_deref() == Some(key));
        found.ok().map(|e| e.remove().0)
    }

    /// Puts `slot` (its key already in `keys`) in the table.
    fn list(&mut self, slot: u32) {
        let keys = &self.keys;
        let hash = |s: u32| keys[s as usize].as_deref().map_or(0, key_hash);
        self.slot_of.insert_unique(hash(slot), slot, |&s| hash(s));
    }

    /// Sets the vector of `key` (`None`: it has none, or the document is gone); `shard` is
    /// its shard key value's identity (empty without a shard key), `origin` the version it
    /// came from.
    pub fn set(&mut self, key: &[u8], v: Option<&[f32]>, shard: &[u8], origin: Origin) {
        if let Some(slot) = self.holds(key, v, shard) {
            // The same vector again (a write that changed other properties, or a build
            // replaying a write it also read): nothing to replace, nothing to relink; only
            // the version it is known to be from moves on.
            self.origins[slot as usize] = origin;
            return;
        }
        if let Some(slot) = self.unlist(key) {
            self.keys[slot as usize] = None;
            self.key_bytes -= key.len();
            let shard = &mut self.shards[self.shard_of[slot as usize] as usize];
            let node = self.node_of[slot as usize] as usize;
            if shard.graph.as_ref().is_some_and(|g| node < g.len()) {
                shard.doomed += 1;
            }
        }
        let Some(v) = v.filter(|v| v.len() == self.params.dims) else {
            return;
        };
        let row = v;
        let slot = self.keys.len() as u32;
        self.norms.push(dot(row, row));
        self.origins.push(origin);
        // Rows and codes grow by an eighth at a time, not doubled: they are most of the set's
        // memory (codes sized exactly by a refit and then doubled took 18 MB more at 100k ×
        // 768).
        if let Some(q) = &self.quant {
            let at = self.codes.len();
            if self.codes.capacity() < at + row.len() {
                self.codes.reserve_exact(row.len().max(at / 8));
            }
            self.codes.resize(at + row.len(), 0);
            q.encode(&self.unit(row), &mut self.codes[at..]);
        }
        self.rows.push(row);
        if self.params.kind != IndexKind::DiskAnn {
            self.rows.spill_before(self.rows.len());
        }
        self.keys.push(Some(key.into()));
        self.key_bytes += key.len();
        self.list(slot);
        let i = match self.shards.iter().position(|s| s.value == shard) {
            Some(i) => i,
            None => {
                let graph = (self.params.kind == IndexKind::DiskAnn)
                    .then(|| Graph::new(self.params.degree, self.params.list));
                self.shards.push(Shard {
                    value: shard.to_vec(),
                    min_key: key.to_vec(),
                    max_key: key.to_vec(),
                    members: Vec::new(),
                    graph,
                    doomed: 0,
                    pass: None,
                });
                self.shards.len() - 1
            }
        };
        let s = &mut self.shards[i];
        if *key < *s.min_key {
            s.min_key = key.to_vec();
        }
        if *key > *s.max_key {
            s.max_key = key.to_vec();
        }
        self.node_of.push(s.members.len() as u32);
        s.members.push(slot);
        self.shard_of.push(i as u32);
        // The first fit, over a thousand rows, is quick; refits as the set grows are planned
        // and applied by the background worker (`upkeep`), off the writes' commit.
        if self.params.kind != IndexKind::Flat && self.quant.is_none() && self.len() >= TRAIN_AT {
            self.train();
        }
    }

    /// Lets the rows of linked nodes go to the rows' file (see [`super::rows`]): those before
    /// the first slot some shard has not linked yet.
    pub(super) fn spill_linked(&mut self) {
        let first_unlinked = self
            .shards
            .iter()
            .filter_map(|s| s.members.get(s.graph.as_ref()?.len()).copied())
            .min()
            .map_or(self.rows.len(), |s| s as usize);
        self.rows.spill_before(first_unlinked);
    }

    /// The slot of `key` if it already holds exactly `v` in `shard`.
    fn holds(&self, key: &[u8], v: Option<&[f32]>, shard: &[u8]) -> Option<u32> {
        let (slot, v) = (self.slot(key)?, v?);
        let joined = self.shard_of[slot as usize] as usize;
        (self.shards[joined].value == shard && *self.row(slot) == *v).then_some(slot)
    }

    /// `row` as the codes and the graph see it: of unit length for cosine.
    fn unit<'r>(&self, row: &'r [f32]) -> std::borrow::Cow<'r, [f32]> {
        if self.params.metric != Distance::Cosine {
            return std::borrow::Cow::Borrowed(row);
        }
        let mut u = row.to_vec();
        normalize(&mut u);
        std::borrow::Cow::Owned(u)
    }

    /// Fits the quantizer to up to [`TRAIN_SAMPLE`] rows spread over those held (as
    /// [`VectorSet::unit`] makes them) and codes them all. It runs at [`TRAIN_AT`] vectors
    /// and again each time the set has grown fourfold: the first thousand vectors need not
    /// be like the rest. A build from stored documents reads them in key order, grouped by
    /// partition key — in the vector bench, ten of its hundred clusters — and scales fitted
    /// to those clipped every other cluster: a restart's graph found 0.802 of the true top
    /// 10 where the one built as the documents arrived found 0.996.
    fn train(&mut self) {
        let (q, codes) = self.fit();
        self.install(q, codes);
    }

    /// Whether the set has grown fourfold since its quantizer was fitted (see
    /// [`VectorSet::train`]).
    pub(super) fn refit_due(&self) -> bool {
        self.quant.is_some() && self.len() >= self.trained_on.saturating_mul(4)
    }

    /// A quantizer fitted to the rows held now and their codes, without changing the set (a
    /// read lock: queries go on while a million rows are coded).
    pub(super) fn fit(&self) -> (Quantizer, Vec<i8>) {
        let d = self.params.dims.max(1);
        let picks = sample_rows(self.rows.len(), TRAIN_SAMPLE);
        let mut sample: Vec<f32> = Vec::with_capacity(picks.len() * d);
        let (mut i, mut next) = (0usize, picks.iter().peekable());
        self.rows.each_from(0, |run| {
            for r in run.chunks_exact(d) {
                if next.next_if_eq(&&i).is_some() {
                    sample.extend_from_slice(&self.unit(r));
                }
                i += 1;
            }
        });
        let q = Quantizer::train(d, sample.chunks_exact(d));
        drop(sample);
        let mut codes = vec![0i8; self.rows.values()];
        let mut outs = codes.chunks_exact_mut(d);
        self.rows.each_from(0, |run| {
            for (row, out) in run.chunks_exact(d).zip(&mut outs) {
                q.encode(&self.unit(row), out);
            }
        });
        (q, codes)
    }

    /// Puts a quantizer [`VectorSet::fit`] made in place, with its codes; rows appended
    /// since it was fitted (rows are only ever appended) are coded by it here.
    pub(super) fn install(&mut self, q: Quantizer, mut codes: Vec<i8>) {
        let d = self.params.dims.max(1);
        let from = codes.len().min(self.rows.values());
        codes.truncate(from);
        codes.reserve_exact(self.rows.values() - from);
        self.rows.each_from(from / d, |run| {
            for row in run.chunks_exact(d) {
                let at = codes.len();
                codes.resize(at + d, 0);
                q.encode(&self.unit(row), &mut codes[at..]);
            }
        });
        self.codes = codes;
        self.quant = Some(q);
        self.trained_on = self.len();
    }

    fn row(&self, slot: u32) -> std::borrow::Cow<'_, [f32]> {
        self.rows.row(slot)
    }

    fn code(&self, slot: u32) -> &[i8] {
        let d = self.params.dims;
        &self.codes[slot as usize * d..(slot as usize + 1) * d]
    }

    /// `1/|v|` of a slot (0 for a zero vector), scaling its row to unit length for cosine.
    fn inv_len(&self, slot: u32) -> f32 {
        let n = self.norms[slot as usize];
        if n > 0.0 {
            1.0 / n.sqrt()
        } else {
            0.0
        }
    }

    /// Squared L2 between two slots: what the graph is built on; for cosine, between the
    /// rows scaled to unit length (which orders as cosine does).
    fn pair(&self, a: u32, b: u32) -> f32 {
        if self.params.metric != Distance::Cosine {
            return l2sq(&self.row(a), &self.row(b));
        }
        let (ia, ib) = (self.inv_len(a), self.inv_len(b));
        let unit = |i: f32| if i > 0.0 { 1.0 } else { 0.0 };
        unit(ia) + unit(ib) - 2.0 * dot(&self.row(a), &self.row(b)) * ia * ib
    }

    /// [`VectorSet::pair`] from the row of `a` to the code of `b` when there are codes: what
    /// linking measures (see [`Pairs`]).
    fn pair_coded(&self, a: &Query, b: u32) -> f32 {
        let approx = self.approx(a, b);
        match self.params.metric {
            Distance::Euclidean => approx,
            Distance::DotProduct => a.norm + self.norms[b as usize] + 2.0 * approx,
            Distance::Cosine => {
                let unit = |n: f32| if n > 0.0 { 1.0 } else { 0.0 };
                let ib = self.inv_len(b);
                if ib == 0.0 {
                    return unit(a.norm);
                }
                unit(a.norm) + 1.0 + 2.0 * approx
            }
        }
    }

    /// Whether tombstones are as many as the live vectors (and past a training set's worth):
    /// then [`VectorSet::live_copy`] is worth its work, and memory stays within about twice
    /// what the live vectors need however often they are replaced.
    pub fn needs_consolidation(&self) -> bool {
        self.dead() >= self.len().max(TRAIN_AT)
    }

    /// A set of the live vectors only, each in the shard it is in here, not linked yet
    /// ([`VectorSet::link_all`]): what replaces this one when its tombstones pile up (slots
    /// are never reused in place, so an update-heavy path would otherwise grow until a
    /// restart).
    pub fn live_copy(&self) -> VectorSet {
        let mut fresh = VectorSet::with_rows_in(self.params, self.place.as_ref());
        fresh.epoch = self.epoch.wrapping_add(1);
        for shard in &self.shards {
            for &slot in &shard.members {
                if let Some(key) = &self.keys[slot as usize] {
                    let origin = self.origins[slot as usize];
                    fresh.set(key, Some(&self.row(slot)), &shard.value, origin);
                }
            }
        }
        fresh
    }

    fn prepare(&self, q: &[f32]) -> Query {
        let mut v = q.to_vec();
        if self.params.metric == Distance::Cosine {
            normalize(&mut v);
        }
        let code = self.quant.as_ref().map(|qz| qz.query(&v));
        let norm = dot(&v, &v);
        Query { v, norm, code }
    }

    /// Exact distance of a slot (smaller is closer).
    fn exact(&self, q: &Query, slot: u32) -> f32 {
        self.exact_of(q, slot, &self.row(slot))
    }

    /// [`VectorSet::exact`] of a slot whose row is `row`.
    fn exact_of(&self, q: &Query, slot: u32, row: &[f32]) -> f32 {
        match self.params.metric {
            Distance::Euclidean => l2sq(&q.v, row),
            Distance::DotProduct => -dot(&q.v, row),
            // A zero vector has no cosine: the evaluator ranks it after every scored one,
            // and so must the index, or a page would settle before the rows that precede it.
            Distance::Cosine => match self.inv_len(slot) {
                0.0 => f32::INFINITY,
                inv => -dot(&q.v, row) * inv,
            },
        }
    }

    /// [`VectorSet::exact`] of a slot, from `scanned` ([`VectorSet::exact_all`]) if given.
    fn exact_in(&self, q: &Query, scanned: Option<&[f32]>, slot: u32) -> f32 {
        match scanned {
            Some(d) => d[slot as usize],
            None => self.exact(q, slot),
        }
    }

    /// [`VectorSet::exact`] of every slot, in slot order, reading the rows in runs.
    fn exact_all(&self, q: &Query) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.rows.len());
        let d = self.params.dims.max(1);
        self.rows.each_from(0, |run| {
            for row in run.chunks_exact(d) {
                let slot = out.len() as u32;
                out.push(self.exact_of(q, slot, row));
            }
        });
        out
    }

    /// The evaluator's `f64` score of a slot whose row is exact (see [`Hit::score`]).
    fn score(&self, q64: Option<&[f64]>, slot: u32) -> Option<f64> {
        let q64 = q64.filter(|_| self.origins[slot as usize].exact)?;
        self.params.metric.score(&self.row(slot), q64)
    }

    /// [`VectorSet::approx`] of each slot of `slots`, in order, into `out`; while one is
    /// measured, the code (or row) two ahead is fetched into the cache. A graph search reads
    /// vectors at random, one after another, and waits on memory more than it computes. In a
    /// throwaway program on this 2-core machine (not kept; 100,000 codes of 768 bytes read in
    /// a fixed random order), the AVX2 product took 122 ns a code, 91 ns fetching one ahead,
    /// 76 ns two ahead, 73 ns three or four ahead; `strata-bench --suite vector --profile DIR`
    /// measured 1.10 → 0.89 ms of server CPU per query. With `exact`, it measures
    /// [`VectorSet::exact`] from the rows instead.
    fn measure(
        &self,
        q: &Query,
        slots: impl Iterator<Item = u32> + Clone,
        exact: bool,
        out: &mut Vec<f32>,
    ) {
        let d = self.params.dims;
        let codes = q.code.is_some() && !exact;
        let fetch = |s: u32| {
            let at = s as usize * d;
            if codes {
                (at..at + d)
                    .step_by(64)
                    .for_each(|i| prefetch_index(&self.codes, i));
            } else {
                self.rows.prefetch(s);
            }
        };
        let mut ahead = slots.clone().skip(AHEAD);
        slots.clone().take(AHEAD).for_each(fetch);
        for s in slots {
            if let Some(next) = ahead.next() {
                fetch(next);
            }
            out.push(if exact {
                self.exact(q, s)
            } else {
                self.approx(q, s)
            });
        }
    }

    /// Distance over codes when there are codes, else exact.
    fn approx(&self, q: &Query, slot: u32) -> f32 {
        let Some(code) = &q.code else {
            return self.exact(q, slot);
        };
        let d = code.dot(self.code(slot));
        match self.params.metric {
            Distance::Euclidean => q.norm + self.norms[slot as usize] - 2.0 * d,
            Distance::Cosine | Distance::DotProduct => -d,
        }
    }

    /// The `want` live vectors closest to `q` among those with keys in `[lo, hi)` (the
    /// physical partitions a query reads), closest first, from the shards `only` names (every
    /// shard when `None`): exactly (flat, brute force, few vectors), over codes re-ranked
    /// exactly (quantizedFlat), or by a beam search of each shard's graph plus an exact scan
    /// of its slots not linked yet (diskANN). Vectors of another length than the set's are
    /// never close. With `q64` (the query's numbers as the evaluator reads them) the hits
    /// with exact rows carry the evaluator's score.
    pub fn search(
        &self,
        q: &[f32],
        q64: Option<&[f64]>,
        want: usize,
        (lo, hi): (&[u8], &[u8]),
        only: Option<&[Vec<u8>]>,
        opts: SearchOpts,
    ) -> Found {
        if q.len() != self.params.dims || want == 0 {
            return Found {
                exhausted: true,
                ..Found::default()
            };
        }
        let q = self.prepare(q);
        let approximate = !opts.brute_force && q.code.is_some();
        // An exact scan of rows in a file reads the file front to back once, not a row at a
        // time (a million reads).
        let scanned = (!approximate && self.rows.spilled()).then(|| self.exact_all(&q));
        let score = |s: u32| match &scanned {
            None if approximate => self.approx(&q, s),
            _ => self.exact_in(&q, scanned.as_deref(), s),
        };
        let mut cands: Vec<(f32, u32)> = Vec::new();
        let mut exhausted = true;
        // Vectors measured by graph searches (beyond those in `cands`).
        let mut measured = 0usize;
        let keep = if approximate {
            want.saturating_mul(opts.rerank.max(1))
        } else {
            want
        };
        let wanted = |s: &&Shard| {
            only.is_none_or(|o| o.contains(&s.value))
                && s.min_key.as_slice() < hi
                && lo <= s.max_key.as_slice()
        };
        for shard in self.shards.iter().filter(wanted) {
            let inside = shard.min_key.as_slice() >= lo && shard.max_key.as_slice() < hi;
            let live = |s: u32| match &self.keys[s as usize] {
                Some(k) => inside || (k.as_ref() >= lo && k.as_ref() < hi),
                None => false,
            };
            // A shard the range covers only part of (some of the container's physical
            // partitions) keeps more of its beam to find as many of the range's own.
            let list = if inside {
                opts.list
            } else {
                opts.list.saturating_mul(2)
            };
            match &shard.graph {
                Some(g) if !opts.brute_force && list < g.len() => {
                    exhausted = false;
                    let m = &shard.members;
                    let beam = g.search(list.max(want), &mut |ns, out| {
                        self.measure(&q, ns.iter().map(|&n| m[n as usize]), false, out)
                    });
                    measured += beam.scored.len();
                    let pick = |from: &[(f32, u32)], cands: &mut Vec<(f32, u32)>| {
                        let slots = from.iter().map(|&(d, n)| (d, m[n as usize]));
                        cands.extend(slots.filter(|(_, s)| live(*s)));
                    };
                    // A shard inside the range: the beam's best are the nearest of all it
                    // measured, and only they are filtered and ranked, unless tombstones
                    // leave fewer than the rerank needs.
                    let before = cands.len();
                    if inside {
                        pick(&beam.best, &mut cands);
                    }
                    if !inside || cands.len() - before < keep {
                        cands.truncate(before);
                        pick(&beam.scored, &mut cands);
                    }
                    for &s in &m[g.len()..] {
                        if live(s) {
                            cands.push((self.exact_in(&q, scanned.as_deref(), s), s));
                        }
                    }
                }
                _ => cands.extend(
                    shard
                        .members
                        .iter()
                        .filter(|s| live(**s))
                        .map(|&s| (score(s), s)),
                ),
            }
        }
        if cands.len() > want {
            exhausted = false;
        }
        let scored = measured.max(cands.len());
        top(&mut cands, keep);
        if approximate {
            let mut exact = Vec::with_capacity(cands.len());
            self.measure(&q, cands.iter().map(|c| c.1), true, &mut exact);
            for (c, e) in cands.iter_mut().zip(exact) {
                c.0 = e;
            }
            top(&mut cands, want);
        }
        let keys = cands
            .into_iter()
            .filter_map(|(distance, s)| {
                Some(Hit {
                    distance,
                    key: self.keys[s as usize].clone()?,
                    origin: self.origins[s as usize],
                    score: self.score(q64, s),
                })
            })
            .collect();
        Found {
            keys,
            exhausted,
            scored,
        }
    }
}

/// Up to `want` of `rows` row numbers, ascending, spread over them by multiples of the golden
/// ratio (a Kronecker sequence) rather than at equal steps, which rows written in a repeating
/// order alias: the vector bench writes one vector per cluster in turn, and every 50th of a
/// million rows (the equal steps of a 20,000-row sample) came from 2 of its 100 clusters —
/// scales fitted to those clipped the rest, and the codes ordered the others' vectors badly.
fn sample_rows(rows: usize, want: usize) -> Vec<usize> {
    if rows <= want {
        return (0..rows).collect();
    }
    let mut picks: Vec<usize> = (0..want)
        .map(|j| {
            let x = (j as f64 + 1.0) * 0.618_033_988_749_894_9;
            ((x.fract() * rows as f64) as usize).min(rows - 1)
        })
        .collect();
    picks.sort_unstable();
    picks.dedup();
    picks
}

/// Seeded draws in [-0.5, 0.5) for tests: an LCG, the same numbers every run.
#[cfg(test)]
fn uniform(mut seed: u64) -> impl FnMut() -> f32 {
    move || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    }
}

/// Keeps the `n` smallest of `c`, sorted.
fn top(c: &mut Vec<(f32, u32)>, n: usize) {
    let cmp = |a: &(f32, u32), b: &(f32, u32)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
    if c.len() > n && n > 0 {
        c.select_nth_unstable_by(n - 1, cmp);
        c.truncate(n);
    }
    c.truncate(n);
    c.sort_by(cmp);
}

#[cfg(test)]
mod tests;
