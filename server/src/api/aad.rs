//! Entra ID (AAD) tokens, as the official emulator accepts them: `authorization:
//! type=aad&ver=1.0&sig=<JWT>`, where the JWT's claims say who asks and until when, and —
//! the emulator's convention, which the SDKs' emulator credentials follow — its signature
//! part is the account key itself (base64url). The checks: a well-formed JWT, the key, the
//! expiry and not-before times (with the clock skew allowed for signed requests), an audience
//! naming Cosmos DB or this emulator, and a principal (`oid`). What the principal may do is
//! [`super::rbac`]'s question.

use crate::error::CosmosError;
use base64::Engine as _;
use serde_json::Value;
use strata_query::protocol::MasterKey;

/// An authenticated Entra ID principal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The principal's object id (`oid`).
    pub oid: String,
    /// Its groups (`groups`): role assignments to a group apply to its members.
    pub groups: Vec<String>,
    /// The token was signed with the read-only key: reads only, whatever the roles say.
    pub read_only: bool,
}

fn unauthorized(why: &str) -> CosmosError {
    CosmosError::unauthorized(format!(
        "The AAD token in the authorization header is not valid: {why}."
    ))
}

fn part(jwt_part: &str, what: &str) -> Result<Vec<u8>, CosmosError> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(jwt_part.trim_end_matches('='))
        .map_err(|_| unauthorized(&format!("its {what} is not base64url")))
}

/// Whether an audience names Cosmos DB or this emulator (any https host of it: the SDKs ask
/// for `https://<account host>/.default` first).
fn audience_ok(aud: &str) -> bool {
    let aud = aud.trim_end_matches('/');
    aud == "https://cosmos.azure.com"
        || aud.ends_with(".documents.azure.com")
        || aud.starts_with("https://localhost")
        || aud.starts_with("https://127.0.0.1")
        || aud.starts_with("http://localhost")
        || aud.starts_with("http://127.0.0.1")
}

/// The account's keys, as a token's signature is checked against them.
pub struct AccountKeys<'a> {
    pub read_write: &'a MasterKey,
    pub read_only: Option<&'a MasterKey>,
    /// Seconds a token's times may be off.
    pub skew: i64,
}

/// Verifies the JWT of an `type=aad` authorization at time `now` (seconds).
pub fn verify(keys: &AccountKeys<'_>, jwt: &str, now: i64) -> Result<Identity, CosmosError> {
    let parts: Vec<&str> = jwt.trim().split('.').collect();
    let [head, claims, sig] = parts[..] else {
        return Err(unauthorized("it is not a JWT (three base64url parts)"));
    };
    let head: Value = serde_json::from_slice(&part(head, "header")?)
        .map_err(|_| unauthorized("its header is not JSON"))?;
    if head.get("alg").and_then(Value::as_str).is_none() {
        return Err(unauthorized("its header names no 'alg'"));
    }
    let claims: Value = serde_json::from_slice(&part(claims, "claims")?)
        .map_err(|_| unauthorized("its claims are not JSON"))?;
    let key = String::from_utf8(part(sig, "signature")?).unwrap_or_default();
    let read_only = if keys.read_write.is_key(&key) {
        false
    } else if keys.read_only.is_some_and(|k| k.is_key(&key)) {
        true
    } else {
        return Err(unauthorized(
            "its signature is not this account's key (the emulator's tokens are signed with it)",
        ));
    };
    let skew = keys.skew;
    let time = |name: &str| claims.get(name).and_then(Value::as_i64);
    let exp = time("exp").ok_or_else(|| unauthorized("it has no expiry ('exp')"))?;
    if exp + skew < now {
        return Err(unauthorized(&format!(
            "it expired at {exp} (now {now}); get a fresh token"
        )));
    }
    if time("nbf").is_some_and(|nbf| nbf - skew > now) {
        return Err(unauthorized("it is not valid yet ('nbf')"));
    }
    let aud = claims
        .get("aud")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !audience_ok(aud) {
        return Err(unauthorized(&format!(
            "its audience '{aud}' is not Cosmos DB (https://cosmos.azure.com) nor this emulator"
        )));
    }
    let oid = claims
        .get("oid")
        .and_then(Value::as_str)
        .filter(|o| !o.is_empty())
        .ok_or_else(|| unauthorized("it names no principal ('oid')"))?;
    let groups = claims
        .get("groups")
        .and_then(Value::as_array)
        .map(|g| {
            g.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    Ok(Identity {
        oid: oid.to_string(),
        groups,
        read_only,
    })
}

/// An emulator token for principal `oid` signed with `key` (tests, examples).
pub fn emulator_token(key: &str, oid: &str, exp: i64) -> String {
    let b64 = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
    let head =
        serde_json::json!({"typ": "JWT", "alg": "RS256", "kid": "CosmosEmulatorPrimaryMaster"});
    let claims = serde_json::json!({"aud": "https://localhost.localhost", "oid": oid, "exp": exp, "nbf": exp - 7200, "iat": exp - 7200});
    format!(
        "{}.{}.{}",
        b64(head.to_string().as_bytes()),
        b64(claims.to_string().as_bytes()),
        b64(key.as_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_query::protocol::EMULATOR_KEY;

    fn keys() -> AccountKeys<'static> {
        static KEY: std::sync::OnceLock<MasterKey> = std::sync::OnceLock::new();
        AccountKeys {
            read_write: KEY.get_or_init(|| MasterKey::from_base64(EMULATOR_KEY).unwrap()),
            read_only: None,
            skew: 900,
        }
    }

    #[test]
    fn the_emulators_tokens_verify_and_bad_ones_do_not() {
        let now = 1_800_000_000;
        let ok = verify(
            &keys(),
            &emulator_token(EMULATOR_KEY, "alice", now + 3600),
            now,
        )
        .unwrap();
        assert_eq!((ok.oid.as_str(), ok.read_only), ("alice", false));
        let other = "c2VjcmV0IGtleSBvZiBhbm90aGVyIGFjY291bnQ=";
        let e = verify(&keys(), &emulator_token(other, "alice", now + 3600), now).unwrap_err();
        assert!(e.message.contains("signature"), "{}", e.message);
        let e = verify(
            &keys(),
            &emulator_token(EMULATOR_KEY, "alice", now - 3600),
            now,
        )
        .unwrap_err();
        assert!(e.message.contains("expired"), "{}", e.message);
        assert!(verify(&keys(), "a.b", now).is_err());
        assert!(verify(&keys(), &emulator_token(EMULATOR_KEY, "", now + 60), now).is_err());
    }
}
