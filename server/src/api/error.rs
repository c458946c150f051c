//! The one error type of the REST API, mapped to Cosmos status codes, sub-status codes and the
//! `{"code": ..., "message": ...}` body every SDK parses.

use crate::store::kv::KvError;
use crate::store::StoreError;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// Cosmos sub-status codes we emit.
pub mod substatus {
    pub const PARTITION_KEY_MISMATCH: u32 = 1001;
    pub const PARTITION_KEY_RANGE_GONE: u32 = 1002;
    pub const CROSS_PARTITION_QUERY_NOT_SERVABLE: u32 = 1004;
    pub const PARTITION_KEY_QUOTA_EXCEEDED: u32 = 1014;
    pub const COLLECTION_RID_MISMATCH: u32 = 1024;
    pub const REQUEST_RATE_TOO_LARGE: u32 = 3200;
}

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub sub_status: Option<u32>,
    pub message: String,
    pub retry_after_ms: Option<u64>,
    /// Extra top-level body fields (e.g. `additionalErrorInfo` for 400/1004).
    pub extra: Option<Box<serde_json::Map<String, serde_json::Value>>>,
    /// Further headers, e.g. the session token of a point operation that failed.
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            sub_status: None,
            message: message.into(),
            retry_after_ms: None,
            extra: None,
            headers: Vec::new(),
        }
    }

    pub fn with_sub_status(mut self, s: u32) -> Self {
        self.sub_status = Some(s);
        self
    }

    /// The session token and LSN of the partition a failed point operation reached, as the
    /// service sends them with a 404, 409 or 412 (the SDKs keep session consistency with them).
    pub fn with_session(mut self, ranges: &[u32], lsn: u64) -> Self {
        self.headers
            .extend(super::response::session_headers(ranges, lsn));
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "Unauthorized", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "Forbidden", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "NotFound", message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "Conflict", message)
    }

    pub fn precondition_failed(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::PRECONDITION_FAILED,
            "PreconditionFailed",
            message,
        )
    }

    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestEntityTooLarge",
            message,
        )
    }

    pub fn request_timeout(message: impl Into<String>) -> Self {
        Self::new(StatusCode::REQUEST_TIMEOUT, "RequestTimeout", message)
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", message)
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(StatusCode::GONE, "Gone", message)
            .with_sub_status(substatus::PARTITION_KEY_RANGE_GONE)
    }

    pub fn throttled(retry_after_ms: u64, message: impl Into<String>) -> Self {
        let mut e = Self::new(StatusCode::TOO_MANY_REQUESTS, "TooManyRequests", message)
            .with_sub_status(substatus::REQUEST_RATE_TOO_LARGE);
        e.retry_after_ms = Some(retry_after_ms);
        e
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalServerError",
            message,
        )
    }

    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            message,
        )
    }

    /// The response, with the activity id appended to the message as the service does.
    pub fn into_response_with(self, activity_id: &str) -> Response {
        let mut body = serde_json::Map::new();
        body.insert("code".into(), self.code.into());
        body.insert(
            "message".into(),
            format!("{}\r\nActivityId: {activity_id}", self.message).into(),
        );
        if let Some(extra) = self.extra {
            body.extend(*extra);
        }
        let mut resp = (
            self.status,
            serde_json::to_vec(&serde_json::Value::Object(body)).unwrap_or_default(),
        )
            .into_response();
        let h = resp.headers_mut();
        h.insert("content-type", HeaderValue::from_static("application/json"));
        if let Some(s) = self.sub_status {
            h.insert("x-ms-substatus", HeaderValue::from(s));
        }
        if let Some(ms) = self.retry_after_ms {
            h.insert("x-ms-retry-after-ms", HeaderValue::from(ms));
        }
        if let Ok(v) = HeaderValue::from_str(activity_id) {
            h.insert("x-ms-activity-id", v);
        }
        h.insert("x-ms-request-charge", HeaderValue::from_static("1"));
        for (k, v) in self.headers {
            h.insert(k, v);
        }
        resp
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(m) => ApiError::not_found(m),
            StoreError::Conflict(m) => ApiError::conflict(m),
            StoreError::PreconditionFailed(m) => ApiError::precondition_failed(m),
            StoreError::BadRequest(m) => ApiError::bad_request(m),
            StoreError::PartitionKeyFull(m) => {
                ApiError::forbidden(m).with_sub_status(substatus::PARTITION_KEY_QUOTA_EXCEEDED)
            }
            StoreError::RangeGone(m) => ApiError::gone(m),
            StoreError::Engine(KvError::Poisoned) => ApiError::service_unavailable(
                "Storage stopped accepting writes after a flush failure; restart the server.",
            ),
            StoreError::Engine(e) => ApiError::internal(e.to_string()),
            StoreError::Corrupt(m) => ApiError::internal(format!("stored data is unreadable: {m}")),
        }
    }
}

impl From<crate::throughput::governor::Throttled> for ApiError {
    fn from(e: crate::throughput::governor::Throttled) -> Self {
        ApiError::throttled(e.retry_after_ms, e.message)
    }
}

/// Everything a client can get wrong in a query (syntax, binding, limits, tokens) is a 400.
impl From<strata_query::sql::QueryError> for ApiError {
    fn from(e: strata_query::sql::QueryError) -> Self {
        ApiError::bad_request(e.to_string())
    }
}

impl From<crate::exec::ExecError> for ApiError {
    fn from(e: crate::exec::ExecError) -> Self {
        use crate::exec::ExecError as E;
        match e {
            E::Query(q) => q.into(),
            E::Store(s) => s.into(),
            E::BadToken(m) => ApiError::bad_request(m),
            E::Index(a) => ApiError::bad_request(a.0),
            e @ E::Memory(_) => ApiError::bad_request(e.to_string()),
            E::Corrupt(m) => ApiError::internal(format!("stored data is unreadable: {m}")),
            e @ E::Worker(_) => ApiError::internal(e.to_string()),
        }
    }
}

impl From<KvError> for ApiError {
    fn from(e: KvError) -> Self {
        StoreError::from(e).into()
    }
}

impl From<strata_query::pk::PkError> for ApiError {
    fn from(e: strata_query::pk::PkError) -> Self {
        ApiError::bad_request(e.0)
    }
}
