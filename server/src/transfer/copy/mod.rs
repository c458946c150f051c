//! `strata copy --from CONN --to CONN --source DB/C --dest DB/C [--partition-key /a,/b,/c]
//! [--fill /PATH=/OTHER|JSON]... [--follow] [--checkpoint FILE]`.
//!
//! Online, per source feed range (in parallel): first the position "now" of the source's
//! all-versions-and-deletes feed is noted; then the latest-version feed from the beginning —
//! a snapshot of every item — is written to the destination with bulk upserts; then the
//! all-versions feed is replayed from the noted position, creates and replaces as upserts and
//! deletes as deletes, so every write made while the snapshot ran (deletes included) reaches
//! the destination in order. Each phase reads up to the source's end as it stood when the
//! phase began, so the copy stops even while the source keeps changing (or is the destination
//! itself under another name, reading back the copy's own writes); or it keeps following
//! (`--follow`) until interrupted, so an application can switch over without losing writes.
//! A source that keeps no history (no `changeFeedPolicy`) has no all-versions feed: then the
//! latest-version feed is read in bounded passes until one finds nothing new (or followed),
//! and deletes made during the copy are not carried over — the summary says so and the
//! verification shows them.
//!
//! After each page the position of its range is saved in a checkpoint file (written whole
//! and renamed over the old one): an interrupted copy started again resumes there. At the end
//! (without `--follow`) both sides are compared: counts per source logical partition and a
//! checksum of every item's content. The same engine runs server-side jobs
//! ([`super::jobs`]), reporting through the same [`Progress`].

mod checkpoint;
mod fill;
mod ranges;
mod verify;

use super::connect_with;
use super::progress::Progress;
pub use checkpoint::Belongs;
use checkpoint::Checkpoint;
use fill::{parse_fill, Fill};
use ranges::{copy_range, Ctx};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use strata_sdk::{ContainerProperties, PartitionKeyDefinition, QueryOptions};

/// Copy a container into another (another account, another partition key).
#[derive(clap::Args, Debug, Clone)]
pub struct CopyArgs {
    #[command(flatten)]
    pub spec: CopySpec,
    /// Where positions are saved: run again, the copy resumes from it, or after a finished
    /// copy carries over what changed since. Default: `strata-copy.DB.C--DB.C.checkpoint.json`
    /// in the current folder, one per pair of containers.
    #[arg(long)]
    pub checkpoint: Option<PathBuf>,
}

/// What to copy where: the command line's flags, and the body of a copy job.
#[derive(clap::Args, Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CopySpec {
    /// The source account (connection string, or endpoint URL with the emulator key).
    /// Default: the strata on this machine (STRATA_PORT or PORT); in a job, the server
    /// running it.
    #[arg(long, default_value_t = String::new(), hide_default_value = true)]
    #[serde(default)]
    pub from: String,
    /// The destination account (defaults to the source).
    #[arg(long)]
    #[serde(default)]
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
    #[serde(default)]
    pub partition_key: Option<String>,
    /// Fills a property items lack: `/SessionId=/id` copies another property's value,
    /// `/SessionId="none"` sets a JSON value. Repeatable.
    #[arg(long = "fill")]
    #[serde(default)]
    pub fill: Vec<String>,
    /// Keep following the source's changes after catching up, until interrupted.
    #[arg(long)]
    #[serde(default)]
    pub follow: bool,
    /// Source feed ranges copied at once: each page is read and written under one of these
    /// turns, so a container of many partitions does not flood the destination; followers
    /// wait for changes without holding one.
    #[arg(long, default_value_t = DEFAULT_PARALLEL, value_parser = clap::value_parser!(u16).range(1..=256))]
    #[serde(default = "default_parallel")]
    pub parallel: u16,
    /// Seconds one request may take, retries included, before the copy fails with the
    /// reason (a server that accepts connections but never answers).
    #[arg(long, default_value_t = DEFAULT_TIMEOUT, value_parser = clap::value_parser!(u32).range(1..=3600))]
    #[serde(default = "default_timeout")]
    pub timeout: u32,
}

