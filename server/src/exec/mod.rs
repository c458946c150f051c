//! The query executor: runs a planned query over the physical partitions its plan names and
//! produces one page — streaming in EPK order, a k-way merge for ORDER BY, or complete results
//! (aggregates, GROUP BY, DISTINCT) — with the continuation that resumes it. Nothing here
//! knows HTTP: `api/query.rs` decodes the request, asks `strata_query` for the plan, calls
//! [`run`] and encodes the page.

use crate::store::container::{read, Container};
use crate::store::lookup::IndexStats;
use crate::store::{keys, StoreError};
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
}

/// How `p` reads each partition of `c` under the container's current indexing policy, or
/// the service's refusal. `enable_scan` is `x-ms-documentdb-query-enable-scan`.
pub fn access(c: &Container, p: &PreparedQuery, enable_scan: bool) -> Result<Access, ExecError> {
    let state = c.index_state();
    let mut a = strata_query::index::access::plan(&p.query, &state.policy, enable_scan)
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
    Ok(a)
}

/// Runs one page of `p` over `ranges` (the plan's EPK ranges), resuming at `token`.
/// With `per_range`, a streaming page never spans two physical partitions, as the Cosmos
/// gateway pages a plain cross-partition query (`--gateway-compat`).
pub async fn run(
    c: Arc<Container>,
    p: Arc<PreparedQuery>,
    access: Arc<Access>,
    ranges: Vec<EpkRange>,
    paging: (usize, bool),
    token: Option<Continuation>,
) -> Result<Page, ExecError> {
    if !p.calls_udf {
        return run_page(c, p, access, ranges, paging, token).await;
    }
    // JavaScript never runs on the async runtime's threads: a query calling UDFs runs
    // entirely on the blocking pool (its per-partition work spawns from there as usual).
    let handle = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        handle.block_on(run_page(c, p, access, ranges, paging, token))
    })
    .await
    .map_err(|e| ExecError::Worker(e.to_string()))?
}

async fn run_page(
    c: Arc<Container>,
    p: Arc<PreparedQuery>,
    access: Arc<Access>,
    ranges: Vec<EpkRange>,
    paging: (usize, bool),
    token: Option<Continuation>,
) -> Result<Page, ExecError> {
    let (page_size, per_range) = paging;
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
        _ => run_complete(c, p, access, ranges, page_size, token).await,
    }
}

/// Splits the target ranges along physical partition boundaries (units of parallel work).
fn per_partition(c: &Container, ranges: &[EpkRange]) -> Vec<EpkRange> {
    let map = read(&c.map);
    let mut out = Vec::new();
    for r in ranges {
        for s in map.overlapping(r) {
            if let Some(x) = s.epk_range().intersect(r) {
                out.push(x);
            }
        }
    }
    out
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
    let cx = Ctx::new(now_millis());
    if p.calls_udf {
        cx.with_udfs(Some(crate::script::udf::of(c)))
    } else {
        cx
    }
}

pub fn now_millis() -> i64 {
    sql::datetime::now_millis()
}

/// Every live document in `range` the access path yields (after `after`), in key order,
/// passed to `f` with its key and bytes: the lookup's candidates when the index serves it,
/// otherwise every document.
fn scan(
    c: &Container,
    access: &Access,
    range: &EpkRange,
    after: Option<&[u8]>,
    stats: &mut IndexStats,
    f: impl FnMut(&[u8], &Bytes) -> Result<Flow, ExecError>,
) -> Result<(), ExecError> {
    scan_with(c, access, None, range, after, stats, f)
}

