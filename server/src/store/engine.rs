//! The engine above the storage seam: group commit, write ordering, and transactions that own
//! their LSNs, for any [`Kv`] backend.
//!
//! Durability: a committed [`Tx`] (or [`Engine::write`]) is applied atomically and visible; the
//! caller then awaits its [`Durable`] token before acknowledging. Group commit is
//! leader/follower: the first writer that needs durability syncs the backend itself for every
//! write applied so far, while writers arriving meanwhile wait for that sync or lead the next
//! one. Many concurrent writers share each flush, and no hand-off to another thread sits on the
//! commit path (on a busy two-core machine such a hand-off waited for a CPU time slice and cost
//! more than the fsync). An acknowledged write survives `kill -9` and power loss.
//!
//! Isolation: a [`Log`] is one ordered stream of changes (a container's). [`Engine::begin`]
//! takes the log's lock for the life of the transaction, and the transaction hands out the
//! log's next LSNs; committing applies the batch and publishes its last LSN in one critical
//! section, so readers of the log never see LSN `n+1` before LSN `n`, and concurrent writers
//! of one log are serialized (read-modify-write is safe) while other logs proceed.

use super::kv::{memory::MemoryKv, Kv};
pub use super::kv::{prefix_end, KvError, Op, Space};
use bytes::Bytes;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::watch;

/// How many times a group-commit leader yields, while new writes keep arriving, before it
/// syncs the journal.
const GATHER_YIELDS: usize = 8;

/// A cheap, cloneable handle to the engine.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    kv: Box<dyn Kv>,
    /// Serializes batch application with sequence assignment, so "every write up to seq N is
    /// applied" holds whenever `applied == N`.
    write_order: Mutex<()>,
    applied: AtomicU64,
    durable_tx: watch::Sender<u64>,
    /// Set while a leader is syncing the backend.
    syncing: AtomicBool,
    /// Syncs performed (each makes a group of writes durable), and their total time.
    syncs: AtomicU64,
    sync_micros: AtomicU64,
    poisoned: AtomicBool,
}

/// Takes one entry (key, value) of [`Engine::scan_each`].
pub type EntryVisitor<'a, E> = dyn FnMut(&[u8], &[u8]) -> Result<(), E> + 'a;

/// Proof that a write was applied; await it with [`Engine::durable`] before acknowledging.
/// Tokens are ordered: waiting for a later one covers every earlier one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
#[must_use = "a write is not acknowledged until its durability token is awaited"]
pub struct Durable(u64);

impl Durable {
    /// The later of two tokens (waiting for it covers both).
    pub fn max(self, other: Durable) -> Durable {
        Durable(self.0.max(other.0))
    }
}

impl Engine {
    /// Opens (or creates) the on-disk store in `dir`.
    pub fn open(dir: &Path) -> Result<Self, KvError> {
        Ok(Self::new(super::kv::open(None, Some(dir))?))
    }

    /// A store that lives only in memory (for tests and throwaway runs).
    pub fn memory() -> Self {
        Self::new(Box::new(MemoryKv::new()))
    }

    /// An engine over any backend.
    pub fn new(kv: Box<dyn Kv>) -> Self {
        let (durable_tx, _) = watch::channel(0);
        Self {
            inner: Arc::new(Inner {
                kv,
                write_order: Mutex::new(()),
                applied: AtomicU64::new(0),
                durable_tx,
                syncing: AtomicBool::new(false),
                syncs: AtomicU64::new(0),
                sync_micros: AtomicU64::new(0),
                poisoned: AtomicBool::new(false),
            }),
        }
    }

    /// Whether nothing survives the process (no sync is ever needed).
    pub fn is_memory(&self) -> bool {
        !self.inner.kv.is_durable()
    }

    /// Reads several keys of one space (one round trip on a remote backend).
    pub fn get_many(&self, space: Space, keys: &[Vec<u8>]) -> Result<Vec<Option<Bytes>>, KvError> {
        self.inner.kv.get_many(space, keys)
    }

