//! Listening: one accept loop for plain HTTP and HTTPS (rustls), HTTP/1.1 and HTTP/2, with
//! graceful shutdown (stop accepting, let in-flight requests finish, flush storage).

use crate::api::{self, auth::MasterKey, ApiOptions, App};
use crate::store::{Store, StoreConfig};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinHandle;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Where the TLS certificate comes from.
#[derive(Debug, Clone)]
pub enum Tls {
    /// A self-signed certificate for localhost and loopback addresses (and `names`),
    /// generated on first start and kept in `dir`, so clients that trusted it keep working
    /// across restarts.
    SelfSigned { dir: PathBuf, names: Vec<String> },
    /// PEM files given by the user.
    Files { cert: PathBuf, key: PathBuf },
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub host: String,
    pub port: u16,
    pub key: String,
    /// A read-only account key (base64) beside `key`: requests it signs may read, not write.
    pub read_only_key: Option<String>,
    pub store: StoreConfig,
    pub tls: Option<Tls>,
    pub gateway_compat: bool,
    pub enforce_throughput: bool,
    pub connections: Connections,
    /// Serve the Data Explorer at `/_explorer/index.html`.
    pub explorer: bool,
    /// The address clients reach this server by when it is not the listen address (the
    /// official emulator's IP address override): used in the certificate and the explorer.
    pub public_host: Option<String>,
    /// Whether the queries served are sampled for the partition-key advisor, and where kept.
    pub queries: crate::advise::sample::Recording,
    /// Refuse keys and resource tokens: Entra ID tokens only.
    pub disable_local_auth: bool,
    /// Where the RBAC policy is kept (default: `rbac.json` in the data folder, if any).
    pub rbac: Option<PathBuf>,
}

/// Bounds on clients, so that slow, idle or numerous connections cannot exhaust the server.
#[derive(Debug, Clone)]
pub struct Connections {
    /// The most connections served at once (further ones wait in the listen backlog); also
    /// kept below the process's open-files limit.
    pub max: usize,
    /// How long a client may take to send a request's headers (slowloris), and the TLS
    /// handshake.
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body once its headers arrived.
    pub body_timeout: Duration,
    /// A connection on which nothing arrives for this long is closed (idle keep-alive).
    pub idle_timeout: Duration,
}

impl Default for Connections {
    fn default() -> Self {
        Self {
            max: 10_000,
            header_timeout: Duration::from_secs(20),
            body_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(300),
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".into(),
            port: 8081,
            key: api::auth::EMULATOR_KEY.into(),
            read_only_key: None,
            store: StoreConfig::default(),
            tls: None,
            gateway_compat: false,
            enforce_throughput: false,
            connections: Connections::default(),
            explorer: true,
            public_host: None,
            queries: Default::default(),
            disable_local_auth: false,
            rbac: None,
        }
    }
}

/// The key continuation tokens are signed with: random, and kept in the data folder (so that
/// tokens handed out before a restart still work); per process when nothing is on disk.
fn token_key(dir: Option<&Path>) -> Result<strata_query::sql::token::TokenKey, BoxError> {
    use strata_query::sql::token::TokenKey;
    let path = dir.map(|d| d.join("token.key"));
    if let Some(p) = &path {
        if let Ok(bytes) = std::fs::read(p) {
            if let Ok(k) = <[u8; 32]>::try_from(bytes.as_slice()) {
                return Ok(TokenKey::new(k));
            }
        }
    }
    let mut k = [0u8; 32];
    getrandom::fill(&mut k).map_err(|e| format!("no randomness for the token key: {e}"))?;
    if let Some(p) = &path {
        let tmp = p.with_extension("tmp");
        std::fs::write(&tmp, k)?;
        std::fs::rename(&tmp, p)?;
    }
    Ok(TokenKey::new(k))
}

/// Raises the soft open-files limit to the hard one (1,024 by default on Linux, which a few
/// hundred clients exhaust) and returns how many connections the result leaves room for.
fn connection_budget(wanted: usize) -> usize {
    // Descriptors besides connections: the storage engine's files, logs, the listener.
    const RESERVED: u64 = 256;
    let limit = rlimit::increase_nofile_limit(u64::MAX).unwrap_or(1024);
    let room = limit.saturating_sub(RESERVED).max(16);
    wanted
        .min(usize::try_from(room).unwrap_or(usize::MAX))
        .max(1)
}

