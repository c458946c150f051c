//! `GET /_strata/containers/{db}/{container}/partitions`: what a user looks at to find a hot
//! or oversized partition. For each physical partition: its range and lineage, item count,
//! bytes, LSN, largest logical partitions (with their key values) and request counts.

use super::error::ApiError;
use super::response::Reply;
use super::App;
use crate::store::split;
use axum::http::StatusCode;
use serde_json::{json, Value};

/// The key values of a logical partition, read from any of its items.
fn key_of(c: &crate::store::container::Container, epk: &str) -> Value {
    c.scan_docs(&strata_query::pk::EpkRange::point(epk), Some(epk), None, 1)
        .ok()
        .and_then(|v| v.into_iter().next())
        .and_then(|(_, it)| serde_json::from_slice::<Value>(&it.json).ok())
        .map(|d| Value::Array(c.pk.extract(&d).0.iter().map(|x| x.to_json()).collect()))
        .unwrap_or(Value::Null)
}

/// How many of the largest logical partitions to list per physical partition.
const TOP_LOGICAL: usize = 5;

pub fn partitions(app: &App, db: &str, coll: &str) -> Result<Reply, ApiError> {
    let c = app.store.container(db, coll)?;
    let view = c.partitions();
    let ranges = view.ranges;
    let rate = app.partition_rate(&c);
    let mut out = Vec::new();
    for r in ranges {
        let usage = app.governor.usage(&c, rate, r.id);
        let mut lps = split::logical_partitions(&c, &r.range)?;
        lps.sort_by_key(|lp| std::cmp::Reverse(lp.1));
        lps.truncate(TOP_LOGICAL);
        let largest: Vec<Value> = lps
            .iter()
            .map(|(epk, b, n)| {
                json!({"partitionKey": key_of(&c, epk), "effectivePartitionKey": epk, "bytes": b, "itemCount": n})
            })
            .collect();
        out.push(json!({
            "id": r.id.to_string(),
            "minInclusive": r.range.min,
            "maxExclusive": r.range.max,
            "parents": r.parents,
            "itemCount": r.count,
            "bytes": r.bytes,
            "lsn": r.lsn,
            "largestLogicalPartitions": largest,
            "requests": {"reads": r.reads, "writes": r.writes, "queries": r.queries},
            "requestUnits": {
                "budgetPerSecond": usage.budget_per_second,
                "consumedPerSecond": usage.ru_per_second,
                "consumedTotal": usage.total_ru,
                "throttledRequests": usage.throttled,
                "hottestLogicalPartitions": usage.hottest.iter().map(|(epk, ru)| json!({
                    "partitionKey": key_of(&c, epk),
                    "effectivePartitionKey": epk,
                    "requestUnits": ru,
                })).collect::<Vec<_>>(),
            },
        }));
    }
    let body = json!({
        "database": c.db,
        "container": c.id,
        "partitionKey": c.pk.to_json(),
        "splitThresholdBytes": c.limits.partition_split_bytes,
        "logicalPartitionLimitBytes": c.limits.logical_partition_limit_bytes,
        "generation": view.generation,
        "partitions": out,
    });
    Ok(Reply::json(StatusCode::OK, &body))
}
