//! The versions of a container's recently read and written items, kept ahead of the store:
//! a point read of a hot item, and the read of the version an upsert replaces, are a hash
//! lookup instead of a search through the LSM's memtables and tables (about a tenth of a
//! point read's CPU and a twentieth of an upsert's, measured with `perf` under the lean
//! bench). RocksDB calls this a row cache.
//!
//! Correctness rests on one rule: the cache never holds a version older than the newest
//! committed one. Writes keep it:
//! - before its commit a transaction removes the keys it writes from the cache and marks
//!   their shards busy; after it, it puts the versions it wrote and clears the mark. All of
//!   this happens under the container's size lock, which every commit holds (see
//!   [`Container::write`]), so puts follow commit order;
//! - a reader that missed offers what it read from the store only if its shard saw no write
//!   start or end since the reader looked ([`Ticket`]): a version read before a commit can
//!   never land after that commit's put, and a reader never finds a version older than the
//!   store's while a commit is in flight (its keys are out of the cache until it has put
//!   them back).
//!
//! Memory is bounded by [`HOT_BYTES`] per container and [`HOT_BYTES_TOTAL`] for all of a
//! process's containers together (so a client that creates many containers cannot grow it
//! further), in two generations per shard: entries
//! go to the current one; when it is full it becomes the previous one (the older previous
//! one is dropped), and a hit in the previous one moves the entry back to the current.
//! A store a round trip away (PostgreSQL) keeps no cache: another process may take over
//! its writes, and the saving there is the round trip, which the cache would hide only
//! until then.
//!
//! Small logical partitions are kept whole beside the items, under the key their items
//! begin with (`cid | EPK`, never an item's key): a query pinned to one logical partition
//! reads them from here instead of opening a range over the LSM's memtables and tables
//! (a fifth of such a query's CPU under `strata-bench --profile`). The same rule holds:
//! a commit takes out the partitions of the items it writes with the items (and offers
//! none back); a reader that missed offers the whole partition it read, which is kept only
//! if its shard saw no write meanwhile.

use super::{catalog, lock, read, Container};
use crate::store::engine::Space;
use crate::store::record::StoredItem;
use crate::store::StoreError;
use rustc_hash::{FxBuildHasher, FxHashMap};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Bytes of item versions and whole logical partitions (documents, keys and bookkeeping)
/// one container keeps. Under the bench's single-partition queries (20,000 items of 1 KB in
/// about 10,000 partitions) 16 MiB left the store's range reads at 13% of the query's
/// profile (22% without the cache) and its CPU where it was (29–33 µs a query); with 48 MiB
/// they were 3% and a query took 23.6–23.8 µs. At 1M items the cache then held 39 MB of the
/// server's 265 MB.
pub const HOT_BYTES: usize = 48 << 20;

/// Shards of the cache: a write and a read of different items rarely meet on one lock.
const SHARDS: usize = 16;

/// Bytes every container's cache holds together, at most: however many containers there
/// are, the caches cannot take more. When the total is reached, a cache that takes a
/// version drops its shard's older generation first (so space goes to the containers in
/// use), and takes nothing if that is not enough.
pub const HOT_BYTES_TOTAL: usize = 128 << 20;

/// Bytes held by every cache of this process (see [`HOT_BYTES_TOTAL`]).
static HELD: AtomicUsize = AtomicUsize::new(0);

/// Bytes the hot-item caches of every container hold now (see [`HOT_BYTES_TOTAL`]).
pub fn held_bytes() -> usize {
    HELD.load(Ordering::Relaxed)
}

/// What an entry costs beyond its document and key (map slots, the record's fields).
const ENTRY_OVERHEAD: usize = 96;

/// The most items of a logical partition kept whole.
pub const PARTITION_ITEMS: usize = 64;
/// The most bytes of a logical partition kept whole (documents, keys and bookkeeping).
pub const PARTITION_BYTES: usize = 64 << 10;

