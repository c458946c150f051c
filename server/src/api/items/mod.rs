//! Item operations: create, upsert, read, replace, delete, patch.
//!
//! Each operation is one [`Op`] applied by [`apply`] inside a container transaction, so a
//! point request and a transactional batch run exactly the same code. Every operation
//! addresses one logical partition, by the `x-ms-documentdb-partitionkey` header (or, for
//! writes without one, the key found in the document).

use super::commit::{Admission, Commit};
use super::error::{substatus, ApiError};
use super::request::{validate_id, Req, MAX_ITEM_BYTES};
use super::response::Reply;
use super::scope::full_key;
use super::App;
use crate::store::catalog;
use crate::store::container::{Container, Txn};
use crate::store::item::StoredItem;
use crate::throughput::charge;
use axum::http::StatusCode;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::sync::Arc;
use strata_query::patch::Patch;
use strata_query::pk::{PartitionKey, PartitionKind, PkComponent};

/// Resolves the container, honouring `x-ms-cosmos-intended-collection-rid` (a client whose
/// cached container was deleted and re-created under the same name must refresh its cache).
pub fn container(app: &App, req: &Req, db: &str, coll: &str) -> Result<Arc<Container>, ApiError> {
    let c = app.store.container(db, coll)?;
    if let Some(rid) = req.header("x-ms-cosmos-intended-collection-rid") {
        if !rid.is_empty() && rid != c.rid {
            return Err(ApiError::bad_request(format!(
                "The container '{}' has rid '{}', not the intended '{rid}': it was re-created; refresh the container cache.",
                c.id, c.rid
            ))
            .with_sub_status(substatus::COLLECTION_RID_MISMATCH));
        }
    }
    Ok(c)
}

/// The item id a request path names. The SDKs address an item by its `_self` link
/// (`dbs/{rid}/colls/{rid}/docs/{rid}`) when given the item itself rather than its id, so on a
/// rid-based path the last segment is the item's `_rid`; name-based paths pass through.
fn item_id<'a>(c: &Container, db: &str, epk: &str, id: &'a str) -> Result<Cow<'a, str>, ApiError> {
    if db == c.db || db != c.db_rid {
        return Ok(Cow::Borrowed(id));
    }
    match catalog::doc_seq_of(&c.rid, id) {
        Some(seq) => Ok(c
            .id_by_doc_seq(epk, seq)?
            .map_or(Cow::Borrowed(id), Cow::Owned)),
        None => Ok(Cow::Borrowed(id)),
    }
}

/// Etags compare without regard to surrounding quotes; `*` matches any.
pub fn etag_matches(header: &str, etag: &str) -> bool {
    let h = header.trim();
    h == "*" || h.trim_matches('"') == etag.trim_matches('"')
}

/// The partition key of a point operation: the given one, else (for writes) the document's.
pub fn point_key(
    c: &Container,
    given: Option<PartitionKey>,
    doc: Option<&Map<String, Value>>,
) -> Result<(PartitionKey, String), ApiError> {
    let pk = match (given, doc) {
        (Some(pk), _) => pk,
        (None, Some(d)) => c.pk.extract_map(d),
        (None, None) if c.pk.system_key => PartitionKey::default(),
        (None, None) => {
            return Err(ApiError::bad_request(
                "PartitionKey value must be supplied for this operation: send the x-ms-documentdb-partitionkey header (a JSON array with one value per partition key path).",
            ))
        }
    };
    if pk.len() < c.pk.levels() && !(c.pk.system_key && pk.is_empty()) {
        return Err(ApiError::bad_request(format!(
            "Partition key provided either doesn't correspond to definition in the collection or doesn't match partition key field values specified in the document. Point operations need the full partition key: the container has {} partition key path(s) ({}) but {} value(s) were given. A prefix is only accepted by queries and the change feed.",
            c.pk.levels(),
            c.pk.paths.join(", "),
            pk.len()
        ))
        .with_sub_status(substatus::PARTITION_KEY_MISMATCH));
    }
    full_key(c, pk)
}

