//! One atomic write of a container in progress: what it staged (versions, unique-key rows,
//! logical-partition sizes), its savepoints, and the index, history and TTL bookkeeping each
//! put and delete carries along (see [`Container::write`]).

use super::*;

/// How a transaction changes one logical partition's size.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct LpDelta {
    pub(super) bytes: i64,
    pub(super) count: i64,
    /// Resulting (bytes, count).
    pub(super) total: (u64, u64),
}

/// One atomic write in progress (see [`Container::write`]).
pub struct Txn<'a> {
    pub(super) c: &'a Container,
    pub(super) tx: Tx<'a>,
    /// The index maintainers at the start of the transaction (the index state and the vector
    /// paths change only while writes pause).
    pub(super) maintainers: indexes::Maintainers,
    /// Unique-key rows written (owner id) or removed (`None`) in this transaction.
    pub(super) unique_staged: HashMap<Vec<u8>, Option<String>>,
    /// Whether changes are logged for the all-versions-and-deletes feed.
    pub(super) history: bool,
    /// Deletes of this transaction are TTL expiries (the TTL sweeper's).
    pub(super) expiring: bool,
    /// The last document count taken per document-number prefix, for the prefixes this
    /// transaction created documents under (see [`super::doc_numbers`]).
    pub(super) docs_taken: Vec<(u16, u64)>,
    /// Versions written or deleted in this transaction, by (EPK, id).
    pub(super) staged: HashMap<(String, String), Option<StoredItem>>,
    /// Size changes per logical partition (by EPK).
    pub(super) lp_delta: HashMap<String, LpDelta>,
    pub(super) now: u64,
    pub(super) default_ttl: Option<i64>,
    /// Whether this transaction deletes anything (see [`Container::write`]).
    pub(super) deleted_any: bool,
    /// The item keys whose previous version this transaction supersedes (replaces and
    /// deletes: see [`super::settled`]), up to their first byte after the container's prefix.
    pub(super) superseded: Vec<[u8; 5]>,
    /// What the changes since the oldest open savepoint overwrote, so a failed operation can
    /// be undone while the transaction goes on (`None`: no savepoint, nothing recorded).
    pub(super) undo: Option<Vec<Undo>>,
    /// Vectors of the documents written, in order: applied to the sets after the commit.
    pub(super) vector_changes: Vec<vectors::Change>,
    /// The full-text stems whose posting of a document this write changes, each with the
    /// posting now: decoded lists take them after the commit (see [`indexes::postings`]).
    pub(super) postings_patches: Vec<indexes::postings::Patch>,
    /// Version buckets of the stems this write changes that had no list held (see
    /// `PostingsCache::patch`).
    pub(super) postings_touched: Vec<usize>,
    /// The full-text document lengths this write adds (positive) or removes (negative), by
    /// lengths path and EPK: added to the kept word totals after the commit (see
    /// `indexes::fulltext::WordTotals`).
    pub(super) length_changes: Vec<indexes::fulltext::LengthChange>,
    /// The full-text lengths the document being written takes in its directory entry, when
    /// they change (see [`indexes::text_lengths`]); set by the maintainer, taken by `put`.
    pub(super) text_lengths: Option<Vec<u8>>,
    /// The full-text postings this write adds and the versions whose postings die: handed
    /// to the pending batch after the commit (see [`indexes::text_pending`]).
    pub(super) text_changes: Vec<indexes::text_pending::TextChange>,
    /// Whether a full-text index saw this write (its batch's mark moves after the commit).
    pub(super) text_seen: bool,
}

/// One overwritten entry of a transaction's own bookkeeping (see [`Txn::savepoint`]).
pub(super) enum Undo {
    Staged((String, String), Option<Option<StoredItem>>),
    Unique(Vec<u8>, Option<Option<String>>),
    Partition(String, Option<LpDelta>),
}

/// A point a transaction can go back to (see [`Txn::savepoint`]).
pub struct Savepoint {
    pub(super) tx: (usize, u32),
    pub(super) docs_taken: Vec<(u16, u64)>,
    pub(super) deleted_any: bool,
    pub(super) undo: usize,
    pub(super) vector_changes: usize,
    pub(super) length_changes: usize,
    pub(super) text_changes: usize,
    pub(super) postings_patches: usize,
}

impl<'a> Txn<'a> {
    pub fn container(&self) -> &'a Container {
        self.c
    }
}

