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

use super::connect_with;
use super::progress::Progress;
use super::strip_item;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use strata_sdk::{
    BulkOperation, ChangeFeedMode, ChangeFeedOptions, ChangeFeedReader, ChangeFeedStart,
    ContainerClient, ContainerProperties, FeedRange, PartitionKey, PartitionKeyDefinition,
    QueryOptions,
};

/// Copy a container into another (another account, another partition key).
#[derive(clap::Args, Debug, Clone)]
pub struct CopyArgs {
    #[command(flatten)]
    pub spec: CopySpec,
    /// Where positions are saved (an interrupted copy resumes from it).
    #[arg(long, default_value = "strata-copy.checkpoint.json")]
    pub checkpoint: PathBuf,
}

/// What to copy where: the command line's flags, and the body of a copy job.
#[derive(clap::Args, Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CopySpec {
    /// The source account (connection string, or endpoint URL with the emulator key).
    #[arg(long)]
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
                let paths: Vec<&str> = pk.split(',').map(str::trim).collect();
                if paths.is_empty()
                    || paths.len() > 3
                    || paths.iter().any(|p| !p.starts_with('/') || p.len() < 2)
                {
                    return Err(format!(
                        "the partition key '{pk}' must be one to three paths such as /TenantId,/UserId,/SessionId"
                    ));
                }
                Some(if paths.len() == 1 {
                    PartitionKeyDefinition::new(paths[0])
                } else {
                    PartitionKeyDefinition::hierarchical(paths).map_err(|e| e.to_string())?
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
    let conn = conn.trim();
    let endpoint = conn
        .split(';')
        .find_map(|p| {
            p.split_once('=')
                .filter(|(k, _)| k.trim().eq_ignore_ascii_case("accountendpoint"))
                .map(|(_, v)| v)
        })
        .unwrap_or(conn)
        .trim()
        .trim_end_matches('/')
        .to_ascii_lowercase();
    ["localhost", "[::1]"]
        .iter()
        .fold(endpoint, |e, name| e.replace(name, "127.0.0.1"))
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

/// Where one source feed range stands; saved after every page.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RangeState {
    /// Position in the latest-version feed (the snapshot).
    snapshot: Option<String>,
    snapshot_done: bool,
    /// Position in the all-versions-and-deletes feed, noted before the snapshot began.
    history: Option<String>,
    /// The source keeps no history: follow the latest-version feed instead.
    no_history: bool,
}

/// Everything the range workers share.
struct Ctx {
    source: ContainerClient,
    dest: ContainerClient,
    source_def: PartitionKeyDefinition,
    dest_def: PartitionKeyDefinition,
    fills: Vec<Fill>,
    follow: bool,
    path: PathBuf,
    checkpoint: Mutex<HashMap<String, RangeState>>,
    progress: Arc<Mutex<Progress>>,
    /// Changes behind, per range, while following.
    lag: Mutex<HashMap<String, u64>>,
    /// Turns: how many ranges read and write at once.
    turns: tokio::sync::Semaphore,
}

/// Pages per feed request.
const PAGE: u32 = 500;
/// How long a caught-up follower waits before asking again.
const POLL: std::time::Duration = std::time::Duration::from_millis(500);

impl Ctx {
    /// Waits for a turn to read and write a page.
    async fn turn(&self) -> Result<tokio::sync::SemaphorePermit<'_>, String> {
        self.turns.acquire().await.map_err(|e| e.to_string())
    }

    fn state(&self, key: &str) -> Result<RangeState, String> {
        let c = self.checkpoint.lock().map_err(|e| e.to_string())?;
        Ok(c.get(key).cloned().unwrap_or_default())
    }

    /// Saves one range's state: the ranges share one file, written whole under the lock
    /// through a temporary file renamed over it (a crash leaves the old or the new).
    fn save(&self, key: &str, st: &RangeState) -> Result<(), String> {
        let mut c = self.checkpoint.lock().map_err(|e| e.to_string())?;
        c.insert(key.to_string(), st.clone());
        let tmp = self.path.with_extension("tmp");
        let bytes = serde_json::to_vec(&*c).map_err(|e| e.to_string())?;
        std::fs::write(&tmp, bytes)
            .and_then(|_| std::fs::rename(&tmp, &self.path))
            .map_err(|e| format!("cannot save the checkpoint {}: {e}", self.path.display()))
    }

    fn progress(&self, f: impl FnOnce(&mut Progress)) {
        if let Ok(mut p) = self.progress.lock() {
            f(&mut p);
        }
    }

    /// Records a range's lag and shows the sum.
    fn set_lag(&self, key: &str, lag: u64) {
        let total = match self.lag.lock() {
            Ok(mut m) => {
                m.insert(key.to_string(), lag);
                m.values().sum()
            }
            Err(_) => return,
        };
        self.progress(|p| p.set_lag(total));
    }

    /// Waits for new changes while following: the range is caught up.
    async fn idle(&self, key: &str) {
        self.set_lag(key, 0);
        self.progress(|p| {
            if p.phase() != "following" {
                p.set_phase("following")
            }
        });
        tokio::time::sleep(POLL).await;
    }

    /// Writes a page of operations to the destination with bulk; a delete of an item that is
    /// not there is fine.
    async fn write(&self, ops: Vec<BulkOperation>, upserts: u64, bytes: u64) -> Result<(), String> {
        let deletes = ops.len() as u64 - upserts;
        let results = self
            .dest
            .execute_bulk(ops, Default::default())
            .await
            .map_err(|e| e.to_string())?;
        if let Some(bad) = results.iter().find(|x| x.status >= 300 && x.status != 404) {
            return Err(format!(
                "the destination refused an item ({}): {}; fix it (e.g. --fill a missing key) and run the copy again to resume",
                bad.status,
                bad.resource.as_ref().map(|v| v.to_string()).unwrap_or_default()
            ));
        }
        self.progress(|p| {
            p.add(upserts, bytes, 0);
            p.add_deleted(deletes);
        });
        Ok(())
    }

    async fn upsert_all(&self, items: Vec<Value>) -> Result<(), String> {
        let items: Vec<Value> = items.into_iter().map(|i| map(i, &self.fills)).collect();
        self.upsert(items).await
    }

    /// Upserts the items the destination does not already hold as they are.
    async fn upsert_changed(&self, items: Vec<Value>) -> Result<(), String> {
        let items: Vec<Value> = items.into_iter().map(|i| map(i, &self.fills)).collect();
        let keys: Vec<(String, PartitionKey)> = items
            .iter()
            .map(|i| {
                let id = i["id"].as_str().unwrap_or_default().to_string();
                (id, self.dest_def.key_of(i))
            })
            .collect();
        let held: Vec<Value> = self
            .dest
            .read_many(&keys)
            .await
            .map_err(|e| format!("the destination: {e}"))?;
        let held: HashMap<(String, String), Value> = held
            .into_iter()
            .map(|d| {
                let id = d["id"].as_str().unwrap_or_default().to_string();
                ((id, self.dest_def.key_of(&d).to_header()), strip_item(d))
            })
            .collect();
        let changed = items
            .into_iter()
            .zip(&keys)
            .filter(|(item, (id, k))| held.get(&(id.clone(), k.to_header())) != Some(item))
            .map(|(item, _)| item)
            .collect();
        self.upsert(changed).await
    }

    async fn upsert(&self, items: Vec<Value>) -> Result<(), String> {
        if items.is_empty() {
            return Ok(());
        }
        let bytes: u64 = items.iter().map(|i| i.to_string().len() as u64).sum();
        let ops = items
            .iter()
            .map(BulkOperation::upsert)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        self.write(ops, items.len() as u64, bytes).await
    }

    /// A deleted item's source key from the change's metadata, whose `partitionKey` names
    /// each value by its path's last segment: the values put back in place in an otherwise
    /// empty item (a missing one stays missing: an undefined key component), and in order.
    fn deleted_key_shape(&self, meta: &Value) -> (Value, Vec<Value>) {
        let mut shape = Value::Object(Default::default());
        let mut values = Vec::new();
        for p in self.source_def.paths() {
            let segs = segments(p);
            let v = segs
                .last()
                .and_then(|name| meta["partitionKey"].get(name.as_str()));
            if let Some(v) = v {
                set(&mut shape, &segs, v.clone());
            }
            values.push(v.cloned().unwrap_or(Value::Null));
        }
        (shape, values)
    }

    /// The destination keys of a source item deleted as `change` describes (several when the
    /// destination key is not derived from the source's and several items match).
    async fn dest_keys_of_deleted(&self, change: &Value) -> Result<Vec<PartitionKey>, String> {
        let meta = &change["metadata"];
        if let Some(prev) = change.get("previous").filter(|p| p.is_object()) {
            return Ok(vec![self.dest_def.key_of(&map(prev.clone(), &self.fills))]);
        }
        let (shape, values) = self.deleted_key_shape(meta);
        if self.dest_def.paths() == self.source_def.paths() {
            return Ok(vec![self.source_def.key_of(&shape)]);
        }
        // Find the copy by id and the source key's values.
        let id = meta["id"].as_str().unwrap_or_default();
        let mut sql = String::from("SELECT * FROM c WHERE c.id = @id");
        let mut params = vec![("@id".to_string(), Value::from(id))];
        for (i, (p, v)) in self.source_def.paths().iter().zip(&values).enumerate() {
            let path: String = segments(p)
                .iter()
                .map(|s| format!("[{}]", Value::from(s.as_str())))
                .collect();
            sql.push_str(&format!(" AND c{path} = @k{i}"));
            params.push((format!("@k{i}"), v.clone()));
        }
        let mut q = strata_sdk::Query::new(sql);
        for (n, v) in params {
            q = q.param(&n, v);
        }
        let found: Vec<Value> = self
            .dest
            .query_all(q, QueryOptions::default())
            .await
            .map_err(|e| e.to_string())?;
        Ok(found.iter().map(|d| self.dest_def.key_of(d)).collect())
    }

    /// Applies a page of the all-versions feed: the last change of each item wins (the page
    /// is in order), creates and replaces as upserts, deletes as deletes.
    async fn apply(&self, changes: Vec<Value>) -> Result<(), String> {
        let mut last: Vec<Value> = Vec::new();
        let mut at: HashMap<(String, String), usize> = HashMap::new();
        for ch in changes {
            let meta = &ch["metadata"];
            let deleted = meta["operationType"] == "delete";
            let id = match deleted {
                true => meta["id"].as_str(),
                false => ch["current"]["id"].as_str(),
            }
            .unwrap_or_default()
            .to_string();
            // One spelling of the source key for both kinds, so an item deleted and created
            // again within the page is one operation: a bulk call may run two operations on
            // one partition in parallel batches, out of order.
            let key = match deleted {
                true => self.source_def.key_of(&self.deleted_key_shape(meta).0),
                false => self.source_def.key_of(&ch["current"]),
            }
            .to_header();
            match at.get(&(key.clone(), id.clone())) {
                Some(&i) => last[i] = ch,
                None => {
                    at.insert((key, id), last.len());
                    last.push(ch);
                }
            }
        }
        let (mut ops, mut upserts, mut bytes) = (Vec::new(), 0u64, 0u64);
        for ch in last {
            if ch["metadata"]["operationType"] == "delete" {
                let id = ch["metadata"]["id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                for k in self.dest_keys_of_deleted(&ch).await? {
                    ops.push(BulkOperation::delete(&id, k));
                }
            } else {
                let item = map(ch["current"].clone(), &self.fills);
                bytes += item.to_string().len() as u64;
                upserts += 1;
                ops.push(BulkOperation::upsert(&item).map_err(|e| e.to_string())?);
            }
        }
        if ops.is_empty() {
            return Ok(());
        }
        self.write(ops, upserts, bytes).await
    }

    /// Estimates a follower's lag now and then (each estimate costs two reads per partition).
    async fn estimate<T: serde::de::DeserializeOwned>(
        &self,
        key: &str,
        feed: &mut ChangeFeedReader<T>,
        last: &mut std::time::Instant,
    ) {
        if last.elapsed() < std::time::Duration::from_secs(2) {
            return;
        }
        *last = std::time::Instant::now();
        if let Ok(n) = feed.estimate_lag().await {
            self.set_lag(key, n);
        }
    }
}

