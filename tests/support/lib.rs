//! Shared test support: an in-process strata server, a client that signs requests like the
//! SDKs do, and the official Python SDK in a virtualenv.

pub mod postgres;
pub mod python;

use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::sync::Once;
use strata_query::protocol::{auth_scope_of_path, AuthScope, MasterKey, EMULATOR_KEY};
use strata_server::store::container::Limits;
use strata_server::store::StoreConfig;
use strata_server::{Running, ServerConfig, Tls};

/// Installs the ring crypto provider for rustls once per process (reqwest uses rustls).
pub fn crypto() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Options for a test server.
#[derive(Clone, Default)]
pub struct Options {
    pub data_dir: Option<std::path::PathBuf>,
    pub tls: bool,
    pub limits: Option<Limits>,
    pub gateway_compat: bool,
    pub enforce_throughput: bool,
    pub connections: Option<strata_server::Connections>,
    /// A read-only account key (base64) beside the emulator key.
    pub read_only_key: Option<String>,
    /// Listen on this address instead of 127.0.0.1 (e.g. `0.0.0.0`: not loopback only).
    pub host: Option<String>,
    /// Entra ID tokens only (`--disable-local-auth`).
    pub disable_local_auth: bool,
    /// `--store postgres://…`: the data in PostgreSQL.
    pub postgres: Option<String>,
    /// `--regions`: each region on its own ephemeral port.
    pub regions: Option<strata_server::regions::RegionsConfig>,
    /// `--entra-jwks`/`--entra-tenant`: real Entra ID tokens of that tenant verify.
    pub entra: Option<strata_server::api::security::aad::Jwks>,
}

/// A strata server running inside the test process on an ephemeral port.
pub struct TestServer {
    pub running: Option<Running>,
    pub client: Client,
}

impl std::ops::Deref for TestServer {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

/// Signs and sends requests to a strata endpoint, as the SDKs do.
#[derive(Clone)]
pub struct Client {
    pub url: String,
    pub key: MasterKey,
    pub http: reqwest::Client,
}

impl Client {
    pub fn new(url: &str) -> Self {
        crypto();
        Self {
            url: url.to_string(),
            key: MasterKey::from_base64(EMULATOR_KEY).expect("key"),
            // Many idle connections and no Nagle delay: `strata-bench` drives load with this
            // same client.
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(512)
                .tcp_nodelay(true)
                .danger_accept_invalid_certs(true)
                .build()
                .expect("client"),
        }
    }

    /// Signs a request for `scope` and sends it to `path`; the body is returned unparsed.
    /// Transport failures are errors, not panics (the load generator counts them).
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        scope: &AuthScope,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> Result<Raw, String> {
        let date = httpdate::fmt_http_date(std::time::SystemTime::now());
        let auth = self.key.authorization(method.as_str(), scope, &date);
        let mut rb = self
            .http
            .request(method, format!("{}{path}", self.url.trim_end_matches('/')))
            .header("x-ms-date", &date)
            .header("authorization", auth)
            .header("x-ms-version", "2020-07-15");
        for (k, v) in headers {
            rb = rb.header(*k, *v);
        }
        if let Some(b) = body {
            rb = rb.body(b);
        }
        let r = rb.send().await.map_err(|e| e.to_string())?;
        let status = r.status();
        let headers = r.headers().clone();
        let body = r.bytes().await.map_err(|e| e.to_string())?;
        Ok(Raw {
            status,
            headers,
            body,
        })
    }
}

/// A response whose body is not parsed.
pub struct Raw {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: bytes::Bytes,
}

impl TestServer {
    /// An in-memory server over plain HTTP.
    pub async fn start() -> Self {
        Self::start_with(Options::default()).await
    }

    pub async fn start_with(opts: Options) -> Self {
        crypto();
        let cfg = ServerConfig {
            host: opts.host.clone().unwrap_or_else(|| "127.0.0.1".into()),
            port: 0,
            key: EMULATOR_KEY.into(),
            read_only_key: opts.read_only_key.clone(),
            store: StoreConfig {
                data_dir: opts.data_dir.clone(),
                postgres: opts.postgres.clone(),
                limits: opts.limits.clone().unwrap_or_default(),
            },
            tls: opts.tls.then(|| Tls::SelfSigned {
                dir: opts.data_dir.clone().unwrap_or_else(|| {
                    std::env::temp_dir().join(format!("strata-test-tls-{}", std::process::id()))
                }),
                names: Vec::new(),
            }),
            gateway_compat: opts.gateway_compat,
            enforce_throughput: opts.enforce_throughput,
            connections: opts.connections.clone().unwrap_or_default(),
            disable_local_auth: opts.disable_local_auth,
            regions: opts.regions.clone().unwrap_or_default(),
            entra: opts.entra.clone(),
            ..Default::default()
        };
        let running = strata_server::start(cfg).await.expect("server starts");
        let client = Client::new(&running.url());
        Self {
            running: Some(running),
            client,
        }
    }

