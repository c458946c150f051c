//! Database, container, create, read and query in a few lines.
//! Run `strata` (cargo run --release -p strata-server), then `cargo run --example quickstart`.

use serde::{Deserialize, Serialize};
use strata_sdk::{ContainerProperties, CosmosClient, PartitionKeyDefinition, EMULATOR_KEY};

#[derive(Debug, Serialize, Deserialize)]
struct Product {
    id: String,
    category: String,
    name: String,
    price: f64,
}

#[tokio::main]
async fn main() -> Result<(), strata_sdk::Error> {
    let client = CosmosClient::new(&strata_examples::endpoint(), EMULATOR_KEY)?;
    let db = client
        .create_database(&strata_examples::unique("quickstart"))
        .await?;
    let products = db
        .create_container(ContainerProperties::new(
            "products",
            PartitionKeyDefinition::new("/category"),
        ))
        .await?;
    for (id, name, price) in [
        ("1", "Bike", 499.0),
        ("2", "Helmet", 59.5),
        ("3", "Lamp", 19.9),
    ] {
        products
            .create_item(&Product {
                id: id.into(),
                category: "gear".into(),
                name: name.into(),
                price,
            })
            .await?;
    }
    let helmet = products.read_item::<Product>("2", "gear").await?;
    println!("read: {:?} ({} RU)", helmet.item, helmet.request_charge);
    let cheap: Vec<String> = products
        .query_all(
            "SELECT VALUE p.name FROM p WHERE p.price < 100 ORDER BY p.price",
            Default::default(),
        )
        .await?;
    println!("under 100: {cheap:?}");
    db.delete().await?;
    Ok(())
}
