//! `POST .../docs` with `x-ms-documentdb-isquery`: Cosmos SQL over a container, executed
//! completely by strata (fan-out, merge, paging), plus the query-plan request the official
//! SDKs send, and SQL over the catalog (databases, containers, offers).
//!
//! The target of a query is the request scope (partition key header, range id, EPK headers)
//! intersected with the routing derived from its WHERE clause. Partitions are evaluated in
//! parallel where results must be merged (ORDER BY, aggregates, DISTINCT); key-ordered
//! queries stream through the key space. Continuation tokens record positions in the key
//! space, so they survive splits.

use super::error::{substatus, ApiError};
use super::items::container;
use super::request::Req;
use super::response::Reply;
use super::scope::request_scope;
use super::App;
use crate::store::container::{read, Container};
use crate::store::keys;
use crate::throughput::charge;
use axum::http::StatusCode;
use bytes::Bytes;
use serde_json::Value;
use std::cmp::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_query::pk::EpkRange;
use strata_query::protocol::{escape_plan, header};
use strata_query::sql::eval::cmp_keys;
use strata_query::sql::query_plan::{Partition, QueryPlan, RequestScope};
use strata_query::sql::token::{Continuation, KeyValue, Position};
use strata_query::sql::{self, Ctx, Flow, Groups, Mode, PreparedQuery, Routing};

/// Page size when the client does not choose one.
const DEFAULT_PAGE: usize = 100;
/// Most bytes of documents in one page (the service's 4 MB response limit).
const MAX_PAGE_BYTES: usize = 4 * 1024 * 1024;
/// A streaming page returns what it has (with a continuation) after scanning this long.
const PAGE_TIME_BUDGET: Duration = Duration::from_secs(2);

/// The query text and parameters of a query request body.
fn query_body(req: &Req) -> Result<(String, Vec<(String, Value)>), ApiError> {
    let body = req.json()?;
    let text = match &body {
        Value::Object(m) => m.get("query").and_then(Value::as_str).ok_or_else(|| {
            ApiError::bad_request("The query body must have a string 'query' property.")
        })?,
        _ => {
            return Err(ApiError::bad_request(
                "The query body must be a JSON object: {\"query\": \"SELECT ...\", \"parameters\": [...]}.",
            ))
        }
    };
    let params = sql::parse_parameters(body.get("parameters"))?;
    Ok((text.to_string(), params))
}

/// Decides where the query goes: the pure planner over the request's scope and the current
/// partition map.
fn target(c: &Container, req: &Req, p: &PreparedQuery) -> Result<QueryPlan, ApiError> {
    let scope = request_scope(c, req)?;
    let partitions: Vec<Partition> = read(&c.map)
        .ranges
        .iter()
        .map(|r| Partition {
            id: r.rec.id,
            range: r.epk_range(),
        })
        .collect();
    let request = RequestScope {
        range: scope.range,
        route: scope.route,
        source: scope.source,
    };
    Ok(sql::query_plan::plan(p, &request, &partitions))
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
struct Page {
    docs: Vec<Bytes>,
    continuation: Option<Continuation>,
    scanned: u64,
    scanned_bytes: u64,
}

fn now_millis() -> i64 {
    sql::datetime::now_millis()
}

/// Every live document in `range`, in key order, passed to `f` with its key and bytes.
fn scan(
    c: &Container,
    range: &EpkRange,
    after: Option<&[u8]>,
    mut f: impl FnMut(&[u8], &Bytes) -> Result<Flow, ApiError>,
) -> Result<(), ApiError> {
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

fn parse_doc(bytes: &Bytes) -> Result<Value, ApiError> {
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::internal(format!("a stored document is not valid JSON: {e}")))
}

fn to_bytes(v: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(v).unwrap_or_default())
}

/// The key of the document a row came from, for tie-breaking and continuation.
fn suffix_hex(key: &[u8]) -> String {
    strata_query::pk::epk::encode_hex(&key[4..])
}

fn key_from_hex(c: &Container, hex: &str) -> Result<Vec<u8>, ApiError> {
    let suffix = strata_query::pk::epk::decode_hex(hex)
        .filter(|s| keys::split_item_suffix(s).is_some())
        .ok_or_else(|| {
            ApiError::bad_request(
                "The continuation token is invalid (bad position); run the query again without it.",
            )
        })?;
    let mut k = keys::container_prefix(c.cid);
    k.extend_from_slice(&suffix);
    Ok(k)
}

