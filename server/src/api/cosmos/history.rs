//! The all-versions-and-deletes change feed: `GET .../docs` with `A-IM: Full-Fidelity Feed`
//! (the SDKs' `ChangeFeedMode.AllVersionsAndDeletes`).
//!
//! Each change is `{"current", "metadata"}` as the service sends it (wire format
//! `x-ms-cosmos-changefeed-wire-format-version: 2021-09-15`): `metadata` carries
//! `operationType` (create, replace, delete), `lsn`, `crts`, `previousImageLSN`, and for
//! deletes the deleted item's `id`, `partitionKey` and `timeToLiveExpired`. Like the service
//! with a retention policy alone, no `previous` image is sent: a replace names the version it
//! replaced by `previousImageLSN`, a delete has an empty `current`. Positions are LSN
//! etags shared with the latest-version feed; the feed starts from now (`If-None-Match: *`) or
//! a continuation, as the service allows, and needs the container to keep history.

use crate::api::cosmos::feed::Feed;
use crate::api::request::Req;
use crate::api::response::Reply;
use crate::api::App;
use crate::error::CosmosError;
use crate::store::container::Container;
use crate::store::history::{Change, Operation};
use bytes::Bytes;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use strata_query::protocol::header;

/// The service's answer when the container keeps no history (the official SDK's tests look
/// for "All Versions and Deletes" and "must be enabled").
const NOT_ENABLED: &str = "Change Feed 'All Versions and Deletes' mode must be enabled on the container: set 'changeFeedPolicy': {'retentionDuration': <minutes>} on it (or start strata with --change-feed-retention <minutes>).";

pub fn read(app: &App, req: &Req, c: &Arc<Container>) -> Result<Reply, CosmosError> {
    if !c.keeps_history() {
        return Err(CosmosError::bad_request(NOT_ENABLED));
    }
    if req.header("if-modified-since").is_some() {
        return Err(CosmosError::bad_request(
            "The 'All Versions and Deletes' change feed starts from now (If-None-Match: *) or from a continuation; a start time is not supported.",
        ));
    }
    let feed = Feed::open(app, req, c)?;
    let upto = feed.upto;
    let floor = c.history_floor()?;
    let after = match req.if_none_match().map(str::trim) {
        Some("*") => upto,
        Some(t) => t.trim_matches('"').parse::<u64>().map_err(|_| {
            CosmosError::bad_request(format!(
                "The change feed continuation '{t}' (If-None-Match) is not valid; use the etag of a previous change feed response."
            ))
        })?,
        None => floor,
    };
    if after < floor {
        return Err(CosmosError::bad_request(format!(
            "The change feed position {after} is older than the container's change feed retention: changes up to {floor} were purged. Start again from now."
        )));
    }
    let history = c.history(&feed.range, feed.exact.as_deref(), after, upto, feed.page)?;
    let mut docs = Vec::with_capacity(history.changes.len());
    for change in &history.changes {
        docs.push(render(c, change)?);
    }
    Ok(feed.changes(c, docs, after, history.last, history.exhausted))
}

fn parse(doc: &[u8]) -> Result<Value, CosmosError> {
    serde_json::from_slice(doc)
        .map_err(|e| CosmosError::internal(format!("a stored change is unreadable: {e}")))
}

/// One change as the service's wire format has it.
fn render(c: &Container, change: &Change) -> Result<Bytes, CosmosError> {
    let mut metadata = Map::new();
    metadata.insert("operationType".into(), json!(change.op.as_str()));
    metadata.insert(header::LSN.into(), json!(change.lsn));
    metadata.insert("crts".into(), json!(change.crts));
    if change.previous_lsn > 0 {
        metadata.insert("previousImageLSN".into(), json!(change.previous_lsn));
    }
    let out = match change.op {
        Operation::Create | Operation::Replace => {
            json!({"current": parse(&change.doc)?, "metadata": metadata})
        }
        Operation::Delete => {
            // The stored change keeps the deleted version: its key names the item.
            let deleted = parse(&change.doc)?;
            metadata.insert("id".into(), json!(change.id));
            metadata.insert("partitionKey".into(), partition_key_of(c, &deleted));
            metadata.insert("timeToLiveExpired".into(), json!(change.ttl_expired));
            json!({"current": {}, "metadata": metadata})
        }
    };
    Ok(Bytes::from(out.to_string()))
}

/// The deleted item's partition key as the service names it: property name → value, every
/// level of a hierarchical key.
fn partition_key_of(c: &Container, doc: &Value) -> Value {
    let mut m = Map::new();
    for segs in &c.pk.segments {
        let mut v = Some(doc);
        for s in segs {
            v = v.and_then(|x| x.get(s));
        }
        if let (Some(name), Some(v)) = (segs.last(), v) {
            m.insert(name.clone(), v.clone());
        }
    }
    Value::Object(m)
}
