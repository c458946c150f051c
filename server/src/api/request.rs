//! The decoded request every handler receives, with typed accessors for the `x-ms-*` headers.

use crate::error::CosmosError;
use axum::http::{HeaderMap, Method, Uri};
use bytes::Bytes;
use serde_json::{Map, Value};
use strata_query::pk::PartitionKey;
use strata_query::protocol::header;

use crate::items::document::json_kind;

/// The most headers [`Req::header`] searches in turn rather than through the map.
const LINEAR_HEADERS: usize = 32;

pub struct Req {
    pub method: Method,
    /// The URI as sent (its path names the request in messages).
    pub uri: Uri,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub activity_id: String,
    /// The client reached us over HTTPS.
    pub tls: bool,
    /// The keys a resource token scoped to a partition key (or prefix) may reach: feeds and
    /// queries are narrowed to it (see [`crate::api::security::access`]).
    pub epk_limit: Option<strata_query::pk::EpkRange>,
    /// The region whose port the request reached (see [`crate::regions`]).
    pub region: usize,
    /// The principal may only read (the read-only key, or an Entra token signed with it):
    /// work it starts on strata's own endpoints is held to what a query could cost.
    pub reads_only: bool,
}

impl Req {
    /// A request to no resource in particular with these parts (for unit tests).
    #[cfg(test)]
    pub fn for_tests(method: Method, headers: HeaderMap, body: Bytes) -> Req {
        Req {
            method,
            uri: Uri::from_static("/"),
            headers,
            body,
            activity_id: String::new(),
            tls: false,
            epk_limit: None,
            region: 0,
            reads_only: false,
        }
    }

    /// The resource path as sent.
    pub fn path(&self) -> &str {
        self.uri.path()
    }

    /// `scheme://host/` as the client reached us, for the account's advertised endpoint
    /// (made when asked: only the account's read needs it).
    pub fn endpoint(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        let host = crate::api::host_of(&self.headers, &self.uri);
        format!("{scheme}://{}/", host.unwrap_or("localhost:8081"))
    }

    /// The first value of header `name` (any case), when it is text.
    ///
    /// A request carries a dozen or two headers and a handler asks for as many: comparing
    /// names in turn (most differ in length) is cheaper than the map's lookup by `&str`,
    /// which validates, lowercases and hashes the name each time (3.9% of a single-partition
    /// query's server CPU under `perf`). Past [`LINEAR_HEADERS`] the map's lookup is used.
    pub fn header(&self, name: &str) -> Option<&str> {
        let value = if self.headers.len() <= LINEAR_HEADERS {
            self.headers
                .iter()
                .find(|(k, _)| {
                    let k = k.as_str();
                    k.len() == name.len() && k.eq_ignore_ascii_case(name)
                })
                .map(|(_, v)| v)
        } else {
            self.headers.get(name)
        };
        value.and_then(|v| v.to_str().ok())
    }

    /// A boolean header; the SDKs send `True` or `true`.
    pub fn flag(&self, name: &str) -> bool {
        self.header(name)
            .map(|v| v.trim().eq_ignore_ascii_case("true"))
            .unwrap_or(false)
    }

    /// `x-ms-documentdb-partitionkey`, parsed.
    pub fn partition_key(&self) -> Result<Option<PartitionKey>, CosmosError> {
        match self.header(header::PARTITION_KEY) {
            None => Ok(None),
            Some(t) => Ok(Some(PartitionKey::from_header(t)?)),
        }
    }

    /// `x-ms-max-item-count`: `None` when absent or -1 (service chooses).
    pub fn max_item_count(&self) -> Result<Option<usize>, CosmosError> {
        match self.header(header::MAX_ITEM_COUNT) {
            None => Ok(None),
            Some(v) => match v.trim().parse::<i64>() {
                Ok(-1) => Ok(None),
                Ok(n) if n > 0 => Ok(Some(n as usize)),
                _ => Err(CosmosError::bad_request(format!(
                    "Invalid value '{v}' for header x-ms-max-item-count: it must be a positive number or -1."
                ))),
            },
        }
    }

    pub fn continuation(&self) -> Option<&str> {
        self.header(header::CONTINUATION).filter(|s| !s.is_empty())
    }

    pub fn if_match(&self) -> Option<&str> {
        self.header(header::IF_MATCH).filter(|s| !s.is_empty())
    }

    pub fn if_none_match(&self) -> Option<&str> {
        self.header(header::IF_NONE_MATCH).filter(|s| !s.is_empty())
    }

    /// The body as JSON; parse errors name the line and column.
    pub fn json(&self) -> Result<Value, CosmosError> {
        if self.body.is_empty() {
            return Err(CosmosError::bad_request(
                "The request body is empty; a JSON body is required.",
            ));
        }
        serde_json::from_slice(&self.body).map_err(|e| {
            CosmosError::bad_request(format!(
                "The request body is not valid JSON: {e} (line {}, column {}).",
                e.line(),
                e.column()
            ))
        })
    }

    /// The body as a JSON object.
    pub fn json_object(&self) -> Result<Map<String, Value>, CosmosError> {
        match self.json()? {
            Value::Object(m) => Ok(m),
            other => Err(CosmosError::bad_request(format!(
                "The request body must be a JSON object, not {}.",
                json_kind(&other)
            ))),
        }
    }

    /// Whether the client asked for no body on writes (`Prefer: return=minimal`).
    pub fn minimal_response(&self) -> bool {
        self.header(header::PREFER)
            .map(|p| p.to_ascii_lowercase().contains("return=minimal"))
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderName, HeaderValue};

    fn with_headers(n_other: usize) -> Req {
        let mut headers = HeaderMap::new();
        for i in 0..n_other {
            headers.insert(
                HeaderName::try_from(format!("x-other-{i}")).expect("name"),
                HeaderValue::from_static("1"),
            );
        }
        headers.append(header::PARTITION_KEY, HeaderValue::from_static("[\"a\"]"));
        headers.append(header::PARTITION_KEY, HeaderValue::from_static("[\"b\"]"));
        headers.insert(header::PREFER, HeaderValue::from_static("return=minimal"));
        Req::for_tests(Method::GET, headers, Bytes::new())
    }

    /// Searched in turn or through the map, a header is found by any spelling of its name,
    /// its first value wins as the map's `get` has it, and a name of another length or a
    /// missing one finds nothing.
    #[test]
    fn headers_are_found_alike_few_or_many() {
        for n in [0, LINEAR_HEADERS + 5] {
            let r = with_headers(n);
            assert_eq!(
                r.header("X-MS-Documentdb-PartitionKey"),
                Some("[\"a\"]"),
                "{n}"
            );
            assert_eq!(r.header(header::PARTITION_KEY), Some("[\"a\"]"), "{n}");
            assert!(r.minimal_response(), "{n}");
            assert_eq!(r.header("prefe"), None, "{n}");
            assert_eq!(r.header(header::SESSION_TOKEN), None, "{n}");
        }
    }
}
