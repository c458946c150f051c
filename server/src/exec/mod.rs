//! The query executor: runs a planned query over the physical partitions its plan names and
//! produces one page — streaming in EPK order, a k-way merge for ORDER BY, or complete results
//! (aggregates, GROUP BY, DISTINCT) — with the continuation that resumes it. Nothing here
//! knows HTTP: `api/cosmos/query.rs` decodes the request, asks `strata_query` for the plan, calls
//! [`run`] and encodes the page.

use crate::store::container::{Container, DocPos};
use crate::store::lookup::IndexStats;
use crate::store::StoreError;
use bytes::Bytes;
use serde_json::Value;
use std::cmp::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_query::index::{term, Access, AccessError, OrderPath};
use strata_query::pk::EpkRange;
use strata_query::sql::computed::ComputedProperty;
use strata_query::sql::eval::cmp_keys;
use strata_query::sql::token::{Continuation, KeyValue, Position};
use strata_query::sql::{self, Ctx, Flow, Groups, Mode, PreparedQuery, QueryError};

/// Most bytes of documents in one page (the service's response limit).
const MAX_PAGE_BYTES: usize = 4 * 1024 * 1024;
/// A streaming page returns what it has (with a continuation) after scanning this long.
const PAGE_TIME_BUDGET: Duration = Duration::from_secs(2);
/// How long a streaming page runs on the request's own task before the rest of it moves to
/// the blocking pool. Most pages (one logical partition, a few documents) finish well within
/// it; handing every query to the pool cost two thread switches each, measured as a fifth of
/// the CPU of a single-partition query.
const INLINE_BUDGET: Duration = Duration::from_millis(1);

/// What one streaming run may produce before it stops with a continuation.
#[derive(Debug, Clone, Copy)]
struct Budget {
    rows: usize,
    bytes: usize,
    time: Duration,
    /// End the page at the end of each physical partition (the gateway's paging).
    per_range: bool,
}

/// Why a page could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error(transparent)]
    Query(#[from] QueryError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A continuation token that does not fit this query.
    #[error("{0}")]
    BadToken(String),
    /// A stored document that cannot be read.
    #[error("{0}")]
    Corrupt(String),
    /// A worker thread failed.
    #[error("query worker failed: {0}")]
    Worker(String),
    /// The container's index cannot serve the query as written (the service's 400).
    #[error("{}", .0.0)]
    Index(AccessError),
    /// The query's rows and groups outgrew its memory budget (bytes).
    #[error("The query holds more than {} MB of intermediate results (rows or groups kept for DISTINCT, GROUP BY, aggregates or a cross-partition merge) and was stopped. Narrow it with a filter or a partition key, or page it with ORDER BY and TOP or OFFSET LIMIT.", .0 >> 20)]
    Memory(usize),
    /// A request's inputs would hold more than a query may (the service's 413).
    #[error("{0}")]
    InputsTooLarge(String),
}

/// Runs one page of `plan`, resuming at `token`.
pub async fn run(
    c: Arc<Container>,
    plan: Arc<Plan>,
    token: Option<Continuation>,
) -> Result<Page, ExecError> {
    if !plan.query.calls_udf {
        return run_page(c, &plan, token).await;
    }
    // JavaScript never runs on the async runtime's threads: a query calling UDFs runs
    // entirely on the blocking pool (its per-partition work spawns from there as usual).
    let handle = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || handle.block_on(run_page(c, &plan, token)))
        .await
        .map_err(|e| ExecError::Worker(e.to_string()))?
}

/// A ranking by BM25 answered from the postings, or scored under the statistics the plan's
/// provider gathers (what gathering read is charged to the page); then [`run_planned`].
async fn run_page(
    c: Arc<Container>,
    plan: &Plan,
    token: Option<Continuation>,
) -> Result<Page, ExecError> {
    if plan.access.statistics.is_some() {
        use ranked::Ranked;
        // On this thread when it is quick, else (or when it turns out slow) on the pool.
        let mut answer = Ranked::Slow;
        if token.is_none() && ranked::quick(&c, plan) {
            answer = ranked::from_postings(&c, plan, &token, ranked::QUICK_READS)?;
        }
        if let Ranked::Slow = answer {
            let (c2, plan2, token2) = (Arc::clone(&c), plan.clone(), token.clone());
            answer = tokio::task::spawn_blocking(move || {
                ranked::from_postings(&c2, &plan2, &token2, u64::MAX)
            })
            .await
            .map_err(|e| ExecError::Worker(e.to_string()))??;
        }
        if let Ranked::Page(page) = answer {
            return Ok(page);
        }
        let (scored, cost) = ranked::with_statistics(&c, plan).await?;
        let mut page = run_planned(c, &scored, token).await?;
        page.add(&cost);
        return Ok(page);
    }
    run_planned(c, plan, token).await
}

