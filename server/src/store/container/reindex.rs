//! Building a container's index for the documents it already holds: after its indexing policy
//! is replaced, and once for containers written before strata indexed.
//!
//! A policy change starts a new index generation. From that moment every write maintains the
//! new generation's entries itself, and queries read documents instead of the index (so they
//! stay correct while it is incomplete). The build then walks every stored document in small
//! transactions of its own — serialized with writes on the container's log, so a document is
//! never indexed from a stale version — and finally marks the index ready and deletes the
//! entries of older generations. Progress is `x-ms-documentdb-collection-index-transformation-progress`
//! on the container read.

use super::{read, Container, Txn};
use crate::store::engine::{self, Space};
use crate::store::index::{self, IndexState};
use crate::store::keys;
use crate::store::{Store, StoreError};
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Documents indexed per transaction: small enough that writers barely wait.
const CHUNK: usize = 256;

impl Container {
    /// Indexes every stored document under the current generation. Returns false when it
    /// stopped because the container was deleted or its policy changed again (the newer
    /// build takes over).
    pub fn build_index(&self) -> Result<bool, StoreError> {
        let gen = self.index_state().gen;
        let total: u64 = read(&self.map).ranges.iter().map(|r| r.count).sum();
        self.index_total.store(total, Ordering::Relaxed);
        self.index_done.store(0, Ordering::Relaxed);
        let start = keys::container_prefix(self.cid);
        let end = engine::prefix_end(&start).unwrap_or_default();
        let mut cursor: Option<Vec<u8>> = None;
        loop {
            if self.deleted.load(Ordering::Acquire) || self.index_state().gen != gen {
                return Ok(false);
            }
            let lower = match &cursor {
                Some(c) => Bound::Excluded(&c[..]),
                None => Bound::Included(&start[..]),
            };
            let chunk =
                self.engine
                    .scan(Space::Directory, lower, Bound::Excluded(&end), CHUNK, false)?;
            let exhausted = chunk.len() < CHUNK;
            let keys: Vec<Vec<u8>> = chunk.into_iter().map(|(k, _)| k).collect();
            // Durability is not awaited: the index is marked ready only after its record is
            // persisted durably, which a build the disk lost never reached.
            let _ = self.write(|t| -> Result<(), StoreError> {
                for k in &keys {
                    t.index_stored(k, gen)?;
                }
                Ok(())
            })?;
            self.index_done
                .fetch_add(keys.len() as u64, Ordering::Relaxed);
            match keys.last() {
                Some(k) if !exhausted => cursor = Some(k.clone()),
                _ => {
                    // Nothing the build added stays only in memory once the index is ready: a
                    // restart catches up from the last fold's mark alone.
                    self.fold_text_now()?;
                    return Ok(true);
                }
            }
        }
    }

    /// Percent of the index build done (100 when the index is ready).
    pub fn index_progress(&self) -> u64 {
        if self.index_state().ready {
            return 100;
        }
        let total = self.index_total.load(Ordering::Relaxed).max(1);
        (self.index_done.load(Ordering::Relaxed) * 100 / total).min(99)
    }
}

impl Txn<'_> {
    /// Writes the generation-`gen` entries and unique-key rows of the stored document at
    /// `key` (idempotent: a document already indexed by a write gets the same entries).
    fn index_stored(&mut self, key: &[u8], gen: u16) -> Result<(), StoreError> {
        let codec = self.container().codec;
        let Some((_, epk, id)) = codec.parse_item_key(key) else {
            return Ok(());
        };
        let Some(item) = self.get_raw(&epk, id)? else {
            return Ok(());
        };
        let doc: serde_json::Value = serde_json::from_slice(&item.json).map_err(|e| {
            StoreError::Corrupt(format!("a stored document is not valid JSON: {e}"))
        })?;
        let state = IndexState {
            gen,
            ..self.container().index_state()
        };
        // Vector sets are rebuilt from the documents at start, not here.
        let maintainers = super::indexes::Maintainers::of(&state, &[]);
        let doc_ref = super::indexes::DocRef {
            epk: &epk,
            id,
            key,
            at: (item.lsn, item.sub),
            was: None,
        };
        for m in maintainers.iter() {
            m.backfill(self, doc_ref, &doc)?;
        }
        Ok(())
    }
}

