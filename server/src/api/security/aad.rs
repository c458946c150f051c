//! Entra ID (AAD) tokens, as the official emulator accepts them: `authorization:
//! type=aad&ver=1.0&sig=<JWT>`, where the JWT's claims say who asks and until when, and —
//! the emulator's convention, which the SDKs' emulator credentials follow — its signature
//! part is the account key itself (base64url). The checks: a well-formed JWT, the key, the
//! expiry and not-before times (with the clock skew allowed for signed requests), an audience
//! naming Cosmos DB or this emulator, and a principal (`oid`). What the principal may do is
//! [`crate::api::security::rbac`]'s question.
//!
//! Real Entra ID tokens verify too when strata is given the tenant's signing keys
//! (`--entra-jwks FILE --entra-tenant ID`, a [`Jwks`]): an RS256 token whose `kid` is in the
//! set must carry a valid signature by that key, the tenant's id (`tid`) and its issuer.
//! Entra signs every tenant's tokens with the same keys, hence the tenant check.

use crate::error::CosmosError;
use base64::Engine as _;
use serde_json::Value;
use std::collections::HashMap;
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

/// Whether an audience names Cosmos DB or this emulator, exactly. The service accepts tokens
/// for `https://cosmos.azure.com` and for its account's own hosts (`<account>.documents.
/// azure.com`, `.sql.cosmos.azure.com`, `.sqlx.cosmos.azure.com`: the list its 401 with
/// sub-status 5008 names); the emulators' credentials ask for `https://localhost.localhost`
/// (the official SDKs' emulator tokens) or for the endpoint they were given
/// (`https://127.0.0.1/.default`, `https://localhost:8081/.default`). A host is compared whole,
/// never by prefix: `https://localhost.evil.com` names another service.
fn audience_ok(aud: &str) -> bool {
    let Some((host, https)) = audience_host(aud) else {
        return false;
    };
    let account_host = |suffix: &str| {
        host.strip_suffix(suffix).is_some_and(|label| {
            !label.is_empty() && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
    };
    match host.as_str() {
        "cosmos.azure.com" => https,
        h if is_emulator_host(h) => true,
        _ => {
            https
                && [
                    ".documents.azure.com",
                    ".sql.cosmos.azure.com",
                    ".sqlx.cosmos.azure.com",
                ]
                .iter()
                .any(|s| account_host(s))
        }
    }
}

/// The host (lower case, without its port) an audience URL names, and whether it is https;
/// `None` for anything but a bare `scheme://host[:port][/]`.
fn audience_host(aud: &str) -> Option<(String, bool)> {
    let rest = aud
        .strip_prefix("https://")
        .or_else(|| aud.strip_prefix("http://"))?;
    let https = aud.starts_with("https://");
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.contains(['/', '?', '#', '@']) {
        return None;
    }
    let host = match rest.rsplit_once(':') {
        Some((h, port)) if !port.is_empty() && port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => rest,
    };
    Some((host.to_ascii_lowercase(), https))
}

/// The hosts the emulators' credentials name as audiences.
fn is_emulator_host(host: &str) -> bool {
    matches!(
        host,
        "localhost" | "localhost.localhost" | "127.0.0.1" | "[::1]"
    )
}

/// Whether an audience names the service's inference endpoint (the semantic reranker's):
/// `https://dbinference.azure.com`, the resource of the scope the SDKs ask tokens for
/// (`https://dbinference.azure.com/.default`), or the emulators' own audiences.
fn inference_audience_ok(aud: &str) -> bool {
    match audience_host(aud) {
        Some((host, https)) => {
            (https && host == "dbinference.azure.com") || is_emulator_host(&host)
        }
        None => false,
    }
}

/// Seconds a token's `exp` and `nbf` may be off: Microsoft.IdentityModel's
/// `TokenValidationParameters.DefaultClockSkew` (300 seconds), with which Microsoft's services
/// validate Entra ID tokens. Not the 15 minutes a key-signed request's `x-ms-date` may be off
/// (the service's "maximum clock skew for token authorization"): a token's own times are
/// issued by Entra ID, not by the client's clock, and an expired token must stop working.
pub const TOKEN_CLOCK_SKEW: i64 = 300;

/// The account's keys, as a token's signature is checked against them.
pub struct AccountKeys<'a> {
    pub read_write: &'a MasterKey,
    pub read_only: Option<&'a MasterKey>,
    /// An Entra ID tenant's signing keys, when real tokens are accepted.
    pub jwks: Option<&'a Jwks>,
    /// Seconds a token's times may be off.
    pub skew: i64,
}

/// An Entra ID tenant's token-signing keys: the RSA keys of a JWKS document (as
/// `https://login.microsoftonline.com/<tenant>/discovery/v2.0/keys` serves it) by `kid`, and
/// the tenant whose tokens they may sign here.
#[derive(Debug, Clone)]
pub struct Jwks {
    keys: HashMap<String, RsaKey>,
    tenant: String,
}

/// An RSA public key: modulus and exponent, big-endian.
#[derive(Debug, Clone)]
struct RsaKey {
    n: Vec<u8>,
    e: Vec<u8>,
}

impl Jwks {
    /// Reads a JWKS file; its RSA signing keys serve tokens of `tenant`. Other keys (EC, or
    /// marked for encryption) are skipped; a file with no RSA key is an error.
    pub fn load(path: &std::path::Path, tenant: &str) -> Result<Jwks, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the JWKS file {}: {e}", path.display()))?;
        Jwks::parse(&text, tenant).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// A JWKS document's RSA signing keys, for tokens of `tenant`.
    pub fn parse(text: &str, tenant: &str) -> Result<Jwks, String> {
        let doc: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let list = doc
            .get("keys")
            .and_then(Value::as_array)
            .ok_or("not a JWKS document (no 'keys' array)")?;
        let b64 = |v: Option<&Value>| {
            v.and_then(Value::as_str).and_then(|s| {
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(s.trim_end_matches('='))
                    .ok()
            })
        };
        let mut keys = HashMap::new();
        for k in list {
            let field = |name: &str| k.get(name).and_then(Value::as_str);
            if field("kty") != Some("RSA") || field("use").is_some_and(|u| u != "sig") {
                continue;
            }
            let (Some(kid), Some(n), Some(e)) = (field("kid"), b64(k.get("n")), b64(k.get("e")))
            else {
                return Err("an RSA key lacks 'kid', 'n' or 'e' (base64url)".into());
            };
            keys.insert(kid.to_string(), RsaKey { n, e });
        }
        if keys.is_empty() {
            return Err("it holds no RSA signing key".into());
        }
        if tenant.trim().is_empty() {
            return Err("a tenant id must go with the keys (--entra-tenant)".into());
        }
        Ok(Jwks {
            keys,
            tenant: tenant.trim().to_string(),
        })
    }

    /// Checks an RS256 signature of `signed` by key `kid`; `None` when the set has no such key.
    fn verify(&self, kid: &str, signed: &[u8], sig: &[u8]) -> Option<bool> {
        let key = self.keys.get(kid)?;
        let public = ring::signature::RsaPublicKeyComponents {
            n: &key.n,
            e: &key.e,
        };
        Some(
            public
                .verify(&ring::signature::RSA_PKCS1_2048_8192_SHA256, signed, sig)
                .is_ok(),
        )
    }

    /// Whether the claims name this tenant: its id (`tid`) and an issuer of it, in the v1
    /// (`https://sts.windows.net/<tid>/`) or v2 (`https://login.microsoftonline.com/<tid>/v2.0`)
    /// form.
    fn tenant_ok(&self, claims: &Value) -> Result<(), CosmosError> {
        let tid = claims
            .get("tid")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !tid.eq_ignore_ascii_case(&self.tenant) {
            return Err(unauthorized(&format!(
                "it was issued for tenant '{tid}', not this account's tenant '{}'",
                self.tenant
            )));
        }
        let iss = claims
            .get("iss")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let v1 = format!("https://sts.windows.net/{}/", self.tenant);
        let v2 = format!("https://login.microsoftonline.com/{}/v2.0", self.tenant);
        if !(iss.eq_ignore_ascii_case(&v1) || iss.eq_ignore_ascii_case(&v2)) {
            return Err(unauthorized(&format!(
                "its issuer '{iss}' is not the tenant's ({v1} or {v2})"
            )));
        }
        Ok(())
    }
}

/// The service a token is presented to, whose audience it must name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// The Cosmos DB data plane (`type=aad` authorizations).
    Cosmos,
    /// The inference endpoint (`Authorization: Bearer`; see [`crate::api::inference`]).
    Inference,
}

