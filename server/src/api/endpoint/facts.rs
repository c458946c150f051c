//! What each [`Endpoint`] is, in one place (as Garage's endpoints own their authorization
//! type): whether it writes, what resource it addresses, and the RBAC data actions it needs.
//! A new endpoint adds its facts here and its decoding beside, in `mod.rs`.

use super::Endpoint;
use crate::api::request::Req;
use crate::store::scripts::ScriptKind;
use serde_json::Value;

/// The RBAC action of reading metadata (accounts, databases, containers, ranges).
pub const READ_METADATA: &str = "Microsoft.DocumentDB/databaseAccounts/readMetadata";
/// The prefix of every container and item data action.
pub const CONTAINERS: &str = "Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers";

/// The data actions a request needs, and the database and container they act on.
pub type DataActions = (Vec<String>, Option<String>, Option<String>);

/// What a request addresses.
pub enum Target<'a> {
    Account,
    /// Master-only resources: the database list, offers, users and permissions, diagnostics.
    Admin,
    Database(&'a str),
    /// A database's container list (and container creation).
    Containers(&'a str),
    Container {
        db: &'a str,
        coll: &'a str,
        part: Part<'a>,
    },
}

pub enum Part<'a> {
    Itself,
    Ranges,
    Conflicts,
    /// Items: a point operation names one id; feeds, queries and creates none.
    Items {
        id: Option<&'a str>,
        point: bool,
    },
    Scripts {
        kind: ScriptKind,
        id: Option<&'a str>,
        execute: bool,
    },
}

impl Endpoint {
    /// Whether an endpoint changes anything.
    pub fn is_write(&self, method: &axum::http::Method) -> bool {
        use Endpoint as E;
        match self {
            E::ReadAccount
            | E::ListDatabases
            | E::QueryDatabases
            | E::ReadDatabase { .. }
            | E::ListContainers { .. }
            | E::QueryContainers { .. }
            | E::ReadContainer { .. }
            | E::ReadItemFeed { .. }
            | E::ChangeFeed { .. }
            | E::QueryItems { .. }
            | E::RoutePlan { .. }
            | E::ReadItem { .. }
            | E::ReadPkRanges { .. }
            | E::ListOffers
            | E::QueryOffers
            | E::ReadOffer { .. }
            | E::InspectPartitions { .. }
            | E::ReadQuerySample { .. }
            | E::Advise { .. }
            | E::ReadRbac
            | E::ReadRegions
            | E::ReadStorage
            | E::ListJobs
            | E::ReadJob { .. }
            | E::ListConflicts { .. }
            | E::QueryConflicts { .. }
            | E::ListScripts { .. }
            | E::QueryScripts { .. }
            | E::ReadScript { .. }
            | E::ListUsers { .. }
            | E::QueryUsers { .. }
            | E::ReadUser { .. }
            | E::ListPermissions { .. }
            | E::QueryPermissions { .. }
            | E::ReadPermission { .. } => false,
            E::Conflict { .. } => method != axum::http::Method::GET,
            _ => true,
        }
    }

