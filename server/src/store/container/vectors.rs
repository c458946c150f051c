//! A container's vector indexes: one [`VectorSet`] per path its `vectorIndexes` name (one graph
//! per value of the index's `vectorIndexShardKey`, else one for the container), kept
//! current with every committed write (in commit order, before the writer hears back, so a
//! writer's next query sees its write) and rebuilt from the documents when the container is
//! opened or its policy changes. While a set is being (re)built, the writes committed meanwhile
//! are journaled and replayed over what the build read; queries rank by evaluating documents
//! until it is ready. diskANN sets link new vectors into their graph on a background thread;
//! until linked, a vector is scanned exactly with every search.
//!
//! The sets live in memory and are derived from the stored documents alone. A clean shutdown
//! of a local store writes each ready set to a file ([`Container::save_vectors`]); the next
//! start reads it back and reconciles it with the documents (those whose version changed are
//! read again, those gone are dropped), so indexed queries are served at once without
//! relinking, and a crash — a missing or older file — loses nothing: the documents decide.

use super::*;
use crate::vector::{Found, Origin, Params, SearchOpts, VectorSet};
use strata_query::index::vector::{Distance, IndexKind, VectorPolicy};
use strata_query::pk::epk::effective_partition_key;
use strata_query::pk::{PartitionKeyDefinition, PartitionKind};

/// One indexed path.
#[derive(Debug)]
pub struct PathIndex {
    /// `/a/b`.
    pub path: String,
    segs: Vec<String>,
    pub params: Params,
    /// The `vectorIndexShardKey` path as a one-level hash key: a vector's shard is its
    /// value's EPK, and the routing of a query's WHERE clause under it names the shards a
    /// query needs.
    pub shard_key: Option<PartitionKeyDefinition>,
    set: RwLock<VectorSet>,
    /// Where the set keeps its rows (`Limits::vector_rows`).
    rows: Option<crate::vector::rows::Place>,
    state: Mutex<Journal>,
    linking: AtomicBool,
    /// Being read back from a snapshot (seconds at most, where rebuilding from the documents
    /// takes minutes): queries over it wait for it (see [`Container::vectors_loaded`]).
    loading: AtomicBool,
}

/// Where a committed change to a set goes.
#[derive(Debug)]
enum Journal {
    /// No build has started: the build will read the change from the documents.
    Unbuilt,
    /// A build is reading the documents: changes wait here, in commit order.
    Building(Vec<Staged>),
    /// The set is current: changes go straight in.
    Ready,
    /// The set is current and a copy without its tombstones is being built
    /// ([`VectorSet::live_copy`]): changes go straight in and wait here too, for the copy.
    Consolidating(Vec<Staged>),
}

/// The container's sets, and the lock that keeps their updates in commit order.
#[derive(Debug, Default)]
pub struct Vectors {
    paths: RwLock<Arc<Vec<Arc<PathIndex>>>>,
    pub(super) order: Mutex<()>,
}

/// One staged change: the set, and what changes in it.
pub(super) type Change = (Arc<PathIndex>, Staged);

/// A document's item key, its vector (`None`: none, or the document is gone), its shard and
/// the version it came from.
#[derive(Debug)]
pub(super) struct Staged {
    pub(super) key: Vec<u8>,
    pub(super) vector: Option<Vec<f32>>,
    pub(super) shard: Vec<u8>,
    pub(super) origin: Origin,
}

impl Staged {
    fn apply(&self, set: &mut VectorSet) {
        set.set(&self.key, self.vector.as_deref(), &self.shard, self.origin);
    }
}

