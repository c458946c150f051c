//! The client-side query pipeline, as the official SDKs run cross-partition queries the
//! Cosmos gateway will not merge itself (it answers them 400/1004): ask for the query plan,
//! run its rewritten query on every partition key range the query reaches (eight at a time),
//! and merge the results with [`strata_query::sql::merge`] — the same ordering and aggregate
//! semantics the strata server uses.
//!
//! The merge is materializing: every range is read to its end, then the answer is paged out.
//! A continuation (`strata-client:<rows already returned>`) re-runs the query and skips
//! what was returned, so it survives splits (410s refresh the ranges and start over).

use crate::client::{Request, Wire};
use crate::{ContainerClient, Error, FeedRange, PartitionKey};
use futures::{StreamExt, TryStreamExt};
use reqwest::Method;
use serde_json::Value;
use strata_query::pk::EpkRange;
use strata_query::protocol::header;

/// Prefix of the continuation tokens of client-merged queries.
pub(crate) const TOKEN_PREFIX: &str = "strata-client:";
/// What this client can merge (`x-ms-cosmos-supported-query-features`).
const FEATURES: &str = "Aggregate, CompositeAggregate, Distinct, GroupBy, HybridSearch, MultipleAggregates, MultipleOrderBy, NonStreamingOrderBy, NonValueAggregate, OffsetAndLimit, OrderBy, Top";
const FILTER: &str = "{documentdb-formattableorderbyquery-filter}";
/// Range queries in flight at once.
const CONCURRENCY: usize = 8;

/// Every row of `body` (a `{"query", "parameters"}` object), merged across the ranges it
/// reaches within the optional partition key (or prefix) scope; and the request units spent.
pub(crate) async fn run(
    c: &ContainerClient,
    body: &Value,
    pk: Option<&PartitionKey>,
    feed_range: Option<&FeedRange>,
) -> Result<(Vec<Value>, f64), Error> {
    let mut attempt = 0;
    loop {
        match run_once(c, body, pk, feed_range).await {
            Err(e) if e.status() == Some(410) && attempt < 3 => attempt += 1,
            other => return other,
        }
    }
}

async fn run_once(
    c: &ContainerClient,
    body: &Value,
    pk: Option<&PartitionKey>,
    feed_range: Option<&FeedRange>,
) -> Result<(Vec<Value>, f64), Error> {
    let mut req = Request::new(Method::POST, format!("{}/docs", c.link))
        .json(body)
        .header(header::CONTENT_TYPE, "application/query+json")
        .header(header::IS_QUERY, "true")
        .header(header::IS_QUERY_PLAN_REQUEST, "True")
        .header(header::SUPPORTED_QUERY_FEATURES, FEATURES);
    if let Some(pk) = pk {
        req = req.header(header::PARTITION_KEY, pk.to_header());
    }
    let r = c.client.send(req).await?;
    let mut charge = r.charge();
    let plan = r.json()?;
    let wanted: Vec<EpkRange> = plan["queryRanges"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|q| {
                    EpkRange::new(
                        q["min"].as_str().unwrap_or_default(),
                        q["max"].as_str().unwrap_or("FF"),
                    )
                })
                .collect()
        })
        .unwrap_or_else(|| vec![EpkRange::full()]);
    let ranges: Vec<String> = c
        .read_partition_key_ranges()
        .await?
        .into_iter()
        .filter(|r| {
            let own = EpkRange::new(r.min_inclusive.clone(), r.max_exclusive.clone());
            wanted.iter().any(|w| w.overlaps(&own))
                && feed_range.is_none_or(|f| f.epk().overlaps(&own))
        })
        .map(|r| r.id)
        .collect();
    let params = body
        .get("parameters")
        .cloned()
        .unwrap_or(Value::Array(Vec::new()));
    if plan
        .get("hybridSearchQueryInfo")
        .is_some_and(Value::is_object)
    {
        let (rows, ru) = hybrid(
            c,
            &plan["hybridSearchQueryInfo"],
            &params,
            ranges,
            pk,
            feed_range,
        )
        .await?;
        return Ok((rows, charge + ru));
    }
    let rewritten = plan["queryInfo"]["rewrittenQuery"]
        .as_str()
        .unwrap_or_default()
        .replace(FILTER, "true");
    let range_body = serde_json::json!({
        "query": rewritten,
        "parameters": body.get("parameters").cloned().unwrap_or(Value::Array(Vec::new())),
    });
    let results: Vec<(Vec<Value>, f64)> = futures::stream::iter(ranges)
        .map(|range| all_pages(c, &range_body, range, pk, feed_range))
        .buffered(CONCURRENCY)
        .try_collect()
        .await?;
    let mut per_range = Vec::with_capacity(results.len());
    for (rows, ru) in results {
        charge += ru;
        per_range.push(rows);
    }
    let rows = strata_query::sql::merge::merge(&plan, per_range).map_err(Error::invalid)?;
    Ok((rows, charge))
}

