//! A vector path's index: its in-memory set (see [`crate::vector`]) learns each written
//! document's vector after the commit, in commit order, so a failed write never reaches it.
//! The set is rebuilt from the documents at start, not backfilled here.

use super::{DocRef, IndexKind, IndexMaintainer, Old, Text, Txn};
use crate::store::container::vectors::{PathIndex, Staged};
use crate::store::container::{Container, DocPos};
use crate::store::StoreError;
use crate::vector::{Found, Origin, SearchOpts};
use serde_json::Value;
use std::sync::Arc;
use strata_query::sql::ast::Query;
use strata_query::sql::routing::{self, Routing};

pub struct VectorIndex {
    path: Arc<PathIndex>,
}

impl VectorIndex {
    pub fn new(path: Arc<PathIndex>) -> Self {
        Self { path }
    }
}

impl IndexMaintainer for VectorIndex {
    fn kind(&self) -> IndexKind {
        IndexKind::Vector
    }

    fn update(
        &self,
        t: &mut Txn<'_>,
        doc: DocRef<'_>,
        // The set replaces a document's vector by key; the old one is not needed.
        _old: Option<&Old<'_>>,
        new: Option<&Text<'_>>,
    ) -> Result<(), StoreError> {
        let new = new.map(Text::doc).transpose()?;
        // Staged even without a vector: the old version (not parsed) may have had one.
        let (vector, exact) = match new.and_then(|d| self.path.extract(d)) {
            Some((v, exact)) => (Some(v), exact),
            None => (None, false),
        };
        let shard = new.map(|d| self.path.shard(d)).unwrap_or_default();
        // The version this write makes (indexes are maintained before it takes its place).
        let (lsn, sub) = t.tx.peek_change();
        let staged = Staged {
            key: doc.key.to_vec(),
            vector,
            shard,
            origin: Origin { lsn, sub, exact },
        };
        t.vector_changes.push((Arc::clone(&self.path), staged));
        Ok(())
    }

    fn backfill(&self, _t: &mut Txn<'_>, _doc: DocRef<'_>, _d: &Value) -> Result<(), StoreError> {
        Ok(())
    }

    fn explain(&self) -> String {
        let p = &self.path.params;
        format!(
            "{} vector index on {} ({} dimensions, {:?})",
            self.path.kind_name(),
            self.path.path,
            p.dims,
            p.metric
        )
    }
}

/// A document a vector search found.
pub struct Candidate {
    pub pos: DocPos,
    /// The index's distance (smaller is nearer; rounded to `f32`).
    pub distance: f32,
    /// The ORDER BY key the evaluator would give the document, if the index's row holds the
    /// numbers of the version with this LSN and place exactly (see [`Origin`]).
    pub known: Option<Known>,
}

/// The `VectorDistance` key of one version of a document (see [`Candidate::known`]).
pub struct Known {
    pub lsn: u64,
    pub sub: u32,
    pub key: Option<Value>,
}

/// A vector index chosen for a query, with the query's search: decided once when the plan is
/// made, printed from this value ([`VectorAccess::describe`]) and searched through it, so the
/// executor neither looks the index up again nor reads its parameters.
#[derive(Clone)]
pub struct VectorAccess {
    index: Arc<PathIndex>,
    search: strata_query::sql::vector::VectorSearch,
    /// The shards the query's WHERE clause pins its shard key to (`None`: every shard).
    shards: Option<Vec<Vec<u8>>>,
    /// The beam per result: the query's `searchListSizeMultiplier`, else
    /// [`default_multiplier`] of the index's size when the plan was made.
    per_result: usize,
}

impl VectorAccess {
    /// The ready index over the search's path that measures its distance, if `c` has one,
    /// and the shards of it `query` (bound) can match: those of the shard key values its
    /// WHERE clause pins, as it pins partition keys (`c.tenant = 'a'`, `IN`, `OR`).
    pub fn choose(
        c: &Container,
        search: strata_query::sql::vector::VectorSearch,
        query: &Query,
    ) -> Option<Self> {
        let index = c
            .vector_index(&search.path)
            .filter(|ix| ix.measures(&search.distance))?;
        let shards = index
            .shard_key
            .as_ref()
            .and_then(|def| match routing::route(query, def) {
                Routing::Keys {
                    full_keys: true,
                    epks,
                    ..
                } => Some(epks.into_iter().map(String::into_bytes).collect()),
                _ => None,
            });
        let per_result = search
            .list_multiplier
            .unwrap_or_else(|| default_multiplier(index.live()));
        Some(Self {
            index,
            search,
            shards,
            per_result,
        })
    }

