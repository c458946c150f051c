//! The multi-tenant scenario of the hierarchical partition key documentation: events keyed by
//! `/TenantId` > `/UserId` > `/SessionId`, tenants of very different sizes, a point read, and
//! the five routing queries, each printed with its route, the physical partitions it visited,
//! its item count and request charge.

use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use strata_sdk::{
    ContainerProperties, CosmosClient, PartitionKeyBuilder, PartitionKeyDefinition, Query,
    QueryOptions, Throughput, EMULATOR_KEY,
};

#[derive(Debug, Serialize, Deserialize)]
struct Event {
    id: String,
    #[serde(rename = "TenantId")]
    tenant: String,
    #[serde(rename = "UserId")]
    user: String,
    #[serde(rename = "SessionId")]
    session: String,
    kind: String,
}

#[tokio::main]
async fn main() -> Result<(), strata_sdk::Error> {
    let client = CosmosClient::new(&strata_examples::endpoint(), EMULATOR_KEY)?;
    let db = client
        .create_database(&strata_examples::unique("multitenant"))
        .await?;
    // 24,000 RU/s: four physical partitions (one per 6,000 at creation), so routing is visible.
    let events = db
        .create_container_with_throughput(
            ContainerProperties::new(
                "events",
                PartitionKeyDefinition::hierarchical(["/TenantId", "/UserId", "/SessionId"])?,
            ),
            Throughput::Manual(24_000),
        )
        .await?;
    // Tenants of very different sizes (Zipf-like): Contoso is huge, the tail is small.
    let tenants = [
        ("Contoso", 40),
        ("Fabrikam", 12),
        ("Northwind", 6),
        ("Tailspin", 3),
        ("Wingtip", 2),
        ("Litware", 1),
    ];
    let mut n = 0;
    for (tenant, users) in tenants {
        for u in 0..users {
            for s in 0..4 {
                for e in 0..3 {
                    let ev = Event {
                        id: format!("{tenant}-{u}-{s}-{e}"),
                        tenant: tenant.into(),
                        user: format!("user{u}"),
                        session: format!("session{s}"),
                        kind: ["click", "view", "buy"][e % 3].into(),
                    };
                    events.create_item(&ev).await?;
                    n += 1;
                }
            }
        }
    }
    let ranges = events.read_partition_key_ranges().await?;
    println!(
        "loaded {n} events for {} tenants into {} physical partitions",
        tenants.len(),
        ranges.len()
    );

    let pk = PartitionKeyBuilder::new()
        .add("Fabrikam")
        .add("user3")
        .add("session1")
        .build();
    let r = events.read_item::<Event>("Fabrikam-3-1-0", pk).await?;
    println!(
        "point read (full key): {} ({} RU)",
        r.item.map(|e| e.kind).unwrap_or_default(),
        r.request_charge
    );

    let queries = [
        ("TenantId + UserId + SessionId", "SELECT * FROM c WHERE c.TenantId = 'Contoso' AND c.UserId = 'user7' AND c.SessionId = 'session2'"),
        ("TenantId + UserId", "SELECT * FROM c WHERE c.TenantId = 'Contoso' AND c.UserId = 'user7'"),
        ("TenantId", "SELECT * FROM c WHERE c.TenantId = 'Contoso'"),
        ("UserId alone", "SELECT * FROM c WHERE c.UserId = 'user1'"),
        ("SessionId alone", "SELECT * FROM c WHERE c.SessionId = 'session3'"),
    ];
    println!(
        "{:<32} {:<9} {:<14} {:>6} {:>9}",
        "query", "route", "partitions", "items", "RU"
    );
    for (label, sql) in queries {
        let mut pages =
            std::pin::pin!(events.query_items::<Event>(Query::new(sql), QueryOptions::default()));
        let (mut items, mut ru, mut route, mut parts) =
            (0, 0.0, String::new(), Vec::<String>::new());
        while let Some(page) = pages.try_next().await? {
            items += page.items.len();
            ru += page.request_charge;
            if let Some(r) = page.route {
                route = r.kind;
                for id in r.ranges {
                    if !parts.contains(&id) {
                        parts.push(id);
                    }
                }
            }
        }
        println!(
            "{label:<32} {route:<9} {:<14} {items:>6} {ru:>9.2}",
            parts.join(",")
        );
    }
    db.delete().await?;
    Ok(())
}
