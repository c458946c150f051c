//! The indexing suite: what the secondary index buys and costs, on durable storage in
//! separate strata processes.
//!
//! * A selective equality (10 matches) on a non-key property, fan-out over 1M items: the
//!   documents read (query metrics) against the matches, and its p50 latency against the same
//!   query on 10k items, measured in alternating slices.
//! * `SELECT TOP 10 ... ORDER BY c.n DESC` over 1M items: documents read per range.
//! * The write cost of indexing: durable upserts into a container with the default policy vs
//!   one with `indexingMode: none`, alternating slices; and disk bytes per item of each.

use crate::client::Http;
use crate::dataset::Dataset;
use crate::scale::{server_bin, spawn_server};
use crate::workloads::workload;
use crate::{dir_bytes, load, mix, ok, print_rows, quiesce, runner, temp_dir, Args, Report};
use reqwest::Method;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use strata_query::protocol::{header, QueryRoute};

const DOCS: &str = "/dbs/bench/colls/events/docs";

/// Throughput that gives the container four physical partitions.
const FOUR_PARTITIONS: u32 = 40_000;

fn query_headers() -> Vec<(&'static str, &'static str)> {
    vec![
        ("x-ms-documentdb-isquery", "true"),
        ("content-type", "application/query+json"),
        ("x-ms-documentdb-query-enablecrosspartition", "true"),
        ("x-ms-documentdb-populatequerymetrics", "true"),
    ]
}

/// One query: (rows, documents read, ranges visited).
async fn run_query(http: &Http, sql: &str, params: Value) -> (usize, u64, usize) {
    let body = json!({"query": sql, "parameters": params});
    let r = http
        .send_full(
            Method::POST,
            DOCS,
            &query_headers(),
            Some(body.to_string().into_bytes()),
        )
        .await
        .expect("query");
    let h = |n: &str| r.headers.get(n).and_then(|v| v.to_str().ok());
    let metrics = h("x-ms-documentdb-query-metrics").unwrap_or_default();
    let read = metrics
        .split(';')
        .find_map(|kv| kv.strip_prefix("retrievedDocumentCount="))
        .and_then(|v| v.parse().ok())
        .unwrap_or(u64::MAX);
    let ranges = h(header::QUERY_ROUTE)
        .and_then(QueryRoute::parse)
        .map(|q| q.ranges.len())
        .unwrap_or(1);
    let rows = serde_json::from_slice::<Value>(&r.body)
        .ok()
        .and_then(|v| v["Documents"].as_array().map(Vec::len))
        .unwrap_or(0);
    (rows, read, ranges)
}

/// The equality lookup as a load-generator operation over `items` loaded items.
fn lookup_op(http: &Http, items: u64) -> runner::Op {
    let http = http.clone();
    Arc::new(move |n: u64| {
        let http = http.clone();
        Box::pin(async move {
            let g = mix(n) % (items / 10).max(1);
            let body = json!({"query": "SELECT * FROM c WHERE c.g = @g", "parameters": [{"name": "@g", "value": g}]});
            ok(
                http.send(
                    Method::POST,
                    DOCS,
                    &query_headers(),
                    Some(body.to_string().into_bytes()),
                )
                .await,
                &[200],
            )
        }) as futures::future::BoxFuture<'static, Result<f64, String>>
    })
}

async fn server(
    bin: &std::path::Path,
    label: &str,
    props: Value,
) -> (std::process::Child, Http, std::path::PathBuf) {
    let dir = temp_dir(label);
    let (child, url) = spawn_server(bin, &dir);
    let http = Http::new(&url);
    http.setup_with("bench", "events", props, Some(FOUR_PARTITIONS))
        .await
        .expect("setup");
    (child, http, dir)
}

fn stop(mut child: std::process::Child, dir: &std::path::Path) {
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(dir);
}

