//! The system properties of an item and its `ttl`: what a stored version carries besides the
//! user's document. A write drops whatever the client sent for `_rid`, `_self`, `_etag`,
//! `_ts`, `_attachments` and `_lsn` (the one list, `strata_query::protocol::SYSTEM_PROPERTIES`)
//! and stamps the values the transaction gives the new version.

use super::document::Doc;
use crate::error::CosmosError;
use crate::store::catalog;
use crate::store::container::{Container, Record, Version};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::io::Write;
use strata_query::members;
use strata_query::protocol::SYSTEM_PROPERTIES;

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
    for k in SYSTEM_PROPERTIES {
        doc.remove(k);
    }
    doc
}

/// The record a write stores for `doc` in container `c` as version `v`: its text — the
/// request's own members when the document has a request text ([`Doc::text`]), else its
/// properties written out — with the system properties appended. `parsed` also keeps the
/// stamped document for maintainers that read one (a container with only the range index,
/// which reads the text, needs none). Stamping a document and serialising it, then copying
/// the text into the record, were 9.6% of a lean-suite upsert's server CPU under `perf`;
/// writing the text directly, 7.5%.
pub fn stamp(c: &Container, doc: Doc, v: Version, parsed: bool) -> Result<Record, CosmosError> {
    let ttl = ttl_of(&doc.map)?;
    let rid = catalog::doc_rid(c.db_seq, c.cid, v.doc_seq);
    let self_link = format!("dbs/{}/colls/{}/docs/{rid}/", c.db_rid, c.rid);
    let etag = catalog::change_etag(c.cid, v.lsn, v.sub);
    let is_system = |k: &[u8]| SYSTEM_PROPERTIES.iter().any(|s| s.as_bytes() == k);
    // Room for the system properties (about 190 bytes) without growing.
    let mut json = Vec::with_capacity(doc.text.as_ref().map_or(512, |t| t.len() + 256));
    json.push(b'{');
    // The request's text serves when it has exactly the properties read from it: a key it
    // repeats (the parse kept the last) or spells with an escape falls back to the properties.
    let copied = doc.text.as_ref().and_then(|t| {
        members::copy_members(t, &mut json, is_system)
            .filter(|(n, _)| *n == doc.map.len())
            .map(|(_, copied)| copied)
    });
    let mut first = match copied {
        Some(copied) => !copied,
        None => {
            json.truncate(1);
            write_properties(&doc.map, &mut json)?
        }
    };
    let system: [(&str, Cow<'static, str>); 4] = [
        ("_rid", rid.into()),
        ("_self", self_link.into()),
        ("_etag", etag.into()),
        ("_attachments", "attachments/".into()),
    ];
    for (k, val) in &system {
        key(&mut json, &mut first, k);
        push_string(&mut json, val);
    }
    key(&mut json, &mut first, "_ts");
    let _ = write!(json, "{}", v.ts);
    json.push(b'}');
    let doc = parsed.then(|| {
        let mut m = user_properties(doc.map);
        for (k, val) in system {
            m.insert(k.into(), Value::String(val.into_owned()));
        }
        m.insert("_ts".into(), Value::from(v.ts));
        Value::Object(m)
    });
    Ok(Record {
        version: v,
        json,
        doc,
        ttl,
    })
}

/// Writes the user's properties of `doc` (its system properties left out), comma-separated;
/// whether none was written.
fn write_properties(doc: &Map<String, Value>, out: &mut Vec<u8>) -> Result<bool, CosmosError> {
    let mut first = true;
    for (k, v) in doc {
        if !SYSTEM_PROPERTIES.contains(&k.as_str()) {
            property(out, &mut first, k, v)?;
        }
    }
    Ok(first)
}

/// Appends key `k`, `"k":` (after a comma unless `first`).
fn key(out: &mut Vec<u8>, first: &mut bool, k: &str) {
    if !*first {
        out.push(b',');
    }
    *first = false;
    push_string(out, k);
    out.push(b':');
}

/// Appends string `v` quoted and escaped. serde's writer for the five strings a stamp adds
/// (the rid's base64, the self link, the quoted etag; none needs an escape but the etag's
/// quotes) was 0.8% of an upsert's server CPU.
fn push_string(out: &mut Vec<u8>, v: &str) {
    out.push(b'"');
    for &b in v.as_bytes() {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0..=0x1f => {
                let hex = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.extend_from_slice(&[hex[usize::from(b >> 4)], hex[usize::from(b & 15)]]);
            }
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

/// Appends the user's property `"k":v` (after a comma unless `first`).
fn property(
    out: &mut Vec<u8>,
    first: &mut bool,
    k: &str,
    v: &impl serde::Serialize,
) -> Result<(), CosmosError> {
    key(out, first, k);
    serde_json::to_writer(&mut *out, v)
        .map_err(|e| CosmosError::bad_request(format!("The document cannot be stored: {e}")))
}
