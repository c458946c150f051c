//! Listening: one accept loop for plain HTTP and HTTPS (rustls), HTTP/1.1 and HTTP/2, with
//! graceful shutdown (stop accepting, let in-flight requests finish, flush storage).

use crate::api::{self, security::auth::MasterKey, ApiOptions, App};
use crate::store::{kv::KvError, Store, StoreConfig, StoreError};
use hyper_util::server::graceful::GracefulShutdown;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinHandle;

pub use crate::serve::Connections;

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
    /// An Entra ID tenant's signing keys: its real tokens are accepted (`--entra-jwks`).
    pub entra: Option<api::security::aad::Jwks>,
    /// The account's regions, each served on its own port from `port` up (one by default).
    pub regions: crate::regions::RegionsConfig,
    /// Serve the SDK test emulator's management API on this loopback port (0: any free one).
    pub management_port: Option<u16>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".into(),
            port: 8081,
            key: api::security::auth::EMULATOR_KEY.into(),
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
            entra: None,
            regions: Default::default(),
            management_port: None,
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

/// The continuation-token key of a shared store: kept in the store, so that tokens (and copy
/// jobs' sealed keys) handed out by one process stay valid in every other and after a
/// takeover. The first process to start writes it; a concurrent first start keeps one.
async fn shared_token_key(url: &str) -> Result<strata_query::sql::token::TokenKey, BoxError> {
    use strata_query::sql::token::TokenKey;
    let shared = crate::store::kv::shared(url);
    let mut k = [0u8; 32];
    getrandom::fill(&mut k).map_err(|e| format!("no randomness for the token key: {e}"))?;
    let hex: String = k.iter().map(|b| format!("{b:02x}")).collect();
    shared.write_meta_once("token_key", &hex).await?;
    let stored = shared.read_meta("token_key").await?.unwrap_or_default();
    let bytes: Vec<u8> = (0..stored.len() / 2)
        .filter_map(|i| u8::from_str_radix(stored.get(2 * i..2 * i + 2)?, 16).ok())
        .collect();
    let k = <[u8; 32]>::try_from(bytes.as_slice())
        .map_err(|_| "the token key in the store's strata.meta is not 64 hex digits")?;
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
    /// The first region's address (the only one unless `--regions`).
    pub addr: SocketAddr,
    /// Every region's address, in the order the regions were named.
    pub regions: Vec<SocketAddr>,
    pub tls: bool,
    /// The management API's address (`--management-port`), if served.
    pub management: Option<SocketAddr>,
    /// The store and what runs over it; empty while another process serves a shared store
    /// (this one forwards to it, see [`crate::follower`]).
    served: Arc<std::sync::Mutex<Option<Served>>>,
    /// Ends the wait for a shared store's lock.
    stop_waiting: Arc<std::sync::atomic::AtomicBool>,
    stop_tx: watch::Sender<bool>,
    task: JoinHandle<Result<(), String>>,
}

/// A store being served, with the copy jobs and the query sample over it.
struct Served {
    store: Store,
    jobs: crate::transfer::jobs::Jobs,
    queries: crate::advise::sample::QuerySample,
}

