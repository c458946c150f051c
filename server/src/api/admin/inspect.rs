//! `GET /_strata/containers/{db}/{container}/partitions`: what a user looks at to find a hot
//! or oversized partition. For each physical partition: its range and lineage, item count,
//! bytes, LSN, largest logical partitions (with their key values) and request counts.

use crate::api::response::Reply;
use crate::api::App;
use crate::error::CosmosError;
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

pub fn partitions(app: &App, db: &str, coll: &str) -> Result<Reply, CosmosError> {
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
    let warnings = warnings(&out, c.limits().logical_partition_limit_bytes);
    let body = json!({
        "database": c.db,
        "container": c.id,
        "partitionKey": c.pk.to_json(),
        "splitThresholdBytes": c.limits().partition_split_bytes,
        "logicalPartitionLimitBytes": c.limits().logical_partition_limit_bytes,
        "maxPartitions": c.limits().max_partitions,
        "generation": view.generation,
        "partitions": out,
        // What each write maintains beside the documents, one line per index maintainer.
        "indexes": c.maintainers().explain(),
        "warnings": warnings,
    });
    Ok(Reply::json(StatusCode::OK, &body))
}

/// Every partition's hottest logical partitions, in one list.
pub fn hottest_logical_partitions(parts: &[Value]) -> Vec<Value> {
    parts
        .iter()
        .flat_map(|p| {
            p["requestUnits"]["hottestLogicalPartitions"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect()
}

/// The warnings a user acts on, from the partitions as listed: a logical partition near its
/// size limit (at 80%), a physical partition that throttles or takes most of the request
/// units of several, one logical partition taking most of the request units. Each is
/// `{"level": "warning"|"info", "kind", "message"}`.
pub fn warnings(parts: &[Value], lp_limit: u64) -> Vec<Value> {
    let mut out = Vec::new();
    let num = |v: &Value| v.as_f64().unwrap_or(0.0);
    let total_rate: f64 = parts
        .iter()
        .map(|p| num(&p["requestUnits"]["consumedPerSecond"]))
        .sum();
    let total_ru: f64 = parts
        .iter()
        .map(|p| num(&p["requestUnits"]["consumedTotal"]))
        .sum();
    for p in parts {
        let id = p["id"].as_str().unwrap_or_default();
        for lp in p["largestLogicalPartitions"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let bytes = num(&lp["bytes"]);
            if lp_limit > 0 && bytes >= 0.8 * lp_limit as f64 {
                out.push(json!({
                    "level": "warning",
                    "kind": "logical-partition-size",
                    "message": format!(
                        "logical partition {} holds {:.1} MB of its {:.1} MB limit ({:.0}%): writes fail with 403 at the limit; spread it with a deeper hierarchical key",
                        lp["partitionKey"], bytes / 1048576.0, lp_limit as f64 / 1048576.0, 100.0 * bytes / lp_limit as f64
                    ),
                }));
            }
        }
        let throttled = num(&p["requestUnits"]["throttledRequests"]);
        if throttled > 0.0 {
            out.push(json!({
                "level": "warning",
                "kind": "throttling",
                "message": format!("partition {id} throttled {throttled:.0} requests (429): its share of the throughput is exhausted"),
            }));
        }
        let rate = num(&p["requestUnits"]["consumedPerSecond"]);
        if parts.len() > 1 && total_rate > 0.0 && rate > 0.5 * total_rate {
            out.push(json!({
                "level": "warning",
                "kind": "hot-partition",
                "message": format!(
                    "partition {id} takes {:.0}% of the container's request units per second across {} partitions",
                    100.0 * rate / total_rate, parts.len()
                ),
            }));
        }
    }
    let hottest = hottest_logical_partitions(parts)
        .into_iter()
        .max_by(|a, b| num(&a["requestUnits"]).total_cmp(&num(&b["requestUnits"])));
    if let Some(h) = hottest {
        let ru = num(&h["requestUnits"]);
        if total_ru > 0.0 && ru > 0.5 * total_ru && total_ru >= 100.0 {
            out.push(json!({
                "level": "warning",
                "kind": "hot-key",
                "message": format!(
                    "logical partition {} took {:.0}% of all request units: one tenant dominates the load",
                    h["partitionKey"], 100.0 * ru / total_ru
                ),
            }));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(id: &str, rate: f64, throttled: u64, lp_bytes: u64, hot_ru: f64) -> Value {
        json!({
            "id": id,
            "largestLogicalPartitions": [{"partitionKey": ["t1"], "bytes": lp_bytes}],
            "requestUnits": {"consumedPerSecond": rate, "consumedTotal": rate * 10.0, "throttledRequests": throttled,
                             "hottestLogicalPartitions": [{"partitionKey": ["t1"], "requestUnits": hot_ru}]},
        })
    }

    #[test]
    fn warnings_name_what_to_act_on() {
        let kinds = |w: Vec<Value>| -> Vec<String> {
            w.iter()
                .map(|x| x["kind"].as_str().unwrap_or_default().to_string())
                .collect()
        };
        assert!(kinds(warnings(
            &[part("0", 10.0, 0, 10, 1.0), part("1", 10.0, 0, 10, 1.0)],
            1000
        ))
        .is_empty());
        let w = kinds(warnings(
            &[part("0", 90.0, 3, 900, 800.0), part("1", 10.0, 0, 10, 1.0)],
            1000,
        ));
        assert_eq!(
            w,
            [
                "logical-partition-size",
                "throttling",
                "hot-partition",
                "hot-key"
            ]
        );
    }
}
