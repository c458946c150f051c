//! The built-in Data Explorer and the official emulators' unauthenticated conventions, served
//! on the main port beside the REST API:
//!
//! * `/_explorer/index.html` (and `/`, `/_explorer/`, `/explorer` for a browser): the
//!   explorer, plain HTML, CSS and JavaScript embedded in the binary (no network, no build).
//! * `/_explorer/emulator.pem`: the TLS certificate, which CI scripts fetch to trust the
//!   emulator and poll to wait for it.
//! * `/_strata/ready`, and an unsigned `GET /`: readiness without a key (the listener only
//!   opens once the store is open, so an answer means ready).
//!
//! The page calls the ordinary REST API with an `x-strata-explorer-token` header instead of a
//! signature: a secret made at start and handed to the page. When the server listens on a
//! loopback address the page gets it with the HTML, like the official emulator's open
//! explorer; otherwise the page asks for the account key and exchanges it for the secret
//! (`POST /_explorer/session`). Another web page open in the same browser can read neither
//! (the same-origin policy), and requests carrying the secret are refused when they come from
//! another origin (`Origin`, `Sec-Fetch-Site`) or name a host other than this server's, so a
//! DNS-rebinding page cannot borrow it either.
//!
//! An account that refuses its keys (`--disable-local-auth`) has no such secret: the page
//! signs in with an Entra ID token and acts as that principal, under its roles
//! ([`entra`]).

mod entra;

use crate::api::response::Reply;
use crate::api::security::auth::{Keys, Principal};
use crate::error::CosmosError;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use serde_json::json;
use strata_query::protocol::header;

