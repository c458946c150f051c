//! `strata copy --from CONN --to CONN --source DB/C --dest DB/C [--partition-key /a,/b,/c]
//! [--fill /PATH=/OTHER|JSON]... [--follow] [--checkpoint FILE]`.
//!
//! Online: the source's change feed from the beginning is a snapshot of every item (its
//! latest version) followed by every later write, so the copy reads it per feed range (in
//! parallel), writes each page to the destination with bulk upserts, and stops once every
//! range is caught up — or keeps following (`--follow`) until interrupted, so an application
//! can switch over without losing writes. After each page the position of its range is saved
//! in a checkpoint file: an interrupted copy started again resumes there. At the end (without
//! `--follow`) both sides are compared: counts per source logical partition and a checksum of
//! every item's content. The latest-version feed carries no deletes: an item deleted in the
//! source while the copy runs stays in the destination (the verification reports it).

use super::connect;
use super::progress::Progress;
use super::strip_item;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use strata_sdk::{
    BulkOperation, ChangeFeedOptions, ChangeFeedStart, ContainerClient, ContainerProperties,
    PartitionKeyDefinition, QueryOptions,
};

/// Copy a container into another (another account, another partition key).
#[derive(clap::Args, Debug, Clone)]
pub struct CopyArgs {
    /// The source account (connection string, or endpoint URL with the emulator key).
    #[arg(long)]
    pub from: String,
    /// The destination account (defaults to the source).
    #[arg(long)]
    pub to: Option<String>,
    /// The source container, DB/CONTAINER.
    #[arg(long)]
    pub source: String,
    /// The destination container, DB/CONTAINER (created when missing).
    #[arg(long)]
    pub dest: String,
    /// Partition key paths of a destination to create, comma-separated (up to three: a
    /// hierarchical key). Default: the source's.
    #[arg(long)]
    pub partition_key: Option<String>,
    /// Fills a property items lack: `/SessionId=/id` copies another property's value,
    /// `/SessionId="none"` sets a JSON value. Repeatable.
    #[arg(long = "fill")]
    pub fill: Vec<String>,
    /// Keep following the source's changes after catching up, until interrupted.
    #[arg(long)]
    pub follow: bool,
    /// Where positions are saved (an interrupted copy resumes from it).
    #[arg(long, default_value = "strata-copy.checkpoint.json")]
    pub checkpoint: PathBuf,
}

fn split(what: &str, s: &str) -> Result<(String, String), String> {
    s.split_once('/')
        .map(|(d, c)| (d.to_string(), c.to_string()))
        .ok_or_else(|| format!("--{what} must be DB/CONTAINER, not '{s}'"))
}

/// A property rule of `--fill`.
#[derive(Debug, Clone)]
enum Fill {
    Path(Vec<String>, Vec<String>),
    Value(Vec<String>, Value),
}

