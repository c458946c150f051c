//! The change feed: every change to a container, latest version of each item, per physical
//! partition, in modification order; the reader follows partitions through splits.

use crate::client::Request;
use crate::{ContainerClient, Error, PartitionKey};
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::marker::PhantomData;
use std::time::SystemTime;
use strata_query::protocol::header;

/// Where a change feed starts.
///
/// ```
/// use strata_sdk::ChangeFeedStart;
/// let from_now = ChangeFeedStart::Now;
/// let since = ChangeFeedStart::Time(std::time::SystemTime::now());
/// # let _ = (from_now, since);
/// ```
#[derive(Debug, Clone, Default)]
pub enum ChangeFeedStart {
    /// Every item, from the first change.
    #[default]
    Beginning,
    /// Only changes made after the reader starts.
    Now,
    /// Changes made at or after this time.
    Time(SystemTime),
}

/// Which changes the feed yields.
///
/// ```
/// use strata_sdk::{ChangeFeedMode, ChangeFeedOptions, ChangeFeedStart};
/// // Every create, replace and delete since now, as `{"current", "metadata"}`.
/// let opts = ChangeFeedOptions {
///     mode: ChangeFeedMode::AllVersionsAndDeletes,
///     start: ChangeFeedStart::Now,
///     ..Default::default()
/// };
/// # let _ = opts;
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ChangeFeedMode {
    /// The latest version of each changed item (no deletes).
    #[default]
    LatestVersion,
    /// Every version and every delete, each as `{"current", "metadata"}`
    /// (`metadata.operationType` is `create`, `replace` or `delete`; a replace names the
    /// version it replaced in `previousImageLSN`, a delete names the item in `metadata.id`
    /// and `metadata.partitionKey`). The container must keep
    /// history (`changeFeedPolicy`), and the feed starts from now or a continuation.
    AllVersionsAndDeletes,
}

/// Options of a change feed reader.
///
/// ```
/// use strata_sdk::{ChangeFeedOptions, ChangeFeedStart, PartitionKey};
/// let opts = ChangeFeedOptions { start: ChangeFeedStart::Now, partition_key: Some(PartitionKey::from("t1")), ..Default::default() };
/// # let _ = opts;
/// ```
#[derive(Debug, Clone, Default)]
pub struct ChangeFeedOptions {
    /// Where to start (ignored when resuming from a continuation).
    pub start: ChangeFeedStart,
    /// Only changes of this logical partition (or hierarchical prefix).
    pub partition_key: Option<PartitionKey>,
    /// Items per request.
    pub max_item_count: Option<u32>,
    /// Resume from [`ChangeFeedReader::continuation`].
    pub continuation: Option<String>,
    /// Only changes in this feed range (see [`crate::ContainerClient::feed_ranges`]): one
    /// consumer per range shares a container's feed.
    pub feed_range: Option<crate::FeedRange>,
    /// Latest versions (default) or all versions and deletes.
    pub mode: ChangeFeedMode,
}

/// A change feed page.
///
/// ```no_run
/// # async fn f(mut feed: strata_sdk::ChangeFeedReader<serde_json::Value>) -> Result<(), strata_sdk::Error> {
/// let page = feed.next_page().await?;
/// println!("{} changes, {} RU", page.items.len(), page.request_charge);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ChangeFeedPage<T> {
    /// Changed items (latest versions); empty when caught up.
    pub items: Vec<T>,
    /// Request units of the requests behind this page.
    pub request_charge: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Cursor {
    /// Partition key range id (None when scoped by partition key).
    range: Option<String>,
    /// The position: the etag of the last response.
    etag: Option<String>,
    /// The last LSN this reader returns, when bounded ([`ChangeFeedReader::pin_end`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    until: Option<u64>,
    /// Reached `until`: not asked again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    done: bool,
}

impl Cursor {
    fn new(range: Option<String>, etag: Option<String>) -> Self {
        Self {
            range,
            etag,
            until: None,
            done: false,
        }
    }
}

