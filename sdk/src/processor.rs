//! A change feed processor, as the official SDKs' is built: the monitored container's feed is
//! cut into feed ranges, each with a *lease* document in a lease container (partition key
//! `/id`) that records its owner, its position and when the owner last renewed it. Every
//! instance of a processor (same lease prefix, its own instance name) takes unowned or expired
//! leases up to its fair share, reads each owned range's changes, hands them to the handler and
//! checkpoints the position in the lease after the handler succeeded — at-least-once delivery:
//! an instance that dies before a checkpoint leaves its batch to be delivered again by whoever
//! takes the lease next. When a range splits, its owner replaces its lease by one per child
//! range, starting where the parent stopped, so the children can be shared out.
//!
//! An instance over its fair share (another joined) gives the excess back between batches.
//! Lease updates are conditional on the lease's etag: two instances never both own a lease.

use crate::{
    ChangeFeedOptions, ChangeFeedStart, ContainerClient, Error, FeedRange, ItemOptions, Query,
    QueryOptions,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;
use std::future::Future;
use std::time::{Duration, SystemTime};

/// How a processor instance behaves.
///
/// ```
/// let o = strata_sdk::ProcessorOptions::new("worker-1");
/// assert_eq!(o.lease_prefix, "strata.processor.");
/// ```
#[derive(Debug, Clone)]
pub struct ProcessorOptions {
    /// This instance's name (unique among the instances sharing the leases).
    pub instance: String,
    /// Lease ids start with this; processors with different prefixes share nothing.
    pub lease_prefix: String,
    /// A lease not renewed for this long is free to take (default 10 s).
    pub lease_duration: Duration,
    /// How often an instance looks for changes and leases (default 500 ms).
    pub poll_interval: Duration,
    /// Where new leases start.
    pub start: ChangeFeedStart,
    /// Changes per batch handed to the handler.
    pub max_item_count: Option<u32>,
}

impl ProcessorOptions {
    /// Options for instance `instance` with the defaults.
    ///
    /// ```
    /// let o = strata_sdk::ProcessorOptions::new("worker-2");
    /// assert_eq!(o.instance, "worker-2");
    /// ```
    pub fn new(instance: impl Into<String>) -> Self {
        Self {
            instance: instance.into(),
            lease_prefix: "strata.processor.".into(),
            lease_duration: Duration::from_secs(10),
            poll_interval: Duration::from_millis(500),
            start: ChangeFeedStart::Beginning,
            max_item_count: None,
        }
    }
}

/// A lease document.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Lease {
    id: String,
    #[serde(rename = "feedRange")]
    feed_range: FeedRange,
    #[serde(default)]
    owner: Option<String>,
    /// The change feed reader's position.
    #[serde(default)]
    continuation: Option<String>,
    /// Seconds since the epoch of the owner's last renewal.
    #[serde(default)]
    renewed: f64,
    #[serde(rename = "_etag", default, skip_serializing)]
    etag: Option<String>,
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A change feed processor instance (see the module docs).
///
/// ```no_run
/// # async fn f(items: strata_sdk::ContainerClient, leases: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
/// use strata_sdk::{ChangeFeedProcessor, ProcessorOptions};
/// let p = ChangeFeedProcessor::new(items, leases, ProcessorOptions::new("worker-1"));
/// let stop = tokio::time::sleep(std::time::Duration::from_secs(60));
/// p.run(|changes: Vec<serde_json::Value>| async move {
///     println!("{} changes", changes.len());
///     Ok(())
/// }, stop).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ChangeFeedProcessor {
    monitored: ContainerClient,
    leases: ContainerClient,
    options: ProcessorOptions,
}

impl ChangeFeedProcessor {
    /// A processor instance over `monitored`, keeping its leases in `leases` (partition key
    /// `/id`).
    ///
    /// ```
    /// # let c = strata_sdk::CosmosClient::new("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY).unwrap();
    /// let p = strata_sdk::ChangeFeedProcessor::new(
    ///     c.database("app").container("events"),
    ///     c.database("app").container("leases"),
    ///     strata_sdk::ProcessorOptions::new("worker-1"),
    /// );
    /// # let _ = p;
    /// ```
    pub fn new(
        monitored: ContainerClient,
        leases: ContainerClient,
        options: ProcessorOptions,
    ) -> Self {
        Self {
            monitored,
            leases,
            options,
        }
    }

