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

use strata_sdk::{CosmosClient, EMULATOR_KEY};

/// A Cosmos account to talk to: a connection string (`AccountEndpoint=…;AccountKey=…;`) or an
/// endpoint URL (with the emulator's well-known key).
pub fn connect(conn: &str) -> Result<CosmosClient, String> {
    let conn = conn.trim();
    let client = if conn.to_ascii_lowercase().contains("accountendpoint=") {
        CosmosClient::from_connection_string(conn)
    } else {
        CosmosClient::new(conn, EMULATOR_KEY)
    };
    client.map_err(|e| format!("cannot use '{conn}': {e}"))
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
pub const SYSTEM: &[&str] = &["_rid", "_self", "_etag", "_ts", "_attachments", "_lsn"];

/// An item without its system properties (user properties that start with `_` stay).
pub fn strip_item(mut v: serde_json::Value) -> serde_json::Value {
    if let Some(m) = v.as_object_mut() {
        for k in SYSTEM {
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
