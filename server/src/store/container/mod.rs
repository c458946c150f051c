//! A live container: its partition map (physical partitions with their stats), the write path
//! that orders writes by LSN, and item reads and scans.
//!
//! A container's writes are transactions on its [`Log`]: one at a time, each reading the current
//! versions, taking LSNs and applying its batch (microseconds). The fsync that makes a write
//! durable happens after the transaction ends, shared with other writers (group commit).
//! Because LSNs are taken and applied under the log's lock, the change feed never sees LSN
//! `n+1` before LSN `n`.

use super::catalog::{self, ContainerRecord};
use super::engine::{Durable, Engine, Log, Space, Tx};
use super::index::IndexState;
use super::keys;
pub use super::partition_map::{PartitionMap, PartitionsView, RangeSnapshot, RangeState};
use super::record::StoredItem;
use super::StoreError;
use history::Operation;

pub mod changes;
pub mod doc_numbers;
pub mod gsi;
pub mod history;
mod hot;
mod scan;
mod settled;
/// How many superseded versions a scan steps over rather than walk the directory (see
/// [`settled`]).
#[cfg(test)]
pub(crate) fn settled_limit() -> u64 {
    settled::MAX_SUPERSEDED
}
/// The most items of a logical partition the cache of hot items keeps whole (see [`hot`]).
#[cfg(test)]
pub(crate) fn hot_partition_items() -> usize {
    hot::PARTITION_ITEMS
}
pub use hot::held_bytes as hot_items_held;
pub mod indexes;
pub mod lookup;
mod partitions;
mod policies;
pub mod reindex;
pub mod reshape;
pub mod scripts;
pub mod split;
mod txn;
pub mod vectors;

pub use txn::{Savepoint, Txn};

use bytes::Bytes;
use serde_json::Value;
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use strata_query::pk::{EpkRange, PartitionKeyDefinition};
use strata_query::sql::computed::ComputedProperty;

/// Limits that shape partitioning; set by flags.
#[derive(Debug, Clone)]
pub struct Limits {
    /// A physical partition whose stored bytes pass this splits.
    pub partition_split_bytes: u64,
    /// A logical partition (one full key) may hold at most this many bytes.
    pub logical_partition_limit_bytes: u64,
    /// Overrides the throughput-derived number of partitions of a new container.
    pub initial_partitions: Option<u32>,
    /// The most physical partitions one container may have: neither throughput nor size
    /// splits past it, and a new container starts with at most this many.
    pub max_partitions: u32,
    /// Minutes of all-versions-and-deletes history kept for containers without a
    /// `changeFeedPolicy` (`None`: none, as the service).
    pub change_feed_retention: Option<u64>,
    /// How long a stored procedure, trigger or UDF call may run before it is stopped.
    pub script_timeout: std::time::Duration,
    /// How long a range a throughput split will replace reports `"status": "splitting"` in
    /// the partition key range feed before the split is made (see `split::Store::split_once`).
    pub split_notice: std::time::Duration,
    /// Most bytes of rows and groups one query may hold (see `exec::memory`).
    pub query_memory_bytes: usize,
    /// Bytes of `f32` rows the vector indexes that search over codes keep in memory before
    /// they read the rest from files (`crate::vector::rows`; a local store only).
    pub vector_rows_memory_bytes: usize,
    /// Where those files go and the budget they share: set by the store for a local store
    /// (a folder of its data folder); `None` keeps every row in memory.
    pub vector_rows: Option<crate::vector::rows::Place>,
}

/// Default of [`Limits::max_partitions`]: 1,000,000 RU/s (the service's default maximum per
/// container) needs 100 partitions, so this leaves ten times that for splits by size.
pub const DEFAULT_MAX_PARTITIONS: u32 = 1024;

/// Most bytes of rows and groups one query may hold by default (the executor charges them,
/// `exec::memory`).
pub const DEFAULT_QUERY_MEMORY_BYTES: usize = 64 << 20;

/// Default of [`Limits::script_timeout`]: the service stops scripts after about five seconds.
pub const DEFAULT_SCRIPT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Default of [`Limits::split_notice`]: long enough for a client that polls the partition key
/// range feed every second or so to see the status (the service's splits take minutes), short
/// enough that a scale-up settles in seconds.
pub const DEFAULT_SPLIT_NOTICE: std::time::Duration = std::time::Duration::from_secs(3);

