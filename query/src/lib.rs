//! `strata-query`: the pure core of strata, shared by the server and the SDK.
//!
//! * [`pk`]: partition key definitions and values, and effective partition key (EPK) hashing
//!   that matches the official Cosmos DB SDKs bit for bit.
//! * [`sql`]: the Cosmos SQL dialect: parse, plan (partition routing), evaluate and merge.
//! * [`index`]: indexing policies, index terms and the access paths queries take.
//! * [`members`]: a document text's top-level properties read as slices: what a write changed,
//!   and the properties a query parses.
//! * [`protocol`]: master-key signing, signature scopes, header names: what clients and the
//!   server must agree on.

pub mod binary;
pub mod index;
pub mod members;
pub mod patch;
pub mod pk;
pub mod protocol;
pub mod sql;
