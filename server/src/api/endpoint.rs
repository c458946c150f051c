//! Decodes an HTTP request (method, path, a few headers) into a typed [`Endpoint`].
//!
//! Paths are Cosmos resource links: name-based (`/dbs/db1/colls/c1/docs/a%20b`), with or
//! without a trailing slash, ids percent-encoded. The same segments also give the resource type
//! and link that the master-key signature covers.

use super::error::ApiError;
use axum::http::{HeaderMap, Method};

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
    QueryPlan {
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
    ListConflicts {
        db: String,
        coll: String,
    },
    QueryConflicts {
        db: String,
        coll: String,
    },
    /// Read or delete one conflict.
    Conflict {
        db: String,
        coll: String,
        id: String,
    },
}

/// What the master-key signature covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthScope {
    pub resource_type: String,
    pub resource_link: String,
    /// Other spellings the official SDKs sign for this very resource. Name-based links have
    /// none: names are case-sensitive, so `dbs/QA` and `dbs/qa` are different resources.
    pub signed_as: SignedAs,
}

/// Which other spellings of a scope the SDKs use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SignedAs {
    /// Only the link exactly as the path has it.
    #[default]
    Exact,
    /// A rid-based link (offers, and `_self` links such as `dbs/AQAAQQ==/colls/…`): the SDKs
    /// sign it lower-cased, or as the resource's own rid alone (`offers/BAAA` is signed as
    /// `baaa`). Rids are case-insensitive.
    RidLink,
    /// Delete-by-partition-key, signed on the container as `colls` (Python) or
    /// `partitionkey` (other SDKs).
    PartitionKeyDelete,
}

impl AuthScope {
    /// An exact scope.
    pub fn new(resource_type: impl Into<String>, resource_link: impl Into<String>) -> Self {
        AuthScope {
            resource_type: resource_type.into(),
            resource_link: resource_link.into(),
            signed_as: SignedAs::Exact,
        }
    }

    /// The other spellings that also verify (see [`SignedAs`]).
    pub fn alternates(&self) -> Vec<AuthScope> {
        match self.signed_as {
            SignedAs::Exact => Vec::new(),
            SignedAs::PartitionKeyDelete => {
                vec![AuthScope::new("partitionkey", self.resource_link.clone())]
            }
            SignedAs::RidLink => {
                let lowered = self.resource_link.to_lowercase();
                let rid = lowered.rsplit('/').next().unwrap_or("").to_string();
                [lowered, rid]
                    .into_iter()
                    .filter(|l| *l != self.resource_link)
                    .map(|l| AuthScope::new(self.resource_type.clone(), l))
                    .collect()
            }
        }
    }
}

/// Splits and percent-decodes a request path; empty segments (trailing slashes) are dropped.
pub fn path_segments(path: &str) -> Result<Vec<String>, ApiError> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8()
                .map(|c| c.into_owned())
                .map_err(|_| {
                    ApiError::bad_request(format!(
                        "The request path segment '{s}' is not valid percent-encoded UTF-8."
                    ))
                })
        })
        .collect()
}

/// The resource type and link a signature covers (PROTOCOL.md 2.2): an odd number of segments
/// is a feed (type = last segment, link = the rest); an even number is one resource.
pub fn auth_scope(segs: &[String]) -> AuthScope {
    // Delete-by-partition-key is signed on the container.
    if let [coll @ .., op, kind] = segs {
        if op == "operations" && kind == "partitionkeydelete" {
            return AuthScope {
                signed_as: SignedAs::PartitionKeyDelete,
                ..AuthScope::new("colls", coll.join("/"))
            };
        }
    }
    let scope = match segs.len() {
        0 => AuthScope::new("", ""),
        n if n % 2 == 1 => AuthScope::new(segs[n - 1].clone(), segs[..n - 1].join("/")),
        n => AuthScope::new(segs[n - 2].clone(), segs.join("/")),
    };
    if matches!(segs, [first, _] if first == "offers") || is_rid_based(segs) {
        return AuthScope {
            signed_as: SignedAs::RidLink,
            ..scope
        };
    }
    scope
}