/// Logs a repeating condition at most once per 10 s, with how often it happened meanwhile.
struct Throttled {
    last: Option<Instant>,
    suppressed: u64,
}

impl Throttled {
    fn new() -> Self {
        Self {
            last: None,
            suppressed: 0,
        }
    }

    /// Whether to log now; `Some(n)` with the number of times it was held back since.
    fn due(&mut self) -> Option<u64> {
        if self
            .last
            .is_some_and(|t| t.elapsed() < Duration::from_secs(10))
        {
            self.suppressed += 1;
            return None;
        }
        self.last = Some(Instant::now());
        Some(std::mem::take(&mut self.suppressed))
    }
}

/// A running server.
pub struct Running {
    pub addr: SocketAddr,
    pub tls: bool,
    pub store: Store,
    jobs: crate::transfer::jobs::Jobs,
    queries: crate::advise::sample::QuerySample,
    stop_tx: watch::Sender<bool>,
    task: JoinHandle<Result<(), String>>,
}

impl Running {
    /// The endpoint clients use, e.g. `http://127.0.0.1:8081/`.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}/", self.addr)
    }

    /// Stops accepting, waits for in-flight requests (up to 10 s), flushes storage.
    pub async fn stop(self) -> Result<(), String> {
        // Copy jobs stop first (they talk to this server) and resume at the next start.
        self.jobs.stop_all();
        let _ = self.stop_tx.send(true);
        let served = self.task.await.map_err(|e| e.to_string())?;
        if let Err(e) = self.queries.flush() {
            tracing::warn!(error = %e, "query sample not saved");
        }
        served
    }
}

