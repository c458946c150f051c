//! strata-server: a Cosmos DB for NoSQL compatible document store.
//!
//! * [`advise`]: the partition-key advisor (`strata advise`) and the query sample it replays.
//! * [`api`]: the REST protocol: request decoding into endpoints, authentication, one handler
//!   per endpoint, and the reply (and error body) each answers with.
//! * [`items`]: the item-operation layer every request, batch, script and trigger calls down
//!   into: operations, conditions, patches, system properties, the script host, triggers.
//! * [`error`]: [`error::CosmosError`], the one error type of every layer, in Cosmos's shape.
//! * [`api::explorer`]: the built-in Data Explorer, the certificate and readiness endpoints.
//! * [`exec`]: the query executor: one [`exec::Plan`] (routing, access path, paging), run in
//!   its mode (streaming, ordered merge, complete results).
//! * [`store`]: the durable engine, the catalog, containers with their physical partitions.
//! * [`script`]: server-side JavaScript (stored procedures, triggers, UDFs) in sandboxes.
//! * [`throughput`]: request charges and throttling.
//! * [`transfer`]: `strata copy`, `export`, `import` over the Cosmos protocol, and copy jobs.
//! * [`vector`]: vector indexes (distance kernels, quantization, a Vamana graph) in memory.
//! * [`regions`]: the account's regions (`--regions`), each on its own port, with injected
//!   faults and failover.
//! * [`manage`]: the SDK test emulator's management API (`--management-port`): splits and
//!   merges by partition id, replication pause, per-partition failover.
//! * [`net`]: listening (HTTP and HTTPS) and graceful shutdown; [`connections`]: which are
//!   idle, so that at the connection limit the oldest idle one makes room.
//! * [`follower`]: several processes over one PostgreSQL store: the one holding its lock
//!   serves, the others forward to it and take over when it stops.
//! * [`cli`]: the `strata` command line.

pub mod advise;
pub mod api;
pub mod cli;
pub mod connections;
pub mod cores;
pub mod error;
pub mod exec;
pub mod follower;
pub mod gsi;
pub mod items;
pub mod manage;
pub mod net;
pub mod regions;
pub mod script;
mod serve;
pub mod store;
pub mod throughput;
pub mod transfer;
pub mod vector;

pub use net::{start, Connections, Running, ServerConfig, Tls};