/// The items of one logical partition, in key order, each with its key: expired ones too
/// (a reader filters them as it would those from the store).
pub type Members = Arc<[(Box<[u8]>, StoredItem)]>;

/// What the cache keeps under a key.
#[derive(Clone)]
enum Entry {
    /// The newest version of the item at the key.
    Item(StoredItem),
    /// Every item of the logical partition whose items begin with the key.
    Partition(Members),
}

#[derive(Default)]
struct Shard {
    current: FxHashMap<Box<[u8]>, Entry>,
    previous: FxHashMap<Box<[u8]>, Entry>,
    /// Bytes the current generation holds.
    bytes: usize,
    /// Bytes the previous generation holds.
    previous_bytes: usize,
    /// Writes that started or ended on this shard (see [`Ticket`]).
    writes: u64,
    /// Writes between their start and their end.
    busy: u32,
}

impl Shard {
    fn remove(&mut self, key: &[u8]) {
        if let Some(old) = self.current.remove(key) {
            let size = cost(key, &old);
            self.bytes -= size;
            HELD.fetch_sub(size, Ordering::Relaxed);
        }
        if let Some(old) = self.previous.remove(key) {
            let size = cost(key, &old);
            self.previous_bytes -= size;
            HELD.fetch_sub(size, Ordering::Relaxed);
        }
    }

    /// The current generation becomes the previous one; the previous one is dropped.
    fn rotate(&mut self) {
        HELD.fetch_sub(self.previous_bytes, Ordering::Relaxed);
        self.previous = std::mem::take(&mut self.current);
        self.previous_bytes = std::mem::take(&mut self.bytes);
    }

    fn put(&mut self, key: &[u8], item: Entry, budget: usize) {
        self.remove(key);
        let size = cost(key, &item);
        if size > budget {
            return;
        }
        if self.bytes + size > budget {
            self.rotate();
        }
        if HELD.load(Ordering::Relaxed) + size > HOT_BYTES_TOTAL {
            self.rotate();
            if HELD.load(Ordering::Relaxed) + size > HOT_BYTES_TOTAL {
                return;
            }
        }
        self.bytes += size;
        HELD.fetch_add(size, Ordering::Relaxed);
        self.current.insert(key.into(), item);
    }
}

impl Drop for HotItems {
    fn drop(&mut self) {
        for s in self.shards.iter() {
            let s = lock(s);
            HELD.fetch_sub(s.bytes + s.previous_bytes, Ordering::Relaxed);
        }
    }
}

fn cost(key: &[u8], entry: &Entry) -> usize {
    match entry {
        Entry::Item(item) => item_cost(key, item),
        Entry::Partition(members) => {
            let items: usize = members.iter().map(|(k, i)| item_cost(k, i)).sum();
            key.len() + items + ENTRY_OVERHEAD
        }
    }
}

/// What an item's entry costs, alone or as a member of a partition's.
pub(super) fn item_cost(key: &[u8], item: &StoredItem) -> usize {
    key.len() + item.json.len() + ENTRY_OVERHEAD
}

/// A copy of `item` that owns its document: what the store returned may be a view into a
/// whole block of its cache, which the entry would otherwise keep alive unaccounted.
fn owned(item: &StoredItem) -> StoredItem {
    StoredItem {
        json: bytes::Bytes::copy_from_slice(&item.json),
        ..item.clone()
    }
}

/// A container's cache of hot item versions (see the module's comment).
pub struct HotItems {
    shards: Box<[Mutex<Shard>]>,
    /// Bytes per generation of a shard; 0 turns the cache off.
    budget: usize,
    hasher: FxBuildHasher,
}

/// What a reader that missed saw of its shard: it may offer what it then reads from the
/// store only if the shard's writes are where they were and none is under way.
pub struct Ticket {
    shard: usize,
    writes: Option<u64>,
}

/// The shards a transaction's commit touches, marked busy until it ends.
pub struct Busy(Vec<usize>);