/// Opens the store and starts serving. Returns once the listener is bound.
pub async fn start(cfg: ServerConfig) -> Result<Running, BoxError> {
    let store_cfg = cfg.store.clone();
    let store = tokio::task::spawn_blocking(move || Store::open(store_cfg)).await??;
    let (app, acceptor, jobs) = build_app(&cfg, store.clone())?;
    // Resume splits that a raised throughput still calls for (e.g. after a restart).
    for c in store.all_containers() {
        store.maybe_split(&c);
    }
    store.spawn_ttl_sweeper(Duration::from_secs(1));
    let listener = TcpListener::bind((cfg.host.as_str(), cfg.port)).await?;
    let addr = listener.local_addr()?;
    let queries = app.queries.clone();
    queries.spawn_flusher();
    let router = api::router(app);
    let (stop_tx, mut stop_rx) = watch::channel(false);
    let task_store = store.clone();
    let tls = acceptor.is_some();
    let limits = cfg.connections.clone();
    let max_connections = connection_budget(limits.max);
    tracing::debug!(max_connections, "connection limit");
    let permits = Arc::new(Semaphore::new(max_connections));
    let registry = Arc::new(crate::connections::Registry::default());
    let task = tokio::spawn(async move {
        let graceful = GracefulShutdown::new();
        let mut accept_failed = Throttled::new();
        let mut at_limit = Throttled::new();
        loop {
            let (stream, _) = tokio::select! {
                res = listener.accept() => match res {
                    Ok(s) => s,
                    Err(e) => {
                        if let Some(held) = accept_failed.due() {
                            tracing::warn!(error = %e, held_back = held, "accept failed");
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                },
                _ = stop_rx.changed() => break,
            };
            // One permit per connection. At the limit, the newcomer (whose socket the
            // descriptors kept in reserve cover) gets the place of the connection idle the
            // longest, or waits for one to close; further clients wait in the backlog.
            let permit = match Arc::clone(&permits).try_acquire_owned() {
                Ok(p) => p,
                Err(_) => {
                    let closed_idle = registry.close_oldest_idle();
                    if let Some(held) = at_limit.due() {
                        tracing::warn!(
                            max_connections,
                            held_back = held,
                            closed_idle,
                            "connection limit reached; new clients take the place of the connections idle the longest, or wait for one to close"
                        );
                    }
                    tokio::select! {
                        p = Arc::clone(&permits).acquire_owned() => match p {
                            Ok(p) => p,
                            Err(_) => break,
                        },
                        _ = stop_rx.changed() => break,
                    }
                }
            };
            let _ = stream.set_nodelay(true);
            let (id, activity) = registry.add();
            let svc = tracked(router.clone(), &registry, &activity);
            let watcher = graceful.watcher();
            let acceptor = acceptor.clone();
            let limits = limits.clone();
            let registry = Arc::clone(&registry);
            tokio::spawn(async move {
                let _permit = permit;
                let served = serve(stream, acceptor, &limits, svc, watcher);
                // Closed by the accept loop (idle, at the limit): dropping it closes it.
                tokio::select! {
                    _ = served => {}
                    _ = activity.close.notified() => {}
                }
                registry.remove(id);
            });
        }
        drop(listener);
        if tokio::time::timeout(Duration::from_secs(10), graceful.shutdown())
            .await
            .is_err()
        {
            tracing::warn!("some connections did not finish within 10 s of shutdown");
        }
        let s = task_store.clone();
        tokio::task::spawn_blocking(move || s.shutdown())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())
    });
    // Jobs reach this server over loopback, as any client would.
    let loopback = loopback_of(addr);
    let scheme = if tls { "https" } else { "http" };
    jobs.start(&format!("{scheme}://{loopback}/"), &cfg.key);
    Ok(Running {
        addr,
        tls,
        store,
        jobs,
        queries,
        stop_tx,
        task,
    })
}

/// The API's state for `cfg` over `store`: keys, the token key, copy jobs, the explorer; with
/// the TLS acceptor when serving HTTPS, and the jobs (started once the listener is bound).
fn build_app(
    cfg: &ServerConfig,
    store: Store,
) -> Result<
    (
        App,
        Option<tokio_rustls::TlsAcceptor>,
        crate::transfer::jobs::Jobs,
    ),
    BoxError,
> {
    let keys = api::auth::Keys {
        disable_local_auth: cfg.disable_local_auth,
        read_write: MasterKey::from_base64(&cfg.key)?,
        read_only: match &cfg.read_only_key {
            Some(k) => Some(MasterKey::from_base64(k)?),
            None => None,
        },
    };
    let (acceptor, cert_pem) = match &cfg.tls {
        None => (None, None),
        Some(t) => {
            let (a, pem) = tls_acceptor(t)?;
            (Some(a), Some(pem))
        }
    };
    let token_key = token_key(cfg.store.data_dir.as_deref())?;
    let jobs = crate::transfer::jobs::Jobs::open(
        cfg.store.data_dir.as_deref(),
        crate::transfer::sealed::Sealer::new(token_key.derive("copy job account keys")),
    )?;
    let loopback_only = match cfg.host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => cfg.host.eq_ignore_ascii_case("localhost"),
    };
    let explorer = crate::api::explorer::Explorer::new(
        crate::api::explorer::ExplorerConfig {
            enabled: cfg.explorer,
            open: loopback_only,
            hosts: std::iter::once(cfg.host.clone())
                .chain(cfg.public_host.clone())
                .collect(),
            cert_pem,
        },
        &cfg.key,
    );
    let app = App::new(
        store,
        keys,
        token_key,
        ApiOptions {
            tls: acceptor.is_some(),
            gateway_compat: cfg.gateway_compat,
            enforce_throughput: cfg.enforce_throughput,
            body_timeout: Some(cfg.connections.body_timeout),
        },
        crate::api::app::Services {
            jobs: jobs.clone(),
            explorer,
            queries: crate::advise::sample::QuerySample::open(cfg.queries.clone())?,
            rbac: api::rbac::Rbac::open(
                cfg.rbac
                    .clone()
                    .or_else(|| cfg.store.data_dir.as_ref().map(|d| d.join("rbac.json"))),
            )?,
        },
    );
    Ok((app, acceptor, jobs))
}

