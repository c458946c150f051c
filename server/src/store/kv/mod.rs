//! The storage seam: the narrow ordered key-value interface every backend implements.
//!
//! Everything strata stores — catalog, documents, change feed, partition sizes — is a key in
//! one of a few ordered key spaces. A backend offers exactly what the layers above need and no
//! more: point reads, ordered range iteration (forward or reverse), atomic multi-key batches,
//! and a sync that makes every applied batch durable. Group commit, LSNs and transactions are
//! built once on top of this, in [`super::engine`], so a new backend only implements [`Kv`].
//!
//! Three backends live here: [`fjall::FjallKv`] on disk (the default), [`memory::MemoryKv`]
//! for `--in-memory`, and [`postgres::PostgresKv`] for `--store postgres://…` (see
//! `docs/postgres.md`). A distributed ordered store (FoundationDB, TiKV) fits the same shape: a
//! space is a key prefix, a range scan is a range read, `apply` is one transaction, and `sync`
//! is a no-op because its commits are durable when they return (see `docs/storage.md`).

#[doc(hidden)]
pub mod contract;
pub mod fjall;
pub mod memory;
mod pager;
pub mod postgres;
mod shared;

pub use shared::Shared;

use bytes::Bytes;
use std::ops::Bound;

/// The key spaces. Keys inside each are ordered byte strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Space {
    /// Databases, containers (with their partition key ranges), offers, counters.
    Catalog = 0,
    /// Documents: `cid | EPK | id` (the EPK spelled as [`crate::store::keys::KeyCodec`] says), so a
    /// physical partition is a contiguous key range.
    Items = 1,
    /// Change feed index: `cid | lsn` -> item key suffix, in modification order.
    Feed = 2,
    /// Size of every logical partition: `cid | EPK` -> bytes and item count.
    Partitions = 3,
    /// The item directory: the keys of `Items` with empty values, written when an item is
    /// created or deleted but not when it is replaced. Scans walk this space and read each
    /// item by key: an LSM store keeps every overwritten version of a hot item until it
    /// compacts, and a range scan over `Items` walked them all (a partition query fell to a
    /// twelfth of its speed after 100,000 upserts of one item), while a point read seeks
    /// straight to the newest version.
    Directory = 4,
    /// Secondary index entries: `cid | generation | path id | term | EPK | id`, empty values
    /// (see [`crate::store::index`]).
    Index = 5,
    /// Unique keys: `cid | EPK | 0x00 | key number | values` -> owning id.
    Unique = 6,
    /// The all-versions-and-deletes change feed: `cid | lsn` -> the change (see
    /// [`crate::store::history`]).
    History = 7,
}

/// Every space with the name a backend stores it under.
pub const SPACES: [(Space, &str); 8] = [
    (Space::Catalog, "catalog"),
    (Space::Items, "items"),
    (Space::Feed, "feed"),
    (Space::Partitions, "partitions"),
    (Space::Directory, "directory"),
    (Space::Index, "index"),
    (Space::Unique, "unique"),
    (Space::History, "history"),
];

/// What a store occupies, for `GET /_strata/storage` and the scale benchmark's breakdown.
#[derive(Debug, Default, Clone)]
pub struct Usage {
    /// Bytes on disk in all.
    pub disk_total: u64,
    /// Bytes on disk per key space, by its name in [`SPACES`] (empty when the backend cannot
    /// tell them apart).
    pub disk_by_space: Vec<(&'static str, u64)>,
    /// Bytes of write-ahead journal on disk (part of `disk_total`).
    pub journal: u64,
    /// Bytes of writes held in memory until they are flushed (memtables).
    pub write_buffers: u64,
    /// Bytes of the backend's block cache in use.
    pub block_cache: u64,
}

/// One change in an atomic batch.
#[derive(Debug, Clone)]
pub enum Op {
    Put(Space, Vec<u8>, Vec<u8>),
    Delete(Space, Vec<u8>),
}

/// Storage failures. They are never the client's fault; the API turns them into 500s (503 once
/// the store refuses writes).
#[derive(Debug, thiserror::Error)]
pub enum KvError {
    /// A backend's own failure, named by the backend ("fjall", "PostgreSQL"): nothing above
    /// this seam matches on which backend failed, as Garage's `db::Error` keeps its engines out.
    #[error("{backend} store: {message}")]
    Backend {
        backend: &'static str,
        message: String,
    },
    #[error("storage is unavailable after an earlier flush failure; restart the server")]
    Poisoned,
    #[error("storage I/O failure: {0}")]
    Io(#[from] std::io::Error),
    /// Another process holds the store's lock (see `postgres::PostgresKv::open`).
    #[error("another strata process serves this store (it holds the store's lock in PostgreSQL)")]
    Held,
}

impl KvError {
    /// A backend's failure, with its message.
    pub fn backend(backend: &'static str, message: impl std::fmt::Display) -> Self {
        KvError::Backend {
            backend,
            message: message.to_string(),
        }
    }
}

/// Opens the backend a store's configuration names — the one place one is picked: PostgreSQL
/// when a URL is given, fjall in a data folder, else memory.
pub fn open(postgres: Option<&str>, dir: Option<&std::path::Path>) -> Result<Box<dyn Kv>, KvError> {
    Ok(match (postgres, dir) {
        (Some(url), _) => Box::new(postgres::PostgresKv::open(url)?),
        (None, Some(dir)) => Box::new(fjall::FjallKv::open(dir)?),
        (None, None) => Box::new(memory::MemoryKv::new()),
    })
}

/// The shared store `url` names, as the processes sharing it coordinate (PostgreSQL is the
/// backend several processes can share).
pub fn shared(url: &str) -> Box<dyn Shared> {
    Box::new(postgres::SharedPostgres {
        url: url.to_string(),
    })
}

/// An ordered iterator over `(key, value)` pairs of one range.
pub type KvIter<'a> = Box<dyn Iterator<Item = Result<(Vec<u8>, Bytes), KvError>> + Send + 'a>;

/// An ordered key-value store: the only thing strata asks of a storage backend.
///
/// Readers see every batch whose [`Kv::apply`] returned. Batches are applied by one writer at
/// a time (the engine orders them), so a backend need not serialize them itself.
pub trait Kv: Send + Sync + 'static {
    /// Reads one key.
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Bytes>, KvError>;

