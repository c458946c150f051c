//! Keeping each shard's graph current, one step at a time: link the slots appended since the
//! last step, and take deleted slots out of the graph once enough have piled up. A step is
//! planned with `&self` (under a read lock, queries go on) and applied with `&mut self` (a
//! short write lock), so that a background thread can do the work without holding up
//! searches; `VectorSet::link_all` does every step at once for a set nobody reads yet.
//!
//! Taking deleted nodes out (FreshDiskANN's delete consolidation) is a pass over the shard:
//! it starts with the nodes dead at that moment, gives every node that points at one new
//! edges in batches ([`Graph::repair`]), and ends by taking them out ([`Graph::remove`]). A
//! pass starts when a fiftieth of the graph is dead, so that one scan of its edges repairs
//! many deletions (the scan reads every node's edges; the repairs are a few distances each).

use super::{Graph, Pairs, VectorSet};
use crate::vector::quant::Quantizer;

/// A pass starts when this many linked nodes (or a fiftieth of the graph, if more) are dead.
const DOOMED_AT: usize = 32;

/// Nodes a repair step scans (the read lock is held while their repairs are planned).
const BATCH: u32 = 512;

/// One step (see the module comment): what [`VectorSet::plan_next`] chose, for
/// [`VectorSet::apply`], and the set it was planned on: a consolidation replaces the set
/// with a copy numbered afresh (`VectorSet::live_copy`), where a step planned on the old
/// one would name other nodes.
#[derive(Debug)]
pub struct Work {
    epoch: u64,
    step: Step,
}

#[derive(Debug)]
enum Step {
    /// Link node `node` of shard `shard` with the out-edges `out` (none for a slot deleted
    /// before its turn: it is linked as taken out, to keep node numbers in step).
    Link {
        shard: usize,
        node: u32,
        out: Vec<u32>,
        dead: bool,
    },
    /// Start a pass over shard `shard` that takes out `nodes` (dead, not out yet).
    Start { shard: usize, nodes: Vec<u32> },
    /// New out-edges (node, edges planned from, edges) for the pass's nodes before `until`.
    Repair {
        shard: usize,
        until: u32,
        lists: Vec<(u32, Vec<u32>, Vec<u32>)>,
    },
    /// Take the pass's nodes out.
    Finish { shard: usize },
    /// A quantizer refitted to the set grown fourfold, with the codes of the rows it saw.
    Refit { quant: Quantizer, codes: Vec<i8> },
}

/// A pass under way: the nodes it takes out (also as a bit per node) and how far its
/// repairs have come.
#[derive(Debug)]
pub(super) struct Pass {
    nodes: Vec<u32>,
    bits: Vec<u64>,
    cursor: u32,
}

impl Pass {
    fn holds(&self, n: u32) -> bool {
        self.bits
            .get(n as usize / 64)
            .is_some_and(|w| w >> (n % 64) & 1 == 1)
    }
}

impl VectorSet {
    /// Does every step there is to do (a set nobody else reads yet).
    pub fn link_all(&mut self) {
        while let Some(w) = self.plan_next() {
            self.apply(w);
        }
    }

    /// Whether a step is waiting.
    pub fn has_work(&self) -> bool {
        self.refit_due()
            || self.unlinked() > 0
            || self
                .shards
                .iter()
                .any(|s| s.pass.is_some() || s.graph.as_ref().is_some_and(|g| due(s.doomed, g)))
    }

    /// The next step, chosen without changing anything: a refit of the quantizer when it is
    /// due (every search measures by its codes), linking next (a slot not linked is scanned
    /// by every search), then a pass's next step.
    pub fn plan_next(&self) -> Option<Work> {
        let step = self
            .plan_refit()
            .or_else(|| self.plan_link())
            .or_else(|| self.plan_pass())?;
        Some(Work {
            epoch: self.epoch,
            step,
        })
    }