impl Running {
    /// The endpoint clients use, e.g. `http://127.0.0.1:8081/`.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}/", self.addr)
    }

    /// The store this process serves (`None` while it forwards to another process).
    pub fn store(&self) -> Option<Store> {
        lock(&self.served).as_ref().map(|s| s.store.clone())
    }

    /// Stops accepting, waits for in-flight requests (up to 10 s), flushes storage.
    pub async fn stop(self) -> Result<(), String> {
        self.stop_waiting
            .store(true, std::sync::atomic::Ordering::Release);
        // Copy jobs stop first (they talk to this server) and resume at the next start.
        let queries = lock(&self.served).as_ref().map(|s| {
            s.jobs.stop_all();
            s.queries.clone()
        });
        let _ = self.stop_tx.send(true);
        let stopped = self.task.await.map_err(|e| e.to_string())?;
        if let Some(Err(e)) = queries.map(|q| q.flush()) {
            tracing::warn!(error = %e, "query sample not saved");
        }
        stopped
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Opens the store and starts serving. Returns once the listener is bound. With a shared
/// store another process may be serving already: this one then forwards to it and takes
/// over when it stops ([`crate::follower`]).
pub async fn start(cfg: ServerConfig) -> Result<Running, BoxError> {
    let (acceptor, cert_pem) = match &cfg.tls {
        None => (None, None),
        Some(t) => {
            let (a, pem) = tls_acceptor(t)?;
            (Some(a), Some(pem))
        }
    };
    let listeners = bind_regions(&cfg).await?;
    let addrs = listeners
        .iter()
        .map(|l| l.local_addr())
        .collect::<Result<Vec<_>, _>>()?;
    let addr = addrs[0];
    let tls = acceptor.is_some();
    let management = bind_management(cfg.management_port).await?;
    let management_addr = management
        .as_ref()
        .map(TcpListener::local_addr)
        .transpose()?;
    let site = Site {
        cfg: cfg.clone(),
        addrs: addrs.clone(),
        cert_pem,
        served: Arc::default(),
        management: Arc::new(std::sync::Mutex::new(management)),
    };
    let stop_waiting = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let store_cfg = cfg.store.clone();
    let answering = match tokio::task::spawn_blocking(move || Store::open(store_cfg)).await? {
        Ok(store) => match site.serve(store.clone()).await {
            Ok(app) => crate::serve::Answering::Api(app),
            Err(e) => {
                let _ = tokio::task::spawn_blocking(move || store.shutdown()).await;
                return Err(e);
            }
        },
        Err(StoreError::Engine(KvError::Held)) => {
            tracing::info!("another strata process serves this store: forwarding requests to it, and taking over when it stops");
            let url = cfg.store.postgres.clone().unwrap_or_default();
            let front = crate::follower::Front::new(
                &url,
                cfg.connections.body_timeout,
                site.cert_pem.as_deref(),
            )?;
            let (site, store_cfg) = (site.clone(), cfg.store.clone());
            tokio::spawn(crate::follower::take_over(
                Arc::clone(&front),
                url,
                store_cfg,
                Arc::clone(&stop_waiting),
                move |store| {
                    let site = site.clone();
                    async move { site.serve(store).await.map_err(|e| e.to_string()) }
                },
            ));
            crate::serve::Answering::Front(front)
        }
        Err(e) => return Err(e.into()),
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let limits = cfg.connections.clone();
    let max_connections = connection_budget(limits.max);
    tracing::debug!(max_connections, "connection limit");
    let shared = Arc::new(Accepting {
        answering,
        acceptor,
        limits,
        max_connections,
        permits: Arc::new(Semaphore::new(max_connections)),
        registry: Arc::new(crate::connections::Registry::default()),
        cores: match cfg.store.postgres {
            Some(_) => None,
            None => Some(crate::cores::Cores::per_core()?),
        },
    });
    let served = Arc::clone(&site.served);
    let task = tokio::spawn(async move {
        let graceful = GracefulShutdown::new();
        futures::future::join_all(
            listeners
                .into_iter()
                .enumerate()
                .map(|(region, l)| accept_loop(l, region, &shared, &graceful, stop_rx.clone())),
        )
        .await;
        if tokio::time::timeout(Duration::from_secs(10), graceful.shutdown())
            .await
            .is_err()
        {
            tracing::warn!("some connections did not finish within 10 s of shutdown");
        }
        let Some(store) = lock(&served).as_ref().map(|s| s.store.clone()) else {
            return Ok(());
        };
        tokio::task::spawn_blocking(move || store.shutdown())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())
    });
    Ok(Running {
        addr,
        regions: addrs,
        tls,
        management: management_addr,
        served: site.served,
        stop_waiting,
        stop_tx,
        task,
    })
}

/// One listener per region (one unless --regions), on consecutive ports from `cfg.port`.
async fn bind_regions(cfg: &ServerConfig) -> Result<Vec<TcpListener>, BoxError> {
    let mut listeners = Vec::new();
    for i in 0..cfg.regions.names.len().max(1) {
        let port = match cfg.port {
            0 => 0,
            p => u16::try_from(usize::from(p) + i)
                .map_err(|_| format!("no port {p} + {i} for region {}", i + 1))?,
        };
        let listener = TcpListener::bind((cfg.host.as_str(), port))
            .await
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::AddrInUse => format!(
                    "cannot listen on {}:{port}: the address is already in use (another strata or emulator?); stop it, or choose another --port",
                    cfg.host
                ),
                _ => format!("cannot listen on {}:{port}: {e}", cfg.host),
            })?;
        listeners.push(listener);
    }
    Ok(listeners)
}

