//! `GET .../docs` without `A-IM`: the read feed (every item, in key order, paged).

use super::error::ApiError;
use super::items::container;
use super::request::Req;
use super::response::{feed_body, Reply};
use super::scope::{ranges_touched, request_scope};
use super::App;
use crate::store::container::Container;
use crate::store::keys;
use crate::throughput::charge;
use axum::http::StatusCode;
use strata_query::pk::EpkRange;

/// Page size when the client does not say (the service's default).
pub const DEFAULT_PAGE: usize = 100;

/// What a read-feed token may resume: this container's feed.
fn feed_scope(c: &Container) -> String {
    format!("{}:feed", c.rid)
}

fn encode_token(app: &App, c: &Container, last_key: &[u8]) -> String {
    let body = serde_json::json!({"after": strata_query::pk::epk::encode_hex(&last_key[4..])});
    app.token_key.seal(&feed_scope(c), &body)
}

fn decode_token(app: &App, c: &Container, token: &str) -> Result<Vec<u8>, ApiError> {
    let bad = |why: &str| {
        ApiError::bad_request(format!(
            "The continuation token is invalid ({why}); start the feed again without it."
        ))
    };
    let v = app.token_key.open(&feed_scope(c), token).map_err(bad)?;
    let bad = || bad("malformed");
    let cid = c.cid;
    let hex = v.get("after").and_then(|h| h.as_str()).ok_or_else(bad)?;
    let suffix = strata_query::pk::epk::decode_hex(hex).ok_or_else(bad)?;
    keys::split_item_suffix(&suffix).ok_or_else(bad)?;
    let mut key = keys::container_prefix(cid);
    key.extend_from_slice(&suffix);
    Ok(key)
}

pub fn read_feed(app: &App, req: &Req, db: &str, coll: &str) -> Result<Reply, ApiError> {
    let c = container(app, req, db, coll)?;
    let scope = request_scope(&c, req)?;
    let page = req.max_item_count()?.unwrap_or(DEFAULT_PAGE);
    let after = req
        .continuation()
        .map(|t| decode_token(app, &c, t))
        .transpose()?;
    let range = scope.range.clone().unwrap_or_else(|| EpkRange::new("", ""));
    let mut docs = Vec::new();
    let mut last = None;
    let mut more = false;
    if !range.is_empty() {
        let mut rows = c.scan_items(&range, after.as_deref(), page + 1)?;
        if let Some(exact) = &scope.exact_epk {
            rows.retain(|(k, _)| {
                keys::parse_item_key(k)
                    .map(|(_, e, _)| e == exact)
                    .unwrap_or(false)
            });
        }
        more = rows.len() > page;
        rows.truncate(page);
        last = rows.last().map(|(k, _)| k.clone());
        docs = rows.into_iter().map(|(_, it)| it.json).collect();
    }
    let bytes: usize = docs.iter().map(|d| d.len()).sum();
    let touched = if range.is_empty() {
        Vec::new()
    } else {
        ranges_touched(&c, &range)
    };
    let ru = charge::query(docs.len() as u64, bytes, touched.len().max(1));
    app.spend(&c, &touched, None, ru)?;
    let mut reply = Reply::new(StatusCode::OK, feed_body(&c.rid, "Documents", &docs))
        .header("x-ms-item-count", docs.len().to_string())
        .charge(ru)
        .session(&touched, c.current_lsn())
        .container(&c);
    if more {
        if let Some(k) = last {
            reply = reply.header("x-ms-continuation", encode_token(app, &c, &k));
        }
    }
    Ok(reply)
}
