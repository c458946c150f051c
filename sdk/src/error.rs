//! The one error type of the SDK.

use std::time::Duration;

/// An error from the service or from the client side.
///
/// Service errors carry the HTTP status, the Cosmos sub-status, the `code` and `message` of
/// the error body, and the activity id (quote it when reporting a problem).
///
/// ```
/// # async fn demo(c: strata_sdk::ContainerClient) {
/// match c.read_item::<serde_json::Value>("missing", "pk").await {
///     Err(e) if e.is_not_found() => println!("no such item ({})", e.message()),
///     Err(e) => eprintln!("failed: {e}"),
///     Ok(r) => println!("{:?}", r.item),
/// }
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[error("{}", self.describe())]
pub struct Error {
    status: Option<u16>,
    sub_status: Option<u32>,
    code: String,
    message: String,
    activity_id: Option<String>,
    retry_after: Option<Duration>,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl Error {
    pub(crate) fn service(
        status: u16,
        sub_status: Option<u32>,
        code: String,
        message: String,
        activity_id: Option<String>,
        retry_after: Option<Duration>,
    ) -> Self {
        Self {
            status: Some(status),
            sub_status,
            code,
            message,
            activity_id,
            retry_after,
            source: None,
        }
    }

    /// An error raised on the client's side (no status): `code`, what happened, and why.
    fn client(
        code: &str,
        message: String,
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            status: None,
            sub_status: None,
            code: code.into(),
            message,
            activity_id: None,
            retry_after: None,
            source,
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::client("InvalidInput", message.into(), None)
    }

    pub(crate) fn transport(e: reqwest::Error) -> Self {
        Self::client("Transport", e.to_string(), Some(Box::new(e)))
    }

    pub(crate) fn serde(e: serde_json::Error) -> Self {
        Self::client("Serialization", e.to_string(), Some(Box::new(e)))
    }

    /// An operation that did not finish within the client's operation timeout.
    pub(crate) fn timed_out(what: String) -> Self {
        Self::client("Transport", what, None)
    }

    /// An answer in Cosmos binary JSON that could not be read.
    pub(crate) fn binary(e: strata_query::binary::BinaryError) -> Self {
        Self::client("Serialization", e.to_string(), Some(Box::new(e)))
    }

    fn describe(&self) -> String {
        match (self.status, self.sub_status) {
            (Some(s), Some(ss)) => format!("{s}/{ss} {}: {}", self.code, self.message),
            (Some(s), None) => format!("{s} {}: {}", self.code, self.message),
            _ => format!("{}: {}", self.code, self.message),
        }
    }

    /// The HTTP status, for errors the service returned.
    ///
    /// ```
    /// # fn f(e: strata_sdk::Error) { if e.status() == Some(409) { /* exists */ } }
    /// ```
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// The Cosmos sub-status (e.g. 1002 for a partition key range that split).
    ///
    /// ```
    /// # fn f(e: strata_sdk::Error) { let _gone = e.sub_status() == Some(1002); }
    /// ```
    pub fn sub_status(&self) -> Option<u32> {
        self.sub_status
    }

    /// The error code (`NotFound`, `Conflict`, ...).
    ///
    /// ```
    /// # fn f(e: strata_sdk::Error) { println!("{}", e.code()); }
    /// ```
    pub fn code(&self) -> &str {
        &self.code
    }

    /// The human-readable message.
    ///
    /// ```
    /// # fn f(e: strata_sdk::Error) { println!("{}", e.message()); }
    /// ```
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The activity id of the failed request.
    ///
    /// ```
    /// # fn f(e: strata_sdk::Error) { if let Some(id) = e.activity_id() { println!("{id}"); } }
    /// ```
    pub fn activity_id(&self) -> Option<&str> {
        self.activity_id.as_deref()
    }

    /// How long the service asked to wait before retrying (429).
    ///
    /// ```
    /// # fn f(e: strata_sdk::Error) { let _ = e.retry_after(); }
    /// ```
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// 404: the resource does not exist.
    ///
    /// ```
    /// # fn f(e: strata_sdk::Error) { if e.is_not_found() {} }
    /// ```
    pub fn is_not_found(&self) -> bool {
        self.status == Some(404)
    }

    /// 409: an item with this id already exists in the logical partition.
    ///
    /// ```
    /// # fn f(e: strata_sdk::Error) { if e.is_conflict() {} }
    /// ```
    pub fn is_conflict(&self) -> bool {
        self.status == Some(409)
    }

    /// 412: an `if_match` etag (or a patch condition) did not hold.
    ///
    /// ```
    /// # fn f(e: strata_sdk::Error) { if e.is_precondition_failed() {} }
    /// ```
    pub fn is_precondition_failed(&self) -> bool {
        self.status == Some(412)
    }

    /// 429: the request rate exceeded the provisioned throughput (after retries).
    ///
    /// ```
    /// # fn f(e: strata_sdk::Error) { if e.is_throttled() {} }
    /// ```
    pub fn is_throttled(&self) -> bool {
        self.status == Some(429)
    }

    /// Whether the request never reached the service (connection errors, timeouts).
    ///
    /// ```
    /// # fn f(e: strata_sdk::Error) { if e.is_transport() {} }
    /// ```
    pub fn is_transport(&self) -> bool {
        self.code == "Transport"
    }
}
