//! Several strata processes over one shared store (`--store postgres://…`): one process
//! serves the store — the one holding its lock — and every other forwards each request to it
//! unchanged, waiting for the lock meanwhile; when the serving process stops or dies,
//! PostgreSQL frees its lock and one of the others takes over. Clients and load balancers may
//! use any process's address. `docs/postgres.md` explains why one process writes at a time
//! and what would let several write.
//!
//! Forwarding keeps the request as the client sent it: the signature covers the verb, the
//! resource and the date, never the host, so the serving process checks it as if the client
//! had called it; the `Host` header is kept, so the account it returns names the address the
//! client used (the SDKs keep calling the process they were given).

use crate::api::{self, response::error_response, App, RegionId, MAX_BODY};
use crate::error::CosmosError;
use crate::store::engine::Engine;
use crate::store::kv;
use crate::store::{Store, StoreConfig};
use axum::body::Body;
use axum::http::{header, HeaderName, HeaderValue, Request};
use axum::response::{IntoResponse, Response};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Where in `strata.meta` the serving process writes its endpoints (a JSON array, one per
/// region).
const LEADER: &str = "leader";
/// Marks a forwarded request: a process that is not serving answers it with 503 instead of
/// forwarding it again (a stale address could name a process that forwards back).
const FORWARDED: &str = strata_query::protocol::header::FORWARDED;
/// The longest a forwarded request may take, answer included.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(120);

/// What a process's listeners dispatch to: its own API once it serves the store, until then
/// the process that does.
pub struct Front {
    serving: RwLock<Option<App>>,
    store_url: String,
    /// How long a client may take to send a request's body (as when serving).
    body_timeout: Duration,
    http: reqwest::Client,
    /// The serving process's endpoints as last read from the store.
    leader: RwLock<Vec<String>>,
}

impl Front {
    /// A front that forwards to whichever process serves the store at `store_url`. Over
    /// HTTPS the serving process must present the certificate this one serves (`cert_pem`):
    /// the processes of one account share it (one `--cert-dir`, or the same `--tls-cert`),
    /// and nothing else is trusted, so forwarded requests cannot be intercepted.
    pub fn new(
        store_url: &str,
        body_timeout: Duration,
        cert_pem: Option<&[u8]>,
    ) -> Result<Arc<Self>, String> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder();
        if let Some(pem) = cert_pem {
            let certs = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| format!("this process's certificate is unreadable: {e}"))?;
            builder = builder.tls_certs_only(certs);
        }
        let http = builder
            .no_proxy()
            .connect_timeout(Duration::from_secs(2))
            // A serving process cut off without a reset must not hold requests forever;
            // none of its answers takes this long (scripts and query pages are bounded).
            .timeout(FORWARD_TIMEOUT)
            .tcp_keepalive(Duration::from_secs(10))
            .tcp_nodelay(true)
            .build()
            .map_err(|e| format!("no HTTP client for forwarding: {e}"))?;
        Ok(Arc::new(Self {
            serving: RwLock::new(None),
            store_url: store_url.to_string(),
            body_timeout,
            http,
            leader: RwLock::new(Vec::new()),
        }))
    }

    /// From now on this process serves requests itself with `app`.
    pub fn serve(&self, app: App) {
        *self.serving.write().unwrap_or_else(|p| p.into_inner()) = Some(app);
    }

    /// The endpoint of region `region` of the serving process, read again from the store
    /// when `fresh` (after a failed connect: another process may have taken over).
    async fn leader(&self, region: usize, fresh: bool) -> Result<String, CosmosError> {
        let cached = {
            let l = self.leader.read().unwrap_or_else(|p| p.into_inner());
            l.get(region).or(l.first()).cloned()
        };
        if let (Some(e), false) = (&cached, fresh) {
            return Ok(e.clone());
        }
        let unavailable = |why: String| {
            CosmosError::service_unavailable(format!(
                "No strata process serves this store right now ({why}); one takes over within seconds of the last one stopping. Retry."
            ))
        };
        let read = kv::shared(&self.store_url)
            .read_meta(LEADER)
            .await
            .map_err(|e| unavailable(e.to_string()))?
            .ok_or_else(|| unavailable("none has started".into()))?;
        let endpoints: Vec<String> = serde_json::from_str(&read)
            .map_err(|e| unavailable(format!("its address in the store is unreadable: {e}")))?;
        let chosen = endpoints.get(region).or(endpoints.first()).cloned();
        *self.leader.write().unwrap_or_else(|p| p.into_inner()) = endpoints;
        chosen.ok_or_else(|| unavailable("its address in the store is empty".into()))
    }
}

/// Records `endpoints` (one per region) as the serving process's, for the others to forward
/// to. Called by the process that took the store's lock, once it listens.
pub async fn register(store_url: &str, endpoints: &[String]) -> Result<(), String> {
    let value = serde_json::to_string(endpoints).map_err(|e| e.to_string())?;
    kv::shared(store_url)
        .write_meta(LEADER, &value)
        .await
        .map_err(|e| format!("could not record this process's address in the store: {e}"))
}