impl Txn<'_> {
    pub fn now(&self) -> u64 {
        self.now
    }

    /// The current version, including an expired one that has not been purged yet.
    pub fn get_raw(&self, epk: &str, id: &str) -> Result<Option<StoredItem>, StoreError> {
        if let Some(v) = self.staged.get(&(epk.to_string(), id.to_string())) {
            return Ok(v.clone());
        }
        let key = self.c.codec.item_key(self.c.cid, epk, id);
        self.c.item_version(&key, id)
    }

    /// Stages a raw key change in this transaction (index builds).
    pub(super) fn put_raw(&mut self, space: Space, key: Vec<u8>, value: Vec<u8>) {
        self.tx.put(space, key, value);
    }

    /// The live version (expired items are absent).
    pub fn get(&self, epk: &str, id: &str) -> Result<Option<StoredItem>, StoreError> {
        Ok(self.get_raw(epk, id)?.filter(|i| self.is_live(i)))
    }

    /// Whether a version read by [`Txn::get_raw`] is live (not expired by TTL) as of this
    /// transaction.
    pub fn is_live(&self, item: &StoredItem) -> bool {
        !item.is_expired(self.default_ttl, self.now)
    }

    /// Size of a logical partition (bytes, items) as of this transaction.
    pub fn logical_partition_size(&self, epk: &str) -> Result<(u64, u64), StoreError> {
        self.lp_size(epk)
    }

    /// Size of a logical partition as of this transaction.
    fn lp_size(&self, epk: &str) -> Result<(u64, u64), StoreError> {
        if let Some(d) = self.lp_delta.get(epk) {
            return Ok(d.total);
        }
        if let Some(size) = lock(&self.c.lp_sizes).get(epk) {
            return Ok(size);
        }
        let key = self.c.codec.partition_key(self.c.cid, epk);
        let size = self
            .tx
            .get(Space::Partitions, &key)?
            .map(|v| decode_lp(&v))
            .unwrap_or((0, 0));
        lock(&self.c.lp_sizes).set(epk, size);
        Ok(size)
    }

    fn account(&mut self, epk: &str, bytes: i64, count: i64) -> Result<(), StoreError> {
        let (b, c) = self.lp_size(epk)?;
        let nb = (b as i64 + bytes).max(0) as u64;
        let nc = (c as i64 + count).max(0) as u64;
        if bytes > 0 && nb > self.c.limits.logical_partition_limit_bytes {
            return Err(StoreError::PartitionKeyFull(format!(
                "Partition key reached maximum size of {} bytes: the logical partition would hold {nb} bytes. Spread the data over more partition key values.",
                self.c.limits.logical_partition_limit_bytes
            )));
        }
        if let Some(u) = &mut self.undo {
            u.push(Undo::Partition(
                epk.to_string(),
                self.lp_delta.get(epk).copied(),
            ));
        }
        let e = self.lp_delta.entry(epk.to_string()).or_default();
        e.bytes += bytes;
        e.count += count;
        e.total = (nb, nc);
        Ok(())
    }

    /// What the next version of the item at `epk` gets from this transaction: the change
    /// position it will take, its document number (a new document takes its physical
    /// partition's next one, its `_rid` and DOCUMENTID; a new version keeps its document's)
    /// and the write's timestamp. `previous` is the version being replaced, if any (from
    /// [`Txn::get_raw`]).
    pub fn next_version(&self, epk: &str, previous: Option<&StoredItem>) -> Version {
        let (lsn, sub) = self.tx.peek_change();
        Version {
            lsn,
            sub,
            doc_seq: previous.map_or_else(|| self.next_doc_number(epk), |p| p.doc_seq),
            ts: self.now,
        }
    }

    /// The number a document created at `epk` takes: its physical partition's next.
    fn next_doc_number(&self, epk: &str) -> u64 {
        let map = read(&self.c.map);
        let range = &map.ranges[map.index_of(epk)].rec;
        let prefix = doc_numbers::prefix_of(range.id);
        let last = match self.docs_taken.iter().find(|(p, _)| *p == prefix) {
            Some(&(_, n)) => n,
            None => {
                let ancestors = range.parents.iter().filter_map(|p| p.parse().ok());
                lock(&self.c.doc_counts).last(prefix, ancestors.map(doc_numbers::prefix_of))
            }
        };
        doc_numbers::compose(prefix, last + 1)
    }

    /// Whether the writes of this transaction must hand their documents over parsed as well
    /// as written ([`Record::doc`]).
    pub fn reads_documents(&self) -> bool {
        self.maintainers.read_documents()
    }

    /// Writes a new version of an item: `record` is the document as the item layer stamped it
    /// for [`Txn::next_version`] (system properties included); `previous` is the version
    /// being replaced, if any (from [`Txn::get_raw`]).
    pub fn put(
        &mut self,
        epk: &str,
        id: &str,
        record: Record,
        previous: Option<&StoredItem>,
    ) -> Result<Written, StoreError> {
        let c = self.c;
        let Record {
            version,
            json,
            doc,
            ttl,
        } = record;
        if version != self.next_version(epk, previous) {
            return Err(StoreError::Corrupt(format!(
                "item '{id}' was stamped for another write ({version:?}, expected {:?})",
                self.next_version(epk, previous)
            )));
        }
        let Version {
            lsn, sub, doc_seq, ..
        } = version;
        let item = StoredItem {
            lsn,
            sub,
            ts: self.now,
            ttl,
            doc_seq,
            json: Bytes::from(json),
        };
        let key = c.codec.item_key(c.cid, epk, id);
        let new_size = item.stored_size(key.len()) as i64;
        let (old_size, old_count) = match previous {
            Some(p) => (p.stored_size(key.len()) as i64, 1),
            None => (0, 0),
        };
        self.account(epk, new_size - old_size, 1 - old_count)?;
        if let Some(p) = previous {
            self.tx.delete(Space::Feed, p.feed_key(c.cid));
        }
        self.tx
            .put(Space::Feed, item.feed_key(c.cid), key[4..].to_vec());
        let old = previous.map(|p| indexes::Old::replaced_by(&p.json, &item.json));
        let was = previous.map(|p| (p.lsn, p.sub));
        let new = match doc {
            Some(d) => indexes::Text::parsed(&item.json, d),
            None => indexes::Text::new(&item.json),
        };
        self.maintain(epk, id, &key, was, old.as_ref(), Some(&new))?;
        // The directory entry: written at a create, and again when the lengths it keeps change.
        match (previous, self.text_lengths.take()) {
            (None, lengths) => {
                let value = lengths.unwrap_or_default();
                self.tx.put(Space::Directory, key.clone(), value);
            }
            (Some(_), Some(lengths)) => self.tx.put(Space::Directory, key.clone(), lengths),
            (Some(_), None) => {}
        }
        if previous.is_some() {
            self.supersede(&key);
        }
        self.tx.put(Space::Items, key, item.encode());
        self.tx.take_change();
        if previous.is_none() {
            let (prefix, n) = doc_numbers::split(doc_seq);
            match self.docs_taken.iter_mut().find(|(p, _)| *p == prefix) {
                Some(taken) => taken.1 = n,
                None => self.docs_taken.push((prefix, n)),
            }
        }
        let created = previous
            .map(|p| p.is_expired(self.default_ttl, self.now))
            .unwrap_or(true);
        if self.history {
            let op = if created {
                Operation::Create
            } else {
                Operation::Replace
            };
            self.log_change(op, (lsn, sub), previous, epk, id, item.json.clone());
        }
        self.stage(epk, id, Some(item.clone()));
        Ok(Written {
            item,
            range_id: c.range_id_of(epk),
            created,
        })
    }

    /// The live documents of logical partition `epk` as this transaction sees them (its own
    /// writes included), in id order: what a stored procedure's queries read.
    pub fn logical_partition(&self, epk: &str) -> Result<Vec<(String, StoredItem)>, StoreError> {
        let codec = self.c.codec;
        let start = codec.item_key(self.c.cid, epk, "");
        let end = crate::store::engine::prefix_end(&start).unwrap_or_default();
        let mut docs: std::collections::BTreeMap<String, StoredItem> = Default::default();
        self.c.walk(&start, &end, None, &mut |k, item| {
            if let Some((_, _, id)) = codec.parse_item_key(&k) {
                docs.insert(id.to_string(), item);
            }
            true
        })?;
        for ((e, id), v) in &self.staged {
            if e != epk {
                continue;
            }
            match v {
                Some(item) => docs.insert(id.clone(), item.clone()),
                None => docs.remove(id),
            };
        }
        Ok(docs
            .into_iter()
            .filter(|(_, i)| !i.is_expired(self.default_ttl, self.now))
            .collect())
    }

    /// The id of the item of logical partition `epk` whose `_rid` carries `doc_seq`, as this
    /// transaction sees it.
    pub fn id_by_doc_seq(&self, epk: &str, doc_seq: u64) -> Result<Option<String>, StoreError> {
        for ((e, id), v) in &self.staged {
            if e == epk && v.as_ref().is_some_and(|i| i.doc_seq == doc_seq) {
                return Ok(Some(id.clone()));
            }
        }
        match self.c.id_by_doc_seq(epk, doc_seq)? {
            Some(id) if !matches!(self.staged.get(&(epk.to_string(), id.clone())), Some(None)) => {
                Ok(Some(id))
            }
            _ => Ok(None),
        }
    }

    fn stage(&mut self, epk: &str, id: &str, v: Option<StoredItem>) {
        let key = (epk.to_string(), id.to_string());
        let old = self.staged.insert(key.clone(), v);
        if let Some(u) = &mut self.undo {
            u.push(Undo::Staged(key, old));
        }
    }

    pub(super) fn stage_unique(&mut self, row: Vec<u8>, owner: Option<String>) {
        let old = self.unique_staged.insert(row.clone(), owner);
        if let Some(u) = &mut self.undo {
            u.push(Undo::Unique(row, old));
        }
    }

    /// Marks where the transaction stands, so that an operation that fails half way (a
    /// unique-key conflict after its index entries were staged, say) can be undone with
    /// [`Txn::rollback_to`] while the transaction goes on: a stored procedure may catch an
    /// operation's error and carry on.
    pub fn savepoint(&mut self) -> Savepoint {
        let undo = self.undo.get_or_insert_with(Vec::new).len();
        Savepoint {
            tx: self.tx.mark(),
            docs_taken: self.docs_taken.clone(),
            deleted_any: self.deleted_any,
            undo,
            vector_changes: self.vector_changes.len(),
            length_changes: self.length_changes.len(),
            text_changes: self.text_changes.len(),
            postings_patches: self.postings_patches.len(),
        }
    }

    /// Keeps everything staged since `sp` (no savepoint outside `sp` may be open).
    pub fn release(&mut self, sp: Savepoint) {
        if let Some(undo) = &mut self.undo {
            undo.truncate(sp.undo);
        }
    }

    /// Undoes everything staged since `sp`.
    pub fn rollback_to(&mut self, sp: Savepoint) {
        self.tx.rewind(sp.tx);
        self.vector_changes.truncate(sp.vector_changes);
        self.length_changes.truncate(sp.length_changes);
        self.text_changes.truncate(sp.text_changes);
        self.postings_patches.truncate(sp.postings_patches);
        self.docs_taken = sp.docs_taken;
        self.deleted_any = sp.deleted_any;
        let Some(undo) = &mut self.undo else { return };
        let newer: Vec<Undo> = undo.drain(sp.undo..).collect();
        for u in newer.into_iter().rev() {
            match u {
                Undo::Staged(k, Some(v)) => {
                    self.staged.insert(k, v);
                }
                Undo::Staged(k, None) => {
                    self.staged.remove(&k);
                }
                Undo::Unique(k, Some(v)) => {
                    self.unique_staged.insert(k, v);
                }
                Undo::Unique(k, None) => {
                    self.unique_staged.remove(&k);
                }
                Undo::Partition(k, Some(v)) => {
                    self.lp_delta.insert(k, v);
                }
                Undo::Partition(k, None) => {
                    self.lp_delta.remove(&k);
                }
            }
        }
    }

    /// Notes that the version of `key` stored before this transaction is superseded.
    fn supersede(&mut self, key: &[u8]) {
        let mut head = [0u8; 5];
        let n = key.len().min(5);
        head[..n].copy_from_slice(&key[..n]);
        self.superseded.push(head);
    }

    /// Deletes the item at `pos` (from [`Container::scan_docs`]) if it still exists.
    pub fn delete_at(&mut self, pos: &DocPos) -> Result<bool, StoreError> {
        let (epk, id) = pos.parts(self.c.codec);
        match self.get_raw(&epk, id)? {
            Some(item) => {
                self.delete(&epk, id, &item)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Deletes the given version of an item.
    pub fn delete(&mut self, epk: &str, id: &str, previous: &StoredItem) -> Result<(), StoreError> {
        let c = self.c;
        let key = c.codec.item_key(c.cid, epk, id);
        self.account(epk, -(previous.stored_size(key.len()) as i64), -1)?;
        self.tx.delete(Space::Feed, previous.feed_key(c.cid));
        self.tx.delete(Space::Directory, key.clone());
        let old = indexes::Old::new(&previous.json);
        let was = Some((previous.lsn, previous.sub));
        self.maintain(epk, id, &key, was, Some(&old), None)?;
        self.supersede(&key);
        self.tx.delete(Space::Items, key);
        // A delete consumes an LSN too, so session tokens and range LSNs move forward.
        let at = self.tx.take_change();
        if self.history {
            let doc = previous.json.clone();
            self.log_change(Operation::Delete, at, Some(previous), epk, id, doc);
        }
        self.deleted_any = true;
        self.stage(epk, id, None);
        Ok(())
    }
}

impl Txn<'_> {
    /// Moves every index of the document at `key` from `old` to `new` (either absent for a
    /// create or a delete): each maintainer the same way (see [`indexes`]).
    fn maintain(
        &mut self,
        epk: &str,
        id: &str,
        key: &[u8],
        was: Option<indexes::text_pending::Pos>,
        old: Option<&indexes::Old<'_>>,
        new: Option<&indexes::Text<'_>>,
    ) -> Result<(), StoreError> {
        let maintainers = self.maintainers.clone();
        let at = self.tx.peek_change();
        let doc = indexes::DocRef {
            epk,
            id,
            key,
            at,
            was,
        };
        for m in maintainers.iter() {
            m.update(self, doc, old, new)?;
        }
        Ok(())
    }

    /// Marks this transaction's deletes as TTL expiries (for the all-versions feed).
    pub fn expiring(&mut self) {
        self.expiring = true;
    }
}
