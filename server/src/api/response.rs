//! Building responses: status, body and the headers the SDKs rely on.

use crate::error::CosmosError;
use crate::store::container::Container;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use strata_query::protocol::header;

/// The names of the headers every reply carries, made once: turning a `&'static str` into a
/// header name validates it, which showed as 2.7% of a point read's server CPU.
pub(crate) mod names {
    use super::header;
    use axum::http::HeaderName;

    pub const ACTIVITY_ID: HeaderName = HeaderName::from_static(header::ACTIVITY_ID);
    pub const REQUEST_CHARGE: HeaderName = HeaderName::from_static(header::REQUEST_CHARGE);
    pub const SCHEMAVERSION: HeaderName = HeaderName::from_static(header::SCHEMAVERSION);
    pub const SERVICEVERSION: HeaderName = HeaderName::from_static(header::SERVICEVERSION);
    pub const GATEWAYVERSION: HeaderName = HeaderName::from_static(header::GATEWAYVERSION);
    pub const ALT_CONTENT_PATH: HeaderName = HeaderName::from_static(header::ALT_CONTENT_PATH);
    pub const CONTENT_PATH: HeaderName = HeaderName::from_static(header::CONTENT_PATH);
    pub const SESSION_TOKEN: HeaderName = HeaderName::from_static(header::SESSION_TOKEN);
    pub const LSN: HeaderName = HeaderName::from_static(header::LSN);
    pub const GLOBAL_COMMITTED_LSN: HeaderName =
        HeaderName::from_static(header::GLOBAL_COMMITTED_LSN);
    pub const PARTITION_KEY_RANGE_ID: HeaderName =
        HeaderName::from_static(header::PARTITION_KEY_RANGE_ID);
    pub const ETAG: HeaderName = HeaderName::from_static(header::ETAG);
    pub const ITEM_LSN: HeaderName = HeaderName::from_static(header::ITEM_LSN);
    pub const REQUEST_DURATION_MS: HeaderName =
        HeaderName::from_static(header::REQUEST_DURATION_MS);
}

/// A response under construction.
pub struct Reply {
    pub status: StatusCode,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Bytes,
    pub charge: f64,
}

impl Reply {
    pub fn new(status: StatusCode, body: impl Into<Bytes>) -> Self {
        Self {
            status,
            headers: Vec::with_capacity(12),
            body: body.into(),
            charge: 1.0,
        }
    }

    pub fn json(status: StatusCode, v: &serde_json::Value) -> Self {
        Self::new(status, serde_json::to_vec(v).unwrap_or_default())
    }

    pub fn empty(status: StatusCode) -> Self {
        Self::new(status, Bytes::new())
    }

    pub fn header(mut self, name: &'static str, value: impl AsRef<str>) -> Self {
        if let Ok(v) = HeaderValue::from_str(value.as_ref()) {
            self.headers.push((HeaderName::from_static(name), v));
        }
        self
    }

    /// A header whose name and value are made already (the point paths' own).
    pub fn with(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }

    pub fn charge(mut self, ru: f64) -> Self {
        self.charge = ru;
        self
    }

    /// Content paths: Python records session tokens only when these are present.
    pub fn container(mut self, c: &Container) -> Self {
        for (name, value) in [
            (names::ALT_CONTENT_PATH, &c.alt_content_path),
            (names::CONTENT_PATH, &c.rid),
        ] {
            if let Ok(v) = HeaderValue::from_str(value) {
                self.headers.push((name, v));
            }
        }
        self
    }

    /// Session token and LSN headers for a response that touched `ranges`.
    pub fn session(mut self, ranges: &[u32], lsn: u64) -> Self {
        self.headers.extend(session_headers(ranges, lsn));
        self
    }