/// Waits for the store's lock (until `stop`), opens the store and hands it to `serve` (which
/// starts everything a serving process runs and returns its API), then dispatches to that
/// API from now on. A failure to open or serve is retried every 5 s.
pub async fn take_over<F, Fut>(
    front: Arc<Front>,
    url: String,
    store_cfg: StoreConfig,
    stop: Arc<AtomicBool>,
    serve: F,
) where
    F: Fn(Store) -> Fut,
    Fut: std::future::Future<Output = Result<App, String>>,
{
    loop {
        let (u, s) = (url.clone(), Arc::clone(&stop));
        let kv = tokio::task::spawn_blocking(move || {
            kv::shared(&u).open_when_free(Box::new(move || !s.load(Ordering::Acquire)))
        })
        .await;
        if stop.load(Ordering::Acquire) {
            return;
        }
        let cfg = store_cfg.clone();
        let opened = match kv {
            Ok(Ok(kv)) => tokio::task::spawn_blocking(move || Store::open_on(Engine::new(kv), cfg))
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r.map_err(|e| e.to_string())),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        let served = match opened {
            Ok(store) => match serve(store.clone()).await {
                Ok(app) => Ok(app),
                Err(e) => {
                    // Give the lock back: background tasks may still hold the store.
                    let _ = tokio::task::spawn_blocking(move || store.shutdown()).await;
                    Err(e)
                }
            },
            Err(e) => Err(e),
        };
        match served {
            Ok(app) => {
                tracing::info!("the process serving this store stopped; this one serves it now");
                front.serve(app);
                return;
            }
            Err(e) => {
                tracing::error!(error = %e, "could not take over the store; trying again in 5 s");
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        }
    }
}

/// Answers a request that reached region `region` of a process that does not (yet) serve
/// the store by forwarding it; once the process serves, its own API answers.
pub async fn answer(front: &Front, region: RegionId, req: Request<Body>) -> Response {
    let serving = front
        .serving
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    if let Some(app) = serving {
        return api::answer(&app, region, req).await;
    }
    match forward(front, region, req).await {
        Ok(r) => r,
        Err(e) => error_response(e, &api::new_activity_id()),
    }
}

/// Sends `req` to the serving process and relays its answer. A connect that fails (the
/// process is gone) is tried once more at the address the store names now.
async fn forward(
    front: &Front,
    region: RegionId,
    req: Request<Body>,
) -> Result<Response, CosmosError> {
    if req.headers().contains_key(FORWARDED) {
        return Err(CosmosError::service_unavailable(
            "This strata process does not serve the store and the request was forwarded to it already; no process serves the store right now. Retry.",
        ));
    }
    let region = region.0;
    let (parts, body) = req.into_parts();
    let body = tokio::time::timeout(front.body_timeout, axum::body::to_bytes(body, MAX_BODY))
        .await
        .map_err(|_| {
            CosmosError::request_timeout(format!(
                "The request body did not arrive within {} s.",
                front.body_timeout.as_secs()
            ))
        })?
        .map_err(|_| {
            CosmosError::too_large(format!(
                "The request body is larger than {MAX_BODY} bytes; items and batches are limited to 2 MB."
            ))
        })?;
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut headers = parts.headers.clone();
    drop_hop_by_hop(&mut headers);
    // HTTP/2 carries the host in the URI, not a header: keep it for the account's addresses.
    if !headers.contains_key(header::HOST) {
        if let Some(a) = parts.uri.authority() {
            if let Ok(v) = a.as_str().parse() {
                headers.insert(header::HOST, v);
            }
        }
    }
    headers.insert(
        HeaderName::from_static(FORWARDED),
        HeaderValue::from_static("1"),
    );
    let mut fresh = false;
    loop {
        let base = front.leader(region, fresh).await?;
        let url = format!("{}{path}", base.trim_end_matches('/'));
        let sent = front
            .http
            .request(parts.method.clone(), &url)
            .headers(headers.clone())
            .body(body.clone())
            .send()
            .await;
        match sent {
            Ok(answer) => return relay(answer).await,
            Err(e) if e.is_connect() && !fresh => fresh = true,
            Err(e) => {
                return Err(CosmosError::service_unavailable(format!(
                    "The strata process serving this store ({base}) did not answer: {}. Another takes over within seconds when it has stopped (over HTTPS, every process must serve the same certificate). Retry.",
                    with_causes(&e)
                )))
            }
        }
    }
}

/// An error with the errors that caused it (a TLS or connect failure is in the causes).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// The serving process's answer as this process's response.
async fn relay(answer: reqwest::Response) -> Result<Response, CosmosError> {
    let status = answer.status();
    let mut headers = answer.headers().clone();
    drop_hop_by_hop(&mut headers);
    let body = answer.bytes().await.map_err(|e| {
        CosmosError::service_unavailable(format!(
            "The strata process serving this store stopped while answering: {e}. Retry."
        ))
    })?;
    let mut r = (status, body).into_response();
    r.headers_mut().extend(headers);
    Ok(r)
}

/// Drops the headers that belong to one connection, not to the request or response.
fn drop_hop_by_hop(headers: &mut axum::http::HeaderMap) {
    for h in [
        header::CONNECTION,
        header::TRANSFER_ENCODING,
        header::TE,
        header::TRAILER,
        header::UPGRADE,
        header::PROXY_AUTHORIZATION,
        header::PROXY_AUTHENTICATE,
        header::CONTENT_LENGTH,
    ] {
        headers.remove(h);
    }
    headers.remove("keep-alive");
}