/// Checks that the document's own partition key matches the one the request routes by.
pub fn check_doc_key(
    c: &Container,
    pk: &PartitionKey,
    doc: &Map<String, Value>,
) -> Result<(), ApiError> {
    if c.pk.system_key {
        return Ok(());
    }
    let found = c.pk.extract_map(doc);
    // A hierarchical key needs every level in the document (an explicit null is a value); the
    // service refuses an item missing one whatever the header says.
    if c.pk.kind == PartitionKind::MultiHash {
        if let Some(i) = found.0.iter().position(|v| *v == PkComponent::Undefined) {
            return Err(ApiError::bad_request(format!(
                "PartitionKey extracted from document doesn't match the one specified in the header: the document has no value at {}, level {} of the container's hierarchical partition key ({}); every level needs a value (null is one).",
                c.pk.paths[i],
                i + 1,
                c.pk.paths.join(", ")
            ))
            .with_sub_status(substatus::PARTITION_KEY_MISMATCH));
        }
    }
    let ok = pk.0.len() == found.0.len()
        && pk
            .0
            .iter()
            .zip(&found.0)
            .all(|(h, d)| h.matches_document(d));
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "PartitionKey extracted from document doesn't match the one specified in the header: the header says {pk}, the document has {found} at {}.",
            c.pk.paths.join(", ")
        ))
        .with_sub_status(substatus::PARTITION_KEY_MISMATCH))
    }
}

/// A document to write: size-checked, an object, with a valid id.
pub fn document(body: Value, size: usize) -> Result<(Map<String, Value>, String), ApiError> {
    if size > MAX_ITEM_BYTES {
        return Err(ApiError::too_large(format!(
            "The item is {size} bytes; the maximum document size is {MAX_ITEM_BYTES} bytes (2 MB)."
        )));
    }
    let doc = match body {
        Value::Object(m) => m,
        other => {
            return Err(ApiError::bad_request(format!(
                "The item must be a JSON object, not {}.",
                super::request::json_kind(&other)
            )))
        }
    };
    let id = validate_id(doc.get("id").unwrap_or(&Value::Null), "item")?;
    Ok((doc, id))
}

/// One item operation.
#[derive(Debug, Clone)]
pub enum Op {
    Create(Map<String, Value>),
    Upsert(Map<String, Value>),
    Replace(Map<String, Value>),
    Read,
    Delete,
    Patch(Patch),
}

/// Conditions on the current version (`If-Match`, `If-None-Match`).
#[derive(Debug, Clone, Default)]
pub struct Conditions {
    pub if_match: Option<String>,
    pub if_none_match: Option<String>,
}

/// What an operation produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub status: StatusCode,
    /// The resulting (or read) version; none for a delete.
    pub item: Option<StoredItem>,
    /// Size of the document involved, for the request charge.
    pub bytes: usize,
}

fn not_found(id: &str, pk: &PartitionKey) -> ApiError {
    ApiError::not_found(format!(
        "Entity with the specified id does not exist in the system: no item with id '{id}' in logical partition {pk}."
    ))
}

fn stale(what: &str) -> ApiError {
    ApiError::precondition_failed(format!(
        "Operation cannot be performed because one of the specified precondition is not met: {what}."
    ))
}

fn check_if_match(item: &StoredItem, c: &Container, cond: &Conditions) -> Result<(), ApiError> {
    if let Some(m) = &cond.if_match {
        if !etag_matches(m, &item.etag(c.cid)) {
            return Err(stale(
                "the item's etag no longer matches If-Match (another writer changed it)",
            ));
        }
    }
    Ok(())
}

/// The paths a patch may not touch: the id and the partition key.
pub fn protected_paths(c: &Container) -> Vec<String> {
    let mut v = vec!["/id".to_string()];
    v.extend(c.pk.paths.iter().cloned());
    v
}

