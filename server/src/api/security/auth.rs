//! Authentication (docs/PROTOCOL.md 2.2), isolated here so the rest of the API never sees a
//! signature: who is asking, as a [`Principal`].
//!
//! With a master key the client signs `verb, resource type, resource link, x-ms-date, date`
//! with HMAC-SHA256 over the base64-decoded account key. We recompute and compare in constant
//! time — against the read-write key, then the read-only one — and check that the date is
//! within 15 minutes of ours (replay protection, as the service does). A resource token
//! (`type=resource`) is verified by [`crate::api::security::tokens`]; what it may do is
//! [`crate::api::security::access`]'s question.

use super::verified::{SignedParts, Verified};
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
    (keys, verified): (&Keys, &Verified),
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
    let x_ms_date = header(headers, header::DATE).unwrap_or("");
    let date = if x_ms_date.is_empty() {
        header(headers, "date").unwrap_or("")
    } else {
        ""
    };
    let verb = method.as_str();
    // The very same request verified lately (never under --disable-local-auth, which refuses
    // every master key below): only its date is checked again.
    let parts = (!keys.disable_local_auth)
        .then(|| SignedParts::of(verb, scope, x_ms_date, date, raw))
        .flatten();
    if let Some((read_only, when)) = parts.as_ref().and_then(|p| verified.get(p)) {
        if skew_of(when) <= MAX_CLOCK_SKEW {
            return Ok(if read_only {
                Principal::ReadOnly
            } else {
                Principal::Master
            });
        }
    }
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
    let (principal, when) = verify_master(keys, (verb, scope), (x_ms_date, date), sig)?;
    if let Some(p) = &parts {
        verified.keep(p, principal == Principal::ReadOnly, when);
    }
    Ok(principal)
}

/// Checks a master-key signature `sig` (base64) of `verb` on `scope` at the request's dates
/// against the read-write key, then the read-only one: who signed, and the date it signed.
fn verify_master(
    keys: &Keys,
    (verb, scope): (&str, &AuthScope),
    (x_ms_date, date): (&str, &str),
    sig: &str,
) -> Result<(Principal, SystemTime), CosmosError> {
    let sig_bytes = base64::engine::general_purpose::STANDARD
        .decode(sig.trim())
        .map_err(|_| {
            CosmosError::unauthorized("The authorization signature is not valid base64.")
        })?;

    if x_ms_date.is_empty() && date.is_empty() {
        return Err(CosmosError::unauthorized(
            "Required header 'x-ms-date' is missing; every signed request must carry its date.",
        ));
    }
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
    let skew = skew_of(when);
    if skew > MAX_CLOCK_SKEW {
        return Err(CosmosError::forbidden(format!(
            "The authorization token is not valid at the current time: the request date '{when_text}' is {}s away from the server time '{}'; the allowed skew is 15 minutes. Check the client clock.",
            skew.as_secs(),
            httpdate::fmt_http_date(SystemTime::now())
        )));
    }
    Ok((principal, when))
}

/// How far `when` is from the server clock, either way.
fn skew_of(when: SystemTime) -> Duration {
    SystemTime::now()
        .duration_since(when)
        .unwrap_or_else(|e| e.duration())
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
        // One cache for every call: each answer below is the same whether it is a first
        // verification or a repeat of a kept one.
        let verified = Verified::default();
        let verify = |_k: &MasterKey, m: &Method, s: &AuthScope, h: &HeaderMap| {
            let first = super::verify((&keys, &verified), &tk, m, s, h);
            let again = super::verify((&keys, &verified), &tk, m, s, h);
            assert_eq!(
                first.as_ref().map_err(|e| e.status),
                again.as_ref().map_err(|e| e.status)
            );
            first
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

    #[test]
    fn a_kept_verification_is_refused_once_its_date_is_stale() {
        let key = MasterKey::from_base64(EMULATOR_KEY).unwrap();
        let keys = Keys {
            disable_local_auth: false,
            read_write: key.clone(),
            read_only: None,
            entra: None,
        };
        let tk = strata_query::sql::token::TokenKey::new([1; 32]);
        let verified = Verified::default();
        let s = scope("docs", "dbs/db1/colls/c/docs/a");
        let now = httpdate::fmt_http_date(SystemTime::now());
        let auth = key.authorization("GET", &s, &now);
        let mut h = HeaderMap::new();
        h.insert(header::DATE, now.parse().unwrap());
        h.insert(header::AUTHORIZATION, auth.parse().unwrap());
        let verify = |h: &HeaderMap| super::verify((&keys, &verified), &tk, &Method::GET, &s, h);
        assert_eq!(verify(&h).unwrap(), Principal::Master);
        // A request verified when its date was fresh, sent again an hour later: its date is
        // checked on a hit too.
        let hour_ago = SystemTime::now() - Duration::from_secs(3600);
        let then = httpdate::fmt_http_date(hour_ago);
        let old_auth = key.authorization("GET", &s, &then);
        let mut old = HeaderMap::new();
        old.insert(header::DATE, then.parse().unwrap());
        old.insert(header::AUTHORIZATION, old_auth.parse().unwrap());
        let kept = SignedParts::of("GET", &s, &then, "", &old_auth).unwrap();
        verified.keep(&kept, false, hour_ago);
        assert_eq!(verify(&old).unwrap_err().status.as_u16(), 403);
        // Under --disable-local-auth nothing kept is used.
        let parts = SignedParts::of("GET", &s, &now, "", &auth).unwrap();
        verified.keep(&parts, false, SystemTime::now());
        let off = Keys {
            disable_local_auth: true,
            ..keys.clone()
        };
        let e = super::verify((&off, &verified), &tk, &Method::GET, &s, &h).unwrap_err();
        assert_eq!(e.status.as_u16(), 401);
    }
}
