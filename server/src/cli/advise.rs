//! `strata advise [--from CONN] DB/CONTAINER --key /a,/b,/c [--key /x …] [--queries FILE]
//! [--throughput RU] [--growth N] [--sample N] [--json]`: reads the container's items through
//! the Cosmos protocol (any endpoint: strata, the official emulator, the service) — the
//! latest-version change feed of each feed range, so the reads are not queries and do not
//! enter the sample — and the query sample (strata's `/_strata/…/queries`, or a file), then
//! prints the advice.

use crate::advise::advice::{definition, parse_key, share, Advisor, Source};
use crate::advise::model::Settings;
use crate::advise::sample::{self, ContainerSample, Shape};
use crate::transfer::progress::Progress;
use serde_json::Value;
use std::path::PathBuf;
use strata_sdk::{ChangeFeedOptions, ChangeFeedStart, ContainerClient, Throughput};

/// Measure candidate partition keys on a container's items and queries.
#[derive(clap::Args, Debug, Clone)]
pub struct AdviseArgs {
    /// The container, DB/CONTAINER.
    pub target: String,
    /// The account (connection string, or endpoint URL with the emulator key). Default: the
    /// strata on this machine (STRATA_PORT or PORT, STRATA_TLS or PROTOCOL).
    #[arg(long, env = "STRATA_ENDPOINT")]
    pub from: Option<String>,
    /// A candidate key, comma-separated paths (up to three). Repeatable; the current key is
    /// always measured too.
    #[arg(long = "key", required = true)]
    pub keys: Vec<String>,
    /// The queries to replay: a file exported from `/_strata/containers/DB/C/queries`, or one
    /// query per line. Default: the server's own sample (strata only).
    #[arg(long)]
    pub queries: Option<PathBuf>,
    /// Provisioned RU/s to size physical partitions for (default: the container's).
    #[arg(long)]
    pub throughput: Option<u64>,
    /// Report sizes at this multiple of today's data too.
    #[arg(long, default_value_t = 2.0)]
    pub growth: f64,
    /// Writes within this many seconds count as recent (write heat).
    #[arg(long, default_value_t = 3600, value_name = "SECONDS")]
    pub window: u64,
    /// Read at most this many items (spread over the feed ranges, each from its start) and
    /// scale sizes and counts up; default: every item.
    #[arg(long, value_name = "ITEMS")]
    pub sample: Option<u64>,
    /// Split size of a physical partition (default: the server's, 50GB on the service).
    #[arg(long, value_parser = super::parse_size)]
    pub split_bytes: Option<u64>,
    /// Size limit of a logical partition (default: the server's, 20GB on the service).
    #[arg(long, value_parser = super::parse_size)]
    pub logical_limit: Option<u64>,
    /// Print the advice as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs the advisor and returns what to print.
pub async fn advise(a: AdviseArgs) -> Result<String, String> {
    let (db, coll) = a
        .target
        .split_once('/')
        .filter(|(d, c)| !d.is_empty() && !c.is_empty() && !c.contains('/'))
        .ok_or_else(|| format!("the container must be DB/CONTAINER, not '{}'", a.target))?;
    if !(a.growth >= 1.0 && a.growth.is_finite()) {
        return Err("--growth must be a number of at least 1".into());
    }
    let candidates = a
        .keys
        .iter()
        .map(|k| parse_key(k).and_then(|p| definition(&p)))
        .collect::<Result<Vec<_>, _>>()?;
    let (_, client) = crate::transfer::connect_checked(a.from.as_deref()).await?;
    let container = client.database(db).container(coll);
    let props = container
        .read()
        .await
        .map_err(|e| format!("{db}/{coll}: {e}"))?;
    let current =
        strata_query::pk::PartitionKeyDefinition::from_json(&props.partition_key.to_json())
            .map_err(|e| e.to_string())?;
    // strata's partitions view gives its limits and item count; other servers have none.
    let view = container.strata_partitions().await.ok();
    let num = |k: &str| view.as_ref().and_then(|v| v[k].as_u64());
    let total = match &view {
        Some(v) => v["partitions"]
            .as_array()
            .map(|p| p.iter().filter_map(|x| x["itemCount"].as_u64()).sum()),
        None => container
            .query_all::<u64>("SELECT VALUE COUNT(1) FROM c", Default::default())
            .await
            .ok()
            .and_then(|v| v.first().copied()),
    };
    let limit = a.sample.unwrap_or(u64::MAX).max(1);
    let throughput = match a.throughput {
        Some(t) => t,
        None => match container.read_throughput().await {
            Ok(Throughput::Manual(t)) => u64::from(t),
            Ok(Throughput::Autoscale { max }) => u64::from(max),
            Err(_) => 400,
        },
    };
    let settings = Settings {
        throughput,
        growth: a.growth,
        split_bytes: a
            .split_bytes
            .or_else(|| num("splitThresholdBytes"))
            .unwrap_or(50 << 30),
        logical_limit: a
            .logical_limit
            .or_else(|| num("logicalPartitionLimitBytes"))
            .unwrap_or(20 << 30),
        max_partitions: num("maxPartitions")
            .map_or(crate::store::container::DEFAULT_MAX_PARTITIONS, |n| {
                n as u32
            }),
        window_secs: a.window.max(1),
        now: crate::store::catalog::now_secs(),
        scale: 1.0,
    };
    let shapes = match &a.queries {
        Some(path) => read_queries(path)?,
        None => match container.strata_queries().await {
            Ok(v) => serde_json::from_value::<ContainerSample>(v)
                .map(|s| s.queries)
                .unwrap_or_default(),
            Err(_) => Vec::new(),
        },
    };
    let mut advisor = Advisor::new(current, candidates, settings);
    read_items(&container, limit, total, &mut advisor).await?;
    if let Some(t) = total {
        advisor.settings.scale = (t as f64 / advisor.items().max(1) as f64).max(1.0);
    }
    let advice = advisor.finish(
        &shapes,
        Source {
            database: db.to_string(),
            container: coll.to_string(),
            from: a.from.clone().unwrap_or_default(),
            items_total: total,
        },
    );
    if a.json {
        serde_json::to_string_pretty(&advice).map_err(|e| e.to_string())
    } else {
        Ok(crate::advise::report::render(&advice))
    }
}

/// Reads up to `limit` items, each feed range giving its share from its start.
async fn read_items(
    c: &ContainerClient,
    limit: u64,
    total: Option<u64>,
    a: &mut Advisor,
) -> Result<(), String> {
    let ranges = c.feed_ranges().await.map_err(|e| e.to_string())?;
    let count = ranges.len();
    let mut progress = Progress::new("items read", total.map(|t| t.min(limit)));
    progress.set_phase("reading");
    for (k, r) in ranges.into_iter().enumerate() {
        let per_range = share(limit, count, k);
        let mut feed = c.change_feed::<Value>(ChangeFeedOptions {
            start: ChangeFeedStart::Beginning,
            feed_range: Some(r),
            max_item_count: Some(1000),
            ..Default::default()
        });
        feed.pin_end().await.map_err(|e| e.to_string())?;
        let mut taken = 0u64;
        while taken < per_range {
            let page = feed.next_page().await.map_err(|e| e.to_string())?;
            if page.items.is_empty() {
                break;
            }
            let n = (page.items.len() as u64).min(per_range - taken);
            for doc in page.items.iter().take(n as usize) {
                a.add(doc);
            }
            taken += n;
            progress.add(n, 0, 0);
        }
    }
    eprintln!("{}", progress.finish());
    Ok(())
}

/// A query file: the sample's export, or one query per line (each run once).
fn read_queries(path: &PathBuf) -> Result<Vec<Shape>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if let Ok(s) = serde_json::from_str::<ContainerSample>(&text) {
        return Ok(s.queries);
    }
    let mut shapes: Vec<Shape> = Vec::new();
    for line in text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("--"))
    {
        let Some((shape, values)) = strata_query::sql::normalize::shape(line) else {
            return Err(format!("{}: not a query: {line}", path.display()));
        };
        let example = sample::Example {
            parameters: values
                .into_iter()
                .map(|(n, v)| serde_json::json!({"name": format!("@{n}"), "value": v}))
                .collect(),
            partition_key: None,
            elided: false,
        };
        match shapes.iter_mut().find(|s| s.text == shape) {
            Some(s) => {
                s.count += 1.0;
                s.request_charge += 2.3;
                s.partitions += 1.0;
                if s.examples.len() < sample::MAX_EXAMPLES {
                    s.examples.push(example);
                }
            }
            None => shapes.push(Shape {
                text: shape,
                partition_key_header: false,
                count: 1.0,
                // Unknown cost: as if each read one partition at the fixed charge.
                request_charge: 2.3,
                partitions: 1.0,
                route: String::new(),
                examples: vec![example],
                last_seen: 0,
            }),
        }
    }
    Ok(shapes)
}