    /// What the request addresses, for authorization by resource tokens and keys.
    pub fn target(&self) -> Target<'_> {
        use Endpoint as E;
        let items = |db, coll, id, point| Target::Container {
            db,
            coll,
            part: Part::Items { id, point },
        };
        match self {
            E::ReadAccount => Target::Account,
            E::ListDatabases
            | E::QueryDatabases
            | E::CreateDatabase
            | E::ListOffers
            | E::QueryOffers
            | E::ReadOffer { .. }
            | E::ReplaceOffer { .. }
            | E::InspectPartitions { .. }
            | E::ReadQuerySample { .. }
            | E::ClearQuerySample { .. }
            | E::Advise { .. }
            | E::ReadRbac
            | E::ReplaceRbac
            | E::ReadRegions
            | E::ReadStorage
            | E::SetRegionFault { .. }
            | E::FailOver { .. }
            | E::ListJobs
            | E::CreateJob
            | E::ReadJob { .. }
            | E::DeleteJob { .. }
            | E::ListUsers { .. }
            | E::QueryUsers { .. }
            | E::CreateUser { .. }
            | E::ReadUser { .. }
            | E::ReplaceUser { .. }
            | E::DeleteUser { .. }
            | E::ListPermissions { .. }
            | E::QueryPermissions { .. }
            | E::CreatePermission { .. }
            | E::ReadPermission { .. }
            | E::ReplacePermission { .. }
            | E::DeletePermission { .. } => Target::Admin,
            E::ReadDatabase { db } | E::DeleteDatabase { db } => Target::Database(db),
            E::ListContainers { db } | E::QueryContainers { db } | E::CreateContainer { db } => {
                Target::Containers(db)
            }
            E::ReadContainer { db, coll }
            | E::ReplaceContainer { db, coll }
            | E::DeleteContainer { db, coll } => Target::Container {
                db,
                coll,
                part: Part::Itself,
            },
            E::ReadPkRanges { db, coll } => Target::Container {
                db,
                coll,
                part: Part::Ranges,
            },
            E::ListConflicts { db, coll }
            | E::QueryConflicts { db, coll }
            | E::Conflict { db, coll, .. } => Target::Container {
                db,
                coll,
                part: Part::Conflicts,
            },
            E::ReadItemFeed { db, coll }
            | E::ChangeFeed { db, coll }
            | E::QueryItems { db, coll }
            | E::RoutePlan { db, coll } => items(db, coll, None, false),
            E::CreateItem { db, coll }
            | E::Batch { db, coll }
            | E::DeleteAllItemsByPartitionKey { db, coll } => items(db, coll, None, true),
            E::ReadItem { db, coll, id }
            | E::ReplaceItem { db, coll, id }
            | E::DeleteItem { db, coll, id }
            | E::PatchItem { db, coll, id } => items(db, coll, Some(id), true),
            E::ListScripts { db, coll, kind }
            | E::QueryScripts { db, coll, kind }
            | E::CreateScript { db, coll, kind } => Target::Container {
                db,
                coll,
                part: Part::Scripts {
                    kind: *kind,
                    id: None,
                    execute: false,
                },
            },
            E::ReadScript { db, coll, kind, id }
            | E::ReplaceScript { db, coll, kind, id }
            | E::DeleteScript { db, coll, kind, id } => Target::Container {
                db,
                coll,
                part: Part::Scripts {
                    kind: *kind,
                    id: Some(id),
                    execute: false,
                },
            },
            E::ExecuteStoredProcedure { db, coll, id } => Target::Container {
                db,
                coll,
                part: Part::Scripts {
                    kind: ScriptKind::Sproc,
                    id: Some(id),
                    execute: true,
                },
            },
        }
    }

    /// The data actions a request needs and the database and container they act on; `None` for a
    /// management operation.
    pub fn data_actions(&self, req: &Req) -> Option<DataActions> {
        use Endpoint as E;
        let item = |a: &str| format!("{CONTAINERS}/items/{a}");
        let on = |db: &str, coll: &str, actions: Vec<String>| {
            Some((actions, Some(db.to_string()), Some(coll.to_string())))
        };
        match self {
            E::ReadAccount
            | E::ListDatabases
            | E::QueryDatabases
            | E::ListOffers
            | E::QueryOffers
            | E::ReadOffer { .. } => Some((vec![READ_METADATA.into()], None, None)),
            E::ReadDatabase { db } | E::ListContainers { db } | E::QueryContainers { db } => {
                Some((vec![READ_METADATA.into()], Some(db.clone()), None))
            }
            E::ReadContainer { db, coll }
            | E::ReadPkRanges { db, coll }
            | E::RoutePlan { db, coll } => on(db, coll, vec![READ_METADATA.into()]),
            E::QueryItems { db, coll } => on(db, coll, vec![format!("{CONTAINERS}/executeQuery")]),
            E::ReadItemFeed { db, coll } | E::ChangeFeed { db, coll } => {
                on(db, coll, vec![format!("{CONTAINERS}/readChangeFeed")])
            }
            E::ReadItem { db, coll, .. } => on(db, coll, vec![item("read")]),
            E::CreateItem { db, coll } => {
                let upsert = req
                    .header(strata_query::protocol::header::IS_UPSERT)
                    .is_some_and(|v| v.eq_ignore_ascii_case("true"));
                on(
                    db,
                    coll,
                    vec![item(if upsert { "upsert" } else { "create" })],
                )
            }
            E::ReplaceItem { db, coll, .. } | E::PatchItem { db, coll, .. } => {
                on(db, coll, vec![item("replace")])
            }
            E::DeleteItem { db, coll, .. } | E::DeleteAllItemsByPartitionKey { db, coll } => {
                on(db, coll, vec![item("delete")])
            }
            E::Batch { db, coll } => on(db, coll, batch_actions(req)),
            E::ExecuteStoredProcedure { db, coll, .. } => on(
                db,
                coll,
                vec![format!("{CONTAINERS}/executeStoredProcedure")],
            ),
            E::ListConflicts { db, coll }
            | E::QueryConflicts { db, coll }
            | E::Conflict { db, coll, .. } => {
                on(db, coll, vec![format!("{CONTAINERS}/manageConflicts")])
            }
            _ => None,
        }
    }
}

/// The item actions of a batch's operations.
fn batch_actions(req: &Req) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let ops = req
        .json()
        .ok()
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default();
    for op in ops {
        let a = match op
            .get("operationType")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_ascii_lowercase()
            .as_str()
        {
            "read" => "read",
            "create" => "create",
            "upsert" => "upsert",
            "delete" => "delete",
            _ => "replace",
        };
        let a = format!("{CONTAINERS}/items/{a}");
        if !out.contains(&a) {
            out.push(a);
        }
    }
    if out.is_empty() {
        out.push(format!("{CONTAINERS}/items/create"));
    }
    out
}