/// Verifies the JWT of an `type=aad` authorization at time `now` (seconds).
pub fn verify(keys: &AccountKeys<'_>, jwt: &str, now: i64) -> Result<Identity, CosmosError> {
    verify_for(keys, jwt, now, Audience::Cosmos)
}

/// Verifies a JWT presented to `audience`'s service at time `now` (seconds).
pub fn verify_for(
    keys: &AccountKeys<'_>,
    jwt: &str,
    now: i64,
    audience: Audience,
) -> Result<Identity, CosmosError> {
    let parts: Vec<&str> = jwt.trim().split('.').collect();
    let [head, claims, sig] = parts[..] else {
        return Err(unauthorized("it is not a JWT (three base64url parts)"));
    };
    let signed = &jwt.trim()[..head.len() + 1 + claims.len()];
    let head: Value = serde_json::from_slice(&part(head, "header")?)
        .map_err(|_| unauthorized("its header is not JSON"))?;
    let Some(alg) = head.get("alg").and_then(Value::as_str) else {
        return Err(unauthorized("its header names no 'alg'"));
    };
    let claims: Value = serde_json::from_slice(&part(claims, "claims")?)
        .map_err(|_| unauthorized("its claims are not JSON"))?;
    let sig = part(sig, "signature")?;
    let kid = head.get("kid").and_then(Value::as_str).unwrap_or_default();
    let by_tenant = keys
        .jwks
        .and_then(|j| j.verify(kid, signed.as_bytes(), &sig).map(|ok| (j, ok)));
    let read_only = match by_tenant {
        Some((_, _)) if alg != "RS256" => {
            return Err(unauthorized(&format!(
                "its algorithm '{alg}' is not RS256, which Entra ID signs with"
            )))
        }
        Some((jwks, true)) => {
            jwks.tenant_ok(&claims)?;
            false
        }
        Some((_, false)) => {
            return Err(unauthorized(&format!(
                "its signature does not verify with the tenant's key '{kid}'"
            )))
        }
        None => {
            let key = String::from_utf8(sig).unwrap_or_default();
            if keys.read_write.is_key(&key) {
                false
            } else if keys.read_only.is_some_and(|k| k.is_key(&key)) {
                true
            } else if keys.jwks.is_some() {
                return Err(unauthorized(&format!(
                    "its key '{kid}' is not among the tenant's signing keys (--entra-jwks), and its signature is not this account's key"
                )));
            } else {
                return Err(unauthorized(
                    "its signature is not this account's key (the emulator's tokens are signed with it)",
                ));
            }
        }
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
    match audience {
        Audience::Cosmos if !audience_ok(aud) => {
            return Err(unauthorized(&format!(
                "its audience '{aud}' is not Cosmos DB (https://cosmos.azure.com) nor this emulator"
            )))
        }
        Audience::Inference if !inference_audience_ok(aud) => {
            return Err(unauthorized(&format!(
                "its audience '{aud}' is not the inference service (https://dbinference.azure.com) nor this emulator"
            )))
        }
        _ => {}
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

/// The expiry (`exp`, seconds since the epoch) a JWT's claims name; read without any check,
/// for a token [`verify`] accepted.
pub fn expiry(jwt: &str) -> Option<i64> {
    let claims = part(jwt.trim().split('.').nth(1)?, "claims").ok()?;
    serde_json::from_slice::<Value>(&claims)
        .ok()?
        .get("exp")?
        .as_i64()
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

/// A token with `claims` signed RS256 by the RSA key `pkcs8` (PKCS#8, DER) under `kid`, as
/// Entra ID signs them (tests, examples: real tokens come from Entra ID).
pub fn entra_token(pkcs8: &[u8], kid: &str, claims: &Value) -> Result<String, String> {
    let b64 = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
    let pair = ring::signature::RsaKeyPair::from_pkcs8(pkcs8).map_err(|e| e.to_string())?;
    let head = serde_json::json!({"typ": "JWT", "alg": "RS256", "kid": kid});
    let signed = format!(
        "{}.{}",
        b64(head.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    let mut sig = vec![0; pair.public().modulus_len()];
    pair.sign(
        &ring::signature::RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        signed.as_bytes(),
        &mut sig,
    )
    .map_err(|e| e.to_string())?;
    Ok(format!("{signed}.{}", b64(&sig)))
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
            jwks: None,
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

    #[test]
    fn audiences_are_matched_whole_and_expiry_allows_five_minutes() {
        for ok in [
            "https://cosmos.azure.com",
            "https://cosmos.azure.com/",
            "https://myacct.documents.azure.com",
            "https://myacct.documents.azure.com:443/",
            "https://myacct.sql.cosmos.azure.com",
            "https://localhost.localhost",
            "https://localhost:8081/",
            "https://127.0.0.1",
            "http://localhost:8081",
            "https://[::1]:8081",
        ] {
            assert!(audience_ok(ok), "{ok}");
        }
        assert!(inference_audience_ok("https://dbinference.azure.com/"));
        assert!(inference_audience_ok("https://localhost.localhost"));
        for bad in [
            "https://cosmos.azure.com",
            "https://myacct.documents.azure.com",
            "http://dbinference.azure.com",
            "https://dbinference.azure.com.evil.com",
        ] {
            assert!(!inference_audience_ok(bad), "{bad}");
        }
        for bad in [
            "https://localhost.evil.com",
            "https://127.0.0.1.evil.com",
            "https://localhost:8081.evil.com",
            "https://localhost@evil.com",
            "https://evil.com/https://cosmos.azure.com",
            "https://cosmos.azure.com.evil.com",
            "https://a.b.documents.azure.com",
            "https://documents.azure.com",
            "http://cosmos.azure.com",
            "https://storage.azure.com",
            "",
        ] {
            assert!(!audience_ok(bad), "{bad}");
        }
        let now = 1_800_000_000;
        let token = |aud: &str, exp: i64| {
            let b64 = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
            let head = serde_json::json!({"typ": "JWT", "alg": "RS256", "kid": "k"});
            let claims = serde_json::json!({"aud": aud, "oid": "al", "exp": exp});
            format!(
                "{}.{}.{}",
                b64(head.to_string().as_bytes()),
                b64(claims.to_string().as_bytes()),
                b64(EMULATOR_KEY.as_bytes())
            )
        };
        let keys = AccountKeys {
            skew: TOKEN_CLOCK_SKEW,
            ..keys()
        };
        let e = verify(&keys, &token("https://localhost.evil.com", now + 60), now).unwrap_err();
        assert!(e.message.contains("audience"), "{}", e.message);
        assert!(verify(&keys, &token("https://localhost.localhost", now - 299), now).is_ok());
        let e = verify(&keys, &token("https://localhost.localhost", now - 301), now).unwrap_err();
        assert!(e.message.contains("expired"), "{}", e.message);
    }

    const TENANT: &str = "72f988bf-86f1-41af-91ab-2d7cd011db47";

    fn tenant_keys() -> Jwks {
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/entra/jwks.json");
        Jwks::load(std::path::Path::new(file), TENANT).unwrap()
    }

    fn signed(claims: Value, kid: &str) -> String {
        let key = include_bytes!("../../../../tests/data/entra/test-signing-key.pk8");
        entra_token(key, kid, &claims).unwrap()
    }

    #[test]
    fn real_entra_tokens_verify_by_the_tenants_keys_and_tenant() {
        let now = 1_800_000_000;
        let jwks = tenant_keys();
        let keys = AccountKeys {
            jwks: Some(&jwks),
            ..keys()
        };
        let claims = |tid: &str, iss: String| {
            serde_json::json!({"aud": "https://cosmos.azure.com", "iss": iss, "tid": tid,
                "oid": "bob", "exp": now + 3600, "nbf": now - 60})
        };
        let v1 = format!("https://sts.windows.net/{TENANT}/");
        let v2 = format!("https://login.microsoftonline.com/{TENANT}/v2.0");
        for iss in [v1.clone(), v2] {
            let t = signed(claims(TENANT, iss), "strata-test-key-1");
            let id = verify(&keys, &t, now).unwrap();
            assert_eq!((id.oid.as_str(), id.read_only), ("bob", false));
        }
        let other = "00000000-0000-0000-0000-000000000001";
        let e = verify(
            &keys,
            &signed(claims(other, v1.clone()), "strata-test-key-1"),
            now,
        );
        assert!(e.unwrap_err().message.contains("tenant"));
        let e = verify(
            &keys,
            &signed(claims(TENANT, "https://evil/".into()), "strata-test-key-1"),
            now,
        );
        assert!(e.unwrap_err().message.contains("issuer"));
        // A claim changed after signing.
        let t = signed(claims(TENANT, v1.clone()), "strata-test-key-1");
        let mut parts: Vec<String> = t.split('.').map(str::to_string).collect();
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let forged = claims(TENANT, v1.clone()).to_string().replace("bob", "eve");
        parts[1] = b64.encode(forged);
        let e = verify(&keys, &parts.join("."), now).unwrap_err();
        assert!(e.message.contains("does not verify"), "{}", e.message);
        // A key the tenant does not have, and a token signed with it.
        let e = verify(&keys, &signed(claims(TENANT, v1), "some-other-kid"), now).unwrap_err();
        assert!(
            e.message.contains("not among the tenant's signing keys"),
            "{}",
            e.message
        );
        // The emulator's tokens still verify beside real ones.
        assert!(verify(&keys, &emulator_token(EMULATOR_KEY, "al", now + 60), now).is_ok());
    }

    #[test]
    fn a_jwks_without_rsa_signing_keys_or_tenant_is_refused() {
        assert!(Jwks::parse(r#"{"keys": []}"#, TENANT).is_err());
        assert!(Jwks::parse(r#"{"keys": [{"kty": "EC", "kid": "x"}]}"#, TENANT).is_err());
        assert!(Jwks::parse("[]", TENANT).is_err());
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/entra/jwks.json"
        ))
        .unwrap();
        assert!(Jwks::parse(&text, " ").is_err());
        assert_eq!(Jwks::parse(&text, TENANT).unwrap().keys.len(), 1);
    }
}
