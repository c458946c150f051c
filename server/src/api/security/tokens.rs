//! Resource tokens: minted when a permission is read, verified on every request that carries
//! one (`authorization: type=resource&ver=1.0&sig=...`).
//!
//! A token names its permission (`_rid`) and the permission's version (its etag sequence), and
//! carries its expiry, all under the server's MAC (the key that signs continuation tokens,
//! under its own domain). It grants nothing by itself: each request looks the permission up,
//! so a token cannot be forged or widened, and deleting or replacing the permission retires
//! every token issued for it.

use crate::error::CosmosError;
use base64::Engine as _;
use strata_query::sql::token::TokenKey;

/// Validity of a token when `x-ms-documentdb-expiry-seconds` is not given (as the service).
pub const DEFAULT_VALIDITY_SECS: u64 = 3600;
/// The longest validity the service grants (five hours).
pub const MAX_VALIDITY_SECS: u64 = 5 * 3600;
/// The shortest.
pub const MIN_VALIDITY_SECS: u64 = 10;

const DOMAIN: &str = "strata-resource-token";

/// What a verified token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    /// The permission's `_rid`.
    pub permission_rid: String,
    /// The permission version the token was issued for.
    pub etag_seq: u64,
    /// Seconds since the epoch after which the token is refused.
    pub expires: u64,
}

fn mac_bytes(key: &TokenKey, payload: &[u8]) -> Vec<u8> {
    let hex = key.mac(DOMAIN, payload);
    (0..hex.len() / 2)
        .filter_map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
        .collect()
}

/// A token for `claims`.
pub fn mint(key: &TokenKey, claims: &Claims) -> String {
    let rid = crate::store::catalog::decode_rid(&claims.permission_rid).unwrap_or_default();
    let mut payload = Vec::with_capacity(rid.len() + 17);
    payload.push(rid.len() as u8);
    payload.extend_from_slice(&rid);
    payload.extend_from_slice(&claims.etag_seq.to_be_bytes());
    payload.extend_from_slice(&claims.expires.to_be_bytes());
    let mut sealed = payload.clone();
    sealed.extend_from_slice(&mac_bytes(key, &payload));
    format!(
        "type=resource&ver=1.0&sig={}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sealed)
    )
}

fn invalid() -> CosmosError {
    CosmosError::unauthorized(
        "The input authorization token can't serve the request: the resource token is malformed or was altered. Read the permission again for a fresh token.",
    )
}

/// Verifies the `sig` of a resource token; 401 when it was altered or has expired.
pub fn open(key: &TokenKey, sig: &str, now: u64) -> Result<Claims, CosmosError> {
    let sealed = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(sig.trim())
        .map_err(|_| invalid())?;
    let rid_len = *sealed.first().ok_or_else(invalid)? as usize;
    let payload_len = 1 + rid_len + 16;
    if sealed.len() != payload_len + 16 {
        return Err(invalid());
    }
    let (payload, mac) = sealed.split_at(payload_len);
    let want = mac_bytes(key, payload);
    // Constant time: every byte is compared whatever the first difference.
    let diff = want
        .iter()
        .zip(mac)
        .fold(want.len() ^ mac.len(), |acc, (a, b)| {
            acc | usize::from(a ^ b)
        });
    if diff != 0 {
        return Err(invalid());
    }
    let rid = &payload[1..1 + rid_len];
    let num = |at: usize| {
        payload[at..at + 8]
            .try_into()
            .map(u64::from_be_bytes)
            .map_err(|_| invalid())
    };
    let claims = Claims {
        permission_rid: crate::store::catalog::rid(rid),
        etag_seq: num(1 + rid_len)?,
        expires: num(1 + rid_len + 8)?,
    };
    if now >= claims.expires {
        return Err(CosmosError::unauthorized(
            "The resource token has expired; read the permission again for a fresh token (x-ms-documentdb-expiry-seconds sets its validity, at most five hours).",
        ));
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_verify_and_refuse_tampering_and_expiry() {
        let key = TokenKey::new([7; 32]);
        let claims = Claims {
            permission_rid: crate::store::catalog::rid(&[
                1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
            ]),
            etag_seq: 42,
            expires: 1_000,
        };
        let t = mint(&key, &claims);
        let sig = t.strip_prefix("type=resource&ver=1.0&sig=").unwrap();
        assert_eq!(open(&key, sig, 999).unwrap(), claims);
        assert_eq!(open(&key, sig, 1_000).unwrap_err().status.as_u16(), 401);
        // Every single-bit flip of the token is refused.
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(sig)
            .unwrap();
        for i in 0..raw.len() * 8 {
            let mut b = raw.clone();
            b[i / 8] ^= 1 << (i % 8);
            let s = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&b);
            assert!(open(&key, &s, 0).is_err(), "bit {i}");
        }
        assert!(open(&TokenKey::new([8; 32]), sig, 0).is_err());
        assert!(open(&key, "", 0).is_err());
        assert!(open(&key, "not base64!", 0).is_err());
    }
}