    fn plan_refit(&self) -> Option<Step> {
        let (quant, codes) = self.refit_due().then(|| self.fit())?;
        Some(Step::Refit { quant, codes })
    }

    fn plan_link(&self) -> Option<Step> {
        self.shards.iter().enumerate().find_map(|(i, s)| {
            let g = s.graph.as_ref()?;
            let p = g.len() as u32;
            s.members.get(p as usize)?;
            let (out, dead) = if self.keys[s.members[p as usize] as usize].is_none() {
                (Vec::new(), true)
            } else {
                let pairs = Pairs::new(self, &s.members);
                (g.plan(p, &|a, b| pairs.get(a, b)), false)
            };
            Some(Step::Link {
                shard: i,
                node: p,
                out,
                dead,
            })
        })
    }

    fn plan_pass(&self) -> Option<Step> {
        self.shards.iter().enumerate().find_map(|(i, s)| {
            let g = s.graph.as_ref()?;
            let Some(pass) = &s.pass else {
                if !due(s.doomed, g) {
                    return None;
                }
                let nodes = (0..g.len() as u32)
                    .filter(|&n| {
                        !g.is_gone(n) && self.keys[s.members[n as usize] as usize].is_none()
                    })
                    .collect();
                return Some(Step::Start { shard: i, nodes });
            };
            if pass.cursor as usize >= g.len() {
                return Some(Step::Finish { shard: i });
            }
            let until = pass.cursor.saturating_add(BATCH).min(g.len() as u32);
            let pairs = Pairs::new(self, &s.members);
            let pair = |a: u32, b: u32| pairs.get(a, b);
            let dead = |n: u32| pass.holds(n);
            let lists = (pass.cursor..until)
                .filter(|&n| !dead(n) && !g.is_gone(n))
                .filter_map(|n| {
                    let to = g.repair(n, &dead, &pair)?;
                    Some((n, g.out(n).to_vec(), to))
                })
                .collect();
            Some(Step::Repair {
                shard: i,
                until,
                lists,
            })
        })
    }

    /// Applies a step [`VectorSet::plan_next`] chose (one planned before a change it no
    /// longer fits is dropped, or applied only where it still fits).
    pub fn apply(&mut self, w: Work) {
        if w.epoch != self.epoch {
            return;
        }
        let w = match w.step {
            Step::Refit { quant, codes } => return self.install(quant, codes),
            step => step,
        };
        let shard = match &w {
            Step::Link { shard, .. }
            | Step::Start { shard, .. }
            | Step::Repair { shard, .. }
            | Step::Finish { shard } => *shard,
            Step::Refit { .. } => return,
        };
        let Some(s) = self.shards.get_mut(shard) else {
            return;
        };
        let Some(mut g) = s.graph.take() else {
            return;
        };
        match w {
            Step::Link {
                node, out, dead, ..
            } => {
                let members = std::mem::take(&mut s.members);
                if g.len() == node as usize {
                    // Deleted since it was planned: linked as taken out, as at planning.
                    let dead = dead
                        || members
                            .get(node as usize)
                            .is_none_or(|&m| self.keys[m as usize].is_none());
                    let out = if dead { Vec::new() } else { out };
                    let pairs = Pairs::new(self, &members);
                    g.link(node, out, &|a, b| pairs.get(a, b));
                    if dead {
                        g.remove(&[node]);
                    }
                }
                self.shards[shard].members = members;
            }
            Step::Start { nodes, .. } if nodes.is_empty() => s.doomed = 0,
            Step::Start { mut nodes, .. } => {
                // Only nodes still dead and in the graph (a link may have come between).
                let keys = &self.keys;
                nodes.retain(|&n| {
                    (n as usize) < g.len()
                        && !g.is_gone(n)
                        && keys[s.members[n as usize] as usize].is_none()
                });
                let mut bits = vec![0u64; g.len().div_ceil(64)];
                for &n in &nodes {
                    bits[n as usize / 64] |= 1 << (n % 64);
                }
                s.pass = Some(Pass {
                    nodes,
                    bits,
                    cursor: 0,
                });
            }
            Step::Repair { until, lists, .. } => {
                for (n, from, to) in lists {
                    g.replace(n, &from, &to);
                }
                if let Some(pass) = &mut s.pass {
                    pass.cursor = pass.cursor.max(until);
                }
            }
            Step::Finish { .. } => {
                if let Some(pass) = s.pass.take() {
                    g.remove(&pass.nodes);
                    s.doomed = s.doomed.saturating_sub(pass.nodes.len());
                }
            }
            Step::Refit { .. } => {}
        }
        self.shards[shard].graph = Some(g);
        self.spill_linked();
    }
}

