//! `GET .../pkranges`: the container's physical partitions.
//!
//! The etag is the partition map's generation, which changes with every split. Python drains
//! this feed until it sees `304 Not Modified`, so an `If-None-Match` with the current etag must
//! answer 304. After a split a client holding an older etag gets every live range; each child
//! lists all its ancestors in `parents`, so the client drops every range that no longer exists.

use crate::api::request::Req;
use crate::api::response::Reply;
use crate::error::CosmosError;
use crate::store::catalog;
use crate::store::container::Container;
use axum::http::StatusCode;
use serde_json::json;
use std::sync::Arc;
use strata_query::protocol::header;

pub fn read_ranges(req: &Req, c: &Arc<Container>) -> Result<Reply, CosmosError> {
    let map = c.partitions();
    let etag = format!("\"{}\"", map.generation);
    if let Some(inm) = req.if_none_match() {
        if inm.trim_matches('"') == etag.trim_matches('"') {
            return Ok(Reply::empty(StatusCode::NOT_MODIFIED)
                .header(header::ETAG, &etag)
                .container(c));
        }
    }
    let n = map.ranges.len().max(1) as f64;
    let ts = c.with_meta(|m| m.ts);
    let ranges: Vec<_> = map
        .ranges
        .iter()
        .map(|r| {
            let rid = catalog::pkrange_rid(c.db_seq, c.cid, r.id);
            json!({
                "_rid": rid,
                "id": r.id.to_string(),
                "_etag": catalog::etag(c.cid, r.id as u64 + (map.generation << 32)),
                "minInclusive": r.range.min,
                "maxExclusive": r.range.max,
                "ridPrefix": r.id,
                "_self": format!("dbs/{}/colls/{}/pkranges/{rid}/", c.db_rid, c.rid),
                "throughputFraction": 1.0 / n,
                "status": if r.splitting { "splitting" } else { "online" },
                "parents": r.parents,
                "ownedArchivalPKRangeIds": [],
                "_ts": ts,
                "lsn": r.lsn,
            })
        })
        .collect();
    let body = json!({"_rid": c.rid, "PartitionKeyRanges": ranges, "_count": ranges.len()});
    Ok(Reply::json(StatusCode::OK, &body)
        .header(header::ETAG, &etag)
        .header(header::ITEM_COUNT, ranges.len().to_string())
        .container(c))
}
