//! The Cosmos DB resources, one handler file each: the account, databases, containers,
//! items, queries, feeds, batches, scripts, users, offers, conflicts.

pub mod account;
pub mod batch;
pub mod changefeed;
pub mod conflicts;
pub mod containers;
pub mod databases;
pub mod feed;
pub mod history;
pub mod items;
pub mod offers;
pub mod pkranges;
pub mod query;
pub mod scripts;
pub mod sprocs;
pub mod users;
