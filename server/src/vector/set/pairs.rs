//! The distances a graph is linked with (see [`Pairs`]).

use super::{Query, VectorSet};
use hashbrown::HashTable;
use std::cell::RefCell;

/// Prepared first nodes, and where each slot's is.
type Prepared = (Vec<Query>, HashTable<(u32, u32)>);

/// The distances a graph is linked with, between nodes of one shard (`members` maps nodes to
/// slots). With the rows in memory, between the two rows ([`VectorSet::pair`]). With rows
/// in a file, from the first node's row to the second node's code — as a search measures
/// a query —, so that linking reads one row per distinct first node (the new node, and the
/// few a prune keeps) rather than two rows per distance. On the vector bench's 250,000 × 128
/// vectors (`tests/bench/diskann-bakeoff`), a graph linked so finds what one linked over the
/// rows finds: recall@10 0.9500 and 0.9505 at a beam of 100, 0.996 both re-ranking 200.
pub(super) struct Pairs<'s> {
    set: &'s VectorSet,
    members: &'s [u32],
    coded: bool,
    /// The first nodes' prepared rows, and where each slot's is.
    from: RefCell<Prepared>,
}

impl<'s> Pairs<'s> {
    pub(super) fn new(set: &'s VectorSet, members: &'s [u32]) -> Self {
        Self {
            set,
            members,
            coded: set.quant.is_some() && set.rows.spilled(),
            from: Default::default(),
        }
    }

    /// The distance from node `a` to node `b` (squared L2, of unit rows for cosine).
    pub(super) fn get(&self, a: u32, b: u32) -> f32 {
        let (sa, sb) = (self.members[a as usize], self.members[b as usize]);
        let set = self.set;
        if !self.coded {
            return set.pair(sa, sb);
        }
        let mut from = self.from.borrow_mut();
        let (queries, at) = &mut *from;
        let hash = |s: u32| u64::from(s).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let i = match at.find(hash(sa), |e| e.0 == sa) {
            Some(e) => e.1 as usize,
            None => {
                queries.push(set.prepare(&set.row(sa)));
                let i = queries.len() - 1;
                at.insert_unique(hash(sa), (sa, i as u32), |e| hash(e.0));
                i
            }
        };
        set.pair_coded(&queries[i], sb)
    }
}
