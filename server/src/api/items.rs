//! Point operations on items: create, upsert, read, replace, delete.
//!
//! Every operation addresses one logical partition, by the `x-ms-documentdb-partitionkey`
//! header (or, for writes without one, the key found in the document).

use super::error::{substatus, ApiError};
use super::request::{validate_id, Req, MAX_ITEM_BYTES};
use super::response::Reply;
use super::scope::full_key;
use super::App;
use crate::store::catalog;
use crate::store::container::{Container, Written};
use crate::store::item::StoredItem;
use crate::store::StoreError;
use crate::throughput::charge;
use axum::http::StatusCode;
use serde_json::{Map, Value};
use std::sync::Arc;
use strata_query::pk::PartitionKey;

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

/// Etags compare without regard to surrounding quotes.
pub fn etag_matches(header: &str, etag: &str) -> bool {
    let h = header.trim();
    h == "*" || h.trim_matches('"') == etag.trim_matches('"')
}

/// The partition key of a point operation: the header, else (for writes) the document's.
fn point_key(
    c: &Container,
    req: &Req,
    doc: Option<&Map<String, Value>>,
) -> Result<(PartitionKey, String), ApiError> {
    let pk = match (req.partition_key()?, doc) {
        (Some(pk), _) => pk,
        (None, Some(d)) => c.pk.extract(&Value::Object(d.clone())),
        (None, None) if c.pk.system_key => PartitionKey::default(),
        (None, None) => {
            return Err(ApiError::bad_request(
                "PartitionKey value must be supplied for this operation: send the x-ms-documentdb-partitionkey header (a JSON array with one value per partition key path).",
            ))
        }
    };
    if pk.len() < c.pk.levels() && !(c.pk.system_key && pk.is_empty()) {
        return Err(ApiError::bad_request(format!(
            "Point operations need the full partition key: the container has {} partition key path(s) ({}) but {} value(s) were given. A prefix is only accepted by queries and the change feed.",
            c.pk.levels(),
            c.pk.paths.join(", "),
            pk.len()
        )));
    }
    full_key(c, pk)
}

