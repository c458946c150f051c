//! Authentication (docs/PROTOCOL.md 2.2), isolated here so the rest of the API never sees a
//! signature: who is asking, as a [`Principal`].
//!
//! With a master key the client signs `verb, resource type, resource link, x-ms-date, date`
//! with HMAC-SHA256 over the base64-decoded account key. We recompute and compare in constant
//! time — against the read-write key, then the read-only one — and check that the date is
//! within 15 minutes of ours (replay protection, as the service does). A resource token
//! (`type=resource`) is verified by [`crate::api::security::tokens`]; what it may do is
//! [`crate::api::security::access`]'s question.

use crate::error::CosmosError;
use axum::http::{HeaderMap, Method};
use base64::Engine as _;
use std::time::{Duration, SystemTime};
use strata_query::protocol::header;
use strata_query::protocol::{string_to_sign, AuthScope};
pub use strata_query::protocol::{MasterKey, EMULATOR_KEY};

/// How far a request's date may be from the server clock.
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(15 * 60);

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// Who a request comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// Signed with the read-write master key: everything.
    Master,
    /// Signed with the read-only key: every read, no write.
    ReadOnly,
    /// A resource token: what its permission grants.
    Resource(crate::api::security::tokens::Claims),
    /// An Entra ID token: what its roles grant ([`crate::api::security::rbac`]).
    Aad(crate::api::security::aad::Identity),
}

/// The account's keys.
#[derive(Clone)]
pub struct Keys {
    pub read_write: MasterKey,
    pub read_only: Option<MasterKey>,
    /// Refuse keys and resource tokens (`--disable-local-auth`): Entra ID tokens only, as an
    /// account with `disableLocalAuth`.
    pub disable_local_auth: bool,
    /// An Entra ID tenant's signing keys (`--entra-jwks`): real tokens of that tenant verify.
    pub entra: Option<std::sync::Arc<crate::api::security::aad::Jwks>>,
}