/// [`scan`], with the lookup's candidates already found for a span of ranges (`found`: one
/// index walk for all the ranges of a page instead of one per range).
fn scan_with(
    c: &Container,
    access: &Access,
    found: Option<&[Vec<u8>]>,
    range: &EpkRange,
    after: Option<&[u8]>,
    stats: &mut IndexStats,
    mut f: impl FnMut(&[u8], &Bytes) -> Result<Flow, ExecError>,
) -> Result<(), ExecError> {
    let own;
    let candidates = match (found, &access.lookup) {
        (Some(all), _) => {
            let lo = keys::epk_bound(c.cid, &range.min);
            let from = all.partition_point(|k| *k < lo);
            let to = if range.max.as_str() >= "FF" {
                all.len()
            } else {
                let hi = keys::epk_bound(c.cid, &range.max);
                all.partition_point(|k| *k < hi)
            };
            Some(&all[from..to.max(from)])
        }
        (None, Some(probes)) => {
            own = c.index_candidates(probes, range, stats)?;
            own.as_deref()
        }
        (None, None) => None,
    };
    if let Some(keys) = candidates {
        {
            let start = match after {
                Some(a) => keys.partition_point(|k| k.as_slice() <= a),
                None => 0,
            };
            for k in &keys[start..] {
                let Some(item) = c.load_item(k)? else {
                    continue;
                };
                if f(k, &item.json)? == Flow::Stop {
                    return Ok(());
                }
            }
            return Ok(());
        }
    }
    let mut cursor: Option<Vec<u8>> = after.map(<[u8]>::to_vec);
    loop {
        let chunk = c.scan_items(range, cursor.as_deref(), 256)?;
        let done = chunk.len() < 256;
        for (k, item) in &chunk {
            if f(k, &item.json)? == Flow::Stop {
                return Ok(());
            }
        }
        match chunk.last() {
            Some((k, _)) if !done => cursor = Some(k.clone()),
            _ => return Ok(()),
        }
    }
}

/// Parses a stored document as far as `p` reads it, with the `computed` properties it reads
/// added (then the whole document is parsed: their expressions may read any property).
fn parse_doc(
    p: &PreparedQuery,
    computed: &[ComputedProperty],
    bytes: &[u8],
) -> Result<Value, ExecError> {
    let corrupt = |e: serde_json::Error| {
        ExecError::Corrupt(format!("a stored document is not valid JSON: {e}"))
    };
    if computed.is_empty() {
        return p.load_doc(bytes).map_err(corrupt);
    }
    let mut doc: Value = serde_json::from_slice(bytes).map_err(corrupt)?;
    strata_query::sql::computed::augment(&mut doc, computed, &Ctx::new(now_millis()));
    Ok(doc)
}

pub fn to_bytes(v: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(v).unwrap_or_default())
}

/// The key of the document a row came from, for tie-breaking and continuation.
fn suffix_hex(key: &[u8]) -> String {
    strata_query::pk::epk::encode_hex(&key[4..])
}

fn key_from_hex(c: &Container, hex: &str) -> Result<Vec<u8>, ExecError> {
    let suffix = strata_query::pk::epk::decode_hex(hex)
        .filter(|s| keys::split_item_suffix(s).is_some())
        .ok_or_else(|| {
            ExecError::BadToken(String::from(
                "The continuation token is invalid (bad position); run the query again without it.",
            ))
        })?;
    let mut k = keys::container_prefix(c.cid);
    k.extend_from_slice(&suffix);
    Ok(k)
}