const DEFAULT_TIMEOUT: u32 = super::OPERATION_TIMEOUT.as_secs() as u32;

fn default_timeout() -> u32 {
    DEFAULT_TIMEOUT
}

const DEFAULT_PARALLEL: u16 = 8;

fn default_parallel() -> u16 {
    DEFAULT_PARALLEL
}

/// The paths of `--partition-key /a,/b,/c`: one to three (`strata advise` takes candidate
/// keys the same way, so the command it prints is one copy accepts).
pub fn key_paths(text: &str) -> Result<Vec<String>, String> {
    let paths: Vec<String> = text.split(',').map(|p| p.trim().to_string()).collect();
    if paths.len() > 3 || paths.iter().any(|p| !p.starts_with('/') || p.len() < 2) {
        return Err(format!(
            "the partition key '{text}' must be one to three paths such as /TenantId,/UserId,/SessionId"
        ));
    }
    Ok(paths)
}

fn split(what: &str, s: &str) -> Result<(String, String), String> {
    match s.split_once('/') {
        Some((d, c)) if !d.is_empty() && !c.is_empty() && !c.contains('/') => {
            Ok((d.to_string(), c.to_string()))
        }
        _ => Err(format!("'{what}' must be DB/CONTAINER, not '{s}'")),
    }
}

/// A spec's parts, parsed: what `run` works from.
struct Checked {
    source: (String, String),
    dest: (String, String),
    fills: Vec<Fill>,
    /// The partition key of a destination to create, when one was asked for.
    key: Option<PartitionKeyDefinition>,
}

impl CopySpec {
    /// Checks the spec before anything is read or created (the job API answers 400 with the
    /// reason instead of starting a job bound to fail).
    pub fn validate(&self) -> Result<(), String> {
        self.checked().map(|_| ())
    }

    fn checked(&self) -> Result<Checked, String> {
        let fills = self
            .fill
            .iter()
            .map(|f| parse_fill(f))
            .collect::<Result<Vec<_>, _>>()?;
        let key = match &self.partition_key {
            None => None,
            Some(pk) => {
                let paths = key_paths(pk)?;
                Some(if paths.len() == 1 {
                    PartitionKeyDefinition::new(&paths[0])
                } else {
                    PartitionKeyDefinition::hierarchical(paths.iter().map(String::as_str))
                        .map_err(|e| e.to_string())?
                })
            }
        };
        let (source, dest) = (split("source", &self.source)?, split("dest", &self.dest)?);
        let to = self.to.as_deref().filter(|t| !t.trim().is_empty());
        if source == dest && account(to.unwrap_or(&self.from)) == account(&self.from) {
            return Err(format!(
                "the source and the destination are the same container ({}): a copy into itself would read back its own writes and never end",
                self.source
            ));
        }
        Ok(Checked {
            source,
            dest,
            fills,
            key,
        })
    }
}

/// Which account a connection string or endpoint names: its endpoint, lowercased, without a
/// trailing slash, with the loopback names made one (`localhost`, `127.0.0.1`, `[::1]`). An
/// empty one is the server a job runs on.
fn account(conn: &str) -> String {
    let endpoint = super::endpoint_of(conn)
        .trim_end_matches('/')
        .to_ascii_lowercase();
    ["localhost", "[::1]"]
        .iter()
        .fold(endpoint, |e, name| e.replace(name, "127.0.0.1"))
}

/// Runs a copy from the command line (progress on stderr); returns its summary.
pub async fn copy(mut a: CopyArgs) -> Result<String, String> {
    if a.spec.from.trim().is_empty() {
        a.spec.from = super::local_endpoint();
    }
    let progress = Arc::new(Mutex::new(Progress::new("copied", None)));
    let conns = [
        a.spec.from.as_str(),
        a.spec.to.as_deref().unwrap_or_default(),
    ];
    let path = a
        .checkpoint
        .clone()
        .unwrap_or_else(|| Checkpoint::default_path(&a.spec));
    run(&a.spec, &path, Belongs::of(&a.spec), progress)
        .await
        .map(|s| {
            format!(
                "{s}; positions kept in {} (run the same copy again to carry over later changes)",
                path.display()
            )
        })
        .map(|s| super::scrub(&s, &conns))
        .map_err(|e| super::scrub(&e, &conns))
}