    /// Runs until `stop` completes, handing every batch of changes to `handler`; a handler
    /// error stops the processor (the batch is not checkpointed and will be delivered again).
    ///
    /// ```no_run
    /// # async fn f(p: strata_sdk::ChangeFeedProcessor) -> Result<(), strata_sdk::Error> {
    /// p.run(|batch: Vec<serde_json::Value>| async move { Ok(()) }, std::future::pending::<()>()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn run<F, Fut>(&self, handler: F, stop: impl Future<Output = ()>) -> Result<(), Error>
    where
        F: Fn(Vec<Value>) -> Fut,
        Fut: Future<Output = Result<(), Error>>,
    {
        let mut stop = std::pin::pin!(stop);
        loop {
            self.round(&handler).await?;
            tokio::select! {
                _ = &mut stop => {
                    self.release().await;
                    return Ok(());
                }
                _ = tokio::time::sleep(self.options.poll_interval) => {}
            }
        }
    }

    async fn all_leases(&self) -> Result<Vec<Lease>, Error> {
        let q = Query::new("SELECT * FROM c WHERE STARTSWITH(c.id, @p)")
            .param("@p", format!("{}lease.", self.options.lease_prefix));
        self.leases.query_all(q, QueryOptions::default()).await
    }

    fn lease_id(&self, r: &FeedRange) -> String {
        format!("{}lease.{}..{}", self.options.lease_prefix, r.min, r.max)
    }

    fn heartbeat_id(&self) -> String {
        format!(
            "{}instance.{}",
            self.options.lease_prefix, self.options.instance
        )
    }

    /// Says this instance is alive (a document per instance beside the leases), and counts
    /// the instances alive: the fair share of leases is their number divided by it, so a new
    /// instance gets leases as soon as some are free (after a split, an expiry, a release).
    async fn heartbeat(&self) -> Result<usize, Error> {
        let me = serde_json::json!({"id": self.heartbeat_id(), "renewed": now()});
        self.leases.upsert_item(&me, ItemOptions::default()).await?;
        let q = Query::new("SELECT VALUE c.renewed FROM c WHERE STARTSWITH(c.id, @p)")
            .param("@p", format!("{}instance.", self.options.lease_prefix));
        let beats: Vec<f64> = self.leases.query_all(q, QueryOptions::default()).await?;
        let ttl = self.options.lease_duration.as_secs_f64();
        let t = now();
        Ok(beats.iter().filter(|b| t - **b < ttl).count().max(1))
    }