    /// Iterates the keys of `[start, end)` (as the bounds say) in key order, or in reverse.
    fn range(
        &self,
        space: Space,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
    ) -> KvIter<'_>;

    /// Applies `ops` atomically: readers see all of them or none.
    fn apply(&self, ops: Vec<Op>) -> Result<(), KvError>;

    /// Makes every batch whose `apply` returned before this call durable. One group-commit
    /// leader calls it at a time, while other writers may keep applying batches.
    fn sync(&self) -> Result<(), KvError>;

    /// Whether [`Kv::sync`] is needed at all (false when nothing survives the process anyway).
    fn is_durable(&self) -> bool;

    /// Flushes everything for a clean shutdown.
    fn shutdown(&self) -> Result<(), KvError>;

    /// Bytes used on disk (0 in memory).
    fn disk_space(&self) -> u64;

    /// Where the bytes go, as far as the backend can tell (see [`Usage`]): by default only
    /// the total on disk.
    fn usage(&self) -> Usage {
        Usage {
            disk_total: self.disk_space(),
            ..Usage::default()
        }
    }

    /// Reads several keys of one space, answers in the keys' order. Backends a round trip
    /// away read them in one; local ones read them one by one.
    fn get_many(&self, space: Space, keys: &[Vec<u8>]) -> Result<Vec<Option<Bytes>>, KvError> {
        keys.iter().map(|k| self.get(space, k)).collect()
    }

    /// Whether each call is a round trip to another server, so that callers should read in
    /// batches ([`Kv::get_many`]) rather than key by key.
    fn is_remote(&self) -> bool {
        false
    }

    /// Where writes to `space` go now: a generation that only grows (see
    /// [`Kv::unsettled_from`]).
    fn generation(&self, _space: Space) -> u64 {
        0
    }

    /// The oldest generation of `space` whose writes may still lie beside older versions of
    /// their keys where a range scan reads them: a write of an earlier generation is its
    /// key's only version now. An LSM store keeps every version of a key in its memtable
    /// until the memtable is flushed to a table, which keeps the newest alone; a scan over a
    /// key overwritten many times since walks them all (see [`Space::Directory`]). A store
    /// whose scans meet each key once answers `u64::MAX`, the default.
    fn unsettled_from(&self, _space: Space) -> u64 {
        u64::MAX
    }

    /// The newest generation of `space` that holds what the store replayed as it opened
    /// (writes of an earlier process, which may lie beside older versions until
    /// [`Kv::unsettled_from`] passes it); `None` when it replayed nothing.
    fn replayed(&self, _space: Space) -> Option<u64> {
        None
    }
}

/// Whether a range is empty whatever the data (start after end).
pub fn empty_bounds(start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
    match (start, end) {
        (Bound::Included(s), Bound::Excluded(e)) => s >= e,
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Excluded(s), Bound::Excluded(e)) | (Bound::Excluded(s), Bound::Included(e)) => {
            s >= e
        }
        _ => false,
    }
}

/// The smallest key greater than every key starting with `prefix`, for prefix scans.
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last < 0xFF {
            p.push(last + 1);
            return Some(p);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_backend_keeps_the_contract() {
        contract::check(&memory::MemoryKv::new());
    }

    #[test]
    fn fjall_backend_keeps_the_contract_and_persists() {
        let dir = std::env::temp_dir().join(format!("strata-kv-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        {
            let kv = fjall::FjallKv::open(&dir).unwrap();
            contract::check(&kv);
            kv.shutdown().unwrap();
        }
        let kv = fjall::FjallKv::open(&dir).unwrap();
        assert_eq!(kv.get(Space::Items, b"b1").unwrap().unwrap(), &b"z"[..]);
        drop(kv);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn prefix_end_carries() {
        assert_eq!(prefix_end(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xFF]), None);
    }
}