/// Applies one operation to the item `id` of logical partition `pk` (EPK `epk`).
pub fn apply(
    t: &mut Txn<'_>,
    epk: &str,
    pk: &PartitionKey,
    id: &str,
    op: Op,
    cond: &Conditions,
) -> Result<Outcome, ApiError> {
    let c = t.container();
    let live = t.get(epk, id)?;
    let written = |t: &mut Txn<'_>, doc: Map<String, Value>, status: StatusCode| {
        let raw = t.get_raw(epk, id)?;
        let w = t.put(epk, id, doc, raw.as_ref())?;
        let status = if status == StatusCode::OK && w.created {
            StatusCode::CREATED
        } else {
            status
        };
        let bytes = w.item.json.len();
        Ok::<_, ApiError>(Outcome {
            status,
            item: Some(w.item),
            bytes,
        })
    };
    match op {
        Op::Create(doc) => {
            if live.is_some() {
                return Err(ApiError::conflict(format!(
                    "Entity with the specified id already exists in the system: an item with id '{id}' already exists in logical partition {pk}."
                )));
            }
            written(t, doc, StatusCode::CREATED)
        }
        Op::Upsert(doc) => match &live {
            Some(prev) => {
                check_if_match(prev, c, cond)?;
                if cond.if_none_match.as_deref().map(str::trim) == Some("*") {
                    return Err(stale("If-None-Match: * was given but the item exists"));
                }
                written(t, doc, StatusCode::OK)
            }
            // If-Match guards the version an upsert replaces; with none to replace, the
            // service creates the item (the official SDK's
            // `test_etag_match_condition_compatibility` upserts a new item with a random etag).
            None => written(t, doc, StatusCode::CREATED),
        },
        Op::Replace(doc) => {
            let prev = live.ok_or_else(|| not_found(id, pk))?;
            check_if_match(&prev, c, cond)?;
            let new_id = doc
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or(id)
                .to_string();
            if new_id == id {
                return written(t, doc, StatusCode::OK);
            }
            // A body with another id renames the item, as the service allows; the new id
            // must be free in the logical partition.
            if t.get(epk, &new_id)?.is_some() {
                return Err(ApiError::conflict(format!(
                    "Entity with the specified id already exists in the system: the item '{id}' cannot be renamed to '{new_id}', which already exists in logical partition {pk}."
                )));
            }
            let raw = t.get_raw(epk, id)?;
            t.delete(epk, id, raw.as_ref().unwrap_or(&prev))?;
            let stale_new = t.get_raw(epk, &new_id)?;
            let w = t.put(epk, &new_id, doc, stale_new.as_ref())?;
            let bytes = w.item.json.len();
            Ok(Outcome {
                status: StatusCode::OK,
                item: Some(w.item),
                bytes,
            })
        }
        Op::Read => {
            let item = live.ok_or_else(|| not_found(id, pk))?;
            if let Some(inm) = &cond.if_none_match {
                if etag_matches(inm, &item.etag(c.cid)) {
                    return Ok(Outcome {
                        status: StatusCode::NOT_MODIFIED,
                        item: Some(item),
                        bytes: 0,
                    });
                }
            }
            let bytes = item.json.len();
            Ok(Outcome {
                status: StatusCode::OK,
                item: Some(item),
                bytes,
            })
        }
        Op::Delete => {
            let prev = live.ok_or_else(|| not_found(id, pk))?;
            check_if_match(&prev, c, cond)?;
            let raw = t.get_raw(epk, id)?;
            t.delete(epk, id, raw.as_ref().unwrap_or(&prev))?;
            Ok(Outcome {
                status: StatusCode::NO_CONTENT,
                item: None,
                bytes: prev.json.len(),
            })
        }
        Op::Patch(patch) => {
            let prev = live.ok_or_else(|| not_found(id, pk))?;
            check_if_match(&prev, c, cond)?;
            let current: Value = serde_json::from_slice(&prev.json)
                .map_err(|e| ApiError::internal(format!("stored item is not JSON: {e}")))?;
            if let Some(text) = &patch.condition {
                let q = strata_query::sql::prepare_condition(text).map_err(|e| {
                    ApiError::bad_request(format!("The patch condition '{text}' is invalid: {e}"))
                })?;
                let ok = q
                    .matches(
                        &current,
                        &strata_query::sql::Ctx::new(catalog::now_millis() as i64),
                    )
                    .map_err(|e| {
                        ApiError::bad_request(format!("The patch condition failed: {e}"))
                    })?;
                if !ok {
                    return Err(stale(&format!(
                        "the patch condition '{text}' is false for the current item"
                    )));
                }
            }
            let mut doc = match current {
                Value::Object(m) => m,
                _ => return Err(ApiError::internal("stored item is not a JSON object")),
            };
            for k in ["_rid", "_self", "_etag", "_attachments", "_ts"] {
                doc.remove(k);
            }
            let doc =
                strata_query::patch::apply_to_object(doc, &patch.operations, &protected_paths(c))
                    .map_err(ApiError::bad_request)?;
            let size = serde_json::to_vec(&doc).map(|v| v.len()).unwrap_or(0);
            if size > MAX_ITEM_BYTES {
                return Err(ApiError::too_large(format!(
                    "The patched item would be {size} bytes; the maximum is {MAX_ITEM_BYTES} bytes (2 MB)."
                )));
            }
            written(t, doc, StatusCode::OK)
        }
    }
}