/// The LSN of a change: `_lsn` of a latest version, `metadata.lsn` of any version.
fn lsn_of(doc: &serde_json::Value) -> Option<u64> {
    doc["_lsn"]
        .as_u64()
        .or_else(|| doc["metadata"]["lsn"].as_u64())
}

/// The LSN an etag of the change feed stands for (`"123"`).
fn etag_lsn(etag: &str) -> Option<u64> {
    etag.trim_matches('"').parse().ok()
}

/// Reads a container's change feed, following every physical partition through splits.
///
/// ```no_run
/// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
/// let mut feed = c.change_feed::<serde_json::Value>(Default::default());
/// let first = feed.next_page().await?;
/// let token = feed.continuation(); // store it; resume later with ChangeFeedOptions::continuation
/// # let _ = (first, token); Ok(()) }
/// ```
pub struct ChangeFeedReader<T> {
    container: ContainerClient,
    options: ChangeFeedOptions,
    cursors: Option<Vec<Cursor>>,
    next: usize,
    _t: PhantomData<T>,
}

impl<T: DeserializeOwned> ChangeFeedReader<T> {
    pub(crate) fn new(container: ContainerClient, options: ChangeFeedOptions) -> Self {
        let cursors = options
            .continuation
            .as_deref()
            .and_then(|c| serde_json::from_str::<Vec<Cursor>>(c).ok());
        Self {
            container,
            options,
            cursors,
            next: 0,
            _t: PhantomData,
        }
    }

    /// A token to resume this feed later (serialized positions of every partition).
    ///
    /// ```no_run
    /// # fn f(feed: strata_sdk::ChangeFeedReader<serde_json::Value>) { let t = feed.continuation(); println!("{t}"); }
    /// ```
    pub fn continuation(&self) -> String {
        serde_json::to_string(self.cursors.as_deref().unwrap_or(&[])).unwrap_or_default()
    }

    async fn init(&mut self) -> Result<(), Error> {
        if self.cursors.is_some() {
            return Ok(());
        }
        let start_etag = match self.options.start {
            ChangeFeedStart::Now => Some("*".to_string()),
            _ => None,
        };
        let cursors = if self.options.partition_key.is_some() {
            vec![Cursor::new(None, start_etag)]
        } else {
            self.container
                .read_partition_key_ranges()
                .await?
                .into_iter()
                .filter(|r| {
                    self.options.feed_range.as_ref().is_none_or(|f| {
                        f.overlaps(&crate::FeedRange {
                            min: r.min_inclusive.clone(),
                            max: r.max_exclusive.clone(),
                        })
                    })
                })
                .map(|r| Cursor::new(Some(r.id), start_etag.clone()))
                .collect()
        };
        self.cursors = Some(cursors);
        Ok(())
    }

    /// A change feed request on one partition's cursor (its position not yet set).
    fn request(&self, cur: &Cursor, max_items: Option<u32>) -> Request {
        let mut req = Request::new(Method::GET, format!("{}/docs", self.container.link));
        req = match self.options.mode {
            ChangeFeedMode::LatestVersion => req.header("a-im", "Incremental Feed"),
            ChangeFeedMode::AllVersionsAndDeletes => req
                .header("a-im", "Full-Fidelity Feed")
                .header(header::CHANGEFEED_WIRE_FORMAT_VERSION, "2021-09-15"),
        };
        if let Some(r) = &cur.range {
            req = req.header(header::PARTITION_KEY_RANGE_ID, r.clone());
        }
        if let Some(pk) = &self.options.partition_key {
            req = req.header(header::PARTITION_KEY, pk.to_header());
        }
        if let Some(f) = &self.options.feed_range {
            for (k, v) in f.headers() {
                req = req.header(k, v);
            }
        }
        if let Some(n) = max_items {
            req = req.header(header::MAX_ITEM_COUNT, n.to_string());
        }
        req
    }

