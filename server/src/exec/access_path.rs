//! How a plan reads each partition: the index facets `strata_query` chose for the query under
//! the container's policy (lookup probes, index order, counts from the index, extremes) and
//! the vector index that hands out ranked candidates. One value, chosen once when the plan is
//! made ([`access`]), printed from itself and executed from itself: nothing at run time looks
//! an index up again (DataFusion's rule: what `displayable()` prints is what `execute()` runs).

use super::ExecError;
use crate::store::container::indexes::vector::VectorAccess;
use crate::store::container::Container;
use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, Mutex};
use strata_query::index::access::Probe;
use strata_query::index::{Access, IndexingPolicy};
use strata_query::pk::PartitionKeyDefinition;
use strata_query::sql::computed::ComputedProperty;
use strata_query::sql::{self, hybrid, PreparedQuery};

/// The access path of a plan (see the module's doc).
pub struct AccessPath {
    /// The index facets: what every partition's read uses.
    pub index: Access,
    /// `ORDER BY VectorDistance` served by a vector index: the candidates come from it.
    pub vector: Option<VectorAccess>,
    /// `ORDER BY RANK FullTextScore` scored from a full-text index's postings.
    pub postings: Option<PostingsAccess>,
    /// Where BM25's statistics come from, when the ranking scores text.
    pub statistics: Option<Bm25Statistics>,
    /// The lookup the index offered, left unused because the route pins one logical partition
    /// and every probe reads one of its partition key paths: it would only find that
    /// partition's documents again, which one ordered read of its items yields without the
    /// index walk and a point read per candidate (see [`AccessPath::pin_partition`]). Kept for
    /// the printed plan and the index metrics; the filter still runs on every document.
    pub implied: Option<Vec<Probe>>,
    /// The WHERE clause holds for every document of the logical partition the route pins: it
    /// is only the equalities of the key's paths to the values that pinned it
    /// (`routing::implied_by_key`), so a streamed `SELECT *` passes the stored documents on
    /// without parsing them to evaluate it. Set by [`AccessPath::pin_partition`].
    pub filter_implied: bool,
}

/// Where BM25 takes the statistics of the scope a query ranks (documents, total words, hits
/// per term): a value the plan carries, as tantivy passes a `Bm25StatisticsProvider`, never
/// decided at run time. Gathered by `ranked::statistics` over the ranges the page reads.
#[derive(Debug, Clone)]
pub struct Bm25Statistics {
    /// Counted from a full-text index — partition sizes, length entries and postings, no
    /// document read — when one covers the ranked path.
    pub postings: Option<PostingsAccess>,
    /// Counted by evaluating this query (`hybrid::statistics_query`): without such an index,
    /// or while it is rebuilt.
    pub counted: String,
    /// `counted` planned with the query when it is what counts (no postings); a ranking over
    /// postings plans it only if the index turns out to be rebuilt when the page runs, so a
    /// query answered from the postings does not plan a second query it never runs.
    pub counted_plan: Option<CountedPlan>,
}

/// The statistics query, prepared, and how it reads each partition.
pub type CountedPlan = (Arc<PreparedQuery>, Arc<AccessPath>);

impl Bm25Statistics {
    /// The provider for `p`'s ranking in `c`, if it scores text.
    fn of(
        c: &Container,
        p: &PreparedQuery,
        postings: Option<&PostingsAccess>,
    ) -> Result<Option<Self>, ExecError> {
        let Some(counted) = hybrid::statistics_query(&p.query) else {
            return Ok(None);
        };
        let counted_plan = match postings {
            Some(_) => None,
            None => Some(plan_counted(c, &counted)?),
        };
        Ok(Some(Self {
            // Chosen only for a ranking by one `FullTextScore` (see `postings_access`).
            postings: postings.cloned(),
            counted,
            counted_plan,
        }))
    }
}

/// The statistics query `text` prepared for `c`, and its access path.
pub fn plan_counted(c: &Container, text: &str) -> Result<CountedPlan, ExecError> {
    let query = Arc::new(sql::prepare(text, &[], Some(&c.pk))?);
    let access = Arc::new(access(c, &query, true)?);
    Ok((query, access))
}

impl fmt::Display for Bm25Statistics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.postings {
            Some(p) => write!(
                f,
                "BM25 statistics from the full-text postings of {}",
                p.path
            ),
            None => write!(f, "BM25 statistics counted by `{}`", self.counted),
        }
    }
}

impl AccessPath {
    /// Every document of every partition, no index of any kind.
    pub fn scan() -> Self {
        Self {
            index: Access::default(),
            vector: None,
            postings: None,
            statistics: None,
            implied: None,
            filter_implied: false,
        }
    }