    pub async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.stop().await.expect("clean shutdown");
        }
    }
}

impl Client {
    /// A signed request; `headers` are added as given.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Value>,
    ) -> Resp {
        self.request_raw(
            method,
            path,
            headers,
            body.map(|b| b.to_string().into_bytes()),
        )
        .await
    }

    /// A signed request with a raw body.
    pub async fn request_raw(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> Resp {
        let scope = auth_scope_of_path(path);
        self.request_signed_as(method, path, &scope, headers, body)
            .await
    }

    /// A request signed for `scope`, whatever `path` it goes to (for testing authorization).
    pub async fn request_signed_as(
        &self,
        method: Method,
        path: &str,
        scope: &AuthScope,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> Resp {
        let Raw {
            status,
            headers,
            body: bytes,
        } = self
            .send(method, path, scope, headers, body)
            .await
            .expect("request sent");
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Resp {
            status,
            headers,
            json,
            bytes: bytes.to_vec(),
        }
    }

    pub async fn get(&self, path: &str, headers: &[(&str, &str)]) -> Resp {
        self.request(Method::GET, path, headers, None).await
    }

    pub async fn post(&self, path: &str, headers: &[(&str, &str)], body: Value) -> Resp {
        self.request(Method::POST, path, headers, Some(body)).await
    }

    /// Creates a database and a container with the given partition key definition.
    pub async fn setup(&self, db: &str, coll: &str, pk: Value) {
        self.setup_with(db, coll, serde_json::json!({"partitionKey": pk}))
            .await;
    }

    /// Creates database `db` (if needed) and container `coll` with the given properties
    /// (`partitionKey`, `indexingPolicy`, `uniqueKeyPolicy`...).
    pub async fn setup_with(&self, db: &str, coll: &str, props: Value) {
        let mut body = props;
        body["id"] = Value::String(coll.to_string());
        let r = self.post("/dbs", &[], serde_json::json!({"id": db})).await;
        assert!(
            r.status.is_success() || r.status == StatusCode::CONFLICT,
            "{r:?}"
        );
        let r = self.post(&format!("/dbs/{db}/colls"), &[], body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    }

    /// Creates an item under the given partition key header.
    pub async fn create(&self, db: &str, coll: &str, pk: &Value, doc: Value) -> Resp {
        let pk = pk.to_string();
        self.post(
            &format!("/dbs/{db}/colls/{coll}/docs"),
            &[("x-ms-documentdb-partitionkey", &pk)],
            doc,
        )
        .await
    }

    /// Runs a query to the end, following continuations; returns all rows and the pages.
    pub async fn query_all(
        &self,
        db: &str,
        coll: &str,
        sql: &str,
        params: Value,
        headers: &[(&str, &str)],
    ) -> (Vec<Value>, Vec<Resp>) {
        let mut rows = Vec::new();
        let mut pages = Vec::new();
        let mut cont: Option<String> = None;
        for _ in 0..10_000 {
            let mut h: Vec<(&str, &str)> = vec![
                ("x-ms-documentdb-isquery", "true"),
                ("content-type", "application/query+json"),
                ("x-ms-documentdb-query-enablecrosspartition", "true"),
            ];
            h.extend_from_slice(headers);
            if let Some(c) = &cont {
                h.push(("x-ms-continuation", c));
            }
            let r = self
                .post(
                    &format!("/dbs/{db}/colls/{coll}/docs"),
                    &h,
                    serde_json::json!({"query": sql, "parameters": params}),
                )
                .await;
            assert_eq!(r.status, StatusCode::OK, "query failed: {r:?}");
            rows.extend(r.json["Documents"].as_array().cloned().unwrap_or_default());
            cont = r.header("x-ms-continuation").map(str::to_string);
            pages.push(r);
            if cont.is_none() {
                return (rows, pages);
            }
        }
        panic!("query did not finish within 10000 pages");
    }

    /// Every item of the container at `docs` (`/dbs/{db}/colls/{coll}/docs`) by id, through
    /// its read feed, all pages; an id returned twice fails the test.
    pub async fn all_items(&self, docs: &str) -> std::collections::HashMap<String, Value> {
        match self.read_feed(docs).await {
            Ok(items) => items,
            Err(id) => panic!("item {id} returned twice"),
        }
    }

    /// [`Client::all_items`], with the id an item returned twice came back with as the error:
    /// a read racing writes that move items between logical partitions (an index catching
    /// up) may meet one before and after its move.
    pub async fn read_feed(
        &self,
        docs: &str,
    ) -> Result<std::collections::HashMap<String, Value>, String> {
        let mut out = std::collections::HashMap::new();
        let mut cont: Option<String> = None;
        loop {
            let mut h = vec![("x-ms-max-item-count", "1000")];
            if let Some(t) = &cont {
                h.push(("x-ms-continuation", t));
            }
            let r = self.get(docs, &h).await;
            assert_eq!(r.status, StatusCode::OK, "{r:?}");
            for d in r.json["Documents"].as_array().into_iter().flatten() {
                let id = d["id"].as_str().unwrap_or_default().to_string();
                if out.insert(id.clone(), d.clone()).is_some() {
                    return Err(id);
                }
            }
            cont = r.header("x-ms-continuation").map(str::to_string);
            if cont.is_none() {
                return Ok(out);
            }
        }
    }
}

/// Asserts a Cosmos-shaped error: status, `code`, a message and an activity id.
pub fn assert_error(r: &Resp, status: u16, code: &str) {
    assert_eq!(r.status.as_u16(), status, "{r:?}");
    assert_eq!(r.json["code"], Value::String(code.into()), "{r:?}");
    assert!(!r.message().is_empty(), "error has a message: {r:?}");
    assert!(r.header("x-ms-activity-id").is_some());
}

/// A response, fully read.
pub struct Resp {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub json: Value,
    pub bytes: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn substatus(&self) -> Option<u32> {
        self.header("x-ms-substatus").and_then(|s| s.parse().ok())
    }

    /// The Cosmos error message (`message` of the body).
    pub fn message(&self) -> &str {
        self.json["message"].as_str().unwrap_or("")
    }

    /// The per-operation status codes of a batch or bulk response (0 where one is missing).
    pub fn batch_statuses(&self) -> Vec<u64> {
        self.json
            .as_array()
            .map(|ops| {
                ops.iter()
                    .map(|o| o["statusCode"].as_u64().unwrap_or(0))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl std::fmt::Debug for Resp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}",
            self.status,
            String::from_utf8_lossy(&self.bytes[..self.bytes.len().min(2000)])
        )
    }
}

/// A fresh temporary directory (removed when dropped).
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(label: &str) -> Self {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!(
            "strata-test-{label}-{}-{n}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir_all(&p).expect("temp dir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Starts `strata` (the test build of the binary at `bin`) as a separate process on a free
/// port with its data in `dir`, so a test can kill it with SIGKILL; returns it and a client.
pub fn spawn_server(bin: &str, dir: &std::path::Path) -> (std::process::Child, Client) {
    spawn_server_with(bin, dir, &[])
}

/// [`spawn_server`] with more flags.
pub fn spawn_server_with(
    bin: &str,
    dir: &std::path::Path,
    flags: &[&str],
) -> (std::process::Child, Client) {
    use std::io::{BufRead, BufReader};
    let mut child = std::process::Command::new(bin)
        .args(["--port", "0", "--log", "warn", "--data-dir"])
        .arg(dir)
        .args(flags)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("start strata");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("banner");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http"))
        .unwrap_or_else(|| panic!("no URL in banner: {line}"))
        .to_string();
    (child, Client::new(&url))
}

/// Installs a `tests/<dir>` Node package's pinned dependencies with `npm ci` when `probe` (a
/// path inside `node_modules`) is missing; CI installs them up front. One test at a time.
pub fn npm_ci(dir: &std::path::Path, probe: &str) {
    if dir.join("node_modules").join(probe).exists() {
        return;
    }
    let lock = std::fs::File::create(dir.join(".install.lock")).expect("lock file");
    lock.lock().expect("lock the install");
    if !dir.join("node_modules").join(probe).exists() {
        let ok = std::process::Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(dir)
            .status()
            .expect("npm must be installed to run the JavaScript tests")
            .success();
        assert!(
            ok,
            "npm ci in {} failed (is the npm registry reachable?)",
            dir.display()
        );
    }
}

/// Runs `node SCRIPT` in `dir` with `env` (off the async workers); returns whether it
/// succeeded and printed a line "ok", and everything it printed.
pub async fn run_node(
    dir: std::path::PathBuf,
    script: &str,
    env: Vec<(String, String)>,
) -> (bool, String) {
    let script = script.to_string();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("node")
            .arg(&script)
            .current_dir(&dir)
            .envs(env)
            .output()
            .expect("node must be installed to run the JavaScript tests")
    })
    .await
    .expect("node runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.success() && text.lines().any(|l| l.trim() == "ok"),
        text,
    )
}
