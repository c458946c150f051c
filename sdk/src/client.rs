//! The client: configuration, the request pipeline (signing, retries, error mapping) and the
//! account-level operations.

use crate::auth::Signer;
use crate::error::Error;
use crate::retry::RetryOptions;
use reqwest::Method;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use strata_query::protocol::header;

/// The well-known Cosmos DB emulator key (strata's default). Public, not a secret.
///
/// ```
/// assert!(strata_sdk::EMULATOR_KEY.ends_with("=="));
/// ```
pub const EMULATOR_KEY: &str = strata_query::protocol::EMULATOR_KEY;

/// The endpoint of the strata on this machine, as its own variables start it:
/// `STRATA_ENDPOINT` when set, else `127.0.0.1` at `STRATA_PORT` (or `PORT`, default 8081),
/// over HTTPS when `STRATA_TLS` is set (not `false` or `0`) or `PROTOCOL` starts with `https`.
/// What strata's subcommands and examples connect to when given no endpoint.
///
/// ```
/// let endpoint = strata_sdk::local_endpoint();
/// assert!(endpoint.ends_with('/'));
/// ```
pub fn local_endpoint() -> String {
    endpoint_from(|k| std::env::var(k).ok())
}

/// [`local_endpoint`] over the variables `env` gives.
fn endpoint_from(env: impl Fn(&str) -> Option<String>) -> String {
    let var = |k: &str| env(k).filter(|v| !v.trim().is_empty());
    if let Some(e) = var("STRATA_ENDPOINT") {
        return e;
    }
    let port = var("STRATA_PORT")
        .or_else(|| var("PORT"))
        .unwrap_or_else(|| "8081".into());
    let tls = var("STRATA_TLS").is_some_and(|v| v != "false" && v != "0")
        || var("PROTOCOL").is_some_and(|p| p.to_ascii_lowercase().starts_with("https"));
    format!("{}://127.0.0.1:{port}/", if tls { "https" } else { "http" })
}

/// A client for one Cosmos DB (or strata) account. Cheap to clone; share one per process.
///
/// ```no_run
/// # async fn demo() -> Result<(), strata_sdk::Error> {
/// use strata_sdk::{CosmosClient, EMULATOR_KEY};
/// let client = CosmosClient::new("http://127.0.0.1:8081/", EMULATOR_KEY)?;
/// let db = client.create_database_if_not_exists("app").await?;
/// # let _ = db; Ok(()) }
/// ```
#[derive(Clone)]
pub struct CosmosClient {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    endpoint: String,
    signer: Signer,
    http: reqwest::Client,
    pub(crate) retry: RetryOptions,
    user_agent: String,
    /// Partition key definitions of containers, by link (fetched once).
    pub(crate) pk_cache: Mutex<HashMap<String, crate::PartitionKeyDefinition>>,
    /// Session tokens to send back on reads (see [`crate::session`]).
    pub(crate) sessions: crate::session::Sessions,
    /// Cosmos binary JSON on the wire for item bodies and answers.
    binary: bool,
    /// Longest one operation may take, retries included.
    operation_timeout: Option<Duration>,
    /// Sent with every request (see [`CosmosClientBuilder::throughput_bucket`]).
    throughput_bucket: Option<u8>,
    /// Sent with every request (see [`CosmosClientBuilder::priority`]).
    priority: Option<PriorityLevel>,
}

/// A request's priority (`x-ms-cosmos-priority-level`): when a container's requests run past
/// its throughput, Low ones are throttled first. Either level may use all of it alone.
///
/// ```
/// use strata_sdk::{CosmosClient, PriorityLevel, EMULATOR_KEY};
/// let background = CosmosClient::builder("https://localhost:8081/", EMULATOR_KEY)
///     .priority(PriorityLevel::Low)
///     .build()
///     .unwrap();
/// # let _ = background;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriorityLevel {
    /// The default: throttled only once the budget is spent.
    High,
    /// Throttled first, leaving what High requests are using.
    Low,
}

impl PriorityLevel {
    fn as_header(self) -> &'static str {
        match self {
            PriorityLevel::High => "High",
            PriorityLevel::Low => "Low",
        }
    }
}