    /// Whether the backend is a round trip away (read in batches, see [`Kv::is_remote`]).
    pub fn is_remote(&self) -> bool {
        self.inner.kv.is_remote()
    }

    /// Where writes to `space` go now (see [`Kv::generation`]).
    pub fn generation(&self, space: Space) -> u64 {
        self.inner.kv.generation(space)
    }

    /// The oldest generation of `space` whose writes may lie beside older versions (see
    /// [`Kv::unsettled_from`]).
    pub fn unsettled_from(&self, space: Space) -> u64 {
        self.inner.kv.unsettled_from(space)
    }

    /// The newest generation of `space` holding what the store replayed at open (see
    /// [`Kv::replayed`]).
    pub fn replayed(&self, space: Space) -> Option<u64> {
        self.inner.kv.replayed(space)
    }

    /// Reads one key.
    pub fn get(&self, space: Space, key: &[u8]) -> Result<Option<Bytes>, KvError> {
        self.inner.kv.get(space, key)
    }

    /// The entries of `[start, end)` in key order, read as they are iterated.
    pub fn range<'a>(
        &'a self,
        space: Space,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> super::kv::KvIter<'a> {
        self.inner.kv.range(space, start, end, false)
    }

    /// Reads up to `limit` entries of `[start, end)` in key order (or reverse order).
    pub fn scan(
        &self,
        space: Space,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        limit: usize,
        reverse: bool,
    ) -> Result<Vec<(Vec<u8>, Bytes)>, KvError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        self.inner
            .kv
            .range(space, start, end, reverse)
            .take(limit)
            .collect()
    }

    /// Visits every entry of `[lo, hi)` in key order, reading `chunk` at a time (each read
    /// starts after the last key visited), until `visit` fails.
    pub fn scan_each<E: From<KvError>>(
        &self,
        space: Space,
        (lo, hi): (&[u8], &[u8]),
        chunk: usize,
        visit: &mut EntryVisitor<'_, E>,
    ) -> Result<(), E> {
        let mut cursor: Option<Vec<u8>> = None;
        loop {
            let start = match &cursor {
                Some(c) => Bound::Excluded(&c[..]),
                None => Bound::Included(lo),
            };
            let entries = self.scan(space, start, Bound::Excluded(hi), chunk, false)?;
            let done = entries.len() < chunk;
            for (k, v) in &entries {
                visit(k, v)?;
            }
            match entries.into_iter().last() {
                Some((k, _)) if !done => cursor = Some(k),
                _ => return Ok(()),
            }
        }
    }

    /// Starts a transaction on `log`: it holds the log's lock (no other transaction of the log
    /// runs meanwhile) and assigns the log's next LSNs.
    pub fn begin<'a>(&'a self, log: &'a Log) -> Tx<'a> {
        let last = log.lock();
        Tx {
            engine: self,
            log,
            changes: 0,
            last,
            ops: Vec::new(),
        }
    }

    /// Applies `ops` atomically (outside any log); they are visible to readers when this
    /// returns.
    pub fn write(&self, ops: Vec<Op>) -> Result<Durable, KvError> {
        if self.inner.poisoned.load(Ordering::Acquire) {
            return Err(KvError::Poisoned);
        }
        let _order = self
            .inner
            .write_order
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Err(e) = self.inner.kv.apply(ops) {
            // A remote store's failed commit may still have happened (the connection dropped
            // before the answer): what this process holds in memory (LSNs, sizes) can no
            // longer be trusted to match the store, so it refuses writes until a restart
            // reads the store again, as after a failed fsync.
            if self.inner.kv.is_remote() {
                tracing::error!(error = %e, "a write to the store failed with an unknown outcome; refusing further writes");
                self.inner.poisoned.store(true, Ordering::Release);
            }
            return Err(e);
        }
        let seq = self.inner.applied.fetch_add(1, Ordering::AcqRel) + 1;
        if self.is_memory() {
            self.inner.durable_tx.send_replace(seq);
        }
        Ok(Durable(seq))
    }

    /// Waits until the write behind `token` (and every earlier one) is on stable storage.
    pub async fn durable(&self, token: Durable) -> Result<(), KvError> {
        let seq = token.0;
        let mut rx = self.inner.durable_tx.subscribe();
        loop {
            if self.inner.poisoned.load(Ordering::Acquire) {
                return Err(KvError::Poisoned);
            }
            if *rx.borrow_and_update() >= seq {
                return Ok(());
            }
            if self
                .inner
                .syncing
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                // Leadership ends when this guard drops, even if the request that leads is
                // cancelled (a client hanging up drops its handler mid-await): otherwise no
                // writer could ever sync again.
                let _leader = Leadership(&self.inner);
                // Leader: let writers that are ready to apply their writes do so first (each
                // yield lets other tasks run), so that one sync covers as many as possible;
                // stop as soon as no new write arrived.
                let mut seen = self.inner.applied.load(Ordering::Acquire);
                for _ in 0..GATHER_YIELDS {
                    tokio::task::yield_now().await;
                    let now = self.inner.applied.load(Ordering::Acquire);
                    if now == seen {
                        break;
                    }
                    seen = now;
                }
                // The fdatasync runs on the blocking pool, so the threads that serve
                // connections keep serving requests meanwhile (measured: ~10% more durable
                // upserts than `block_in_place`, which handed the worker's queue to a fresh
                // thread per sync).
                let engine = self.clone();
                tokio::task::spawn_blocking(move || engine.sync_applied())
                    .await
                    .map_err(|e| KvError::Io(std::io::Error::other(e.to_string())))??;
                continue;
            }
            // Follower: wait for the leader's sync (or for leadership to free up).
            if rx.changed().await.is_err() {
                return Err(KvError::Poisoned);
            }
        }
    }

    /// Syncs the backend, making every write applied before the call durable.
    fn sync_applied(&self) -> Result<(), KvError> {
        let target = self.inner.applied.load(Ordering::Acquire);
        if target <= *self.inner.durable_tx.borrow() {
            return Ok(());
        }
        if self.inner.kv.is_durable() {
            let started = std::time::Instant::now();
            let res = self.inner.kv.sync();
            self.inner
                .sync_micros
                .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
            if let Err(e) = res {
                tracing::error!(error = %e, "journal sync failed; refusing further writes");
                self.inner.poisoned.store(true, Ordering::Release);
                return Err(e);
            }
        }
        self.inner.syncs.fetch_add(1, Ordering::Relaxed);
        self.inner.durable_tx.send_modify(|d| *d = (*d).max(target));
        Ok(())
    }

    /// (writes applied, journal syncs, microseconds spent syncing) since the engine opened.
    pub fn commit_stats(&self) -> (u64, u64, u64) {
        (
            self.inner.applied.load(Ordering::Relaxed),
            self.inner.syncs.load(Ordering::Relaxed),
            self.inner.sync_micros.load(Ordering::Relaxed),
        )
    }

    /// Writes `ops` and waits for them to be durable.
    pub async fn write_durable(&self, ops: Vec<Op>) -> Result<(), KvError> {
        let token = self.write(ops)?;
        self.durable(token).await
    }

    /// Flushes everything to disk (clean shutdown).
    pub fn shutdown(&self) -> Result<(), KvError> {
        self.inner.kv.shutdown()
    }

    /// Deletes every key of `space` in `[lo, hi)`, a thousand per batch, without awaiting
    /// durability (background purges, which are redone if a crash loses them). Returns the
    /// keys deleted. Each scan starts after the last key deleted: one from `lo` again would
    /// step over every tombstone written so far (a quadratic walk over a large range).
    pub fn delete_range(&self, space: Space, lo: &[u8], hi: &[u8]) -> Result<u64, KvError> {
        let mut removed = 0u64;
        let mut cursor: Option<Vec<u8>> = None;
        loop {
            let start = match &cursor {
                Some(c) => Bound::Excluded(&c[..]),
                None => Bound::Included(lo),
            };
            let chunk = self.scan(space, start, Bound::Excluded(hi), 1000, false)?;
            let Some((last, _)) = chunk.last() else {
                return Ok(removed);
            };
            cursor = Some(last.clone());
            removed += chunk.len() as u64;
            let _ = self.write(
                chunk
                    .into_iter()
                    .map(|(k, _)| Op::Delete(space, k))
                    .collect(),
            )?;
        }
    }

    /// Bytes used on disk (0 in memory).
    pub fn disk_space(&self) -> u64 {
        self.inner.kv.disk_space()
    }

    /// Where the store's bytes go (see [`super::kv::Usage`]).
    pub fn usage(&self) -> super::kv::Usage {
        self.inner.kv.usage()
    }
}

