//! The decoded request every handler receives, with typed accessors for the `x-ms-*` headers.

use super::error::ApiError;
use axum::http::{HeaderMap, Method};
use bytes::Bytes;
use serde_json::{Map, Value};
use strata_query::pk::PartitionKey;

/// Largest document Cosmos accepts.
pub const MAX_ITEM_BYTES: usize = 2 * 1024 * 1024;

pub struct Req {
    pub method: Method,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub activity_id: String,
    /// `scheme://host/` as the client reached us, for the account's advertised endpoint.
    pub endpoint: String,
    /// The keys a resource token scoped to a partition key (or prefix) may reach: feeds and
    /// queries are narrowed to it (see [`super::access`]).
    pub epk_limit: Option<strata_query::pk::EpkRange>,
}

impl Req {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// A boolean header; the SDKs send `True` or `true`.
    pub fn flag(&self, name: &str) -> bool {
        self.header(name)
            .map(|v| v.trim().eq_ignore_ascii_case("true"))
            .unwrap_or(false)
    }

    /// `x-ms-documentdb-partitionkey`, parsed.
    pub fn partition_key(&self) -> Result<Option<PartitionKey>, ApiError> {
        match self.header("x-ms-documentdb-partitionkey") {
            None => Ok(None),
            Some(t) => Ok(Some(PartitionKey::from_header(t)?)),
        }
    }

    /// `x-ms-max-item-count`: `None` when absent or -1 (service chooses).
    pub fn max_item_count(&self) -> Result<Option<usize>, ApiError> {
        match self.header("x-ms-max-item-count") {
            None => Ok(None),
            Some(v) => match v.trim().parse::<i64>() {
                Ok(-1) => Ok(None),
                Ok(n) if n > 0 => Ok(Some(n as usize)),
                _ => Err(ApiError::bad_request(format!(
                    "Invalid value '{v}' for header x-ms-max-item-count: it must be a positive number or -1."
                ))),
            },
        }
    }

    pub fn continuation(&self) -> Option<&str> {
        self.header("x-ms-continuation").filter(|s| !s.is_empty())
    }

    pub fn if_match(&self) -> Option<&str> {
        self.header("if-match").filter(|s| !s.is_empty())
    }

    pub fn if_none_match(&self) -> Option<&str> {
        self.header("if-none-match").filter(|s| !s.is_empty())
    }

    /// The body as JSON; parse errors name the line and column.
    pub fn json(&self) -> Result<Value, ApiError> {
        if self.body.is_empty() {
            return Err(ApiError::bad_request(
                "The request body is empty; a JSON body is required.",
            ));
        }
        serde_json::from_slice(&self.body).map_err(|e| {
            ApiError::bad_request(format!(
                "The request body is not valid JSON: {e} (line {}, column {}).",
                e.line(),
                e.column()
            ))
        })
    }

    /// The body as a JSON object.
    pub fn json_object(&self) -> Result<Map<String, Value>, ApiError> {
        match self.json()? {
            Value::Object(m) => Ok(m),
            other => Err(ApiError::bad_request(format!(
                "The request body must be a JSON object, not {}.",
                json_kind(&other)
            ))),
        }
    }

    /// Whether the client asked for no body on writes (`Prefer: return=minimal`).
    pub fn minimal_response(&self) -> bool {
        self.header("prefer")
            .map(|p| p.to_ascii_lowercase().contains("return=minimal"))
            .unwrap_or(false)
    }
}

pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Validates a resource id (database, container or item).
pub fn validate_id(id: &Value, what: &str) -> Result<String, ApiError> {
    let id = match id {
        Value::String(s) => s,
        Value::Null => {
            return Err(ApiError::bad_request(format!(
                "The input content is invalid because the required properties - 'id; ' - are missing: every {what} needs a string 'id'."
            )))
        }
        other => {
            return Err(ApiError::bad_request(format!(
                "The {what} 'id' must be a string, not {}.",
                json_kind(other)
            )))
        }
    };
    if id.is_empty() {
        return Err(ApiError::bad_request(format!(
            "The {what} 'id' must not be empty."
        )));
    }
    if id.chars().count() > 255 {
        return Err(ApiError::bad_request(format!(
            "The {what} 'id' is {} characters long; at most 255 are allowed.",
            id.chars().count()
        )));
    }
    if let Some(c) = id.chars().find(|c| matches!(c, '/' | '\\' | '?' | '#')) {
        return Err(ApiError::bad_request(format!(
            "The {what} id '{id}' contains the character '{c}', which is not allowed ('/', '\\', '?' and '#' are reserved)."
        )));
    }
    if id.ends_with(' ') {
        return Err(ApiError::bad_request(format!(
            "The {what} id '{id}' ends with a space, which is not allowed."
        )));
    }
    Ok(id.clone())
}