    pub fn into_response_with(self, activity_id: &str) -> Response {
        let mut resp = (self.status, self.body).into_response();
        let h = resp.headers_mut();
        // Room for all at once, the two `handle` adds after this included: a map grown
        // insert by insert rehashes on the way.
        h.reserve(self.headers.len() + 8);
        if !self.headers.is_empty() || self.status != StatusCode::NO_CONTENT {
            h.insert(
                axum::http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
        }
        for (k, v) in self.headers {
            h.insert(k, v);
        }
        if let Ok(v) = HeaderValue::from_str(activity_id) {
            h.insert(names::ACTIVITY_ID, v);
        }
        if let Some(v) = charge_value(self.charge) {
            h.insert(names::REQUEST_CHARGE, v);
        }
        h.insert(names::SCHEMAVERSION, HeaderValue::from_static("1.18"));
        h.insert(
            names::SERVICEVERSION,
            HeaderValue::from_static("version=2.14.0.0"),
        );
        h.insert(names::GATEWAYVERSION, HeaderValue::from_static("2.14.0"));
        resp
    }
}

/// `x-ms-session-token`, `lsn`, `x-ms-global-committed-lsn` and the partition key range ids
/// of an answer (success or error) that touched `ranges` at `lsn`.
pub fn session_headers(ranges: &[u32], lsn: u64) -> Vec<(HeaderName, HeaderValue)> {
    use std::fmt::Write as _;
    let (mut token, mut ids) = (String::with_capacity(24), String::with_capacity(8));
    for (i, r) in ranges.iter().enumerate() {
        if i > 0 {
            token.push(',');
            ids.push(',');
        }
        let _ = write!(token, "{r}:-1#{lsn}");
        let _ = write!(ids, "{r}");
    }
    let lsn = HeaderValue::from(lsn);
    let mut headers = Vec::with_capacity(4);
    if let Ok(v) = HeaderValue::from_str(&token) {
        headers.push((names::SESSION_TOKEN, v));
    }
    headers.push((names::LSN, lsn.clone()));
    headers.push((names::GLOBAL_COMMITTED_LSN, lsn));
    if let Ok(v) = HeaderValue::from_str(&ids) {
        headers.push((names::PARTITION_KEY_RANGE_ID, v));
    }
    headers
}

/// `x-ms-request-charge`, to the hundredth: a whole number (most point operations' charge)
/// is written without the formatting machinery.
fn charge_value(ru: f64) -> Option<HeaderValue> {
    let r = (ru * 100.0).round() / 100.0;
    if r.fract() == 0.0 && (0.0..1e15).contains(&r) {
        Some(HeaderValue::from(r as u64))
    } else {
        HeaderValue::from_str(&format!("{r}")).ok()
    }
}

/// `{"_rid": .., "<Key>": [raw json, ...], "_count": n}` from already-serialized documents,
/// in a buffer kept for the next response once this one is sent (see [`super::buffers`]).
pub fn feed_body(rid: &str, key: &str, docs: &[Bytes]) -> Bytes {
    let len = 64 + rid.len() + key.len() + docs.iter().map(|d| d.len() + 1).sum::<usize>();
    let mut out = super::buffers::take(len);
    out.extend_from_slice(b"{\"_rid\":");
    out.extend_from_slice(
        serde_json::to_string(rid)
            .unwrap_or_else(|_| "\"\"".into())
            .as_bytes(),
    );
    out.extend_from_slice(b",\"");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":[");
    for (i, d) in docs.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(d);
    }
    out.extend_from_slice(b"],\"_count\":");
    out.extend_from_slice(docs.len().to_string().as_bytes());
    out.push(b'}');
    super::buffers::into_bytes(out)
}

/// The response for an error, with the activity id appended to the message as the service
/// does, and the session token of the partition a failed point operation reached.
pub fn error_response(e: CosmosError, activity_id: &str) -> Response {
    let mut body = serde_json::Map::new();
    body.insert("code".into(), e.code.into());
    body.insert(
        "message".into(),
        format!("{}\r\nActivityId: {activity_id}", e.message).into(),
    );
    if let Some(extra) = e.extra {
        body.extend(*extra);
    }
    let mut resp = (
        e.status,
        serde_json::to_vec(&serde_json::Value::Object(body)).unwrap_or_default(),
    )
        .into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(s) = e.sub_status {
        h.insert(header::SUB_STATUS, HeaderValue::from(s));
    }
    if let Some(ms) = e.retry_after_ms {
        h.insert(header::RETRY_AFTER_MS, HeaderValue::from(ms));
    }
    if let Ok(v) = HeaderValue::from_str(activity_id) {
        h.insert(header::ACTIVITY_ID, v);
    }
    h.insert(header::REQUEST_CHARGE, HeaderValue::from_static("1"));
    if let Some((ranges, lsn)) = e.session {
        for (k, v) in session_headers(&ranges, lsn) {
            h.insert(k, v);
        }
    }
    resp
}