/// The management API's listener: on loopback only, since it takes no key.
async fn bind_management(port: Option<u16>) -> Result<Option<TcpListener>, BoxError> {
    let Some(port) = port else { return Ok(None) };
    let listener = TcpListener::bind(("127.0.0.1", port)).await.map_err(|e| {
        format!("cannot listen on 127.0.0.1:{port} for the management API (--management-port): {e}")
    })?;
    Ok(Some(listener))
}

/// What serving a store needs besides the store: the configuration, the bound addresses and
/// the certificate; and where the served store is kept.
#[derive(Clone)]
struct Site {
    cfg: ServerConfig,
    addrs: Vec<SocketAddr>,
    cert_pem: Option<Vec<u8>>,
    served: Arc<std::sync::Mutex<Option<Served>>>,
    /// The management API's listener, until the first store served takes it.
    management: Arc<std::sync::Mutex<Option<TcpListener>>>,
}

impl Site {
    /// Starts serving `store`: the API, background work (splits a raised
    /// throughput calls for, TTL sweeps, copy jobs, the query sample), and on a shared store
    /// this process's address for the others.
    async fn serve(&self, store: Store) -> Result<crate::api::App, BoxError> {
        let cfg = &self.cfg;
        let (app, jobs) = build_app(cfg, store.clone(), self.cert_pem.clone()).await?;
        for (i, a) in self.addrs.iter().enumerate() {
            app.regions.set_port(i, a.port());
        }
        // Resume splits that a raised throughput still calls for (e.g. after a restart).
        for c in store.all_containers() {
            store.maybe_split(&c);
        }
        store.spawn_ttl_sweeper(Duration::from_secs(1));
        crate::gsi::spawn(&app);
        let queries = app.queries.clone();
        queries.spawn_flusher();
        let scheme = if cfg.tls.is_some() { "https" } else { "http" };
        if let Some(listener) = lock(&self.management).take() {
            let endpoints = app
                .regions
                .view()
                .into_iter()
                .zip(&self.addrs)
                .map(|(r, a)| (r.name, format!("{scheme}://{}/", loopback_of(*a))))
                .collect();
            let router =
                crate::manage::Manage::new(store.clone(), app.regions.clone(), endpoints).router();
            let mut stop = store.stop_signal();
            tokio::spawn(async move {
                let stopped = async move {
                    let _ = stop.wait_for(|s| *s).await;
                };
                if let Err(e) = axum::serve(listener, router)
                    .with_graceful_shutdown(stopped)
                    .await
                {
                    tracing::error!(error = %e, "the management API stopped");
                }
            });
        }
        // Jobs reach this server over loopback, as any client would.
        jobs.start(
            &format!("{scheme}://{}/", loopback_of(self.addrs[0])),
            &cfg.key,
        );
        if let Some(url) = &cfg.store.postgres {
            let host = cfg.public_host.clone().unwrap_or_else(|| cfg.host.clone());
            let host = match host.parse::<std::net::IpAddr>() {
                Ok(ip) if ip.is_unspecified() => {
                    loopback_of(SocketAddr::new(ip, 0)).ip().to_string()
                }
                Ok(std::net::IpAddr::V6(ip)) => format!("[{ip}]"),
                _ => host,
            };
            let endpoints: Vec<String> = self
                .addrs
                .iter()
                .map(|a| format!("{scheme}://{host}:{}/", a.port()))
                .collect();
            crate::follower::register(url, &endpoints).await?;
        }
        *lock(&self.served) = Some(Served {
            store,
            jobs,
            queries,
        });
        Ok(app)
    }
}

/// What every region's accept loop shares: what answers, TLS, and one connection budget.
struct Accepting {
    answering: crate::serve::Answering,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    limits: Connections,
    max_connections: usize,
    permits: Arc<Semaphore>,
    registry: Arc<crate::connections::Registry>,
    /// The threads that serve connections, one per core ([`crate::cores`]); none when the
    /// store is a network round trip away: its connections are served on the runtime's
    /// workers, many more than the cores, which cover each call's wait.
    cores: Option<crate::cores::Cores>,
}