/// Copies one source feed range: notes the history position, copies the snapshot, replays
/// the history (or follows the latest versions when there is none).
///
/// Without `follow` every phase is bounded by the source's end as it stands when the phase
/// begins ([`ChangeFeedReader::pin_end`]), so the copy finishes even while the source keeps
/// changing — and when the destination is the source itself under another name, whose feed
/// would otherwise grow with every item the copy writes.
async fn copy_range(ctx: Arc<Ctx>, r: FeedRange) -> Result<(), String> {
    let key = format!("{}..{}", r.min, r.max);
    let mut st = ctx.state(&key)?;
    if st.history.is_none() && !st.no_history {
        let mut h = ctx.source.change_feed::<Value>(feed_options(
            &r,
            ChangeFeedMode::AllVersionsAndDeletes,
            ChangeFeedStart::Now,
            None,
        ));
        let turn = ctx.turn().await?;
        let pinned = h.pin_start().await;
        drop(turn);
        match pinned {
            Ok(()) => st.history = Some(h.continuation()),
            Err(e) if e.status() == Some(400) => st.no_history = true,
            Err(e) => return Err(format!("the source's change feed: {e}")),
        }
        ctx.save(&key, &st)?;
    }
    // Without history the latest-version feed is the only one: a resumed copy reads it on
    // from its position even when the snapshot was done.
    if st.no_history {
        return latest_versions(&ctx, &r, &key, &mut st).await;
    }
    if !st.snapshot_done {
        let mut feed = ctx.source.change_feed::<Value>(feed_options(
            &r,
            ChangeFeedMode::LatestVersion,
            ChangeFeedStart::Beginning,
            st.snapshot.clone(),
        ));
        // Whatever changes after this point is in the history, read next.
        pin_end(&ctx, &mut feed).await?;
        while let Some(items) = next_items(&ctx, &mut feed).await? {
            ctx.upsert_all(items).await?;
            st.snapshot = Some(feed.continuation());
            ctx.save(&key, &st)?;
        }
        st.snapshot_done = true;
        ctx.save(&key, &st)?;
    }
    let mut feed = ctx.source.change_feed::<Value>(feed_options(
        &r,
        ChangeFeedMode::AllVersionsAndDeletes,
        ChangeFeedStart::Now,
        st.history.clone(),
    ));
    if !ctx.follow {
        pin_end(&ctx, &mut feed).await?;
    }
    let mut estimated = std::time::Instant::now();
    loop {
        let Some(changes) = next_items(&ctx, &mut feed).await? else {
            if ctx.follow {
                ctx.idle(&key).await;
                continue;
            }
            return Ok(());
        };
        ctx.apply(changes).await?;
        st.history = Some(feed.continuation());
        ctx.save(&key, &st)?;
        if ctx.follow {
            ctx.estimate(&key, &mut feed, &mut estimated).await;
        }
    }
}