/// Serves one accepted connection (after the TLS handshake, when serving HTTPS) until it
/// ends or the server shuts down.
async fn serve<S>(
    stream: tokio::net::TcpStream,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    limits: &Connections,
    svc: S,
    watcher: hyper_util::server::graceful::Watcher,
) where
    S: hyper::service::Service<
            hyper::Request<hyper::body::Incoming>,
            Response = axum::response::Response,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    // A read that stalls past the idle timeout ends the connection, over TLS and HTTP/2 too
    // (hyper's header timeout covers HTTP/1 only).
    let mut stream = tokio_io_timeout::TimeoutStream::new(stream);
    stream.set_read_timeout(Some(limits.idle_timeout));
    let stream = Box::pin(stream);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    match acceptor {
        Some(acc) => match tokio::time::timeout(limits.header_timeout, acc.accept(stream)).await {
            Ok(Ok(s)) => {
                let conn = builder.serve_connection_with_upgrades(TokioIo::new(s), svc);
                let _ = watcher.watch(conn.into_owned()).await;
            }
            Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
            Err(_) => tracing::debug!("TLS handshake timed out"),
        },
        None => {
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), svc);
            let _ = watcher.watch(conn.into_owned()).await;
        }
    }
}

/// The router as a hyper service that notes when each request of a connection starts and
/// ends (so the accept loop knows which connections are idle).
fn tracked(
    router: axum::Router,
    registry: &Arc<crate::connections::Registry>,
    activity: &Arc<crate::connections::Conn>,
) -> impl hyper::service::Service<
    hyper::Request<hyper::body::Incoming>,
    Response = axum::response::Response,
    Error = std::convert::Infallible,
    Future = impl std::future::Future<
        Output = Result<axum::response::Response, std::convert::Infallible>,
    > + Send,
> + Clone
       + Send
       + 'static {
    let inner = TowerToHyperService::new(router);
    let (registry, activity) = (Arc::clone(registry), Arc::clone(activity));
    hyper::service::service_fn(move |req| {
        use hyper::service::Service as _;
        activity.begin();
        let answer = inner.call(req);
        let (registry, activity) = (Arc::clone(&registry), Arc::clone(&activity));
        async move {
            let r = answer.await;
            activity.end(registry.now_ms());
            r
        }
    })
}

/// The loopback address of a listener bound to `addr` (itself unless it is unspecified).
fn loopback_of(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        ip if ip.is_unspecified() && ip.is_ipv6() => {
            SocketAddr::new(std::net::Ipv6Addr::LOCALHOST.into(), addr.port())
        }
        ip if ip.is_unspecified() => {
            SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), addr.port())
        }
        _ => addr,
    }
}

/// The TLS acceptor, and the certificate chain (PEM) clients should trust.
fn tls_acceptor(t: &Tls) -> Result<(tokio_rustls::TlsAcceptor, Vec<u8>), BoxError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let (cert_pem, key_pem) = match t {
        Tls::Files { cert, key } => (std::fs::read(cert)?, std::fs::read(key)?),
        Tls::SelfSigned { dir, names } => self_signed(dir, names)?,
    };
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(&cert_pem).collect::<Result<_, _>>()?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok((tokio_rustls::TlsAcceptor::from(Arc::new(config)), cert_pem))
}

/// Loads the self-signed certificate kept in `dir`, creating it on first start (and again
/// when it lacks one of `names`, e.g. a new IP address override).
fn self_signed(dir: &Path, names: &[String]) -> Result<(Vec<u8>, Vec<u8>), BoxError> {
    let (c, k, n) = (
        dir.join("tls-cert.pem"),
        dir.join("tls-key.pem"),
        dir.join("tls-names.txt"),
    );
    let mut all: Vec<String> = ["localhost", "127.0.0.1", "::1"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for name in names {
        if !all.contains(name) && !name.is_empty() && name != "0.0.0.0" && name != "::" {
            all.push(name.clone());
        }
    }
    let covered = std::fs::read_to_string(&n).unwrap_or_default();
    let covered: Vec<&str> = covered.lines().collect();
    if c.exists() && k.exists() && all.iter().all(|a| covered.contains(&a.as_str())) {
        return Ok((std::fs::read(c)?, std::fs::read(k)?));
    }
    let ck = rcgen::generate_simple_self_signed(all.clone())?;
    let cert = ck.cert.pem().into_bytes();
    let key = ck.signing_key.serialize_pem().into_bytes();
    std::fs::create_dir_all(dir)?;
    std::fs::write(&c, &cert)?;
    std::fs::write(&k, &key)?;
    std::fs::write(&n, all.join("\n"))?;
    tracing::info!(dir = %dir.display(), names = %all.join(", "), "generated a self-signed TLS certificate");
    Ok((cert, key))
}
