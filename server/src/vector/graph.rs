//! A Vamana graph (the graph of DiskANN, Subramanya et al., NeurIPS 2019), built one node at
//! a time as vectors arrive (FreshDiskANN's insert): a greedy beam search from the entry
//! finds the new node's neighbourhood, *robust pruning* keeps at most `degree` neighbours that
//! are not shadowed by a closer chosen one (see [`Graph::alpha`]), and each neighbour links
//! back, pruning itself when it passes the degree. Searches start from the entry and from
//! nodes spread over the insertion order.
//!
//! Nodes are numbered from 0 in insertion order; the graph knows no vectors, only the two
//! distances its caller gives: from the query to a node, and between two nodes. A deleted
//! node stays in the graph as a waypoint (its caller no longer returns it) until its caller
//! takes a batch of them out (FreshDiskANN's delete consolidation): every node that points at
//! one is [`Graph::repair`]ed first, then [`Graph::remove`] leaves them without edges and
//! never a start. Left as waypoints, the deleted vectors of a whole cluster trap a query aimed
//! there: its beam fills with them and their neighbours, which are deleted too.

use super::codec::{Reader, Writer};
use prefetch_index::prefetch_index;
use std::cell::RefCell;

/// The graph: adjacency lists and the node searches start from. The lists sit in one flat
/// array, [`Graph::stride`] slots a node, so that a search step reads a node's edges with one
/// random access instead of two (a list's header, then its heap block), and a node costs its
/// edges and two bytes rather than a growing heap allocation.
#[derive(Debug, Clone)]
pub struct Graph {
    /// Most neighbours per node (the service's DiskANN uses 32 to 64; `R` in the paper).
    pub degree: usize,
    /// Candidate list length while inserting (`indexingSearchListSize`; `L` in the paper).
    pub list: usize,
    /// Pruning slack (`α`, over squared distances). 1.0 is HNSW's neighbour heuristic: on
    /// clustered 768-dimension data (the vector bench's) the paper's 1.2 kept each node's
    /// 32 nearest, hubs mostly, and a beam of 100 found 80% of the true top 10 over 25,000
    /// vectors; 1.0 keeps diverse edges and finds 99.9% in the same time. The long edges α
    /// would add come from the spread start nodes of every search instead.
    pub alpha: f32,
    /// Node `n`'s out-edges are `edges[n * stride..][..lens[n]]`.
    edges: Vec<u32>,
    lens: Vec<u16>,
    entry: Option<u32>,
    /// A bit per node taken out ([`Graph::remove`]).
    gone: Vec<u64>,
}

/// Nodes besides the entry a search starts from.
const SEEDS: usize = 32;