/// A source without history: its latest-version feed, followed, or read in bounded passes.
/// The first pass copies everything up to its start; each later pass copies what changed
/// during the one before, writing only items the destination does not hold as they are —
/// so the copy's own writes (a destination that is the source under another name) come
/// back once, change nothing, and the next pass finds the feed at its end.
async fn latest_versions(
    ctx: &Ctx,
    r: &FeedRange,
    key: &str,
    st: &mut RangeState,
) -> Result<(), String> {
    let mut feed = ctx.source.change_feed::<Value>(feed_options(
        r,
        ChangeFeedMode::LatestVersion,
        ChangeFeedStart::Beginning,
        st.snapshot.clone(),
    ));
    let mut estimated = std::time::Instant::now();
    let mut pass = 0u32;
    loop {
        if !ctx.follow {
            pin_end(ctx, &mut feed).await?;
        }
        let mut read = false;
        while let Some(items) = next_items(ctx, &mut feed).await? {
            read = true;
            match pass {
                0 => ctx.upsert_all(items).await?,
                _ => ctx.upsert_changed(items).await?,
            }
            st.snapshot = Some(feed.continuation());
            ctx.save(key, st)?;
            if ctx.follow {
                ctx.estimate(key, &mut feed, &mut estimated).await;
            }
        }
        st.snapshot_done = true;
        ctx.save(key, st)?;
        if ctx.follow {
            ctx.idle(key).await;
        } else if !read && pass > 0 {
            return Ok(());
        }
        pass += 1;
    }
}