/// Whether `doomed` dead nodes are enough to start a pass over `g`.
fn due(doomed: usize, g: &Graph) -> bool {
    doomed >= DOOMED_AT.max(g.len() / 50)
}

#[cfg(test)]
mod tests {
    use super::super::{Distance, IndexKind, Origin, Params, SearchOpts, VectorSet, TRAIN_AT};

    /// A quantized set fits its quantizer in the write that brings it to a thousand vectors,
    /// and refits it once grown fourfold as a background step rather than in the write that
    /// crossed the line; rows appended between the step's plan and its apply are coded by the
    /// new quantizer, so every code is the new quantizer's.
    #[test]
    fn refits_are_steps_off_the_writes() {
        let mut set = VectorSet::new(Params {
            kind: IndexKind::QuantizedFlat,
            dims: 8,
            metric: Distance::Euclidean,
            list: 20,
            degree: 8,
        });
        let row = |i: u32| -> Vec<f32> {
            let shift = if i >= 1000 { 500.0 } else { 0.0 };
            (0..8)
                .map(|d| ((i * 13 + d * 5) % 101) as f32 + shift)
                .collect()
        };
        let put = |set: &mut VectorSet, range: std::ops::Range<u32>| {
            for i in range {
                set.set(&i.to_be_bytes(), Some(&row(i)), b"", Origin::default());
            }
        };
        put(&mut set, 0..TRAIN_AT as u32);
        assert!(set.quant.is_some(), "fitted inline at {TRAIN_AT}");
        assert!(!set.has_work());
        put(&mut set, TRAIN_AT as u32..4000);
        assert_eq!(set.trained_on, TRAIN_AT, "no refit inside a write");
        let planned = set.plan_next().expect("a refit is due");
        put(&mut set, 4000..4100);
        set.apply(planned);
        assert_eq!(set.trained_on, 4100);
        assert!(!set.has_work());
        let q = set.quant.clone().expect("a quantizer");
        assert_eq!(set.codes.len(), set.rows.values());
        for slot in [0u32, 2500, 4050] {
            let mut code = vec![0i8; 8];
            q.encode(&set.unit(&set.row(slot)), &mut code);
            assert_eq!(set.code(slot), &code[..], "slot {slot}");
        }
    }

    /// A step planned on a set that a consolidation then replaced (its copy numbers nodes
    /// afresh) is dropped: applied to the copy, the pass it starts would take out live nodes.
    #[test]
    fn a_step_planned_on_a_replaced_set_is_dropped() {
        let mut set = VectorSet::new(Params {
            kind: IndexKind::DiskAnn,
            dims: 4,
            metric: Distance::Euclidean,
            list: 20,
            degree: 8,
        });
        let key = |i: u32| i.to_be_bytes();
        for i in 0..400u32 {
            let v: Vec<f32> = (0..4).map(|d| ((i * 31 + d * 7) % 97) as f32).collect();
            set.set(&key(i), Some(&v), b"", Origin::default());
        }
        set.link_all();
        for i in 0..100u32 {
            set.set(&key(i), None, b"", Origin::default());
        }
        let stale = set.plan_next().expect("a pass is due");
        let mut fresh = set.live_copy();
        fresh.link_all();
        let lists = |s: &VectorSet| {
            let g = s.shards[0].graph.as_ref().expect("graph");
            (0..g.len() as u32)
                .map(|n| g.out(n).to_vec())
                .collect::<Vec<_>>()
        };
        let before = lists(&fresh);
        fresh.apply(stale);
        assert_eq!(lists(&fresh), before);
        assert!(!fresh.has_work());
    }