/// Runs a copy, reporting through `progress`, saving positions in `checkpoint` (which must
/// be `copy`'s); returns its summary (an error when the verification fails).
pub async fn run(
    a: &CopySpec,
    checkpoint: &std::path::Path,
    copy: Belongs,
    progress: Arc<Mutex<Progress>>,
) -> Result<String, String> {
    let Checked {
        source: (sdb, scoll),
        dest: (ddb, dcoll),
        fills,
        key,
    } = a.checked()?;
    // Refused before anything is created when the file belongs to another copy.
    let checkpoint = Checkpoint::open(checkpoint, copy)?;
    let to = a.to.as_deref().filter(|t| !t.trim().is_empty());
    super::reachable(&a.from)
        .await
        .map_err(|e| format!("the source: {e}"))?;
    if let Some(to) = to {
        super::reachable(to)
            .await
            .map_err(|e| format!("the destination: {e}"))?;
    }
    let limit = std::time::Duration::from_secs(a.timeout.clamp(1, 3600).into());
    let source_client = connect_with(&a.from, limit)?;
    let dest_client = connect_with(to.unwrap_or(&a.from), limit)?;
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
    let (dest, dest_props) = match dest_db.container(&dcoll).read().await {
        Ok(p) => (dest_db.container(&dcoll), p),
        Err(e) if e.is_not_found() => {
            let mut props = sprops.clone();
            props.id = dcoll.clone();
            if let Some(k) = key {
                props.partition_key = k;
            }
            let props = ContainerProperties {
                rid: None,
                etag: None,
                ..props
            };
            let c = dest_db
                .create_container(props.clone())
                .await
                .map_err(|e| format!("cannot create the destination: {e}"))?;
            (c, props)
        }
        Err(e) => return Err(format!("the destination: {e}")),
    };
    let start = checkpoint.start();
    let total: Vec<u64> = source
        .query_all("SELECT VALUE COUNT(1) FROM c", QueryOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    if let Ok(mut p) = progress.lock() {
        if let Some(t) = total.first() {
            p.set_total(*t);
        }
        p.set_phase("copying");
    }
    let ctx = Arc::new(Ctx {
        source: source.clone(),
        dest: dest.clone(),
        source_def: sprops.partition_key.clone(),
        dest_def: dest_props.partition_key.clone(),
        fills: fills.clone(),
        follow: a.follow,
        checkpoint,
        progress: Arc::clone(&progress),
        lag: Mutex::new(Default::default()),
        turns: tokio::sync::Semaphore::new(usize::from(a.parallel.max(1))),
    });
    let ranges = source.feed_ranges().await.map_err(|e| e.to_string())?;
    // Dropping the set (a cancelled job) stops every worker.
    let mut workers = tokio::task::JoinSet::new();
    for r in ranges {
        workers.spawn(copy_range(Arc::clone(&ctx), r));
    }
    while let Some(w) = workers.join_next().await {
        w.map_err(|e| e.to_string())??;
    }
    let line = match progress.lock() {
        Ok(mut p) => {
            p.set_phase("verifying");
            p.finish()
        }
        Err(_) => String::new(),
    };
    let verdict = verify::compare(&source, &dest, &source_paths, &fills).await?;
    let note = if ctx.checkpoint.no_history() {
        "; the source keeps no change history (changeFeedPolicy), so deletes made during the copy were not carried over"
    } else {
        ""
    };
    let summary = format!(
        "{line}{start}; {} -> {}; {}{note}",
        a.source, a.dest, verdict.text
    );
    if let Ok(mut p) = progress.lock() {
        p.set_phase(if verdict.ok { "done" } else { "failed" });
    }
    if verdict.ok {
        ctx.checkpoint.finish()?;
        Ok(summary)
    } else {
        Err(summary)
    }
}