/// The options of a feed on one range.
fn feed_options(
    r: &FeedRange,
    mode: ChangeFeedMode,
    start: ChangeFeedStart,
    continuation: Option<String>,
) -> ChangeFeedOptions {
    ChangeFeedOptions {
        mode,
        start,
        continuation,
        feed_range: Some(r.clone()),
        max_item_count: Some(PAGE),
        ..Default::default()
    }
}

/// Bounds a feed at the source's end as of now, in a turn.
async fn pin_end(ctx: &Ctx, feed: &mut ChangeFeedReader<Value>) -> Result<(), String> {
    let _turn = ctx.turn().await?;
    feed.pin_end()
        .await
        .map_err(|e| format!("the source's change feed: {e}"))
}

/// The next page of a feed, read in a turn; `None` when caught up (or at its end).
async fn next_items(
    ctx: &Ctx,
    feed: &mut ChangeFeedReader<Value>,
) -> Result<Option<Vec<Value>>, String> {
    let _turn = ctx.turn().await?;
    let page = feed.next_page().await.map_err(|e| e.to_string())?;
    Ok(Some(page.items).filter(|i| !i.is_empty()))
}

/// Runs a copy from the command line (progress on stderr); returns its summary.
pub async fn copy(a: CopyArgs) -> Result<String, String> {
    let progress = Arc::new(Mutex::new(Progress::new("copied", None)));
    let conns = [
        a.spec.from.as_str(),
        a.spec.to.as_deref().unwrap_or_default(),
    ];
    run(&a.spec, &a.checkpoint, progress)
        .await
        .map(|s| super::scrub(&s, &conns))
        .map_err(|e| super::scrub(&e, &conns))
}

