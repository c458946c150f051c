//! Everything durable: the catalog of databases and containers, the items, and the engine.
//!
//! [`Store`] is the one cheap handle the API layer holds. Catalog changes (creating or deleting
//! databases and containers, splits) are rare and serialized; item writes go through
//! [`Container::write`] and are serialized per container only.

pub mod catalog;
pub mod container;
pub mod engine;
pub mod format;
mod gsi;
pub mod index;
pub mod keys;
pub mod kv;
pub mod partition_map;
pub mod record;
pub mod ttl;
pub mod users;

pub use container::{changes, history, lookup, reindex, scripts, split};

use catalog::{
    ContainerRecord, Counters, DatabaseRecord, RangeRecord, Throughput, ThroughputRequest,
};
use container::{read, write, Container, Limits};
use engine::{Engine, KvError, Op, Space};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, RwLock};
use strata_query::pk::PartitionKeyDefinition;

/// Store-level failures; the API maps each to a Cosmos status code.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    PreconditionFailed(String),
    #[error("{0}")]
    BadRequest(String),
    /// A logical partition would exceed its size limit (403, sub-status 1014).
    #[error("{0}")]
    PartitionKeyFull(String),
    /// A partition key range id that no longer exists (410, sub-status 1002).
    #[error("{0}")]
    RangeGone(String),
    #[error(transparent)]
    Engine(#[from] KvError),
    #[error("{0}")]
    Corrupt(String),
}

/// How the store is set up.
#[derive(Debug, Clone, Default)]
pub struct StoreConfig {
    /// Where data lives; `None` keeps everything in memory.
    pub data_dir: Option<PathBuf>,
    /// A PostgreSQL URL: data lives there instead (`data_dir` then keeps only the local files:
    /// certificate, copy jobs; the token key lives in the store). See `docs/postgres.md`.
    pub postgres: Option<String>,
    pub limits: Limits,
}

/// The store handle (cheap to clone).
#[derive(Clone)]
pub struct Store {
    inner: Arc<StoreInner>,
}

struct StoreInner {
    engine: Engine,
    limits: Limits,
    catalog: RwLock<Catalog>,
    /// Serializes catalog changes, which await durability while holding it.
    ddl: tokio::sync::Mutex<()>,
    counters: Mutex<Counters>,
    /// Users and permissions (see [`users`]).
    users: RwLock<users::Users>,
    /// Flips to true on shutdown; background tasks watch it.
    stop: tokio::sync::watch::Sender<bool>,
    /// Where vector sets are written at a clean shutdown and read back at the next start
    /// (see `vector::set::snapshot`); `None` in memory and on PostgreSQL.
    snapshots: Option<PathBuf>,
}

#[derive(Default)]
struct Catalog {
    dbs: BTreeMap<String, DatabaseRecord>,
    /// By database id, then container id (looked up by `&str`, without allocating).
    containers: BTreeMap<String, BTreeMap<String, Arc<Container>>>,
}

impl Store {
    /// Opens the store: recovers the catalog and resumes unfinished purges.
    pub fn open(cfg: StoreConfig) -> Result<Self, StoreError> {
        let engine = Engine::new(kv::open(cfg.postgres.as_deref(), cfg.data_dir.as_deref())?);
        Self::open_on(engine, cfg)
    }