impl Vectors {
    /// The sets `policy` asks for (built later by [`Container::start_vectors`]).
    pub fn of(policy: &VectorPolicy, rows: Option<&crate::vector::rows::Place>) -> Self {
        let paths = policy
            .indexes
            .iter()
            .filter_map(|ix| {
                let e = policy.embedding(&ix.path)?;
                let shard_key = match (ix.kind, ix.shard_key.first()) {
                    (IndexKind::Flat, _) | (_, None) => None,
                    (_, Some(p)) => {
                        PartitionKeyDefinition::new(&[p.as_str()], PartitionKind::Hash, 2).ok()
                    }
                };
                let params = Params {
                    kind: ix.kind,
                    dims: e.dimensions,
                    metric: e.distance,
                    list: ix.indexing_search_list_size.unwrap_or(100) as usize,
                    degree: 32,
                };
                Some(Arc::new(PathIndex {
                    path: ix.path.clone(),
                    segs: ix.path.split('/').skip(1).map(str::to_string).collect(),
                    params,
                    shard_key,
                    set: RwLock::new(VectorSet::with_rows_in(params, rows)),
                    rows: rows.cloned(),
                    state: Mutex::new(Journal::Unbuilt),
                    linking: AtomicBool::new(false),
                    loading: AtomicBool::new(false),
                }))
            })
            .collect();
        Self {
            paths: RwLock::new(Arc::new(paths)),
            order: Mutex::new(()),
        }
    }

    /// The indexed paths (shared; a transaction keeps the list it started with).
    pub fn paths(&self) -> Arc<Vec<Arc<PathIndex>>> {
        Arc::clone(&read(&self.paths))
    }
}

impl PathIndex {
    /// The vector of `doc` at this path (an array of numbers of the set's length), and
    /// whether `f32` holds each of its numbers exactly.
    pub(super) fn extract(&self, doc: &Value) -> Option<(Vec<f32>, bool)> {
        let mut v = doc;
        for s in &self.segs {
            v = v.get(s)?;
        }
        let a = v.as_array()?;
        if a.len() != self.params.dims {
            return None;
        }
        let mut exact = true;
        let row = a
            .iter()
            .map(|x| {
                let f = x.as_f64()?;
                exact &= f64::from(f as f32) == f;
                Some(f as f32)
            })
            .collect::<Option<Vec<f32>>>()?;
        Some((row, exact))
    }

    /// The shard of `doc`'s vector: its shard key value's EPK (empty without a shard key).
    pub(super) fn shard(&self, doc: &Value) -> Vec<u8> {
        let Some(def) = &self.shard_key else {
            return Vec::new();
        };
        effective_partition_key(def, &def.extract(doc))
            .map(String::into_bytes)
            .unwrap_or_default()
    }

    /// Applies one committed change (see [`Journal`]).
    pub(super) fn observe(self: &Arc<Self>, change: Staged) {
        let mut state = lock(&self.state);
        match &mut *state {
            Journal::Unbuilt => {}
            Journal::Building(j) => j.push(change),
            Journal::Ready => {
                let consolidate = {
                    let mut set = write(&self.set);
                    change.apply(&mut set);
                    set.needs_consolidation()
                };
                if consolidate {
                    *state = Journal::Consolidating(Vec::new());
                }
                drop(state);
                self.link_in_background();
                if consolidate {
                    self.consolidate_in_background();
                }
            }
            Journal::Consolidating(j) => {
                change.apply(&mut write(&self.set));
                j.push(change);
                drop(state);
                self.link_in_background();
            }
        }
    }

    /// Replaces the set with a copy of its live vectors built on a thread of its own (see
    /// [`VectorSet::live_copy`]); the set keeps serving meanwhile, and the changes committed
    /// meanwhile are replayed onto the copy before it takes over.
    fn consolidate_in_background(self: &Arc<Self>) {
        let me = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("strata-vector-consolidate".into())
            .spawn(move || {
                let started = std::time::Instant::now();
                // Copied under the read lock (writers wait for a copy of the rows), linked
                // outside it.
                let mut fresh = read(&me.set).live_copy();
                fresh.link_all();
                let mut state = lock(&me.state);
                if let Journal::Consolidating(journal) =
                    std::mem::replace(&mut *state, Journal::Ready)
                {
                    for change in journal {
                        change.apply(&mut fresh);
                    }
                }
                let dropped = read(&me.set).dead();
                *write(&me.set) = fresh;
                drop(state);
                me.link_in_background();
                tracing::info!(
                    path = %me.path, tombstones = dropped,
                    ms = started.elapsed().as_millis() as u64, "vector index consolidated"
                );
            });
        if spawned.is_err() {
            tracing::error!(path = %self.path, "no thread to consolidate a vector index");
            let mut state = lock(&self.state);
            if matches!(*state, Journal::Consolidating(_)) {
                *state = Journal::Ready;
            }
        }
    }