    /// Fixes where a reader started with [`ChangeFeedStart::Now`] begins: each partition's
    /// position is taken now, so changes made from here on are read even if the first page
    /// is asked for much later, and [`Self::continuation`] resumes exactly here.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// use strata_sdk::{ChangeFeedOptions, ChangeFeedStart};
    /// let mut feed = c.change_feed::<serde_json::Value>(ChangeFeedOptions { start: ChangeFeedStart::Now, ..Default::default() });
    /// feed.pin_start().await?;
    /// let from_here = feed.continuation(); // later changes, whenever they are read
    /// # let _ = from_here; Ok(()) }
    /// ```
    pub async fn pin_start(&mut self) -> Result<(), Error> {
        self.init().await?;
        if !matches!(self.options.start, ChangeFeedStart::Now) {
            return Ok(());
        }
        let mut cursors = self.cursors.clone().unwrap_or_default();
        for cur in cursors.iter_mut() {
            if cur.etag.as_deref().is_some_and(|e| e != "*") {
                continue;
            }
            let r = self
                .container
                .client
                .send(
                    self.request(cur, Some(1))
                        .header(header::IF_NONE_MATCH, "*"),
                )
                .await?;
            cur.etag = r
                .header(header::ETAG)
                .map(str::to_string)
                .or(cur.etag.take());
        }
        self.cursors = Some(cursors);
        Ok(())
    }

    /// About how many changes this reader has not read yet, summed over its partitions, the
    /// way the service's change feed estimator works it out: per partition, the first unread
    /// change's LSN against the partition's latest LSN (0 for a caught-up partition). LSNs
    /// count every write, so the figure is an upper bound; 0 means caught up.
    ///
    /// ```no_run
    /// # async fn f(mut feed: strata_sdk::ChangeFeedReader<serde_json::Value>) -> Result<(), strata_sdk::Error> {
    /// println!("{} changes behind", feed.estimate_lag().await?);
    /// # Ok(()) }
    /// ```
    pub async fn estimate_lag(&mut self) -> Result<u64, Error> {
        self.init().await?;
        let mut lag = 0u64;
        for cur in self.cursors.clone().unwrap_or_default() {
            let mut req = self.request(&cur, Some(1));
            match (&cur.etag, &self.options.start) {
                (Some(e), _) => req = req.header(header::IF_NONE_MATCH, e.clone()),
                (None, ChangeFeedStart::Time(t)) => {
                    req = req.header("if-modified-since", httpdate::fmt_http_date(*t))
                }
                _ => {}
            }
            let first = match self.container.client.send(req).await {
                Ok(r) if r.status == 304 || r.body.is_empty() => continue,
                Ok(r) => r.json()?,
                // A split partition: its children are read (and estimated) on the next page.
                Err(e) if e.status() == Some(410) => continue,
                Err(e) => return Err(e),
            };
            let doc = &first["Documents"][0];
            let Some(at) = lsn_of(doc) else {
                continue;
            };
            let latest = self
                .container
                .client
                .send(
                    self.request(&cur, Some(1))
                        .header(header::IF_NONE_MATCH, "*"),
                )
                .await?;
            let latest = latest.header(header::ETAG).and_then(etag_lsn).unwrap_or(at);
            lag += latest.saturating_sub(at) + 1;
        }
        Ok(lag)
    }

