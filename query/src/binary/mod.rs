//! Cosmos binary JSON: the tagged byte format the service accepts and answers in place of JSON
//! text when a client asks for it (`x-ms-cosmos-supported-serialization-formats:
//! CosmosBinary`). The official Rust SDK, `azure_data_cosmos` 1.0, sends item bodies in it and
//! asks for it by default.
//!
//! A buffer starts with the preamble byte `0x80`, which no JSON text can start with, so a body's
//! first byte tells the two formats apart. Then one value follows: a type-marker byte (see
//! [`markers`]) and its payload.
//!
//! strata keeps documents as JSON text, so the codec converts at the edge: [`to_text`] turns a
//! binary body into compact JSON text in one pass (no intermediate tree), and [`encode`] writes
//! a value in the format's compact forms. The reader accepts every form the service and the
//! official SDKs write — fixed-width and uniform-array numbers, system, reference, GUID, base64
//! and packed strings — except user-dictionary strings, which need a dictionary the REST API
//! never carries.
//!
//! ```
//! use serde_json::json;
//! use strata_query::binary;
//!
//! let doc = json!({"id": "1", "n": 7, "tags": ["a", "b"], "x": 1.5});
//! let bytes = binary::encode(&doc);
//! assert!(binary::is_binary(&bytes));
//! assert_eq!(binary::decode(&bytes).unwrap(), doc);
//! assert_eq!(binary::to_text(&bytes, 1 << 20).unwrap(), serde_json::to_vec(&doc).unwrap());
//! ```

pub mod markers;
mod read;
mod write;

pub use read::MAX_DEPTH;
use serde_json::Value;

/// The first byte of every binary buffer.
pub const PREAMBLE: u8 = 0x80;

/// The value of `x-ms-cosmos-supported-serialization-formats` that asks for binary answers.
pub const FORMAT_NAME: &str = "CosmosBinary";

/// How much text [`decode`] lets a buffer expand to (reference strings can repeat one long
/// string many times): 16 times the buffer, and at least 64 MiB.
fn default_limit(len: usize) -> usize {
    len.saturating_mul(16).max(64 << 20)
}

/// Why a binary buffer could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BinaryError {
    #[error("the body is not Cosmos binary JSON: it does not start with the byte 0x80")]
    NotBinary,
    #[error("the Cosmos binary JSON body is malformed at byte {offset}: {what}")]
    Malformed { offset: usize, what: String },
    #[error("the Cosmos binary JSON body expands to more than {limit} bytes of JSON")]
    TooLarge { limit: usize },
}

/// Whether `body` is Cosmos binary JSON (starts with the preamble).
pub fn is_binary(body: &[u8]) -> bool {
    body.first() == Some(&PREAMBLE)
}

/// Whether a `x-ms-cosmos-supported-serialization-formats` value lists `CosmosBinary`.
pub fn accepts_binary(formats: &str) -> bool {
    formats
        .split(',')
        .any(|f| f.trim().eq_ignore_ascii_case(FORMAT_NAME))
}

/// Transcodes a binary buffer to compact JSON text of at most `limit` bytes.
pub fn to_text(buf: &[u8], limit: usize) -> Result<Vec<u8>, BinaryError> {
    if !is_binary(buf) {
        return Err(BinaryError::NotBinary);
    }
    read::Reader::new(buf, limit).into_text()
}

/// Decodes a binary buffer into a value.
pub fn decode(buf: &[u8]) -> Result<Value, BinaryError> {
    let text = to_text(buf, default_limit(buf.len()))?;
    serde_json::from_slice(&text).map_err(|e| BinaryError::Malformed {
        offset: 0,
        what: format!("it decodes to JSON that does not parse ({e})"),
    })
}

/// Encodes a value as a binary buffer.
pub fn encode(v: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.push(PREAMBLE);
    write::value(v, &mut out);
    out
}

/// Encodes JSON text as a binary buffer.
pub fn from_text(text: &[u8]) -> Result<Vec<u8>, serde_json::Error> {
    Ok(encode(&serde_json::from_slice::<Value>(text)?))
}

#[cfg(test)]
mod tests;