/// One ordered stream of changes with its own LSNs (a container's): the unit of isolation.
pub struct Log {
    /// The last LSN committed; held by the transaction in progress.
    last: Mutex<u64>,
    /// The same, readable without waiting for a transaction.
    published: AtomicU64,
}

impl Log {
    /// A log whose last committed LSN is `lsn` (recovered from storage).
    pub fn new(lsn: u64) -> Self {
        Self {
            last: Mutex::new(lsn),
            published: AtomicU64::new(lsn),
        }
    }

    /// The last committed LSN.
    pub fn current(&self) -> u64 {
        self.published.load(Ordering::Acquire)
    }

    /// Runs `f` while no transaction of this log can run (splits, property changes).
    pub fn paused<T>(&self, f: impl FnOnce() -> T) -> T {
        let _guard = self.lock();
        f()
    }

    fn lock(&self) -> MutexGuard<'_, u64> {
        self.last.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A transaction on one [`Log`]: staged changes, applied atomically by [`Tx::commit`].
///
/// Reads go to committed state; layers above keep what they staged themselves (a container's
/// transaction knows the versions it wrote).
pub struct Tx<'a> {
    engine: &'a Engine,
    log: &'a Log,
    last: MutexGuard<'a, u64>,
    /// Changes taken so far; they all share the transaction's LSN.
    changes: u32,
    ops: Vec<Op>,
}