/// Runs one page of `plan` by its query's mode, its scores' statistics known: each mode's
/// executor receives the parts of the plan it reads.
async fn run_planned(
    c: Arc<Container>,
    plan: &Plan,
    token: Option<Continuation>,
) -> Result<Page, ExecError> {
    let (p, access) = (Arc::clone(&plan.query), Arc::clone(&plan.access));
    let ranges = plan.routing.ranges.clone();
    let Paging {
        page_size,
        per_range,
    } = plan.paging;
    if ranges.is_empty() && p.mode != Mode::NoFrom {
        return Ok(Page::empty());
    }
    match p.mode {
        Mode::Streaming => {
            let budget = Budget {
                rows: page_size,
                bytes: MAX_PAGE_BYTES,
                time: INLINE_BUDGET,
                per_range,
            };
            let (first, out_of_time) = run_streaming(&c, &p, &access, &ranges, budget, token)?;
            if !out_of_time {
                return Ok(first);
            }
            // The page continues where the first part stopped, on the blocking pool.
            let sent: usize = first.docs.iter().map(Bytes::len).sum();
            let budget = Budget {
                rows: page_size.saturating_sub(first.docs.len()),
                bytes: MAX_PAGE_BYTES.saturating_sub(sent),
                time: PAGE_TIME_BUDGET,
                per_range,
            };
            let resume = first.continuation.clone();
            let (rest, _) = tokio::task::spawn_blocking(move || {
                run_streaming(&c, &p, &access, &ranges, budget, resume)
            })
            .await
            .map_err(|e| ExecError::Worker(e.to_string()))??;
            let mut docs = first.docs;
            docs.extend(rest.docs);
            let mut index = first.index;
            index.add(&rest.index);
            Ok(Page {
                docs,
                continuation: rest.continuation,
                scanned: first.scanned + rest.scanned,
                scanned_bytes: first.scanned_bytes + rest.scanned_bytes,
                index,
            })
        }
        Mode::Ordered => run_ordered(c, p, access, ranges, page_size, token).await,
        _ => {
            run_complete(
                c,
                p,
                access,
                ranges,
                page_size,
                token,
                memory::Class::Complete,
            )
            .await
        }
    }
}

/// What one page produced.
pub struct Page {
    pub docs: Vec<Bytes>,
    pub continuation: Option<Continuation>,
    /// Documents loaded, and their bytes.
    pub scanned: u64,
    pub scanned_bytes: u64,
    /// Index entries read.
    pub index: IndexStats,
}

impl Page {
    /// What `other` read, added to this page's counts (its rows are not taken).
    fn add(&mut self, other: &Page) {
        self.scanned += other.scanned;
        self.scanned_bytes += other.scanned_bytes;
        self.index.add(&other.index);
    }

    fn empty() -> Self {
        Page {
            docs: Vec::new(),
            continuation: None,
            scanned: 0,
            scanned_bytes: 0,
            index: IndexStats::default(),
        }
    }
}

/// The evaluation context of one run of `p` over `c`: the query's clock, and the
/// container's UDFs when `p` calls any.
pub fn query_ctx(c: &Container, p: &PreparedQuery) -> Ctx {
    let text = c.full_text_policy();
    let cx = Ctx::new(now_millis())
        .with_text((text != Default::default()).then(|| std::sync::Arc::new(text.languages())));
    if p.calls_udf {
        cx.with_udfs(Some(crate::script::udf::of(c)))
    } else {
        cx
    }
}

pub fn now_millis() -> i64 {
    sql::datetime::now_millis()
}

/// Runs `work` for every partition range in parallel (bounded by the machine's cores).
async fn parallel<T: Send + 'static>(
    ranges: Vec<EpkRange>,
    work: Arc<dyn Fn(EpkRange) -> Result<T, ExecError> + Send + Sync>,
) -> Result<Vec<T>, ExecError> {
    use futures::stream::{self, StreamExt};
    let n = num_cpus::get().max(1);
    let results: Vec<Result<T, ExecError>> = stream::iter(ranges)
        .map(|r| {
            let w = Arc::clone(&work);
            async move {
                tokio::task::spawn_blocking(move || w(r))
                    .await
                    .map_err(|e| ExecError::Worker(e.to_string()))?
            }
        })
        .buffered(n)
        .collect()
        .await;
    results.into_iter().collect()
}

pub mod access_path;
mod complete;
pub mod memory;
mod nearest;
mod ordered;
pub mod plan;
pub mod prepared;
mod ranked;
mod scan;
mod streaming;
mod top_postings;

pub use access_path::{access, access_within, AccessPath};
use complete::run_complete;
use nearest::{best_nearest, Nearest};
use ordered::run_ordered;
pub use plan::{route, Paging, Plan};
pub use scan::to_bytes;
use scan::*;
use streaming::run_streaming;

#[cfg(test)]
mod fulltext_tests;
#[cfg(test)]
mod index_tests;
#[cfg(test)]
mod plan_tests;
#[cfg(test)]
mod tests;