    /// [`Store::open`] over an engine opened already (e.g. once another process let go of a
    /// shared store, see `crate::follower`).
    pub fn open_on(engine: Engine, cfg: StoreConfig) -> Result<Self, StoreError> {
        if let (Some(_), Some(d)) = (&cfg.postgres, &cfg.data_dir) {
            // The data folder still keeps the local files (certificate, copy jobs).
            std::fs::create_dir_all(d).map_err(KvError::from)?;
        }
        let counters = match engine.get(Space::Catalog, keys::CATALOG_COUNTERS)? {
            Some(v) => serde_json::from_slice(&v)
                .map_err(|e| StoreError::Corrupt(format!("catalog counters: {e}")))?,
            None => Counters::default(),
        };
        format::migrate(&engine)?;
        let mut cfg = cfg;
        // Vector rows live beside the data of a local store, as its snapshots do.
        if let (None, Some(d)) = (&cfg.postgres, &cfg.data_dir) {
            cfg.limits.vector_rows = Some(crate::vector::rows::Place {
                dir: d.join("vector-rows"),
                budget: crate::vector::rows::Budget::new(cfg.limits.vector_rows_memory_bytes),
            });
        }
        let mut cat = Catalog::default();
        // Vector-set snapshots live beside the data of a local store (not one on PostgreSQL,
        // which several processes share).
        let snapshots = match (&cfg.postgres, &cfg.data_dir) {
            (None, Some(d)) => Some(d.join("vector-snapshots")),
            _ => None,
        };
        for (_, v) in scan_prefix(&engine, Space::Catalog, b"db/")? {
            let rec: DatabaseRecord = serde_json::from_slice(&v)
                .map_err(|e| StoreError::Corrupt(format!("database record: {e}")))?;
            cat.dbs.insert(rec.id.clone(), rec);
        }
        for (_, v) in scan_prefix(&engine, Space::Catalog, b"coll/")? {
            let rec: ContainerRecord = serde_json::from_slice(&v)
                .map_err(|e| StoreError::Corrupt(format!("container record: {e}")))?;
            // The last LSN: the newest change-feed entry, or the stored one (written when a
            // delete may have removed the newest entry), whichever is higher.
            let stored = engine
                .get(Space::Catalog, &keys::catalog_lsn(rec.cid))?
                .and_then(|v| v[..].try_into().ok().map(u64::from_be_bytes))
                .unwrap_or(0);
            let newest = engine
                .scan(
                    Space::Feed,
                    Bound::Included(&keys::container_prefix(rec.cid)),
                    Bound::Excluded(&keys::container_prefix(rec.cid + 1)),
                    1,
                    true,
                )?
                .first()
                .and_then(|(k, _)| keys::parse_feed_key(k))
                .map(|(_, lsn)| lsn)
                .unwrap_or(0);
            let lsn = stored.max(newest);
            let (db, id) = (rec.db.clone(), rec.id.clone());
            let c = Arc::new(Container::load(
                rec,
                lsn,
                engine.clone(),
                cfg.limits.clone(),
            )?);
            c.catch_up_text()?;
            c.start_vectors(snapshots.as_deref());
            cat.containers.entry(db).or_default().insert(id, c);
        }
        let db_seqs: std::collections::HashMap<String, u32> =
            cat.dbs.iter().map(|(k, d)| (k.clone(), d.seq)).collect();
        let users = users::load(&engine, &|db| db_seqs.get(db).copied())?;
        let pending: Vec<u32> = scan_prefix(&engine, Space::Catalog, b"purge/")?
            .into_iter()
            .filter_map(|(k, _)| k[6..].try_into().ok().map(u32::from_be_bytes))
            .collect();
        let store = Self {
            inner: Arc::new(StoreInner {
                engine,
                limits: cfg.limits,
                catalog: RwLock::new(cat),
                ddl: tokio::sync::Mutex::new(()),
                counters: Mutex::new(counters),
                users: RwLock::new(users),
                stop: tokio::sync::watch::channel(false).0,
                snapshots,
            }),
        };
        for cid in pending {
            store.spawn_purge(cid);
        }
        store.restore_gsi_holds()?;
        // Index builds a restart interrupted (or that stores written before strata indexed
        // never had) start over; queries read documents until they finish.
        let unbuilt: Vec<Arc<Container>> = read(&store.inner.catalog)
            .containers
            .values()
            .flat_map(|m| m.values())
            .filter(|c| !c.index_state().ready)
            .cloned()
            .collect();
        for c in unbuilt {
            store.spawn_index_build(c);
        }
        Ok(store)
    }

    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// Stops background tasks, then flushes and stops the engine (clean shutdown).
    pub fn shutdown(&self) -> Result<(), StoreError> {
        self.inner.stop.send_replace(true);
        // Pending full-text postings folded: the next start has none to read again.
        for c in self.all_containers() {
            if c.text_pending() > 0 {
                if let Err(e) = c.fold_text_now() {
                    tracing::warn!(container = %c.id, error = %e, "folding full-text postings at shutdown failed");
                }
            }
        }
        if let Some(dir) = &self.inner.snapshots {
            for c in self.all_containers() {
                c.save_vectors(dir);
            }
        }
        Ok(self.inner.engine.shutdown()?)
    }

    /// A receiver that changes when the store shuts down.
    pub fn stop_signal(&self) -> tokio::sync::watch::Receiver<bool> {
        self.inner.stop.subscribe()
    }