    /// What a single-partition route changes, called by its plan: a lookup that only
    /// re-finds the logical partition the route pins is dropped ([`AccessPath::implied`]),
    /// and a filter the pinned key implies is not evaluated
    /// ([`AccessPath::filter_implied`]). A lookup that serves anything else stays — a count
    /// or extreme from the index, an order, a ranking, or a probe on any other path (a large
    /// logical partition is better searched by a selective index than read whole).
    pub fn pin_partition(&mut self, p: &PreparedQuery, pk: &PartitionKeyDefinition) {
        // Only a streamed `SELECT *` skips parsing for it (every other query parses what it
        // projects, orders or groups by, and evaluates the filter on the way).
        self.filter_implied = p.routing.is_single()
            && p.raw_documents
            && p.mode == sql::Mode::Streaming
            && self.index.computed.is_empty()
            && strata_query::sql::routing::implied_by_key(&p.query, pk);
        let a = &self.index;
        let Some(probes) = &a.lookup else { return };
        let only_keys = probes.iter().all(|p| p.on_path_of(&pk.segments));
        let plain = !a.count_only
            && a.order.is_none()
            && a.extreme.is_none()
            && a.ranked.is_none()
            && self.postings.is_none()
            && self.statistics.is_none();
        if only_keys && plain {
            self.implied = self.index.lookup.take();
        }
    }
}

impl fmt::Debug for AccessPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessPath")
            .field("index", &self.index)
            .field("vector", &self.vector.as_ref().map(VectorAccess::describe))
            .field("postings", &self.postings)
            .field(
                "statistics",
                &self.statistics.as_ref().map(ToString::to_string),
            )
            .field("implied", &self.implied)
            .field("filter_implied", &self.filter_implied)
            .finish()
    }
}

impl Deref for AccessPath {
    type Target = Access;

    fn deref(&self) -> &Access {
        &self.index
    }
}

impl fmt::Display for AccessPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.implied {
            Some(probes) => {
                let filters: Vec<String> = probes.iter().map(|p| p.filter.to_string()).collect();
                write!(
                    f,
                    "the pinned logical partition's documents in key order (no index lookup: its key implies {})",
                    filters.join(" ∪ ")
                )?;
            }
            None => write!(f, "{}", self.index)?,
        }
        if self.index.ranked.is_some() {
            match &self.vector {
                Some(v) => write!(f, ", candidates from {}", v.describe())?,
                None => f.write_str(", exact over every candidate")?,
            }
        }
        if let Some(p) = &self.postings {
            write!(
                f,
                "; ranked by BM25 from the full-text postings of {} ({} stem(s))",
                p.path,
                p.stems.len()
            )?;
        }
        if let Some(s) = &self.statistics {
            write!(f, "; {s}")?;
        }
        if self.filter_implied {
            f.write_str("; the filter holds for every document of the pinned key (not evaluated)")?;
        }
        Ok(())
    }
}

/// The access path a kept prepared query was last planned with, and what it was chosen
/// from — the container's index state (policy, generation, readiness) and computed
/// properties, the policy and the properties compared by identity (a change of either is a
/// new `Arc`) — so a query asked again with the same values is not planned again, and a
/// plan never reads the index by a choice made under another policy or while it was
/// rebuilt. Choosing it was 4.6% of a single-partition query's server CPU under
/// `strata-bench --profile`, spent again on every page. A ranking is not remembered: its
/// vector index's readiness is read when it is planned too.
#[derive(Default)]
pub struct AccessMemo(Mutex<Option<Memo>>);

