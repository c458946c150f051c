//! Two change feed processor instances share one container's feed through leases; the
//! container splits while they run (its throughput is raised past 10,000 RU/s per partition),
//! the split range's lease is handed over to its children, and every change is handled once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use strata_sdk::{
    ChangeFeedProcessor, ContainerProperties, CosmosClient, PartitionKeyDefinition,
    ProcessorOptions, Throughput, EMULATOR_KEY,
};

#[tokio::main]
async fn main() -> Result<(), strata_sdk::Error> {
    let client = CosmosClient::new(&strata_examples::endpoint(), EMULATOR_KEY)?;
    let db = client
        .create_database(&strata_examples::unique("processor"))
        .await?;
    let orders = db
        .create_container_with_throughput(
            ContainerProperties::new("orders", PartitionKeyDefinition::new("/customer")),
            Throughput::Manual(6_000),
        )
        .await?;
    let leases = db
        .create_container(ContainerProperties::new(
            "leases",
            PartitionKeyDefinition::new("/id"),
        ))
        .await?;
    let write = |from: u32, to: u32| {
        let orders = orders.clone();
        async move {
            for i in from..to {
                let order = serde_json::json!({"id": format!("o{i}"), "customer": format!("c{}", i % 17), "total": i});
                orders.upsert_item(&order, Default::default()).await?;
            }
            Ok::<_, strata_sdk::Error>(())
        }
    };
    write(0, 100).await?;

    // Handled count per order id, and which instance handled it.
    let handled: Arc<Mutex<HashMap<String, (u32, String)>>> = Arc::default();
    let stop = Arc::new(tokio::sync::Notify::new());
    let mut workers = Vec::new();
    for name in ["worker-1", "worker-2"] {
        let options = ProcessorOptions {
            poll_interval: Duration::from_millis(100),
            max_item_count: Some(25),
            ..ProcessorOptions::new(name)
        };
        let processor = ChangeFeedProcessor::new(orders.clone(), leases.clone(), options);
        let (handled, stop) = (Arc::clone(&handled), Arc::clone(&stop));
        workers.push(tokio::spawn(async move {
            processor
                .run(
                    move |batch: Vec<serde_json::Value>| {
                        let handled = Arc::clone(&handled);
                        async move {
                            let mut h = handled.lock().unwrap_or_else(|p| p.into_inner());
                            for order in batch {
                                let id = order["id"].as_str().unwrap_or_default().to_string();
                                h.entry(id).or_insert((0, name.to_string())).0 += 1;
                            }
                            Ok(())
                        }
                    },
                    async move { stop.notified().await },
                )
                .await
        }));
    }

    let before = orders.feed_ranges().await?.len();
    orders
        .replace_throughput(Throughput::Manual(25_000))
        .await?;
    // Wait until the split range's lease has been handed over to its children, then write
    // the rest: the two workers share the children's leases.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let leases_now: Vec<u64> = leases
            .query_all(
                "SELECT VALUE COUNT(1) FROM c WHERE STARTSWITH(c.id, 'strata.processor.lease.')",
                Default::default(),
            )
            .await?;
        if leases_now.first().copied().unwrap_or(0) > 1 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    write(100, 200).await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while handled.lock().unwrap_or_else(|p| p.into_inner()).len() < 200 && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A scale-up's splits take a while (the service's take minutes; strata announces each
    // range it splits for --split-notice-ms first): wait for the three ranges 25,000 RU/s
    // call for, the workers still running.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut after = orders.feed_ranges().await?.len();
    while after < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        after = orders.feed_ranges().await?.len();
    }
    stop.notify_waiters();
    for w in workers {
        let _ = w.await;
    }

    let h = handled.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut per_worker: HashMap<&str, usize> = HashMap::new();
    for (_, (_, w)) in h.iter() {
        *per_worker.entry(w.as_str()).or_default() += 1;
    }
    let twice = h.values().filter(|(n, _)| *n > 1).count();
    println!("feed ranges: {before} before the split, {after} after");
    println!(
        "changes handled: {} of 200, {twice} more than once",
        h.len()
    );
    let mut workers: Vec<_> = per_worker.into_iter().collect();
    workers.sort();
    for (w, n) in workers {
        println!("  {w} handled {n}");
    }
    db.delete().await?;
    Ok(())
}
