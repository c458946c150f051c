//! Exponential backoff in action. Start strata with `--enforce-throughput`, then run this: a
//! burst of writes at a 400 RU/s container is throttled (429) and the SDK retries each write,
//! honouring `x-ms-retry-after-ms`; every write succeeds. Retries are logged (tracing).

use std::time::{Duration, Instant};
use strata_sdk::{
    ContainerProperties, CosmosClient, PartitionKeyDefinition, RetryOptions, Throughput,
    EMULATOR_KEY,
};

#[tokio::main]
async fn main() -> Result<(), strata_sdk::Error> {
    // Colour codes only for a terminal: piped into a file or CI log they are noise.
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter("strata_sdk=debug")
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .with_writer(std::io::stderr)
        .init();
    let client = CosmosClient::builder(&strata_examples::endpoint(), EMULATOR_KEY)
        .retry(RetryOptions {
            max_retries: 20,
            max_total_wait: Duration::from_secs(60),
            ..RetryOptions::default()
        })
        .build()?;
    let db = client
        .create_database(&strata_examples::unique("throttle"))
        .await?;
    let c = db
        .create_container_with_throughput(
            ContainerProperties::new("burst", PartitionKeyDefinition::new("/pk")),
            Throughput::Manual(400),
        )
        .await?;
    let started = Instant::now();
    let writes = 300;
    let mut ru = 0.0;
    for i in 0..writes {
        let r = c
            .create_item(
                &serde_json::json!({"id": format!("{i}"), "pk": "hot", "pad": "x".repeat(500)}),
            )
            .await?;
        ru += r.request_charge;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{writes} writes, {ru:.0} RU in {secs:.2} s = {:.0} RU/s against a 400 RU/s budget",
        ru / secs
    );
    if ru / secs > 600.0 {
        println!(
            "(no throttling happened: start strata with --enforce-throughput to see the backoff)"
        );
    }
    db.delete().await?;
    Ok(())
}