impl HotItems {
    /// A cache of `bytes` in all (0: none).
    pub fn new(bytes: usize) -> Self {
        HotItems {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            budget: bytes / SHARDS / 2,
            hasher: FxBuildHasher,
        }
    }

    fn shard_of(&self, key: &[u8]) -> usize {
        self.hasher.hash_one(key) as usize % SHARDS
    }

    /// The cached version of the item at `key`, or the ticket to offer the store's with.
    pub fn get(&self, key: &[u8]) -> Result<StoredItem, Ticket> {
        match self.entry(key)? {
            Entry::Item(item) => Ok(item),
            Entry::Partition(_) => Err(self.refused(key)),
        }
    }

    /// The items of the logical partition whose item keys begin with `key` (`cid | EPK`),
    /// or the ticket to offer them with once read from the store.
    pub fn get_partition(&self, key: &[u8]) -> Result<Members, Ticket> {
        match self.entry(key)? {
            Entry::Partition(members) => Ok(members),
            Entry::Item(_) => Err(self.refused(key)),
        }
    }

    /// A ticket whose offer is never kept (the cache is off, or the key holds the other kind
    /// of entry).
    fn refused(&self, key: &[u8]) -> Ticket {
        Ticket {
            shard: self.shard_of(key),
            writes: None,
        }
    }

    fn entry(&self, key: &[u8]) -> Result<Entry, Ticket> {
        if self.budget == 0 {
            return Err(self.refused(key));
        }
        let shard = self.shard_of(key);
        let mut s = lock(&self.shards[shard]);
        if let Some(entry) = s.current.get(key) {
            return Ok(entry.clone());
        }
        if let Some(entry) = s.previous.get(key).cloned() {
            s.put(key, entry.clone(), self.budget);
            return Ok(entry);
        }
        let writes = (s.busy == 0).then_some(s.writes);
        Err(Ticket { shard, writes })
    }

    /// Keeps what a reader read from the store after [`HotItems::get`] missed, unless a
    /// write started or ended on the shard meanwhile.
    pub fn offer(&self, ticket: Ticket, key: &[u8], item: &StoredItem) {
        self.offer_entry(ticket, key, || Entry::Item(owned(item)));
    }

    /// Keeps the items of a logical partition a reader read whole from the store after
    /// [`HotItems::get_partition`] missed (in key order), unless a write started or ended on
    /// the shard meanwhile, or they are more than [`PARTITION_ITEMS`] or
    /// [`PARTITION_BYTES`].
    pub fn offer_partition(&self, ticket: Ticket, key: &[u8], members: &[(Vec<u8>, StoredItem)]) {
        let bytes: usize = members.iter().map(|(k, i)| item_cost(k, i)).sum();
        if members.len() > PARTITION_ITEMS || bytes > PARTITION_BYTES {
            return;
        }
        self.offer_entry(ticket, key, || {
            let members = members.iter().map(|(k, i)| (k[..].into(), owned(i)));
            Entry::Partition(members.collect())
        });
    }

    fn offer_entry(&self, ticket: Ticket, key: &[u8], entry: impl FnOnce() -> Entry) {
        let Some(writes) = ticket.writes else { return };
        let mut s = lock(&self.shards[ticket.shard]);
        if s.busy == 0 && s.writes == writes && !s.current.contains_key(key) {
            s.put(key, entry(), self.budget);
        }
    }

    /// Before a commit writing the items at `keys` (and the logical partitions they are in,
    /// their keys among `keys` too): takes them out and marks their shards busy until
    /// [`HotItems::end`].
    pub fn start<K: AsRef<[u8]>>(&self, keys: impl Iterator<Item = K>) -> Busy {
        let mut busy = Vec::new();
        if self.budget == 0 {
            return Busy(busy);
        }
        for key in keys {
            let key = key.as_ref();
            let shard = self.shard_of(key);
            let mut s = lock(&self.shards[shard]);
            s.remove(key);
            if !busy.contains(&shard) {
                busy.push(shard);
                s.busy += 1;
                s.writes += 1;
            }
        }
        Busy(busy)
    }

