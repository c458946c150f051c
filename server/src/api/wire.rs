//! The body format on the wire: JSON text or Cosmos binary JSON.
//!
//! Documents are kept as JSON text, so the format is settled at the door, once: a binary
//! request body (it starts with `0x80`) becomes text before any handler sees it, and a reply
//! that carries documents is encoded in binary when the client listed `CosmosBinary` in
//! `x-ms-cosmos-supported-serialization-formats`, as the service does. Everything in between
//! (handlers, triggers, stored procedures, size limits and charges) works on text only.

use crate::api::endpoint::Endpoint;
use crate::api::response::Reply;
use crate::api::MAX_BODY;
use crate::error::CosmosError;
use axum::http::HeaderMap;
use bytes::Bytes;
use strata_query::binary::{self, BinaryError};
use strata_query::protocol::header;

/// The request body as JSON text: binary bodies are transcoded, anything else passes as is.
pub fn request_body(body: Bytes) -> Result<Bytes, CosmosError> {
    if !binary::is_binary(&body) {
        return Ok(body);
    }
    match binary::to_text(&body, MAX_BODY) {
        Ok(text) => Ok(Bytes::from(text)),
        Err(BinaryError::TooLarge { .. }) => Err(CosmosError::too_large(format!(
            "The Cosmos binary JSON request body expands to more than {MAX_BODY} bytes of JSON; items and batches are limited to 2 MB."
        ))),
        Err(e) => Err(CosmosError::bad_request(format!(
            "The request body is not valid: {e}."
        ))),
    }
}

/// Whether the client asked for binary answers.
pub fn wants_binary(headers: &HeaderMap) -> bool {
    headers
        .get(header::SUPPORTED_SERIALIZATION_FORMATS)
        .and_then(|v| v.to_str().ok())
        .is_some_and(binary::accepts_binary)
}

/// Whether the service answers this endpoint in binary when asked: the item operations and
/// feeds whose bodies are documents (not errors, scripts' results, batches or plans).
pub fn answers_in_binary(ep: &Endpoint) -> bool {
    use Endpoint as E;
    matches!(
        ep,
        E::CreateItem { .. }
            | E::ReadItem { .. }
            | E::ReplaceItem { .. }
            | E::PatchItem { .. }
            | E::ReadItemFeed { .. }
            | E::QueryItems { .. }
            | E::ChangeFeed { .. }
    )
}

/// Re-encodes a successful reply's JSON body in binary. A body that is not JSON (none of the
/// endpoints above make one) is left as it is rather than failing a request that succeeded.
pub fn encode_reply(mut r: Reply) -> Reply {
    if r.status.is_success() && !r.body.is_empty() {
        if let Ok(b) = binary::from_text(&r.body) {
            r.body = Bytes::from(b);
        }
    }
    r
}