    /// The vectors between the item keys `bounds` of the shards `only` names (all: `None`)
    /// closest to `q`, closest first (see [`VectorSet::search`]).
    pub fn search(
        &self,
        (q, q64): (&[f32], Option<&[f64]>),
        want: usize,
        bounds: (&[u8], &[u8]),
        only: Option<&[Vec<u8>]>,
        opts: SearchOpts,
    ) -> Found {
        read(&self.set).search(q, q64, want, bounds, only, opts)
    }

    /// Live vectors.
    pub fn live(&self) -> usize {
        read(&self.set).len()
    }

    /// Vectors not linked into a graph yet.
    pub fn unlinked(&self) -> usize {
        read(&self.set).unlinked()
    }

    /// Whether queries may read the set.
    pub fn ready(&self) -> bool {
        matches!(
            *lock(&self.state),
            Journal::Ready | Journal::Consolidating(_)
        )
    }

    /// The kind's name as the policy spells it.
    pub fn kind_name(&self) -> &'static str {
        match self.params.kind {
            IndexKind::Flat => "flat",
            IndexKind::QuantizedFlat => "quantizedFlat",
            IndexKind::DiskAnn => "diskANN",
        }
    }

    /// Whether a query measuring with `distance` (lower case) may rank by this set.
    pub fn measures(&self, distance: &str) -> bool {
        Distance::parse(distance) == Some(self.params.metric)
    }

    /// Live vectors, tombstones, slots not yet linked and bytes held.
    pub fn stats(&self) -> (usize, usize, usize, usize) {
        let s = read(&self.set);
        (s.len(), s.dead(), s.unlinked(), s.held_bytes())
    }

    /// Refits the quantizer as the set grows, links unlinked slots into the graph and takes
    /// deleted ones out of it, on a thread of its own, one step at a time
    /// (`vector::set::upkeep`): each step planned under a read lock (queries go on) and
    /// applied under a short write lock.
    fn link_in_background(self: &Arc<Self>) {
        if self.params.kind == IndexKind::Flat || !read(&self.set).has_work() {
            return;
        }
        if self.linking.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("strata-vector-link".into())
            .spawn(move || loop {
                let next = read(&me.set).plan_next();
                match next {
                    Some(w) => write(&me.set).apply(w),
                    None => {
                        me.linking.store(false, Ordering::Release);
                        // A vector appended after the last look and before the flag cleared
                        // would wait for the next write: look once more.
                        if !read(&me.set).has_work() || me.linking.swap(true, Ordering::AcqRel) {
                            return;
                        }
                    }
                }
            });
        if spawned.is_err() {
            self.linking.store(false, Ordering::Release);
        }
    }
}

impl Container {
    /// Starts building the container's vector sets from its documents, each on a thread of
    /// its own, from the snapshots in `snapshots` where there are any; writes committed
    /// meanwhile are journaled and replayed (see [`Journal`]).
    pub fn start_vectors(self: &Arc<Self>, snapshots: Option<&std::path::Path>) {
        for (i, ix) in self.vectors.paths().iter().enumerate() {
            {
                let mut state = lock(&ix.state);
                if !matches!(*state, Journal::Unbuilt) {
                    continue;
                }
                *state = Journal::Building(Vec::new());
            }
            let (c, ix) = (Arc::clone(self), Arc::clone(ix));
            let file = snapshots.map(|d| self.snapshot_file(d, &ix));
            ix.loading
                .store(file.as_ref().is_some_and(|f| f.exists()), Ordering::Release);
            let spawned = std::thread::Builder::new()
                .name("strata-vector-build".into())
                .spawn(move || {
                    let started = std::time::Instant::now();
                    let built = c.build_vectors(&ix, file.as_deref());
                    ix.loading.store(false, Ordering::Release);
                    match built {
                        Ok((n, kept)) => tracing::info!(
                            container = %c.id, path = %ix.path, kind = ix.kind_name(), vectors = n,
                            from_snapshot = kept,
                            ms = started.elapsed().as_millis() as u64, "vector index read"
                        ),
                        Err(e) => {
                            tracing::error!(container = %c.id, path = %ix.path, error = %e, "building a vector index failed");
                            *lock(&ix.state) = Journal::Unbuilt;
                        }
                    }
                });
            if spawned.is_err() {
                tracing::error!(container = %self.id, index = i, "no thread for a vector index build");
            }
        }
    }

