//! The gsi suite: a burst of durable upserts (64 concurrent) into a source container with a
//! global secondary index, against the same burst into one without, on one in-process
//! durable server, one after the other; then how long after the burst's last acknowledged
//! write the index holds a copy of every item (its lag), and the copies a second its sync
//! applied over the burst and the catch-up.

use crate::dataset::Dataset;
use crate::{in_process, load, temp_dir, Args, Report};
use reqwest::Method;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Copies the index holds now (the container's `documentsCount`).
async fn copies(http: &crate::client::Http) -> u64 {
    let Ok(r) = http
        .send_full(Method::GET, "/dbs/bench/colls/byUser", &[], None)
        .await
    else {
        return 0;
    };
    r.headers
        .get("x-ms-resource-usage")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').find_map(|p| p.strip_prefix("documentsCount=")))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

pub async fn gsi(a: &Args, r: &mut Report) {
    let items = if a.smoke { 2_000 } else { a.gsi_items };
    println!("\n== gsi: a write burst on a source with a global secondary index, {items} items of 1 KB ==");
    let dir = temp_dir("gsi");
    let (running, http) = in_process(Some(dir.clone()), None).await;
    let ds = Arc::new(Dataset::new(items, 1024, a.tenants));
    for coll in ["plain", "source"] {
        http.setup("bench", coll, Dataset::definition(), Some(40_000))
            .await
            .expect("setup");
    }
    let index = json!({
        "partitionKey": {"paths": ["/UserId"], "kind": "Hash", "version": 2},
        "globalSecondaryIndexDefinition": {"sourceCollectionId": "source",
            "definition": "SELECT c.UserId, c.TenantId, c.n, c.g FROM c"},
    });
    http.setup_with("bench", "byUser", index, Some(40_000))
        .await
        .expect("index");
    let plain = load(&http, &ds, "plain", 0, items, 64).await;
    println!("  upserts without an index          {plain:>10.0} items/s");
    let started = Instant::now();
    let indexed = load(&http, &ds, "source", 0, items, 64).await;
    let burst = started.elapsed();
    let behind = items.saturating_sub(copies(&http).await);
    let acked = Instant::now();
    while copies(&http).await < items {
        assert!(
            acked.elapsed() < Duration::from_secs(600),
            "the index did not catch up"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let lag = acked.elapsed();
    let applied = items as f64 / (burst + lag).as_secs_f64();
    println!("  upserts with an index             {indexed:>10.0} items/s");
    // No target: on two cores the index's sync and its source's history take CPU the burst
    // would have had (each item is written twice and logged once).
    println!(
        "  with / without                    {:>10.2}x",
        indexed / plain
    );
    println!(
        "  copies behind at the last ack     {behind:>10} ({:.1}% of the burst)",
        100.0 * behind as f64 / items as f64
    );
    println!(
        "  lag after the burst               {:>10.0} ms",
        lag.as_secs_f64() * 1000.0
    );
    println!("  copies applied                    {applied:>10.0} items/s (burst and catch-up)");
    r.extra.insert(
        "gsi".into(),
        json!({"items": items, "plain_per_s": plain.round(), "indexed_per_s": indexed.round(),
               "behind_at_last_ack": behind, "lag_ms": lag.as_millis() as u64,
               "applied_per_s": applied.round()}),
    );
    running.stop().await.expect("stop");
    let _ = std::fs::remove_dir_all(dir);
}