/// The response to a successful point operation.
fn reply(c: &Container, req: &Req, o: &Outcome, range_id: u32) -> Reply {
    let write = req.method != axum::http::Method::GET;
    // A write answers with its own LSN (not one a later write reached meanwhile); a read with
    // the partition's, and the item's own in `x-ms-item-lsn`.
    let lsn = match &o.item {
        Some(item) if write => item.lsn,
        _ => c.current_lsn(),
    };
    let mut r = match &o.item {
        Some(item) => {
            let body = if (write && req.minimal_response()) || o.status == StatusCode::NOT_MODIFIED
            {
                bytes::Bytes::new()
            } else {
                item.json.clone()
            };
            let r = Reply::new(o.status, body).header("etag", item.etag(c.cid));
            if write {
                r
            } else {
                r.header("x-ms-item-lsn", item.lsn.to_string())
            }
        }
        None => Reply::empty(o.status),
    };
    r = r.charge(match o.status {
        StatusCode::OK if req.method == axum::http::Method::GET => charge::read(o.bytes),
        StatusCode::NOT_MODIFIED => 1.0,
        _ => charge::write(o.bytes),
    });
    r.session(&[range_id], lsn).container(c)
}

fn conditions(req: &Req) -> Conditions {
    Conditions {
        if_match: req.if_match().map(str::to_string),
        if_none_match: req.if_none_match().map(str::to_string),
    }
}

/// Runs one write operation and waits for it to be durable.
async fn write_one(
    app: &App,
    req: &Req,
    c: &Arc<Container>,
    pk: PartitionKey,
    epk: String,
    id: &str,
    op: Op,
) -> Result<Reply, ApiError> {
    let cond = conditions(req);
    let triggers = super::triggers::requested(c, req, &op)?;
    let mut commit = Commit::admit(app, c, &epk, charge::write(req.body.len()))?;
    let range = commit.range();
    // A write refused by the item's state still tells the client where the partition is.
    let located = |e: ApiError| match e.status.as_u16() {
        404 | 409 | 412 => e.with_session(&[range], c.current_lsn()),
        _ => e,
    };
    let (outcome, script_ru) = if triggers.is_empty() {
        (
            commit
                .transact(|t| apply(t, &epk, &pk, id, op, &cond))
                .await
                .map_err(located)?,
            0.0,
        )
    } else {
        let id = id.to_string();
        commit
            .transact_blocking(move |t| {
                super::triggers::run(t, &triggers, &pk, &epk, &id, op, &cond)
            })
            .await
            .map_err(located)?
    };
    commit.durable().await?;
    let mut r = reply(c, req, &outcome, commit.range());
    if script_ru > 0.0 {
        let total = r.charge + script_ru;
        r = r.charge(total);
    }
    commit.settle(r.charge);
    Ok(r)
}

/// `POST .../docs`: create, or upsert with `x-ms-documentdb-is-upsert`.
pub async fn create(app: &App, req: &Req, c: &Arc<Container>) -> Result<Reply, ApiError> {
    let (doc, id) = document(req.json()?, req.body.len())?;
    let (pk, epk) = point_key(c, req.partition_key()?, Some(&doc))?;
    check_doc_key(c, &pk, &doc)?;
    let op = if req.flag("x-ms-documentdb-is-upsert") {
        Op::Upsert(doc)
    } else {
        Op::Create(doc)
    };
    write_one(app, req, c, pk, epk, &id, op).await
}

