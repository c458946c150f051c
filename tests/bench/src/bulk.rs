//! The bulk suite: loading items with strata-sdk's `execute_bulk` (non-atomic batches of 100
//! grouped by partition key range, eight requests in flight) against the server's durable
//! upsert rate measured the way the throughput suite loads (64 concurrent single upserts), on
//! the same in-process durable server, one after the other.

use crate::dataset::Dataset;
use crate::{in_process, load, temp_dir, Args, Report};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;
use strata_sdk::{BulkOperation, BulkOptions, CosmosClient, EMULATOR_KEY};

pub async fn bulk(a: &Args, r: &mut Report) {
    let items = if a.smoke { 2_000 } else { a.bulk_items };
    println!("\n== bulk: execute_bulk vs concurrent durable upserts, {items} items of 1 KB ==");
    let dir = temp_dir("bulk");
    let (running, http) = in_process(Some(dir.clone()), None).await;
    let ds = Arc::new(Dataset::new(items, 1024, a.tenants));
    for coll in ["upserts", "bulk"] {
        http.setup("bench", coll, Dataset::definition(), Some(40_000))
            .await
            .expect("setup");
    }
    let upsert_rate = load(&http, &ds, "upserts", 0, items, 64).await;
    println!("  durable upserts (64 concurrent)  {upsert_rate:>10.0} items/s");

    let client = CosmosClient::new(&running.url(), EMULATOR_KEY).expect("client");
    let c = client.database("bench").container("bulk");
    let started = Instant::now();
    let mut failed = 0usize;
    const CALL: u64 = 10_000;
    for from in (0..items).step_by(CALL as usize) {
        let ops: Vec<BulkOperation> = (from..(from + CALL).min(items))
            .map(|i| BulkOperation::upsert(&ds.doc(i, 0)).expect("op"))
            .collect();
        let results = c
            .execute_bulk(ops, BulkOptions { concurrency: 8 })
            .await
            .expect("bulk");
        failed += results.iter().filter(|x| x.status >= 300).count();
    }
    let bulk_rate = items as f64 / started.elapsed().as_secs_f64();
    println!("  execute_bulk (8 in flight)       {bulk_rate:>10.0} items/s ({failed} failed)");
    println!(
        "  bulk / upserts                   {:>10.2}",
        bulk_rate / upsert_rate
    );
    r.target(
        "execute_bulk load >= 50% of durable upsert rate",
        format!(
            "{:.0}% ({bulk_rate:.0} vs {upsert_rate:.0} items/s)",
            100.0 * bulk_rate / upsert_rate
        ),
        bulk_rate >= 0.5 * upsert_rate,
    );
    r.extra
        .insert("bulk_items_per_s".into(), json!(bulk_rate.round()));
    r.extra
        .insert("bulk_upsert_items_per_s".into(), json!(upsert_rate.round()));
    assert_eq!(failed, 0, "bulk operations failed");
    running.stop().await.expect("stop");
    let _ = std::fs::remove_dir_all(dir);
}