impl Default for Limits {
    fn default() -> Self {
        Self {
            partition_split_bytes: 50 * 1024 * 1024 * 1024,
            logical_partition_limit_bytes: 20 * 1024 * 1024 * 1024,
            initial_partitions: None,
            max_partitions: DEFAULT_MAX_PARTITIONS,
            change_feed_retention: None,
            script_timeout: DEFAULT_SCRIPT_TIMEOUT,
            split_notice: DEFAULT_SPLIT_NOTICE,
            query_memory_bytes: DEFAULT_QUERY_MEMORY_BYTES,
            vector_rows_memory_bytes: crate::vector::rows::DEFAULT_BUDGET,
            vector_rows: None,
        }
    }
}

/// Where a document sits in a container's key order (EPK, then id). Positions are what the
/// scans and index walks hand out with each document: outside the store they are compared,
/// handed back and written into continuation tokens ([`DocPos::to_hex`]), never built from
/// or taken apart into key bytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DocPos(pub(in crate::store) Vec<u8>);

impl DocPos {
    /// A position just before this one, with no document between them: a scan after it
    /// visits this document again (how a page resumes inside a document's rows).
    pub fn just_before(&self) -> DocPos {
        let mut k = self.0.clone();
        k.pop();
        DocPos(k)
    }

    /// The EPK (hex) and id of the document here, in the container's key spelling.
    pub(in crate::store) fn parts(
        &self,
        codec: keys::KeyCodec,
    ) -> (std::borrow::Cow<'_, str>, &str) {
        codec
            .parse_item_key(&self.0)
            .map_or((std::borrow::Cow::Borrowed(""), ""), |(_, e, i)| (e, i))
    }

    /// The key's bytes (compared as positions compare).
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// About what holding this position costs in memory.
    pub fn held_bytes(&self) -> usize {
        self.0.len()
    }

    /// The position as hex, for continuation tokens (the container prefix left out).
    pub fn to_hex(&self) -> String {
        strata_query::pk::epk::encode_hex(self.0.get(4..).unwrap_or(&[]))
    }
}

