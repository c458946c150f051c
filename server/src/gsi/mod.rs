//! Global secondary indexes kept in sync: a background task copies each source's changes
//! into its indexes, a page of changes per index transaction.
//!
//! An index first copies every item its source holds at some LSN (its initial build), then
//! applies the source's all-versions history after the point where its hold was placed (see
//! `store::container::gsi`): creates and replaces become upserts of the projected copy,
//! deletes (TTL expiries too) delete it, and a copy whose partition key value changed is moved.
//! The copies, the per-item links and the index's cursor commit in one transaction, so after
//! a crash the index resumes where its last commit left it, and changes it applies twice
//! (during a build, the history overlaps the copied items) only write the same copies again.
//! Items are copied as the index's own (its `_rid`, `_etag` and `_ts`); clients cannot write
//! them (`api::commit`).

use crate::error::CosmosError;
use crate::items::{self, Conditions, Op};
use crate::store::container::gsi::{Cursor, Definition, Link};
use crate::store::container::history::Operation;
use crate::store::container::{Container, Txn};
use crate::store::{Store, StoreError};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use strata_query::pk::EpkRange;

/// Source changes applied per index transaction.
const PAGE: usize = 512;

/// How often the task looks for changes when it has caught up.
const IDLE: Duration = Duration::from_millis(100);

/// Starts the task; it stops with the store.
pub fn spawn(store: &Store) {
    let store = store.clone();
    let mut stop = store.stop_signal();
    tokio::spawn(async move {
        loop {
            let mut busy = false;
            for (index, source, def) in store.gsi_indexes() {
                let (i, s) = (Arc::clone(&index), Arc::clone(&source));
                let step = tokio::task::spawn_blocking(move || step(&i, &s, &def)).await;
                match step {
                    Ok(Ok(done)) => {
                        if let Err(e) = index.durable(done.token).await {
                            tracing::error!(index = %index.id, error = %e, "global secondary index write not durable");
                            continue;
                        }
                        // Once durable, the source's history up to the cursor is not needed.
                        if let Some(lsn) = done.applied {
                            source.advance_history_hold(index.cid, lsn);
                        }
                        busy |= done.more;
                    }
                    Ok(Err(e)) => {
                        tracing::error!(index = %index.id, source = %source.id, error = %e, "global secondary index sync failed")
                    }
                    Err(e) => {
                        tracing::error!(index = %index.id, error = %e, "global secondary index sync panicked")
                    }
                }
            }
            if !busy {
                tokio::select! {
                    _ = tokio::time::sleep(IDLE) => {}
                    _ = stop.changed() => return,
                }
            } else if *stop.borrow() {
                return;
            }
        }
    });
}

/// What one step did.
struct Stepped {
    /// Whether more is waiting.
    more: bool,
    /// The cursor it committed (`None`: nothing to apply).
    applied: Option<u64>,
    /// The durability token of its transactions.
    token: crate::store::engine::Durable,
}

/// One page of work for `index`: of its initial build, else of the source's history.
fn step(index: &Container, source: &Container, def: &Definition) -> Result<Stepped, StoreError> {
    let cursor = index.gsi_cursor()?;
    if !cursor.built {
        return build(index, source, def);
    }
    let upto = source.current_lsn();
    if upto <= cursor.lsn {
        return Ok(Stepped {
            more: false,
            applied: None,
            token: Default::default(),
        });
    }
    let page = source.history(&EpkRange::full(), None, cursor.lsn, upto, PAGE)?;
    let lsn = if page.exhausted {
        upto
    } else {
        page.last.unwrap_or(upto)
    };
    let ((), token) = index.write(|t| {
        let mut links = Links::default();
        for change in &page.changes {
            let doc = match change.op {
                Operation::Delete => None,
                Operation::Create | Operation::Replace => Some(&change.doc[..]),
            };
            copy(t, def, &mut links, (&change.epk, &change.id), doc)?;
        }
        t.set_gsi_cursor(Cursor { lsn, built: true });
        Ok::<_, StoreError>(())
    })?;
    Ok(Stepped {
        more: !page.exhausted,
        applied: Some(lsn),
        token,
    })
}