/// Options for [`CosmosClient`].
///
/// ```
/// use std::time::Duration;
/// use strata_sdk::{CosmosClient, RetryOptions, EMULATOR_KEY};
/// let client = CosmosClient::builder("https://localhost:8081/", EMULATOR_KEY)
///     .retry(RetryOptions { max_retries: 3, ..RetryOptions::default() })
///     .timeout(Duration::from_secs(10))
///     .max_idle_connections(32)
///     .user_agent("my-app/1.0")
///     .build()
///     .unwrap();
/// # let _ = client;
/// ```
pub struct CosmosClientBuilder {
    endpoint: String,
    key: String,
    /// Resource tokens by resource link, instead of the key.
    tokens: Option<Vec<(String, String)>>,
    retry: RetryOptions,
    timeout: Duration,
    connect_timeout: Duration,
    max_idle: usize,
    accept_invalid_certs: Option<bool>,
    user_agent: Option<String>,
    binary: bool,
    operation_timeout: Option<Duration>,
    throughput_bucket: Option<u8>,
    priority: Option<PriorityLevel>,
}

impl CosmosClientBuilder {
    /// The throughput bucket (1 to 5) every request of this client runs in: a container's
    /// offer may cap each bucket at a share of its throughput, and requests past their
    /// bucket's share are throttled (429 / 3212, retried like any 429). The server refuses
    /// other ids.
    ///
    /// ```
    /// # let b = strata_sdk::CosmosClient::builder("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY);
    /// let etl = b.throughput_bucket(2).build().unwrap();
    /// # let _ = etl;
    /// ```
    pub fn throughput_bucket(mut self, id: u8) -> Self {
        self.throughput_bucket = Some(id);
        self
    }

    /// The priority of every request of this client (see [`PriorityLevel`]).
    ///
    /// ```
    /// # let b = strata_sdk::CosmosClient::builder("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY);
    /// let b = b.priority(strata_sdk::PriorityLevel::Low);
    /// # let _ = b;
    /// ```
    pub fn priority(mut self, p: PriorityLevel) -> Self {
        self.priority = Some(p);
        self
    }

    /// Longest one operation may take from start to answer, retries and their waits
    /// included (default: none; each attempt is still bound by [`Self::timeout`]). Past it
    /// the operation fails with a transport error that names the request and the limit: for
    /// jobs that must not hang on a server that accepts connections but never answers.
    ///
    /// ```
    /// # let b = strata_sdk::CosmosClient::builder("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY);
    /// let b = b.operation_timeout(std::time::Duration::from_secs(120));
    /// # let _ = b;
    /// ```
    pub fn operation_timeout(mut self, t: Duration) -> Self {
        self.operation_timeout = Some(t);
        self
    }

    /// Cosmos binary JSON on the wire (default off): item bodies of creates, upserts and
    /// replaces are sent in the binary format, and point operations and queries ask for
    /// binary answers (`x-ms-cosmos-supported-serialization-formats`), as the official Rust
    /// SDK does by default. Bodies are about a fifth smaller; against strata, which keeps JSON
    /// text, each side spends a little CPU converting (`strata-bench --suite wire` measures
    /// both). Items come back to your code the same either way.
    ///
    /// ```
    /// # let b = strata_sdk::CosmosClient::builder("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY);
    /// let client = b.binary_encoding(true).build().unwrap();
    /// # let _ = client;
    /// ```
    pub fn binary_encoding(mut self, on: bool) -> Self {
        self.binary = on;
        self
    }

    /// Retry policy (default: 9 retries within 30 s, as the official SDKs).
    ///
    /// ```
    /// # let b = strata_sdk::CosmosClient::builder("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY);
    /// let b = b.retry(strata_sdk::RetryOptions::none());
    /// # let _ = b;
    /// ```
    pub fn retry(mut self, r: RetryOptions) -> Self {
        self.retry = r;
        self
    }

