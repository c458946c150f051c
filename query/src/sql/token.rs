//! Query continuation tokens.
//!
//! A token records where the next page starts, in terms of the key space rather than
//! partition ids (the last document key, and for ORDER BY the last sort keys), so it stays
//! valid when partitions split between pages. It carries the query's fingerprint (which the
//! server binds to the container) and an HMAC-SHA256 under a key only the server holds
//! ([`TokenKey`]); a token from another query or container, edited or forged, is rejected
//! with a clear error.

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
    strata: u8,
    c: Value,
    sum: String,
}

/// The server's secret for continuation tokens: tokens it hands out carry a MAC under this
/// key, so a client can neither edit a position nor make one up.
#[derive(Clone)]
pub struct TokenKey([u8; 32]);

impl TokenKey {
    pub fn new(bytes: [u8; 32]) -> Self {
        TokenKey(bytes)
    }

    /// A key for another purpose, derived from this one (HMAC-SHA256 of `purpose`): one
    /// secret on disk, independent keys per use.
    pub fn derive(&self, purpose: &str) -> [u8; 32] {
        use hmac::Mac as _;
        let mut m = <hmac::Hmac<sha2::Sha256> as hmac::Mac>::new_from_slice(&self.0)
            .expect("HMAC accepts any key length");
        m.update(b"derive:");
        m.update(purpose.as_bytes());
        m.finalize().into_bytes().into()
    }

    /// The MAC of `body` within `scope` (what the token may be used for), hex.
    pub fn mac(&self, scope: &str, body: &[u8]) -> String {
        use hmac::Mac as _;
        let mut m = <hmac::Hmac<sha2::Sha256> as hmac::Mac>::new_from_slice(&self.0)
            .expect("HMAC accepts any key length");
        m.update(scope.as_bytes());
        m.update(&[0]);
        m.update(body);
        m.finalize().into_bytes()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Wraps `payload` into an opaque token valid only within `scope`.
    pub fn seal(&self, scope: &str, payload: &Value) -> String {
        let body = payload.to_string();
        // No field named `v`: the Python SDK takes any base64 JSON object with a `v` for a
        // feed-range token of its own and rejects it.
        let env =
            serde_json::json!({"strata": 1, "c": payload, "sum": self.mac(scope, body.as_bytes())});
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(env.to_string())
    }

    /// The payload of a token made by [`TokenKey::seal`] for `scope`; an error says why not.
    pub fn open(&self, scope: &str, token: &str) -> Result<Value, &'static str> {
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token.trim())
            .map_err(|_| "not base64url")?;
        let env: Envelope = serde_json::from_slice(&raw).map_err(|_| "malformed")?;
        if env.strata != 1 {
            return Err("unknown version");
        }
        let body = env.c.to_string();
        if self.mac(scope, body.as_bytes()) != env.sum {
            return Err("it was altered, or belongs to another query, container or server");
        }
        Ok(env.c)
    }
}

impl Continuation {
    pub fn encode(&self, key: &TokenKey) -> String {
        let payload = serde_json::to_value(self).unwrap_or(Value::Null);
        key.seal(&self.fp, &payload)
    }

    /// Decodes a token and checks it belongs to the query with fingerprint `fp`.
    pub fn decode(token: &str, fp: &str, key: &TokenKey) -> Result<Self, QueryError> {
        let bad = |why: &str| {
            QueryError::BadContinuation(format!(
                "The continuation token is invalid ({why}); run the query again without it."
            ))
        };
        let payload = key.open(fp, token).map_err(bad)?;
        let c: Continuation = serde_json::from_value(payload).map_err(|_| bad("malformed"))?;
        if c.fp != fp {
            return Err(bad("it belongs to a different query or parameters"));
        }
        Ok(c)
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
        let key = TokenKey::new([7; 32]);
        let t = c.encode(&key);
        assert_eq!(Continuation::decode(&t, "abc", &key).unwrap(), c);
        assert!(Continuation::decode(&t, "other", &key).is_err());
        // Another server's key (or a forger without one) cannot make a valid token.
        assert!(Continuation::decode(&t, "abc", &TokenKey::new([8; 32])).is_err());
        let mut bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&t)
            .unwrap();
        let i = bytes.iter().position(|&b| b == b'7').unwrap();
        bytes[i] = b'8';
        let forged = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        assert!(Continuation::decode(&forged, "abc", &key).is_err());
        assert!(Continuation::decode("!!!", "abc", &key).is_err());
        assert!(Continuation::decode("", "abc", &key).is_err());
    }
}
