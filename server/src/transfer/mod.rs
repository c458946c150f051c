//! Moving data in and out over the Cosmos REST protocol (so either side may be strata, the
//! official emulator or an Azure account): `strata copy` copies a container online into
//! another (another account, another partition key; see [`copy`]); `strata export` writes a whole account, a database
//! or a container as JSON Lines (optionally gzip) — container definitions (partition key,
//! throughput, TTL, indexing policy, unique keys, every other property, scripts), then their
//! items without system properties — and `strata import` reads it back, creating what is
//! missing and loading items with bulk (non-atomic batches), reporting per-item failures
//! without stopping. Both show progress: a bar with rate and ETA on a terminal, periodic
//! lines otherwise.

pub mod copy;
pub mod export;
pub mod import;
pub mod jobs;
pub mod progress;
pub mod sealed;

use std::time::Duration;
use strata_sdk::{CosmosClient, EMULATOR_KEY};

/// Longest one request of a transfer may wait for an answer (connect, headers, body), and one
/// operation with its retries: a server that accepts connections but never answers fails the
/// transfer with a reason instead of holding it forever.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(120);

/// A Cosmos account to talk to: a connection string (`AccountEndpoint=…;AccountKey=…;`) or an
/// endpoint URL (with the emulator's well-known key). Errors never show the key.
pub fn connect(conn: &str) -> Result<CosmosClient, String> {
    connect_with(conn, OPERATION_TIMEOUT)
}

/// [`connect`] with another bound on each operation, retries included.
pub fn connect_with(conn: &str, operation_timeout: Duration) -> Result<CosmosClient, String> {
    let conn = conn.trim();
    let builder = if conn.to_ascii_lowercase().contains("accountendpoint=") {
        CosmosClient::builder_from_connection_string(conn)
    } else {
        Ok(CosmosClient::builder(conn, EMULATOR_KEY))
    };
    builder
        .and_then(|b| {
            b.timeout(REQUEST_TIMEOUT.min(operation_timeout))
                .connect_timeout(Duration::from_secs(5).min(operation_timeout))
                .operation_timeout(operation_timeout)
                .build()
        })
        .map_err(|e| scrub(&format!("cannot use '{}': {e}", redact(conn)), &[conn]))
}

/// The endpoint a connection string (`AccountEndpoint=…;`) or a bare URL names.
pub fn endpoint_of(conn: &str) -> &str {
    let conn = conn.trim();
    conn.split(';')
        .find_map(|p| {
            p.split_once('=')
                .filter(|(k, _)| k.trim().eq_ignore_ascii_case("accountendpoint"))
                .map(|(_, v)| v)
        })
        .unwrap_or(conn)
        .trim()
}

/// The server on this machine, as its own variables configure it (`STRATA_ENDPOINT`, else
/// `STRATA_PORT` or `PORT`, `STRATA_TLS` or `PROTOCOL`): every subcommand's default, so one
/// started with `PORT=9000` is found by `strata ready`, `partitions`, `copy`, `export` and
/// `import` alike — and by the examples, which ask the SDK the same.
pub fn local_endpoint() -> String {
    strata_sdk::local_endpoint()
}

/// A client for `endpoint` (this machine's strata when none is given), once its port answers:
/// what the commands that talk to one server (`partitions`, `advise`, `regions`) start with.
/// Returns the endpoint used, for messages.
pub async fn connect_checked(endpoint: Option<&str>) -> Result<(String, CosmosClient), String> {
    let endpoint = endpoint.map_or_else(local_endpoint, str::to_string);
    reachable(&endpoint).await?;
    let client = connect(&endpoint)?;
    Ok((endpoint, client))
}

/// How long [`reachable`] waits for a connection.
const PROBE: Duration = Duration::from_secs(2);

