//! A materialized view kept current from the change feed: per-tenant counters in a second
//! container, updated from every change to the events container (the eventually consistent
//! cross-partition pattern).

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use strata_sdk::{
    ChangeFeedOptions, ContainerProperties, CosmosClient, ItemOptions, PartitionKeyDefinition,
    EMULATOR_KEY,
};

#[derive(Debug, Serialize, Deserialize)]
struct Event {
    id: String,
    tenant: String,
    amount: i64,
}

#[derive(Debug, Serialize, Deserialize)]
struct TenantTotals {
    id: String,
    tenant: String,
    events: i64,
    amount: i64,
}

#[tokio::main]
async fn main() -> Result<(), strata_sdk::Error> {
    let client = CosmosClient::new(&strata_examples::endpoint(), EMULATOR_KEY)?;
    let db = client
        .create_database(&strata_examples::unique("views"))
        .await?;
    let events = db
        .create_container(ContainerProperties::new(
            "events",
            PartitionKeyDefinition::new("/tenant"),
        ))
        .await?;
    let view = db
        .create_container(ContainerProperties::new(
            "totals",
            PartitionKeyDefinition::new("/tenant"),
        ))
        .await?;
    let mut feed = events.change_feed::<Event>(ChangeFeedOptions::default());
    let mut applied: HashMap<String, i64> = HashMap::new();
    for round in 0..3 {
        for i in 0..20 {
            let tenant = ["acme", "globex", "initech"][i % 3];
            let e = Event {
                id: format!("r{round}-{i}"),
                tenant: tenant.into(),
                amount: (i as i64 + 1) * 10,
            };
            events.create_item(&e).await?;
        }
        // Drain the feed and fold each new event into its tenant's totals.
        loop {
            let page = feed.next_page().await?;
            if page.items.is_empty() {
                break;
            }
            for e in page.items {
                let mut t = match view
                    .read_item::<TenantTotals>(&e.tenant, e.tenant.as_str())
                    .await
                {
                    Ok(r) => r.item.expect("body"),
                    Err(err) if err.is_not_found() => TenantTotals {
                        id: e.tenant.clone(),
                        tenant: e.tenant.clone(),
                        events: 0,
                        amount: 0,
                    },
                    Err(err) => return Err(err),
                };
                t.events += 1;
                t.amount += e.amount;
                view.upsert_item(&t, ItemOptions::default()).await?;
                *applied.entry(e.tenant).or_default() += 1;
            }
        }
        println!(
            "round {round}: view caught up ({} changes applied so far)",
            applied.values().sum::<i64>()
        );
    }
    let totals: Vec<TenantTotals> = view
        .query_all("SELECT * FROM c ORDER BY c.tenant", Default::default())
        .await?;
    for t in &totals {
        println!("{:<8} events={:<3} amount={}", t.tenant, t.events, t.amount);
    }
    db.delete().await?;
    Ok(())
}
