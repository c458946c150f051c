//! Change feed (latest-version mode): `GET .../docs` with `A-IM: Incremental Feed`. The
//! all-versions-and-deletes mode (`A-IM: Full-Fidelity Feed`) is in [`super::history`].
//!
//! Every write takes the next LSN of its container and moves the item's entry in the feed
//! index to that LSN, so the feed yields each item once, in its latest version, in
//! modification order. The position (the `etag`, an LSN) is the same across all partitions of
//! a container, so a position taken before a split continues on the children: nothing is
//! skipped, nothing repeated.

use super::commit::Admission;
use super::error::ApiError;
use super::request::Req;
use super::response::{feed_body, Reply};
use super::scope::{ranges_touched, request_scope};
use super::App;
use crate::store::container::Container;
use crate::throughput::charge;
use axum::http::StatusCode;
use bytes::Bytes;
use std::sync::Arc;
use std::time::UNIX_EPOCH;
use strata_query::pk::EpkRange;

const DEFAULT_PAGE: usize = 100;

/// Where the feed starts.
enum Start {
    /// After this LSN.
    After(u64),
    /// Items written at or after this time (seconds since the epoch).
    Since(u64),
}

fn start(req: &Req, current: u64) -> Result<Start, ApiError> {
    if let Some(inm) = req.if_none_match() {
        let t = inm.trim();
        if t == "*" {
            return Ok(Start::After(current));
        }
        let lsn: u64 = t.trim_matches('"').parse().map_err(|_| {
            ApiError::bad_request(format!(
                "The change feed continuation '{t}' (If-None-Match) is not valid; use the etag of a previous change feed response."
            ))
        })?;
        return Ok(Start::After(lsn));
    }
    if let Some(ims) = req.header("if-modified-since") {
        let when = httpdate::parse_http_date(ims).map_err(|_| {
            ApiError::bad_request(format!(
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

pub fn read(app: &App, req: &Req, c: &Arc<Container>) -> Result<Reply, ApiError> {
    match req.header("a-im") {
        Some(v) if v.eq_ignore_ascii_case("incremental feed") => {}
        Some(v) if v.eq_ignore_ascii_case("full-fidelity feed") => {
            return super::history::read(app, req, c)
        }
        Some(v) => {
            return Err(ApiError::bad_request(format!(
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
    Ok(feed.reply(c, docs, after, changes.last, changes.exhausted))
}

/// What both change feed modes share: the request's scope, the LSN read up to, the page size
/// and the admission of the partitions it touches.
pub(super) struct Feed<'a> {
    pub range: EpkRange,
    pub exact: Option<String>,
    /// Everything up to this LSN is applied and visible.
    pub upto: u64,
    pub page: usize,
    touched: Vec<u32>,
    admitted: Admission<'a>,
}

impl<'a> Feed<'a> {
    pub fn open(app: &'a App, req: &Req, c: &'a Arc<Container>) -> Result<Self, ApiError> {
        let scope = request_scope(c, req)?;
        let upto = c.current_lsn();
        let page = req.max_item_count()?.unwrap_or(DEFAULT_PAGE);
        let range = scope.range.clone().unwrap_or_else(|| EpkRange::new("", ""));
        let touched = if range.is_empty() {
            Vec::new()
        } else {
            ranges_touched(c, &range)
        };
        let admitted = Admission::ranges(app, c, touched.clone(), charge::query(0, 0, 1))?;
        Ok(Self {
            range,
            exact: scope.exact_epk,
            upto,
            page,
            touched,
            admitted,
        })
    }

    /// The page's reply: 304 when empty, else the documents; the etag continues after the
    /// last change of a full page (`last`), or at `upto` once the feed was read to its end.
    pub fn reply(
        self,
        c: &Container,
        docs: Vec<Bytes>,
        after: u64,
        last: Option<u64>,
        exhausted: bool,
    ) -> Reply {
        let position = if exhausted {
            self.upto.max(after)
        } else {
            last.unwrap_or(after)
        };
        let etag = format!("\"{position}\"");
        if docs.is_empty() {
            return Reply::empty(StatusCode::NOT_MODIFIED)
                .header("etag", &etag)
                .session(&self.touched, self.upto)
                .container(c);
        }
        let bytes: usize = docs.iter().map(Bytes::len).sum();
        let ru = charge::query(docs.len() as u64, bytes, self.touched.len().max(1));
        self.admitted.settle(ru);
        Reply::new(StatusCode::OK, feed_body(&c.rid, "Documents", &docs))
            .header("etag", &etag)
            .header("x-ms-item-count", docs.len().to_string())
            .charge(ru)
            .session(&self.touched, self.upto)
            .container(c)
    }
}