pub async fn indexing(a: &Args, r: &mut Report) {
    let n = if a.smoke { 5_000 } else { a.index_items };
    let small = if a.smoke { 1_000 } else { 10_000 }.min(n);
    let bin = server_bin(a);
    println!("== indexing: {n} items vs {small}, durable, four partitions");
    let default = json!({"partitionKey": Dataset::definition()});
    let (small_child, small_http, small_dir) = server(&bin, "idx-small", default.clone()).await;
    let ds_small = Arc::new(Dataset::new(small, a.item_size, a.tenants));
    load(&small_http, &ds_small, "events", 0, small, 64).await;
    let (big_child, big_http, big_dir) = server(&bin, "idx-big", default.clone()).await;
    let ds = Arc::new(Dataset::new(n, a.item_size, a.tenants));
    let rate = load(&big_http, &ds, "events", 0, n, 64).await;
    println!("  loaded {n} items at {rate:.0} items/s (indexed)");
    let waited = quiesce(
        big_child.id(),
        Duration::from_secs(if a.smoke { 5 } else { 120 }),
    )
    .await;
    println!(
        "  background work settled after {:.1} s",
        waited.as_secs_f64()
    );

    // Documents read by the selective lookup, over sampled values.
    let mut worst = 0u64;
    for k in 0..20u64 {
        let g = mix(k) % (n / 10);
        let (rows, read, _) = run_query(
            &big_http,
            "SELECT * FROM c WHERE c.g = @g",
            json!([{"name": "@g", "value": g}]),
        )
        .await;
        assert_eq!(rows, 10, "g = {g} matches ten items");
        worst = worst.max(read);
    }
    let rounds = a.seconds.min(if a.smoke { 1.0 } else { 10.0 }).ceil() as usize;
    let (at_n, at_small) = runner::paired(
        &format!("lookup (10 of {n})"),
        &format!("lookup (10 of {small})"),
        a.clients,
        Duration::from_secs_f64(a.warmup.min(1.0)),
        rounds,
        lookup_op(&big_http, n),
        lookup_op(&small_http, small),
    )
    .await;
    print_rows(&[at_small.clone(), at_n.clone()]);
    let p50_ratio = at_n.p50_us as f64 / at_small.p50_us.max(1) as f64;
    println!(
        "  equality on a non-key property, fan-out: read at most {worst} documents for 10 matches"
    );

    // ORDER BY from the index.
    let (rows, read, ranges) = run_query(
        &big_http,
        "SELECT TOP 10 c.id, c.n FROM c ORDER BY c.n DESC",
        json!([]),
    )
    .await;
    assert_eq!(rows, 10);
    let per_range = read as f64 / ranges.max(1) as f64;
    println!("  TOP 10 ORDER BY c.n DESC over {n}: {read} documents read over {ranges} ranges");
    stop(big_child, &big_dir);
    stop(small_child, &small_dir);

    // The write cost of indexing, and its space.
    let m = if a.smoke { 2_000 } else { 100_000 }.min(n);
    let none = json!({"partitionKey": Dataset::definition(),
                      "indexingPolicy": {"indexingMode": "none", "automatic": false}});
    let (on_child, on_http, on_dir) = server(&bin, "idx-on", default).await;
    let (off_child, off_http, off_dir) = server(&bin, "idx-off", none).await;
    let ds_m = Arc::new(Dataset::new(m, a.item_size, a.tenants));
    let rate_on = load(&on_http, &ds_m, "events", 0, m, 64).await;
    let rate_off = load(&off_http, &ds_m, "events", 0, m, 64).await;
    let settle = Duration::from_secs(if a.smoke { 3 } else { 60 });
    quiesce(on_child.id(), settle).await;
    quiesce(off_child.id(), settle).await;
    let (bytes_on, bytes_off) = (dir_bytes(&on_dir), dir_bytes(&off_dir));
    let (up_on, up_off) = runner::paired(
        "upsert (default policy)",
        "upsert (indexingMode none)",
        a.clients,
        Duration::from_secs_f64(a.warmup.min(1.0)),
        rounds,
        workload("upsert", &on_http, &ds_m, "events").expect("op"),
        workload("upsert", &off_http, &ds_m, "events").expect("op"),
    )
    .await;
    print_rows(&[up_off.clone(), up_on.clone()]);
    let write_ratio = up_on.ops_per_sec / up_off.ops_per_sec.max(1e-9);
    println!(
        "  load {rate_on:.0} vs {rate_off:.0} items/s; disk {:.0} vs {:.0} bytes/item (default vs none, {m} items)",
        bytes_on as f64 / m as f64,
        bytes_off as f64 / m as f64
    );
    stop(on_child, &on_dir);
    stop(off_child, &off_dir);

    r.extra
        .insert("index_lookup_docs_read".into(), json!(worst));
    r.extra
        .insert("index_lookup_p50_ratio".into(), json!(p50_ratio));
    r.extra
        .insert("index_topn_docs_read_per_range".into(), json!(per_range));
    r.extra
        .insert("index_upsert_ratio".into(), json!(write_ratio));
    r.extra.insert(
        "index_bytes_per_item".into(),
        json!(bytes_on as f64 / m as f64),
    );
    r.extra.insert(
        "noindex_bytes_per_item".into(),
        json!(bytes_off as f64 / m as f64),
    );
    r.target(
        &format!("lookup of 10 in {n}: documents read <= 20"),
        format!("{worst}"),
        worst <= 20,
    );
    r.target(
        &format!("lookup p50 at {n} within 2x of {small}"),
        format!(
            "{p50_ratio:.2}x ({} vs {} us)",
            at_n.p50_us, at_small.p50_us
        ),
        p50_ratio <= 2.0,
    );
    r.target(
        &format!("TOP 10 ORDER BY over {n}: documents read per range <= 20"),
        format!("{per_range:.1}"),
        per_range <= 20.0,
    );
    r.target(
        "durable upsert, default policy vs none >= 0.75",
        format!("{write_ratio:.2}"),
        write_ratio >= 0.75,
    );
    r.rows.extend([at_small, at_n, up_off, up_on]);
}