/// Checks that the document's own partition key matches the one the request routes by.
fn check_doc_key(
    c: &Container,
    pk: &PartitionKey,
    doc: &Map<String, Value>,
) -> Result<(), ApiError> {
    if c.pk.system_key {
        return Ok(());
    }
    let found = c.pk.extract(&Value::Object(doc.clone()));
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

/// The parsed body of a write: size-checked, an object, with a valid id.
fn write_body(req: &Req) -> Result<(Map<String, Value>, String), ApiError> {
    if req.body.len() > MAX_ITEM_BYTES {
        return Err(ApiError::too_large(format!(
            "The item is {} bytes; the maximum document size is {MAX_ITEM_BYTES} bytes (2 MB).",
            req.body.len()
        )));
    }
    let doc = req.json_object()?;
    let id = validate_id(doc.get("id").unwrap_or(&Value::Null), "item")?;
    Ok((doc, id))
}

/// The response to a successful write.
fn written(c: &Container, req: &Req, w: &Written, status: StatusCode) -> Reply {
    let etag = catalog::etag(c.cid, w.item.lsn);
    let body = if req.minimal_response() {
        bytes::Bytes::new()
    } else {
        w.item.json.clone()
    };
    Reply::new(status, body)
        .header("etag", etag)
        .charge(charge::write(w.item.json.len()))
        .session(&[w.range_id], w.item.lsn)
        .container(c)
}

fn precondition(
    item: &StoredItem,
    c: &Container,
    if_match: Option<&str>,
) -> Result<(), StoreError> {
    if let Some(m) = if_match {
        if !etag_matches(m, &catalog::etag(c.cid, item.lsn)) {
            return Err(StoreError::PreconditionFailed(
                "Operation cannot be performed because one of the specified precondition is not met: the item's etag no longer matches If-Match (it was changed by another writer).".into(),
            ));
        }
    }
    Ok(())
}

/// `POST .../docs`: create, or upsert with `x-ms-documentdb-is-upsert`.
pub async fn create(app: &App, req: &Req, db: &str, coll: &str) -> Result<Reply, ApiError> {
    let c = container(app, req, db, coll)?;
    let (doc, id) = write_body(req)?;
    let (pk, epk) = point_key(&c, req, Some(&doc))?;
    check_doc_key(&c, &pk, &doc)?;
    let upsert = req.flag("x-ms-documentdb-is-upsert");
    let if_match = req.if_match().map(str::to_string);
    let ((w, status), seq) = c.write(|t| {
        let existing = t.get(&epk, &id)?;
        match existing {
            Some(prev) if upsert => {
                precondition(&prev, t.container(), if_match.as_deref())?;
                Ok((t.put(&epk, &id, doc, Some(&prev))?, StatusCode::OK))
            }
            Some(_) => Err(StoreError::Conflict(format!(
                "Entity with the specified id already exists in the system: an item with id '{id}' already exists in logical partition {pk}."
            ))),
            None => {
                if upsert && if_match.as_deref().is_some_and(|m| m != "*") {
                    return Err(StoreError::PreconditionFailed(format!(
                        "Operation cannot be performed because one of the specified precondition is not met: If-Match was given but item '{id}' does not exist."
                    )));
                }
                let raw = t.get_raw(&epk, &id)?;
                Ok((t.put(&epk, &id, doc, raw.as_ref())?, StatusCode::CREATED))
            }
        }
    })?;
    app.store
        .engine()
        .durable(seq)
        .await
        .map_err(StoreError::from)?;
    app.after_write(&c);
    Ok(written(&c, req, &w, status))
}

/// `GET .../docs/{id}`.
pub fn read(app: &App, req: &Req, db: &str, coll: &str, id: &str) -> Result<Reply, ApiError> {
    let c = container(app, req, db, coll)?;
    let (pk, epk) = point_key(&c, req, None)?;
    let Some((item, range_id)) = c.read_item(&epk, id)? else {
        return Err(ApiError::not_found(format!(
            "Entity with the specified id does not exist in the system: no item with id '{id}' in logical partition {pk}."
        )));
    };
    let etag = catalog::etag(c.cid, item.lsn);
    let lsn = c.current_lsn();
    if let Some(inm) = req.if_none_match() {
        if etag_matches(inm, &etag) {
            return Ok(Reply::empty(StatusCode::NOT_MODIFIED)
                .header("etag", etag)
                .session(&[range_id], lsn)
                .container(&c));
        }
    }
    Ok(Reply::new(StatusCode::OK, item.json.clone())
        .header("etag", etag)
        .charge(charge::read(item.json.len()))
        .session(&[range_id], lsn)
        .container(&c))
}

/// `PUT .../docs/{id}`: replace an existing item.
pub async fn replace(
    app: &App,
    req: &Req,
    db: &str,
    coll: &str,
    id: &str,
) -> Result<Reply, ApiError> {
    let c = container(app, req, db, coll)?;
    let (doc, body_id) = write_body(req)?;
    if body_id != id {
        return Err(ApiError::bad_request(format!(
            "The id '{body_id}' in the body does not match the id '{id}' in the request path."
        )));
    }
    let (pk, epk) = point_key(&c, req, Some(&doc))?;
    check_doc_key(&c, &pk, &doc)?;
    let if_match = req.if_match().map(str::to_string);
    let (w, seq) = c.write(|t| {
        let Some(prev) = t.get(&epk, id)? else {
            return Err(StoreError::NotFound(format!(
                "Entity with the specified id does not exist in the system: no item with id '{id}' in logical partition {pk} to replace."
            )));
        };
        precondition(&prev, t.container(), if_match.as_deref())?;
        t.put(&epk, id, doc, Some(&prev))
    })?;
    app.store
        .engine()
        .durable(seq)
        .await
        .map_err(StoreError::from)?;
    app.after_write(&c);
    Ok(written(&c, req, &w, StatusCode::OK))
}

/// `DELETE .../docs/{id}`.
pub async fn delete(
    app: &App,
    req: &Req,
    db: &str,
    coll: &str,
    id: &str,
) -> Result<Reply, ApiError> {
    let c = container(app, req, db, coll)?;
    let (pk, epk) = point_key(&c, req, None)?;
    let if_match = req.if_match().map(str::to_string);
    let (size, seq) = c.write(|t| {
        let Some(prev) = t.get(&epk, id)? else {
            return Err(StoreError::NotFound(format!(
                "Entity with the specified id does not exist in the system: no item with id '{id}' in logical partition {pk} to delete."
            )));
        };
        precondition(&prev, t.container(), if_match.as_deref())?;
        let raw = t.get_raw(&epk, id)?;
        t.delete(&epk, id, raw.as_ref().unwrap_or(&prev))?;
        Ok(prev.json.len())
    })?;
    app.store
        .engine()
        .durable(seq)
        .await
        .map_err(StoreError::from)?;
    let range_id = c.range_id_of(&epk);
    Ok(Reply::empty(StatusCode::NO_CONTENT)
        .charge(charge::write(size))
        .session(&[range_id], c.current_lsn())
        .container(&c))
}