/// Key-ordered execution: scan the target ranges in order, resume after the token position.
/// One streaming page within `budget`; also says whether it stopped because its time ran out
/// (then its continuation resumes the same page).
fn run_streaming(
    c: &Container,
    p: &PreparedQuery,
    access: &Access,
    ranges: &[EpkRange],
    budget: Budget,
    token: Option<Continuation>,
) -> Result<(Page, bool), ExecError> {
    let cx = query_ctx(c, p);
    let (mut consumed, resume) =
        match token {
            Some(Continuation {
                consumed,
                pos: Position::Stream { after, skip },
                ..
            }) => (consumed, Some((key_from_hex(c, &after)?, skip))),
            Some(_) => return Err(ExecError::BadToken(String::from(
                "The continuation token does not match this query; run it again without the token.",
            ))),
            None => (0, None),
        };
    let mut page = Page::empty();
    let mut index = IndexStats::default();
    let mut bytes_out = 0usize;
    let started = Instant::now();
    let limit_end = p.limit.map(|l| p.offset.saturating_add(l));
    let needs_parse = !(p.raw_documents && p.query.where_.is_none());
    let fp = p.fingerprint.clone();
    let mut finished = false;
    let mut out_of_time = false;
    // Resume inclusively at the token's document, skipping the rows already returned from it.
    let start_key = resume.as_ref().map(|(k, _)| k.clone());
    // A lookup over several ranges walks the index once for all of them.
    let found = match (&access.lookup, ranges.first(), ranges.last()) {
        (Some(probes), Some(first), Some(last)) if ranges.len() > 1 => {
            let span = EpkRange::new(first.min.clone(), last.max.clone());
            c.index_candidates(probes, &span, &mut index)?
        }
        _ => None,
    };
    let sliced;
    let ranges = if budget.per_range {
        sliced = per_partition(c, ranges);
        &sliced[..]
    } else {
        ranges
    };
    // Where a full page stopped on a whole document (then, if no document follows, the query
    // is over and the page carries no continuation).
    let mut full_at: Option<(usize, Vec<u8>)> = None;
    for (i, range) in ranges.iter().enumerate() {
        if finished || page.continuation.is_some() {
            break;
        }
        let range_end = keys::epk_bound(c.cid, &range.max);
        let after = match &start_key {
            Some(k) if *k >= range_end && range.max.as_str() < "FF" => continue,
            Some(k) => {
                // Scan from just before the token's document so that it is visited again.
                let mut before = k.clone();
                before.pop();
                Some(before)
            }
            None => None,
        };
        scan_with(
            c,
            access,
            found.as_deref(),
            range,
            after.as_deref(),
            &mut index,
            |key, json| {
                if let Some((rk, _)) = &resume {
                    if key < rk.as_slice() {
                        return Ok(Flow::Continue);
                    }
                }
                // The document a token resumes at was loaded (and counted) by the page before.
                if start_key.as_deref() != Some(key) {
                    page.scanned += 1;
                    page.scanned_bytes += json.len() as u64;
                }
                let skip_rows = match &resume {
                    Some((rk, s)) if key == rk.as_slice() => *s,
                    _ => 0,
                };
                let mut row_no = 0u64;
                let mut stop = false;
                let mut emit = |value: Option<Value>, docs: &mut Vec<Bytes>| -> Flow {
                    row_no += 1;
                    if row_no <= skip_rows {
                        return Flow::Continue;
                    }
                    let idx = consumed;
                    consumed += 1;
                    if limit_end.is_some_and(|e| idx >= e) {
                        finished = true;
                        stop = true;
                        return Flow::Stop;
                    }
                    if idx < p.offset {
                        return Flow::Continue;
                    }
                    let b = match value {
                        Some(v) => to_bytes(&v),
                        None => json.clone(),
                    };
                    bytes_out += b.len();
                    docs.push(b);
                    if limit_end.is_some_and(|e| consumed >= e) {
                        finished = true;
                        stop = true;
                        return Flow::Stop;
                    }
                    if docs.len() >= budget.rows || bytes_out >= budget.bytes {
                        stop = true;
                        return Flow::Stop;
                    }
                    Flow::Continue
                };
                if needs_parse {
                    let doc = parse_doc(p, &access.computed, json)?;
                    p.eval_doc(&doc, &cx, &mut |row| Ok(emit(row.value, &mut page.docs)))?;
                } else {
                    emit(None, &mut page.docs);
                }
                // Where the next page resumes: after this document's first `row_no` rows.
                let resume = || Continuation {
                    fp: fp.clone(),
                    consumed,
                    pos: Position::Stream {
                        after: suffix_hex(key),
                        skip: row_no,
                    },
                };
                if stop {
                    if !finished {
                        page.continuation = Some(resume());
                        if p.raw_documents && access.lookup.is_none() {
                            full_at = Some((i, key.to_vec()));
                        }
                    }
                    return Ok(Flow::Stop);
                }
                // The document a token resumes at was already counted: stopping there again
                // would make no progress.
                let resumed_here = start_key.as_deref() == Some(key);
                if !resumed_here && started.elapsed() > budget.time {
                    // Return what we have; the next page resumes after this document.
                    page.continuation = Some(resume());
                    out_of_time = true;
                    return Ok(Flow::Stop);
                }
                Ok(Flow::Continue)
            },
        )?;
        let last = i + 1 == ranges.len();
        if budget.per_range && !last && !finished && page.continuation.is_none() {
            // The gateway's page ends with the partition: resume at the next one.
            page.continuation = Some(Continuation {
                fp: fp.clone(),
                consumed,
                pos: Position::Stream {
                    after: partition_start_hex(&range.max),
                    skip: 0,
                },
            });
        }
    }
    if let Some((i, key)) = full_at {
        if !any_document_after(c, &ranges[i..], &key)? {
            page.continuation = None;
        }
    }
    page.index = index;
    Ok((page, out_of_time))
}