    fn next_counters(&self, f: impl FnOnce(&mut Counters)) -> (Counters, Op) {
        let mut c = self
            .inner
            .counters
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        f(&mut c);
        let op = Op::Put(
            Space::Catalog,
            keys::CATALOG_COUNTERS.to_vec(),
            serde_json::to_vec(&*c).unwrap_or_default(),
        );
        (c.clone(), op)
    }

    /// A fresh etag sequence number (for database, container and offer etags).
    pub fn next_etag_seq(&self) -> (u64, Op) {
        let (c, op) = self.next_counters(|c| c.next_etag_seq += 1);
        (c.next_etag_seq, op)
    }

    // ---- databases -------------------------------------------------------------------------

    pub fn list_databases(&self) -> Vec<DatabaseRecord> {
        read(&self.inner.catalog).dbs.values().cloned().collect()
    }

    /// Finds a database by id, or by `_rid` (rid-based links).
    pub fn database(&self, id: &str) -> Result<DatabaseRecord, StoreError> {
        let cat = read(&self.inner.catalog);
        if let Some(d) = cat.dbs.get(id) {
            return Ok(d.clone());
        }
        cat.dbs
            .values()
            .find(|d| catalog::db_rid(d.seq) == id)
            .cloned()
            .ok_or_else(|| {
                StoreError::NotFound(format!(
                    "Database '{id}' does not exist (resource not found)."
                ))
            })
    }

    pub async fn create_database(
        &self,
        id: &str,
        throughput: Option<ThroughputRequest>,
    ) -> Result<DatabaseRecord, StoreError> {
        let _ddl = self.inner.ddl.lock().await;
        if read(&self.inner.catalog).dbs.contains_key(id) {
            return Err(StoreError::Conflict(format!(
                "Database '{id}' already exists: the id must be unique within the account."
            )));
        }
        let (c, counter_op) = self.next_counters(|c| {
            c.next_db_seq += 1;
            c.next_etag_seq += 1;
            if throughput.is_some() {
                c.next_offer_seq += 1;
            }
        });
        let now = catalog::now_secs();
        let rec = DatabaseRecord {
            id: id.to_string(),
            seq: c.next_db_seq,
            ts: now,
            etag_seq: c.next_etag_seq,
            throughput: throughput.map(|t| Throughput {
                manual: t.manual,
                autoscale_max: t.autoscale_max,
                autoscale_increment_percent: t.autoscale_increment_percent,
                buckets: Default::default(),
                buckets_changed: 0,
                offer_seq: c.next_offer_seq,
                ts: now,
                etag_seq: c.next_etag_seq,
            }),
        };
        let body = serde_json::to_vec(&rec).unwrap_or_default();
        self.inner
            .engine
            .write_durable(vec![
                counter_op,
                Op::Put(Space::Catalog, keys::catalog_database(id), body),
            ])
            .await?;
        write(&self.inner.catalog)
            .dbs
            .insert(id.to_string(), rec.clone());
        Ok(rec)
    }

    /// Deletes a database and all its containers (their items are purged in the background).
    pub async fn delete_database(&self, id: &str) -> Result<(), StoreError> {
        let _ddl = self.inner.ddl.lock().await;
        let db = self.database(id)?;
        let doomed: Vec<Arc<Container>> = read(&self.inner.catalog)
            .containers
            .get(&db.id)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default();
        let mut ops = vec![Op::Delete(Space::Catalog, keys::catalog_database(&db.id))];
        ops.extend(self.users_delete_ops(&db.id));
        for c in &doomed {
            ops.push(Op::Delete(Space::Catalog, keys::catalog_container(c.cid)));
            ops.push(Op::Put(
                Space::Catalog,
                keys::catalog_purge(c.cid),
                Vec::new(),
            ));
        }
        self.inner.engine.write_durable(ops).await?;
        {
            let mut cat = write(&self.inner.catalog);
            cat.dbs.remove(&db.id);
            cat.containers.remove(&db.id);
        }
        self.forget_users(&db.id, db.seq);
        for c in doomed {
            c.deleted.store(true, Ordering::Release);
            self.spawn_purge(c.cid);
        }
        Ok(())
    }