    /// Timeout of one request attempt (default 60 s).
    ///
    /// ```
    /// # let b = strata_sdk::CosmosClient::builder("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY);
    /// let b = b.timeout(std::time::Duration::from_secs(5));
    /// # let _ = b;
    /// ```
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }

    /// Timeout for establishing a connection (default 5 s).
    ///
    /// ```
    /// # let b = strata_sdk::CosmosClient::builder("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY);
    /// let b = b.connect_timeout(std::time::Duration::from_secs(1));
    /// # let _ = b;
    /// ```
    pub fn connect_timeout(mut self, t: Duration) -> Self {
        self.connect_timeout = t;
        self
    }

    /// Most idle connections kept per host (default 64).
    ///
    /// ```
    /// # let b = strata_sdk::CosmosClient::builder("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY);
    /// let b = b.max_idle_connections(8);
    /// # let _ = b;
    /// ```
    pub fn max_idle_connections(mut self, n: usize) -> Self {
        self.max_idle = n;
        self
    }

    /// Accept self-signed certificates. Default: only for `localhost` and `127.0.0.1` (the
    /// emulator's certificate), as the official SDKs do.
    ///
    /// ```
    /// # let b = strata_sdk::CosmosClient::builder("https://my-host:8081/", strata_sdk::EMULATOR_KEY);
    /// let b = b.accept_invalid_certs(true);
    /// # let _ = b;
    /// ```
    pub fn accept_invalid_certs(mut self, yes: bool) -> Self {
        self.accept_invalid_certs = Some(yes);
        self
    }

    /// The `User-Agent` suffix.
    ///
    /// ```
    /// # let b = strata_sdk::CosmosClient::builder("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY);
    /// let b = b.user_agent("orders-service/2.3");
    /// # let _ = b;
    /// ```
    pub fn user_agent(mut self, ua: impl Into<String>) -> Self {
        self.user_agent = Some(ua.into());
        self
    }

    /// Builds the client.
    ///
    /// ```
    /// let c = strata_sdk::CosmosClient::builder("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY).build();
    /// assert!(c.is_ok());
    /// ```
    pub fn build(self) -> Result<CosmosClient, Error> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut endpoint = self.endpoint.trim().to_string();
        if !endpoint.starts_with("http://") && !endpoint.starts_with("https://") {
            return Err(Error::invalid(format!(
                "the endpoint '{endpoint}' must start with http:// or https://"
            )));
        }
        if !endpoint.ends_with('/') {
            endpoint.push('/');
        }
        let host = endpoint
            .split("://")
            .nth(1)
            .and_then(|r| r.split(['/', ':']).next())
            .unwrap_or("");
        let local = host == "localhost" || host == "127.0.0.1" || host == "[::1]";
        let insecure = self.accept_invalid_certs.unwrap_or(local);
        let http = reqwest::Client::builder()
            .danger_accept_invalid_certs(insecure)
            .timeout(self.timeout)
            .connect_timeout(self.connect_timeout)
            .pool_max_idle_per_host(self.max_idle)
            .tcp_nodelay(true)
            .build()
            .map_err(Error::transport)?;
        let ua = match self.user_agent {
            Some(s) => format!("strata-sdk/{} {s}", env!("CARGO_PKG_VERSION")),
            None => format!("strata-sdk/{}", env!("CARGO_PKG_VERSION")),
        };
        Ok(CosmosClient {
            inner: Arc::new(Inner {
                endpoint,
                signer: match self.tokens {
                    Some(t) => Signer::tokens(t)?,
                    None => Signer::new(&self.key)?,
                },
                http,
                retry: self.retry,
                user_agent: ua,
                pk_cache: Mutex::new(HashMap::new()),
                sessions: Default::default(),
                binary: self.binary,
                operation_timeout: self.operation_timeout,
                throughput_bucket: self.throughput_bucket,
                priority: self.priority,
            }),
        })
    }
}

/// A raw successful response.
#[derive(Debug, Clone)]
pub(crate) struct RawResponse {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Vec<u8>,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn charge(&self) -> f64 {
        self.header(header::REQUEST_CHARGE)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    }

    pub fn json(&self) -> Result<Value, Error> {
        serde_json::from_slice(&self.body).map_err(Error::serde)
    }
}

/// One request, rebuilt (and re-signed) for every attempt.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub method: Method,
    /// Percent-encoded path, e.g. `/dbs/db/colls/c/docs`.
    pub path: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Option<Vec<u8>>,
    /// What the request may carry in Cosmos binary JSON when the client has it on.
    pub wire: Wire,
}

/// The operations the service speaks Cosmos binary JSON for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Wire {
    /// Text only.
    #[default]
    Text,
    /// A point operation on an item: its body (if any) is a document, its answer may be binary.
    Item,
    /// A query: the body is a query spec (text), the pages may come back binary.
    Query,
}

impl Request {
    pub fn new(method: Method, path: impl Into<String>) -> Self {
        Self {
            method,
            path: path.into(),
            headers: Vec::new(),
            body: None,
            wire: Wire::Text,
        }
    }