/// Runs a copy, reporting through `progress`, saving positions in `checkpoint`; returns its
/// summary (an error when the verification fails).
pub async fn run(
    a: &CopySpec,
    checkpoint: &std::path::Path,
    progress: Arc<Mutex<Progress>>,
) -> Result<String, String> {
    let Checked {
        source: (sdb, scoll),
        dest: (ddb, dcoll),
        fills,
        key,
    } = a.checked()?;
    let limit = std::time::Duration::from_secs(a.timeout.clamp(1, 3600).into());
    let source_client = connect_with(&a.from, limit)?;
    let dest_client = connect_with(a.to.as_deref().unwrap_or(&a.from), limit)?;
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
    // Positions by feed range, from an interrupted run.
    let saved: HashMap<String, RangeState> = std::fs::read(checkpoint)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let resumed = !saved.is_empty();
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
        path: checkpoint.to_path_buf(),
        checkpoint: Mutex::new(saved),
        progress: Arc::clone(&progress),
        lag: Mutex::new(HashMap::new()),
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
    let no_history = ctx
        .checkpoint
        .lock()
        .map(|c| c.values().any(|s| s.no_history))
        .unwrap_or(false);
    let line = match progress.lock() {
        Ok(mut p) => {
            p.set_phase("verifying");
            p.finish()
        }
        Err(_) => String::new(),
    };
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
    let note = if no_history {
        "; the source keeps no change history (changeFeedPolicy), so deletes made during the copy were not carried over"
    } else {
        ""
    };
    let summary = format!(
        "{line}{}; {} -> {}; {verdict}{note}",
        if resumed { " (resumed)" } else { "" },
        a.source,
        a.dest
    );
    if let Ok(mut p) = progress.lock() {
        p.set_phase(if ok { "done" } else { "failed" });
    }
    if ok {
        Ok(summary)
    } else {
        Err(summary)
    }
}