/// The initial build: every item the source holds at the LSN it starts at, copied a page
/// per transaction (a restart copies them again), then the cursor placed where the
/// source's hold for the index is, so the history from there on is applied after.
fn build(index: &Container, source: &Container, def: &Definition) -> Result<Stepped, StoreError> {
    index.set_gsi_phase(1);
    let from = source.history_hold(index.cid).unwrap_or(0);
    let upto = source.current_lsn();
    let mut after = 0;
    let mut token = crate::store::engine::Durable::default();
    loop {
        let page = source.changes(&EpkRange::full(), None, after, upto, None, PAGE)?;
        let last = page.exhausted;
        let ((), t) = index.write(|t| {
            let mut links = Links::default();
            for (_, item) in &page.items {
                let Some((epk, id)) = source_key(source, item) else {
                    continue;
                };
                copy(t, def, &mut links, (&epk, &id), Some(&item.json[..]))?;
            }
            if last {
                t.set_gsi_cursor(Cursor {
                    lsn: from,
                    built: true,
                });
            }
            Ok::<_, StoreError>(())
        })?;
        token = token.max(t);
        match page.last {
            Some(l) if !last => after = l,
            _ => break,
        }
    }
    index.set_gsi_phase(2);
    Ok(Stepped {
        more: true,
        applied: Some(from),
        token,
    })
}

/// The logical partition and id of a source item, from its JSON.
fn source_key(
    source: &Container,
    item: &crate::store::record::StoredItem,
) -> Option<(String, String)> {
    let doc: Map<String, Value> = serde_json::from_slice(&item.json).ok()?;
    let id = doc.get("id")?.as_str()?.to_string();
    let (_, epk) = items::point_key(source, None, Some(&doc)).ok()?;
    Some((epk, id))
}

/// Links written earlier in the same transaction (the catalog shows only committed ones).
#[derive(Default)]
struct Links(HashMap<(String, String), Option<Link>>);

impl Links {
    fn get(&self, t: &Txn<'_>, key: &(String, String)) -> Result<Option<Link>, StoreError> {
        match self.0.get(key) {
            Some(l) => Ok(l.clone()),
            None => t.container().gsi_link(&key.0, &key.1),
        }
    }

    fn set(&mut self, t: &mut Txn<'_>, key: (String, String), link: Option<Link>) {
        t.set_gsi_link(&key.0, &key.1, link.as_ref());
        self.0.insert(key, link);
    }
}

/// Brings the copy of source item `(epk, id)` to its version `doc` (`None`: deleted): the
/// projected copy upserted in its logical partition (and removed from the one it was in, if
/// its partition key value changed), or removed.
fn copy(
    t: &mut Txn<'_>,
    def: &Definition,
    links: &mut Links,
    (epk, id): (&str, &str),
    doc: Option<&[u8]>,
) -> Result<(), StoreError> {
    let key = (epk.to_string(), id.to_string());
    let old = links.get(t, &key)?;
    let new = match doc.map(serde_json::from_slice::<Map<String, Value>>) {
        Some(Ok(d)) => Some(def.project(&d)),
        Some(Err(e)) => {
            return Err(StoreError::Corrupt(format!(
                "source item '{id}' is not a JSON object: {e}"
            )))
        }
        None => None,
    };
    let placed = match new {
        None => None,
        Some(copy) => match items::point_key(t.container(), None, Some(&copy)) {
            Ok((pk, copy_epk)) => Some((pk, copy_epk, copy)),
            Err(e) => {
                // A value the index's partition key cannot take (an object, say): the item has
                // no copy, as a document could not be written with it.
                tracing::warn!(index = %t.container().id, item = %id, error = %e.message, "source item not copied");
                None
            }
        },
    };
    if let Some(l) = &old {
        let moved = placed.as_ref().is_none_or(|(_, e, c)| {
            *e != l.epk || c.get("id").and_then(Value::as_str) != Some(l.id.as_str())
        });
        if moved {
            if let Some(prev) = t.get_raw(&l.epk, &l.id)? {
                t.delete(&l.epk, &l.id, &prev)?;
            }
        }
    }
    let Some((pk, copy_epk, copy)) = placed else {
        if old.is_some() {
            links.set(t, key, None);
        }
        return Ok(());
    };
    let copy_id = copy
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let point = t.savepoint();
    let done = items::apply(
        t,
        &copy_epk,
        &pk,
        &copy_id,
        Op::Upsert(copy),
        &Conditions::default(),
    );
    match done {
        Ok(_) => {}
        // A copy the index refuses (a unique key it breaks, say) is left out, as a write
        // of it would have been; the rest of the page goes on.
        Err(e) if e.status.is_client_error() => {
            t.rollback_to(point);
            tracing::warn!(index = %t.container().id, item = %id, error = %e.message, "source item not copied");
            if old.is_some() {
                links.set(t, key, None);
            }
            return Ok(());
        }
        Err(e) => return Err(store_error(e)),
    }
    links.set(
        t,
        key,
        Some(Link {
            epk: copy_epk,
            id: copy_id,
        }),
    );
    Ok(())
}

/// An item-layer error of a copy, for the task's log.
fn store_error(e: CosmosError) -> StoreError {
    StoreError::BadRequest(format!("copying into the index: {}", e.message))
}
