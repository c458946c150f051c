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
//!
//! # Coming from `azure_data_cosmos`
//!
//! strata-sdk speaks the same protocol as Azure's official Rust crate and offers its shape
//! beside its own conveniences (key extraction from typed items, routes on query pages):
//!
//! | `azure_data_cosmos` | strata-sdk |
//! |---|---|
//! | `CosmosClient::with_key(endpoint, key, None)` | [`CosmosClient::new`]`(endpoint, key)` or [`CosmosClient::builder`] |
//! | `CosmosClient::with_connection_string(cs, None)` | [`CosmosClient::from_connection_string`]`(cs)` |
//! | `client.database_client("db")` | [`CosmosClient::database_client`] (or `database`) |
//! | `db.container_client("c")` | [`DatabaseClient::container_client`] (or `container`) |
//! | `client.create_database("db", None)` | [`CosmosClient::create_database`]`("db")` |
//! | `db.create_container(properties, None)` | [`DatabaseClient::create_container`]`(properties)` |
//! | `container.create_item(pk, item, None)` | [`ContainerClient::create_item`]`(&item)` (key read from the item) or `create_item_with_key(&item, pk)` |
//! | `container.read_item::<T>(pk, id, None)` | [`ContainerClient::read_item`]`::<T>(id, pk)` |
//! | `container.replace_item(pk, id, item, None)` | [`ContainerClient::replace_item`]`(id, &item, options)` |
//! | `container.upsert_item(pk, item, None)` | [`ContainerClient::upsert_item`]`(&item, options)` |
//! | `container.delete_item(pk, id, None)` | [`ContainerClient::delete_item`]`(id, pk, options)` |
//! | `container.patch_item(pk, id, patch, None)` | [`ContainerClient::patch_item`]`(id, pk, ops, options)` |
//! | `container.query_items::<T>(q, pk, None)` → items, `.into_pages()` | [`ContainerClient::query`]`::<T>(q, options)` → items, [`ItemPager::into_pages`]; or [`ContainerClient::query_items`] (pages) |
//! | `PartitionKey::from(("a", "b"))` | the same: `("a", "b").into()`, or [`PartitionKeyBuilder`] |
//! | `container.execute_transactional_batch(batch, None)` | [`ContainerClient::execute_batch`]`(batch)` |
//! | (bulk, read many) | [`ContainerClient::execute_bulk`], [`ContainerClient::read_many`] |
//! | (feed ranges) | [`ContainerClient::feed_ranges`], [`QueryOptions::feed_range`], [`ChangeFeedOptions::feed_range`] |
//! | change feed as a stream | [`ContainerClient::change_feed`] then [`ChangeFeedReader::into_stream`] (or `next_page`) |
//! | change feed processor | [`ChangeFeedProcessor`] |
//! | (stored procedures, users and permissions) | [`ContainerClient::scripts`], [`DatabaseClient::create_user`], [`CosmosClient::with_resource_tokens`] |
//!
//! Point operations take the id before the key (the key is optional on writes: strata-sdk
//! reads it from the item with the container's definition).
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
mod processor;
mod query;
mod read_many;
mod regions;
mod retry;
mod scripts;
mod session;
mod shape;
mod users;

pub use batch::{BatchOperationResult, BatchResponse, TransactionalBatch};
pub use bulk::{BulkOperation, BulkOptions};
pub use change_feed::{
    ChangeFeedMode, ChangeFeedOptions, ChangeFeedPage, ChangeFeedReader, ChangeFeedStart,
};
pub use client::{CosmosClient, CosmosClientBuilder, EMULATOR_KEY, PriorityLevel, local_endpoint};
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
pub use processor::{ChangeFeedProcessor, ProcessorOptions};
pub use query::{Query, QueryOptions, QueryPage, QueryRoute};
pub use retry::RetryOptions;
pub use scripts::{
    ExecuteOptions, Script, ScriptsClient, StoredProcedureResponse, TriggerOperation, TriggerType,
};
pub use shape::ItemPager;
pub use users::{Permission, PermissionMode, User, UserClient};