    /// After the commit [`HotItems::start`] prepared: puts the versions it wrote (`None`
    /// for a delete; nothing when the commit failed) and clears the marks.
    pub fn end<'k>(
        &self,
        busy: Busy,
        written: impl Iterator<Item = (&'k [u8], Option<&'k StoredItem>)>,
    ) {
        for (key, item) in written {
            if let Some(item) = item {
                let mut s = lock(&self.shards[self.shard_of(key)]);
                s.put(key, Entry::Item(item.clone()), self.budget);
            }
        }
        for shard in busy.0 {
            let mut s = lock(&self.shards[shard]);
            s.busy -= 1;
            s.writes += 1;
        }
    }
}

impl Container {
    /// Reads the live version of an item (expired items are absent), and the id of the
    /// physical partition holding it.
    pub fn read_item(&self, epk: &str, id: &str) -> Result<Option<(StoredItem, u32)>, StoreError> {
        let key = self.codec.item_key(self.cid, epk, id);
        let item = self.item_version(&key, id)?;
        let range_id = {
            let map = read(&self.map);
            let r = &map.ranges[map.index_of(epk)];
            r.reads.fetch_add(1, Ordering::Relaxed);
            r.rec.id
        };
        let Some(item) = item else { return Ok(None) };
        if item.is_expired(self.default_ttl(), catalog::now_secs()) {
            return Ok(None);
        }
        Ok(Some((item, range_id)))
    }