    /// Replaces a database's shared throughput record.
    pub async fn set_database_throughput(
        &self,
        id: &str,
        t: Option<Throughput>,
    ) -> Result<DatabaseRecord, StoreError> {
        let _ddl = self.inner.ddl.lock().await;
        let mut db = self.database(id)?;
        db.throughput = t;
        let body = serde_json::to_vec(&db).unwrap_or_default();
        self.inner
            .engine
            .write_durable(vec![Op::Put(
                Space::Catalog,
                keys::catalog_database(&db.id),
                body,
            )])
            .await?;
        write(&self.inner.catalog)
            .dbs
            .insert(db.id.clone(), db.clone());
        Ok(db)
    }

    // ---- containers ------------------------------------------------------------------------

    pub fn list_containers(&self, db: &str) -> Result<Vec<Arc<Container>>, StoreError> {
        let db = self.database(db)?;
        Ok(read(&self.inner.catalog)
            .containers
            .get(&db.id)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default())
    }

    /// Every container of every database.
    pub fn all_containers(&self) -> Vec<Arc<Container>> {
        read(&self.inner.catalog)
            .containers
            .values()
            .flat_map(|m| m.values().cloned())
            .collect()
    }

    /// The RU/s of a database with shared throughput, if it has any.
    pub fn database_throughput(&self, id: &str) -> Option<u64> {
        read(&self.inner.catalog)
            .dbs
            .get(id)
            .and_then(|d| d.throughput.as_ref().map(Throughput::max_ru))
    }

    /// Finds a container by database and container id (or `_rid`s).
    pub fn container(&self, db: &str, id: &str) -> Result<Arc<Container>, StoreError> {
        // The common case: both names, no allocation.
        if let Some(c) = read(&self.inner.catalog)
            .containers
            .get(db)
            .and_then(|m| m.get(id))
        {
            return Ok(Arc::clone(c));
        }
        let dbrec = self.database(db)?;
        let cat = read(&self.inner.catalog);
        if let Some(c) = cat.containers.get(&dbrec.id).and_then(|m| m.get(id)) {
            return Ok(Arc::clone(c));
        }
        cat.containers
            .get(&dbrec.id)
            .and_then(|m| m.values().find(|c| c.rid == id))
            .map(Arc::clone)
            .ok_or_else(|| {
                StoreError::NotFound(format!(
                    "Container '{id}' does not exist in database '{}' (resource not found).",
                    dbrec.id
                ))
            })
    }

    /// Finds a container by its `_rid` alone (offers link containers by rid).
    pub fn container_by_rid(&self, rid: &str) -> Option<Arc<Container>> {
        read(&self.inner.catalog)
            .containers
            .values()
            .flat_map(|m| m.values())
            .find(|c| c.rid == rid)
            .cloned()
    }

