//! Single-partition queries, fresh and after one item of the queried partition was updated
//! 100,000 times.
//!
//! A `/pk` container holds 1,000 items in 100 logical partitions of ten. `partition-query`
//! reads one random partition (`SELECT * FROM c WHERE c.pk = @p`, ten items), against the
//! baseline's fixed ten-item page. `query-after-updates` queries one partition, upserts one of
//! its items 100,000 times, and queries it again: hot items (counters, session state) are a
//! normal Cosmos workload, and the query must not slow down because an LSM store still holds
//! every overwritten version.

use crate::client::Http;
use crate::runner::{self, Measured, Op};
use crate::{mix, ok, Report};
use reqwest::Method;
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const COLL: &str = "parts";
const PARTITIONS: u64 = 100;
const PER_PARTITION: u64 = 10;
/// The partition `query-after-updates` queries, and whose first item it updates.
const HOT: u64 = 1;

fn doc(p: u64, k: u64, v: u64, size: usize) -> serde_json::Value {
    let pad = size.saturating_sub(80);
    json!({"id": format!("i{k}"), "pk": format!("p{p}"), "k": k, "v": v, "pad": "x".repeat(pad)})
}

fn pk_header(p: u64) -> String {
    json!([format!("p{p}")]).to_string()
}

/// Creates the container and its 1,000 items.
async fn setup(http: &Http, item_size: usize) {
    http.setup(
        "bench",
        COLL,
        json!({"paths": ["/pk"], "kind": "Hash"}),
        None,
    )
    .await
    .expect("setup");
    for p in 0..PARTITIONS {
        for k in 0..PER_PARTITION {
            let r = http
                .json(
                    Method::POST,
                    &format!("/dbs/bench/colls/{COLL}/docs"),
                    &[
                        ("x-ms-documentdb-partitionkey", &pk_header(p)),
                        ("x-ms-documentdb-is-upsert", "true"),
                    ],
                    &doc(p, k, 0, item_size),
                )
                .await;
            assert!(matches!(r, Ok(ref o) if o.status < 300), "load: {r:?}");
        }
    }
}

/// The query of one partition (`only`) or of a random one per request.
fn query(http: &Http, only: Option<u64>) -> Op {
    let http = http.clone();
    Arc::new(move |n: u64| {
        let http = http.clone();
        Box::pin(async move {
            let p = only.unwrap_or(mix(n ^ 0x51) % PARTITIONS);
            let o = http
                .json(
                    Method::POST,
                    &format!("/dbs/bench/colls/{COLL}/docs"),
                    &[
                        ("x-ms-documentdb-isquery", "true"),
                        ("content-type", "application/query+json"),
                        ("x-ms-documentdb-partitionkey", &pk_header(p)),
                    ],
                    &json!({"query": "SELECT * FROM c WHERE c.pk = @p",
                            "parameters": [{"name": "@p", "value": format!("p{p}")}]}),
                )
                .await;
            if let Ok(o) = &o {
                // The page ends with its count: checked without scanning the body.
                if o.status == 200 && !o.body.ends_with(b"\"_count\":10}") {
                    return Err("a partition query did not return its ten items".into());
                }
            }
            ok(o, &[200])
        })
    })
}

/// The baseline's fixed ten-item page.
fn page(base: &Http) -> Op {
    let base = base.clone();
    Arc::new(move |_| {
        let base = base.clone();
        Box::pin(async move {
            ok(
                base.json(
                    Method::POST,
                    &format!("/dbs/bench/colls/{COLL}/docs"),
                    &[("x-ms-documentdb-isquery", "true")],
                    &json!({"query": "SELECT * FROM c"}),
                )
                .await,
                &[200],
            )
        })
    })
}

/// Upserts item `i0` of the hot partition `n` times from `clients` tasks; returns upserts/s.
async fn hammer(http: &Http, n: u64, clients: usize, item_size: usize) -> f64 {
    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (http, next) = (http.clone(), Arc::clone(&next));
            tokio::spawn(async move {
                loop {
                    let v = next.fetch_add(1, Ordering::Relaxed);
                    if v >= n {
                        return;
                    }
                    let r = http
                        .json(
                            Method::POST,
                            &format!("/dbs/bench/colls/{COLL}/docs"),
                            &[
                                ("x-ms-documentdb-partitionkey", &pk_header(HOT)),
                                ("x-ms-documentdb-is-upsert", "true"),
                            ],
                            &doc(HOT, 0, v + 1, item_size),
                        )
                        .await;
                    assert!(matches!(r, Ok(ref o) if o.status < 300), "upsert: {r:?}");
                }
            })
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
    n as f64 / started.elapsed().as_secs_f64()
}

/// Which of this module's workloads are selected.
pub fn selected(names: &[&str]) -> (bool, bool) {
    (
        names.contains(&"partition-query"),
        names.contains(&"query-after-updates"),
    )
}

/// Runs the selected workloads; `updates` is how many times the hot item is rewritten.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    r: &mut Report,
    rows: &mut Vec<Measured>,
    http: &Http,
    base: &Http,
    (fresh_random, after_updates): (bool, bool),
    clients: usize,
    warm: Duration,
    rounds: usize,
    item_size: usize,
    updates: u64,
) {
    setup(http, item_size).await;
    let basis = page(base);
    // One workload against the baseline's page, in alternating slices.
    let measure = |name: &'static str, only: Option<u64>| {
        runner::paired(
            name,
            "  (baseline-page, paired)",
            clients,
            warm,
            rounds,
            query(http, only),
            Arc::clone(&basis),
        )
    };
    if fresh_random {
        let (m, b) = measure("partition-query", None).await;
        let ratio = m.ratio_to_baseline.unwrap_or(0.0);
        r.target(
            "single-partition query (10 of 1,000) >= 50% of a 10-item page",
            format!("{:.0}%", ratio * 100.0),
            ratio >= 0.5,
        );
        rows.push(m);
        rows.push(b);
    }
    if after_updates {
        let (fresh, b) = measure("hot-partition-query", Some(HOT)).await;
        let rate = hammer(http, updates, 16, item_size).await;
        println!("  updated one item {updates} times at {rate:.0} upserts/s");
        let (after, b2) = measure("query-after-updates", Some(HOT)).await;
        // Each against its own paired baseline, so machine noise between the two cancels.
        let ratio = after.ratio_to_baseline.unwrap_or(0.0)
            / fresh.ratio_to_baseline.unwrap_or(1.0).max(1e-9);
        r.target(
            &format!("query after {updates} updates of one item >= 80% of fresh"),
            format!("{:.0}%", ratio * 100.0),
            ratio >= 0.8,
        );
        rows.extend([fresh, b, after, b2]);
    }
}
