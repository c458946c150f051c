//! `GET .../docs` without `A-IM`: the read feed (every item, in key order, paged).

use crate::api::commit::Admission;
use crate::api::request::Req;
use crate::api::response::{feed_body, Reply};
use crate::api::scope::{ranges_touched, request_scope};
use crate::api::App;
use crate::error::CosmosError;
use crate::store::container::{Container, DocPos};
use crate::throughput::charge;
use axum::http::StatusCode;
use bytes::Bytes;
use std::sync::Arc;
use strata_query::pk::EpkRange;
use strata_query::protocol::header;

/// Page size when the client does not say (the service's default).
pub const DEFAULT_PAGE: usize = 100;

/// What a read-feed token may resume: this container's feed.
fn feed_scope(c: &Container) -> String {
    format!("{}:feed", c.rid)
}

fn encode_token(app: &App, c: &Container, last: &DocPos) -> String {
    let body = serde_json::json!({"after": last.to_hex()});
    app.token_key.seal(&feed_scope(c), &body)
}

fn decode_token(app: &App, c: &Container, token: &str) -> Result<DocPos, CosmosError> {
    let bad = |why: &str| {
        CosmosError::bad_request(format!(
            "The continuation token is invalid ({why}); start the feed again without it."
        ))
    };
    let v = app.token_key.open(&feed_scope(c), token).map_err(bad)?;
    v.get("after")
        .and_then(|h| h.as_str())
        .and_then(|h| c.doc_pos(h))
        .ok_or_else(|| bad("malformed"))
}

pub fn read_feed(app: &App, req: &Req, c: &Arc<Container>) -> Result<Reply, CosmosError> {
    let feed = Feed::open(app, req, c)?;
    let after = req
        .continuation()
        .map(|t| decode_token(app, c, t))
        .transpose()?;
    let mut docs = Vec::new();
    let mut last = None;
    let mut more = false;
    let page = feed.page;
    if !feed.range.is_empty() {
        let mut rows = c.scan_docs(&feed.range, feed.exact.as_deref(), after.as_ref(), page + 1)?;
        more = rows.len() > page;
        rows.truncate(page);
        last = rows.last().map(|(k, _)| k.clone());
        docs = rows.into_iter().map(|(_, it)| it.json).collect();
    }
    let mut reply = feed.page(c, docs);
    if more {
        if let Some(k) = last {
            reply = reply.header(header::CONTINUATION, encode_token(app, c, &k));
        }
    }
    Ok(reply)
}

/// What the read feed and both change feed modes share: the request's scope, the LSN read up
/// to, the page size, and the admission of the partitions it touches.
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
    pub fn open(app: &'a App, req: &Req, c: &'a Arc<Container>) -> Result<Self, CosmosError> {
        let scope = request_scope(c, req)?;
        let upto = c.current_lsn();
        let page = req.max_item_count()?.unwrap_or(DEFAULT_PAGE);
        let range = scope.range.clone().unwrap_or_else(|| EpkRange::new("", ""));
        let touched = if range.is_empty() {
            Vec::new()
        } else {
            ranges_touched(c, &range)
        };
        let admitted = Admission::ranges(app, (c, req), touched.clone(), charge::query(0, 0, 1))?;
        Ok(Self {
            range,
            exact: scope.exact_epk,
            upto,
            page,
            touched,
            admitted,
        })
    }

    /// 200 with `docs`, charged for what they weigh.
    pub fn page(self, c: &Container, docs: Vec<Bytes>) -> Reply {
        let bytes: usize = docs.iter().map(Bytes::len).sum();
        let ru = charge::query(docs.len() as u64, bytes, self.touched.len().max(1));
        self.admitted.settle(ru);
        Reply::new(StatusCode::OK, feed_body(&c.rid, "Documents", &docs))
            .header(header::ITEM_COUNT, docs.len().to_string())
            .charge(ru)
            .session(&self.touched, self.upto)
            .container(c)
    }

    /// 304: nothing new.
    pub fn not_modified(self, c: &Container) -> Reply {
        Reply::empty(StatusCode::NOT_MODIFIED)
            .session(&self.touched, self.upto)
            .container(c)
    }

    /// A change feed page (either mode): 304 when empty, else the documents; the etag
    /// continues after the last change of a full page (`last`), or at the LSN read up to once
    /// the feed was read to its end.
    pub fn changes(
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
            return self.not_modified(c).header(header::ETAG, &etag);
        }
        self.page(c, docs).header(header::ETAG, &etag)
    }
}