impl Store {
    /// Starts building `c`'s index in the background (see the module documentation).
    pub fn spawn_index_build(&self, c: Arc<Container>) {
        let store = self.clone();
        let name = c.id.clone();
        let task = async move {
            let c2 = Arc::clone(&c);
            let built = tokio::task::spawn_blocking(move || c2.build_index()).await;
            match built {
                Ok(Ok(true)) => {}
                Ok(Ok(false)) => return,
                Ok(Err(e)) => {
                    tracing::error!(container = %c.id, error = %e, "building the index failed");
                    return;
                }
                Err(e) => {
                    tracing::error!(container = %c.id, error = %e, "index build task failed");
                    return;
                }
            }
            let gen = c.with_writes_paused(|| {
                let mut state = c.index_state();
                state.ready = true;
                let gen = state.gen;
                c.set_index_state(state);
                gen
            });
            if let Err(e) = store.persist_container(&c).await {
                tracing::error!(container = %c.id, error = %e, "persisting the built index failed");
                return;
            }
            tracing::info!(container = %c.id, documents = c.index_done.load(Ordering::Relaxed), "index built");
            let engine = store.engine().clone();
            let cid = c.cid;
            let purge =
                tokio::task::spawn_blocking(move || purge_other_generations(&engine, cid, gen));
            if let Ok(Err(e)) = purge.await {
                tracing::error!(cid, error = %e, "purging old index entries failed");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn(task);
            }
            Err(_) => {
                tracing::warn!(container = %name, "no runtime: index build deferred to the next start")
            }
        }
    }

    /// Replaces `c`'s index state for new properties: a changed indexing policy starts a new
    /// generation, a changed unique key policy is refused. Returns what to do once the
    /// properties are persisted: `None` nothing, `Some(true)` build the new generation,
    /// `Some(false)` (indexing turned off) only drop the old entries.
    pub(in crate::store) fn reindex_for(
        &self,
        c: &Arc<Container>,
        props: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Option<bool>, StoreError> {
        index::validate(props)?;
        {
            use strata_query::index::vector::{check_replace, VectorPolicy};
            // A stored policy that no longer parses (written before policies were validated)
            // constrains nothing.
            let old = VectorPolicy::from_props(&read(&c.meta).props).unwrap_or_default();
            let new = VectorPolicy::from_props(props).map_err(StoreError::BadRequest)?;
            check_replace(&old, &new).map_err(StoreError::BadRequest)?;
        }
        let old = c.index_state();
        let unique = index::UniqueKeys::from_props(props).map_err(StoreError::BadRequest)?;
        if unique != *old.unique {
            return Err(StoreError::BadRequest(
                "The unique key policy of a container cannot be changed after it is created: create a new container with the policy and copy the items into it.".into(),
            ));
        }
        let policy = index::policy_of(props).map_err(StoreError::BadRequest)?;
        if policy == *old.policy {
            return Ok(None);
        }
        let none = policy.is_none();
        c.with_writes_paused(|| {
            c.set_index_state(IndexState {
                policy: Arc::new(policy),
                unique: Arc::clone(&old.unique),
                gen: old.gen.wrapping_add(1),
                ready: none,
            })
        });
        Ok(Some(!none))
    }

    /// Drops the entries of every generation but the current one, in the background.
    pub fn spawn_index_purge(&self, c: &Container) {
        let engine = self.engine().clone();
        let (cid, gen) = (c.cid, c.index_state().gen);
        let task = move || {
            if let Err(e) = purge_other_generations(&engine, cid, gen) {
                tracing::error!(cid, error = %e, "purging old index entries failed");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn_blocking(task);
            }
            Err(_) => task(),
        }
    }
}

/// Deletes every index entry of container `cid` whose generation is not `gen`.
pub fn purge_other_generations(
    engine: &engine::Engine,
    cid: u32,
    gen: u16,
) -> Result<u64, StoreError> {
    let (all_lo, all_hi) = index::container_bounds(cid);
    let mut current = keys::container_prefix(cid);
    current.extend_from_slice(&gen.to_be_bytes());
    let current_end = engine::prefix_end(&current).unwrap_or_default();
    let mut removed = 0u64;
    for (lo, hi) in [(all_lo, current.clone()), (current_end, all_hi)] {
        removed += engine.delete_range(Space::Index, &lo, &hi)?;
    }
    Ok(removed)
}