/// Fails within seconds, saying so plainly, when nothing listens at `conn`'s endpoint — the
/// SDK would retry a refused connection for half a minute before giving up with a transport
/// error. Only the TCP connection is tried; what answers is the SDK's business.
pub async fn reachable(conn: &str) -> Result<(), String> {
    let endpoint = endpoint_of(conn);
    let (scheme, rest) = endpoint.split_once("://").unwrap_or(("https", endpoint));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit('@').next().unwrap_or_default();
    let has_port = match authority.rfind(']') {
        Some(close) => authority[close..].contains(':'),
        None => authority.contains(':'),
    };
    let default_port = if scheme.eq_ignore_ascii_case("http") {
        80
    } else {
        443
    };
    let target = match has_port {
        true => authority.to_string(),
        false => format!("{authority}:{default_port}"),
    };
    let addrs: Vec<std::net::SocketAddr> = match tokio::net::lookup_host(&target).await {
        Ok(a) => a.collect(),
        Err(e) => return Err(format!("cannot find the server {endpoint}: {e}")),
    };
    let mut refused = false;
    for addr in &addrs {
        match tokio::time::timeout(PROBE, tokio::net::TcpStream::connect(addr)).await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => refused = true,
            Ok(Err(_)) | Err(_) => {}
        }
    }
    Err(match refused {
        true => format!(
            "nothing is listening at {endpoint} (start strata, or name the server with --endpoint / a connection string)"
        ),
        false => format!(
            "{endpoint} does not answer: no connection within {} s",
            PROBE.as_secs()
        ),
    })
}

/// A connection string with its key hidden (`AccountKey=***`).
pub fn redact(conn: &str) -> String {
    conn.split(';')
        .filter(|p| !p.trim().is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, _)) if k.trim().eq_ignore_ascii_case("accountkey") => format!("{k}=***"),
            _ => p.to_string(),
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// `text` with every account key of the connection strings `conns` replaced by `***`: applied
/// to whatever a transfer reports (errors, summaries, logs), however the text was made.
pub fn scrub(text: &str, conns: &[&str]) -> String {
    let mut out = text.to_string();
    for conn in conns {
        for part in conn.split(';') {
            if let Some((k, v)) = part.split_once('=') {
                let v = v.trim();
                if k.trim().eq_ignore_ascii_case("accountkey") && v.len() >= 4 {
                    out = out.replace(v, "***");
                }
            }
        }
    }
    out
}

/// One line of an export file.
pub mod line {
    use serde::{Deserialize, Serialize};
    use serde_json::Value;

    /// A container's definition, before its items.
    #[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
    pub struct Container {
        pub database: String,
        /// The container as the service shows it, without system properties.
        pub definition: Value,
        /// `{"manual": n}` or `{"autoscale": max}`, when the container has its own.
        #[serde(default)]
        pub throughput: Option<Value>,
        /// Stored procedures, triggers and UDFs: `{"kind": "sprocs"|"triggers"|"udfs", ...}`.
        #[serde(default)]
        pub scripts: Vec<Value>,
    }

    /// One item of the container named last before it.
    #[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
    pub struct Item {
        pub database: String,
        pub container: String,
        pub item: Value,
    }

    /// A line: `{"container": {...}}` or `{"item": {...}}`.
    #[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
    #[serde(rename_all = "lowercase")]
    pub enum Line {
        Container(Container),
        Item(Item),
    }
}

/// The system properties an export leaves out (the destination makes its own).
pub use strata_query::protocol::SYSTEM_PROPERTIES as SYSTEM;

/// An item without its system properties (user properties that start with `_` stay).
pub fn strip_item(mut v: serde_json::Value) -> serde_json::Value {
    if let Some(m) = v.as_object_mut() {
        for k in &SYSTEM {
            m.remove(*k);
        }
    }
    v
}

/// A resource definition (container, script) without the service's `_` properties.
pub fn strip_resource(mut v: serde_json::Value) -> serde_json::Value {
    if let Some(m) = v.as_object_mut() {
        m.retain(|k, _| !k.starts_with('_'));
    }
    v
}
