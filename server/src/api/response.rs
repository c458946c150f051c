//! Building responses: status, body and the headers the SDKs rely on.

use crate::error::CosmosError;
use crate::store::container::Container;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
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

    /// Content paths: Python records session tokens only when these are present. Each
    /// worker thread keeps the last container's two values, compared by their text: a run
    /// of requests to one container clones them instead of copying them again.
    pub fn container(mut self, c: &Container) -> Self {
        let same = |(alt, rid): &(String, String)| *alt == c.alt_content_path && *rid == c.rid;
        let made = || {
            let headers = [
                (names::ALT_CONTENT_PATH, &c.alt_content_path),
                (names::CONTENT_PATH, &c.rid),
            ]
            .into_iter()
            .filter_map(|(name, value)| Some((name, HeaderValue::from_str(value).ok()?)))
            .collect();
            ((c.alt_content_path.clone(), c.rid.clone()), headers)
        };
        remembered(&LAST_CONTAINER, same, made, &mut self.headers);
        self
    }

    /// Session token and LSN headers for a response that touched `ranges`.
    ///
    /// A point operation's four are the same for every answer from its partition until the
    /// partition's LSN moves (every read of it, between writes): each worker thread keeps the
    /// last ones it made, so a run of reads clones them instead of formatting and copying
    /// them again (2.2% of a point read's server CPU).
    pub fn session(mut self, ranges: &[u32], lsn: u64) -> Self {
        let [range] = ranges else {
            self.headers.extend(session_headers(ranges, lsn));
            return self;
        };
        let same = |kept: &(u32, u64)| *kept == (*range, lsn);
        let made = || ((*range, lsn), session_headers(ranges, lsn));
        remembered(&LAST_SESSION, same, made, &mut self.headers);
        self
    }

    pub fn into_response_with(self, activity_id: &str) -> Response {
        // Room for all at once, the two [`crate::api::answer`] adds after this included: a
        // map grown insert by insert rehashes on the way.
        let mut h = HeaderMap::with_capacity(self.headers.len() + 8);
        h.insert(
            axum::http::header::CONTENT_TYPE,
            HeaderValue::from_static(
                if !self.headers.is_empty() || self.status != StatusCode::NO_CONTENT {
                    "application/json"
                } else {
                    // What a bare body answers with (an empty 204).
                    "application/octet-stream"
                },
            ),
        );
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
        let mut resp = Response::new(axum::body::Body::from(self.body));
        *resp.status_mut() = self.status;
        *resp.headers_mut() = h;
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

/// Headers as a reply carries them.
type Headers = Vec<(HeaderName, HeaderValue)>;
/// Headers a thread made last, with what they were made from.
type Remembered<K> = std::cell::RefCell<Option<(K, Headers)>>;

thread_local! {
    /// The content-path headers this thread made last, with the container's two texts.
    static LAST_CONTAINER: Remembered<(String, String)> = const { std::cell::RefCell::new(None) };
    /// The session headers this thread made last, with the range and LSN they are for.
    static LAST_SESSION: Remembered<(u32, u64)> = const { std::cell::RefCell::new(None) };
}

/// Appends to `out` the headers `cell` keeps when `same` says they were made from what the
/// caller would make them from, else those `make` makes (kept for the next call).
fn remembered<K: 'static>(
    cell: &'static std::thread::LocalKey<Remembered<K>>,
    same: impl FnOnce(&K) -> bool,
    make: impl FnOnce() -> (K, Headers),
    out: &mut Headers,
) {
    cell.with(|last| {
        let mut last = last.borrow_mut();
        if !matches!(&*last, Some((k, _)) if same(k)) {
            *last = Some(make());
        }
        if let Some((_, headers)) = &*last {
            out.extend(headers.iter().cloned());
        }
    });
}

/// `x-ms-request-charge`, to the hundredth, spelled as the float's shortest form would be
/// (`3`, `1.5`, `1.02`) but digit by digit: `format!` of the float was 0.7% of a point
/// read's server CPU.
fn charge_value(ru: f64) -> Option<HeaderValue> {
    let cents = (ru * 100.0).round();
    if !(0.0..1e15).contains(&cents) {
        return HeaderValue::from_str(&format!("{}", cents / 100.0)).ok();
    }
    let cents = cents as u64;
    let (whole, frac) = (cents / 100, cents % 100);
    if frac == 0 {
        return Some(HeaderValue::from(whole));
    }
    let mut text = whole.to_string();
    text.push('.');
    text.push(char::from(b'0' + (frac / 10) as u8));
    if frac % 10 != 0 {
        text.push(char::from(b'0' + (frac % 10) as u8));
    }
    HeaderValue::from_str(&text).ok()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_charge_is_spelled_as_the_rounded_float_would_be() {
        for ru in [
            0.0, 1.0, 1.5, 1.02, 1.004, 1.005, 2.999, 10.1, 12.34, 5.29, 99.99, 123456.78,
        ] {
            let rounded = (ru * 100.0_f64).round() / 100.0;
            let expected = format!("{rounded}");
            let got = charge_value(ru).expect("a header value");
            assert_eq!(got.to_str().ok(), Some(expected.as_str()), "{ru}");
        }
        assert_eq!(
            charge_value(-1.5).and_then(|v| v.to_str().ok().map(str::to_string)),
            Some("-1.5".to_string())
        );
    }

    #[test]
    fn remembered_session_headers_are_those_of_their_range_and_lsn() {
        let of = |r: Reply| {
            r.headers
                .iter()
                .map(|(k, v)| format!("{k}={}", v.to_str().unwrap_or_default()))
                .collect::<Vec<_>>()
        };
        for (ranges, lsn) in [(&[3][..], 7), (&[3][..], 7), (&[3][..], 8), (&[4][..], 8)] {
            let made = of(Reply::empty(StatusCode::OK).session(ranges, lsn));
            let fresh: Vec<String> = session_headers(ranges, lsn)
                .iter()
                .map(|(k, v)| format!("{k}={}", v.to_str().unwrap_or_default()))
                .collect();
            assert_eq!(made, fresh);
        }
        let two = of(Reply::empty(StatusCode::OK).session(&[1, 2], 9));
        assert!(two.contains(&"x-ms-session-token=1:-1#9,2:-1#9".to_string()));
    }
}
