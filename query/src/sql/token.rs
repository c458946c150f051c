//! Query continuation tokens.
//!
//! A token records where the next page starts, in terms of the key space rather than
//! partition ids (the last document key, and for ORDER BY the last sort keys), so it stays
//! valid when partitions split between pages. It carries the query's fingerprint and a
//! checksum; a token from another query, or edited, is rejected with a clear error.

use super::error::QueryError;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An ORDER BY key that may be undefined.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum KeyValue {
    Defined { v: Value },
    Undefined { u: bool },
}

impl KeyValue {
    pub fn from_opt(v: &Option<Value>) -> Self {
        match v {
            Some(v) => KeyValue::Defined { v: v.clone() },
            None => KeyValue::Undefined { u: true },
        }
    }

    pub fn into_opt(self) -> Option<Value> {
        match self {
            KeyValue::Defined { v } => Some(v),
            KeyValue::Undefined { .. } => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "k")]
pub enum Position {
    /// Key-ordered scan: resume after document `after` (hex of `EPK 0x00 id`), skipping the
    /// first `skip` rows it produces.
    Stream { after: String, skip: u64 },
    /// ORDER BY: resume after the row with these sort keys, document and row ordinal.
    Ordered {
        keys: Vec<KeyValue>,
        after: String,
        ord: u64,
    },
    /// Complete results: resume at this index.
    Index { next: u64 },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Continuation {
    /// Fingerprint of the query text and parameters.
    pub fp: String,
    /// Rows of the query's result stream already consumed (for OFFSET, LIMIT and TOP).
    pub consumed: u64,
    pub pos: Position,
}

#[derive(Serialize, Deserialize)]
struct Envelope {
    v: u8,
    c: Continuation,
    sum: String,
}

fn checksum(c: &Continuation) -> String {
    let body = serde_json::to_vec(c).unwrap_or_default();
    format!(
        "{:016x}",
        xxhash_rust::xxh3::xxh3_64_with_seed(&body, 0x5354_5241_5441)
    )
}

impl Continuation {
    pub fn encode(&self) -> String {
        let env = Envelope {
            v: 1,
            c: self.clone(),
            sum: checksum(self),
        };
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(serde_json::to_vec(&env).unwrap_or_default())
    }

    /// Decodes a token and checks it belongs to the query with fingerprint `fp`.
    pub fn decode(token: &str, fp: &str) -> Result<Self, QueryError> {
        let bad = |why: &str| {
            QueryError::BadContinuation(format!(
                "The continuation token is invalid ({why}); run the query again without it."
            ))
        };
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token.trim())
            .map_err(|_| bad("not base64url"))?;
        let env: Envelope = serde_json::from_slice(&raw).map_err(|_| bad("malformed"))?;
        if env.v != 1 {
            return Err(bad("unknown version"));
        }
        if checksum(&env.c) != env.sum {
            return Err(bad("checksum mismatch: it was altered"));
        }
        if env.c.fp != fp {
            return Err(bad("it belongs to a different query or parameters"));
        }
        Ok(env.c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_tamper_detection() {
        let c = Continuation {
            fp: "abc".into(),
            consumed: 7,
            pos: Position::Ordered {
                keys: vec![
                    KeyValue::from_opt(&None),
                    KeyValue::from_opt(&Some(Value::from(3))),
                ],
                after: "0A00".into(),
                ord: 1,
            },
        };
        let t = c.encode();
        assert_eq!(Continuation::decode(&t, "abc").unwrap(), c);
        assert!(Continuation::decode(&t, "other").is_err());
        let mut bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&t)
            .unwrap();
        let i = bytes.iter().position(|&b| b == b'7').unwrap();
        bytes[i] = b'8';
        let forged = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        assert!(Continuation::decode(&forged, "abc").is_err());
        assert!(Continuation::decode("!!!", "abc").is_err());
        assert!(Continuation::decode("", "abc").is_err());
    }
}