    /// The next changes from any partition; an empty page means every partition is caught
    /// up (call again later to poll).
    ///
    /// ```no_run
    /// # async fn f(mut feed: strata_sdk::ChangeFeedReader<serde_json::Value>) -> Result<(), strata_sdk::Error> {
    /// loop {
    ///     let page = feed.next_page().await?;
    ///     if page.items.is_empty() { tokio::time::sleep(std::time::Duration::from_secs(1)).await; }
    /// }
    /// # }
    /// ```
    pub async fn next_page(&mut self) -> Result<ChangeFeedPage<T>, Error> {
        self.init().await?;
        let mut charge = 0.0;
        let total = self.cursors.as_ref().map_or(0, Vec::len);
        for _ in 0..total.max(1) * 2 {
            let cursors = self.cursors.as_mut().expect("initialized");
            let open = cursors.iter().filter(|c| !c.done).count();
            if open == 0 {
                break;
            }
            // The n-th cursor still open, round robin.
            let Some(i) = (0..cursors.len())
                .filter(|&i| !cursors[i].done)
                .nth(self.next % open)
            else {
                break;
            };
            let cur = cursors[i].clone();
            let mut req = self.request(&cur, self.options.max_item_count);
            match (&cur.etag, &self.options.start) {
                (Some(e), _) => req = req.header(header::IF_NONE_MATCH, e.clone()),
                (None, ChangeFeedStart::Time(t)) => {
                    req = req.header("if-modified-since", httpdate::fmt_http_date(*t))
                }
                _ => {}
            }
            match self.container.client.send(req).await {
                Ok(r) => {
                    charge += r.charge();
                    let etag = r.header(header::ETAG).map(str::to_string);
                    let body = if r.status == 304 || r.body.is_empty() {
                        serde_json::Value::Null
                    } else {
                        r.json()?
                    };
                    let mut docs = match body {
                        serde_json::Value::Object(mut o) => match o.remove("Documents") {
                            Some(serde_json::Value::Array(d)) => d,
                            _ => Vec::new(),
                        },
                        _ => Vec::new(),
                    };
                    let cursor = &mut self.cursors.as_mut().expect("initialized")[i];
                    cursor.etag = etag.or(cur.etag.clone());
                    if let Some(until) = cur.until {
                        let before = docs.len();
                        docs.retain(|d| lsn_of(d).is_none_or(|l| l <= until));
                        if docs.len() < before {
                            // The position stays before what was left out: a reader pinned
                            // again later (or resumed) reads it then.
                            cursor.etag = docs
                                .last()
                                .and_then(lsn_of)
                                .map(|l| format!("\"{l}\""))
                                .or(cur.etag.clone());
                            cursor.done = true;
                        } else {
                            cursor.done = cursor
                                .etag
                                .as_deref()
                                .and_then(etag_lsn)
                                .is_some_and(|at| at >= until);
                        }
                    }
                    if docs.is_empty() {
                        self.next += 1;
                        continue;
                    }
                    let items = docs
                        .into_iter()
                        .map(|d| serde_json::from_value(d).map_err(Error::serde))
                        .collect::<Result<Vec<T>, Error>>()?;
                    return Ok(ChangeFeedPage {
                        items,
                        request_charge: charge,
                    });
                }
                Err(e) if e.status() == Some(410) => self.split(i).await?,
                Err(e) => return Err(e),
            }
        }
        Ok(ChangeFeedPage {
            items: Vec::new(),
            request_charge: charge,
        })
    }