/// A container and its runtime state. Shared behind an `Arc`. Its identity (ids, rids, key
/// definition) is plain public data that never changes; its state — the partition map, the
/// record, the log, the index, scripts and limits — is reached through its methods only.
pub struct Container {
    pub cid: u32,
    pub db: String,
    pub db_seq: u32,
    pub id: String,
    pub rid: String,
    pub db_rid: String,
    /// `dbs/{db}/colls/{id}`, the `x-ms-alt-content-path` of every response.
    pub alt_content_path: String,
    pub pk: PartitionKeyDefinition,
    /// How the container's keys spell EPKs (see [`keys::KeyCodec`]).
    pub(in crate::store) codec: keys::KeyCodec,
    /// User-settable properties, timestamps and throughput (the `ranges` field is not kept
    /// current here; the partition map is authoritative).
    pub(in crate::store) meta: RwLock<ContainerRecord>,
    pub(in crate::store) map: RwLock<PartitionMap>,
    /// The container's change log: LSNs and the isolation of its writes.
    log: Log,
    pub(in crate::store) splitting: AtomicBool,
    /// The partition-map generation at which a split for throughput found no place to cut;
    /// no further throughput split is tried until the map changes (`u64::MAX`: none failed).
    pub(in crate::store) throughput_split_stuck_at: AtomicU64,
    pub(in crate::store) deleted: AtomicBool,
    pub(in crate::store) engine: Engine,
    pub(in crate::store) limits: Limits,
    /// The index's policy, unique keys and generation (see [`super::index`]).
    index: RwLock<IndexState>,
    /// The last document count each physical partition gave out: a new document takes its
    /// partition's next (see [`doc_numbers`]). Changed only by committing writes, which the
    /// log serializes.
    doc_counts: Mutex<doc_numbers::DocCounts>,
    /// Documents the running index build has visited, and how many it will visit.
    pub(in crate::store) index_done: AtomicU64,
    pub(in crate::store) index_total: AtomicU64,
    /// Documents with a value at a path, per (path id, generation, EPK range): the LSN of the
    /// partition when counted and the count (see `EntryReader::in_order`).
    pub(super) defined_cache: DefinedCache,
    /// The container's computed properties (see `strata_query::sql::computed`).
    computed: RwLock<Arc<Vec<ComputedProperty>>>,
    /// Stored procedures, triggers and UDFs (see [`super::scripts`]).
    pub(in crate::store) scripts: RwLock<Arc<scripts::Scripts>>,
    /// Requests' transactions take their turn here, first come first served, waiting
    /// without holding a thread (see [`Container::write_turn`]).
    turn: tokio::sync::Mutex<()>,
    /// One script transaction at a time may queue for a turn (see [`Container::script_turn`]).
    script_turns: tokio::sync::Semaphore,
    /// Sizes of logical partitions recently written (bytes, count), as committed (see
    /// [`LpSizes`]).
    pub(in crate::store) lp_sizes: Mutex<LpSizes>,
    /// Recently read and written item versions (see [`hot`]).
    hot: hot::HotItems,
    /// How many superseded item versions recent writes may have left (see [`settled`]).
    superseded: settled::Superseded,
    /// The vector indexes (see [`vectors`]).
    vectors: vectors::Vectors,
    /// BM25's word totals per full-text path and range (see [`indexes::fulltext`]).
    word_totals: indexes::fulltext::WordTotals,
    /// Full-text postings decoded, per stem (see [`indexes::postings`]).
    postings: indexes::postings::PostingsCache,
    /// Full-text postings of recent writes and the segment lists (see
    /// [`indexes::text_pending`]).
    text: Arc<indexes::text_pending::TextPending>,
    /// Global secondary indexes of this container still needing its history, each from
    /// the LSN after which it does (see [`gsi`]).
    history_holds: Mutex<HashMap<u32, u64>>,
    /// As a global secondary index, its build phase (see [`Container::gsi_status`]).
    gsi_phase: std::sync::atomic::AtomicU8,
}

type DefinedCache = std::sync::Mutex<HashMap<([u8; 8], u16, String, String), (u64, u64)>>;

/// What a transaction gives the next version of an item (see [`Txn::next_version`]): its
/// change position (LSN and the sub-sequence within the transaction), its document number and
/// its timestamp — what the item layer stamps into `_etag`, `_rid`, `_self` and `_ts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    pub lsn: u64,
    pub sub: u32,
    pub doc_seq: u64,
    pub ts: u64,
}

/// A new version ready to store: the stamped document and its validated `ttl`.
#[derive(Debug, Clone)]
pub struct Record {
    pub version: Version,
    /// The document's text, system properties included: what is stored.
    pub json: Vec<u8>,
    /// The same document parsed, when the container's maintainers read one besides the text
    /// ([`Txn::reads_documents`]).
    pub doc: Option<Value>,
    pub ttl: Option<i64>,
}

/// The committed sizes of the logical partitions a container's writes touched lately, so a
/// write finds its partition's size without a storage lookup (a memtable search over a long
/// key, a measurable part of a write's CPU). Bounded: past [`LpSizes::CAP`] entries it starts
/// over, and a miss reads storage. Writers of a container are serialised by its log, and a
/// commit updates these sizes before the next transaction may read them (see
/// [`Container::write`]), so they never disagree with storage.
#[derive(Debug, Default)]
pub struct LpSizes(HashMap<String, (u64, u64)>);

impl LpSizes {
    /// About 10 MB at most.
    pub const CAP: usize = 1 << 16;

    pub(in crate::store) fn get(&self, epk: &str) -> Option<(u64, u64)> {
        self.0.get(epk).copied()
    }

    pub(in crate::store) fn set(&mut self, epk: &str, size: (u64, u64)) {
        if self.0.len() >= Self::CAP && !self.0.contains_key(epk) {
            self.0.clear();
        }
        self.0.insert(epk.to_string(), size);
    }
}