/// A stream position just before every document of EPK `epk` and after: `epk | 0x00` with
/// an empty id, which no document has.
fn partition_start_hex(epk: &str) -> String {
    let mut suffix = epk.as_bytes().to_vec();
    suffix.push(0);
    strata_query::pk::epk::encode_hex(&suffix)
}

/// Whether a live document follows item key `after` in the first of `ranges`, or lies in any
/// later one.
fn any_document_after(c: &Container, ranges: &[EpkRange], after: &[u8]) -> Result<bool, ExecError> {
    for (n, r) in ranges.iter().enumerate() {
        let from = (n == 0).then_some(after);
        if !c.scan_items(r, from, 1)?.is_empty() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// A candidate row of an ORDER BY query.
struct Ranked {
    keys: Vec<Option<Value>>,
    doc: Vec<u8>,
    ord: u64,
    value: Bytes,
}

fn cmp_ranked(a: &Ranked, b: &Ranked, desc: &[bool]) -> Ordering {
    cmp_keys(&a.keys, &b.keys, desc)
        .then_with(|| a.doc.cmp(&b.doc))
        .then(a.ord.cmp(&b.ord))
}

/// Runs `work` for every partition range in parallel (bounded by the machine's cores).
/// Evaluates every document of `range` and hands each row to `f` with its sort keys and
/// position (document key, row ordinal). Returns the documents and bytes scanned.
fn scan_rows(
    c: &Container,
    p: &PreparedQuery,
    access: &Access,
    range: &EpkRange,
    stats: &mut IndexStats,
    mut f: impl FnMut(Ranked) -> Flow,
) -> Result<(u64, u64), ExecError> {
    let cx = query_ctx(c, p);
    let (mut scanned, mut bytes) = (0u64, 0u64);
    scan(c, access, range, None, stats, |key, json| {
        scanned += 1;
        bytes += json.len() as u64;
        let doc = parse_doc(p, &access.computed, json)?;
        let mut ord = 0u64;
        let mut flow = Flow::Continue;
        p.eval_doc(&doc, &cx, &mut |row| {
            ord += 1;
            flow = f(Ranked {
                keys: row.keys,
                doc: key.to_vec(),
                ord,
                value: match row.value {
                    Some(v) => to_bytes(&v),
                    None => json.clone(),
                },
            });
            Ok(flow)
        })?;
        Ok(flow)
    })?;
    Ok((scanned, bytes))
}

impl Ranked {
    /// About what holding this row costs.
    fn held_bytes(&self) -> usize {
        let keys: usize = self
            .keys
            .iter()
            .map(|k| {
                k.as_ref()
                    .map_or(0, |v| sql::limits::size_within(v, usize::MAX).unwrap_or(0))
            })
            .sum();
        self.value.len() + self.doc.len() + keys + memory::PER_ENTRY
    }
}

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

/// One partition's part of an ORDER BY page.
struct PartBest {
    rows: Vec<Ranked>,
    scanned: u64,
    bytes: u64,
    /// Rows after the token position this partition has (at least; more than `rows` when it
    /// stopped early).
    candidates: u64,
    index: IndexStats,
}

/// The best `want` rows of `range` after `last`: read in index order when the index serves
/// the first ORDER BY item (stopping once `want` rows and their ties are in), otherwise from
/// every candidate document.
fn partition_best(
    c: &Container,
    p: &PreparedQuery,
    access: &Access,
    range: &EpkRange,
    last: Option<&Ranked>,
    want: usize,
    desc: &[bool],
) -> Result<PartBest, ExecError> {
    let mut index = IndexStats::default();
    if let (Some(order), None) = (&access.order, &access.lookup) {
        if let Some(part) = best_in_index_order(c, p, order, range, last, want, desc, &mut index)? {
            return Ok(part);
        }
    }
    let mut best: Vec<Ranked> = Vec::new();
    let mut candidates = 0u64;
    let (scanned, bytes) = scan_rows(c, p, access, range, &mut index, |r| {
        if let Some(l) = last {
            if cmp_ranked(&r, l, desc) != Ordering::Greater {
                return Flow::Continue;
            }
        }
        candidates += 1;
        best.push(r);
        if best.len() >= 2 * want.max(64) {
            best.sort_by(|a, b| cmp_ranked(a, b, desc));
            best.truncate(want);
        }
        Flow::Continue
    })?;
    best.sort_by(|a, b| cmp_ranked(a, b, desc));
    best.truncate(want);
    Ok(PartBest {
        rows: best,
        scanned,
        bytes,
        candidates,
        index,
    })
}

/// [`partition_best`] from the index: documents in the order of the first ORDER BY path,
/// from the token's value on; once `want` rows are in, the rest of that value's documents
/// (ties, which later keys and positions order) and no more. `None` when the index cannot
/// give the order (see [`Container::index_order`]) or the token sits among documents
/// without the path.
#[allow(clippy::too_many_arguments)]
fn best_in_index_order(
    c: &Container,
    p: &PreparedQuery,
    order: &OrderPath,
    range: &EpkRange,
    last: Option<&Ranked>,
    want: usize,
    desc: &[bool],
    index: &mut IndexStats,
) -> Result<Option<PartBest>, ExecError> {
    let from = match last.map(|l| l.keys.first()) {
        Some(Some(Some(v))) => Some(term::encode(v)),
        Some(_) => return Ok(None),
        None => None,
    };
    let cx = query_ctx(c, p);
    let mut best: Vec<Ranked> = Vec::new();
    let (mut scanned, mut bytes) = (0u64, 0u64);
    let mut group: Option<Vec<u8>> = None;
    let mut failed: Option<ExecError> = None;
    let finished = c.index_order(order, range, from.as_deref(), index, &mut |t, key| {
        if group.as_deref().is_some_and(|g| g != t) {
            return false;
        }
        let item = match c.load_item(&key) {
            Ok(Some(item)) => item,
            Ok(None) => return true,
            Err(e) => {
                failed = Some(e.into());
                return false;
            }
        };
        scanned += 1;
        bytes += item.json.len() as u64;
        // Index order is never chosen for queries reading computed properties.
        let outcome = parse_doc(p, &[], &item.json).and_then(|doc| {
            let mut ord = 0u64;
            p.eval_doc(&doc, &cx, &mut |row| {
                ord += 1;
                let r = Ranked {
                    keys: row.keys,
                    doc: key.clone(),
                    ord,
                    value: match row.value {
                        Some(v) => to_bytes(&v),
                        None => item.json.clone(),
                    },
                };
                if last.is_none_or(|l| cmp_ranked(&r, l, desc) == Ordering::Greater) {
                    best.push(r);
                }
                Ok(Flow::Continue)
            })
            .map_err(ExecError::from)
        });
        if let Err(e) = outcome {
            failed = Some(e);
            return false;
        }
        if best.len() >= want && group.is_none() {
            group = Some(t.to_vec());
        }
        true
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    let Some(finished) = finished else {
        return Ok(None);
    };
    // Descending, documents without the path sort last: an exhausted index leaves them out.
    // That matters also when the walk found exactly a page: the page then reads as this
    // partition's last, and the documents without the path would never be paged to.
    if finished
        && order.descending
        && best.len() <= want
        && !c.all_defined(&order.path, range, index)?
    {
        return Ok(None);
    }
    let candidates = best.len() as u64 + u64::from(!finished);
    best.sort_by(|a, b| cmp_ranked(a, b, desc));
    best.truncate(want);
    Ok(Some(PartBest {
        rows: best,
        scanned,
        bytes,
        candidates,
        index: *index,
    }))
}

/// ORDER BY: each partition keeps its best rows after the token position; merge and page.
async fn run_ordered(
    c: Arc<Container>,
    p: Arc<PreparedQuery>,
    access: Arc<Access>,
    ranges: Vec<EpkRange>,
    page_size: usize,
    token: Option<Continuation>,
) -> Result<Page, ExecError> {
    let (consumed, last) =
        match token {
            Some(Continuation {
                consumed,
                pos: Position::Ordered { keys, after, ord },
                ..
            }) => {
                let doc = key_from_hex(&c, &after)?;
                (
                    consumed,
                    Some(Ranked {
                        keys: keys.into_iter().map(KeyValue::into_opt).collect(),
                        doc,
                        ord,
                        value: Bytes::new(),
                    }),
                )
            }
            Some(_) => return Err(ExecError::BadToken(String::from(
                "The continuation token does not match this query; run it again without the token.",
            ))),
            None => (0, None),
        };
    let skip = p.offset.saturating_sub(consumed) as usize;
    let mut want = skip + page_size;
    if let Some(l) = p.limit {
        let remaining = (p.offset + l).saturating_sub(consumed.max(p.offset)) as usize;
        want = want.min(skip + remaining);
    }
    let desc = p.order_directions();
    let last = Arc::new(last);
    let parts = per_partition(&c, &ranges);
    let (c2, p2, desc2, last2) = (
        Arc::clone(&c),
        Arc::clone(&p),
        desc.clone(),
        Arc::clone(&last),
    );
    let results = parallel(
        parts,
        Arc::new(move |range: EpkRange| {
            partition_best(
                &c2,
                &p2,
                &access,
                &range,
                last2.as_ref().as_ref(),
                want,
                &desc2,
            )
        }),
    )
    .await?;
    let mut all = Vec::new();
    let (mut scanned, mut scanned_bytes, mut candidates) = (0, 0, 0);
    let mut index = IndexStats::default();
    for part in results {
        all.extend(part.rows);
        scanned += part.scanned;
        scanned_bytes += part.bytes;
        candidates += part.candidates;
        index.add(&part.index);
    }
    all.sort_by(|a, b| cmp_ranked(a, b, &desc));
    all.truncate(want);
    let taken = all.len() as u64;
    let new_consumed = consumed + taken;
    let limit_reached = p.limit.is_some_and(|l| new_consumed >= p.offset + l);
    let more = candidates > taken && !limit_reached;
    let continuation = match all.last() {
        Some(r) if more => Some(Continuation {
            fp: p.fingerprint.clone(),
            consumed: new_consumed,
            pos: Position::Ordered {
                keys: r.keys.iter().map(KeyValue::from_opt).collect(),
                after: suffix_hex(&r.doc),
                ord: r.ord,
            },
        }),
        _ => None,
    };
    let docs = all.into_iter().skip(skip).map(|r| r.value).collect();
    Ok(Page {
        docs,
        continuation,
        scanned,
        scanned_bytes,
        index,
    })
}

/// Aggregates: partial aggregates per partition in parallel, combined; DISTINCT and
/// everything else needing complete results: collected and finished whole. Pages index into
/// the complete result.
async fn run_complete(
    c: Arc<Container>,
    p: Arc<PreparedQuery>,
    access: Arc<Access>,
    ranges: Vec<EpkRange>,
    page_size: usize,
    token: Option<Continuation>,
) -> Result<Page, ExecError> {
    let start =
        match token {
            Some(Continuation {
                pos: Position::Index { next },
                ..
            }) => next as usize,
            Some(_) => return Err(ExecError::BadToken(String::from(
                "The continuation token does not match this query; run it again without the token.",
            ))),
            None => 0,
        };
    let cx = query_ctx(&c, &p);
    let parts = per_partition(&c, &ranges);
    // A few complete results are built at once, each within its budget (see `memory`).
    let _turn = match p.mode {
        Mode::NoFrom => None,
        _ => memory::heavy_turn().await,
    };
    let held = Arc::new(memory::Held::new(c.limits.query_memory_bytes));
    let (mut scanned, mut scanned_bytes) = (0u64, 0u64);
    let mut index = IndexStats::default();
    let counted = match access.count_only && p.mode == Mode::Aggregate {
        true => count_from_index(&c, &access, &parts, &mut index)?,
        false => None,
    };
    let extreme = match (&access.extreme, p.mode) {
        (Some(e), Mode::Aggregate) => extreme_from_index(&c, &p, e, &parts, &mut index)?,
        _ => None,
    };
    let rows: Vec<Value> = match p.mode {
        Mode::NoFrom => p.run_constant(&cx)?,
        Mode::Aggregate if counted.is_some() => vec![Value::from(counted.unwrap_or(0))],
        Mode::Aggregate if extreme.is_some() => {
            let (groups, n, b) = extreme.unwrap_or_default();
            scanned += n;
            scanned_bytes += b;
            p.finish_groups(groups, &cx)?
        }
        Mode::Aggregate => {
            let (c2, p2, a2) = (Arc::clone(&c), Arc::clone(&p), Arc::clone(&access));
            let held = Arc::clone(&held);
            let results = parallel(
                parts,
                Arc::new(
                    move |range: EpkRange| -> Result<(Groups, u64, u64, IndexStats), ExecError> {
                        let cx = query_ctx(&c2, &p2);
                        let mut g = Groups::default();
                        let (mut n, mut b) = (0u64, 0u64);
                        let mut index = IndexStats::default();
                        scan(&c2, &a2, &range, None, &mut index, |_, json| {
                            n += 1;
                            b += json.len() as u64;
                            let before = g.map.len();
                            p2.accumulate_doc(&parse_doc(&p2, &a2.computed, json)?, &cx, &mut g)?;
                            // A new group holds its key and its accumulators.
                            let grew = g.map.len() - before;
                            if grew > 0 {
                                held.charge(grew * 2 * memory::PER_ENTRY)?;
                            }
                            Ok(Flow::Continue)
                        })?;
                        Ok((g, n, b, index))
                    },
                ),
            )
            .await?;
            let mut all = Groups::default();
            for (g, n, b, i) in results {
                all.merge(g);
                scanned += n;
                scanned_bytes += b;
                index.add(&i);
            }
            p.finish_groups(all, &cx)?
        }
        _ => {
            let (c2, p2, a2) = (Arc::clone(&c), Arc::clone(&p), Arc::clone(&access));
            let distinct = p.query.select.distinct;
            let held = Arc::clone(&held);
            let results = parallel(
                parts,
                Arc::new(
                    move |range: EpkRange| -> Result<(Vec<Ranked>, u64, u64, IndexStats), ExecError> {
                        let mut out = Vec::new();
                        let mut index = IndexStats::default();
                        // DISTINCT keeps one of rows alike in value and order keys as they
                        // come (which one is kept cannot matter), so a small answer over many
                        // rows stays small.
                        let mut seen = std::collections::HashSet::new();
                        let mut over = None;
                        let (n, b) = scan_rows(&c2, &p2, &a2, &range, &mut index, |r| {
                            if distinct {
                                let mut k = r.value.to_vec();
                                for key in &r.keys {
                                    k.push(0);
                                    k.extend(key.as_ref().map(|v| v.to_string()).unwrap_or_default().bytes());
                                }
                                let size = k.len();
                                if !seen.insert(k) {
                                    return Flow::Continue;
                                }
                                if let Err(e) = held.charge(size) {
                                    over = Some(e);
                                    return Flow::Stop;
                                }
                            }
                            if let Err(e) = held.charge(r.held_bytes()) {
                                over = Some(e);
                                return Flow::Stop;
                            }
                            out.push(r);
                            Flow::Continue
                        })?;
                        if let Some(e) = over {
                            return Err(e);
                        }
                        Ok((out, n, b, index))
                    },
                ),
            )
            .await?;
            let mut all = Vec::new();
            for (r, n, b, i) in results {
                all.extend(r);
                scanned += n;
                scanned_bytes += b;
                index.add(&i);
            }
            let desc = p.order_directions();
            all.sort_by(|a, b| cmp_ranked(a, b, &desc));
            let values: Result<Vec<Value>, ExecError> = all
                .into_iter()
                .map(|r| {
                    serde_json::from_slice(&r.value).map_err(|e| ExecError::Corrupt(e.to_string()))
                })
                .collect();
            p.finish_rows(values?)
        }
    };
    let end = (start + page_size).min(rows.len());
    let docs: Vec<Bytes> = rows
        .get(start.min(rows.len())..end)
        .unwrap_or(&[])
        .iter()
        .map(to_bytes)
        .collect();
    let continuation = (end < rows.len()).then(|| Continuation {
        fp: p.fingerprint.clone(),
        consumed: end as u64,
        pos: Position::Index { next: end as u64 },
    });
    Ok(Page {
        docs,
        continuation,
        scanned,
        scanned_bytes,
        index,
    })
}

/// `SELECT VALUE MIN(path)` / `MAX(path)` from the index: per partition, the documents of
/// the first (last) value that are still live, accumulated as a scan would. `None` when the
/// index cannot answer (rebuilding) or an array or object value makes the aggregate
/// undefined — then the documents are read.
fn extreme_from_index(
    c: &Container,
    p: &PreparedQuery,
    e: &OrderPath,
    parts: &[EpkRange],
    stats: &mut IndexStats,
) -> Result<Option<(Groups, u64, u64)>, ExecError> {
    use strata_query::index::Span;
    let cx = Ctx::new(now_millis());
    let nodes = Span {
        lo: vec![term::ARRAY],
        hi: vec![term::OBJECT + 1],
    };
    let scalars = Span {
        lo: vec![term::NULL],
        hi: vec![term::ARRAY],
    };
    let (mut groups, mut scanned, mut bytes) = (Groups::default(), 0u64, 0u64);
    for range in parts {
        let mut any_node = false;
        let walked = c.index_walk(&e.path, &nodes, range, false, stats, &mut |_, _| {
            any_node = true;
            false
        })?;
        if walked.is_none() || any_node {
            return Ok(None);
        }
        // The first value's documents; past expired ones to the next value if need be.
        let mut group: Option<Vec<u8>> = None;
        let mut live = false;
        let mut failed: Option<ExecError> = None;
        c.index_walk(
            &e.path,
            &scalars,
            range,
            e.descending,
            stats,
            &mut |t, key| {
                if group.as_deref().is_some_and(|g| g != t) {
                    if live {
                        return false;
                    }
                    group = None;
                }
                group.get_or_insert_with(|| t.to_vec());
                let outcome = c.load_item(&key).map_err(ExecError::from).and_then(|item| {
                    let Some(item) = item else { return Ok(()) };
                    live = true;
                    scanned += 1;
                    bytes += item.json.len() as u64;
                    let doc = parse_doc(p, &[], &item.json)?;
                    p.accumulate_doc(&doc, &cx, &mut groups)?;
                    Ok(())
                });
                match outcome {
                    Ok(()) => true,
                    Err(err) => {
                        failed = Some(err);
                        false
                    }
                }
            },
        )?;
        if let Some(err) = failed {
            return Err(err);
        }
    }
    Ok(Some((groups, scanned, bytes)))
}

/// `SELECT VALUE COUNT(1)` from index entries (an exact lookup) or logical partition sizes
/// (no filter), without reading a document; `None` when neither can answer (TTL on: expired
/// items not yet purged are still counted there).
fn count_from_index(
    c: &Container,
    access: &Access,
    parts: &[EpkRange],
    stats: &mut IndexStats,
) -> Result<Option<u64>, ExecError> {
    if c.default_ttl().is_some() {
        return Ok(None);
    }
    let mut total = 0u64;
    for range in parts {
        let n = match access.lookup.as_deref() {
            None => Some(c.stored_count(range, stats)?),
            Some([probe]) => c.index_count(probe, range, stats)?,
            Some(_) => None,
        };
        match n {
            Some(n) => total += n,
            None => return Ok(None),
        }
    }
    Ok(Some(total))
}

pub mod memory;
pub mod prepared;

#[cfg(test)]
mod index_tests;
#[cfg(test)]
mod tests;
