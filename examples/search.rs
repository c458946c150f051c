//! Vector, full-text and hybrid search over one container: a vector embedding policy and a
//! diskANN index on `/embedding`, a full-text policy and index on `/text`, then the three
//! kinds of query — nearest by `VectorDistance`, ranked by `FullTextScore` (BM25), and both
//! fused with `RRF`.
//! Run `strata` (cargo run --release -p strata-server), then `cargo run --example search`.

use serde::{Deserialize, Serialize};
use serde_json::json;
use strata_sdk::{ContainerProperties, CosmosClient, PartitionKeyDefinition, Query, EMULATOR_KEY};

#[derive(Debug, Serialize, Deserialize)]
struct Doc {
    id: String,
    topic: String,
    text: String,
    embedding: Vec<f32>,
}

/// A toy embedding: how much a text says about bikes, lamps and tea (a real application
/// would ask a model).
fn embed(text: &str) -> Vec<f32> {
    let t = text.to_lowercase();
    let count = |words: &[&str]| words.iter().filter(|w| t.contains(**w)).count() as f32;
    vec![
        count(&["bike", "wheel", "ride", "helmet"]),
        count(&["lamp", "light", "bright", "bulb"]),
        count(&["tea", "cup", "kettle", "leaf"]),
    ]
}

#[tokio::main]
async fn main() -> Result<(), strata_sdk::Error> {
    let client = CosmosClient::new(&strata_examples::endpoint(), EMULATOR_KEY)?;
    let db = client
        .create_database(&strata_examples::unique("search"))
        .await?;
    let mut props = ContainerProperties::new("docs", PartitionKeyDefinition::new("/topic"));
    props.indexing_policy = Some(json!({
        "vectorIndexes": [{"path": "/embedding", "type": "diskANN"}],
        "fullTextIndexes": [{"path": "/text"}]
    }));
    props.other.insert(
        "vectorEmbeddingPolicy".into(),
        json!({"vectorEmbeddings": [{"path": "/embedding", "dataType": "float32",
            "dimensions": 3, "distanceFunction": "cosine"}]}),
    );
    props.other.insert(
        "fullTextPolicy".into(),
        json!({"defaultLanguage": "en-US",
            "fullTextPaths": [{"path": "/text", "language": "en-US"}]}),
    );
    let docs = db.create_container(props).await?;
    let texts = [
        (
            "1",
            "gear",
            "A helmet for every ride: light, bright and safe on the bike",
        ),
        ("2", "gear", "Spare wheel and tyre for a city bike"),
        (
            "3",
            "home",
            "A desk lamp with a warm bulb, bright enough to read by",
        ),
        (
            "4",
            "home",
            "A kettle and a cup: loose leaf tea, brewed slowly",
        ),
        ("5", "home", "Tea light candles for a cosy evening"),
    ];
    for (id, topic, text) in texts {
        docs.create_item(&Doc {
            id: id.into(),
            topic: topic.into(),
            text: text.into(),
            embedding: embed(text),
        })
        .await?;
    }

    // Nearest by meaning: the query text's embedding against each document's.
    let nearest: Vec<String> = docs
        .query_all(
            Query::new("SELECT TOP 2 VALUE c.id FROM c ORDER BY VectorDistance(c.embedding, @q)")
                .param("@q", embed("something to ride")),
            Default::default(),
        )
        .await?;
    println!("nearest to 'something to ride': {nearest:?}");

    // Ranked by words: BM25 over the full-text index.
    let ranked: Vec<String> = docs
        .query_all(
            "SELECT TOP 2 VALUE c.id FROM c WHERE FullTextContainsAny(c.text, 'bright', 'tea') ORDER BY RANK FullTextScore(c.text, 'bright', 'tea')",
            Default::default(),
        )
        .await?;
    println!("ranked for 'bright tea': {ranked:?}");

    // Hybrid: the two rankings fused (reciprocal rank fusion).
    let fused: Vec<String> = docs
        .query_all(
            Query::new("SELECT TOP 3 VALUE c.id FROM c ORDER BY RANK RRF(VectorDistance(c.embedding, @q), FullTextScore(c.text, 'tea'))")
                .param("@q", embed("a cup of tea")),
            Default::default(),
        )
        .await?;
    println!("hybrid for 'a cup of tea': {fused:?}");
    db.delete().await?;
    Ok(())
}