impl AccessMemo {
    fn held(&self) -> std::sync::MutexGuard<'_, Option<Memo>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What [`AccessMemo`] holds.
struct Memo {
    /// The route pinned one logical partition ([`access_within`] and
    /// [`AccessPath::pin_partition`], not [`access`]).
    single: bool,
    enable_scan: bool,
    policy: Arc<IndexingPolicy>,
    gen: u16,
    ready: bool,
    computed: Arc<Vec<ComputedProperty>>,
    access: Arc<AccessPath>,
}

/// How `p` reads each partition of `c` for a route to one logical partition (`single`) or
/// any other: as `memo` remembers it if the container's index state and computed
/// properties are those it was chosen under, else chosen now (and remembered).
pub fn planned(
    c: &Container,
    p: &PreparedQuery,
    single: bool,
    enable_scan: bool,
    memo: Option<&AccessMemo>,
) -> Result<Arc<AccessPath>, ExecError> {
    let choose = || -> Result<AccessPath, ExecError> {
        if single {
            let mut a = access_within(c, p, enable_scan, &c.pk.segments)?;
            a.pin_partition(p, &c.pk);
            Ok(a)
        } else {
            access(c, p, enable_scan)
        }
    };
    let Some(memo) = memo else {
        return choose().map(Arc::new);
    };
    // Taken before choosing: if the state changes meanwhile, what is remembered is marked
    // with the older state and chosen again by the next query.
    let (state, computed) = (c.index_state(), c.computed());
    if let Some(m) = memo.held().as_ref() {
        if m.single == single
            && m.enable_scan == enable_scan
            && Arc::ptr_eq(&m.policy, &state.policy)
            && m.gen == state.gen
            && m.ready == state.ready
            && Arc::ptr_eq(&m.computed, &computed)
        {
            return Ok(Arc::clone(&m.access));
        }
    }
    let access = Arc::new(choose()?);
    if access.vector.is_none() && access.index.ranked.is_none() {
        *memo.held() = Some(Memo {
            single,
            enable_scan,
            policy: state.policy,
            gen: state.gen,
            ready: state.ready,
            computed,
            access: Arc::clone(&access),
        });
    }
    Ok(access)
}

/// How `p` reads each partition of `c` under the container's current indexing policy, or
/// the service's refusal. `enable_scan` is `x-ms-documentdb-query-enable-scan`.
pub fn access(
    c: &Container,
    p: &PreparedQuery,
    enable_scan: bool,
) -> Result<AccessPath, ExecError> {
    access_within(c, p, enable_scan, &[])
}

/// [`access`] for a route that pins the partition key paths `pinned` (each split into
/// property names): every path of the key for a route to one logical partition. Of two
/// conjuncts, one on a pinned path is the last choice for the lookup — the route narrows the
/// read by it already.
pub fn access_within(
    c: &Container,
    p: &PreparedQuery,
    enable_scan: bool,
    pinned: &[Vec<String>],
) -> Result<AccessPath, ExecError> {
    let state = c.index_state();
    let mut a = strata_query::index::access::choose(&p.query, &state.policy, enable_scan, pinned)
        .map_err(ExecError::Index)?;
    let computed = c.computed();
    let used: Vec<ComputedProperty> = if computed.is_empty() {
        Vec::new()
    } else {
        strata_query::sql::computed::referenced(&computed, &p.parsed.to_string())
            .into_iter()
            .cloned()
            .collect()
    };
    // Entries still being built, or values computed at read time (which the index does not
    // hold): read documents.
    if !state.ready || !used.is_empty() {
        a.lookup = None;
        a.order = None;
        a.count_only = a.count_only && p.query.where_.is_none();
        a.extreme = None;
    }
    a.computed = used;
    let vector = match a.ranked.is_some() && a.computed.is_empty() {
        true => {
            sql::vector::search_of(&p.query).and_then(|vs| VectorAccess::choose(c, vs, &p.query))
        }
        false => None,
    };
    // Postings are read only once every document has its entries.
    let postings = match state.ready {
        true => postings_access(c, p, &a),
        false => None,
    };
    let statistics = Bm25Statistics::of(c, p, postings.as_ref())?;
    Ok(AccessPath {
        index: a,
        vector,
        postings,
        statistics,
        implied: None,
        filter_implied: false,
    })
}

/// `ORDER BY RANK FullTextScore` over a full-text index, scored from its postings: what it
/// needs (chosen with the plan; see `ranked::from_postings`): its path's postings and lengths
/// paths, and its terms' stems (one stem each: a phrase needs evaluation).
#[derive(Debug, Clone)]
pub struct PostingsAccess {
    /// The ranked path, as the plan prints it.
    pub path: String,
    pub postings: Vec<strata_query::index::Seg>,
    pub lengths: Vec<strata_query::index::Seg>,
    pub stems: Vec<String>,
}

/// The indexed form of `p`'s ranking, when `ORDER BY RANK FullTextScore(path, 'word', ...)`
/// ranks over a path with a full-text index.
fn postings_access(c: &Container, p: &PreparedQuery, a: &Access) -> Option<PostingsAccess> {
    use strata_query::index::fulltext::{lengths_path, postings_path};
    use strata_query::sql::ast::Expr;
    use strata_query::sql::functions::{Func, SearchFn};
    let rank = hybrid::rank_of(&p.query)?;
    if rank.fused || !a.computed.is_empty() || p.mode != sql::Mode::Ordered {
        return None;
    }
    let from = p.query.from.as_ref()?;
    if !from.joins.is_empty() {
        return None;
    }
    let Expr::Call(Func::Search(SearchFn::FullTextScore), args) = rank.components[0] else {
        return None;
    };
    let (_, segs) = args.first()?.as_path()?;
    let segs: Vec<strata_query::index::Seg> = segs
        .iter()
        .map(|s| strata_query::index::Seg::Name(s.to_string()))
        .collect();
    let state = c.index_state();
    let lang = state.policy.full_text.iter().find(|(s, _)| *s == segs)?.1;
    let mut stems = Vec::new();
    for t in hybrid::terms(args) {
        let mut words = strata_query::sql::fulltext::analyze(&t, lang);
        if words.len() != 1 {
            return None;
        }
        stems.push(words.remove(0));
    }
    Some(PostingsAccess {
        path: strata_query::index::policy::print_path(&segs),
        postings: postings_path(&segs),
        lengths: lengths_path(&segs),
        stems,
    })
}