impl Tx<'_> {
    /// Reads one committed key.
    pub fn get(&self, space: Space, key: &[u8]) -> Result<Option<Bytes>, KvError> {
        self.engine.get(space, key)
    }

    /// The position the next change of this transaction gets: the transaction's LSN (one per
    /// transaction, as the service gives a transactional batch one LSN) and its place within it.
    pub fn peek_change(&self) -> (u64, u32) {
        (*self.last + 1, self.changes)
    }

    /// Takes the next change position (see [`Tx::peek_change`]).
    pub fn take_change(&mut self) -> (u64, u32) {
        let at = self.peek_change();
        self.changes += 1;
        at
    }

    /// The LSN this transaction commits at (the log's current LSN if it changed nothing).
    pub fn last_lsn(&self) -> u64 {
        *self.last + u64::from(self.changes > 0)
    }

    /// Whether nothing was staged.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    pub fn put(&mut self, space: Space, key: Vec<u8>, value: Vec<u8>) {
        self.ops.push(Op::Put(space, key, value));
    }

    pub fn delete(&mut self, space: Space, key: Vec<u8>) {
        self.ops.push(Op::Delete(space, key));
    }

    /// How far this transaction has come: staged operations and changes taken.
    pub fn mark(&self) -> (usize, u32) {
        (self.ops.len(), self.changes)
    }

    /// Forgets everything staged after `mark` (see [`Tx::mark`]).
    pub fn rewind(&mut self, (ops, changes): (usize, u32)) {
        self.ops.truncate(ops);
        self.changes = changes;
    }

    /// Applies everything staged atomically and publishes the LSNs taken. Dropping a
    /// transaction instead discards it (and its LSNs).
    pub fn commit(mut self) -> Result<Durable, KvError> {
        if self.ops.is_empty() {
            return Ok(Durable::default());
        }
        let token = self.engine.write(std::mem::take(&mut self.ops))?;
        let last = self.last_lsn();
        *self.last = last;
        self.log.published.store(last, Ordering::Release);
        Ok(token)
    }
}