/// Every row the rewritten query yields on one range.
async fn all_pages(
    c: &ContainerClient,
    body: &Value,
    range: String,
    pk: Option<&PartitionKey>,
    feed_range: Option<&FeedRange>,
) -> Result<(Vec<Value>, f64), Error> {
    let (mut rows, mut charge) = (Vec::new(), 0.0);
    let mut continuation: Option<String> = None;
    loop {
        let mut req = Request::new(Method::POST, format!("{}/docs", c.link))
            .json(body)
            .wire(Wire::Query)
            .header(header::CONTENT_TYPE, "application/query+json")
            .header(header::IS_QUERY, "true")
            .header(header::ENABLE_CROSS_PARTITION, "true")
            .header(header::PARTITION_KEY_RANGE_ID, range.clone())
            .header(header::MAX_ITEM_COUNT, "1000");
        if let Some(pk) = pk {
            req = req.header(header::PARTITION_KEY, pk.to_header());
        }
        if let Some(t) = &continuation {
            req = req.header(header::CONTINUATION, t.clone());
        }
        for (k, v) in feed_range.map(FeedRange::headers).into_iter().flatten() {
            req = req.header(k, v);
        }
        let r = c.client.send(req).await?;
        charge += r.charge();
        let v = r.json()?;
        rows.extend(v["Documents"].as_array().cloned().unwrap_or_default());
        continuation = r.header(header::CONTINUATION).map(str::to_string);
        if continuation.is_none() {
            return Ok((rows, charge));
        }
    }
}

/// Every row of `query` on each of `ranges`, and the request units spent.
async fn on_ranges(
    c: &ContainerClient,
    query: &str,
    params: &Value,
    ranges: &[String],
    pk: Option<&PartitionKey>,
    feed_range: Option<&FeedRange>,
) -> Result<(Vec<Value>, f64), Error> {
    let body = serde_json::json!({"query": query, "parameters": params});
    let results: Vec<(Vec<Value>, f64)> = futures::stream::iter(ranges.iter().cloned())
        .map(|range| all_pages(c, &body, range, pk, feed_range))
        .buffered(CONCURRENCY)
        .try_collect()
        .await?;
    let mut all = Vec::new();
    let mut charge = 0.0;
    for (rows, ru) in results {
        all.extend(rows);
        charge += ru;
    }
    Ok((all, charge))
}

/// A hybrid search as the gateway's plan describes it (see `strata_query::sql::hybrid`): the
/// global statistics summed over the ranges, each component query run on every range with
/// them, rows coalesced by `_rid` (in `_rid` order, the ties' order), fused by rank, then
/// `skip` and `take`.
async fn hybrid(
    c: &ContainerClient,
    info: &Value,
    params: &Value,
    ranges: Vec<String>,
    pk: Option<&PartitionKey>,
    feed_range: Option<&FeedRange>,
) -> Result<(Vec<Value>, f64), Error> {
    use strata_query::sql::hybrid;
    let mut charge = 0.0;
    let mut stats = Vec::new();
    if info["requiresGlobalStatistics"].as_bool() == Some(true) {
        let q = info["globalStatisticsQuery"].as_str().unwrap_or_default();
        let (rows, ru) = on_ranges(c, q, params, &ranges, pk, feed_range).await?;
        charge += ru;
        stats = hybrid::add_statistics(&rows);
    }
    let components = info["componentQueryInfos"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut by_rid: std::collections::BTreeMap<String, Value> = Default::default();
    let mut descending = Vec::new();
    for ci in &components {
        descending.push(ci["orderBy"][0].as_str() != Some("Ascending"));
        let q = hybrid::format_component(ci["rewrittenQuery"].as_str().unwrap_or_default(), &stats);
        let (rows, ru) = on_ranges(c, &q, params, &ranges, pk, feed_range).await?;
        charge += ru;
        for r in rows {
            let rid = r["_rid"].as_str().unwrap_or_default().to_string();
            by_rid.entry(rid).or_insert(r);
        }
    }
    let rows: Vec<Value> = by_rid.into_values().collect();
    let scores: Vec<Vec<Option<Value>>> = rows
        .iter()
        .map(|r| {
            r["payload"]["componentScores"]
                .as_array()
                .map(|a| a.iter().cloned().map(Some).collect())
                .unwrap_or_default()
        })
        .collect();
    let weights: Vec<f64> = match info["componentWeights"].as_array() {
        Some(w) => w.iter().map(|x| x.as_f64().unwrap_or(1.0)).collect(),
        None => vec![1.0; components.len()],
    };
    let order = hybrid::fuse(&scores, &descending, &weights);
    let skip = info["skip"].as_u64().unwrap_or(0) as usize;
    let take = info["take"]
        .as_u64()
        .map(|t| t as usize)
        .unwrap_or(usize::MAX);
    let out = order
        .into_iter()
        .skip(skip)
        .take(take)
        .map(|i| rows[i]["payload"]["payload"].clone())
        .collect();
    Ok((out, charge))
}
