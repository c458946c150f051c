//! `POST .../docs` with `x-ms-documentdb-isquery`: Cosmos SQL over a container, plus the
//! query-plan request the official SDKs send, and SQL over the catalog (databases,
//! containers, offers).
//!
//! This file is the HTTP side only: it decodes the request, asks the pure planner
//! (`strata_query::sql::route_plan`) where the query goes — the request scope (partition key
//! header, range id, EPK headers) intersected with the routing its WHERE clause implies —,
//! hands the plan to the executor ([`crate::exec`]) and encodes the page, its charge, route,
//! metrics and continuation.

use crate::api::commit::Admission;
use crate::api::request::Req;
use crate::api::response::Reply;
use crate::api::scope::scope_of;
use crate::api::App;
use crate::error::{substatus, CosmosError};
use crate::exec::{self, now_millis, to_bytes, AccessPath, Paging, Plan};
use crate::store::container::Container;
use crate::throughput::charge;
use axum::http::StatusCode;
use bytes::Bytes;
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;
use strata_query::pk::{EpkRange, PartitionKey};
use strata_query::protocol::{escape_plan, header};
use strata_query::sql::route_plan::RoutePlan;
use strata_query::sql::token::Continuation;
use strata_query::sql::{self, Ctx, PreparedQuery, Routing};

/// Page size when the client does not choose one.
const DEFAULT_PAGE: usize = 100;

/// How long a vector query waits for its index to be read back from a snapshot after a
/// restart (a million 128-number vectors take about two seconds) before it is answered by
/// reading every document instead.
const VECTORS_LOADING: std::time::Duration = std::time::Duration::from_secs(30);

/// The largest query request: the service's "Maximum request size" (2 MB), which a query's
/// body (text and parameters) is held to like any other request.
pub const MAX_QUERY_REQUEST_BYTES: usize = 2 * 1024 * 1024;

/// A query request body as the SDKs send it, read without building the body's own JSON
/// tree (a map per parameter: 4% of a single-partition query's server CPU). Any other
/// shape, and any error, is read by [`query_body`]'s general path.
#[derive(serde::Deserialize)]
struct SdkBody<'a> {
    #[serde(borrow)]
    query: std::borrow::Cow<'a, str>,
    #[serde(default)]
    parameters: Vec<SdkParameter>,
}

/// One parameter: an object with `name` and `value` once each (a derived reading would
/// take an array `["@a", 1]` too, which the general path refuses).
struct SdkParameter {
    name: String,
    value: Value,
}

impl<'de> serde::Deserialize<'de> for SdkParameter {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = SdkParameter;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("{\"name\": \"@p\", \"value\": ...}")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<SdkParameter, A::Error> {
                use serde::de::Error as _;
                let (mut name, mut value) = (None, None);
                // A key with escapes fails here: the general path reads it.
                while let Some(k) = m.next_key::<&'de str>()? {
                    match k {
                        "name" if name.is_none() => name = Some(m.next_value::<String>()?),
                        "value" if value.is_none() => value = Some(m.next_value::<Value>()?),
                        "name" | "value" => return Err(A::Error::custom("a repeated field")),
                        _ => {
                            m.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                match (name, value) {
                    (Some(name), Some(value)) => Ok(SdkParameter { name, value }),
                    _ => Err(A::Error::custom("a missing field")),
                }
            }
        }
        d.deserialize_map(Fields)
    }
}

/// A query's text and its parameters (names without `@`).
type TextAndParameters = (String, Vec<(String, Value)>);

/// The query text and parameters of a query request body.
fn query_body(req: &Req) -> Result<TextAndParameters, CosmosError> {
    if req.body.len() > MAX_QUERY_REQUEST_BYTES {
        return Err(CosmosError::too_large(format!(
            "Request size is too large: the query request is {} bytes, more than the {MAX_QUERY_REQUEST_BYTES} bytes (2 MB) a request may be. Send fewer or smaller parameter values.",
            req.body.len()
        )));
    }
    match sdk_body(&req.body) {
        Some(read) => read,
        None => general_body(req),
    }
}

