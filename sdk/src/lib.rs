//! `strata-sdk`: a Rust client for Azure Cosmos DB for NoSQL and for strata.
//!
//! It speaks the Cosmos REST protocol in gateway mode, so it works against strata and against
//! Azure Cosmos DB alike. Hierarchical partition keys are first class: build keys level by
//! level with [`PartitionKeyBuilder`], pass a prefix to scope queries and the change feed, and
//! see on every query page how strata routed it ([`QueryRoute`]).
//!
//! ```no_run
//! use serde::{Deserialize, Serialize};
//! use strata_sdk::{ContainerProperties, CosmosClient, PartitionKeyBuilder, PartitionKeyDefinition, QueryOptions, EMULATOR_KEY};
//!
//! #[derive(Serialize, Deserialize)]
//! struct Event {
//!     id: String,
//!     #[serde(rename = "TenantId")] tenant: String,
//!     #[serde(rename = "UserId")] user: String,
//!     #[serde(rename = "SessionId")] session: String,
//! }
//!
//! # async fn demo() -> Result<(), strata_sdk::Error> {
//! let client = CosmosClient::new("http://127.0.0.1:8081/", EMULATOR_KEY)?;
//! let db = client.create_database_if_not_exists("app").await?;
//! let events = db
//!     .create_container_if_not_exists(ContainerProperties::new(
//!         "events",
//!         PartitionKeyDefinition::hierarchical(["/TenantId", "/UserId", "/SessionId"])?,
//!     ))
//!     .await?;
//! events.create_item(&Event { id: "1".into(), tenant: "contoso".into(), user: "alice".into(), session: "s1".into() }).await?;
//! let tenant = PartitionKeyBuilder::new().add("contoso").build();
//! let all: Vec<Event> = events
//!     .query_all("SELECT * FROM c", QueryOptions { partition_key: Some(tenant), ..Default::default() })
//!     .await?;
//! # let _ = all; Ok(()) }
//! ```
#![deny(missing_docs)]

mod auth;
mod batch;
mod bulk;
mod change_feed;
mod client;
mod container;
mod database;
mod error;
mod feed_range;
mod models;
mod partition_key;
mod patch;
mod pipeline;
mod query;
mod read_many;
mod retry;
mod scripts;
mod session;
mod users;

pub use batch::{BatchOperationResult, BatchResponse, TransactionalBatch};
pub use bulk::{BulkOperation, BulkOptions};
pub use change_feed::{ChangeFeedOptions, ChangeFeedPage, ChangeFeedReader, ChangeFeedStart};
pub use client::{CosmosClient, CosmosClientBuilder, EMULATOR_KEY};
pub use container::{ContainerClient, ItemOptions};
pub use database::DatabaseClient;
pub use error::Error;
pub use feed_range::FeedRange;
pub use models::{
    ContainerProperties, DatabaseProperties, ItemResponse, PartitionKeyRange, Throughput,
};
pub use partition_key::{
    NextLevel, PartitionKey, PartitionKeyBuilder, PartitionKeyDefinition, PartitionKeyValue, levels,
};
pub use patch::PatchOperations;
pub use query::{Query, QueryOptions, QueryPage, QueryRoute};
pub use retry::RetryOptions;
pub use scripts::{
    ExecuteOptions, Script, ScriptsClient, StoredProcedureResponse, TriggerOperation, TriggerType,
};
pub use users::{Permission, PermissionMode, User, UserClient};