/// What a write produced, for the response.
#[derive(Debug, Clone)]
pub struct Written {
    pub item: StoredItem,
    pub range_id: u32,
    /// True when no live version existed before (201 rather than 200 on upsert).
    pub created: bool,
}

impl Container {
    /// Builds the runtime for a catalog record; `lsn` is the last LSN persisted.
    pub fn load(
        rec: ContainerRecord,
        lsn: u64,
        engine: Engine,
        limits: Limits,
    ) -> Result<Self, StoreError> {
        let pk = PartitionKeyDefinition::from_json(&rec.partition_key)
            .map_err(|e| StoreError::Corrupt(format!("container {}: {e}", rec.id)))?;
        let ranges = rec
            .ranges
            .iter()
            .map(|r| RangeState::new(r.clone(), r.created_lsn))
            .collect();
        let map = PartitionMap {
            ranges,
            next_range_id: rec.next_range_id,
            generation: rec.ranges_generation,
            retired: HashMap::new(),
            swapping: Vec::new(),
            splitting: Vec::new(),
        };
        let index = RwLock::new(IndexState::of(&rec));
        // Validated when set; a stored definition that no longer parses defines nothing.
        let computed = strata_query::sql::computed::parse(rec.props.get("computedProperties"))
            .unwrap_or_default();
        let doc_counts = doc_numbers::DocCounts::load(&engine, rec.cid, lsn)?;
        let scripts = scripts::load(&engine, rec.cid)?;
        let vectors = vectors::Vectors::of(
            &strata_query::index::vector::VectorPolicy::from_props(&rec.props).unwrap_or_default(),
            limits.vector_rows.as_ref(),
        );
        let c = Self {
            scripts: RwLock::new(Arc::new(scripts)),
            doc_counts: Mutex::new(doc_counts),
            computed: RwLock::new(Arc::new(computed)),
            index,
            index_done: AtomicU64::new(0),
            index_total: AtomicU64::new(0),
            defined_cache: Default::default(),
            cid: rec.cid,
            db: rec.db.clone(),
            db_seq: rec.db_seq,
            id: rec.id.clone(),
            rid: catalog::coll_rid(rec.db_seq, rec.cid),
            db_rid: catalog::db_rid(rec.db_seq),
            alt_content_path: format!("dbs/{}/colls/{}", rec.db, rec.id),
            codec: keys::KeyCodec::of(&pk),
            pk,
            meta: RwLock::new(rec),
            map: RwLock::new(map),
            log: Log::new(lsn),
            splitting: AtomicBool::new(false),
            throughput_split_stuck_at: AtomicU64::new(u64::MAX),
            deleted: AtomicBool::new(false),
            turn: tokio::sync::Mutex::new(()),
            script_turns: tokio::sync::Semaphore::new(1),
            lp_sizes: Mutex::new(LpSizes::default()),
            // LSN 0: no change was ever made to it (a container just created).
            superseded: settled::Superseded::new(engine.replayed(Space::Items).filter(|_| lsn > 0)),
            hot: hot::HotItems::new(if engine.is_remote() {
                0
            } else {
                hot::HOT_BYTES
            }),
            vectors,
            word_totals: Default::default(),
            postings: Default::default(),
            text: Default::default(),
            history_holds: Default::default(),
            gsi_phase: Default::default(),
            engine,
            limits,
        };
        c.recompute_stats()?;
        Ok(c)
    }

    /// Recomputes per-range bytes and counts from the logical partition sizes.
    pub fn recompute_stats(&self) -> Result<(), StoreError> {
        let prefix = keys::container_prefix(self.cid);
        let end = super::engine::prefix_end(&prefix).unwrap_or_default();
        let mut map = write(&self.map);
        for r in map.ranges.iter_mut() {
            r.bytes = 0;
            r.count = 0;
        }
        let mut start = prefix.clone();
        let mut first = true;
        loop {
            let lower = if first {
                Bound::Included(&start[..])
            } else {
                Bound::Excluded(&start[..])
            };
            let chunk =
                self.engine
                    .scan(Space::Partitions, lower, Bound::Excluded(&end), 4096, false)?;
            if chunk.is_empty() {
                break;
            }
            for (k, v) in &chunk {
                let epk = self.codec.epk_hex(&k[4..]).unwrap_or_default();
                let (bytes, count) = decode_lp(v);
                let i = map.index_of(&epk);
                map.ranges[i].bytes += bytes;
                map.ranges[i].count += count;
            }
            start = chunk.last().map(|(k, _)| k.clone()).unwrap_or_default();
            first = false;
        }
        Ok(())
    }