fn segments(p: &str) -> Vec<String> {
    p.split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn parse_fill(s: &str) -> Result<Fill, String> {
    let (path, value) = s
        .split_once('=')
        .ok_or_else(|| format!("--fill '{s}' must be /PATH=/OTHER or /PATH=JSON"))?;
    let target = segments(path);
    if target.is_empty() {
        return Err(format!("--fill '{s}' names no property"));
    }
    if value.starts_with('/') {
        Ok(Fill::Path(target, segments(value)))
    } else {
        let v = serde_json::from_str(value)
            .map_err(|e| format!("--fill '{s}': the value is not JSON ({e})"))?;
        Ok(Fill::Value(target, v))
    }
}

fn get<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

fn set(v: &mut Value, path: &[String], value: Value) {
    let mut cur = v;
    for (i, k) in path.iter().enumerate() {
        let Some(m) = cur.as_object_mut() else { return };
        if i + 1 == path.len() {
            m.insert(k.clone(), value);
            return;
        }
        cur = m
            .entry(k.clone())
            .or_insert_with(|| Value::Object(Default::default()));
    }
}

/// An item as the destination gets it: without system properties, missing properties filled.
fn map(item: Value, fills: &[Fill]) -> Value {
    let mut item = strip_item(item);
    for f in fills {
        match f {
            Fill::Path(to, from) if get(&item, to).is_none() => {
                if let Some(v) = get(&item, from).cloned() {
                    set(&mut item, to, v);
                }
            }
            Fill::Value(to, v) if get(&item, to).is_none() => set(&mut item, to, v.clone()),
            _ => {}
        }
    }
    item
}

/// Source key + id → checksum of the mapped content, for verification.
async fn fingerprint(
    c: &ContainerClient,
    key_paths: &[String],
    fills: Option<&[Fill]>,
) -> Result<BTreeMap<(String, String), u64>, String> {
    use futures::TryStreamExt;
    let opts = QueryOptions {
        max_item_count: Some(1000),
        ..Default::default()
    };
    let mut pages = std::pin::pin!(c.query_items::<Value>("SELECT * FROM c", opts));
    let mut out = BTreeMap::new();
    while let Some(page) = pages.try_next().await.map_err(|e| e.to_string())? {
        for r in page.items {
            let key: Vec<Value> = key_paths
                .iter()
                .map(|p| get(&r, &segments(p)).cloned().unwrap_or(Value::Null))
                .collect();
            let id = r
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let content = match fills {
                Some(f) => map(r, f),
                None => strip_item(r),
            };
            let hash = xxhash_rust::xxh3::xxh3_64(
                strata_query::sql::merge::canonical(&content).as_bytes(),
            );
            out.insert((Value::Array(key).to_string(), id), hash);
        }
    }
    Ok(out)
}

/// Runs a copy; returns its summary.
pub async fn copy(a: CopyArgs) -> Result<String, String> {
    let fills = a
        .fill
        .iter()
        .map(|f| parse_fill(f))
        .collect::<Result<Vec<_>, _>>()?;
    let source_client = connect(&a.from)?;
    let dest_client = connect(a.to.as_deref().unwrap_or(&a.from))?;
    let (sdb, scoll) = split("source", &a.source)?;
    let (ddb, dcoll) = split("dest", &a.dest)?;
    let source = source_client.database(&sdb).container(&scoll);
    let sprops = source
        .read()
        .await
        .map_err(|e| format!("the source: {e}"))?;
    let source_paths = sprops.partition_key.paths().to_vec();
    let dest_db = dest_client
        .create_database_if_not_exists(&ddb)
        .await
        .map_err(|e| e.to_string())?;
    let dest = match dest_db.container(&dcoll).read().await {
        Ok(_) => dest_db.container(&dcoll),
        Err(e) if e.is_not_found() => {
            let mut props = sprops.clone();
            props.id = dcoll.clone();
            if let Some(pk) = &a.partition_key {
                let paths: Vec<&str> = pk.split(',').map(str::trim).collect();
                props.partition_key = if paths.len() == 1 {
                    PartitionKeyDefinition::new(paths[0])
                } else {
                    PartitionKeyDefinition::hierarchical(paths).map_err(|e| e.to_string())?
                };
            }
            dest_db
                .create_container(ContainerProperties {
                    rid: None,
                    etag: None,
                    ..props
                })
                .await
                .map_err(|e| format!("cannot create the destination: {e}"))?
        }
        Err(e) => return Err(format!("the destination: {e}")),
    };
    // Positions by feed range, from an interrupted run.
    let saved: HashMap<String, String> = std::fs::read(&a.checkpoint)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let resumed = !saved.is_empty();
    let checkpoint = Arc::new(Mutex::new(saved));
    let total: Vec<u64> = source
        .query_all("SELECT VALUE COUNT(1) FROM c", QueryOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    let progress = Arc::new(Mutex::new(Progress::new("copied", total.first().copied())));
    let ranges = source.feed_ranges().await.map_err(|e| e.to_string())?;
    let mut workers = Vec::new();
    for r in ranges {
        let key = format!("{}..{}", r.min, r.max);
        let start = checkpoint
            .lock()
            .map_err(|e| e.to_string())?
            .get(&key)
            .cloned();
        let (source, dest, fills) = (source.clone(), dest.clone(), fills.clone());
        let (checkpoint, progress, path, follow) = (
            Arc::clone(&checkpoint),
            Arc::clone(&progress),
            a.checkpoint.clone(),
            a.follow,
        );
        workers.push(tokio::spawn(async move {
            let mut feed = source.change_feed::<Value>(ChangeFeedOptions {
                start: ChangeFeedStart::Beginning,
                feed_range: Some(r),
                continuation: start,
                max_item_count: Some(500),
                ..Default::default()
            });
            loop {
                let page = feed.next_page().await.map_err(|e| e.to_string())?;
                if page.items.is_empty() {
                    if follow {
                        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                        continue;
                    }
                    return Ok::<_, String>(());
                }
                let items: Vec<Value> = page.items.into_iter().map(|i| map(i, &fills)).collect();
                let bytes: u64 = items.iter().map(|i| i.to_string().len() as u64).sum();
                let ops = items
                    .iter()
                    .map(BulkOperation::upsert)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| e.to_string())?;
                let results = dest
                    .execute_bulk(ops, Default::default())
                    .await
                    .map_err(|e| e.to_string())?;
                if let Some(bad) = results.iter().find(|x| x.status >= 300) {
                    return Err(format!(
                        "the destination refused an item ({}): {}; fix it (e.g. --fill a missing key) and run the copy again to resume",
                        bad.status,
                        bad.resource.as_ref().map(|v| v.to_string()).unwrap_or_default()
                    ));
                }
                {
                    // The ranges share one file: written whole, under the lock, through a
                    // temporary file renamed over it (a crash leaves the old or the new).
                    let mut c = checkpoint.lock().map_err(|e| e.to_string())?;
                    c.insert(key.clone(), feed.continuation());
                    let tmp = path.with_extension("tmp");
                    std::fs::write(&tmp, serde_json::to_vec(&*c).unwrap_or_default())
                        .and_then(|_| std::fs::rename(&tmp, &path))
                        .map_err(|e| {
                            format!("cannot save the checkpoint {}: {e}", path.display())
                        })?;
                }
                if let Ok(mut p) = progress.lock() {
                    p.add(results.len() as u64, bytes, 0);
                }
            }
        }));
    }
    for w in workers {
        w.await.map_err(|e| e.to_string())??;
    }
    let line = progress.lock().map(|p| p.finish()).unwrap_or_default();
    // Verification: every source item in the destination with the same content.
    let src = fingerprint(&source, &source_paths, Some(&fills)).await?;
    let dst = fingerprint(&dest, &source_paths, None).await?;
    let mut per_partition: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for (k, _) in src.keys() {
        per_partition.entry(k).or_default().0 += 1;
    }
    for (k, _) in dst.keys() {
        per_partition.entry(k).or_default().1 += 1;
    }
    let differing = per_partition.values().filter(|(s, d)| s != d).count();
    let changed = src.iter().filter(|(k, h)| dst.get(*k) != Some(*h)).count();
    let sum =
        |m: &BTreeMap<(String, String), u64>| m.values().fold(0u64, |a, h| a.wrapping_add(*h));
    let verdict = if differing == 0 && changed == 0 && src.len() == dst.len() {
        format!(
            "verified: {} items in {} source logical partitions, checksum {:016x} on both sides",
            src.len(),
            per_partition.len(),
            sum(&src)
        )
    } else {
        format!(
            "VERIFICATION FAILED: source {} items, destination {}; {differing} logical partitions differ in count, {changed} items missing or different",
            src.len(),
            dst.len()
        )
    };
    let ok = verdict.starts_with("verified");
    let summary = format!(
        "{line}{}; {} -> {}; {verdict}",
        if resumed { " (resumed)" } else { "" },
        a.source,
        a.dest
    );
    if ok {
        Ok(summary)
    } else {
        Err(summary)
    }
}