/// Authenticates the request's `authorization` header.
pub fn verify(
    keys: &Keys,
    token_key: &strata_query::sql::token::TokenKey,
    method: &Method,
    scope: &AuthScope,
    headers: &HeaderMap,
) -> Result<Principal, CosmosError> {
    let raw = header(headers, header::AUTHORIZATION).ok_or_else(|| {
        CosmosError::unauthorized(
            "Required header 'authorization' is missing. Sign every request with the account key (type=master&ver=1.0&sig=...).",
        )
    })?;
    let decoded = percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .map_err(|_| {
            CosmosError::unauthorized("The authorization header is not valid URL-encoded UTF-8.")
        })?;
    let mut kind = None;
    let mut sig = None;
    for part in decoded.split('&') {
        match part.split_once('=') {
            Some(("type", v)) => kind = Some(v),
            Some(("sig", v)) => sig = Some(v),
            Some(("ver", _)) => {}
            _ => {
                return Err(CosmosError::unauthorized(
                    "The authorization header is malformed; expected type=master&ver=1.0&sig=<signature> or a resource token (type=resource&ver=1.0&sig=...).",
                ))
            }
        }
    }
    let sig =
        sig.ok_or_else(|| CosmosError::unauthorized("The authorization header has no 'sig'."))?;
    if keys.disable_local_auth && matches!(kind, Some("master" | "resource")) {
        return Err(CosmosError::unauthorized(
            "Local Authorization is disabled. Use an AAD token to authorize all requests.",
        ));
    }
    match kind {
        Some("master") => {}
        Some("aad") => {
            let now = crate::store::catalog::now_secs() as i64;
            let account = crate::api::security::aad::AccountKeys {
                read_write: &keys.read_write,
                read_only: keys.read_only.as_ref(),
                jwks: keys.entra.as_deref(),
                skew: crate::api::security::aad::TOKEN_CLOCK_SKEW,
            };
            return Ok(Principal::Aad(crate::api::security::aad::verify(&account, sig, now)?));
        }
        Some("resource") => {
            let now = crate::store::catalog::now_secs();
            return Ok(Principal::Resource(crate::api::security::tokens::open(token_key, sig, now)?));
        }
        Some(other) => {
            return Err(CosmosError::unauthorized(format!(
                "Authorization type '{other}' is not supported; use a master key (type=master), a resource token (type=resource) or an Entra ID token (type=aad)."
            )))
        }
        None => return Err(CosmosError::unauthorized("The authorization header has no 'type'.")),
    }
    let sig_bytes = base64::engine::general_purpose::STANDARD
        .decode(sig.trim())
        .map_err(|_| {
            CosmosError::unauthorized("The authorization signature is not valid base64.")
        })?;

    let x_ms_date = header(headers, header::DATE).unwrap_or("");
    let date = if x_ms_date.is_empty() {
        header(headers, "date").unwrap_or("")
    } else {
        ""
    };
    if x_ms_date.is_empty() && date.is_empty() {
        return Err(CosmosError::unauthorized(
            "Required header 'x-ms-date' is missing; every signed request must carry its date.",
        ));
    }
    let verb = method.as_str();
    let principal = if keys
        .read_write
        .verifies(verb, scope, x_ms_date, date, &sig_bytes)
    {
        Principal::Master
    } else if keys
        .read_only
        .as_ref()
        .is_some_and(|k| k.verifies(verb, scope, x_ms_date, date, &sig_bytes))
    {
        Principal::ReadOnly
    } else {
        return Err(CosmosError::unauthorized(format!(
            "The input authorization token can't serve the request. The wrong key is being used or the expected payload is not built as per the protocol. The server used the following payload to sign: '{}'",
            string_to_sign(verb, scope, if x_ms_date.is_empty() { "" } else { x_ms_date }, date).replace('\n', "\\n")
        )));
    };
    let when_text = if x_ms_date.is_empty() {
        date
    } else {
        x_ms_date
    };
    let when = httpdate::parse_http_date(when_text).map_err(|_| {
        CosmosError::unauthorized(format!(
            "The request date '{when_text}' is not a valid RFC 1123 date (e.g. 'Tue, 01 Oct 2024 12:00:00 GMT')."
        ))
    })?;
    let now = SystemTime::now();
    let skew = now.duration_since(when).unwrap_or_else(|e| e.duration());
    if skew > MAX_CLOCK_SKEW {
        return Err(CosmosError::forbidden(format!(
            "The authorization token is not valid at the current time: the request date '{when_text}' is {}s away from the server time '{}'; the allowed skew is 15 minutes. Check the client clock.",
            skew.as_secs(),
            httpdate::fmt_http_date(now)
        )));
    }
    Ok(principal)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(t: &str, l: &str) -> AuthScope {
        AuthScope::new(t, l)
    }

    #[test]
    fn verify_accepts_fresh_and_rejects_bad_or_stale() {
        let key = MasterKey::from_base64(EMULATOR_KEY).unwrap();
        let ro = MasterKey::from_base64("cmVhZC1vbmx5").unwrap();
        let keys = Keys {
            disable_local_auth: false,
            read_write: key.clone(),
            read_only: Some(ro.clone()),
            entra: None,
        };
        let tk = strata_query::sql::token::TokenKey::new([1; 32]);
        let verify = |_k: &MasterKey, m: &Method, s: &AuthScope, h: &HeaderMap| {
            super::verify(&keys, &tk, m, s, h)
        };
        let s = scope("docs", "dbs/db1/colls/c");
        let now = httpdate::fmt_http_date(SystemTime::now());
        let mut h = HeaderMap::new();
        h.insert(header::DATE, now.parse().unwrap());
        h.insert(
            header::AUTHORIZATION,
            key.authorization("GET", &s, &now).parse().unwrap(),
        );
        assert_eq!(
            verify(&key, &Method::GET, &s, &h).unwrap(),
            Principal::Master
        );
        let mut h2 = h.clone();
        h2.insert(
            header::AUTHORIZATION,
            ro.authorization("GET", &s, &now).parse().unwrap(),
        );
        assert_eq!(
            verify(&key, &Method::GET, &s, &h2).unwrap(),
            Principal::ReadOnly
        );
        let e = verify(&key, &Method::POST, &s, &h).unwrap_err();
        assert_eq!(e.status.as_u16(), 401);
        let other = MasterKey::from_base64("AAAA").unwrap();
        h.insert(
            header::AUTHORIZATION,
            other.authorization("GET", &s, &now).parse().unwrap(),
        );
        assert_eq!(
            verify(&key, &Method::GET, &s, &h)
                .unwrap_err()
                .status
                .as_u16(),
            401
        );
        let old = httpdate::fmt_http_date(SystemTime::now() - Duration::from_secs(3600));
        h.insert(header::DATE, old.parse().unwrap());
        h.insert(
            header::AUTHORIZATION,
            key.authorization("GET", &s, &old).parse().unwrap(),
        );
        assert_eq!(
            verify(&key, &Method::GET, &s, &h)
                .unwrap_err()
                .status
                .as_u16(),
            403
        );
        h.remove(header::AUTHORIZATION);
        assert_eq!(
            verify(&key, &Method::GET, &s, &h)
                .unwrap_err()
                .status
                .as_u16(),
            401
        );
        h.insert(
            header::AUTHORIZATION,
            "type%3Dmaster%26garbage".parse().unwrap(),
        );
        assert_eq!(
            verify(&key, &Method::GET, &s, &h)
                .unwrap_err()
                .status
                .as_u16(),
            401
        );
    }
}