    pub async fn create_container(
        &self,
        db: &str,
        id: &str,
        pk: PartitionKeyDefinition,
        mut props: Map<String, Value>,
        throughput: Option<ThroughputRequest>,
    ) -> Result<Arc<Container>, StoreError> {
        let _ddl = self.inner.ddl.lock().await;
        let dbrec = self.database(db)?;
        if read(&self.inner.catalog)
            .containers
            .get(&dbrec.id)
            .is_some_and(|m| m.contains_key(id))
        {
            return Err(StoreError::Conflict(format!(
                "Container '{id}' already exists in database '{}'.",
                dbrec.id
            )));
        }
        catalog::default_container_props(&mut props);
        index::validate(&props)?;
        history::validate(&props)?;
        computed_properties(&props)?;
        let gsi_source = self.check_new_gsi(&dbrec.id, &mut props)?;
        let (c, counter_op) = self.next_counters(|c| {
            c.next_cid += 1;
            c.next_etag_seq += 1;
            if throughput.is_some() {
                c.next_offer_seq += 1;
            }
        });
        let now = catalog::now_secs();
        let t = throughput.map(|t| Throughput {
            manual: t.manual,
            autoscale_max: t.autoscale_max,
            autoscale_increment_percent: t.autoscale_increment_percent,
            buckets: t.buckets.unwrap_or_default(),
            buckets_changed: 0,
            offer_seq: c.next_offer_seq,
            ts: now,
            etag_seq: c.next_etag_seq,
        });
        let most = u64::from(self.inner.limits.max_partitions.max(1));
        let n = match self.inner.limits.initial_partitions {
            Some(n) => u64::from(n.max(1)).min(most) as usize,
            None => t
                .as_ref()
                .map_or(1, Throughput::partitions_at_creation)
                .min(most) as usize,
        };
        let bounds = strata_query::pk::epk::even_boundaries(&pk, n);
        let mut ranges = Vec::with_capacity(n);
        let mut lo = String::new();
        for (i, hi) in bounds
            .into_iter()
            .chain(std::iter::once("FF".to_string()))
            .enumerate()
        {
            ranges.push(RangeRecord {
                id: i as u32,
                min: std::mem::replace(&mut lo, hi.clone()),
                max: hi,
                parents: Vec::new(),
                created_lsn: 0,
            });
        }
        let rec = ContainerRecord {
            cid: c.next_cid,
            db: dbrec.id.clone(),
            db_seq: dbrec.seq,
            id: id.to_string(),
            partition_key: pk.to_json(),
            props,
            ts: now,
            etag_seq: c.next_etag_seq,
            throughput: t,
            next_range_id: n as u32,
            ranges,
            ranges_generation: 1,
            index_gen: Some(0),
            index_building: false,
        };
        let body = serde_json::to_vec(&rec).unwrap_or_default();
        self.inner
            .engine
            .write_durable(vec![
                counter_op,
                Op::Put(Space::Catalog, keys::catalog_container(rec.cid), body),
                // Its partitions count documents from 1 (see `container::doc_numbers`).
                Op::Put(
                    Space::Catalog,
                    keys::catalog_doc_seq(rec.cid),
                    0u64.to_be_bytes().to_vec(),
                ),
            ])
            .await?;
        let container = Arc::new(Container::load(
            rec,
            0,
            self.inner.engine.clone(),
            self.inner.limits.clone(),
        )?);
        container.start_vectors(None);
        if let Some(source) = gsi_source {
            // From here on the source logs every change for the index to apply.
            source.hold_history_from_now(container.cid);
        }
        write(&self.inner.catalog)
            .containers
            .entry(dbrec.id)
            .or_default()
            .insert(id.to_string(), Arc::clone(&container));
        Ok(container)
    }

    /// Persists a container's current record (after property, throughput or range changes).
    pub async fn persist_container(&self, c: &Container) -> Result<(), StoreError> {
        let body = serde_json::to_vec(&c.record()).unwrap_or_default();
        self.inner
            .engine
            .write_durable(vec![Op::Put(
                Space::Catalog,
                keys::catalog_container(c.cid),
                body,
            )])
            .await?;
        Ok(())
    }

    /// Replaces a container's user-settable properties (the partition key cannot change).
    pub async fn replace_container(
        &self,
        c: &Arc<Container>,
        mut props: Map<String, Value>,
    ) -> Result<(), StoreError> {
        let _ddl = self.inner.ddl.lock().await;
        catalog::default_container_props(&mut props);
        history::validate(&props)?;
        Self::check_gsi_replace(c, &mut props)?;
        let computed = computed_properties(&props)?;
        let reindex = self.reindex_for(c, &props)?;
        c.set_computed(computed);
        let vectors_before = c.vector_policy();
        let (etag_seq, counter_op) = self.next_etag_seq();
        {
            let mut m = write(&c.meta);
            m.props = props;
            m.ts = catalog::now_secs();
            m.etag_seq = etag_seq;
        }
        let body = serde_json::to_vec(&c.record()).unwrap_or_default();
        self.inner
            .engine
            .write_durable(vec![
                counter_op,
                Op::Put(Space::Catalog, keys::catalog_container(c.cid), body),
            ])
            .await?;
        if c.vector_policy() != vectors_before {
            c.restart_vectors();
        }
        match reindex {
            Some(true) => self.spawn_index_build(Arc::clone(c)),
            Some(false) => self.spawn_index_purge(c),
            None => {}
        }
        Ok(())
    }

    pub async fn delete_container(&self, db: &str, id: &str) -> Result<(), StoreError> {
        let _ddl = self.inner.ddl.lock().await;
        let c = self.container(db, id)?;
        let gsi_source = self.check_gsi_delete(&c)?;
        self.inner
            .engine
            .write_durable(vec![
                Op::Delete(Space::Catalog, keys::catalog_container(c.cid)),
                Op::Put(Space::Catalog, keys::catalog_purge(c.cid), Vec::new()),
            ])
            .await?;
        if let Some(m) = write(&self.inner.catalog).containers.get_mut(&c.db) {
            m.remove(&c.id);
        }
        c.deleted.store(true, Ordering::Release);
        if let Some(source) = gsi_source {
            source.release_history(c.cid);
        }
        self.spawn_purge(c.cid);
        Ok(())
    }