    pub fn wire(mut self, w: Wire) -> Self {
        self.wire = w;
        self
    }

    /// The request as sent with binary encoding on: the negotiation header, and a document
    /// body in binary.
    fn binary(mut self) -> Result<Self, Error> {
        use strata_query::binary;
        use strata_query::protocol::header::SUPPORTED_SERIALIZATION_FORMATS as FORMATS;
        match self.wire {
            Wire::Text => {}
            Wire::Item => {
                if let Some(b) = self.body.as_mut().filter(|b| !binary::is_binary(b)) {
                    *b = binary::from_text(b).map_err(Error::serde)?;
                }
                self.headers.push((FORMATS, binary::FORMAT_NAME.into()));
            }
            Wire::Query => self.headers.push((FORMATS, "JsonText,CosmosBinary".into())),
        }
        Ok(self)
    }

    pub fn header(mut self, k: &'static str, v: impl Into<String>) -> Self {
        self.headers.push((k, v.into()));
        self
    }

    pub fn json(mut self, v: &Value) -> Self {
        self.body = Some(serde_json::to_vec(v).unwrap_or_default());
        self.headers
            .push((header::CONTENT_TYPE, "application/json".into()));
        self
    }

    fn idempotent(&self) -> bool {
        self.method == Method::GET
            || self
                .headers
                .iter()
                .any(|(k, v)| *k == header::IS_QUERY && v == "true")
    }
}

/// The most JSON text a binary answer may expand to.
const MAX_ANSWER: usize = 256 << 20;

/// Percent-encodes one path segment (ids may contain spaces, unicode, ...).
pub(crate) fn seg(s: &str) -> String {
    const SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(s, SET).to_string()
}

impl CosmosClient {
    /// A client with default options.
    ///
    /// ```
    /// let c = strata_sdk::CosmosClient::new("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY);
    /// assert!(c.is_ok());
    /// ```
    pub fn new(endpoint: &str, key: &str) -> Result<Self, Error> {
        Self::builder(endpoint, key).build()
    }

    /// A builder for a client with options.
    ///
    /// ```
    /// let c = strata_sdk::CosmosClient::builder("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY).build();
    /// # let _ = c;
    /// ```
    pub fn builder(endpoint: &str, key: &str) -> CosmosClientBuilder {
        CosmosClientBuilder {
            endpoint: endpoint.to_string(),
            key: key.to_string(),
            tokens: None,
            retry: RetryOptions::default(),
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(5),
            max_idle: 64,
            accept_invalid_certs: None,
            user_agent: None,
            binary: false,
            operation_timeout: None,
            throughput_bucket: None,
            priority: None,
        }
    }

    /// A client from a connection string (`AccountEndpoint=https://…;AccountKey=…;`, as the
    /// Azure portal and the emulators print them).
    ///
    /// ```
    /// let c = strata_sdk::CosmosClient::from_connection_string(
    ///     "AccountEndpoint=http://127.0.0.1:8081/;AccountKey=C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==;",
    /// ).unwrap();
    /// assert_eq!(c.endpoint(), "http://127.0.0.1:8081/");
    /// assert!(strata_sdk::CosmosClient::from_connection_string("AccountKey=abc").is_err());
    /// ```
    pub fn from_connection_string(connection_string: &str) -> Result<Self, Error> {
        Self::builder_from_connection_string(connection_string)?.build()
    }