    /// The documents of `range` nearest the query's vector, nearest first, at least `need`
    /// of them unless the index runs out (`true`: every vector of the range was handed out).
    /// The search's beam is `k` × `searchListSizeMultiplier` (at least the index's list), as
    /// the service sizes it by the query's k; without the option, × a default that grows
    /// with the index (see [`default_multiplier`]).
    pub fn candidates(
        &self,
        c: &Container,
        range: &strata_query::pk::EpkRange,
        need: usize,
        k: usize,
    ) -> (Vec<Candidate>, bool) {
        let s = &self.search;
        let opts = SearchOpts {
            brute_force: s.brute_force,
            rerank: s.rerank_multiplier,
            list: self.beam(k),
        };
        let (lo, hi) = c.key_bounds(range);
        let Found {
            keys, exhausted, ..
        } = self.index.search(
            (&s.vector, Some(&s.exact)),
            need,
            (&lo, &hi),
            self.shards.as_deref(),
            opts,
        );
        let docs = keys
            .into_iter()
            .map(|h| Candidate {
                pos: DocPos(h.key.into_vec()),
                distance: h.distance,
                known: h.origin.exact.then(|| Known {
                    lsn: h.origin.lsn,
                    sub: h.origin.sub,
                    key: strata_query::sql::distance::score_key(h.score),
                }),
            })
            .collect();
        (docs, exhausted)
    }

    /// The beam of a search for `k` results: `k` × the query's `searchListSizeMultiplier`,
    /// else × [`default_multiplier`] of the index's size; at least the index's list.
    fn beam(&self, k: usize) -> usize {
        k.max(1)
            .saturating_mul(self.per_result)
            .max(self.index.params.list)
    }

    /// Whether a search for `k` results is small enough to run on the async runtime's thread
    /// (a few hundred microseconds at the defaults): one graph, a beam of at most 200, at
    /// most 1,000 vectors re-ranked or not yet linked (those are measured exactly), no brute
    /// force.
    pub fn is_small(&self, k: usize) -> bool {
        let s = &self.search;
        let one_graph =
            self.index.shard_key.is_none() || self.shards.as_ref().is_some_and(|v| v.len() == 1);
        one_graph
            && !s.brute_force
            && self.index.params.kind == crate::vector::IndexKind::DiskAnn
            && self.beam(k) <= 200
            && k.saturating_mul(s.rerank_multiplier) <= 1000
            && self.index.unlinked() <= 1000
    }

    /// The index as the plan names it: kind, path, size, and how it is searched.
    pub fn describe(&self) -> String {
        let ix = &self.index;
        let (live, dead, unlinked, bytes) = ix.stats();
        format!(
            "the {} index on {} ({live} vectors, {:.1} MB in memory{}{}{}{})",
            ix.kind_name(),
            ix.path,
            bytes as f64 / 1048576.0,
            if dead > 0 {
                format!(", {dead} replaced or deleted")
            } else {
                String::new()
            },
            if unlinked > 0 {
                format!(", {unlinked} not yet linked")
            } else {
                String::new()
            },
            match (&ix.shard_key, &self.shards) {
                (None, _) => String::new(),
                (Some(def), None) => format!(", every {} shard", def.paths.join("")),
                (Some(def), Some(s)) => format!(", {} {} shard(s)", s.len(), def.paths.join("")),
            },
            if self.search.brute_force {
                ", brute force"
            } else {
                ""
            }
        )
    }
}

/// Vectors up to which the service's documented default multiplier, 10, is the default.
const DEFAULT_BEAM_UPTO: usize = 250_000;

/// The beam per result of a search that names no `searchListSizeMultiplier`, over an index
/// of `n` live vectors: the service's 10 up to 250,000 vectors, then 3 more each time the
/// index doubles (16 at a million), at most 100 (the option's documented maximum). A graph
/// of degree 32 found 0.98 of the true top 10 with a beam of 100 over 250,000 vectors of
/// the bench's clustered 128-dimension data, but 0.90 over a million of them, 0.95 with 150
/// and 0.97 with 200 (`tests/bench/diskann-bakeoff`, `1m` and `250k`, 2026-11-28): the
/// beam a recall needs grows with the graph. A larger degree does about as well for about
/// the same search work (48: 0.948 at 100) but slows every insert (509 s to link the million
/// against 392 s in an earlier run, each beside other work) and adds half again to each
/// node's edges, so the default search widens instead.
pub fn default_multiplier(n: usize) -> usize {
    if n <= DEFAULT_BEAM_UPTO {
        return 10;
    }
    let doublings = (n as f64 / DEFAULT_BEAM_UPTO as f64).log2();
    (10 + (3.0 * doublings).ceil() as usize).min(100)
}

#[cfg(test)]
mod tests {
    use super::default_multiplier;

    #[test]
    fn the_default_beam_widens_as_the_index_grows() {
        assert_eq!(default_multiplier(0), 10);
        assert_eq!(default_multiplier(250_000), 10);
        assert_eq!(default_multiplier(500_000), 13);
        assert_eq!(default_multiplier(1_000_000), 16);
        assert_eq!(default_multiplier(4_000_000), 22);
        assert_eq!(default_multiplier(usize::MAX), 100);
    }
}