/// Key-ordered execution: scan the target ranges in order, resume after the token position.
fn run_streaming(
    c: &Container,
    p: &PreparedQuery,
    ranges: &[EpkRange],
    page_size: usize,
    token: Option<Continuation>,
) -> Result<Page, ApiError> {
    let cx = Ctx::new(now_millis());
    let (mut consumed, resume) =
        match token {
            Some(Continuation {
                consumed,
                pos: Position::Stream { after, skip },
                ..
            }) => (consumed, Some((key_from_hex(c, &after)?, skip))),
            Some(_) => return Err(ApiError::bad_request(
                "The continuation token does not match this query; run it again without the token.",
            )),
            None => (0, None),
        };
    let mut page = Page {
        docs: Vec::new(),
        continuation: None,
        scanned: 0,
        scanned_bytes: 0,
    };
    let mut bytes_out = 0usize;
    let started = Instant::now();
    let limit_end = p.limit.map(|l| p.offset.saturating_add(l));
    let needs_parse = !(p.raw_documents && p.query.where_.is_none());
    let fp = p.fingerprint.clone();
    let mut finished = false;
    // Resume inclusively at the token's document, skipping the rows already returned from it.
    let start_key = resume.as_ref().map(|(k, _)| k.clone());
    for range in ranges {
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
        scan(c, range, after.as_deref(), |key, json| {
            if let Some((rk, _)) = &resume {
                if key < rk.as_slice() {
                    return Ok(Flow::Continue);
                }
            }
            page.scanned += 1;
            page.scanned_bytes += json.len() as u64;
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
                if docs.len() >= page_size || bytes_out >= MAX_PAGE_BYTES {
                    stop = true;
                    return Flow::Stop;
                }
                Flow::Continue
            };
            if needs_parse {
                let doc = parse_doc(json)?;
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
                }
                return Ok(Flow::Stop);
            }
            if started.elapsed() > PAGE_TIME_BUDGET {
                // Return what we have; the next page resumes after this document.
                page.continuation = Some(resume());
                return Ok(Flow::Stop);
            }
            Ok(Flow::Continue)
        })?;
    }
    Ok(page)
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
async fn parallel<T: Send + 'static>(
    ranges: Vec<EpkRange>,
    work: Arc<dyn Fn(EpkRange) -> Result<T, ApiError> + Send + Sync>,
) -> Result<Vec<T>, ApiError> {
    use futures::stream::{self, StreamExt};
    let n = num_cpus::get().max(1);
    let results: Vec<Result<T, ApiError>> = stream::iter(ranges)
        .map(|r| {
            let w = Arc::clone(&work);
            async move {
                tokio::task::spawn_blocking(move || w(r))
                    .await
                    .map_err(|e| ApiError::internal(format!("query worker failed: {e}")))?
            }
        })
        .buffered(n)
        .collect()
        .await;
    results.into_iter().collect()
}

/// ORDER BY: each partition keeps its best rows after the token position; merge and page.
async fn run_ordered(
    c: Arc<Container>,
    p: Arc<PreparedQuery>,
    ranges: Vec<EpkRange>,
    page_size: usize,
    token: Option<Continuation>,
) -> Result<Page, ApiError> {
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
            Some(_) => return Err(ApiError::bad_request(
                "The continuation token does not match this query; run it again without the token.",
            )),
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
        Arc::new(
            move |range: EpkRange| -> Result<(Vec<Ranked>, u64, u64, u64), ApiError> {
                let cx = Ctx::new(now_millis());
                let mut best: Vec<Ranked> = Vec::new();
                let (mut scanned, mut bytes, mut candidates) = (0u64, 0u64, 0u64);
                scan(&c2, &range, None, |key, json| {
                    scanned += 1;
                    bytes += json.len() as u64;
                    let doc = parse_doc(json)?;
                    let mut ord = 0u64;
                    p2.eval_doc(&doc, &cx, &mut |row| {
                        ord += 1;
                        let r = Ranked {
                            keys: row.keys,
                            doc: key.to_vec(),
                            ord,
                            value: match row.value {
                                Some(v) => to_bytes(&v),
                                None => json.clone(),
                            },
                        };
                        if let Some(l) = last2.as_ref() {
                            if cmp_ranked(&r, l, &desc2) != Ordering::Greater {
                                return Ok(Flow::Continue);
                            }
                        }
                        candidates += 1;
                        best.push(r);
                        if best.len() >= 2 * want.max(64) {
                            best.sort_by(|a, b| cmp_ranked(a, b, &desc2));
                            best.truncate(want);
                        }
                        Ok(Flow::Continue)
                    })?;
                    Ok(Flow::Continue)
                })?;
                best.sort_by(|a, b| cmp_ranked(a, b, &desc2));
                best.truncate(want);
                Ok((best, scanned, bytes, candidates))
            },
        ),
    )
    .await?;
    let mut all = Vec::new();
    let (mut scanned, mut scanned_bytes, mut candidates) = (0, 0, 0);
    for (rows, s, b, n) in results {
        all.extend(rows);
        scanned += s;
        scanned_bytes += b;
        candidates += n;
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
    })
}

