//! Decodes an HTTP request (method, path, a few headers) into a typed [`Endpoint`].
//!
//! Paths are Cosmos resource links: name-based (`/dbs/db1/colls/c1/docs/a%20b`), with or
//! without a trailing slash, ids percent-encoded. The same segments also give the resource type
//! and link that the master-key signature covers.

pub mod facts;

pub use facts::{Part, Target};

use crate::error::CosmosError;
use crate::store::scripts::ScriptKind;
use axum::http::{HeaderMap, Method};
use std::borrow::Cow;
use strata_query::protocol::header;

/// Every operation strata serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    ReadAccount,
    ListDatabases,
    QueryDatabases,
    CreateDatabase,
    ReadDatabase {
        db: String,
    },
    DeleteDatabase {
        db: String,
    },
    ListContainers {
        db: String,
    },
    QueryContainers {
        db: String,
    },
    CreateContainer {
        db: String,
    },
    ReadContainer {
        db: String,
        coll: String,
    },
    ReplaceContainer {
        db: String,
        coll: String,
    },
    DeleteContainer {
        db: String,
        coll: String,
    },
    ReadItemFeed {
        db: String,
        coll: String,
    },
    ChangeFeed {
        db: String,
        coll: String,
    },
    CreateItem {
        db: String,
        coll: String,
    },
    QueryItems {
        db: String,
        coll: String,
    },
    RoutePlan {
        db: String,
        coll: String,
    },
    Batch {
        db: String,
        coll: String,
    },
    ReadItem {
        db: String,
        coll: String,
        id: String,
    },
    ReplaceItem {
        db: String,
        coll: String,
        id: String,
    },
    DeleteItem {
        db: String,
        coll: String,
        id: String,
    },
    PatchItem {
        db: String,
        coll: String,
        id: String,
    },
    DeleteAllItemsByPartitionKey {
        db: String,
        coll: String,
    },
    ReadPkRanges {
        db: String,
        coll: String,
    },
    ListOffers,
    QueryOffers,
    ReadOffer {
        id: String,
    },
    ReplaceOffer {
        id: String,
    },
    InspectPartitions {
        db: String,
        coll: String,
    },
    /// `/_strata/containers/{db}/{coll}/queries`: the query sample (GET) or forgetting it.
    ReadQuerySample {
        db: String,
        coll: String,
    },
    ClearQuerySample {
        db: String,
        coll: String,
    },
    /// `/_strata/containers/{db}/{coll}/advise`: the partition-key advisor.
    Advise {
        db: String,
        coll: String,
    },
    /// `/_strata/storage`: where the store's bytes go, on disk by key space and in memory.
    ReadStorage,
    /// `/_strata/regions`: the account's regions and their faults; a region's fault; a
    /// manual failover of the write region.
    ReadRegions,
    SetRegionFault {
        region: String,
    },
    FailOver {
        region: String,
    },
    /// `/_strata/rbac`: the data-plane RBAC policy for Entra ID principals.
    ReadRbac,
    ReplaceRbac,
    /// `/_strata/jobs`: server-side copy jobs.
    ListJobs,
    CreateJob,
    ReadJob {
        id: String,
    },
    DeleteJob {
        id: String,
    },
    ListConflicts {
        db: String,
        coll: String,
    },
    QueryConflicts {
        db: String,
        coll: String,
    },
    /// List a container's stored procedures, triggers or UDFs.
    ListScripts {
        db: String,
        coll: String,
        kind: ScriptKind,
    },
    QueryScripts {
        db: String,
        coll: String,
        kind: ScriptKind,
    },
    /// Create (or upsert, by header) a script.
    CreateScript {
        db: String,
        coll: String,
        kind: ScriptKind,
    },
    ReadScript {
        db: String,
        coll: String,
        kind: ScriptKind,
        id: String,
    },
    ReplaceScript {
        db: String,
        coll: String,
        kind: ScriptKind,
        id: String,
    },
    DeleteScript {
        db: String,
        coll: String,
        kind: ScriptKind,
        id: String,
    },
    ExecuteStoredProcedure {
        db: String,
        coll: String,
        id: String,
    },
    ListUsers {
        db: String,
    },
    QueryUsers {
        db: String,
    },
    /// Create (or upsert, by header) a user.
    CreateUser {
        db: String,
    },
    ReadUser {
        db: String,
        user: String,
    },
    ReplaceUser {
        db: String,
        user: String,
    },
    DeleteUser {
        db: String,
        user: String,
    },
    ListPermissions {
        db: String,
        user: String,
    },
    QueryPermissions {
        db: String,
        user: String,
    },
    /// Create (or upsert, by header) a permission.
    CreatePermission {
        db: String,
        user: String,
    },
    ReadPermission {
        db: String,
        user: String,
        id: String,
    },
    ReplacePermission {
        db: String,
        user: String,
        id: String,
    },
    DeletePermission {
        db: String,
        user: String,
        id: String,
    },
    /// Read or delete one conflict.
    Conflict {
        db: String,
        coll: String,
        id: String,
    },
}