/// Holds group-commit leadership; releasing it wakes the writers waiting for a sync.
struct Leadership<'a>(&'a Inner);

impl Drop for Leadership<'_> {
    fn drop(&mut self) {
        self.0.syncing.store(false, Ordering::Release);
        self.0.durable_tx.send_modify(|_| {});
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_transaction_owns_its_lsns_and_commits_atomically() {
        let e = Engine::memory();
        let log = Log::new(41);
        let mut tx = e.begin(&log);
        assert_eq!(tx.take_change(), (42, 0));
        assert_eq!(tx.take_change(), (42, 1), "one LSN per transaction");
        tx.put(Space::Items, b"a".to_vec(), b"1".to_vec());
        tx.put(Space::Feed, b"a".to_vec(), b"f".to_vec());
        // Nothing is visible, nor the LSNs published, before the commit.
        assert!(e.get(Space::Items, b"a").unwrap().is_none());
        assert_eq!(log.current(), 41);
        let token = tx.commit().unwrap();
        e.durable(token).await.unwrap();
        assert_eq!(log.current(), 42);
        assert!(e.get(Space::Feed, b"a").unwrap().is_some());
        // A dropped transaction leaves nothing behind, and its LSNs are reused.
        let mut tx = e.begin(&log);
        assert_eq!(tx.take_change(), (43, 0));
        tx.delete(Space::Items, b"a".to_vec());
        drop(tx);
        assert!(e.get(Space::Items, b"a").unwrap().is_some());
        assert_eq!(e.begin(&log).peek_change(), (43, 0));
    }

    #[test]
    fn transactions_of_one_log_are_serialized() {
        let e = Engine::memory();
        let log = Arc::new(Log::new(0));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let (e, log) = (e.clone(), Arc::clone(&log));
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        // Read-modify-write of one counter: lost updates would show.
                        let mut tx = e.begin(&log);
                        let n = tx
                            .get(Space::Catalog, b"n")
                            .unwrap()
                            .map(|v| u64::from_be_bytes(v[..8].try_into().unwrap()))
                            .unwrap_or(0);
                        let (lsn, _) = tx.take_change();
                        tx.put(
                            Space::Catalog,
                            b"n".to_vec(),
                            (n + 1).to_be_bytes().to_vec(),
                        );
                        tx.put(Space::Feed, lsn.to_be_bytes().to_vec(), vec![t]);
                        let _ = tx.commit().unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let n = e.get(Space::Catalog, b"n").unwrap().unwrap();
        assert_eq!(u64::from_be_bytes(n[..8].try_into().unwrap()), 800);
        assert_eq!(log.current(), 800);
        let feed = e
            .scan(Space::Feed, Bound::Unbounded, Bound::Unbounded, 1000, false)
            .unwrap();
        assert_eq!(feed.len(), 800, "every LSN was taken exactly once");
    }

    /// A leader whose request is cancelled mid-commit (the client hung up) must not leave
    /// every later writer waiting for a sync that never comes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancelled_leader_releases_leadership() {
        let dir = std::env::temp_dir().join(format!("strata-engine-cancel-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let e = Engine::open(&dir).unwrap();
        for i in 0..20u8 {
            let token = e
                .write(vec![Op::Put(Space::Items, vec![i], b"x".to_vec())])
                .unwrap();
            // Poll the commit once (it takes leadership and yields), then drop it.
            tokio::select! {
                biased;
                _ = e.durable(token) => panic!("a commit cannot finish without yielding"),
                _ = std::future::ready(()) => {}
            }
        }
        let token = e
            .write(vec![Op::Put(Space::Items, b"last".to_vec(), b"y".to_vec())])
            .unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(10), e.durable(token))
            .await
            .expect("a later writer became leader and synced")
            .unwrap();
        e.shutdown().unwrap();
        drop(e);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