/// Aggregates: partial aggregates per partition in parallel, combined; DISTINCT and
/// everything else needing complete results: collected and finished whole. Pages index into
/// the complete result.
async fn run_complete(
    c: Arc<Container>,
    p: Arc<PreparedQuery>,
    ranges: Vec<EpkRange>,
    page_size: usize,
    token: Option<Continuation>,
) -> Result<Page, ApiError> {
    let start =
        match token {
            Some(Continuation {
                pos: Position::Index { next },
                ..
            }) => next as usize,
            Some(_) => return Err(ApiError::bad_request(
                "The continuation token does not match this query; run it again without the token.",
            )),
            None => 0,
        };
    let cx = Ctx::new(now_millis());
    let parts = per_partition(&c, &ranges);
    let (mut scanned, mut scanned_bytes) = (0u64, 0u64);
    let rows: Vec<Value> = match p.mode {
        Mode::NoFrom => p.run_constant(&cx)?,
        Mode::Aggregate => {
            let (c2, p2) = (Arc::clone(&c), Arc::clone(&p));
            let results = parallel(
                parts,
                Arc::new(
                    move |range: EpkRange| -> Result<(Groups, u64, u64), ApiError> {
                        let cx = Ctx::new(now_millis());
                        let mut g = Groups::default();
                        let (mut n, mut b) = (0u64, 0u64);
                        scan(&c2, &range, None, |_, json| {
                            n += 1;
                            b += json.len() as u64;
                            p2.accumulate_doc(&parse_doc(json)?, &cx, &mut g)?;
                            Ok(Flow::Continue)
                        })?;
                        Ok((g, n, b))
                    },
                ),
            )
            .await?;
            let mut all = Groups::default();
            for (g, n, b) in results {
                all.merge(g);
                scanned += n;
                scanned_bytes += b;
            }
            p.finish_groups(all, &cx)?
        }
        _ => {
            let (c2, p2) = (Arc::clone(&c), Arc::clone(&p));
            let results = parallel(
                parts,
                Arc::new(
                    move |range: EpkRange| -> Result<(Vec<Ranked>, u64, u64), ApiError> {
                        let cx = Ctx::new(now_millis());
                        let mut out = Vec::new();
                        let (mut n, mut b) = (0u64, 0u64);
                        scan(&c2, &range, None, |key, json| {
                            n += 1;
                            b += json.len() as u64;
                            let doc = parse_doc(json)?;
                            let mut ord = 0;
                            p2.eval_doc(&doc, &cx, &mut |row| {
                                ord += 1;
                                out.push(Ranked {
                                    keys: row.keys,
                                    doc: key.to_vec(),
                                    ord,
                                    value: match row.value {
                                        Some(v) => to_bytes(&v),
                                        None => json.clone(),
                                    },
                                });
                                Ok(Flow::Continue)
                            })?;
                            Ok(Flow::Continue)
                        })?;
                        Ok((out, n, b))
                    },
                ),
            )
            .await?;
            let mut all = Vec::new();
            for (r, n, b) in results {
                all.extend(r);
                scanned += n;
                scanned_bytes += b;
            }
            let desc = p.order_directions();
            all.sort_by(|a, b| cmp_ranked(a, b, &desc));
            let values: Result<Vec<Value>, ApiError> = all
                .into_iter()
                .map(|r| {
                    serde_json::from_slice(&r.value).map_err(|e| ApiError::internal(e.to_string()))
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
    })
}

/// Whether the Cosmos gateway would refuse to run this query itself (it needs the client to
/// merge partial results): 400 with sub-status 1004 under `--gateway-compat`.
fn needs_client_merge(p: &PreparedQuery) -> bool {
    let q = &p.query;
    q.order_by.is_some()
        || !q.aggregates.is_empty()
        || !q.group_by.is_empty()
        || q.select.distinct
        || q.select.top.is_some()
        || q.offset.is_some()
}

/// The features a client-side execution of this query needs, named as in
/// `x-ms-cosmos-supported-query-features`.
fn required_features(p: &PreparedQuery) -> Vec<&'static str> {
    use strata_query::sql::ast::{OrderBy, Projection};
    let q = &p.query;
    let mut f = Vec::new();
    if !q.aggregates.is_empty() {
        f.push("Aggregate");
        if !matches!(q.select.projection, Projection::Value(_)) && q.group_by.is_empty() {
            f.push("NonValueAggregate");
        }
        if q.aggregates.len() > 1 {
            f.push("MultipleAggregates");
        }
    }
    if !q.group_by.is_empty() {
        f.push("GroupBy");
    }
    if q.select.distinct {
        f.push("Distinct");
    }
    if q.select.top.is_some() {
        f.push("Top");
    }
    if q.offset.is_some() {
        f.push("OffsetAndLimit");
    }
    match &q.order_by {
        Some(OrderBy::Items(items)) if items.len() > 1 => f.extend(["OrderBy", "MultipleOrderBy"]),
        Some(_) => f.push("OrderBy"),
        None => {}
    }
    f
}

/// The gateway refuses a plan the client could not execute.
fn check_client_features(req: &Req, p: &PreparedQuery) -> Result<(), ApiError> {
    let Some(supported) = req.header("x-ms-cosmos-supported-query-features") else {
        return Ok(());
    };
    let have: Vec<&str> = supported.split(',').map(str::trim).collect();
    let missing: Vec<&str> = required_features(p)
        .into_iter()
        .filter(|f| !have.contains(f))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(ApiError::bad_request(format!(
        "Query contains 1 or more unsupported features. Upgrade your SDK to a version that does support the requested features: Query contained {}, which the calling client does not support.",
        missing.join(", ")
    )))
}

/// `POST .../docs` (query).
pub async fn query_items(app: &App, req: &Req, db: &str, coll: &str) -> Result<Reply, ApiError> {
    let started = Instant::now();
    let c = container(app, req, db, coll)?;
    let (text, params) = query_body(req)?;
    let mut p = sql::prepare(&text, &params, Some(&c.pk))?;
    // A token resumes this query on this container only.
    p.fingerprint = format!("{}:{}", c.rid, p.fingerprint);
    let target = target(&c, req, &p)?;
    let range_ids = target.partition_ids();
    let scoped = req.partition_key()?.is_some()
        || req.header("x-ms-documentdb-partitionkeyrangeid").is_some();
    if !scoped && range_ids.len() > 1 {
        if req
            .header("x-ms-documentdb-query-enablecrosspartition")
            .is_some()
            && !req.flag("x-ms-documentdb-query-enablecrosspartition")
        {
            return Err(ApiError::bad_request(
                "Cross partition query is required but disabled. Please set x-ms-documentdb-query-enablecrosspartition to true, specify x-ms-documentdb-partitionkey, or revise the query to avoid this exception.",
            ));
        }
        if app.options.gateway_compat && needs_client_merge(&p) {
            check_client_features(req, &p)?;
            let ranges = if target.ranges.is_empty() {
                vec![EpkRange::full()]
            } else {
                target.ranges.clone()
            };
            let plan = sql::sdkplan::query_plan(&p, &ranges);
            let mut e = ApiError::bad_request(
                "Cross partition query with TOP/ORDER BY/aggregates/DISTINCT/GROUP BY/OFFSET is executed by the client: request the query plan and run the rewritten query per partition key range.",
            )
            .with_sub_status(substatus::CROSS_PARTITION_QUERY_NOT_SERVABLE);
            let mut extra = serde_json::Map::new();
            extra.insert(
                "additionalErrorInfo".into(),
                Value::String(plan.to_string()),
            );
            e.extra = Some(Box::new(extra));
            return Err(e);
        }
    }
    let page_size = req.max_item_count()?.unwrap_or(DEFAULT_PAGE);
    let token = req
        .continuation()
        .map(|t| Continuation::decode(t, &p.fingerprint, &app.token_key))
        .transpose()?;
    let p = Arc::new(p);
    let page = if target.ranges.is_empty() && p.mode != Mode::NoFrom {
        Page {
            docs: Vec::new(),
            continuation: None,
            scanned: 0,
            scanned_bytes: 0,
        }
    } else {
        match p.mode {
            Mode::Streaming => {
                let (c2, p2, ranges) = (Arc::clone(&c), Arc::clone(&p), target.ranges.clone());
                tokio::task::spawn_blocking(move || {
                    run_streaming(&c2, &p2, &ranges, page_size, token)
                })
                .await
                .map_err(|e| ApiError::internal(format!("query worker failed: {e}")))??
            }
            Mode::Ordered => {
                run_ordered(
                    Arc::clone(&c),
                    Arc::clone(&p),
                    target.ranges.clone(),
                    page_size,
                    token,
                )
                .await?
            }
            _ => {
                run_complete(
                    Arc::clone(&c),
                    Arc::clone(&p),
                    target.ranges.clone(),
                    page_size,
                    token,
                )
                .await?
            }
        }
    };
    {
        let map = read(&c.map);
        for id in &range_ids {
            if let Some(r) = map.by_id(*id) {
                r.queries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
    let out_bytes: usize = page.docs.iter().map(|d| d.len()).sum();
    let elapsed = started.elapsed().as_secs_f64() * 1000.0;
    let ids = range_ids
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let route_header = format!(
        "{}; ranges={}; scanned={}",
        target.route.as_str(),
        ids,
        page.scanned
    );
    tracing::debug!(
        container = %c.id,
        route = target.route.as_str(),
        ranges = %ids,
        scanned = page.scanned,
        returned = page.docs.len(),
        mode = p.mode.as_str(),
        ms = elapsed,
        "query"
    );
    let metrics = format!(
        "totalExecutionTimeInMs={elapsed:.2};queryCompileTimeInMs=0.00;queryLogicalPlanBuildTimeInMs=0.00;queryPhysicalPlanBuildTimeInMs=0.00;queryOptimizationTimeInMs=0.00;VMExecutionTimeInMs={elapsed:.2};indexLookupTimeInMs=0.00;documentLoadTimeInMs=0.00;systemFunctionExecuteTimeInMs=0.00;userFunctionExecuteTimeInMs=0.00;retrievedDocumentCount={};retrievedDocumentSize={};outputDocumentCount={};outputDocumentSize={out_bytes};writeOutputTimeInMs=0.00;indexUtilizationRatio=0.00",
        page.scanned,
        page.scanned_bytes,
        page.docs.len()
    );
    let ru = charge::query(page.scanned, out_bytes, range_ids.len().max(1));
    app.spend(&c, &range_ids, None, ru)?;
    let mut reply = Reply::new(
        StatusCode::OK,
        super::response::feed_body(&c.rid, "Documents", &page.docs),
    )
    .header("x-ms-item-count", page.docs.len().to_string())
    .header(header::QUERY_ROUTE, route_header)
    .header("x-ms-documentdb-query-metrics", metrics)
    .charge(ru)
    .session(&range_ids, c.current_lsn())
    .container(&c);
    if let Some(t) = page.continuation {
        reply = reply.header("x-ms-continuation", t.encode(&app.token_key));
    }
    if req.flag(header::EXPLAIN) {
        reply = reply.header(header::QUERY_PLAN, escape_plan(&target.to_string()));
    }
    Ok(reply)
}

/// The query plan for the official SDKs' client-side execution.
pub fn query_plan(app: &App, req: &Req, db: &str, coll: &str) -> Result<Reply, ApiError> {
    let c = container(app, req, db, coll)?;
    let (text, params) = query_body(req)?;
    let p = sql::prepare(&text, &params, Some(&c.pk))?;
    check_client_features(req, &p)?;
    let target = target(&c, req, &p)?;
    let ranges = if matches!(p.routing, Routing::FanOut) && req.partition_key()?.is_none() {
        vec![EpkRange::full()]
    } else {
        target.ranges
    };
    Ok(Reply::json(
        StatusCode::OK,
        &sql::sdkplan::query_plan(&p, &ranges),
    ))
}

/// SQL over catalog resources (databases, containers, offers): `{"_rid", key: [...], "_count"}`.
pub fn query_resources(
    req: &Req,
    rid: &str,
    key: &str,
    docs: Vec<Value>,
) -> Result<Reply, ApiError> {
    let (text, params) = query_body(req)?;
    let p = sql::prepare(&text, &params, None)?;
    let rows = p.run_over(&docs, &Ctx::new(now_millis()))?;
    let bytes: Vec<Bytes> = rows.iter().map(to_bytes).collect();
    Ok(
        Reply::new(StatusCode::OK, super::response::feed_body(rid, key, &bytes))
            .header("x-ms-item-count", rows.len().to_string()),
    )
}
