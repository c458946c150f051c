//! The copy suite: `strata copy` (in-process, the library function the command runs) from a
//! `/TenantId` container into a `/TenantId/UserId/SessionId` one on one durable in-process
//! server, against the durable upsert rate of loading the source (64 concurrent upserts),
//! measured in the same run.

use crate::client::Http;
use crate::dataset::Dataset;
use crate::{in_process, temp_dir, Args, Report};
use reqwest::Method;
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;
use strata_server::transfer::copy::{copy, CopyArgs, CopySpec};

pub async fn copy_suite(a: &Args, r: &mut Report) {
    let items = if a.smoke { 2_000 } else { a.copy_items };
    println!("\n== copy: {items} items of 1 KB from /TenantId into /TenantId/UserId/SessionId ==");
    let dir = temp_dir("copy");
    let (running, http) = in_process(Some(dir.clone()), None).await;
    let ds = Arc::new(Dataset::new(items, 1024, a.tenants));
    http.setup(
        "bench",
        "old",
        json!({"paths": ["/TenantId"], "kind": "Hash", "version": 2}),
        Some(40_000),
    )
    .await
    .expect("setup");
    let upsert_rate = load_by_tenant(&http, &ds, items).await;
    println!("  durable upserts loading the source  {upsert_rate:>10.0} items/s");
    let checkpoint = dir.join("copy.checkpoint.json");
    let started = Instant::now();
    let summary = copy(CopyArgs {
        spec: CopySpec {
            from: running.url(),
            to: None,
            source: "bench/old".into(),
            dest: "bench/new".into(),
            partition_key: Some("/TenantId,/UserId,/SessionId".into()),
            fill: Vec::new(),
            follow: false,
            parallel: 8,
            timeout: 120,
        },
        checkpoint: Some(checkpoint),
    })
    .await
    .expect("copy");
    let secs = started.elapsed().as_secs_f64();
    let rate = items as f64 / secs;
    println!("  strata copy (incl. verification)    {rate:>10.0} items/s ({secs:.1} s)");
    println!("  {summary}");
    r.target(
        "copy >= 50% of the durable upsert rate",
        format!(
            "{:.0}% ({rate:.0} vs {upsert_rate:.0} items/s)",
            100.0 * rate / upsert_rate
        ),
        rate >= 0.5 * upsert_rate,
    );
    r.extra
        .insert("copy_items_per_s".into(), json!(rate.round()));
    running.stop().await.expect("stop");
    let _ = std::fs::remove_dir_all(dir);
}

/// Loads the source (`/TenantId`) with 64 concurrent durable upserts; returns items/s.
async fn load_by_tenant(http: &Http, ds: &Arc<Dataset>, items: u64) -> f64 {
    let started = Instant::now();
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let (http, ds, next) = (http.clone(), Arc::clone(ds), Arc::clone(&next));
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= items {
                    return;
                }
                let doc = ds.doc(i, 0);
                let pk = json!([doc["TenantId"]]).to_string();
                let r = http
                    .json(
                        Method::POST,
                        "/dbs/bench/colls/old/docs",
                        &[
                            ("x-ms-documentdb-partitionkey", &pk),
                            ("x-ms-documentdb-is-upsert", "true"),
                        ],
                        &doc,
                    )
                    .await;
                assert!(matches!(r, Ok(ref o) if o.status < 300), "load failed");
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    items as f64 / started.elapsed().as_secs_f64()
}