/// `GET .../docs/{id}` (no transaction: a plain read of the current version).
pub fn read(
    app: &App,
    req: &Req,
    c: &Arc<Container>,
    db: &str,
    id: &str,
) -> Result<Reply, ApiError> {
    let (pk, epk) = point_key(c, req.partition_key()?, None)?;
    let id = item_id(c, db, &epk, id)?;
    let admitted = Admission::point(app, c, &epk, charge::read(0))?;
    let Some((item, range_id)) = c.read_item(&epk, &id)? else {
        return Err(not_found(&id, &pk).with_session(&[c.range_id_of(&epk)], c.current_lsn()));
    };
    let mut status = StatusCode::OK;
    if let Some(inm) = req.if_none_match() {
        if etag_matches(inm, &item.etag(c.cid)) {
            status = StatusCode::NOT_MODIFIED;
        }
    }
    let bytes = item.json.len();
    let r = reply(
        c,
        req,
        &Outcome {
            status,
            item: Some(item),
            bytes,
        },
        range_id,
    );
    admitted.settle(r.charge);
    Ok(r)
}

/// `PUT .../docs/{id}`: replace an existing item.
pub async fn replace(
    app: &App,
    req: &Req,
    c: &Arc<Container>,
    db: &str,
    id: &str,
) -> Result<Reply, ApiError> {
    // A different id in the body renames the item (see `apply`).
    let (doc, _) = document(req.json()?, req.body.len())?;
    let (pk, epk) = point_key(c, req.partition_key()?, Some(&doc))?;
    let id = item_id(c, db, &epk, id)?;
    check_doc_key(c, &pk, &doc)?;
    write_one(app, req, c, pk, epk, &id, Op::Replace(doc)).await
}

/// `DELETE .../docs/{id}`.
pub async fn delete(
    app: &App,
    req: &Req,
    c: &Arc<Container>,
    db: &str,
    id: &str,
) -> Result<Reply, ApiError> {
    let (pk, epk) = point_key(c, req.partition_key()?, None)?;
    let id = item_id(c, db, &epk, id)?;
    write_one(app, req, c, pk, epk, &id, Op::Delete).await
}

/// `PATCH .../docs/{id}`: Python's `{"operations", "condition"}` body or JS's bare array,
/// with or without a content type.
pub async fn patch(
    app: &App,
    req: &Req,
    c: &Arc<Container>,
    db: &str,
    id: &str,
) -> Result<Reply, ApiError> {
    let patch = strata_query::patch::parse(&req.json()?).map_err(ApiError::bad_request)?;
    let (pk, epk) = point_key(c, req.partition_key()?, None)?;
    let id = item_id(c, db, &epk, id)?;
    write_one(app, req, c, pk, epk, &id, Op::Patch(patch)).await
}

/// `POST .../operations/partitionkeydelete`: removes every item of one logical partition
/// (or, on a hierarchical container, of a key prefix) in bounded transactions.
pub async fn delete_partition(app: &App, req: &Req, c: &Arc<Container>) -> Result<Reply, ApiError> {
    let pk = req.partition_key()?.ok_or_else(|| {
        ApiError::bad_request(
            "Deleting all items of a partition key needs the x-ms-documentdb-partitionkey header.",
        )
    })?;
    let range = strata_query::pk::epk::epk_range(&c.pk, &pk)?;
    let exact = (pk.len() == c.pk.levels()).then(|| range.min.clone());
    let started = std::time::Instant::now();
    let touched = super::scope::ranges_touched(c, &range);
    let mut commit = Commit::admit_ranges(app, c, touched.clone(), charge::write(0))?;
    let mut deleted = 0u64;
    loop {
        // Bounded transactions: each deletes one chunk atomically.
        let chunk = c.scan_docs(&range, exact.as_deref(), None, 500)?;
        if chunk.is_empty() {
            break;
        }
        let n = commit
            .transact(|t| {
                for (pos, _) in &chunk {
                    t.delete_at(pos)?;
                }
                Ok::<_, ApiError>(chunk.len() as u64)
            })
            .await?;
        deleted += n;
        if deleted.is_multiple_of(10_000) {
            tracing::info!(container = %c.id, partition_key = %pk, deleted, "deleting partition key");
        }
        if exact.is_some() && n < 500 {
            break;
        }
    }
    commit.durable().await?;
    tracing::info!(container = %c.id, partition_key = %pk, deleted, ms = started.elapsed().as_millis() as u64, "deleted all items of partition key");
    let ru = charge::write(0) * deleted.max(1) as f64 / 10.0;
    commit.settle(ru);
    Ok(Reply::empty(StatusCode::OK)
        .header("x-ms-cosmos-is-partition-key-delete-pending", "false")
        .charge(ru)
        .session(&touched, c.current_lsn())
        .container(c))
}