    /// The computed properties queries may read.
    pub fn computed(&self) -> Arc<Vec<ComputedProperty>> {
        Arc::clone(&read(&self.computed))
    }

    /// Replaces the computed properties (after the container's properties changed).
    pub fn set_computed(&self, computed: Vec<ComputedProperty>) {
        *write(&self.computed) = Arc::new(computed);
    }

    pub fn current_lsn(&self) -> u64 {
        self.log.current()
    }

    /// The container's `defaultTtl`, if TTL is enabled.
    pub fn default_ttl(&self) -> Option<i64> {
        read(&self.meta)
            .props
            .get("defaultTtl")
            .and_then(Value::as_i64)
    }

    /// The position a token's hex (from [`DocPos::to_hex`]) names in this container, if it
    /// names one.
    pub fn doc_pos(&self, hex: &str) -> Option<DocPos> {
        let suffix = strata_query::pk::epk::decode_hex(hex)?;
        // In hex a position has the EPK's terminator; in binary any bytes are one (a page that
        // ended with a physical partition resumes at its bound, shorter than a document EPK).
        // A document position from before the store's migration to binary EPKs is refused
        // rather than read in the wrong spelling (see `super::format`).
        match self.codec {
            keys::KeyCodec::Hex => {
                self.codec.split_doc(&suffix)?;
            }
            keys::KeyCodec::Binary(n) if keys::format1_doc(&suffix, n).is_some() => return None,
            keys::KeyCodec::Binary(_) => {}
        }
        let mut key = keys::container_prefix(self.cid);
        key.extend_from_slice(&suffix);
        Some(DocPos(key))
    }