    /// A [`CosmosClientBuilder`] from a connection string, for further options.
    ///
    /// ```
    /// let b = strata_sdk::CosmosClient::builder_from_connection_string(
    ///     "AccountEndpoint=http://127.0.0.1:8081/;AccountKey=C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==",
    /// ).unwrap();
    /// let c = b.user_agent("orders/1.0").build().unwrap();
    /// # let _ = c;
    /// ```
    pub fn builder_from_connection_string(
        connection_string: &str,
    ) -> Result<CosmosClientBuilder, Error> {
        let (mut endpoint, mut key) = (None, None);
        for part in connection_string
            .split(';')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            // Keys are base64 and may end in '=': split at the first '=' only.
            let Some((name, value)) = part.split_once('=') else {
                return Err(Error::invalid(format!(
                    "the connection string part '{part}' is not Name=Value"
                )));
            };
            match name.trim().to_ascii_lowercase().as_str() {
                "accountendpoint" => endpoint = Some(value.trim().to_string()),
                "accountkey" => key = Some(value.trim().to_string()),
                _ => {}
            }
        }
        match (endpoint, key) {
            (Some(e), Some(k)) => Ok(Self::builder(&e, &k)),
            _ => Err(Error::invalid(
                "a connection string needs AccountEndpoint=...;AccountKey=...;",
            )),
        }
    }

    /// A client authorized by resource tokens (from [`crate::Permission::token`]) instead of
    /// the account key, each issued for a resource link: every request carries the token of
    /// the most specific link that covers it. It may do what the tokens' permissions grant.
    ///
    /// ```no_run
    /// # async fn f(admin: strata_sdk::CosmosClient) -> Result<(), strata_sdk::Error> {
    /// use strata_sdk::{CosmosClient, Permission, PermissionMode, PartitionKeyBuilder};
    /// let user = admin.database("app").create_user("contoso-app").await?;
    /// let tenant = PartitionKeyBuilder::new().add("contoso").build();
    /// let p = user
    ///     .create_permission(&Permission::new("tenant", PermissionMode::All, "dbs/app/colls/sessions").with_partition_key(tenant))
    ///     .await?;
    /// let client = CosmosClient::with_resource_tokens(
    ///     "http://127.0.0.1:8081/",
    ///     [("dbs/app/colls/sessions".to_string(), p.token.unwrap_or_default())],
    /// )?;
    /// # let _ = client; Ok(()) }
    /// ```
    pub fn with_resource_tokens(
        endpoint: &str,
        tokens: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, Error> {
        let mut b = Self::builder(endpoint, "");
        b.tokens = Some(tokens.into_iter().collect());
        b.build()
    }

    /// The account endpoint.
    ///
    /// ```
    /// let c = strata_sdk::CosmosClient::new("http://127.0.0.1:8081", strata_sdk::EMULATOR_KEY).unwrap();
    /// assert_eq!(c.endpoint(), "http://127.0.0.1:8081/");
    /// ```
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint
    }

    /// Whether a strata server answers its readiness probe (`/_strata/ready`, strata only):
    /// for scripts and tests that start strata and wait for it.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), strata_sdk::Error> {
    /// let client = strata_sdk::CosmosClient::new("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY)?;
    /// while client.strata_ready().await.is_err() {
    ///     tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn strata_ready(&self) -> Result<Value, Error> {
        self.send(Request::new(Method::GET, "/_strata/ready"))
            .await?
            .json()
    }

    /// Sends a request through the pipeline: sign, send, map errors, retry.
    pub(crate) async fn send(&self, req: Request) -> Result<RawResponse, Error> {
        let req = if self.inner.binary {
            req.binary()?
        } else {
            req
        };
        let Some(limit) = self.inner.operation_timeout else {
            return self.send_with_retries(&req).await;
        };
        tokio::time::timeout(limit, self.send_with_retries(&req))
            .await
            .unwrap_or_else(|_| {
                Err(Error::timed_out(format!(
                    "{} {}{} got no answer within {} s",
                    req.method,
                    self.inner.endpoint,
                    req.path.trim_start_matches('/'),
                    limit.as_secs_f64()
                )))
            })
    }

    async fn send_with_retries(&self, req: &Request) -> Result<RawResponse, Error> {
        let retry = &self.inner.retry;
        let mut attempt = 0u32;
        let mut waited = Duration::ZERO;
        loop {
            let result = self.attempt(req).await;
            let wait = match &result {
                Ok(_) => return result,
                Err(e) => {
                    let retryable = match e.status() {
                        Some(429) => true,
                        Some(503) | Some(408) => req.idempotent(),
                        Some(_) => false,
                        None => e.is_transport() && (req.idempotent() || is_connect(e)),
                    };
                    if !retryable || attempt >= retry.max_retries {
                        return result;
                    }
                    attempt += 1;
                    match (e.status(), e.retry_after()) {
                        (Some(429), Some(after)) => after.min(retry.max_delay.max(after)),
                        _ => retry.jittered(attempt),
                    }
                }
            };
            if waited + wait > retry.max_total_wait {
                return result;
            }
            if let Err(e) = &result {
                tracing::debug!(attempt, wait_ms = wait.as_millis() as u64, status = ?e.status(), path = %req.path, "retrying request");
            }
            tokio::time::sleep(wait).await;
            waited += wait;
        }
    }

    async fn attempt(&self, req: &Request) -> Result<RawResponse, Error> {
        let date = httpdate::fmt_http_date(std::time::SystemTime::now());
        let auth = self
            .inner
            .signer
            .authorization(req.method.as_str(), &req.path, &date);
        let url = format!(
            "{}{}",
            self.inner.endpoint,
            req.path.trim_start_matches('/')
        );
        let mut rb = self
            .inner
            .http
            .request(req.method.clone(), url)
            .header(header::DATE, &date)
            .header(header::AUTHORIZATION, auth)
            .header(header::VERSION, strata_query::protocol::API_VERSION)
            .header("user-agent", &self.inner.user_agent)
            .header("accept", "application/json");
        for (k, v) in &req.headers {
            rb = rb.header(*k, v);
        }
        if let Some(b) = self.inner.throughput_bucket {
            rb = rb.header(header::THROUGHPUT_BUCKET, b.to_string());
        }
        if let Some(p) = self.inner.priority {
            rb = rb.header(header::PRIORITY_LEVEL, p.as_header());
        }
        // Reads carry the session tokens this client has seen for their container.
        let sent_session = req.headers.iter().any(|(k, _)| *k == header::SESSION_TOKEN);
        let session = (req.idempotent() && !sent_session)
            .then(|| self.inner.sessions.header_for(&req.path))
            .flatten();
        if let Some(t) = session {
            rb = rb.header(header::SESSION_TOKEN, t);
        }
        if let Some(b) = &req.body {
            rb = rb.body(b.clone());
        }
        let resp = rb.send().await.map_err(Error::transport)?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let mut body = resp.bytes().await.map_err(Error::transport)?.to_vec();
        // A binary answer (it starts with 0x80) is turned into text once, here.
        if strata_query::binary::is_binary(&body) {
            body = strata_query::binary::to_text(&body, MAX_ANSWER).map_err(Error::binary)?;
        }
        if let Some(t) = headers
            .get(header::SESSION_TOKEN)
            .and_then(|v| v.to_str().ok())
        {
            self.inner.sessions.record(&req.path, t);
        }
        if req.method == Method::DELETE
            && crate::session::container_of(&req.path)
                .is_some_and(|c| c == req.path.trim_end_matches('/'))
        {
            self.inner.sessions.forget(&req.path);
        }
        if status < 400 {
            return Ok(RawResponse {
                status,
                headers,
                body,
            });
        }
        let h = |n: &str| {
            headers
                .get(n)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let code = parsed["code"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| status.to_string());
        let message = parsed["message"]
            .as_str()
            .map(|m| m.split("\r\nActivityId").next().unwrap_or(m).to_string())
            .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
        let retry_after = h(header::RETRY_AFTER_MS)
            .and_then(|v| v.parse::<f64>().ok())
            .map(|ms| Duration::from_secs_f64(ms / 1000.0));
        Err(Error::service(
            status,
            h(header::SUB_STATUS).and_then(|v| v.parse().ok()),
            code,
            message,
            h(header::ACTIVITY_ID),
            retry_after,
        ))
    }
}

fn is_connect(e: &Error) -> bool {
    use std::error::Error as _;
    e.source()
        .and_then(|s| s.downcast_ref::<reqwest::Error>())
        .is_some_and(|r| r.is_connect())
}

impl std::fmt::Debug for CosmosClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CosmosClient")
            .field("endpoint", &self.inner.endpoint)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    /// The variables a strata is started with find it.
    #[test]
    fn the_local_endpoint_follows_the_servers_variables() {
        let at = |vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            super::endpoint_from(move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
        };
        assert_eq!(at(&[]), "http://127.0.0.1:8081/");
        assert_eq!(at(&[("PORT", "9000")]), "http://127.0.0.1:9000/");
        assert_eq!(
            at(&[
                ("PORT", "9000"),
                ("STRATA_PORT", "9100"),
                ("PROTOCOL", "https")
            ]),
            "https://127.0.0.1:9100/"
        );
        assert_eq!(
            at(&[("STRATA_TLS", "0"), ("STRATA_PORT", " ")]),
            "http://127.0.0.1:8081/"
        );
        assert_eq!(
            at(&[("STRATA_ENDPOINT", "http://strata:8081/"), ("PORT", "1")]),
            "http://strata:8081/"
        );
    }
}
