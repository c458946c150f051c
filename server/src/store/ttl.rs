//! Time to live: expired items are invisible at once (reads, queries and feeds check expiry);
//! this background sweeper deletes them so their space comes back. It walks each container
//! with TTL enabled incrementally, a bounded number of items per tick.

use super::container::Container;
use super::engine::{Durable, Space};
use super::record::StoredItem;
use super::{catalog, keys, Store, StoreError};
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

/// Items examined per container per tick.
const PER_TICK: usize = 5_000;

impl Store {
    /// Starts the sweeper; it stops when the store shuts down.
    pub fn spawn_ttl_sweeper(&self, every: Duration) {
        let store = self.clone();
        let mut stop = self.stop_signal();
        tokio::spawn(async move {
            let mut cursors: HashMap<u32, Vec<u8>> = HashMap::new();
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = stop.changed() => return,
                }
                for c in store.all_containers() {
                    // History past its retention goes first (and all of it once off).
                    let c2 = Arc::clone(&c);
                    if let Ok(Err(e)) =
                        tokio::task::spawn_blocking(move || c2.purge_history()).await
                    {
                        tracing::error!(container = %c.id, error = %e, "purging change feed history failed");
                    }
                    if c.default_ttl().is_none() {
                        cursors.remove(&c.cid);
                        continue;
                    }
                    let cursor = cursors.remove(&c.cid);
                    let c2 = Arc::clone(&c);
                    let res = tokio::task::spawn_blocking(move || sweep(&c2, cursor)).await;
                    match res {
                        Ok(Ok((purged, next, token))) => {
                            // Like every write: logged as done once durable.
                            if let Err(e) = c.durable(token).await {
                                tracing::error!(container = %c.id, error = %e, "TTL purge not durable");
                                continue;
                            }
                            if purged > 0 {
                                tracing::info!(container = %format!("{}/{}", c.db, c.id), purged, "purged expired items");
                            }
                            if let Some(n) = next {
                                cursors.insert(c.cid, n);
                            }
                        }
                        Ok(Err(e)) => {
                            tracing::error!(container = %c.id, error = %e, "TTL sweep failed")
                        }
                        Err(e) => {
                            tracing::error!(container = %c.id, error = %e, "TTL sweep panicked")
                        }
                    }
                }
            }
        });
    }
}

/// What one sweep did: items purged, where to continue (None: wrapped around), and the
/// token to await before counting the purge as done.
type Swept = (u64, Option<Vec<u8>>, Durable);

/// Deletes expired items among the next `PER_TICK` after `cursor`, in one transaction.
fn sweep(c: &Container, cursor: Option<Vec<u8>>) -> Result<Swept, StoreError> {
    let prefix = keys::container_prefix(c.cid);
    let end = keys::container_prefix(c.cid + 1);
    let lower = match &cursor {
        Some(k) => Bound::Excluded(&k[..]),
        None => Bound::Included(&prefix[..]),
    };
    let chunk = c
        .engine
        .scan(Space::Items, lower, Bound::Excluded(&end), PER_TICK, false)?;
    let default_ttl = c.default_ttl();
    let now = catalog::now_secs();
    let expired: Vec<Vec<u8>> = chunk
        .iter()
        .filter(|(_, v)| {
            StoredItem::decode(v.clone()).is_some_and(|i| i.is_expired(default_ttl, now))
        })
        .map(|(k, _)| k.clone())
        .collect();
    let next = (chunk.len() == PER_TICK)
        .then(|| chunk.last().map(|(k, _)| k.clone()))
        .flatten();
    if expired.is_empty() || c.deleted.load(std::sync::atomic::Ordering::Acquire) {
        return Ok((0, next, Durable::default()));
    }
    let (n, token) = c.write(|t| {
        t.expiring();
        let mut n = 0;
        for k in &expired {
            let Some((_, epk, id)) = c.codec.parse_item_key(k) else {
                continue;
            };
            // Re-check under the write lock: it may have been rewritten meanwhile.
            if let Some(item) = t.get_raw(&epk, id)? {
                if item.is_expired(default_ttl, now) {
                    t.delete(&epk, id, &item)?;
                    n += 1;
                }
            }
        }
        Ok::<_, StoreError>(n)
    })?;
    Ok((n, next, token))
}