pub use strata_query::protocol::{auth_scope, is_rid_based, AuthScope, SignedAs};

/// Splits and percent-decodes a request path; empty segments (trailing slashes) are dropped.
pub fn path_segments(path: &str) -> Result<Vec<Cow<'_, str>>, CosmosError> {
    strata_query::protocol::path_segments(path).map_err(|s| {
        CosmosError::bad_request(format!(
            "The request path segment '{s}' is not valid percent-encoded UTF-8."
        ))
    })
}

fn flag(headers: &HeaderMap, name: &str) -> bool {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().eq_ignore_ascii_case("true"))
        .unwrap_or(false)
}

fn is_query(headers: &HeaderMap) -> bool {
    flag(headers, header::IS_QUERY)
        || headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.starts_with("application/query+json"))
            .unwrap_or(false)
}

fn not_allowed(method: &Method, what: &str) -> CosmosError {
    CosmosError::method_not_allowed(format!("The method {method} is not supported on {what}."))
}

fn unsupported(kind: &str) -> CosmosError {
    CosmosError::bad_request(format!(
        "strata does not support '{kind}' resources; it serves databases, containers, items, stored procedures, triggers, user-defined functions, users, permissions, partition key ranges and offers."
    ))
}

impl Endpoint {
    /// Decodes the request into an endpoint.
    pub fn decode(
        method: &Method,
        segs: &[Cow<'_, str>],
        headers: &HeaderMap,
    ) -> Result<Self, CosmosError> {
        let s: Vec<&str> = segs.iter().map(|s| s.as_ref()).collect();
        let m = method;
        let owned = |x: &str| x.to_string();
        Ok(match s.as_slice() {
            [] => match *m {
                Method::GET | Method::HEAD => Endpoint::ReadAccount,
                _ => return Err(not_allowed(m, "the account")),
            },
            ["dbs"] => match *m {
                Method::GET => Endpoint::ListDatabases,
                Method::POST if is_query(headers) => Endpoint::QueryDatabases,
                Method::POST => Endpoint::CreateDatabase,
                _ => return Err(not_allowed(m, "databases")),
            },
            ["dbs", db] => match *m {
                Method::GET => Endpoint::ReadDatabase { db: owned(db) },
                Method::DELETE => Endpoint::DeleteDatabase { db: owned(db) },
                _ => return Err(not_allowed(m, "a database")),
            },
            ["dbs", db, "colls"] => match *m {
                Method::GET => Endpoint::ListContainers { db: owned(db) },
                Method::POST if is_query(headers) => Endpoint::QueryContainers { db: owned(db) },
                Method::POST => Endpoint::CreateContainer { db: owned(db) },
                _ => return Err(not_allowed(m, "containers")),
            },
            ["dbs", db, "colls", coll] => {
                let (db, coll) = (owned(db), owned(coll));
                match *m {
                    Method::GET => Endpoint::ReadContainer { db, coll },
                    Method::PUT => Endpoint::ReplaceContainer { db, coll },
                    Method::DELETE => Endpoint::DeleteContainer { db, coll },
                    _ => return Err(not_allowed(m, "a container")),
                }
            }
            ["dbs", _, "colls", _, _, ..] => Self::in_container(m, headers, &s)?,
            ["dbs", _, "users", ..] => Self::users(m, headers, &s)?,
            ["offers"] => match *m {
                Method::GET => Endpoint::ListOffers,
                Method::POST => Endpoint::QueryOffers,
                _ => return Err(not_allowed(m, "offers")),
            },
            ["offers", id] => match *m {
                Method::GET => Endpoint::ReadOffer { id: owned(id) },
                Method::PUT => Endpoint::ReplaceOffer { id: owned(id) },
                _ => return Err(not_allowed(m, "an offer")),
            },
            ["_strata", ..] => Self::strata(m, &s)?,
            _ => return Err(no_such_path(&s)),
        })
    }

    /// What lives in a container: items, the change feed, queries, batches, partition key
    /// ranges, conflicts, scripts.
    fn in_container(m: &Method, headers: &HeaderMap, s: &[&str]) -> Result<Self, CosmosError> {
        let owned = |x: &str| x.to_string();
        Ok(match s {
            ["dbs", db, "colls", coll, "docs"] => {
                let (db, coll) = (owned(db), owned(coll));
                match *m {
                    Method::GET => {
                        if headers.contains_key("a-im") {
                            Endpoint::ChangeFeed { db, coll }
                        } else {
                            Endpoint::ReadItemFeed { db, coll }
                        }
                    }
                    Method::POST => {
                        if flag(headers, header::IS_QUERY_PLAN_REQUEST) {
                            Endpoint::RoutePlan { db, coll }
                        } else if flag(headers, header::IS_BATCH_REQUEST) {
                            Endpoint::Batch { db, coll }
                        } else if is_query(headers) {
                            Endpoint::QueryItems { db, coll }
                        } else {
                            Endpoint::CreateItem { db, coll }
                        }
                    }
                    _ => return Err(not_allowed(m, "items")),
                }
            }
            ["dbs", db, "colls", coll, "docs", id] => {
                let (db, coll, id) = (owned(db), owned(coll), owned(id));
                match *m {
                    Method::GET => Endpoint::ReadItem { db, coll, id },
                    Method::PUT => Endpoint::ReplaceItem { db, coll, id },
                    Method::DELETE => Endpoint::DeleteItem { db, coll, id },
                    Method::PATCH => Endpoint::PatchItem { db, coll, id },
                    _ => return Err(not_allowed(m, "an item")),
                }
            }
            ["dbs", db, "colls", coll, "operations", "partitionkeydelete"] => match *m {
                Method::POST => Endpoint::DeleteAllItemsByPartitionKey {
                    db: owned(db),
                    coll: owned(coll),
                },
                _ => return Err(not_allowed(m, "partition key deletion")),
            },
            ["dbs", db, "colls", coll, "pkranges"] => match *m {
                Method::GET => Endpoint::ReadPkRanges {
                    db: owned(db),
                    coll: owned(coll),
                },
                _ => return Err(not_allowed(m, "partition key ranges")),
            },
            ["dbs", db, "colls", coll, "conflicts"] => {
                let (db, coll) = (owned(db), owned(coll));
                match *m {
                    Method::GET => Endpoint::ListConflicts { db, coll },
                    Method::POST if is_query(headers) => Endpoint::QueryConflicts { db, coll },
                    _ => return Err(not_allowed(m, "conflicts")),
                }
            }
            ["dbs", db, "colls", coll, "conflicts", id] => match *m {
                Method::GET | Method::DELETE => Endpoint::Conflict {
                    db: owned(db),
                    coll: owned(coll),
                    id: owned(id),
                },
                _ => return Err(not_allowed(m, "a conflict")),
            },
            ["dbs", db, "colls", coll, seg] if ScriptKind::from_segment(seg).is_some() => {
                let (db, coll) = (owned(db), owned(coll));
                let kind = ScriptKind::from_segment(seg).unwrap_or(ScriptKind::Sproc);
                match *m {
                    Method::GET => Endpoint::ListScripts { db, coll, kind },
                    Method::POST if is_query(headers) => Endpoint::QueryScripts { db, coll, kind },
                    Method::POST => Endpoint::CreateScript { db, coll, kind },
                    _ => return Err(not_allowed(m, kind.segment())),
                }
            }
            ["dbs", db, "colls", coll, seg, id] if ScriptKind::from_segment(seg).is_some() => {
                let (db, coll, id) = (owned(db), owned(coll), owned(id));
                let kind = ScriptKind::from_segment(seg).unwrap_or(ScriptKind::Sproc);
                match *m {
                    Method::GET => Endpoint::ReadScript { db, coll, kind, id },
                    Method::PUT => Endpoint::ReplaceScript { db, coll, kind, id },
                    Method::DELETE => Endpoint::DeleteScript { db, coll, kind, id },
                    Method::POST if kind == ScriptKind::Sproc => {
                        Endpoint::ExecuteStoredProcedure { db, coll, id }
                    }
                    _ => return Err(not_allowed(m, &format!("a {}", kind.noun()))),
                }
            }
            ["dbs", _, "colls", _, "docs", _, kind, ..] | ["dbs", _, "colls", _, kind, ..] => {
                return Err(unsupported(kind))
            }
            _ => return Err(no_such_path(s)),
        })
    }

    /// A database's users and their permissions.
    fn users(m: &Method, headers: &HeaderMap, s: &[&str]) -> Result<Self, CosmosError> {
        let owned = |x: &str| x.to_string();
        Ok(match s {
            ["dbs", db, "users"] => {
                let db = owned(db);
                match *m {
                    Method::GET => Endpoint::ListUsers { db },
                    Method::POST if is_query(headers) => Endpoint::QueryUsers { db },
                    Method::POST => Endpoint::CreateUser { db },
                    _ => return Err(not_allowed(m, "users")),
                }
            }
            ["dbs", db, "users", user] => {
                let (db, user) = (owned(db), owned(user));
                match *m {
                    Method::GET => Endpoint::ReadUser { db, user },
                    Method::PUT => Endpoint::ReplaceUser { db, user },
                    Method::DELETE => Endpoint::DeleteUser { db, user },
                    _ => return Err(not_allowed(m, "a user")),
                }
            }
            ["dbs", db, "users", user, "permissions"] => {
                let (db, user) = (owned(db), owned(user));
                match *m {
                    Method::GET => Endpoint::ListPermissions { db, user },
                    Method::POST if is_query(headers) => Endpoint::QueryPermissions { db, user },
                    Method::POST => Endpoint::CreatePermission { db, user },
                    _ => return Err(not_allowed(m, "permissions")),
                }
            }
            ["dbs", db, "users", user, "permissions", id] => {
                let (db, user, id) = (owned(db), owned(user), owned(id));
                match *m {
                    Method::GET => Endpoint::ReadPermission { db, user, id },
                    Method::PUT => Endpoint::ReplacePermission { db, user, id },
                    Method::DELETE => Endpoint::DeletePermission { db, user, id },
                    _ => return Err(not_allowed(m, "a permission")),
                }
            }
            _ => return Err(no_such_path(s)),
        })
    }

    /// strata's own endpoints: the partitions view, the query sample, the advisor, copy jobs.
    fn strata(m: &Method, s: &[&str]) -> Result<Self, CosmosError> {
        let owned = |x: &str| x.to_string();
        Ok(match s {
            ["_strata", "containers", db, coll, "partitions"] => match *m {
                Method::GET => Endpoint::InspectPartitions {
                    db: owned(db),
                    coll: owned(coll),
                },
                _ => return Err(not_allowed(m, "the partitions view")),
            },
            ["_strata", "containers", db, coll, "queries"] => match *m {
                Method::GET => Endpoint::ReadQuerySample {
                    db: owned(db),
                    coll: owned(coll),
                },
                Method::DELETE => Endpoint::ClearQuerySample {
                    db: owned(db),
                    coll: owned(coll),
                },
                _ => return Err(not_allowed(m, "the query sample")),
            },
            ["_strata", "containers", db, coll, "advise"] => match *m {
                Method::POST => Endpoint::Advise {
                    db: owned(db),
                    coll: owned(coll),
                },
                _ => return Err(not_allowed(m, "the partition-key advisor")),
            },
            ["_strata", "storage"] => match *m {
                Method::GET => Endpoint::ReadStorage,
                _ => return Err(not_allowed(m, "the storage view")),
            },
            ["_strata", "regions"] => match *m {
                Method::GET => Endpoint::ReadRegions,
                _ => return Err(not_allowed(m, "the regions")),
            },
            ["_strata", "regions", region] => match *m {
                Method::PUT => Endpoint::SetRegionFault {
                    region: owned(region),
                },
                _ => return Err(not_allowed(m, "a region's fault")),
            },
            ["_strata", "regions", region, "failover"] => match *m {
                Method::POST => Endpoint::FailOver {
                    region: owned(region),
                },
                _ => return Err(not_allowed(m, "a failover")),
            },
            ["_strata", "rbac"] => match *m {
                Method::GET => Endpoint::ReadRbac,
                Method::PUT => Endpoint::ReplaceRbac,
                _ => return Err(not_allowed(m, "the RBAC policy")),
            },
            ["_strata", "jobs"] => match *m {
                Method::GET => Endpoint::ListJobs,
                Method::POST => Endpoint::CreateJob,
                _ => return Err(not_allowed(m, "copy jobs")),
            },
            ["_strata", "jobs", id] => match *m {
                Method::GET => Endpoint::ReadJob { id: owned(id) },
                Method::DELETE => Endpoint::DeleteJob { id: owned(id) },
                _ => return Err(not_allowed(m, "a copy job")),
            },
            _ => return Err(no_such_path(s)),
        })
    }
}

/// A path that names nothing strata serves.
fn no_such_path(s: &[&str]) -> CosmosError {
    CosmosError::not_found(format!(
        "The resource path '/{}' does not name a resource strata serves.",
        s.join("/")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs(p: &str) -> Vec<Cow<'_, str>> {
        path_segments(p).unwrap()
    }

    #[test]
    fn decodes_item_posts_by_header() {
        let mut h = HeaderMap::new();
        let s = segs("/dbs/d/colls/c/docs");
        assert!(matches!(
            Endpoint::decode(&Method::POST, &s, &h).unwrap(),
            Endpoint::CreateItem { .. }
        ));
        h.insert(header::IS_QUERY, "True".parse().unwrap());
        assert!(matches!(
            Endpoint::decode(&Method::POST, &s, &h).unwrap(),
            Endpoint::QueryItems { .. }
        ));
        h.insert(header::IS_QUERY_PLAN_REQUEST, "true".parse().unwrap());
        assert!(matches!(
            Endpoint::decode(&Method::POST, &s, &h).unwrap(),
            Endpoint::RoutePlan { .. }
        ));
        assert!(Endpoint::decode(&Method::PUT, &s, &h).is_err());
        assert!(Endpoint::decode(&Method::GET, &segs("/dbs/d/colls/c/attachments"), &h).is_err());
        assert!(matches!(
            Endpoint::decode(&Method::POST, &segs("/dbs/d/colls/c/sprocs/p"), &h).unwrap(),
            Endpoint::ExecuteStoredProcedure { .. }
        ));
        assert!(Endpoint::decode(&Method::POST, &segs("/dbs/d/colls/c/udfs/u"), &h).is_err());
    }
}