    /// The newest committed version of the item at `key`, expired or not: from the cache of
    /// hot items, else from the store (and then kept in the cache).
    pub(super) fn item_version(
        &self,
        key: &[u8],
        id: &str,
    ) -> Result<Option<StoredItem>, StoreError> {
        let ticket = match self.hot.get(key) {
            Ok(item) => return Ok(Some(item)),
            Err(ticket) => ticket,
        };
        let Some(raw) = self.engine.get(Space::Items, key)? else {
            return Ok(None);
        };
        let item = StoredItem::decode(raw)
            .ok_or_else(|| StoreError::Corrupt(format!("item '{id}' has an unreadable record")))?;
        self.hot.offer(ticket, key, &item);
        Ok(Some(item))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn version(lsn: u64, body: &str) -> StoredItem {
        StoredItem {
            lsn,
            sub: 0,
            ts: 1,
            ttl: None,
            doc_seq: 1,
            json: Bytes::from(body.to_string()),
        }
    }

    #[test]
    fn a_read_from_before_a_write_is_never_kept() {
        let hot = HotItems::new(1 << 20);
        let key: &[u8] = b"k";
        // A reader misses, then a write starts before it offers what it read.
        let ticket = hot.get(key).err().unwrap();
        let busy = hot.start([key].into_iter());
        hot.offer(ticket, key, &version(1, "old"));
        assert!(hot.get(key).is_err(), "offered during a write");
        let v2 = version(2, "new");
        hot.end(busy, [(key, Some(&v2))].into_iter());
        assert_eq!(hot.get(key).ok().map(|i| i.lsn), Some(2));
        // A reader that missed before a whole write ran (start and end) offers too late.
        let busy = hot.start([key].into_iter());
        hot.end(busy, [(key, None)].into_iter());
        let ticket = hot.get(key).err().unwrap();
        let busy = hot.start([key].into_iter());
        hot.end(busy, [(key, None)].into_iter());
        hot.offer(ticket, key, &version(2, "stale"));
        assert!(
            hot.get(key).is_err(),
            "a version read before a delete came back"
        );
        // An undisturbed reader's offer is kept.
        let ticket = hot.get(key).err().unwrap();
        hot.offer(ticket, key, &version(3, "read"));
        assert_eq!(hot.get(key).ok().map(|i| i.lsn), Some(3));
    }

    /// A logical partition read whole is kept only if no write to its shard started or
    /// ended meanwhile, is taken out by a write that names it, and is not kept past its
    /// bounds.
    #[test]
    fn a_partition_read_before_a_write_is_never_kept() {
        let hot = HotItems::new(1 << 20);
        let (lp, item): (&[u8], &[u8]) = (b"p", b"p1");
        let members = vec![(item.to_vec(), version(1, "old"))];
        let ticket = hot.get_partition(lp).err().unwrap();
        let busy = hot.start([item, lp].into_iter());
        hot.offer_partition(ticket, lp, &members);
        hot.end(busy, [(item, Some(&version(2, "new")))].into_iter());
        assert!(hot.get_partition(lp).is_err(), "offered during a write");
        assert!(hot.get(lp).is_err(), "a partition's key holds no item");
        let ticket = hot.get_partition(lp).err().unwrap();
        hot.offer_partition(ticket, lp, &[(item.to_vec(), version(2, "new"))]);
        let kept = hot.get_partition(lp).ok().unwrap();
        assert_eq!((kept.len(), kept[0].1.lsn), (1, 2));
        assert!(hot.get(item).is_ok(), "the item's own entry stays");
        let busy = hot.start([item, lp].into_iter());
        assert!(hot.get_partition(lp).is_err(), "taken out by the write");
        hot.end(busy, [(item, None)].into_iter());
        let many: Vec<(Vec<u8>, StoredItem)> = (0..=PARTITION_ITEMS as u32)
            .map(|n| (n.to_be_bytes().to_vec(), version(1, "x")))
            .collect();
        let ticket = hot.get_partition(lp).err().unwrap();
        hot.offer_partition(ticket, lp, &many);
        assert!(hot.get_partition(lp).is_err(), "too many items");
    }

    #[test]
    fn all_caches_together_stay_within_the_process_bound() {
        // Twenty containers, each allowed the whole bound, offered three times it.
        let caches: Vec<HotItems> = (0..20)
            .map(|_| HotItems::new(4 * HOT_BYTES_TOTAL))
            .collect();
        let body = Bytes::from(vec![b'x'; 64 << 10]);
        let rounds = 3 * HOT_BYTES_TOTAL / body.len() / caches.len();
        for n in 0..rounds as u32 {
            for hot in &caches {
                let key = n.to_be_bytes();
                let item = StoredItem {
                    json: body.clone(),
                    ..version(u64::from(n), "")
                };
                let busy = hot.start([&key[..]].into_iter());
                hot.end(busy, [(&key[..], Some(&item))].into_iter());
            }
        }
        let held: usize = caches
            .iter()
            .flat_map(|c| c.shards.iter())
            .map(|s| {
                let s = lock(s);
                s.bytes + s.previous_bytes
            })
            .sum();
        assert!(held <= HOT_BYTES_TOTAL, "{held} bytes held");
        assert!(
            held >= HOT_BYTES_TOTAL / 4,
            "the caches gave up: {held} bytes held"
        );
        // The newest version of each container is among those kept.
        let last = (rounds as u32 - 1).to_be_bytes();
        assert!(caches.iter().all(|c| c.get(&last).is_ok()));
        drop(caches);
    }

    #[test]
    fn memory_stays_within_its_budget() {
        let hot = HotItems::new(64 << 10);
        let body = "x".repeat(1000);
        for n in 0..1000u32 {
            let key = n.to_be_bytes();
            let busy = hot.start([&key[..]].into_iter());
            hot.end(
                busy,
                [(&key[..], Some(&version(n as u64, &body)))].into_iter(),
            );
        }
        let held: usize = hot
            .shards
            .iter()
            .map(|s| {
                let s = lock(s);
                s.current.len() + s.previous.len()
            })
            .sum();
        assert!(held > 0 && held * 1000 <= 64 << 10, "{held} entries held");
        // The newest are the ones kept.
        assert!(hot.get(&999u32.to_be_bytes()).is_ok());
        assert!(hot.get(&0u32.to_be_bytes()).is_err());
    }
}