thread_local! {
    /// A search's visited bits, kept per thread and cleared word by word after each search
    /// (a fresh zeroed set per search cost a page of zeroing per 32,000 nodes, 125 KB at a
    /// million).
    static SEEN: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// What one beam search saw.
#[derive(Debug, Default)]
pub struct Beam {
    /// The `list` closest nodes found, closest first.
    pub best: Vec<(f32, u32)>,
    /// Every node whose neighbours were read (the candidates of a new node's edges).
    pub expanded: Vec<(f32, u32)>,
    /// Every node whose distance was computed (a filtered search picks from these).
    pub scored: Vec<(f32, u32)>,
}

impl Graph {
    pub fn new(degree: usize, list: usize) -> Self {
        Self {
            degree,
            list,
            alpha: 1.0,
            edges: Vec::new(),
            lens: Vec::new(),
            entry: None,
            gone: Vec::new(),
        }
    }

    /// Nodes in the graph.
    pub fn len(&self) -> usize {
        self.lens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lens.is_empty()
    }

    /// Bytes the adjacency lists take.
    pub fn held_bytes(&self) -> usize {
        self.edges.capacity() * 4 + self.lens.capacity() * 2 + self.gone.capacity() * 8
    }

    /// Whether node `n` was taken out.
    pub fn is_gone(&self, n: u32) -> bool {
        self.gone
            .get(n as usize / 64)
            .is_some_and(|w| w >> (n % 64) & 1 == 1)
    }

    /// Slots a node's list has: `degree` and the quarter of slack [`Graph::link`] lets a
    /// list grow by before pruning it, and one for the edge that tips it over.
    fn stride(&self) -> usize {
        self.degree + self.degree / 4 + 1
    }

    /// Node `n`'s out-edges.
    pub fn out(&self, n: u32) -> &[u32] {
        let at = n as usize * self.stride();
        &self.edges[at..at + usize::from(self.lens[n as usize])]
    }

    /// Replaces node `n`'s out-edges with `list` (at most [`Graph::stride`]).
    fn set_out(&mut self, n: u32, list: &[u32]) {
        let s = self.stride();
        let list = &list[..list.len().min(s)];
        let at = n as usize * s;
        self.edges[at..at + list.len()].copy_from_slice(list);
        self.lens[n as usize] = list.len() as u16;
    }

    /// Greedy beam search with a candidate list of `l` nodes; `dist` measures nodes from the
    /// query, appending their distances to its output in order. It is handed a node's unseen
    /// neighbours together so that it can fetch the next ones' vectors from memory while it
    /// measures the current one (see `VectorSet::measure`).
    pub fn search(&self, l: usize, dist: &mut dyn FnMut(&[u32], &mut Vec<f32>)) -> Beam {
        let Some(e) = self.entry else {
            return Beam::default();
        };
        SEEN.with(|cell| match cell.try_borrow_mut() {
            Ok(mut seen) => {
                let words = self.len().div_ceil(64);
                if seen.len() < words {
                    seen.resize(words, 0);
                }
                let beam = self.search_from(e, l, &mut seen, dist);
                // Every node marked was measured: clearing their words leaves the set empty.
                for &(_, n) in &beam.scored {
                    seen[n as usize / 64] = 0;
                }
                beam
            }
            Err(_) => self.search_from(e, l, &mut vec![0u64; self.len().div_ceil(64)], dist),
        })
    }

    /// [`Graph::search`] from entry `e` with the visited bits `seen` (all clear).
    fn search_from(
        &self,
        e: u32,
        l: usize,
        seen: &mut [u64],
        dist: &mut dyn FnMut(&[u32], &mut Vec<f32>),
    ) -> Beam {
        let mut beam = Beam::default();
        let l = l.max(1);
        let mut first_visit = |n: u32| {
            let (w, b) = (n as usize / 64, n % 64);
            let fresh = seen[w] >> b & 1 == 0;
            seen[w] |= 1 << b;
            fresh
        };
        // Besides the entry, nodes spread over the insertion order: with data in clusters a
        // search then starts near the query's cluster instead of walking there.
        let n = self.len();
        let seeds = SEEDS.min(n);
        let mut cand: Vec<(f32, u32, bool)> = Vec::with_capacity(l + 1);
        let mut fresh: Vec<u32> = std::iter::once(e)
            .chain((0..seeds).map(|i| (i * n / seeds) as u32))
            .filter(|s| !self.is_gone(*s) && first_visit(*s))
            .collect();
        let mut ds: Vec<f32> = Vec::with_capacity(fresh.len().max(self.degree * 2));
        dist(&fresh, &mut ds);
        for (&s, &d) in fresh.iter().zip(&ds) {
            beam.scored.push((d, s));
            cand.push((d, s, false));
        }
        cand.sort_by(|a, b| a.0.total_cmp(&b.0));
        cand.truncate(l);
        let mut next = 0usize;
        while let Some(i) = (next..cand.len()).find(|&i| !cand[i].2) {
            cand[i].2 = true;
            next = i + 1;
            let (dn, n, _) = cand[i];
            beam.expanded.push((dn, n));
            fresh.clear();
            fresh.extend(self.out(n).iter().filter(|nb| first_visit(**nb)));
            // The node expanded next, unless one of these neighbours turns out closer: its
            // list is fetched while they are measured (reading a node's length and edges
            // waited on memory for nearly half of a search's own time).
            if let Some(j) = (next..cand.len()).find(|&j| !cand[j].2) {
                let m = cand[j].1 as usize;
                prefetch_index(&self.lens, m);
                let at = m * self.stride();
                (at..at + self.stride())
                    .step_by(16)
                    .for_each(|i| prefetch_index(&self.edges, i));
            }
            ds.clear();
            dist(&fresh, &mut ds);
            for (&nb, &d) in fresh.iter().zip(&ds) {
                beam.scored.push((d, nb));
                if cand.len() >= l && d >= cand[cand.len() - 1].0 {
                    continue;
                }
                let pos = cand.partition_point(|c| c.0 <= d);
                cand.insert(pos, (d, nb, false));
                cand.truncate(l);
                next = next.min(pos);
            }
        }
        beam.best = cand.into_iter().map(|(d, n, _)| (d, n)).collect();
        beam
    }

    /// The out-edges node `p` (the next number, [`Graph::len`]) will get: a beam search for
    /// it, pruned. Read-only, so it can run beside searches; [`Graph::link`] then adds it.
    /// `pair` measures two nodes (a metric: squared L2 over the stored vectors).
    /// Deleted nodes not taken out yet may be chosen: when every vector near the new one was
    /// replaced (a re-embedding), they are all there is to link to, and the pass that takes
    /// them out hands their edges, back-links to the new vectors among them, to it.
    pub fn plan(&self, p: u32, pair: &dyn Fn(u32, u32) -> f32) -> Vec<u32> {
        if self.entry.is_none() {
            return Vec::new();
        }
        let beam = self.search(self.list, &mut |ns, out| {
            out.extend(ns.iter().map(|&n| pair(p, n)));
        });
        let mut pool = beam.best;
        pool.extend(beam.expanded);
        self.prune(p, pool, pair)
    }

    /// The out-edges node `n` should have once the nodes `dead` names are taken out, if it
    /// points at any of them (else `None`): its live edges stay, and the places the dead ones
    /// held go to their own live neighbours, nearest to `n` first, each kept only if no edge
    /// of `n` already shadows it (the pruning rule). FreshDiskANN prunes the whole union
    /// again; keeping the live edges as they are costs a few distances instead of a prune
    /// per node, which matters when a tenth of the vectors were replaced and nearly every
    /// node has lost an edge or two.
    pub fn repair(
        &self,
        n: u32,
        dead: &dyn Fn(u32) -> bool,
        pair: &dyn Fn(u32, u32) -> f32,
    ) -> Option<Vec<u32>> {
        let out = self.out(n);
        if !out.iter().any(|&m| dead(m)) {
            return None;
        }
        let mut kept: Vec<u32> = out.iter().copied().filter(|&m| !dead(m)).collect();
        let mut cands: Vec<(f32, u32)> = out
            .iter()
            .filter(|&&m| dead(m))
            .flat_map(|&m| self.out(m).iter().copied())
            .filter(|&c| c != n && !dead(c) && !self.is_gone(c) && !kept.contains(&c))
            .map(|c| (0.0, c))
            .collect();
        cands.sort_unstable_by_key(|c| c.1);
        cands.dedup_by_key(|c| c.1);
        for c in &mut cands {
            c.0 = pair(n, c.1);
        }
        cands.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (d, c) in cands {
            if kept.len() >= self.degree {
                break;
            }
            if kept.iter().all(|&o| self.alpha * pair(o, c) > d) {
                kept.push(c);
            }
        }
        Some(kept)
    }

    /// Gives node `n` the out-edges `to` if it still has `from` (a [`Graph::repair`] planned
    /// under a read lock; a node linked back to meanwhile waits for the next one).
    pub fn replace(&mut self, n: u32, from: &[u32], to: &[u32]) -> bool {
        if (n as usize) >= self.len() || self.out(n) != from {
            return false;
        }
        self.set_out(n, to);
        true
    }

    /// Takes the nodes `ns` out: no edges, never a start; if the entry was one, the first
    /// node left becomes the entry.
    pub fn remove(&mut self, ns: &[u32]) {
        let len = self.len();
        for &n in ns.iter().filter(|n| (**n as usize) < len) {
            self.lens[n as usize] = 0;
            self.gone[n as usize / 64] |= 1 << (n % 64);
        }
        if self.entry.is_some_and(|e| self.is_gone(e)) {
            self.entry = (0..self.len() as u32).find(|&n| !self.is_gone(n));
        }
    }

    /// Adds node `p` with the out-edges [`Graph::plan`] chose, and links each neighbour back;
    /// a neighbour past a quarter more than `degree` is pruned back to `degree` (the slack
    /// saves most of those prunes, the costly part of an insert).
    pub fn link(&mut self, p: u32, out: Vec<u32>, pair: &dyn Fn(u32, u32) -> f32) {
        debug_assert_eq!(p as usize, self.len());
        let s = self.stride();
        if self.edges.capacity() < self.edges.len() + s {
            // An eighth more at a time, not doubled, as the set grows its rows.
            self.edges.reserve_exact(s.max(self.edges.len() / 8));
        }
        self.edges.resize(self.edges.len() + s, 0);
        self.lens.push(0);
        if self.gone.len() * 64 < self.lens.len() {
            self.gone.push(0);
        }
        if self.entry.is_none() {
            self.entry = Some(p);
        }
        for &n in &out {
            if self.out(n).contains(&p) {
                continue;
            }
            let len = usize::from(self.lens[n as usize]);
            self.edges[n as usize * s + len] = p;
            self.lens[n as usize] += 1;
            if len < self.degree + self.degree / 4 {
                continue;
            }
            let cands: Vec<(f32, u32)> = self.out(n).iter().map(|&m| (pair(n, m), m)).collect();
            let kept = self.prune(n, cands, pair);
            self.set_out(n, &kept);
        }
        self.set_out(p, &out);
    }

    /// [`Graph::plan`] then [`Graph::link`].
    pub fn insert(&mut self, p: u32, pair: &dyn Fn(u32, u32) -> f32) {
        let out = self.plan(p, pair);
        self.link(p, out, pair);
    }

    /// Writes the graph (see [`super::codec`]).
    pub fn write<W: std::io::Write>(&self, w: &mut Writer<W>) -> std::io::Result<()> {
        w.u64(self.degree as u64)?;
        w.u64(self.list as u64)?;
        w.f32(self.alpha)?;
        w.u64(self.entry.map_or(u64::MAX, u64::from))?;
        w.u32s(&self.edges)?;
        w.u16s(&self.lens)?;
        w.u64s(&self.gone)
    }

    /// Reads what [`Graph::write`] wrote, refusing a graph whose lists do not fit its shape.
    pub fn read<R: std::io::Read>(r: &mut Reader<R>) -> std::io::Result<Self> {
        let degree = r.u64()? as usize;
        let list = r.u64()? as usize;
        let alpha = r.f32()?;
        let entry = r.u64()?;
        let mut g = Graph::new(degree, list);
        g.alpha = alpha;
        g.edges = r.u32s()?;
        g.lens = r.u16s()?;
        g.gone = r.u64s()?;
        let n = g.lens.len();
        let fits = degree > 0
            && degree < usize::from(u16::MAX) / 2
            && g.edges.len() == n * g.stride()
            && g.gone.len() == n.div_ceil(64)
            && alpha.is_finite()
            && alpha >= 1.0
            && g.lens.iter().all(|l| usize::from(*l) < g.stride())
            && g.edges.iter().all(|e| (*e as usize) < n)
            && (entry == u64::MAX || entry < n as u64);
        if !fits {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "a snapshot's graph does not fit its shape",
            ));
        }
        g.entry = (entry != u64::MAX).then_some(entry as u32);
        Ok(g)
    }

    /// Robust pruning: from `cands` (distances to `p`), closest first, keep a node unless a
    /// kept one is within `1/α` of its distance to `p`; at most `degree`.
    fn prune(
        &self,
        p: u32,
        mut cands: Vec<(f32, u32)>,
        pair: &dyn Fn(u32, u32) -> f32,
    ) -> Vec<u32> {
        cands.retain(|c| c.1 != p);
        cands.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        cands.dedup_by_key(|c| c.1);
        let mut out: Vec<u32> = Vec::with_capacity(self.degree);
        for (d, c) in cands {
            if out.len() >= self.degree {
                break;
            }
            if out.iter().all(|&o| self.alpha * pair(o, c) > d) {
                out.push(c);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Points on a noisy grid: the graph finds each point's nearest neighbours about as an
    /// exact scan does (recall@10 over 100 queries ≥ 0.95).
    #[test]
    fn beam_search_finds_the_nearest_neighbours() {
        let dims = 8;
        let pts: Vec<Vec<f32>> = (0..2000u32)
            .map(|i| {
                (0..dims)
                    .map(|d| ((i.wrapping_mul(2654435761) >> (d * 3)) % 97) as f32 / 9.7)
                    .collect()
            })
            .collect();
        let l2 = |a: &[f32], b: &[f32]| super::super::kernels::l2sq(a, b);
        let mut g = Graph::new(16, 48);
        for i in 0..pts.len() as u32 {
            g.insert(i, &|a, b| l2(&pts[a as usize], &pts[b as usize]));
        }
        let mut hits = 0;
        for qi in (0..2000).step_by(20) {
            let q: Vec<f32> = pts[qi].iter().map(|x| x + 0.05).collect();
            let mut exact: Vec<(f32, u32)> = (0..pts.len() as u32)
                .map(|n| (l2(&q, &pts[n as usize]), n))
                .collect();
            exact.sort_by(|a, b| a.0.total_cmp(&b.0));
            let beam = g.search(48, &mut |ns, out| {
                out.extend(ns.iter().map(|&n| l2(&q, &pts[n as usize])));
            });
            let found: Vec<u32> = beam.best.iter().take(10).map(|c| c.1).collect();
            hits += exact[..10].iter().filter(|e| found.contains(&e.1)).count();
        }
        let recall = hits as f64 / 1000.0;
        assert!(recall >= 0.95, "recall@10 {recall}");
        assert!(g.lens.iter().all(|l| *l <= 20));
    }
}