    /// The id of the document at `pos`, read from its key; `None` when the key holds none.
    /// The document itself may be gone or expired: only its key is read.
    pub fn id_at<'a>(&self, pos: &'a DocPos) -> Option<&'a str> {
        self.codec.parse_item_key(&pos.0).map(|(_, _, id)| id)
    }

    /// The position just before every document of EPK `epk`.
    pub fn position_before(&self, epk: &str) -> DocPos {
        DocPos(self.codec.epk_bound(self.cid, epk))
    }

    /// A document position just before every document of EPK `epk` (that of an empty id,
    /// which no document has), one a continuation token can carry: where a page that ended
    /// with a physical partition resumes.
    pub fn position_at_start_of(&self, epk: &str) -> DocPos {
        DocPos(self.codec.item_key(self.cid, epk, ""))
    }

    /// The item keys of the documents with EPK in `range`: `[start, end)`.
    pub(in crate::store) fn key_bounds(&self, range: &EpkRange) -> (Vec<u8>, Vec<u8>) {
        let start = self.codec.epk_bound(self.cid, &range.min);
        let end = if range.max.as_str() >= "FF" {
            keys::container_prefix(self.cid + 1)
        } else {
            self.codec.epk_bound(self.cid, &range.max)
        };
        (start, end)
    }

    /// Waits until the write behind `token` is durable (at once in memory).
    pub async fn durable(&self, token: Durable) -> Result<(), StoreError> {
        Ok(self.engine.durable(token).await?)
    }

    /// The turn a request's transaction waits for before [`Container::write`]: a fair
    /// (first come, first served) queue, awaited without holding a thread, so a transaction
    /// that runs long — a script's, up to its time budget — delays the writes behind it but
    /// neither starves them nor blocks the server's workers.
    pub async fn write_turn(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.turn.lock().await
    }

    /// Taken by a script transaction before it queues for its [`Container::write_turn`]:
    /// with one script in the queue at a time, a plain write waits for at most one script's
    /// budget however many scripts are called at once.
    pub async fn script_turn(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        self.script_turns.acquire().await.ok()
    }

    /// Per physical partition (by index in the map), the bytes and documents `txn` adds and
    /// the LSN it leaves the partition at (when it writes there).
    fn range_deltas<'a>(
        &self,
        lp_delta: &HashMap<String, txn::LpDelta>,
        written: impl Iterator<Item = &'a String>,
        last_lsn: u64,
    ) -> HashMap<usize, (i64, i64, u64)> {
        let mut range_delta: HashMap<usize, (i64, i64, u64)> = HashMap::new();
        let map = read(&self.map);
        for (epk, d) in lp_delta {
            let e = range_delta.entry(map.index_of(epk)).or_default();
            e.0 += d.bytes;
            e.1 += d.count;
        }
        for epk in written {
            range_delta.entry(map.index_of(epk)).or_default().2 = last_lsn;
        }
        range_delta
    }

    /// Runs `f` as one transaction on the container's log: everything it stages commits
    /// together, or nothing does if it fails. Returns `f`'s result and the token to await for
    /// durability.
    pub fn write<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce(&mut Txn<'_>) -> Result<T, E>,
    ) -> Result<(T, Durable), E> {
        if self.deleted.load(Ordering::Acquire) {
            return Err(
                StoreError::NotFound(format!("The container '{}' was deleted.", self.id)).into(),
            );
        }
        let tx = self.engine.begin(&self.log);
        let mut txn = Txn {
            maintainers: self.maintainers(),
            vector_changes: Vec::new(),
            postings_patches: Vec::new(),
            postings_touched: Vec::new(),
            length_changes: Vec::new(),
            text_lengths: None,
            text_changes: Vec::new(),
            text_seen: false,
            c: self,
            unique_staged: HashMap::new(),
            history: self.keeps_history(),
            expiring: false,
            docs_taken: Vec::new(),
            tx,
            staged: HashMap::new(),
            lp_delta: HashMap::new(),
            now: catalog::now_secs(),
            default_ttl: self.default_ttl(),
            deleted_any: false,
            superseded: Vec::new(),
            undo: None,
        };
        let out = f(&mut txn)?;
        if txn.tx.is_empty() {
            return Ok((out, Durable::default()));
        }
        let last_lsn = txn.tx.last_lsn();
        let docs_taken = std::mem::take(&mut txn.docs_taken);
        let mut tx = txn.tx;
        doc_numbers::persist(&mut tx, self.cid, &docs_taken);
        let written = txn.staged.keys().map(|(epk, _)| epk);
        let range_delta = self.range_deltas(&txn.lp_delta, written, last_lsn);
        for (epk, d) in &txn.lp_delta {
            // An update that kept the document's size (most do) leaves the stored entry as it
            // is: one memtable insert fewer per write.
            if d.bytes == 0 && d.count == 0 {
                continue;
            }
            let key = self.codec.partition_key(self.cid, epk);
            match d.total {
                (b, c) if c > 0 => tx.put(Space::Partitions, key, encode_lp(b, c)),
                _ => tx.delete(Space::Partitions, key),
            }
        }
        // The newest change-feed entry records the last LSN, so restarts recover it from
        // there; only a delete can remove that entry, so only then is the LSN stored itself.
        if txn.deleted_any {
            tx.put(
                Space::Catalog,
                keys::catalog_lsn(self.cid),
                last_lsn.to_be_bytes().to_vec(),
            );
        }
        // Held across the commit: the next transaction (it waits for the log this commit
        // releases) reads sizes only after they are updated below.
        let mut sizes = lock(&self.lp_sizes);
        // Held across the commit too, so the vector sets take changes in commit order.
        let order = (!txn.vector_changes.is_empty()).then(|| lock(&self.vectors.order));
        // Held across the commit and the totals' update (see `WordTotals`).
        let counting = (!txn.length_changes.is_empty()).then(|| self.word_totals.gate());
        // Held across the commit and the batch's update (see `text_pending::Gate`).
        let text_gate = txn.text_seen.then(|| self.text.gate());
        // Under the size lock too, so the cache of hot items takes versions in commit order.
        let keys: Vec<(Vec<u8>, Option<&StoredItem>)> = (txn.staged.iter())
            .map(|((epk, id), v)| (self.codec.item_key(self.cid, epk, id), v.as_ref()))
            .collect();
        // The logical partitions of those items too, which the cache may keep whole (their
        // keys built only when the cache is on).
        let items = keys.iter().map(|(k, _)| std::borrow::Cow::Borrowed(&k[..]));
        let partitions = (txn.staged.keys())
            .map(|(epk, _)| std::borrow::Cow::Owned(self.codec.partition_key(self.cid, epk)));
        let busy = self.hot.start(items.chain(partitions));
        let committed = tx.commit();
        // Whether or not it committed (a remote store's dropped answer leaves it unknown).
        if !txn.superseded.is_empty() {
            let (engine, g) = (&self.engine, self.engine.generation(Space::Items));
            let keys = txn.superseded.iter().map(|k| &k[..]);
            self.superseded
                .count(keys, g, || engine.unsettled_from(Space::Items));
        }
        let put = keys.iter().filter(|_| committed.is_ok());
        self.hot.end(busy, put.map(|(k, v)| (&k[..], *v)));
        let changes = std::mem::take(&mut txn.text_changes);
        self.take_text(text_gate, changes, last_lsn, committed.is_ok());
        // Even when the outcome is unknown (a remote store's dropped answer): the write may
        // be visible, and decoded postings must not outlive it.
        let (patches, touched) = (&txn.postings_patches, &txn.postings_touched);
        self.postings.patch(patches, touched, committed.is_ok());
        if counting.is_some() {
            self.word_totals
                .settle(&txn.length_changes, committed.is_ok());
        }
        drop(counting);
        let token = committed.map_err(StoreError::from)?;
        for (epk, d) in &txn.lp_delta {
            sizes.set(epk, d.total);
        }
        drop(sizes);
        for (ix, change) in txn.vector_changes {
            ix.observe(change);
        }
        drop(order);
        if !docs_taken.is_empty() {
            lock(&self.doc_counts).settle(&docs_taken);
        }
        let mut map = write(&self.map);
        for (i, (db, dc, lsn)) in range_delta {
            let r = &mut map.ranges[i];
            r.bytes = (r.bytes as i64 + db).max(0) as u64;
            r.count = (r.count as i64 + dc).max(0) as u64;
            r.lsn = r.lsn.max(lsn);
            r.writes.fetch_add(1, Ordering::Relaxed);
        }
        Ok((out, token))
    }

    /// Persists the catalog record (properties and current partition map).
    /// Reads the container's properties as last written (id, user properties, ts, etag,
    /// throughput) without copying them.
    pub fn with_meta<T>(&self, f: impl FnOnce(&ContainerRecord) -> T) -> T {
        f(&read(&self.meta))
    }

    /// The provisioned throughput of the container itself, if any.
    pub fn throughput(&self) -> Option<super::catalog::Throughput> {
        read(&self.meta).throughput.clone()
    }

    /// Whether splits the provisioned throughput calls for are still to be made.
    /// The limits this container was opened with (split size, logical partition size,
    /// script timeout, query memory).
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    pub fn record(&self) -> ContainerRecord {
        let mut rec = read(&self.meta).clone();
        let map = read(&self.map);
        rec.ranges = map.ranges.iter().map(|r| r.rec.clone()).collect();
        rec.next_range_id = map.next_range_id;
        rec.ranges_generation = map.generation;
        let index = read(&self.index);
        rec.index_gen = Some(index.gen);
        rec.index_building = !index.ready;
        rec
    }

    /// Runs `f` while no write can start (for splits and property changes).
    pub fn with_writes_paused<T>(&self, f: impl FnOnce() -> T) -> T {
        self.log.paused(f)
    }
}

pub fn encode_lp(bytes: u64, count: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(16);
    v.extend_from_slice(&bytes.to_be_bytes());
    v.extend_from_slice(&count.to_be_bytes());
    v
}

pub fn decode_lp(v: &[u8]) -> (u64, u64) {
    if v.len() < 16 {
        return (0, 0);
    }
    (
        u64::from_be_bytes(v[..8].try_into().expect("8 bytes")),
        u64::from_be_bytes(v[8..16].try_into().expect("8 bytes")),
    )
}

pub fn lock<T>(l: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    l.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

pub fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}
