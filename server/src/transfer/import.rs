//! `strata import --to CONN --in FILE.jsonl[.gz]`.

use super::connect;
use super::line::{Container, Line};
use super::progress::Progress;
use serde_json::Value;
use std::io::BufRead;
use std::path::PathBuf;
use strata_sdk::{
    BulkOperation, ContainerClient, ContainerProperties, CosmosClient, Script, Throughput,
};

/// Items per bulk call.
const BATCH: usize = 1000;
/// Failures described one by one (the rest are counted).
const SHOWN: u64 = 20;

/// Import an export file.
#[derive(clap::Args, Debug, Clone)]
pub struct ImportArgs {
    /// The destination: a connection string (AccountEndpoint=...;AccountKey=...;) or an
    /// endpoint URL (with the emulator key). Default: the strata on this machine
    /// (STRATA_PORT or PORT).
    #[arg(long, default_value_t = String::new(), hide_default_value = true)]
    pub to: String,
    /// The file written by `strata export` (`.jsonl` or `.jsonl.gz`).
    #[arg(long = "in")]
    pub input: PathBuf,
}

fn reader(path: &PathBuf) -> Result<Box<dyn BufRead>, String> {
    let f =
        std::fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mut f = std::io::BufReader::new(f);
    // gzip by its magic bytes, whatever the name.
    let gz = f
        .fill_buf()
        .map(|b| b.starts_with(&[0x1f, 0x8b]))
        .unwrap_or(false);
    if gz {
        Ok(Box::new(std::io::BufReader::new(
            flate2::bufread::GzDecoder::new(f),
        )))
    } else {
        Ok(Box::new(f))
    }
}

/// A container definition's partition key as one comparable line: kind, version and paths
/// (`Hash` and version 1 when not said, as the service reads a definition without them).
fn key_of(definition: &Value) -> String {
    let pk = &definition["partitionKey"];
    let paths: Vec<&str> = pk["paths"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    format!(
        "{} ({} v{})",
        paths.join(","),
        pk["kind"].as_str().unwrap_or("Hash"),
        pk["version"].as_u64().unwrap_or(1)
    )
}

/// Creates the container of a definition line (and its database, throughput and scripts)
/// unless it exists.
async fn prepare(client: &CosmosClient, c: &Container) -> Result<ContainerClient, String> {
    let db = client
        .create_database_if_not_exists(&c.database)
        .await
        .map_err(|e| e.to_string())?;
    let props = ContainerProperties::from_definition(&c.definition).map_err(|e| e.to_string())?;
    let id = props.id.clone();
    let throughput = c.throughput.as_ref().and_then(|t| {
        t.get("manual")
            .and_then(Value::as_u64)
            .map(|n| Throughput::Manual(n as u32))
            .or_else(|| {
                t.get("autoscale")
                    .and_then(Value::as_u64)
                    .map(|m| Throughput::Autoscale { max: m as u32 })
            })
    });
    let created = match throughput {
        Some(t) => db.create_container_with_throughput(props, t).await,
        None => db.create_container(props).await,
    };
    let container = match created {
        Ok(c) => c,
        Err(e) if e.is_conflict() => {
            let existing = db.container(&id);
            let def = existing
                .read()
                .await
                .map_err(|e| format!("cannot read container {}/{id}: {e}", c.database))?;
            let (theirs, ours) = (key_of(&def.to_definition()), key_of(&c.definition));
            if theirs != ours {
                return Err(format!(
                    "container {}/{id} exists with the partition key {theirs}, but the export's is {ours}: its items would be placed and read by another key. Import into a new container (rename it in the file), or delete this one first",
                    c.database
                ));
            }
            existing
        }
        Err(e) => return Err(format!("cannot create container {}/{id}: {e}", c.database)),
    };
    let scripts = container.scripts();
    for s in &c.scripts {
        let kind = s
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let script: Script = serde_json::from_value(s.clone()).map_err(|e| e.to_string())?;
        let done = match kind.as_str() {
            "sprocs" => scripts.upsert_stored_procedure(&script).await.map(|_| ()),
            "triggers" => match scripts.create_trigger(&script).await {
                Err(e) if e.is_conflict() => scripts.replace_trigger(&script).await.map(|_| ()),
                other => other.map(|_| ()),
            },
            "udfs" => match scripts.create_user_defined_function(&script).await {
                Err(e) if e.is_conflict() => scripts
                    .replace_user_defined_function(&script)
                    .await
                    .map(|_| ()),
                other => other.map(|_| ()),
            },
            other => return Err(format!("unknown script kind '{other}' in the export")),
        };
        done.map_err(|e| format!("cannot write {kind} '{}': {e}", script.id))?;
    }
    Ok(container)
}

/// Upserts a batch of items; counts failures and describes the first ones.
async fn load(
    c: &ContainerClient,
    items: Vec<Value>,
    progress: &mut Progress,
) -> Result<(), String> {
    let bytes: u64 = items.iter().map(|v| v.to_string().len() as u64).sum();
    let ids: Vec<String> = items
        .iter()
        .map(|v| {
            v.get("id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    let ops = items
        .iter()
        .map(BulkOperation::upsert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let results = c
        .execute_bulk(ops, Default::default())
        .await
        .map_err(|e| e.to_string())?;
    let mut failed = 0;
    for (r, id) in results.iter().zip(&ids) {
        if r.status >= 300 {
            if progress.failed() + failed < SHOWN {
                eprintln!(
                    "\nitem '{id}' of {}: status {}: {}",
                    c.id(),
                    r.status,
                    r.resource
                        .as_ref()
                        .map(|v| v.to_string())
                        .unwrap_or_default()
                );
            }
            failed += 1;
        }
    }
    progress.add(results.len() as u64 - failed, bytes, failed);
    Ok(())
}

/// Runs an import; returns its summary.
pub async fn import(mut a: ImportArgs) -> Result<String, String> {
    if a.to.trim().is_empty() {
        a.to = super::local_endpoint();
    }
    let input = reader(&a.input)?;
    super::reachable(&a.to).await?;
    let client = connect(&a.to)?;
    let mut progress = Progress::new("imported", None);
    let mut current: Option<ContainerClient> = None;
    let mut pending: Vec<Value> = Vec::new();
    let mut containers = 0;
    for (n, text) in input.lines().enumerate() {
        let text = text.map_err(|e| format!("cannot read {}: {e}", a.input.display()))?;
        if text.trim().is_empty() {
            continue;
        }
        let line: Line = serde_json::from_str(&text).map_err(|e| {
            format!(
                "line {} of {} is not an export line: {e}",
                n + 1,
                a.input.display()
            )
        })?;
        match line {
            Line::Container(c) => {
                if let Some(cur) = &current {
                    load(cur, std::mem::take(&mut pending), &mut progress).await?;
                }
                current = Some(prepare(&client, &c).await?);
                containers += 1;
            }
            Line::Item(i) => {
                let Some(cur) = &current else {
                    return Err(format!(
                        "line {} of {}: an item before any container definition",
                        n + 1,
                        a.input.display()
                    ));
                };
                pending.push(i.item);
                if pending.len() >= BATCH {
                    load(cur, std::mem::take(&mut pending), &mut progress).await?;
                }
            }
        }
    }
    if let Some(cur) = &current {
        load(cur, pending, &mut progress).await?;
    }
    let line = progress.finish();
    Ok(format!("{line}; {containers} container(s)"))
}