/// The header the explorer's requests carry.
pub const TOKEN_HEADER: &str = header::EXPLORER_TOKEN;

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const ADVISE_JS: &str = include_str!("assets/advise.js");
const REGIONS_JS: &str = include_str!("assets/regions.js");
const ACCESS_JS: &str = include_str!("assets/access.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// What the explorer needs to know about this server.
#[derive(Clone)]
pub struct Explorer {
    secret: String,
    /// Whether the page is handed the secret (the server listens on loopback only).
    open: bool,
    /// The account's keys: the key is exchanged for the secret when not open (unless local
    /// authorization is disabled); tokens are verified against them.
    keys: Keys,
    /// Sessions signed in with an Entra ID token.
    sessions: std::sync::Arc<entra::Sessions>,
    /// The TLS certificate clients should trust (HTTPS with a generated certificate).
    cert_pem: Option<Vec<u8>>,
    /// Host names (without port) the page may be reached by when open.
    hosts: Vec<String>,
    enabled: bool,
}

/// How the explorer is set up at start.
#[derive(Debug, Clone, Default)]
pub struct ExplorerConfig {
    /// Serve the explorer (the conventions' endpoints are always served).
    pub enabled: bool,
    /// The listen address is loopback: hand the page its secret without a key.
    pub open: bool,
    /// Extra names the server is reached by (`--host`, the IP address override).
    pub hosts: Vec<String>,
    pub cert_pem: Option<Vec<u8>>,
}

pub(super) fn random_secret() -> String {
    let mut b = [0u8; 24];
    // Without randomness the explorer is refused rather than guessable.
    if getrandom::fill(&mut b).is_err() {
        return String::new();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Equal without leaking where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// The authority a request names: its `Host` header (HTTP/1) or its URI's (HTTP/2).
fn authority<'a>(h: &'a HeaderMap, uri: &'a Uri) -> &'a str {
    header(h, "host")
        .or_else(|| uri.authority().map(|a| a.as_str()))
        .unwrap_or_default()
}

/// The host name of a `Host` header or an origin's authority (no port, no brackets).
fn host_name(authority: &str) -> String {
    let a = authority.trim().to_ascii_lowercase();
    if let Some(rest) = a.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default().to_string();
    }
    a.rsplit_once(':')
        .filter(|(_, p)| p.chars().all(|c| c.is_ascii_digit()))
        .map(|(h, _)| h.to_string())
        .unwrap_or(a)
}

impl Explorer {
    pub fn new(cfg: ExplorerConfig, keys: &Keys) -> Self {
        let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        hosts.extend(cfg.hosts.iter().map(|h| host_name(h)));
        Self {
            // Without local authorization there is no key, so nothing may stand for one.
            secret: if keys.disable_local_auth {
                String::new()
            } else {
                random_secret()
            },
            open: cfg.open && !keys.disable_local_auth,
            keys: keys.clone(),
            sessions: Default::default(),
            cert_pem: cfg.cert_pem,
            hosts,
            enabled: cfg.enabled,
        }
    }

    /// Whether a request is same-origin and addressed to this server by one of its names.
    fn same_origin(&self, headers: &HeaderMap, uri: &Uri) -> Result<(), CosmosError> {
        let refuse = |why: &str| {
            CosmosError::forbidden(format!(
                "The Data Explorer's API refuses this request: {why}. Open the explorer from this server's own address."
            ))
        };
        let host = authority(headers, uri);
        if self.open && !self.hosts.contains(&host_name(host)) {
            return Err(refuse("it names another host"));
        }
        if let Some(site) = header(headers, "sec-fetch-site") {
            if site != "same-origin" && site != "none" {
                return Err(refuse("it comes from another site"));
            }
        }
        if let Some(origin) = header(headers, "origin") {
            let authority = origin.split("://").nth(1).unwrap_or_default();
            if !authority.eq_ignore_ascii_case(host) {
                return Err(refuse("it comes from another origin"));
            }
        }
        Ok(())
    }

    /// The principal of a request carrying the explorer's secret (`None` without the header:
    /// the request is authenticated as usual). The explorer acts with the account key.
    pub fn principal(
        &self,
        headers: &HeaderMap,
        uri: &Uri,
    ) -> Option<Result<Principal, CosmosError>> {
        let token = header(headers, TOKEN_HEADER)?;
        Some((|| {
            if !self.enabled {
                return Err(CosmosError::unauthorized("The Data Explorer is off."));
            }
            if let Some(signed_in) = self.sessions.get(token, now_secs()) {
                self.same_origin(headers, uri)?;
                return Ok(Principal::Aad(signed_in?));
            }
            if self.secret.is_empty() || !same(token.as_bytes(), self.secret.as_bytes()) {
                return Err(CosmosError::unauthorized(
                    "The Data Explorer's session is not valid (the server restarted?): reload the page.",
                ));
            }
            self.same_origin(headers, uri)?;
            Ok(Principal::Master)
        })())
    }

    /// Answers the requests that need no key: the explorer's files, the certificate, the
    /// readiness probe. `None` for every other request.
    pub fn serve(
        &self,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Option<Result<Reply, CosmosError>> {
        let path = uri.path();
        let get = method == Method::GET || method == Method::HEAD;
        let signed = headers.contains_key(header::AUTHORIZATION);
        let page = |r: Reply| {
            r.header("cache-control", "no-store")
                .header("x-content-type-options", "nosniff")
                .header("x-frame-options", "DENY")
        };
        let ready = || {
            Reply::json(
                StatusCode::OK,
                &json!({"status": "ready", "version": env!("CARGO_PKG_VERSION")}),
            )
        };
        Some(Ok(match (path, get) {
            ("/_strata/ready", true) => ready(),
            ("/_explorer/emulator.pem", true) => match &self.cert_pem {
                Some(pem) => Reply::new(StatusCode::OK, pem.clone())
                    .header(header::CONTENT_TYPE, "application/x-pem-file"),
                None => {
                    return Some(Err(CosmosError::not_found(
                        "This server speaks plain HTTP and has no certificate; start it with --tls (or PROTOCOL=https) for one.",
                    )))
                }
            },
            // A browser (asking for HTML) without a signature lands in the explorer.
            ("/", true) if !signed && self.enabled && wants_html(headers) => redirect(),
            // Anything else unsigned at the root is a readiness probe — Testcontainers for
            // .NET waits for an unauthenticated `GET /` to succeed, as the official emulator
            // lets it. The SDKs sign their `GET /` and get the account (or their 401) — and
            // an SDK client given no key still sends its `x-ms-version`: it gets the
            // service's 401, not a readiness answer it would take for the account.
            ("/", true)
                if !signed
                    && !headers.contains_key(TOKEN_HEADER)
                    && !headers.contains_key(header::VERSION) =>
            {
                ready()
            }
            _ if !self.enabled => return None,
            ("/_explorer" | "/_explorer/" | "/explorer" | "/explorer/", true) => redirect(),
            ("/_explorer/index.html", true) => {
                // The secret goes only into a page asked for by one of this server's names.
                let host = authority(headers, uri);
                let token = if self.open && self.hosts.contains(&host_name(host)) {
                    self.secret.as_str()
                } else {
                    ""
                };
                let auth = if self.keys.disable_local_auth {
                    "entra"
                } else {
                    "key"
                };
                let html = INDEX_HTML
                    .replace("{{TOKEN}}", token)
                    .replace("{{AUTH}}", auth);
                page(
                    Reply::new(StatusCode::OK, html)
                        .header(header::CONTENT_TYPE, "text/html; charset=utf-8")
                        .header(
                            "content-security-policy",
                            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'",
                        ),
                )
            }
            ("/_explorer/app.js", true) => page(
                Reply::new(StatusCode::OK, APP_JS)
                    .header(header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            ),
            ("/_explorer/advise.js", true) => page(
                Reply::new(StatusCode::OK, ADVISE_JS)
                    .header(header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            ),
            ("/_explorer/regions.js", true) => page(
                Reply::new(StatusCode::OK, REGIONS_JS)
                    .header(header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            ),
            ("/_explorer/access.js", true) => page(
                Reply::new(StatusCode::OK, ACCESS_JS)
                    .header(header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            ),
            ("/_explorer/app.css", true) => page(
                Reply::new(StatusCode::OK, APP_CSS).header(header::CONTENT_TYPE, "text/css; charset=utf-8"),
            ),
            ("/_explorer/session", false) if method == Method::POST => {
                return Some(self.session(headers, uri, body).map(page))
            }
            (p, _) if p.starts_with("/_explorer/") => {
                return Some(Err(CosmosError::not_found(format!(
                    "The Data Explorer has no '{p}'; open /_explorer/index.html."
                ))))
            }
            _ => return None,
        }))
    }

    /// `POST /_explorer/session` with `{"key": "..."}`: the secret, for the account key; with
    /// `{"token": "<JWT>"}`: a session of the Entra ID principal the token names, until it
    /// expires. An account with local authorization disabled takes tokens only.
    fn session(&self, headers: &HeaderMap, uri: &Uri, body: &[u8]) -> Result<Reply, CosmosError> {
        self.same_origin(headers, uri)?;
        let v: serde_json::Value = serde_json::from_slice(body).map_err(|_| {
            CosmosError::bad_request(
                "Send {\"key\": \"<the account key>\"} or {\"token\": \"<an Entra ID token>\"} as JSON.",
            )
        })?;
        if let Some(jwt) = v["token"].as_str() {
            let (secret, who, exp) = self.sessions.sign_in(&self.keys, jwt, now_secs())?;
            return Ok(Reply::json(
                StatusCode::OK,
                &json!({"token": secret, "principal": who.oid, "expires": exp}),
            ));
        }
        if self.keys.disable_local_auth {
            return Err(CosmosError::unauthorized(
                "Local Authorization is disabled (--disable-local-auth): the account key opens nothing. Sign in with an Entra ID token instead (for example `az account get-access-token --resource https://cosmos.azure.com --query accessToken -o tsv`); the explorer then acts as that principal, under its role assignments.",
            ));
        }
        let key = v["key"].as_str().unwrap_or_default().trim();
        if self.secret.is_empty() || !self.keys.read_write.is_key(key) {
            return Err(CosmosError::unauthorized(
                "That is not this account's key (the --key the server was started with).",
            ));
        }
        Ok(Reply::json(StatusCode::OK, &json!({"token": self.secret})))
    }
}

fn now_secs() -> i64 {
    crate::store::catalog::now_secs() as i64
}

fn wants_html(headers: &HeaderMap) -> bool {
    header(headers, "accept").is_some_and(|a| a.contains("text/html"))
}

fn redirect() -> Reply {
    Reply::empty(StatusCode::FOUND).header("location", "/_explorer/index.html")
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn explorer(open: bool) -> Explorer {
        explorer_with(open, false)
    }

    fn explorer_with(open: bool, disable_local_auth: bool) -> Explorer {
        Explorer::new(
            ExplorerConfig {
                enabled: true,
                open,
                hosts: vec![],
                cert_pem: None,
            },
            &Keys {
                read_write: strata_query::protocol::MasterKey::from_base64("a2V5").expect("key"),
                read_only: None,
                disable_local_auth,
                entra: None,
            },
        )
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).expect("value"));
        }
        h
    }

    fn page_token(e: &Explorer, host: &str) -> String {
        let r = e
            .serve(
                &Method::GET,
                &Uri::from_static("/_explorer/index.html"),
                &headers(&[("host", host)]),
                b"",
            )
            .expect("served")
            .expect("ok");
        let html = String::from_utf8_lossy(&r.body).to_string();
        let at = html.find("name=\"strata-token\" content=\"").expect("meta") + 29;
        html[at..].split('"').next().unwrap_or_default().to_string()
    }

    #[test]
    fn the_secret_reaches_only_same_origin_pages_of_this_server() {
        let e = explorer(true);
        let token = page_token(&e, "localhost:8081");
        assert_eq!(token.len(), 48);
        assert_eq!(page_token(&e, "evil.example:8081"), "", "DNS rebinding");
        let ok = |extra: &[(&'static str, &str)]| {
            let mut h = vec![(TOKEN_HEADER, token.as_str()), ("host", "localhost:8081")];
            h.extend_from_slice(extra);
            e.principal(&headers(&h), &Uri::from_static("/dbs"))
                .expect("explorer request")
        };
        assert!(ok(&[]).is_ok());
        assert!(ok(&[
            ("origin", "http://localhost:8081"),
            ("sec-fetch-site", "same-origin")
        ])
        .is_ok());
        for bad in [
            vec![("origin", "http://evil.example")],
            vec![("sec-fetch-site", "cross-site")],
            vec![("origin", "http://localhost:9999")],
        ] {
            assert_eq!(
                ok(&bad).map_err(|e| e.status.as_u16()).err(),
                Some(403),
                "{bad:?}"
            );
        }
        let wrong = e
            .principal(
                &headers(&[(TOKEN_HEADER, "00"), ("host", "localhost:8081")]),
                &Uri::from_static("/dbs"),
            )
            .expect("explorer request");
        assert_eq!(wrong.err().map(|e| e.status.as_u16()), Some(401));
        assert!(e
            .principal(
                &headers(&[("host", "localhost")]),
                &Uri::from_static("/dbs")
            )
            .is_none());
        // HTTP/2 names the host in the URI, not in a header.
        let h2 = e
            .principal(
                &headers(&[(TOKEN_HEADER, token.as_str())]),
                &Uri::from_static("https://localhost:8081/dbs"),
            )
            .expect("explorer request");
        assert!(h2.is_ok());
    }

    #[test]
    fn a_closed_explorer_trades_the_key_for_the_secret() {
        let e = explorer(false);
        assert_eq!(page_token(&e, "10.0.0.5:8081"), "");
        let h = headers(&[("host", "10.0.0.5:8081")]);
        let session = Uri::from_static("/_explorer/session");
        let bad = e.serve(&Method::POST, &session, &h, br#"{"key": "nope"}"#);
        assert_eq!(
            bad.expect("served").err().map(|e| e.status.as_u16()),
            Some(401)
        );
        let good = e
            .serve(&Method::POST, &session, &h, br#"{"key": "a2V5"}"#)
            .expect("served")
            .expect("ok");
        let v: serde_json::Value = serde_json::from_slice(&good.body).expect("json");
        assert_eq!(v["token"].as_str().map(str::len), Some(48));
    }

    /// `--disable-local-auth`: no page carries a key-equivalent secret, the key buys no
    /// session, and an Entra ID token buys one that acts as its principal until it expires.
    #[test]
    fn without_local_auth_the_explorer_is_a_signed_in_principal() {
        let e = explorer_with(true, true);
        assert_eq!(
            page_token(&e, "localhost:8081"),
            "",
            "no secret on loopback"
        );
        let h = headers(&[("host", "localhost:8081")]);
        let session = Uri::from_static("/_explorer/session");
        let post = |body: &str| {
            e.serve(&Method::POST, &session, &h, body.as_bytes())
                .expect("served")
        };
        let refused = post(r#"{"key": "a2V5"}"#).err().expect("refused");
        assert_eq!(refused.status.as_u16(), 401);
        assert!(refused.message.contains("Local Authorization is disabled"));
        // The master secret of a server with local auth never verifies here.
        let forged = e.principal(
            &headers(&[(TOKEN_HEADER, ""), ("host", "localhost:8081")]),
            &Uri::from_static("/dbs"),
        );
        assert_eq!(
            forged.and_then(|r| r.err()).map(|e| e.status.as_u16()),
            Some(401)
        );
        let now = now_secs();
        let jwt = crate::api::security::aad::emulator_token("a2V5", "alice", now + 3600);
        let ok = post(&serde_json::json!({"token": jwt}).to_string()).expect("signed in");
        let v: serde_json::Value = serde_json::from_slice(&ok.body).expect("json");
        assert_eq!(v["principal"], "alice");
        let secret = v["token"].as_str().expect("secret").to_string();
        let who = e
            .principal(
                &headers(&[(TOKEN_HEADER, &secret), ("host", "localhost:8081")]),
                &Uri::from_static("/dbs"),
            )
            .expect("explorer request")
            .expect("principal");
        assert!(
            matches!(who, Principal::Aad(ref id) if id.oid == "alice"),
            "{who:?}"
        );
        // A token for another audience, or one expired, opens nothing.
        let stale = crate::api::security::aad::emulator_token("a2V5", "alice", now - 3600);
        let e401 = post(&serde_json::json!({"token": stale}).to_string()).err();
        assert_eq!(e401.map(|e| e.status.as_u16()), Some(401));
        // A session ends with its token.
        let soon = crate::api::security::aad::emulator_token("a2V5", "bob", now + 1);
        let (secret, _, _) = e.sessions.sign_in(&e.keys, &soon, now).expect("signed in");
        assert!(e.sessions.get(&secret, now).is_some_and(|r| r.is_ok()));
        assert!(e.sessions.get(&secret, now + 2).is_some_and(|r| r.is_err()));
    }

    #[test]
    fn hosts_are_compared_without_ports() {
        assert_eq!(host_name("LocalHost:8081"), "localhost");
        assert_eq!(host_name("[::1]:8081"), "::1");
        assert_eq!(host_name("127.0.0.1"), "127.0.0.1");
    }
}