    /// Twenty clusters of 150 points; two whole clusters deleted and every tenth point
    /// replaced, as the bake-off's stream does. After the set's steps: no live node points at
    /// a deleted one, the deleted ones have no edges, and queries aimed at the deleted
    /// clusters find the nearest live points (the true top 10) through the graph: 190 of 200
    /// at a list of 20 (16 with the deleted nodes left in as waypoints).
    #[test]
    fn deleted_clusters_leave_the_graph() {
        let dims = 8;
        let mut rnd = super::super::uniform(7);
        let centres: Vec<Vec<f32>> = (0..20)
            .map(|_| (0..dims).map(|_| rnd() * 20.0).collect())
            .collect();
        let mut point = |c: usize| -> Vec<f32> { centres[c].iter().map(|x| x + rnd()).collect() };
        let n = 3000u32;
        let mut rows: Vec<Option<Vec<f32>>> =
            (0..n).map(|i| Some(point(i as usize % 20))).collect();
        let mut set = VectorSet::new(Params {
            kind: IndexKind::DiskAnn,
            dims,
            metric: Distance::Euclidean,
            list: 50,
            degree: 16,
        });
        let key = |i: u32| i.to_be_bytes();
        for (i, r) in rows.iter().enumerate() {
            set.set(&key(i as u32), r.as_deref(), b"", Origin::default());
        }
        set.link_all();
        for i in 0..n {
            if i % 20 == 3 || i % 20 == 11 {
                rows[i as usize] = None;
            } else if i % 10 == 5 {
                rows[i as usize] = Some(point(i as usize % 20));
            } else {
                continue;
            }
            set.set(&key(i), rows[i as usize].as_deref(), b"", Origin::default());
        }
        assert!(set.has_work());
        set.link_all();
        assert!(!set.has_work());
        let shard = &set.shards[0];
        let g = shard.graph.as_ref().expect("a diskANN set has a graph");
        let dead = |node: u32| set.keys[shard.members[node as usize] as usize].is_none();
        let mut gone = 0;
        for node in 0..g.len() as u32 {
            if dead(node) {
                assert!(
                    g.is_gone(node) && g.out(node).is_empty(),
                    "dead node {node}"
                );
                gone += 1;
            } else {
                let to_dead: Vec<u32> = g.out(node).iter().copied().filter(|m| dead(*m)).collect();
                assert!(to_dead.is_empty(), "node {node} points at dead {to_dead:?}");
                assert!(!g.out(node).is_empty(), "node {node} lost every edge");
            }
        }
        assert_eq!(gone, set.dead());
        let opts = SearchOpts {
            brute_force: false,
            rerank: 5,
            list: 20,
        };
        let mut hits = 0;
        for c in [3usize, 11] {
            for _ in 0..10 {
                let q = point(c);
                let found = set.search(&q, None, 10, (&[], &[0xff; 5]), None, opts);
                let got: Vec<u32> = found
                    .keys
                    .iter()
                    .map(|h| u32::from_be_bytes([h.key[0], h.key[1], h.key[2], h.key[3]]))
                    .collect();
                let mut exact: Vec<(f32, u32)> = (0..n)
                    .filter_map(|i| {
                        let r = rows[i as usize].as_ref()?;
                        Some((super::super::super::kernels::l2sq(&q, r), i))
                    })
                    .collect();
                exact.sort_by(|a, b| a.0.total_cmp(&b.0));
                hits += exact[..10].iter().filter(|e| got.contains(&e.1)).count();
            }
        }
        assert!(
            hits >= 180,
            "recall@10 aimed at the deleted clusters: {hits}/200"
        );
    }
}
