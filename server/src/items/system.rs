//! The system properties of an item and its `ttl`: what a stored version carries besides the
//! user's document. A write drops whatever the client sent for `_rid`, `_self`, `_etag`,
//! `_ts`, `_attachments` and `_lsn` (the one list, `strata_query::protocol::SYSTEM_PROPERTIES`)
//! and stamps the values the transaction gives the new version.

use crate::error::CosmosError;
use crate::store::catalog;
use crate::store::container::{Container, Record, Version};
use serde_json::{Map, Value};

/// The item-level `ttl`: absent, `-1` (never expire) or a positive number of seconds.
pub fn ttl_of(doc: &Map<String, Value>) -> Result<Option<i64>, CosmosError> {
    match doc.get("ttl") {
        None => Ok(None),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(t) if t == -1 || t > 0 => Ok(Some(t)),
            _ => Err(CosmosError::bad_request(format!(
                "The 'ttl' value {n} is invalid: it must be -1 (never expire) or a positive whole number of seconds."
            ))),
        },
        Some(_) => Err(CosmosError::bad_request(
            "The 'ttl' property must be a number: -1 (never expire) or a positive whole number of seconds.",
        )),
    }
}

/// The user's properties of a stored document: the document without its system properties.
pub fn user_properties(mut doc: Map<String, Value>) -> Map<String, Value> {
    for k in strata_query::protocol::SYSTEM_PROPERTIES {
        doc.remove(k);
    }
    doc
}

/// The record a write stores for `doc` in container `c` as version `v`.
pub fn stamp(c: &Container, doc: Map<String, Value>, v: Version) -> Result<Record, CosmosError> {
    let ttl = ttl_of(&doc)?;
    let mut doc = user_properties(doc);
    let rid = catalog::doc_rid(c.db_seq, c.cid, v.doc_seq);
    let self_link = format!("dbs/{}/colls/{}/docs/{rid}/", c.db_rid, c.rid);
    doc.insert("_rid".into(), Value::String(rid));
    doc.insert("_self".into(), Value::String(self_link));
    doc.insert(
        "_etag".into(),
        Value::String(catalog::change_etag(c.cid, v.lsn, v.sub)),
    );
    doc.insert("_attachments".into(), Value::String("attachments/".into()));
    doc.insert("_ts".into(), Value::from(v.ts));
    Ok(Record {
        version: v,
        doc: Value::Object(doc),
        ttl,
    })
}
