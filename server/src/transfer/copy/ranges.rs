//! The copy of one source feed range: its snapshot, then its history (or, without history,
//! bounded passes over the latest versions), each page written with bulk and its position
//! saved in the checkpoint.

use super::super::progress::Progress;
use super::super::strip_item;
use super::checkpoint::{Checkpoint, RangeState};
use super::fill::{map, segments, set, Fill};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use strata_sdk::{
    BulkOperation, ChangeFeedMode, ChangeFeedOptions, ChangeFeedReader, ChangeFeedStart,
    ContainerClient, FeedRange, PartitionKey, PartitionKeyDefinition, QueryOptions,
};

/// Everything the range workers share.
pub struct Ctx {
    pub source: ContainerClient,
    pub dest: ContainerClient,
    pub source_def: PartitionKeyDefinition,
    pub dest_def: PartitionKeyDefinition,
    pub fills: Vec<Fill>,
    pub follow: bool,
    pub checkpoint: Checkpoint,
    pub progress: Arc<Mutex<Progress>>,
    /// Changes behind, per range, while following.
    pub lag: Mutex<HashMap<String, u64>>,
    /// Turns: how many ranges read and write at once.
    pub turns: tokio::sync::Semaphore,
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
        self.checkpoint.state(key)
    }

    fn save(&self, key: &str, st: &RangeState) -> Result<(), String> {
        self.checkpoint.save(key, st)
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
        if self.progress.lock().is_ok_and(|p| p.is_stopped()) {
            return Err("the copy was stopped".into());
        }
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
pub async fn copy_range(ctx: Arc<Ctx>, r: FeedRange) -> Result<(), String> {
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