    /// Bounds this reader at the end of the feed as it stands now: each partition's latest
    /// position is noted, later changes are not returned, and once every partition reached
    /// its end [`Self::next_page`] answers empty pages for good. A copy or a backfill that
    /// must finish while writers (or the copy itself, writing back into the same container)
    /// keep changing the source reads up to here and stops. The bound travels with
    /// [`Self::continuation`]; calling this again moves it.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// let mut feed = c.change_feed::<serde_json::Value>(Default::default());
    /// feed.pin_end().await?;
    /// loop {
    ///     let page = feed.next_page().await?;
    ///     if page.items.is_empty() { break; } // everything written before pin_end, and no more
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn pin_end(&mut self) -> Result<(), Error> {
        self.init().await?;
        let mut i = 0;
        while i < self.cursors.as_ref().map_or(0, Vec::len) {
            let cur = self.cursors.as_ref().expect("initialized")[i].clone();
            let req = self
                .request(&cur, Some(1))
                .header(header::IF_NONE_MATCH, "*");
            match self.container.client.send(req).await {
                Ok(r) => {
                    let end = r.header(header::ETAG).and_then(etag_lsn).ok_or_else(|| {
                        Error::invalid("the change feed's etag is not a position (an LSN)")
                    })?;
                    let cursor = &mut self.cursors.as_mut().expect("initialized")[i];
                    cursor.until = Some(end);
                    cursor.done = cursor
                        .etag
                        .as_deref()
                        .and_then(etag_lsn)
                        .is_some_and(|at| at >= end);
                    i += 1;
                }
                // Pinned on the children instead, which take this place in the list.
                Err(e) if e.status() == Some(410) => self.split(i).await?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Replaces the cursor of a partition that split by cursors on its children, from the
    /// same position and with the same end.
    async fn split(&mut self, i: usize) -> Result<(), Error> {
        let cur = self.cursors.as_ref().expect("initialized")[i].clone();
        let gone = cur.range.clone().unwrap_or_default();
        let children: Vec<Cursor> = self
            .container
            .read_partition_key_ranges()
            .await?
            .into_iter()
            .filter(|r| r.parents.contains(&gone))
            .map(|r| Cursor {
                range: Some(r.id),
                ..cur.clone()
            })
            .collect();
        tracing::debug!(range = %gone, children = children.len(), "change feed follows a split");
        let cursors = self.cursors.as_mut().expect("initialized");
        cursors.remove(i);
        for (n, c) in children.into_iter().enumerate() {
            if !cursors.iter().any(|x| x.range == c.range) {
                cursors.insert((i + n).min(cursors.len()), c);
            }
        }
        Ok(())
    }
}

impl<T: DeserializeOwned + Send + 'static> ChangeFeedReader<T> {
    /// The feed as a never-ending stream of changes, as `azure_data_cosmos` offers it: when
    /// every partition is caught up it waits `poll` and asks again.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// use futures::TryStreamExt;
    /// let feed = c.change_feed::<serde_json::Value>(Default::default());
    /// let mut changes = std::pin::pin!(feed.into_stream(std::time::Duration::from_secs(1)));
    /// while let Some(doc) = changes.try_next().await? {
    ///     println!("{doc}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn into_stream(
        self,
        poll: std::time::Duration,
    ) -> impl futures::Stream<Item = Result<T, Error>> + Send {
        let state = (self, std::collections::VecDeque::<T>::new());
        futures::stream::try_unfold(state, move |(mut feed, mut buffered)| async move {
            loop {
                if let Some(item) = buffered.pop_front() {
                    return Ok(Some((item, (feed, buffered))));
                }
                let page = feed.next_page().await?;
                if page.items.is_empty() {
                    tokio::time::sleep(poll).await;
                }
                buffered.extend(page.items);
            }
        })
    }
}

impl<T> std::fmt::Debug for ChangeFeedReader<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeFeedReader")
            .field("container", &self.container)
            .field("partitions", &self.cursors.as_ref().map(Vec::len))
            .finish_non_exhaustive()
    }
}

/// A container's change feed.
impl crate::ContainerClient {
    /// Reads the change feed (latest version of each changed item), following every physical
    /// partition through splits.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// use strata_sdk::{ChangeFeedOptions, ChangeFeedStart};
    /// let mut feed = c.change_feed::<serde_json::Value>(ChangeFeedOptions { start: ChangeFeedStart::Beginning, ..Default::default() });
    /// loop {
    ///     let page = feed.next_page().await?;
    ///     if page.items.is_empty() { break; }
    ///     for doc in page.items { println!("{doc}"); }
    /// }
    /// let resume_later = feed.continuation();
    /// # let _ = resume_later; Ok(()) }
    /// ```
    pub fn change_feed<T: DeserializeOwned>(
        &self,
        options: ChangeFeedOptions,
    ) -> ChangeFeedReader<T> {
        ChangeFeedReader::new(self.clone(), options)
    }
}
