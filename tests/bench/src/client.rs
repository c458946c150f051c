//! The load generator's view of the tests' signing client (`strata_tests::Client`): the
//! same client drives strata and the baseline server, so the ratios compare servers, not
//! clients; responses are not parsed unless a workload asks.

use reqwest::Method;
use serde_json::Value;
use strata_query::protocol::{auth_scope, path_segments};

/// One server, or several serving one account (`--endpoint A,B`: strata processes over one
/// shared store): requests take the endpoints in turn, as behind a round-robin balancer.
#[derive(Clone)]
pub struct Http {
    clients: std::sync::Arc<Vec<strata_tests::Client>>,
    next: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

/// The outcome of one request.
#[derive(Debug)]
pub struct Outcome {
    pub status: u16,
    pub charge: f64,
    pub body: bytes::Bytes,
    pub continuation: Option<String>,
}

impl Http {
    pub fn new(base: &str) -> Self {
        Self {
            clients: std::sync::Arc::new(vec![strata_tests::Client::new(base)]),
            next: Default::default(),
        }
    }

    /// A client of another server (strata started separately, the official emulator, an
    /// account) signing with `key` (base64); `bases` may list several, comma-separated.
    pub fn with_key(bases: &str, key: &str) -> Result<Self, String> {
        let key = strata_query::protocol::MasterKey::from_base64(key)
            .map_err(|e| format!("--key is not a base64 account key: {e}"))?;
        let clients = bases
            .split(',')
            .map(str::trim)
            .filter(|b| !b.is_empty())
            .map(|b| {
                let mut c = strata_tests::Client::new(b);
                c.key = key.clone();
                c
            })
            .collect::<Vec<_>>();
        if clients.is_empty() {
            return Err("--endpoint names no server".into());
        }
        Ok(Self {
            clients: std::sync::Arc::new(clients),
            next: Default::default(),
        })
    }

    /// The endpoint the next request goes to.
    fn client(&self) -> &strata_tests::Client {
        let i = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        &self.clients[i % self.clients.len()]
    }

    /// The headers that sign a `method` request to `path` now (`x-ms-date`, `authorization`,
    /// `x-ms-version`), valid for the server's clock-skew window (15 minutes): what a load
    /// generator that cannot sign (wrk) sends over and over.
    pub fn signed_headers(
        &self,
        method: &str,
        path: &str,
    ) -> Result<Vec<(String, String)>, String> {
        let scope = auth_scope(&path_segments(path).map_err(|s| format!("bad path segment {s}"))?);
        let date = httpdate::fmt_http_date(std::time::SystemTime::now());
        let auth = self.client().key.authorization(method, &scope, &date);
        Ok(vec![
            ("x-ms-date".into(), date),
            ("authorization".into(), auth),
            ("x-ms-version".into(), "2020-07-15".into()),
        ])
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> Result<Outcome, String> {
        let scope = auth_scope(&path_segments(path).map_err(|s| format!("bad path segment {s}"))?);
        let r = self
            .client()
            .send(method, path, &scope, headers, body)
            .await?;
        let header = |name: &str| r.headers.get(name).and_then(|v| v.to_str().ok());
        Ok(Outcome {
            status: r.status.as_u16(),
            charge: header("x-ms-request-charge")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0),
            continuation: header("x-ms-continuation").map(str::to_string),
            body: r.body,
        })
    }

    /// A request whose response keeps its headers (for metrics and routes).
    pub async fn send_full(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> Result<strata_tests::Raw, String> {
        let scope = auth_scope(&path_segments(path).map_err(|s| format!("bad path segment {s}"))?);
        self.client()
            .send(method, path, &scope, headers, body)
            .await
    }

    pub async fn json(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: &Value,
    ) -> Result<Outcome, String> {
        self.send(
            method,
            path,
            headers,
            Some(serde_json::to_vec(body).unwrap_or_default()),
        )
        .await
    }

    /// Creates a database and a container (ignoring "already exists").
    pub async fn setup(
        &self,
        db: &str,
        coll: &str,
        pk: Value,
        throughput: Option<u32>,
    ) -> Result<(), String> {
        self.setup_with(
            db,
            coll,
            serde_json::json!({"partitionKey": pk}),
            throughput,
        )
        .await
    }

    /// Creates a database and a container with properties `props` (partition key, indexing
    /// policy...), ignoring "already exists".
    pub async fn setup_with(
        &self,
        db: &str,
        coll: &str,
        props: Value,
        throughput: Option<u32>,
    ) -> Result<(), String> {
        let mut body = props;
        body["id"] = Value::String(coll.to_string());
        let r = self
            .json(Method::POST, "/dbs", &[], &serde_json::json!({"id": db}))
            .await?;
        if r.status != 201 && r.status != 409 {
            return Err(format!("create database: {}", r.status));
        }
        let t = throughput.map(|t| t.to_string());
        let mut h = Vec::new();
        if let Some(t) = &t {
            h.push(("x-ms-offer-throughput", t.as_str()));
        }
        let r = self
            .json(Method::POST, &format!("/dbs/{db}/colls"), &h, &body)
            .await?;
        if r.status != 201 && r.status != 409 {
            return Err(format!(
                "create container: {} {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            ));
        }
        Ok(())
    }

    /// Runs a query to the end; returns (rows, RU).
    pub async fn query_all(
        &self,
        db: &str,
        coll: &str,
        sql: &str,
        params: Value,
        extra: &[(&str, &str)],
    ) -> Result<(usize, f64), String> {
        let mut cont: Option<String> = None;
        let (mut rows, mut ru) = (0, 0.0);
        loop {
            let mut h: Vec<(&str, &str)> = vec![
                ("x-ms-documentdb-isquery", "true"),
                ("content-type", "application/query+json"),
                ("x-ms-documentdb-query-enablecrosspartition", "true"),
                ("x-ms-max-item-count", "1000"),
            ];
            h.extend_from_slice(extra);
            if let Some(c) = &cont {
                h.push(("x-ms-continuation", c));
            }
            let r = self
                .json(
                    Method::POST,
                    &format!("/dbs/{db}/colls/{coll}/docs"),
                    &h,
                    &serde_json::json!({"query": sql, "parameters": params}),
                )
                .await?;
            if r.status != 200 {
                return Err(format!(
                    "query {sql}: {} {}",
                    r.status,
                    String::from_utf8_lossy(&r.body)
                ));
            }
            let v: Value = serde_json::from_slice(&r.body).map_err(|e| e.to_string())?;
            rows += v["Documents"].as_array().map(Vec::len).unwrap_or(0);
            ru += r.charge;
            cont = r.continuation;
            if cont.is_none() {
                return Ok((rows, ru));
            }
        }
    }
}