    /// Where the snapshot of `ix` lives in `dir`.
    fn snapshot_file(&self, dir: &std::path::Path, ix: &PathIndex) -> std::path::PathBuf {
        let path = xxhash_rust::xxh3::xxh3_64(ix.path.as_bytes());
        dir.join(format!("{}-{path:016x}.vectors", self.cid))
    }

    /// Writes each ready set to its snapshot in `dir` (a clean shutdown), through a file
    /// renamed into place once whole. A set that cannot be written is logged and left to be
    /// rebuilt from the documents at the next start.
    pub fn save_vectors(&self, dir: &std::path::Path) {
        for ix in self.vectors.paths().iter().filter(|ix| ix.ready()) {
            let file = self.snapshot_file(dir, ix);
            let tmp = file.with_extension("partial");
            let started = std::time::Instant::now();
            let written = std::fs::create_dir_all(dir)
                .and_then(|_| std::fs::File::create(&tmp))
                .and_then(|f| {
                    let mut w = crate::vector::codec::Writer::new(f);
                    read(&ix.set).write(&mut w)?;
                    w.finish()?.sync_all()
                })
                .and_then(|_| std::fs::rename(&tmp, &file));
            match written {
                Ok(()) => tracing::info!(
                    container = %self.id, path = %ix.path,
                    ms = started.elapsed().as_millis() as u64, "vector index written"
                ),
                Err(e) => {
                    let _ = std::fs::remove_file(&tmp);
                    tracing::warn!(container = %self.id, path = %ix.path, error = %e, "vector index not written")
                }
            }
        }
    }