/// The body read as an SDK sends it ([`SdkBody`]); `None` for any other shape.
fn sdk_body(body: &[u8]) -> Option<Result<TextAndParameters, CosmosError>> {
    // An object (a derived reading takes an array too).
    if body.trim_ascii_start().first() != Some(&b'{') {
        return None;
    }
    let b = serde_json::from_slice::<SdkBody<'_>>(body).ok()?;
    if b.parameters.len() > sql::limits::MAX_PARAMETERS {
        return None;
    }
    let params = (b.parameters.into_iter())
        .map(|p| Ok((sql::parameter_name(&p.name)?, p.value)))
        .collect::<Result<_, sql::QueryError>>();
    Some(
        params
            .map(|p| (b.query.into_owned(), p))
            .map_err(Into::into),
    )
}

/// The body read as a JSON tree: any shape, with an error that says what is wrong.
fn general_body(req: &Req) -> Result<TextAndParameters, CosmosError> {
    let mut body = req.json()?;
    let text = match &body {
        Value::Object(m) => m.get("query").and_then(Value::as_str).ok_or_else(|| {
            CosmosError::bad_request("The query body must have a string 'query' property.")
        })?,
        _ => {
            return Err(CosmosError::bad_request(
                "The query body must be a JSON object: {\"query\": \"SELECT ...\", \"parameters\": [...]}.",
            ))
        }
    };
    let text = text.to_string();
    let params = sql::parse_parameters(body.get_mut("parameters").map(Value::take))?;
    Ok((text, params))
}

/// What a query's text and parameters will hold while it is prepared and run (as parsed
/// values, [`exec::memory::PARAMETER_COPIES`] times), reserved from the request pool: a 413
/// past the container's query budget, a wait while the pool is spent.
async fn reserve_inputs(
    c: &Container,
    text: &str,
    params: &[(String, Value)],
) -> Result<exec::memory::Reserved, CosmosError> {
    let held = params.iter().fold(text.len(), |n, (k, v)| {
        let v = strata_query::sql::limits::held_within(v, usize::MAX).unwrap_or(usize::MAX);
        n.saturating_add(k.len()).saturating_add(v)
    });
    let bytes = held.saturating_mul(exec::memory::PARAMETER_COPIES);
    let budget = c.limits().query_memory_bytes;
    Ok(exec::memory::reserve(bytes, budget, "query's text and parameters").await?)
}

/// Decides where the query goes: the request's scope, then the pure planner over the
/// current partition map.
fn target(
    c: &Container,
    req: &Req,
    pk: Option<&PartitionKey>,
    p: &PreparedQuery,
) -> Result<RoutePlan, CosmosError> {
    Ok(exec::route(c, p, &scope_of(c, req, pk)?))
}

/// Whether the Cosmos gateway would refuse to run this query itself (it needs the client to
/// merge partial results): 400 with sub-status 1004 under `--gateway-compat`.
fn needs_client_merge(p: &PreparedQuery) -> bool {
    let q = &p.query;
    // A query without FROM reads no partition: there is nothing to merge.
    if p.mode == sql::Mode::NoFrom {
        return false;
    }
    q.order_by.is_some()
        || !q.aggregates.is_empty()
        || !q.group_by.is_empty()
        || q.select.distinct
        || q.select.top.is_some()
        || q.offset.is_some()
}

