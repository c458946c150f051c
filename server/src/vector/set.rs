//! The vectors of one embedding path of a container, in memory, each under the key of the
//! document it came from: `f32` rows (unit length for cosine), `i8` codes for the quantized
//! kinds, and a [`Graph`] over them for diskANN. Slots are appended; an update or delete
//! leaves a tombstone (the key is gone, the row stays as a graph waypoint).

use super::graph::Graph;
use super::kernels::{dot, l2sq, normalize};
use super::quant::{Quantizer, QueryCode};
use super::{Kind, Metric, Params};
use std::collections::HashMap;

/// Vectors trained on before codes exist: fewer are scanned exactly.
pub const TRAIN_AT: usize = 1000;

/// The set (see the module comment).
#[derive(Debug)]
pub struct VectorSet {
    pub params: Params,
    data: Vec<f32>,
    /// `|v|²` per slot (for euclidean distances over codes).
    norms: Vec<f32>,
    codes: Vec<i8>,
    quant: Option<Quantizer>,
    keys: Vec<Option<Box<[u8]>>>,
    slot_of: HashMap<Box<[u8]>, u32>,
    graph: Option<Graph>,
}

/// What a search found: keys closest first, and whether every live vector the filter accepts
/// is among them (else a caller that needs more asks again with a larger `want`).
#[derive(Debug, Default)]
pub struct Found {
    pub keys: Vec<(f32, Box<[u8]>)>,
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
    pub fn new(params: Params) -> Self {
        let graph = (params.kind == Kind::DiskAnn).then(|| Graph::new(params.degree, params.list));
        Self {
            params,
            data: Vec::new(),
            norms: Vec::new(),
            codes: Vec::new(),
            quant: None,
            keys: Vec::new(),
            slot_of: HashMap::new(),
            graph,
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
        self.graph
            .as_ref()
            .map_or(0, |g| self.keys.len().saturating_sub(g.len()))
    }

    /// Tombstones among the slots.
    pub fn dead(&self) -> usize {
        self.keys.len() - self.slot_of.len()
    }

    /// Bytes held (rows, codes, graph, keys).
    pub fn held_bytes(&self) -> usize {
        self.data.capacity() * 4
            + self.norms.capacity() * 4
            + self.codes.capacity()
            + self.graph.as_ref().map_or(0, Graph::held_bytes)
            + self.slot_of.keys().map(|k| 2 * k.len() + 48).sum::<usize>()
    }

    /// Sets the vector of `key` (`None`: it has none, or the document is gone).
    pub fn set(&mut self, key: &[u8], v: Option<&[f32]>) {
        if let Some(slot) = self.slot_of.remove(key) {
            self.keys[slot as usize] = None;
        }
        let Some(v) = v.filter(|v| v.len() == self.params.dims) else {
            return;
        };
        let mut row = v.to_vec();
        if self.params.metric == Metric::Cosine {
            normalize(&mut row);
        }
        let slot = self.keys.len() as u32;
        self.norms.push(dot(&row, &row));
        if let Some(q) = &self.quant {
            let at = self.codes.len();
            self.codes.resize(at + row.len(), 0);
            q.encode(&row, &mut self.codes[at..]);
        }
        // Grown by an eighth at a time, not doubled: the rows are most of the set's memory.
        if self.data.capacity() < self.data.len() + row.len() {
            self.data.reserve_exact(row.len().max(self.data.len() / 8));
            self.codes.reserve_exact(self.codes.len() / 8);
        }
        self.data.extend_from_slice(&row);
        let key: Box<[u8]> = key.into();
        self.keys.push(Some(key.clone()));
        self.slot_of.insert(key, slot);
        if self.quant.is_none() && self.params.kind != Kind::Flat && self.len() >= TRAIN_AT {
            self.train();
        }
    }

    /// Fits the quantizer to the rows held and codes them all.
    fn train(&mut self) {
        let d = self.params.dims;
        let q = Quantizer::train(d, self.data.chunks_exact(d));
        let mut codes = vec![0i8; self.data.len()];
        for (row, out) in self.data.chunks_exact(d).zip(codes.chunks_exact_mut(d)) {
            q.encode(row, out);
        }
        self.codes = codes;
        self.quant = Some(q);
    }

    fn row(&self, slot: u32) -> &[f32] {
        let d = self.params.dims;
        &self.data[slot as usize * d..(slot as usize + 1) * d]
    }

    fn code(&self, slot: u32) -> &[i8] {
        let d = self.params.dims;
        &self.codes[slot as usize * d..(slot as usize + 1) * d]
    }

    /// Squared L2 between two slots: what the graph is built on (for unit rows it orders
    /// as cosine does).
    fn pair(&self, a: u32, b: u32) -> f32 {
        l2sq(self.row(a), self.row(b))
    }

    /// The edges of the next slot to link into the graph, chosen without changing anything
    /// (run it under a read lock, then [`VectorSet::link`] under a write lock).
    pub fn plan_next(&self) -> Option<(u32, Vec<u32>)> {
        let g = self.graph.as_ref()?;
        let p = g.len() as u32;
        if p as usize >= self.keys.len() {
            return None;
        }
        Some((p, g.plan(p, &|a, b| self.pair(a, b))))
    }

    /// Links slot `p` with the edges [`VectorSet::plan_next`] chose.
    pub fn link(&mut self, p: u32, out: Vec<u32>) {
        let Some(mut g) = self.graph.take() else {
            return;
        };
        if g.len() == p as usize {
            g.link(p, out, &|a, b| self.pair(a, b));
        }
        self.graph = Some(g);
    }

    fn prepare(&self, q: &[f32]) -> Query {
        let mut v = q.to_vec();
        if self.params.metric == Metric::Cosine {
            normalize(&mut v);
        }
        let code = self.quant.as_ref().map(|qz| qz.query(&v));
        let norm = dot(&v, &v);
        Query { v, norm, code }
    }

    /// Exact distance of a slot (smaller is closer).
    fn exact(&self, q: &Query, slot: u32) -> f32 {
        match self.params.metric {
            Metric::Euclidean => l2sq(&q.v, self.row(slot)),
            Metric::Cosine | Metric::DotProduct => -dot(&q.v, self.row(slot)),
        }
    }

    /// Distance over codes when there are codes, else exact.
    fn approx(&self, q: &Query, slot: u32) -> f32 {
        let Some(code) = &q.code else {
            return self.exact(q, slot);
        };
        let d = code.dot(self.code(slot));
        match self.params.metric {
            Metric::Euclidean => q.norm + self.norms[slot as usize] - 2.0 * d,
            Metric::Cosine | Metric::DotProduct => -d,
        }
    }

    /// The `want` live vectors closest to `q` among those whose key `accept`s, closest
    /// first: exactly (flat, brute force, or few vectors), over codes re-ranked exactly
    /// (quantizedFlat), or by a beam search of the graph plus an exact scan of the slots not
    /// linked yet (diskANN). Vectors of another length than the set's are never close.
    pub fn search(
        &self,
        q: &[f32],
        want: usize,
        accept: &dyn Fn(&[u8]) -> bool,
        opts: SearchOpts,
    ) -> Found {
        if q.len() != self.params.dims || want == 0 {
            return Found {
                exhausted: true,
                ..Found::default()
            };
        }
        let q = self.prepare(q);
        let live = |s: u32| match &self.keys[s as usize] {
            Some(k) if accept(k) => Some(k),
            _ => None,
        };
        let approximate = !opts.brute_force && q.code.is_some();
        let (mut cands, exhausted): (Vec<(f32, u32)>, bool) = match (&self.graph, approximate) {
            (Some(g), true) if opts.list < g.len() => {
                let beam = g.search(opts.list.max(want), &mut |n| self.approx(&q, n));
                let mut c: Vec<(f32, u32)> = beam
                    .scored
                    .into_iter()
                    .filter(|(_, s)| live(*s).is_some())
                    .collect();
                for s in g.len() as u32..self.keys.len() as u32 {
                    if live(s).is_some() {
                        c.push((self.exact(&q, s), s));
                    }
                }
                (c, false)
            }
            _ => {
                let score = |s: u32| {
                    if approximate {
                        self.approx(&q, s)
                    } else {
                        self.exact(&q, s)
                    }
                };
                let c: Vec<(f32, u32)> = (0..self.keys.len() as u32)
                    .filter(|s| live(*s).is_some())
                    .map(|s| (score(s), s))
                    .collect();
                let all = c.len() <= want;
                (c, all)
            }
        };
        let scored = cands.len();
        let keep = if approximate {
            want.saturating_mul(opts.rerank.max(1))
        } else {
            want
        };
        top(&mut cands, keep);
        if approximate {
            for c in cands.iter_mut() {
                c.0 = self.exact(&q, c.1);
            }
            top(&mut cands, want);
        }
        let keys = cands
            .into_iter()
            .filter_map(|(d, s)| live(s).map(|k| (d, k.clone())))
            .collect();
        Found {
            keys,
            exhausted,
            scored,
        }
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
