//! The item operations themselves: what an operation is ([`Op`]), its conditions and
//! outcome, and [`apply`], which runs it in a container transaction.

use super::document::{protected_paths, Doc, MAX_ITEM_BYTES};
use super::system::{stamp, user_properties};
use crate::error::CosmosError;
use crate::store::catalog;
use crate::store::container::{Container, Txn, Written};
use crate::store::record::StoredItem;
use axum::http::StatusCode;
use serde_json::{Map, Value};
use strata_query::patch::Patch;
use strata_query::pk::PartitionKey;

/// Etags compare without regard to surrounding quotes; `*` matches any.
pub fn etag_matches(header: &str, etag: &str) -> bool {
    let h = header.trim();
    h == "*" || h.trim_matches('"') == etag.trim_matches('"')
}

/// One item operation.
#[derive(Debug, Clone)]
pub enum Op {
    Create(Doc),
    Upsert(Doc),
    Replace(Doc),
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

pub fn not_found(id: &str, pk: &PartitionKey) -> CosmosError {
    CosmosError::not_found(format!(
        "Entity with the specified id does not exist in the system: no item with id '{id}' in logical partition {pk}."
    ))
}

pub fn stale(what: &str) -> CosmosError {
    CosmosError::precondition_failed(format!(
        "Operation cannot be performed because one of the specified precondition is not met: {what}."
    ))
}

pub fn check_if_match(
    item: &StoredItem,
    c: &Container,
    cond: &Conditions,
) -> Result<(), CosmosError> {
    if let Some(m) = &cond.if_match {
        if !etag_matches(m, &item.etag(c.cid)) {
            return Err(stale(
                "the item's etag no longer matches If-Match (another writer changed it)",
            ));
        }
    }
    Ok(())
}

/// Applies one operation to the item `id` of logical partition `pk` (EPK `epk`).
pub fn apply(
    t: &mut Txn<'_>,
    epk: &str,
    pk: &PartitionKey,
    id: &str,
    op: Op,
    cond: &Conditions,
) -> Result<Outcome, CosmosError> {
    let c = t.container();
    // The stored version is read once: its live view decides the conditions, the raw one
    // (an expired version not purged yet included) is what a write replaces.
    let raw = t.get_raw(epk, id)?;
    let live = raw.clone().filter(|i| t.is_live(i));
    let written = |t: &mut Txn<'_>, doc: Doc, status: StatusCode| {
        let w = put(t, epk, id, doc, raw.as_ref())?;
        let status = if status == StatusCode::OK && w.created {
            StatusCode::CREATED
        } else {
            status
        };
        let bytes = w.item.json.len();
        Ok::<_, CosmosError>(Outcome {
            status,
            item: Some(w.item),
            bytes,
        })
    };
    match op {
        Op::Create(doc) => {
            if live.is_some() {
                return Err(CosmosError::conflict(format!(
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
                .map
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or(id)
                .to_string();
            if new_id == id {
                return written(t, doc, StatusCode::OK);
            }
            rename(t, epk, pk, id, &new_id, doc, &prev)
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
            let doc = patched(c, &prev, &patch)?;
            written(t, doc.into(), StatusCode::OK)
        }
    }
}

/// Stores `doc` as the new version of item `id` (replacing `previous`, the raw current
/// version, if any), stamped with its system properties.
pub fn put(
    t: &mut Txn<'_>,
    epk: &str,
    id: &str,
    doc: impl Into<Doc>,
    previous: Option<&StoredItem>,
) -> Result<Written, CosmosError> {
    let record = stamp(
        t.container(),
        doc.into(),
        t.next_version(epk, previous),
        t.reads_documents(),
    )?;
    Ok(t.put(epk, id, record, previous)?)
}

/// A replace whose body carries another id renames the item, as the service allows; the new
/// id must be free in the logical partition.
fn rename(
    t: &mut Txn<'_>,
    epk: &str,
    pk: &PartitionKey,
    id: &str,
    new_id: &str,
    doc: Doc,
    prev: &StoredItem,
) -> Result<Outcome, CosmosError> {
    if t.get(epk, new_id)?.is_some() {
        return Err(CosmosError::conflict(format!(
            "Entity with the specified id already exists in the system: the item '{id}' cannot be renamed to '{new_id}', which already exists in logical partition {pk}."
        )));
    }
    let raw = t.get_raw(epk, id)?;
    t.delete(epk, id, raw.as_ref().unwrap_or(prev))?;
    let stale_new = t.get_raw(epk, new_id)?;
    let w = put(t, epk, new_id, doc, stale_new.as_ref())?;
    let bytes = w.item.json.len();
    Ok(Outcome {
        status: StatusCode::OK,
        item: Some(w.item),
        bytes,
    })
}

/// The document a patch makes of the current version `prev`: its condition checked, its
/// operations applied to the user properties (never the id or the key), the size bounded.
fn patched(
    c: &Container,
    prev: &StoredItem,
    patch: &Patch,
) -> Result<Map<String, Value>, CosmosError> {
    let current: Value = serde_json::from_slice(&prev.json)
        .map_err(|e| CosmosError::internal(format!("stored item is not JSON: {e}")))?;
    if let Some(text) = &patch.condition {
        let q = strata_query::sql::prepare_condition(text).map_err(|e| {
            CosmosError::bad_request(format!("The patch condition '{text}' is invalid: {e}"))
        })?;
        let ok = q
            .matches(
                &current,
                &strata_query::sql::Ctx::new(catalog::now_millis() as i64),
            )
            .map_err(|e| CosmosError::bad_request(format!("The patch condition failed: {e}")))?;
        if !ok {
            return Err(stale(&format!(
                "the patch condition '{text}' is false for the current item"
            )));
        }
    }
    let doc = match current {
        Value::Object(m) => m,
        _ => return Err(CosmosError::internal("stored item is not a JSON object")),
    };
    let doc = strata_query::patch::apply_to_object(
        user_properties(doc),
        &patch.operations,
        &protected_paths(c),
    )
    .map_err(CosmosError::bad_request)?;
    let size = serde_json::to_vec(&doc).map(|v| v.len()).unwrap_or(0);
    if size > MAX_ITEM_BYTES {
        return Err(CosmosError::too_large(format!(
            "The patched item would be {size} bytes; the maximum is {MAX_ITEM_BYTES} bytes (2 MB)."
        )));
    }
    Ok(doc)
}
