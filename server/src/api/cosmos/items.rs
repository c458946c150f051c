//! Item requests: create, upsert, read, replace, delete, patch, delete-by-partition-key.
//!
//! Each request decodes into one [`Op`] that the item layer's [`apply`] runs inside a
//! container transaction, so a point request, a transactional batch, a stored procedure and a
//! trigger run exactly the same code. Every operation addresses one logical partition, by the
//! `x-ms-documentdb-partitionkey` header (or, for writes without one, the key found in the
//! document).

use crate::items::triggers;
use crate::items::{
    apply, check_doc_key, document, etag_matches, not_found, point_key, Conditions, Doc, Op,
    Outcome,
};
use strata_query::protocol::header;

use crate::api::commit::{Admission, Commit};
use crate::api::request::Req;
use crate::api::response::{names, Reply};
use crate::api::App;
use crate::error::{substatus, CosmosError};
use crate::store::catalog;
use crate::store::container::Container;
use crate::throughput::charge;
use axum::http::{HeaderValue, StatusCode};
use std::borrow::Cow;
use std::sync::Arc;
use strata_query::pk::PartitionKey;

/// Resolves the container, honouring `x-ms-cosmos-intended-collection-rid` (a client whose
/// cached container was deleted and re-created under the same name must refresh its cache).
pub fn container(
    app: &App,
    req: &Req,
    db: &str,
    coll: &str,
) -> Result<Arc<Container>, CosmosError> {
    let c = app.store.container(db, coll)?;
    if let Some(rid) = req.header(header::INTENDED_COLLECTION_RID) {
        if !rid.is_empty() && rid != c.rid {
            return Err(CosmosError::bad_request(format!(
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
fn item_id<'a>(
    c: &Container,
    db: &str,
    epk: &str,
    id: &'a str,
) -> Result<Cow<'a, str>, CosmosError> {
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
            let mut r = Reply::new(o.status, body);
            if let Ok(etag) = HeaderValue::from_str(&item.etag(c.cid)) {
                r = r.with(names::ETAG, etag);
            }
            if write {
                r
            } else {
                r.with(names::ITEM_LSN, HeaderValue::from(item.lsn))
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
) -> Result<Reply, CosmosError> {
    let cond = conditions(req);
    let triggers = triggers::requested(
        c,
        req.header(header::PRE_TRIGGER_INCLUDE),
        req.header(header::POST_TRIGGER_INCLUDE),
        &op,
    )?;
    let mut commit = Commit::admit(app, (c, req), &epk, charge::write(req.body.len()))?;
    let range = commit.range();
    // A write refused by the item's state still tells the client where the partition is.
    let located = |e: CosmosError| match e.status.as_u16() {
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
            .transact_blocking(move |t| triggers::run(t, &triggers, &pk, &epk, &id, op, &cond))
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
pub async fn create(app: &App, req: &Req, c: &Arc<Container>) -> Result<Reply, CosmosError> {
    let (doc, id) = document(req.json()?, req.body.len())?;
    let (pk, epk) = point_key(c, req.partition_key()?, Some(&doc))?;
    check_doc_key(c, &pk, &doc)?;
    let doc = Doc::read_from(doc, req.body.clone());
    let op = if req.flag(header::IS_UPSERT) {
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
) -> Result<Reply, CosmosError> {
    let (pk, epk) = point_key(c, req.partition_key()?, None)?;
    let id = item_id(c, db, &epk, id)?;
    let session = req.header(header::SESSION_TOKEN);
    app.regions.check_session(req.region, &c.rid, session)?;
    let admitted = Admission::point(app, (c, req), &epk, charge::read(0))?;
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
) -> Result<Reply, CosmosError> {
    // A different id in the body renames the item (see `apply`).
    let (doc, _) = document(req.json()?, req.body.len())?;
    let (pk, epk) = point_key(c, req.partition_key()?, Some(&doc))?;
    let id = item_id(c, db, &epk, id)?;
    check_doc_key(c, &pk, &doc)?;
    write_one(
        app,
        req,
        c,
        pk,
        epk,
        &id,
        Op::Replace(Doc::read_from(doc, req.body.clone())),
    )
    .await
}

/// `DELETE .../docs/{id}`.
pub async fn delete(
    app: &App,
    req: &Req,
    c: &Arc<Container>,
    db: &str,
    id: &str,
) -> Result<Reply, CosmosError> {
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
) -> Result<Reply, CosmosError> {
    let patch = strata_query::patch::parse(&req.json()?).map_err(CosmosError::bad_request)?;
    let (pk, epk) = point_key(c, req.partition_key()?, None)?;
    let id = item_id(c, db, &epk, id)?;
    write_one(app, req, c, pk, epk, &id, Op::Patch(patch)).await
}

/// `POST .../operations/partitionkeydelete`: removes every item of one logical partition
/// (or, on a hierarchical container, of a key prefix) in bounded transactions.
pub async fn delete_partition(
    app: &App,
    req: &Req,
    c: &Arc<Container>,
) -> Result<Reply, CosmosError> {
    let pk = req.partition_key()?.ok_or_else(|| {
        CosmosError::bad_request(
            "Deleting all items of a partition key needs the x-ms-documentdb-partitionkey header.",
        )
    })?;
    let range = strata_query::pk::epk::epk_range(&c.pk, &pk)?;
    let exact = (pk.len() == c.pk.levels()).then(|| range.min.clone());
    let started = std::time::Instant::now();
    let touched = crate::api::scope::ranges_touched(c, &range);
    let mut commit = Commit::admit_ranges(app, (c, req), touched.clone(), charge::write(0))?;
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
                Ok::<_, CosmosError>(chunk.len() as u64)
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
        .header(header::IS_PARTITION_KEY_DELETE_PENDING, "false")
        .charge(ru)
        .session(&touched, c.current_lsn())
        .container(c))
}
