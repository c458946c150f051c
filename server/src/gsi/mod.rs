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

use crate::api::app::App;
use crate::error::CosmosError;
use crate::items::{self, Conditions, Op};
use crate::store::container::gsi::{Cursor, Definition, Link};
use crate::store::container::history::Operation;
use crate::store::container::{Container, Txn};
use crate::store::StoreError;
use crate::throughput::charge;
use crate::throughput::class::Class;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use strata_query::pk::EpkRange;

/// Source changes applied per index transaction, at most.
const PAGE: usize = 512;

/// How often the task looks for changes when it has caught up.
const IDLE: Duration = Duration::from_millis(100);

/// Starts the task; it stops with the store.
///
/// An index's copies are writes of the index container and spend its throughput, as the
/// service's indexes have their own RU/s: each write is charged to the partition that holds
/// the copy (shown in its partitions view). Under `--enforce-throughput` a page holds at most
/// the writes the index's partitions can pay for now, and an index whose budget is spent is
/// passed over until it refills: it lags behind its source instead of starving the
/// requests served from the same budget.
pub fn spawn(app: &App) {
    let app = app.clone();
    let store = app.store.clone();
    let mut stop = store.stop_signal();
    tokio::spawn(async move {
        let mut builds: HashMap<u32, Building> = HashMap::new();
        loop {
            let mut busy = false;
            for (index, source, def) in store.gsi_indexes() {
                let page = match app.available(&index) {
                    None => PAGE,
                    Some(ru) if ru <= 0.0 => continue,
                    Some(ru) => ((ru / charge::write(0)) as usize).clamp(1, PAGE),
                };
                let (i, s) = (Arc::clone(&index), Arc::clone(&source));
                let building = builds.remove(&index.cid);
                let step =
                    tokio::task::spawn_blocking(move || step(&i, &s, &def, page, building)).await;
                match step {
                    Ok(Ok(done)) => {
                        if let Some(b) = done.building {
                            builds.insert(index.cid, b);
                        }
                        if let Err(e) = index.durable(done.token).await {
                            tracing::error!(index = %index.id, error = %e, "global secondary index write not durable");
                            continue;
                        }
                        for (epk, bytes) in &done.written {
                            let range = index.range_id_of(epk);
                            let ru = charge::write(*bytes);
                            app.record(&index, (&[range], Some(epk)), ru, Class::default());
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

/// An initial build under way: the source's items at `upto` are copied a page per step
/// after `after`; then the history from `from` on is applied. Kept by the task, so a
/// restart builds again from the start.
struct Building {
    from: u64,
    upto: u64,
    after: u64,
}

/// What one step did.
struct Stepped {
    /// Whether more is waiting.
    more: bool,
    /// The cursor it committed (`None`: nothing to apply).
    applied: Option<u64>,
    /// The durability token of its transactions.
    token: crate::store::engine::Durable,
    /// The initial build, while it goes on.
    building: Option<Building>,
    /// The index writes it made: the copy's logical partition and its bytes.
    written: Vec<(String, usize)>,
}

/// One page of at most `page` changes for `index`: of its initial build, else of the
/// source's history.
fn step(
    index: &Container,
    source: &Container,
    def: &Definition,
    page: usize,
    building: Option<Building>,
) -> Result<Stepped, StoreError> {
    let cursor = index.gsi_cursor()?;
    if !cursor.built {
        return build(index, source, def, page, building);
    }
    let upto = source.current_lsn();
    if upto <= cursor.lsn {
        return Ok(Stepped {
            more: false,
            applied: None,
            token: Default::default(),
            building: None,
            written: Vec::new(),
        });
    }
    let changes = source.history(&EpkRange::full(), None, cursor.lsn, upto, page)?;
    let lsn = if changes.exhausted {
        upto
    } else {
        changes.last.unwrap_or(upto)
    };
    let (w, token) = index.write(|t| {
        let mut w = Writes::default();
        for change in &changes.changes {
            let doc = match change.op {
                Operation::Delete => None,
                Operation::Create | Operation::Replace => Some(&change.doc[..]),
            };
            copy(t, def, &mut w, (&change.epk, &change.id), doc)?;
        }
        t.set_gsi_cursor(Cursor { lsn, built: true });
        Ok::<_, StoreError>(w)
    })?;
    Ok(Stepped {
        more: !changes.exhausted,
        applied: Some(lsn),
        token,
        building: None,
        written: w.written,
    })
}

/// A page of the initial build: of the items the source held at the LSN the build started
/// at, those after `building`'s place; the last page places the cursor where the source's
/// hold for the index is, so the history from there on is applied after.
fn build(
    index: &Container,
    source: &Container,
    def: &Definition,
    page: usize,
    building: Option<Building>,
) -> Result<Stepped, StoreError> {
    index.set_gsi_phase(1);
    let b = building.unwrap_or_else(|| Building {
        from: source.history_hold(index.cid).unwrap_or(0),
        upto: source.current_lsn(),
        after: 0,
    });
    let items = source.changes(&EpkRange::full(), None, b.after, b.upto, None, page)?;
    let last = items.exhausted || items.last.is_none();
    let (w, token) = index.write(|t| {
        let mut w = Writes::default();
        for (_, item) in &items.items {
            let Some((epk, id)) = source_key(source, item) else {
                continue;
            };
            copy(t, def, &mut w, (&epk, &id), Some(&item.json[..]))?;
        }
        if last {
            t.set_gsi_cursor(Cursor {
                lsn: b.from,
                built: true,
            });
        }
        Ok::<_, StoreError>(w)
    })?;
    if last {
        index.set_gsi_phase(2);
    }
    Ok(Stepped {
        more: true,
        applied: last.then_some(b.from),
        token,
        building: match items.last {
            Some(after) if !last => Some(Building { after, ..b }),
            _ => None,
        },
        written: w.written,
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

/// What a page's transaction wrote so far: the links (the catalog shows only committed
/// ones) and the index writes, for their charge.
#[derive(Default)]
struct Writes {
    links: HashMap<(String, String), Option<Link>>,
    written: Vec<(String, usize)>,
}

impl Writes {
    fn get(&self, t: &Txn<'_>, key: &(String, String)) -> Result<Option<Link>, StoreError> {
        match self.links.get(key) {
            Some(l) => Ok(l.clone()),
            None => t.container().gsi_link(&key.0, &key.1),
        }
    }

    fn set(&mut self, t: &mut Txn<'_>, key: (String, String), link: Option<Link>) {
        t.set_gsi_link(&key.0, &key.1, link.as_ref());
        self.links.insert(key, link);
    }
}

/// Brings the copy of source item `(epk, id)` to its version `doc` (`None`: deleted): the
/// projected copy upserted in its logical partition (and removed from the one it was in, if
/// its partition key value changed), or removed.
fn copy(
    t: &mut Txn<'_>,
    def: &Definition,
    links: &mut Writes,
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
                links.written.push((l.epk.clone(), prev.json.len()));
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
        Op::Upsert(copy.into()),
        &Conditions::default(),
    );
    match done {
        Ok(out) => links.written.push((copy_epk.clone(), out.bytes)),
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