/// Whether a `dbs/...` path addresses resources by rid, by the official SDKs' own rule
/// (`IsNameBased` in azure-cosmos): the database segment is 8 characters of valid base64, the
/// length of a database rid. Such links are signed lower-cased; any other is a name.
pub fn is_rid_based(segs: &[String]) -> bool {
    use base64::Engine as _;
    match segs {
        [first, db, ..] if first.eq_ignore_ascii_case("dbs") && db.len() == 8 => {
            base64::engine::general_purpose::STANDARD.decode(db).is_ok()
        }
        _ => false,
    }
}

fn flag(headers: &HeaderMap, name: &str) -> bool {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().eq_ignore_ascii_case("true"))
        .unwrap_or(false)
}

fn is_query(headers: &HeaderMap) -> bool {
    flag(headers, "x-ms-documentdb-isquery")
        || headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(|v| v.starts_with("application/query+json"))
            .unwrap_or(false)
}

fn not_allowed(method: &Method, what: &str) -> ApiError {
    ApiError::method_not_allowed(format!("The method {method} is not supported on {what}."))
}

fn unsupported(kind: &str) -> ApiError {
    ApiError::bad_request(format!(
        "strata does not support '{kind}' resources; it serves databases, containers, items, partition key ranges and offers."
    ))
}

impl Endpoint {
    /// Decodes the request into an endpoint.
    pub fn decode(method: &Method, segs: &[String], headers: &HeaderMap) -> Result<Self, ApiError> {
        let s: Vec<&str> = segs.iter().map(String::as_str).collect();
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
                        if flag(headers, "x-ms-cosmos-is-query-plan-request") {
                            Endpoint::QueryPlan { db, coll }
                        } else if flag(headers, "x-ms-cosmos-is-batch-request") {
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
            ["_strata", "containers", db, coll, "partitions"] => match *m {
                Method::GET => Endpoint::InspectPartitions {
                    db: owned(db),
                    coll: owned(coll),
                },
                _ => return Err(not_allowed(m, "the partitions view")),
            },
            ["dbs", _, "users", ..] => return Err(unsupported("users")),
            ["dbs", _, "colls", _, "docs", _, kind, ..] | ["dbs", _, "colls", _, kind, ..] => {
                return Err(unsupported(kind))
            }
            _ => {
                return Err(ApiError::not_found(format!(
                    "The resource path '/{}' does not name a resource strata serves.",
                    segs.join("/")
                )))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs(p: &str) -> Vec<String> {
        path_segments(p).unwrap()
    }

    #[test]
    fn scopes_follow_the_protocol() {
        assert_eq!(
            auth_scope(&segs("/dbs/db1/colls/hpk/docs/1/")),
            AuthScope::new("docs", "dbs/db1/colls/hpk/docs/1")
        );
        assert_eq!(
            auth_scope(&segs("/dbs/db1/colls/hpk/docs")),
            AuthScope::new("docs", "dbs/db1/colls/hpk")
        );
        assert_eq!(auth_scope(&segs("/")).resource_type, "");
        assert_eq!(segs("/dbs/db1/colls/hpk/docs/a%20b%C3%BC/")[5], "a bü");
    }

    #[test]
    fn decodes_item_posts_by_header() {
        let mut h = HeaderMap::new();
        let s = segs("/dbs/d/colls/c/docs");
        assert!(matches!(
            Endpoint::decode(&Method::POST, &s, &h).unwrap(),
            Endpoint::CreateItem { .. }
        ));
        h.insert("x-ms-documentdb-isquery", "True".parse().unwrap());
        assert!(matches!(
            Endpoint::decode(&Method::POST, &s, &h).unwrap(),
            Endpoint::QueryItems { .. }
        ));
        h.insert("x-ms-cosmos-is-query-plan-request", "true".parse().unwrap());
        assert!(matches!(
            Endpoint::decode(&Method::POST, &s, &h).unwrap(),
            Endpoint::QueryPlan { .. }
        ));
        assert!(Endpoint::decode(&Method::PUT, &s, &h).is_err());
        assert!(Endpoint::decode(&Method::GET, &segs("/dbs/d/colls/c/sprocs"), &h).is_err());
    }
}
