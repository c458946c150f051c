//! What a lookup yields: item keys in key order, without duplicates.
//!
//! Most lookups find few documents and hand over their positions. A full-text word's
//! postings can be a good share of the container, and a `TOP 10` reads ten of them: making a
//! position (an allocation) for every posting cost more than the rest of such a query. A
//! lookup answered from one stem's decoded postings ([`super::postings`]) therefore hands
//! over the list itself, and positions are made only for the documents read.

use super::postings::Postings;
use crate::store::container::DocPos;
use std::sync::Arc;

/// A lookup's item keys (see the module's doc).
#[derive(Debug)]
pub enum Found {
    /// Positions made already.
    Keys(Vec<DocPos>),
    /// The `from..to` share of one stem's postings in key order.
    Share {
        list: Arc<Postings>,
        from: usize,
        to: usize,
    },
    /// Postings of one stem at `picks` (posting numbers, ascending: in key order).
    Picks {
        list: Arc<Postings>,
        picks: Vec<u32>,
    },
}

impl Found {
    pub fn len(&self) -> usize {
        match self {
            Found::Keys(k) => k.len(),
            Found::Share { from, to, .. } => to - from,
            Found::Picks { picks, .. } => picks.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `i`-th item key.
    pub fn key(&self, i: usize) -> &[u8] {
        match self {
            Found::Keys(k) => k[i].as_bytes(),
            Found::Share { list, from, .. } => list.key(from + i),
            Found::Picks { list, picks } => list.key(picks[i] as usize),
        }
    }

    /// The `i`-th document's position.
    pub fn pos(&self, i: usize) -> DocPos {
        match self {
            Found::Keys(k) => k[i].clone(),
            Found::Share { .. } | Found::Picks { .. } => DocPos(self.key(i).to_vec()),
        }
    }

    /// The first `i` whose key `before` does not accept (keys accepted come first).
    pub fn partition_point(&self, before: impl Fn(&[u8]) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if before(self.key(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The positions of `i..j`.
    pub fn positions(&self, i: usize, j: usize) -> Vec<DocPos> {
        (i..j).map(|n| self.pos(n)).collect()
    }

    /// Every position (a lookup that needs them all, or merges lookups).
    pub fn into_keys(self) -> Vec<DocPos> {
        match self {
            Found::Keys(k) => k,
            other => other.positions(0, other.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A list's share and its picks read as the positions they stand for.
    #[test]
    fn postings_read_as_their_keys() {
        let mut p = super::super::postings::Gathered::default();
        for k in [&b"c"[..], b"a", b"d", b"b"] {
            p.push(k, (1, 1));
        }
        let list = Arc::new(p.finish());
        let share = Found::Share {
            list: Arc::clone(&list),
            from: 1,
            to: 4,
        };
        let keys: Vec<DocPos> = share.into_keys();
        assert_eq!(keys, [b"b", b"c", b"d"].map(|k| DocPos(k.to_vec())));
        let picked = Found::Picks {
            list,
            picks: vec![0, 3],
        };
        assert_eq!((picked.len(), picked.key(1)), (2, &b"d"[..]));
        assert_eq!(picked.partition_point(|k| k < &b"b"[..]), 1);
        assert_eq!(picked.partition_point(|k| k <= &b"z"[..]), 2);
    }
}