/// Whether `p` orders by a search score (`VectorDistance`, a hybrid component's
/// `_FullTextScore`), which the SDKs merge without streaming.
fn non_streaming_order(p: &PreparedQuery) -> bool {
    use strata_query::sql::ast::{Expr, OrderBy};
    use strata_query::sql::functions::{Func, SearchFn};
    matches!(&p.query.order_by, Some(OrderBy::Items(items)) if items.iter().any(|i| {
        i.expr.is_vector_distance()
            || matches!(i.expr, Expr::Call(Func::Search(SearchFn::FullTextScoreWith), _))
    }))
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
        Some(OrderBy::Rank(_)) => f.push("HybridSearch"),
        Some(_) => f.push("OrderBy"),
        None => {}
    }
    // A vector search's top k is merged without streaming: clients that cannot do that (or
    // turned it off) are told so, as the service tells them.
    if matches!(&q.order_by, Some(OrderBy::Items(items)) if items.iter().any(|i| i.expr.is_vector_distance()))
    {
        f.push("NonStreamingOrderBy");
    }
    f
}

/// The gateway refuses a plan the client could not execute.
fn check_client_features(req: &Req, p: &PreparedQuery) -> Result<(), CosmosError> {
    let Some(supported) = req.header(header::SUPPORTED_QUERY_FEATURES) else {
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
    Err(CosmosError::bad_request(format!(
        "Query contains 1 or more unsupported features. Upgrade your SDK to a version that does support the requested features: Query contained {}, which the calling client does not support.",
        missing.join(", ")
    )))
}

/// `POST .../docs` (query).
pub async fn query_items(app: &App, req: &Req, c: &Arc<Container>) -> Result<Reply, CosmosError> {
    let started = Instant::now();
    let session = req.header(header::SESSION_TOKEN);
    app.regions.check_session(req.region, &c.rid, session)?;
    let (text, params) = query_body(req)?;
    let _inputs = reserve_inputs(c, &text, &params).await?;
    let p = app.prepared.get(
        c.cid,
        &c.rid,
        &c.pk,
        || c.vector_policy().distance_defaults(),
        &text,
        &params,
    )?;
    let pk_header = req.partition_key()?;
    let target = target(c, req, pk_header.as_ref(), &p)?;
    let range_ids = target.partition_ids();
    let scoped = pk_header.is_some()
        || req.header(header::PARTITION_KEY_RANGE_ID).is_some()
        || req.header(header::START_EPK).is_some();
    // As the service: a query that neither names a scope nor pins one full key in its WHERE
    // clause is cross-partition — whatever the number of physical partitions — and needs the
    // client to say so (the SDKs send the flag when the application enables it; the JS SDK
    // always does).
    if !scoped && target.route != sql::route_plan::Route::Single {
        require_cross_partition(req)?;
    }
    // The gateway refuses these whatever the number of physical partitions, even when the
    // WHERE clause pins one full key: the SDKs learn the routing map from the query plan they
    // then fetch (test_partition_split_query.py), and a plan a client cannot run is refused
    // (test_aggregate.py expects a non-VALUE aggregate to fail for the Python SDK).
    // strata's own explorer wants the server's evaluation whatever the gateway would do.
    let gateway_compat =
        app.options.gateway_compat && req.header(crate::api::explorer::TOKEN_HEADER).is_none();
    if !scoped && gateway_compat && needs_client_merge(&p) {
        check_client_features(req, &p)?;
        return Err(client_merge_refusal(&p, &target.ranges));
    }
    let mut page_size = req.max_item_count()?.unwrap_or(DEFAULT_PAGE);
    // A search's top k (VectorDistance, a hybrid search's component) is one page: the SDKs
    // merge the first page of each partition without asking for more.
    if let (Some(k), true) = (p.limit, non_streaming_order(&p)) {
        page_size = page_size.max(k as usize);
    }
    let token_given = req.continuation().is_some();
    let token = req
        .continuation()
        .filter(|t| !is_foreign_service_token(t, c))
        .map(|t| Continuation::decode(t, &p.fingerprint, &app.token_key))
        .transpose()?;
    let paging = Paging {
        page_size,
        // A plain cross-partition query is paged by physical partition, as the gateway pages
        // it (an SDK's response hook sees one response per partition).
        per_range: !scoped && gateway_compat && range_ids.len() > 1,
    };
    let enable_scan = req.flag(header::ENABLE_SCAN);
    if let Some(search) = sql::vector::search_of(&p.query) {
        c.vectors_loaded(&search.path, VECTORS_LOADING).await;
    }
    let plan = Arc::new(p.plan(c, target, enable_scan, paging)?);
    let admitted = Admission::ranges(app, (c, req), range_ids.clone(), charge::query(0, 0, 1))?;
    let page = exec::run(Arc::clone(c), Arc::clone(&plan), token).await?;
    c.count_queries(&range_ids);
    let out_bytes: usize = page.docs.iter().map(|d| d.len()).sum();
    let elapsed = started.elapsed().as_secs_f64() * 1000.0;
    let route_header = route_header(c, &plan, &range_ids, &page, elapsed);
    let ru = charge::query_work(
        page.index.entries,
        page.scanned,
        page.scanned_bytes,
        out_bytes,
        range_ids.len().max(1),
    );
    admitted.settle(ru);
    if app.queries.enabled() {
        record(app, req, c, (&text, &params), &plan, ru, token_given);
    }
    let mut reply = Reply::new(
        StatusCode::OK,
        crate::api::response::feed_body(&c.rid, "Documents", &page.docs),
    )
    .header(header::ITEM_COUNT, page.docs.len().to_string())
    .header(header::QUERY_ROUTE, route_header)
    .charge(ru)
    .session(&range_ids, c.current_lsn())
    .container(c);
    // The service answers with the page's metrics when asked (the SDKs' populate-query-
    // metrics option): formatting them unasked was 1.7% of a short query's server CPU.
    if req.flag(header::POPULATE_QUERY_METRICS) {
        reply = reply.header(
            header::QUERY_METRICS,
            query_metrics(&page, out_bytes, elapsed),
        );
    }
    if let Some(t) = page.continuation {
        reply = reply.header(header::CONTINUATION, t.encode(&app.token_key));
    }
    if req.flag(header::POPULATE_INDEX_METRICS) {
        let scoped_by_key =
            pk_header.is_some() || plan.routing.route == sql::route_plan::Route::Single;
        reply = reply.header(
            header::INDEX_UTILIZATION,
            index_metrics(c, &plan.access, scoped_by_key),
        );
    }
    // The service gives advice on a query's first page only (learn.microsoft.com/cosmos-db/
    // query/advisor).
    if req.flag(header::POPULATE_QUERY_ADVICE) && !token_given {
        let ids = sql::advice::advice(&p.query);
        if !ids.is_empty() {
            reply = reply.header(header::QUERY_ADVICE, sql::advice::header_value(&ids));
        }
    }
    if req.flag(header::EXPLAIN) {
        reply = reply.header(header::QUERY_PLAN, escape_plan(&plan.to_string()));
    }
    Ok(reply)
}

/// Adds the request to the container's query sample (see [`crate::advise::sample`]): the
/// query's own route (over the whole container unless a partition key header scopes it),
/// and, for a request an SDK scoped to some partition ranges, the share of the query it is.
fn record(
    app: &App,
    req: &Req,
    c: &Container,
    (text, params): (&str, &[(String, Value)]),
    plan: &Plan,
    ru: f64,
    later_page: bool,
) {
    let partition_key = req
        .header(header::PARTITION_KEY)
        .and_then(|h| serde_json::from_str::<Value>(h).ok())
        .or_else(|| prefix_of_range(c, req));
    let visited = plan.partition_ids().len();
    // The query's own route: a later page (which adds only its charge), a request the
    // header or WHERE scopes to one key, or one no range header scopes (its plan is the
    // whole query's) needs no second planning.
    let ranged = [
        header::PARTITION_KEY_RANGE_ID,
        header::START_EPK,
        header::END_EPK,
    ]
    .iter()
    .any(|h| req.header(h).is_some());
    let whole = if later_page
        || partition_key.is_some()
        || !ranged
        || plan.routing.route == sql::route_plan::Route::Single
    {
        std::borrow::Cow::Borrowed(&plan.routing)
    } else {
        std::borrow::Cow::Owned(exec::route(
            c,
            &plan.query,
            &sql::route_plan::RequestScope::whole(),
        ))
    };
    let partitions = whole.partition_ids().len();
    let share = if later_page {
        0.0
    } else {
        (visited as f64 / partitions.max(1) as f64).min(1.0)
    };
    app.queries.record(crate::advise::sample::Served {
        db: &c.db,
        coll: &c.id,
        rid: &c.rid,
        text,
        params,
        partition_key,
        route: whole.route,
        partitions,
        share,
        request_charge: ru,
    });
}

/// The key prefix a request scoped by EPK range stands for. An SDK sends a query for a prefix
/// of a hierarchical key (Python's `partition_key=["contoso"]`) as requests scoped by the
/// prefix's EPK range, not with the key header; the sample records the prefix as if the
/// header had named it, so `strata advise` replays it as the targeted query it is, not as a
/// fan-out. Read from one stored item in the range: the longest prefix of its key whose range
/// holds the request's (a range that spans several prefixes stands for none).
fn prefix_of_range(c: &Container, req: &Req) -> Option<Value> {
    use strata_query::pk::{epk::epk_range, PartitionKey};
    let (start, end) = (req.header(header::START_EPK)?, req.header(header::END_EPK)?);
    let asked = EpkRange::new(start.to_ascii_uppercase(), end.to_ascii_uppercase());
    let (_, item) = c.scan_items(&asked, None, 1).ok()?.into_iter().next()?;
    let doc: Value = serde_json::from_slice(&item.json).ok()?;
    let key = c.pk.extract(&doc);
    (1..c.pk.levels().min(key.0.len() + 1)).rev().find_map(|n| {
        let prefix = PartitionKey(key.0[..n].to_vec());
        let r = epk_range(&c.pk, &prefix).ok()?;
        (r.min <= asked.min && asked.max <= r.max)
            .then(|| Value::Array(prefix.0.iter().map(|k| k.to_json()).collect()))
    })
}

/// The gateway's 400/1004 for a cross-partition query the client must merge, carrying the
/// query plan the SDKs then run (as the gateway sends it in `additionalErrorInfo`).
fn client_merge_refusal(p: &PreparedQuery, ranges: &[EpkRange]) -> CosmosError {
    let ranges = if ranges.is_empty() {
        vec![EpkRange::full()]
    } else {
        ranges.to_vec()
    };
    let plan = sql::sdkplan::query_plan(p, &ranges);
    let mut e = CosmosError::bad_request(
        "Cross partition query with TOP/ORDER BY/aggregates/DISTINCT/GROUP BY/OFFSET is executed by the client: request the query plan and run the rewritten query per partition key range.",
    )
    .with_sub_status(substatus::CROSS_PARTITION_QUERY_NOT_SERVABLE);
    let mut extra = serde_json::Map::new();
    extra.insert(
        "additionalErrorInfo".into(),
        Value::String(plan.to_string()),
    );
    e.extra = Some(Box::new(extra));
    e
}

/// `x-strata-query-route` (the route, the ranges visited, the documents scanned), logged too.
fn route_header(
    c: &Container,
    plan: &Plan,
    range_ids: &[u32],
    page: &exec::Page,
    elapsed: f64,
) -> String {
    let ids = range_ids
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let route = format!(
        "{}; ranges={}; scanned={}",
        plan.routing.route.as_str(),
        ids,
        page.scanned
    );
    tracing::debug!(
        container = %c.id,
        route = plan.routing.route.as_str(),
        ranges = %ids,
        scanned = page.scanned,
        returned = page.docs.len(),
        mode = plan.query.mode.as_str(),
        ms = elapsed,
        "query"
    );
    route
}

/// `x-ms-documentdb-query-metrics` in the service's `name=value;` shape, from what the page
/// did: documents loaded (and their bytes), index entries read, time in the index.
fn query_metrics(page: &exec::Page, out_bytes: usize, elapsed_ms: f64) -> String {
    let lookup_ms = page.index.lookup_time.as_secs_f64() * 1000.0;
    let load_ms = (elapsed_ms - lookup_ms).max(0.0);
    // The share of output documents the index found: 1 when the index alone decided (or no
    // document had to be read), else output / retrieved.
    let utilization = if page.scanned == 0 {
        1.0
    } else {
        (page.docs.len() as f64 / page.scanned as f64).min(1.0)
    };
    format!(
        "totalExecutionTimeInMs={elapsed_ms:.2};queryCompileTimeInMs=0.00;queryLogicalPlanBuildTimeInMs=0.00;queryPhysicalPlanBuildTimeInMs=0.00;queryOptimizationTimeInMs=0.00;VMExecutionTimeInMs={load_ms:.2};indexLookupTimeInMs={lookup_ms:.2};documentLoadTimeInMs={load_ms:.2};systemFunctionExecuteTimeInMs=0.00;userFunctionExecuteTimeInMs=0.00;retrievedDocumentCount={};retrievedDocumentSize={};outputDocumentCount={};outputDocumentSize={out_bytes};writeOutputTimeInMs=0.00;indexUtilizationRatio={utilization:.2};indexHitDocumentCount={}",
        page.scanned,
        page.scanned_bytes,
        page.docs.len(),
        page.index.entries,
    )
}

/// `x-ms-cosmos-index-utilization`: base64 of the service's JSON — single indexes the query
/// used (the partition key paths when the request names a key, each lookup's and the ORDER
/// BY's path) and those it could have used (filtered paths the policy excludes).
fn index_metrics(c: &Container, access: &AccessPath, scoped_by_key: bool) -> String {
    use base64::Engine as _;
    use strata_query::index::policy::print_path;
    let single = |path: String, filter: &str| {
        serde_json::json!({"FilterExpression": filter, "IndexSpec": path,
            "FilterPreciseSet": true, "IndexPreciseSet": true, "IndexImpactScore": "High"})
    };
    let mut utilized = Vec::new();
    if scoped_by_key {
        for p in &c.pk.paths {
            utilized.push(single(format!("{p}/?"), ""));
        }
    }
    // A lookup the plan left unused for the pinned partition's read is still the index the
    // filter is served by, as the service reports it.
    for probe in access.lookup.iter().chain(&access.implied).flatten() {
        utilized.push(single(
            format!("{}/?", print_path(&probe.path)),
            &probe.filter.to_string(),
        ));
    }
    if let Some(o) = &access.order {
        utilized.push(single(format!("{}/?", print_path(&o.path)), ""));
    }
    let potential: Vec<Value> = access
        .unindexed
        .iter()
        .map(|p| single(format!("{}/?", print_path(p)), ""))
        .collect();
    let body = serde_json::json!({
        "UtilizedSingleIndexes": utilized,
        "PotentialSingleIndexes": potential,
        "UtilizedCompositeIndexes": [],
        "PotentialCompositeIndexes": [],
    });
    base64::engine::general_purpose::STANDARD.encode(body.to_string())
}

/// 400 unless the request enables cross-partition queries
/// (`x-ms-documentdb-query-enablecrosspartition: true`), as the service answers a query over
/// a partitioned resource that names no partition.
pub fn require_cross_partition(req: &Req) -> Result<(), CosmosError> {
    if req.flag(header::ENABLE_CROSS_PARTITION) {
        return Ok(());
    }
    Err(CosmosError::bad_request(
        "Cross partition query is required but disabled. Please set x-ms-documentdb-query-enablecrosspartition to true, specify x-ms-documentdb-partitionkey, or revise the query to avoid this exception.",
    ))
}

/// A continuation in the service's own format (`-RID:~<rid>#RT:…#TRC:…`) that names a resource
/// of another container. strata never issues that format, and the service ignores such a
/// token's position rather than failing the query (the official Python SDK's
/// `test_query_with_static_continuation` replays one from another account), so the query
/// starts from the beginning. Anything else that does not decode is still a 400.
fn is_foreign_service_token(token: &str, c: &Container) -> bool {
    let Some(rest) = token.strip_prefix("-RID:~") else {
        return false;
    };
    let rid = rest.split('#').next().unwrap_or_default();
    // A document rid starts with its container's rid (8 base64 characters: database and
    // collection ids).
    !rid.starts_with(&c.rid) && rest.contains("#RT:")
}

/// The query plan for the official SDKs' client-side execution.
pub async fn query_plan(req: &Req, c: &Arc<Container>) -> Result<Reply, CosmosError> {
    let (text, params) = query_body(req)?;
    // The SDKs ask for a plan with the query's parameters: they weigh as much as the query's.
    let _inputs = reserve_inputs(c, &text, &params).await?;
    let p = sql::prepare_in(
        &text,
        &params,
        Some(&c.pk),
        &c.vector_policy().distance_defaults(),
    )?;
    check_client_features(req, &p)?;
    let target = target(c, req, req.partition_key()?.as_ref(), &p)?;
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
) -> Result<Reply, CosmosError> {
    let (text, params) = query_body(req)?;
    let p = sql::prepare(&text, &params, None)?;
    let rows = p.run_over(&docs, &Ctx::new(now_millis()))?;
    let bytes: Vec<Bytes> = rows.iter().map(to_bytes).collect();
    Ok(Reply::new(
        StatusCode::OK,
        crate::api::response::feed_body(rid, key, &bytes),
    )
    .header(header::ITEM_COUNT, rows.len().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(body: &str) -> Req {
        Req::for_tests(
            axum::http::Method::POST,
            Default::default(),
            bytes::Bytes::copy_from_slice(body.as_bytes()),
        )
    }

    /// The SDK-shaped reading gives what the general one gives, value for value and error
    /// for error, or leaves the body to it.
    #[test]
    fn an_sdk_body_reads_as_the_general_path_does() {
        let many = format!(
            r#"{{"query": "SELECT 1", "parameters": [{}]}}"#,
            vec![r#"{"name": "@p", "value": 1}"#; sql::limits::MAX_PARAMETERS + 1].join(",")
        );
        let bodies = [
            r#"{"query": "SELECT * FROM c WHERE c.a = @a", "parameters": [{"name": "@a", "value": {"x": [1, 2.5, "s", null]}}]}"#,
            r#"{"query": "SELECT \u00e9 FROM c"}"#,
            r#"{"query": "SELECT 1", "parameters": []}"#,
            r#"{"query": "SELECT 1", "parameters": null}"#,
            r#"{"query": "SELECT 1", "parameters": [{"name": "a", "value": 1}]}"#,
            r#"{"query": "SELECT 1", "parameters": [{"name": "@a"}]}"#,
            r#"{"query": "SELECT 1", "parameters": [{"name": "@a", "value": 1, "type": "x"}], "other": 1}"#,
            r#"{"query": "SELECT 1", "query": "SELECT 2"}"#,
            r#"{"query": 5}"#,
            r#"["SELECT 1"]"#,
            r#"{"query": "SELECT 1", "parameters": [["@a", 1]]}"#,
            r#"{"query": "SELECT 1", "parameters": [{"name": "@a", "value": 1, "value": 2}]}"#,
            r#"{"query": "SELECT 1", "parameters": [{"name": 5, "value": 1}]}"#,
            r#"{"query": "SELECT 1""#,
            "",
            &many,
        ];
        let mut read_by_sdk_path = 0;
        for body in bodies {
            let general = general_body(&req(body)).map_err(|e| e.message);
            match sdk_body(body.as_bytes()) {
                Some(sdk) => {
                    read_by_sdk_path += 1;
                    assert_eq!(sdk.map_err(|e| e.message), general, "{body}");
                }
                None => assert_eq!(
                    query_body(&req(body)).map_err(|e| e.message),
                    general,
                    "{body}"
                ),
            }
        }
        assert_eq!(read_by_sdk_path, 5);
    }
}
