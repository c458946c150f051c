//! The one error type of strata's Cosmos operations: a status code, the Cosmos `code` name, an
//! optional sub-status and a message — the `{"code": ..., "message": ...}` body every SDK
//! parses. It belongs to no layer: item operations, scripts and the REST handlers all return
//! it, and `api::response::error_response` renders it.

use crate::store::kv::KvError;
use crate::store::StoreError;
use axum::http::StatusCode;

/// Cosmos sub-status codes we emit.
pub mod substatus {
    pub const PARTITION_KEY_MISMATCH: u32 = 1001;
    pub const PARTITION_KEY_RANGE_GONE: u32 = 1002;
    pub const CROSS_PARTITION_QUERY_NOT_SERVABLE: u32 = 1004;
    pub const COMPLETING_SPLIT: u32 = 1007;
    pub const PARTITION_KEY_QUOTA_EXCEEDED: u32 = 1014;
    pub const COLLECTION_RID_MISMATCH: u32 = 1024;
    pub const REQUEST_RATE_TOO_LARGE: u32 = 3200;
    /// A throughput bucket spent its share of the container's throughput.
    pub const THROUGHPUT_BUCKET_EXCEEDED: u32 = 3212;
    /// A container's throughput buckets changed less than ten minutes ago.
    pub const THROUGHPUT_BUCKET_CHANGE_TOO_SOON: u32 = 3213;
}

#[derive(Debug, Clone)]
pub struct CosmosError {
    pub status: StatusCode,
    pub code: &'static str,
    pub sub_status: Option<u32>,
    pub message: String,
    pub retry_after_ms: Option<u64>,
    /// Extra top-level body fields (e.g. `additionalErrorInfo` for 400/1004).
    pub extra: Option<Box<serde_json::Map<String, serde_json::Value>>>,
    /// The partition key ranges and LSN a failed point operation reached, sent back as its
    /// session token.
    pub session: Option<(Vec<u32>, u64)>,
}

impl CosmosError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            sub_status: None,
            message: message.into(),
            retry_after_ms: None,
            extra: None,
            session: None,
        }
    }

    pub fn with_sub_status(mut self, s: u32) -> Self {
        self.sub_status = Some(s);
        self
    }

    /// The session token and LSN of the partition a failed point operation reached, as the
    /// service sends them with a 404, 409 or 412 (the SDKs keep session consistency with them).
    pub fn with_session(mut self, ranges: &[u32], lsn: u64) -> Self {
        self.session = Some((ranges.to_vec(), lsn));
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

    /// 410/1007: the range is being replaced by a split or merge; retry shortly.
    pub fn completing_split(message: impl Into<String>) -> Self {
        Self::new(StatusCode::GONE, "Gone", message).with_sub_status(substatus::COMPLETING_SPLIT)
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
}

impl From<StoreError> for CosmosError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(m) => CosmosError::not_found(m),
            StoreError::Conflict(m) => CosmosError::conflict(m),
            StoreError::PreconditionFailed(m) => CosmosError::precondition_failed(m),
            StoreError::BadRequest(m) => CosmosError::bad_request(m),
            StoreError::PartitionKeyFull(m) => {
                CosmosError::forbidden(m).with_sub_status(substatus::PARTITION_KEY_QUOTA_EXCEEDED)
            }
            StoreError::RangeGone(m) => CosmosError::gone(m),
            StoreError::Engine(KvError::Poisoned) => CosmosError::service_unavailable(
                "Storage stopped accepting writes after a flush failure; restart the server.",
            ),
            StoreError::Engine(e) => CosmosError::internal(e.to_string()),
            StoreError::Corrupt(m) => {
                CosmosError::internal(format!("stored data is unreadable: {m}"))
            }
        }
    }
}

impl From<crate::throughput::governor::Throttled> for CosmosError {
    fn from(e: crate::throughput::governor::Throttled) -> Self {
        let mut err = CosmosError::throttled(e.retry_after_ms, e.message);
        if e.by_bucket {
            err.sub_status = Some(substatus::THROUGHPUT_BUCKET_EXCEEDED);
        }
        err
    }
}

/// Everything a client can get wrong in a query (syntax, binding, limits, tokens) is a 400.
impl From<strata_query::sql::QueryError> for CosmosError {
    fn from(e: strata_query::sql::QueryError) -> Self {
        CosmosError::bad_request(e.to_string())
    }
}

impl From<crate::exec::ExecError> for CosmosError {
    fn from(e: crate::exec::ExecError) -> Self {
        use crate::exec::ExecError as E;
        match e {
            E::Query(q) => q.into(),
            E::Store(s) => s.into(),
            E::BadToken(m) => CosmosError::bad_request(m),
            E::Index(a) => CosmosError::bad_request(a.0),
            e @ E::Memory(_) => CosmosError::bad_request(e.to_string()),
            E::InputsTooLarge(m) => CosmosError::too_large(m),
            E::Corrupt(m) => CosmosError::internal(format!("stored data is unreadable: {m}")),
            e @ E::Worker(_) => CosmosError::internal(e.to_string()),
        }
    }
}

impl From<KvError> for CosmosError {
    fn from(e: KvError) -> Self {
        StoreError::from(e).into()
    }
}

impl From<strata_query::pk::PkError> for CosmosError {
    fn from(e: strata_query::pk::PkError) -> Self {
        CosmosError::bad_request(e.0)
    }
}