    /// Writes `lease` if nobody changed it since it was read; `false` when someone did.
    async fn put(&self, lease: &Lease) -> Result<bool, Error> {
        let opts = ItemOptions {
            if_match: lease.etag.clone(),
            ..Default::default()
        };
        match self.leases.replace_item(&lease.id, lease, opts).await {
            Ok(_) => Ok(true),
            Err(e) if matches!(e.status(), Some(412) | Some(404)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// One round: create missing leases, take a fair share, process and checkpoint what this
    /// instance owns, hand split ranges over to their children.
    async fn round<F, Fut>(&self, handler: &F) -> Result<(), Error>
    where
        F: Fn(Vec<Value>) -> Fut,
        Fut: Future<Output = Result<(), Error>>,
    {
        let me = &self.options.instance;
        let mut leases = self.all_leases().await?;
        if leases.is_empty() {
            for r in self.monitored.feed_ranges().await? {
                let lease = Lease {
                    id: self.lease_id(&r),
                    feed_range: r,
                    owner: None,
                    continuation: None,
                    renewed: 0.0,
                    etag: None,
                };
                match self.leases.create_item(&lease).await {
                    Ok(_) => {}
                    Err(e) if e.is_conflict() => {}
                    Err(e) => return Err(e),
                }
            }
            leases = self.all_leases().await?;
        }
        let t = now();
        let ttl = self.options.lease_duration.as_secs_f64();
        let alive = |l: &Lease| l.owner.is_some() && t - l.renewed < ttl;
        let owners: BTreeSet<&str> = leases
            .iter()
            .filter(|l| alive(l))
            .filter_map(|l| l.owner.as_deref())
            .chain(std::iter::once(me.as_str()))
            .collect();
        let instances = self.heartbeat().await?.max(owners.len());
        let share = leases.len().div_ceil(instances);
        let mut mine = leases
            .iter()
            .filter(|l| alive(l) && l.owner.as_deref() == Some(me))
            .count();
        // Over the fair share (another instance joined): give the excess back between
        // batches — everything handled so far is checkpointed — for the others to take.
        for l in leases.iter_mut() {
            if mine <= share {
                break;
            }
            if alive(l) && l.owner.as_deref() == Some(me.as_str()) {
                let mut freed = l.clone();
                freed.owner = None;
                freed.renewed = 0.0;
                if self.put(&freed).await? {
                    mine -= 1;
                    *l = freed;
                }
            }
        }
        for l in leases.iter_mut() {
            let owned = alive(l) && l.owner.as_deref() == Some(me.as_str());
            if !owned && !alive(l) && mine < share {
                let mut taken = l.clone();
                taken.owner = Some(me.clone());
                taken.renewed = now();
                if self.put(&taken).await? {
                    mine += 1;
                    *l = self.read_lease(&l.id).await?.unwrap_or(taken);
                }
            }
        }
        let ranges = self.monitored.feed_ranges().await?;
        for lease in leases {
            if lease.owner.as_deref() != Some(me.as_str()) || now() - lease.renewed >= ttl {
                continue;
            }
            self.process(lease, handler, &ranges).await?;
        }
        Ok(())
    }

    async fn read_lease(&self, id: &str) -> Result<Option<Lease>, Error> {
        match self.leases.read_item::<Lease>(id, id).await {
            Ok(r) => Ok(r.item),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Reads an owned lease's new changes, hands them over, checkpoints; then renews it, or
    /// replaces it by its children when its range has split.
    async fn process<F, Fut>(
        &self,
        mut lease: Lease,
        handler: &F,
        ranges: &[FeedRange],
    ) -> Result<(), Error>
    where
        F: Fn(Vec<Value>) -> Fut,
        Fut: Future<Output = Result<(), Error>>,
    {
        let mut reader = self.monitored.change_feed::<Value>(ChangeFeedOptions {
            start: self.options.start.clone(),
            feed_range: Some(lease.feed_range.clone()),
            continuation: lease.continuation.clone(),
            max_item_count: self.options.max_item_count,
            ..Default::default()
        });
        loop {
            let page = reader.next_page().await?;
            if page.items.is_empty() {
                break;
            }
            handler(page.items).await?;
            lease.continuation = Some(reader.continuation());
            lease.renewed = now();
            if !self.put(&lease).await? {
                // Someone took the lease (ours had expired): stop; they go on from our last
                // checkpoint, so this batch may be delivered twice, never lost.
                return Ok(());
            }
            match self.read_lease(&lease.id).await? {
                Some(l) => lease = l,
                None => return Ok(()),
            }
        }
        lease.continuation = Some(reader.continuation());
        let children: Vec<&FeedRange> = ranges
            .iter()
            .filter(|r| r.overlaps(&lease.feed_range))
            .collect();
        if children.len() > 1 {
            // Split: one lease per child, from where the parent stopped, free to take.
            for child in children {
                let Some(r) = lease.feed_range.epk().intersect(&child.epk()) else {
                    continue;
                };
                let part = FeedRange {
                    min: r.min,
                    max: r.max,
                };
                let l = Lease {
                    id: self.lease_id(&part),
                    feed_range: part,
                    owner: None,
                    continuation: lease.continuation.clone(),
                    renewed: 0.0,
                    etag: None,
                };
                match self.leases.create_item(&l).await {
                    Ok(_) => {}
                    Err(e) if e.is_conflict() => {}
                    Err(e) => return Err(e),
                }
            }
            let opts = ItemOptions {
                if_match: lease.etag.clone(),
                ..Default::default()
            };
            match self
                .leases
                .delete_item(&lease.id, lease.id.as_str(), opts)
                .await
            {
                Ok(_) => {}
                Err(e) if matches!(e.status(), Some(404) | Some(412)) => {}
                Err(e) => return Err(e),
            }
            return Ok(());
        }
        lease.renewed = now();
        self.put(&lease).await?;
        Ok(())
    }

    /// Gives this instance's leases up (on stop), so others take them at once.
    async fn release(&self) {
        let id = self.heartbeat_id();
        let _ = self
            .leases
            .delete_item(&id, id.as_str(), ItemOptions::default())
            .await;
        let Ok(leases) = self.all_leases().await else {
            return;
        };
        for mut l in leases {
            if l.owner.as_deref() == Some(self.options.instance.as_str()) {
                l.owner = None;
                l.renewed = 0.0;
                let _ = self.put(&l).await;
            }
        }
    }
}
