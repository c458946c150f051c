//! `strata export --from CONN --out FILE.jsonl[.gz] [DB[/CONTAINER]]`.

use super::line::{Container, Item, Line};
use super::progress::Progress;
use super::{connect, strip_item, strip_resource};
use futures::TryStreamExt;
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use strata_sdk::{ContainerClient, QueryOptions, Throughput};

/// Export data and definitions as JSON Lines.
#[derive(clap::Args, Debug, Clone)]
pub struct ExportArgs {
    /// The source: a connection string (AccountEndpoint=...;AccountKey=...;) or an endpoint
    /// URL (with the emulator key). Default: the strata on this machine (STRATA_PORT or PORT).
    #[arg(long, default_value_t = String::new(), hide_default_value = true)]
    pub from: String,
    /// The file to write: `.jsonl`, or `.jsonl.gz` to compress.
    #[arg(long)]
    pub out: PathBuf,
    /// What to export: DB or DB/CONTAINER (default: every database).
    pub scope: Option<String>,
}

/// A writer into `path`, compressing when the export's own name (`out`, not the `.partial`
/// name it is written under) ends in `.gz`.
fn writer(path: &PathBuf, out: &std::path::Path) -> Result<Box<dyn Write>, String> {
    let f = std::fs::File::create(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let f = std::io::BufWriter::new(f);
    if out.extension().is_some_and(|e| e == "gz") {
        Ok(Box::new(flate2::write::GzEncoder::new(
            f,
            flate2::Compression::default(),
        )))
    } else {
        Ok(Box::new(f))
    }
}

fn put(out: &mut dyn Write, line: &Line) -> Result<usize, String> {
    let text = serde_json::to_string(line).map_err(|e| e.to_string())?;
    writeln!(out, "{text}").map_err(|e| format!("cannot write the export: {e}"))?;
    Ok(text.len() + 1)
}

async fn definition(db: &str, c: &ContainerClient) -> Result<Container, String> {
    let props = c.read().await.map_err(|e| e.to_string())?;
    let throughput = match c.read_throughput().await {
        Ok(Throughput::Manual(n)) => Some(json!({ "manual": n })),
        Ok(Throughput::Autoscale { max }) => Some(json!({ "autoscale": max })),
        Err(_) => None,
    };
    let scripts = c.scripts();
    let mut all = Vec::new();
    for (kind, list) in [
        ("sprocs", scripts.list_stored_procedures().await),
        ("triggers", scripts.list_triggers().await),
        ("udfs", scripts.list_user_defined_functions().await),
    ] {
        for s in list.map_err(|e| e.to_string())? {
            let mut v = strip_resource(serde_json::to_value(&s).map_err(|e| e.to_string())?);
            v["kind"] = Value::String(kind.into());
            all.push(v);
        }
    }
    Ok(Container {
        database: db.to_string(),
        definition: strip_resource(props.to_definition()),
        throughput,
        scripts: all,
    })
}

/// Runs an export; returns its summary. The file appears only once complete: it is written
/// under a `.partial` name and renamed at the end, so a failed export (a missing container,
/// a lost connection) leaves no truncated or empty file that looks like a backup.
pub async fn export(mut a: ExportArgs) -> Result<String, String> {
    if a.from.trim().is_empty() {
        a.from = super::local_endpoint();
    }
    let done = a.out.clone();
    let mut name = done.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    let partial = done.with_file_name(name);
    let outcome = write_export(&a, &partial).await;
    match &outcome {
        Ok(_) => std::fs::rename(&partial, &done)
            .map_err(|e| format!("cannot write {}: {e}", done.display()))?,
        Err(_) => {
            let _ = std::fs::remove_file(&partial);
        }
    }
    outcome.map(|line| format!("{line} written to {}", done.display()))
}

/// Writes the export into `path`; returns the summary's beginning.
async fn write_export(a: &ExportArgs, path: &PathBuf) -> Result<String, String> {
    super::reachable(&a.from).await?;
    let client = connect(&a.from)?;
    let (db_only, coll_only) = match a.scope.as_deref().map(|s| s.split_once('/')) {
        Some(Some((d, c))) => (Some(d.to_string()), Some(c.to_string())),
        Some(None) => (a.scope.clone(), None),
        None => (None, None),
    };
    let dbs: Vec<String> = match db_only {
        Some(d) => vec![d],
        None => client
            .list_databases()
            .await
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|d| d.id)
            .collect(),
    };
    let mut out = writer(path, &a.out)?;
    let mut progress = Progress::new("exported", None);
    let mut containers = 0;
    for db in dbs {
        let database = client.database(&db);
        let colls: Vec<String> = match &coll_only {
            Some(c) => vec![c.clone()],
            None => database
                .list_containers()
                .await
                .map_err(|e| e.to_string())?
                .into_iter()
                .map(|c| c.id)
                .collect(),
        };
        for coll in colls {
            let c = database.container(&coll);
            let def = definition(&db, &c).await?;
            put(&mut *out, &Line::Container(def))?;
            containers += 1;
            let count: Vec<u64> = c
                .query_all("SELECT VALUE COUNT(1) FROM c", QueryOptions::default())
                .await
                .map_err(|e| e.to_string())?;
            progress.set_total(progress.done() + count.first().copied().unwrap_or(0));
            let opts = QueryOptions {
                max_item_count: Some(1000),
                ..Default::default()
            };
            let mut pages = std::pin::pin!(c.query_items::<Value>("SELECT * FROM c", opts));
            while let Some(page) = pages.try_next().await.map_err(|e| e.to_string())? {
                let mut bytes = 0;
                let n = page.items.len() as u64;
                for item in page.items {
                    bytes += put(
                        &mut *out,
                        &Line::Item(Item {
                            database: db.clone(),
                            container: coll.clone(),
                            item: strip_item(item),
                        }),
                    )?;
                }
                progress.add(n, bytes as u64, 0);
            }
        }
    }
    out.flush()
        .map_err(|e| format!("cannot write the export: {e}"))?;
    drop(out);
    let line = progress.finish();
    Ok(format!("{line}; {containers} container(s)"))
}