    /// Removes a deleted container's data in the background, in bounded chunks, then its purge
    /// marker. Resumed at startup if the process stopped half way.
    fn spawn_purge(&self, cid: u32) {
        let engine = self.inner.engine.clone();
        let run = move || -> Result<u64, StoreError> {
            let prefix = keys::container_prefix(cid);
            let end = engine::prefix_end(&prefix).unwrap_or_default();
            let mut removed = 0u64;
            for space in [
                Space::Items,
                Space::Feed,
                Space::Partitions,
                Space::Directory,
                Space::Index,
                Space::Unique,
                Space::History,
            ] {
                // A purge the disk lost resumes at the next start: its marker goes last.
                removed += engine.delete_range(space, &prefix, &end)?;
            }
            let scripts = scripts::script_prefix(cid);
            let scripts_end = engine::prefix_end(&scripts).unwrap_or_default();
            removed += engine.delete_range(Space::Catalog, &scripts, &scripts_end)?;
            let (links, links_end) = container::gsi::link_range(cid);
            removed += engine.delete_range(Space::Catalog, &links, &links_end)?;
            // The document counts: the container's floor and one per partition prefix.
            let counts = keys::catalog_doc_seq(cid);
            let counts_end = engine::prefix_end(&counts).unwrap_or_default();
            removed += engine.delete_range(Space::Catalog, &counts, &counts_end)?;
            let _ = engine.write(vec![
                Op::Delete(Space::Catalog, keys::catalog_purge(cid)),
                Op::Delete(Space::Catalog, keys::catalog_lsn(cid)),
                Op::Delete(Space::Catalog, keys::catalog_history_floor(cid)),
                Op::Delete(Space::Catalog, container::gsi::cursor_key(cid)),
            ])?;
            Ok(removed)
        };
        let task = move || match run() {
            Ok(n) => tracing::info!(cid, keys = n, "purged deleted container data"),
            Err(e) => tracing::error!(cid, error = %e, "purging deleted container data failed"),
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn_blocking(task);
            }
            Err(_) => task(),
        }
    }
}

/// Every entry whose key starts with `prefix`.
fn scan_prefix(
    engine: &Engine,
    space: Space,
    prefix: &[u8],
) -> Result<Vec<(Vec<u8>, bytes::Bytes)>, StoreError> {
    let end = engine::prefix_end(prefix).unwrap_or_default();
    Ok(engine.scan(
        space,
        Bound::Included(prefix),
        Bound::Excluded(&end),
        usize::MAX,
        false,
    )?)
}

impl Store {
    /// Replaces a container's provisioned throughput; raising it past 10,000 RU/s per physical
    /// partition starts the splits it calls for.
    pub async fn set_container_throughput(
        &self,
        c: &Arc<Container>,
        t: ThroughputRequest,
    ) -> Result<(), StoreError> {
        let _ddl = self.inner.ddl.lock().await;
        let (etag_seq, counter_op) = self.next_etag_seq();
        {
            let mut m = write(&c.meta);
            let now = catalog::now_secs();
            let old = m.throughput.as_ref();
            let offer_seq = old.map(|x| x.offer_seq).unwrap_or(0);
            let (was, was_changed) =
                old.map_or((Default::default(), 0), |x| (x.buckets, x.buckets_changed));
            let buckets = t.buckets.unwrap_or(was);
            m.throughput = Some(Throughput {
                manual: t.manual,
                autoscale_max: t.autoscale_max,
                autoscale_increment_percent: t.autoscale_increment_percent,
                buckets,
                buckets_changed: if buckets == was { was_changed } else { now },
                offer_seq,
                ts: now,
                etag_seq,
            });
        }
        let body = serde_json::to_vec(&c.record()).unwrap_or_default();
        self.inner
            .engine
            .write_durable(vec![
                counter_op,
                Op::Put(Space::Catalog, keys::catalog_container(c.cid), body),
            ])
            .await?;
        drop(_ddl);
        self.maybe_split(c);
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests;

/// A container's `computedProperties`, validated (400 with the service's wording).
fn computed_properties(
    props: &Map<String, Value>,
) -> Result<Vec<strata_query::sql::computed::ComputedProperty>, StoreError> {
    strata_query::sql::computed::parse(props.get("computedProperties"))
        .map_err(StoreError::BadRequest)
}
