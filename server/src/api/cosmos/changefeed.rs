//! Change feed (latest-version mode): `GET .../docs` with `A-IM: Incremental Feed`. The
//! all-versions-and-deletes mode (`A-IM: Full-Fidelity Feed`) is in [`crate::api::cosmos::history`].
//!
//! Every write takes the next LSN of its container and moves the item's entry in the feed
//! index to that LSN, so the feed yields each item once, in its latest version, in
//! modification order. The position (the `etag`, an LSN) is the same across all partitions of
//! a container, so a position taken before a split continues on the children: nothing is
//! skipped, nothing repeated.

use crate::api::cosmos::feed::Feed;
use crate::api::request::Req;
use crate::api::response::Reply;
use crate::api::App;
use crate::error::CosmosError;
use crate::store::container::Container;
use bytes::Bytes;
use std::sync::Arc;
use std::time::UNIX_EPOCH;

/// Where the feed starts.
enum Start {
    /// After this LSN.
    After(u64),
    /// Items written at or after this time (seconds since the epoch).
    Since(u64),
}

fn start(req: &Req, current: u64) -> Result<Start, CosmosError> {
    if let Some(inm) = req.if_none_match() {
        let t = inm.trim();
        if t == "*" {
            return Ok(Start::After(current));
        }
        let lsn: u64 = t.trim_matches('"').parse().map_err(|_| {
            CosmosError::bad_request(format!(
                "The change feed continuation '{t}' (If-None-Match) is not valid; use the etag of a previous change feed response."
            ))
        })?;
        return Ok(Start::After(lsn));
    }
    if let Some(ims) = req.header("if-modified-since") {
        let when = httpdate::parse_http_date(ims).map_err(|_| {
            CosmosError::bad_request(format!(
                "If-Modified-Since '{ims}' is not an RFC 1123 date (e.g. 'Tue, 01 Oct 2024 12:00:00 GMT')."
            ))
        })?;
        let secs = when
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        return Ok(Start::Since(secs));
    }
    Ok(Start::After(0))
}

/// Adds `"_lsn": n` to a stored document (an object serialized by us, ending in `}`).
fn with_lsn(json: &Bytes, lsn: u64) -> Bytes {
    let mut v = Vec::with_capacity(json.len() + 24);
    v.extend_from_slice(&json[..json.len().saturating_sub(1)]);
    v.extend_from_slice(format!(",\"_lsn\":{lsn}}}").as_bytes());
    Bytes::from(v)
}

pub fn read(app: &App, req: &Req, c: &Arc<Container>) -> Result<Reply, CosmosError> {
    match req.header("a-im") {
        Some(v) if v.eq_ignore_ascii_case("incremental feed") => {}
        Some(v) if v.eq_ignore_ascii_case("full-fidelity feed") => {
            return crate::api::cosmos::history::read(app, req, c)
        }
        Some(v) => {
            return Err(CosmosError::bad_request(format!(
                "A-IM '{v}' is not supported: use 'Incremental Feed' (latest version) or 'Full-Fidelity Feed' (all versions and deletes)."
            )))
        }
        None => {}
    }
    let feed = Feed::open(app, req, c)?;
    let (upto, page) = (feed.upto, feed.page);
    let start = start(req, upto)?;
    let (after, since) = match start {
        Start::After(l) => (l, None),
        Start::Since(t) => (0, Some(t)),
    };
    let changes = c.changes(&feed.range, feed.exact.as_deref(), after, upto, since, page)?;
    let docs: Vec<Bytes> = changes
        .items
        .iter()
        .map(|(lsn, item)| with_lsn(&item.json, *lsn))
        .collect();
    Ok(feed.changes(c, docs, after, changes.last, changes.exhausted))
}
