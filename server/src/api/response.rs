//! Building responses: status, body and the headers the SDKs rely on.

use crate::error::CosmosError;
use crate::store::container::Container;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use strata_query::protocol::header;

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

    pub fn charge(mut self, ru: f64) -> Self {
        self.charge = ru;
        self
    }

    /// Content paths: Python records session tokens only when these are present.
    pub fn container(self, c: &Container) -> Self {
        self.header(header::ALT_CONTENT_PATH, &c.alt_content_path)
            .header(header::CONTENT_PATH, &c.rid)
    }

    /// Session token and LSN headers for a response that touched `ranges`.
    pub fn session(mut self, ranges: &[u32], lsn: u64) -> Self {
        self.headers.extend(session_headers(ranges, lsn));
        self
    }

    pub fn into_response_with(self, activity_id: &str) -> Response {
        let mut resp = (self.status, self.body).into_response();
        let h = resp.headers_mut();
        if !self.headers.is_empty() || self.status != StatusCode::NO_CONTENT {
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
        }
        for (k, v) in self.headers {
            h.insert(k, v);
        }
        if let Ok(v) = HeaderValue::from_str(activity_id) {
            h.insert(header::ACTIVITY_ID, v);
        }
        if let Ok(v) = HeaderValue::from_str(&format_charge(self.charge)) {
            h.insert(header::REQUEST_CHARGE, v);
        }
        h.insert(header::SCHEMAVERSION, HeaderValue::from_static("1.18"));
        h.insert(
            header::SERVICEVERSION,
            HeaderValue::from_static("version=2.14.0.0"),
        );
        h.insert(header::GATEWAYVERSION, HeaderValue::from_static("2.14.0"));
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
    let lsn = lsn.to_string();
    [
        (header::SESSION_TOKEN, token),
        (header::LSN, lsn.clone()),
        (header::GLOBAL_COMMITTED_LSN, lsn),
        (header::PARTITION_KEY_RANGE_ID, ids),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((HeaderName::from_static(k), HeaderValue::from_str(&v).ok()?)))
    .collect()
}

fn format_charge(ru: f64) -> String {
    let r = (ru * 100.0).round() / 100.0;
    if r.fract() == 0.0 {
        format!("{r:.0}")
    } else {
        format!("{r}")
    }
}

/// `{"_rid": .., "<Key>": [raw json, ...], "_count": n}` from already-serialized documents.
pub fn feed_body(rid: &str, key: &str, docs: &[Bytes]) -> Bytes {
    let mut out = Vec::with_capacity(64 + docs.iter().map(|d| d.len() + 1).sum::<usize>());
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
    Bytes::from(out)
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