/// Accepts connections for one region until the server stops; each is served with the
/// region's number in its requests' extensions.
async fn accept_loop(
    listener: TcpListener,
    region: usize,
    shared: &Accepting,
    graceful: &GracefulShutdown,
    mut stop_rx: watch::Receiver<bool>,
) {
    let mut accept_failed = Throttled::new();
    let mut at_limit = Throttled::new();
    let max_connections = shared.max_connections;
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
        let permit = match Arc::clone(&shared.permits).try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                let closed_idle = shared.registry.close_oldest_idle();
                if let Some(held) = at_limit.due() {
                    tracing::warn!(
                        max_connections,
                        held_back = held,
                        closed_idle,
                        "connection limit reached; new clients take the place of the connections idle the longest, or wait for one to close"
                    );
                }
                tokio::select! {
                    p = Arc::clone(&shared.permits).acquire_owned() => match p {
                        Ok(p) => p,
                        Err(_) => break,
                    },
                    _ = stop_rx.changed() => break,
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let (id, activity) = shared.registry.add();
        let listed = shared.registry.listed(id);
        let opened_ms = shared.registry.now_ms();
        let svc = crate::serve::tracked(
            shared.answering.clone(),
            region,
            &shared.registry,
            &activity,
        );
        let watcher = graceful.watcher();
        let acceptor = shared.acceptor.clone();
        let limits = shared.limits.clone();
        let registry = Arc::clone(&shared.registry);
        let stop = stop_rx.clone();
        let connection = move |stream: tokio::net::TcpStream| async move {
            let _permit = permit;
            // Server shutdown waits for every connection whose watcher is still held.
            let _counted = watcher;
            let _listed = listed;
            let closing = async {
                tokio::select! {
                    _ = activity.close.notified() => "its place was given to a new client",
                    _ = crate::serve::quiet_for(&activity, &registry, opened_ms, limits.header_timeout) =>
                        "no request began within the header timeout",
                    _ = crate::serve::stalled(&activity, &registry, limits.idle_timeout) =>
                        "no byte moved within the idle timeout",
                    _ = stopping(stop) => "the server is stopping",
                }
            };
            crate::serve::serve(
                stream,
                acceptor,
                &limits,
                (&activity, &registry),
                svc,
                closing,
            )
            .await;
        };
        match &shared.cores {
            Some(cores) => {
                if let Err(e) = cores.serve(stream, connection) {
                    tracing::warn!(error = %e, "a connection could not be handed to its thread");
                }
            }
            None => {
                tokio::spawn(connection(stream));
            }
        }
    }
}

/// Resolves once the server has been told to stop (at once if it already has).
async fn stopping(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}

/// The API's state for `cfg` over `store`: keys, the token key, copy jobs, the explorer; with
/// the TLS acceptor when serving HTTPS, and the jobs (started once the listener is bound).
async fn build_app(
    cfg: &ServerConfig,
    store: Store,
    cert_pem: Option<Vec<u8>>,
) -> Result<(App, crate::transfer::jobs::Jobs), BoxError> {
    let keys = api::security::auth::Keys {
        disable_local_auth: cfg.disable_local_auth,
        entra: cfg.entra.clone().map(Arc::new),
        read_write: MasterKey::from_base64(&cfg.key)?,
        read_only: match &cfg.read_only_key {
            Some(k) => Some(MasterKey::from_base64(k)?),
            None => None,
        },
    };
    let token_key = match &cfg.store.postgres {
        Some(url) => shared_token_key(url).await?,
        None => token_key(cfg.store.data_dir.as_deref())?,
    };
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
        &keys,
    );
    let app = App::new(
        store,
        keys,
        token_key,
        ApiOptions {
            tls: cfg.tls.is_some(),
            gateway_compat: cfg.gateway_compat,
            enforce_throughput: cfg.enforce_throughput,
            body_timeout: Some(cfg.connections.body_timeout),
        },
        crate::api::app::Services {
            jobs: jobs.clone(),
            explorer,
            queries: crate::advise::sample::QuerySample::open(cfg.queries.clone())?,
            rbac: api::security::rbac::Rbac::open(
                cfg.rbac
                    .clone()
                    .or_else(|| cfg.store.data_dir.as_ref().map(|d| d.join("rbac.json"))),
            )?,
            regions: crate::regions::Regions::new(&cfg.regions),
        },
    );
    Ok((app, jobs))
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