    /// The set in `file`, if it holds one for `ix`'s parameters (else `None`, logged when
    /// the file exists but is refused). The file is removed once read: until the next clean
    /// shutdown writes another, the documents alone decide.
    fn read_snapshot(&self, ix: &PathIndex, file: &std::path::Path) -> Option<VectorSet> {
        let f = std::fs::File::open(file).ok()?;
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let mut r = crate::vector::codec::Reader::new(f, len);
        let set = VectorSet::read(&mut r, ix.params, ix.rows.as_ref())
            .and_then(|s| r.finish().map(|_| s));
        let _ = std::fs::remove_file(file);
        match set {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(container = %self.id, path = %ix.path, error = %e, "vector index snapshot refused; rebuilding");
                None
            }
        }
    }

    /// Reads every document's vector into a fresh set — or into the snapshot in `file`,
    /// reading only documents whose version changed since (see the module comment) —,
    /// replays the journal over it and installs it. Returns the vectors read and how many of
    /// them the snapshot already held.
    fn build_vectors(
        &self,
        ix: &Arc<PathIndex>,
        file: Option<&std::path::Path>,
    ) -> Result<(usize, usize), StoreError> {
        let started = std::time::Instant::now();
        let snapshot = file.and_then(|f| self.read_snapshot(ix, f));
        let from_snapshot = snapshot.is_some();
        if !from_snapshot {
            // A snapshot refused means a rebuild from the documents (minutes at a million):
            // queries stop waiting for it and rank by evaluation meanwhile.
            ix.loading.store(false, Ordering::Release);
        }
        if from_snapshot {
            tracing::info!(
                container = %self.id, path = %ix.path,
                ms = started.elapsed().as_millis() as u64, "vector index snapshot read"
            );
        }
        let mut set =
            snapshot.unwrap_or_else(|| VectorSet::with_rows_in(ix.params, ix.rows.as_ref()));
        // The snapshot's slots whose documents are still there, unchanged or not.
        let snapshot_slots = set.slots();
        let mut seen = vec![0u64; snapshot_slots.div_ceil(64)];
        let (mut n, mut kept) = (0usize, 0usize);
        // The change feed names every live document once, with the version of its last
        // write, in keys of a few bytes: a snapshot's slots are checked against it without
        // reading a document (reading a million of them by key was most of a restart), and
        // only the documents it does not hold as they are now are read.
        let prefix = keys::container_prefix(self.cid);
        let mut stale: Vec<Vec<u8>> = Vec::new();
        self.walk_log(
            Space::Feed,
            0,
            u64::MAX,
            usize::MAX,
            &mut |lsn, k, suffix| {
                if self.deleted.load(Ordering::Acquire) {
                    return Ok(false);
                }
                let sub = keys::parse_change_key(k).map_or(0, |(_, sub)| sub);
                let mut key = Vec::with_capacity(prefix.len() + suffix.len());
                key.extend_from_slice(&prefix);
                key.extend_from_slice(suffix);
                if let Some((slot, was)) = set.origin_of(&key) {
                    if let Some(w) = seen.get_mut(slot as usize / 64) {
                        *w |= 1 << (slot % 64);
                    }
                    if (was.lsn, was.sub) == (lsn, sub) {
                        n += 1;
                        kept += 1;
                        return Ok(true);
                    }
                }
                stale.push(key);
                if stale.len() == 256 {
                    n += self.read_vectors(
                        ix,
                        &mut set,
                        &std::mem::take(&mut stale),
                        from_snapshot,
                    )?;
                }
                Ok(true)
            },
        )?;
        if self.deleted.load(Ordering::Acquire) {
            return Ok((n, kept));
        }
        n += self.read_vectors(ix, &mut set, &stale, from_snapshot)?;
        if from_snapshot {
            set.drop_unseen(&seen, snapshot_slots);
        }
        let mut state = lock(&ix.state);
        if let Journal::Building(journal) = std::mem::replace(&mut *state, Journal::Ready) {
            for change in journal {
                change.apply(&mut set);
            }
        }
        *write(&ix.set) = set;
        drop(state);
        ix.link_in_background();
        Ok((n, kept))
    }

    /// Reads the documents at `keys` into `set` (a document without a vector at the path
    /// leaves it, when `set` came from a snapshot); returns how many vectors were read.
    fn read_vectors(
        &self,
        ix: &PathIndex,
        set: &mut VectorSet,
        keys: &[Vec<u8>],
        from_snapshot: bool,
    ) -> Result<usize, StoreError> {
        let (default_ttl, now) = (self.default_ttl(), catalog::now_secs());
        let mut batch = self.prefetch(keys)?.into_iter();
        let mut n = 0;
        for key in keys {
            let found = batch
                .next()
                .map_or_else(|| self.engine.get(Space::Items, key), Ok)?;
            let Some(raw) = found else {
                continue;
            };
            let item = StoredItem::decode(raw).ok_or_else(|| {
                StoreError::Corrupt("an item has an unreadable record".to_string())
            })?;
            if item.is_expired(default_ttl, now) {
                continue;
            }
            let doc: Value = serde_json::from_slice(&item.json)
                .map_err(|e| StoreError::Corrupt(format!("a stored document: {e}")))?;
            if let Some((v, exact)) = ix.extract(&doc) {
                let origin = Origin {
                    lsn: item.lsn,
                    sub: item.sub,
                    exact,
                };
                set.set(key, Some(&v), &ix.shard(&doc), origin);
                n += 1;
            } else if from_snapshot {
                // A document whose vector is gone since the snapshot: its slot goes.
                set.set(key, None, &[], Origin::default());
            }
        }
        Ok(n)
    }

    /// Replaces the sets after a policy change and builds the new ones.
    pub fn restart_vectors(self: &Arc<Self>) {
        let fresh = Vectors::of(&self.vector_policy(), self.limits.vector_rows.as_ref());
        // No transaction is open while the sets change: each one stages changes for the
        // sets it began with, and those are the ones its commit updates.
        self.with_writes_paused(|| *write(&self.vectors.paths) = fresh.paths());
        self.start_vectors(None);
    }

    /// Waits, at most `limit`, while an index over `path` is read back from its snapshot:
    /// a query arriving in the second or two after a restart that this takes is answered
    /// from the index rather than by reading and ranking every document — a million of them
    /// took several seconds, per query.
    pub async fn vectors_loaded(&self, path: &str, limit: std::time::Duration) {
        let until = std::time::Instant::now() + limit;
        let loading = || {
            self.vectors
                .paths()
                .iter()
                .any(|ix| ix.path == path && ix.loading.load(Ordering::Acquire))
        };
        while loading() && std::time::Instant::now() < until {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// The ready index over `path`, if the container has one.
    pub fn vector_index(&self, path: &str) -> Option<Arc<PathIndex>> {
        self.vectors
            .paths()
            .iter()
            .find(|ix| ix.path == path && ix.ready())
            .cloned()
    }
}
