//! Data-plane role-based access control, as the service models it, for Entra ID principals
//! ([`crate::api::security::aad`]): role definitions (the built-in Data Reader and Data Contributor, and
//! custom ones) list data actions; role assignments give a role to a principal (or a group)
//! at a scope — the account (`/`), a database (`/dbs/{db}`) or a container
//! (`/dbs/{db}/colls/{c}`). A request needs one assignment whose role allows its action at a
//! scope that covers it; else 403 with sub-status 5301 and the service's message. Management
//! operations (creating or changing databases, containers, throughput, scripts, users) are
//! not data-plane actions: an Entra ID token cannot do them (403/5300), as with the service.
//!
//! Without any role assignment, every Entra ID principal may do every data action: the
//! official emulator checks no roles. The set is loaded from `--rbac FILE` (or `rbac.json` in
//! the data folder) and managed through `GET`/`PUT /_strata/rbac` with the account key.

use crate::api::endpoint::Endpoint;
use crate::api::request::Req;
use crate::api::security::aad::Identity;
use crate::error::CosmosError;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use crate::api::endpoint::facts::{CONTAINERS, READ_METADATA};

/// The built-in Cosmos DB Built-in Data Reader role's id.
pub const DATA_READER: &str = "00000000-0000-0000-0000-000000000001";
/// The built-in Cosmos DB Built-in Data Contributor role's id.
pub const DATA_CONTRIBUTOR: &str = "00000000-0000-0000-0000-000000000002";

/// Data actions a role allows (`*` at the end matches a family), and those it excepts.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Permission {
    #[serde(default)]
    pub data_actions: Vec<String>,
    #[serde(default)]
    pub not_data_actions: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RoleDefinition {
    pub id: String,
    #[serde(default)]
    pub role_name: String,
    #[serde(default)]
    pub assignable_scopes: Vec<String>,
    pub permissions: Vec<Permission>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RoleAssignment {
    #[serde(default)]
    pub id: String,
    /// A role definition's id (or its full resource id, whose last segment is the id).
    pub role_definition_id: String,
    /// An Entra ID object id: a user, service principal or group.
    pub principal_id: String,
    /// `/`, `/dbs/{db}` or `/dbs/{db}/colls/{c}` (or the full resource id ending so).
    pub scope: String,
}

/// The account's custom roles and role assignments (`--rbac FILE`, `/_strata/rbac`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Policy {
    #[serde(default)]
    pub role_definitions: Vec<RoleDefinition>,
    #[serde(default)]
    pub role_assignments: Vec<RoleAssignment>,
}

/// The built-in roles, made once.
pub(crate) fn built_in() -> &'static [RoleDefinition] {
    static ROLES: std::sync::OnceLock<Vec<RoleDefinition>> = std::sync::OnceLock::new();
    ROLES.get_or_init(make_built_in)
}

fn make_built_in() -> Vec<RoleDefinition> {
    let role = |id: &str, name: &str, actions: &[&str]| RoleDefinition {
        id: id.into(),
        role_name: name.into(),
        assignable_scopes: vec!["/".into()],
        permissions: vec![Permission {
            data_actions: actions.iter().map(|a| a.to_string()).collect(),
            not_data_actions: Vec::new(),
        }],
    };
    vec![
        role(
            DATA_READER,
            "Cosmos DB Built-in Data Reader",
            &[
                READ_METADATA,
                &format!("{CONTAINERS}/executeQuery"),
                &format!("{CONTAINERS}/readChangeFeed"),
                &format!("{CONTAINERS}/items/read"),
            ],
        ),
        role(
            DATA_CONTRIBUTOR,
            "Cosmos DB Built-in Data Contributor",
            &[
                READ_METADATA,
                &format!("{CONTAINERS}/*"),
                &format!("{CONTAINERS}/items/*"),
            ],
        ),
    ]
}

fn last_segment(id: &str) -> &str {
    id.rsplit('/').next().unwrap_or(id)
}

/// A scope as `(db, coll)`: the part after `/databaseAccounts/{name}` of a full resource id.
fn scope_of(scope: &str) -> (Option<String>, Option<String>) {
    let lower = scope.to_ascii_lowercase();
    let rest = match lower.find("/databaseaccounts/") {
        Some(i) => {
            let after = &scope[i + "/databaseaccounts/".len()..];
            after.find('/').map_or("", |j| &after[j..])
        }
        None => scope,
    };
    let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    match segs[..] {
        ["dbs", db] => (Some(db.into()), None),
        ["dbs", db, "colls", c] => (Some(db.into()), Some(c.into())),
        _ => (None, None),
    }
}

fn matches(pattern: &str, action: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => action.starts_with(prefix),
        None => pattern.eq_ignore_ascii_case(action),
    }
}

impl Policy {
    /// Checks the policy's own consistency: every assignment names a known role and a scope
    /// of the three shapes.
    pub fn check(&self) -> Result<(), String> {
        for a in &self.role_assignments {
            let id = last_segment(&a.role_definition_id);
            if !self.definitions().any(|d| last_segment(&d.id) == id) {
                return Err(format!("the role assignment '{}' names the role definition '{id}', which does not exist", a.id));
            }
            let s = a.scope.trim();
            if s != "/" && scope_of(s) == (None, None) {
                return Err(format!("the role assignment '{}' has the scope '{s}': use /, /dbs/{{db}} or /dbs/{{db}}/colls/{{container}}", a.id));
            }
        }
        Ok(())
    }

    /// The built-in roles, then the custom ones.
    fn definitions(&self) -> impl Iterator<Item = &RoleDefinition> {
        built_in().iter().chain(&self.role_definitions)
    }

    /// Whether `who` may do `action` on `(db, coll)`.
    fn allows(&self, who: &Identity, action: &str, db: Option<&str>, coll: Option<&str>) -> bool {
        self.role_assignments.iter().any(|a| {
            let mine = a.principal_id == who.oid || who.groups.contains(&a.principal_id);
            let (sdb, scoll) = scope_of(&a.scope);
            let covers = match (sdb.as_deref(), scoll.as_deref()) {
                (None, _) => true,
                (Some(d), None) => db == Some(d),
                (Some(d), Some(c)) => db == Some(d) && coll == Some(c),
            };
            mine && covers
                && self
                    .definitions()
                    .filter(|d| last_segment(&d.id) == last_segment(&a.role_definition_id))
                    .flat_map(|d| &d.permissions)
                    .any(|p| {
                        p.data_actions.iter().any(|x| matches(x, action))
                            && !p.not_data_actions.iter().any(|x| matches(x, action))
                    })
        })
    }
}

/// The account's policy: one cheap handle, replaced whole.
#[derive(Clone, Default)]
pub struct Rbac {
    policy: Arc<RwLock<Policy>>,
    file: Option<PathBuf>,
}

impl Rbac {
    /// The policy in `file` (none yet: empty).
    pub fn open(file: Option<PathBuf>) -> Result<Rbac, String> {
        let policy = match &file {
            Some(f) if f.exists() => {
                let text =
                    std::fs::read(f).map_err(|e| format!("cannot read {}: {e}", f.display()))?;
                let p: Policy = serde_json::from_slice(&text)
                    .map_err(|e| format!("{} is not an RBAC policy: {e}", f.display()))?;
                p.check().map_err(|e| format!("{}: {e}", f.display()))?;
                p
            }
            _ => Policy::default(),
        };
        Ok(Rbac {
            policy: Arc::new(RwLock::new(policy)),
            file,
        })
    }

    pub fn get(&self) -> Policy {
        self.policy
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Replaces the policy (and its file, written whole and renamed over the old one).
    pub fn set(&self, p: Policy) -> Result<(), CosmosError> {
        p.check().map_err(CosmosError::bad_request)?;
        if let Some(f) = &self.file {
            let tmp = f.with_extension("json.tmp");
            let bytes =
                serde_json::to_vec_pretty(&p).map_err(|e| CosmosError::internal(e.to_string()))?;
            std::fs::write(&tmp, bytes)
                .and_then(|_| std::fs::rename(&tmp, f))
                .map_err(|e| CosmosError::internal(format!("cannot save the RBAC policy: {e}")))?;
        }
        *self.policy.write().unwrap_or_else(|p| p.into_inner()) = p;
        Ok(())
    }

    /// Checks that `who` may call `ep` (see the module's doc).
    pub fn authorize(&self, who: &Identity, ep: &Endpoint, req: &Req) -> Result<(), CosmosError> {
        let Some((actions, db, coll)) = ep.data_actions(req) else {
            return Err(CosmosError::forbidden(format!(
                "Request blocked by Auth strata : The given request [{} {}] cannot be authorized by AAD token in data plane. Learn more: https://aka.ms/cosmos-native-rbac.",
                req.method,
                req.path()
            ))
            .with_sub_status(5300));
        };
        let policy = self.policy.read().unwrap_or_else(|p| p.into_inner());
        for action in &actions {
            // The read-only key's tokens read only; without assignments every principal may
            // use the data plane (the official emulator checks no roles).
            let allowed = if who.read_only && !is_read(action) {
                false
            } else {
                policy.role_assignments.is_empty()
                    || policy.allows(who, action, db.as_deref(), coll.as_deref())
            };
            if !allowed {
                let scope = match (&db, &coll) {
                    (Some(d), Some(c)) => format!("/dbs/{d}/colls/{c}"),
                    (Some(d), None) => format!("/dbs/{d}"),
                    _ => "/".into(),
                };
                return Err(CosmosError::forbidden(format!(
                    "Request blocked by Auth strata : Request is blocked because principal [{}] does not have required RBAC permissions to perform action [{action}] on resource [{scope}]. Learn more: https://aka.ms/cosmos-native-rbac.",
                    who.oid
                ))
                .with_sub_status(5301));
            }
        }
        Ok(())
    }
}

fn is_read(action: &str) -> bool {
    action == READ_METADATA
        || action.ends_with("/executeQuery")
        || action.ends_with("/readChangeFeed")
        || action.ends_with("/items/read")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(oid: &str) -> Identity {
        Identity {
            oid: oid.into(),
            groups: vec!["g1".into()],
            read_only: false,
        }
    }

    #[test]
    fn roles_scopes_and_groups() {
        let p = Policy {
            role_definitions: vec![RoleDefinition {
                id: "custom".into(),
                role_name: "query only".into(),
                assignable_scopes: vec!["/".into()],
                permissions: vec![Permission {
                    data_actions: vec![format!("{CONTAINERS}/*")],
                    not_data_actions: vec![format!("{CONTAINERS}/executeStoredProcedure")],
                }],
            }],
            role_assignments: vec![
                RoleAssignment { id: "1".into(), role_definition_id: format!("/subscriptions/s/resourceGroups/r/providers/Microsoft.DocumentDB/databaseAccounts/a/sqlRoleDefinitions/{DATA_READER}"), principal_id: "reader".into(), scope: "/".into() },
                RoleAssignment { id: "2".into(), role_definition_id: DATA_CONTRIBUTOR.into(), principal_id: "g1".into(), scope: "/subscriptions/s/resourceGroups/r/providers/Microsoft.DocumentDB/databaseAccounts/a/dbs/app/colls/c".into() },
                RoleAssignment { id: "3".into(), role_definition_id: "custom".into(), principal_id: "q".into(), scope: "/dbs/app".into() },
            ],
        };
        p.check().unwrap();
        let read = format!("{CONTAINERS}/items/read");
        let create = format!("{CONTAINERS}/items/create");
        assert!(p.allows(&who("reader"), &read, Some("any"), Some("x")));
        assert!(!p.allows(&who("reader"), &create, Some("any"), Some("x")));
        // Through the group, on one container only.
        assert!(p.allows(&who("someone"), &create, Some("app"), Some("c")));
        assert!(!p.allows(&who("someone"), &create, Some("app"), Some("d")));
        let sproc = format!("{CONTAINERS}/executeStoredProcedure");
        assert!(p.allows(
            &Identity {
                groups: vec![],
                ..who("q")
            },
            &format!("{CONTAINERS}/executeQuery"),
            Some("app"),
            Some("z")
        ));
        assert!(!p.allows(
            &Identity {
                groups: vec![],
                ..who("q")
            },
            &sproc,
            Some("app"),
            Some("z")
        ));
        let bad = Policy {
            role_assignments: vec![RoleAssignment {
                id: "x".into(),
                role_definition_id: "nope".into(),
                principal_id: "p".into(),
                scope: "/".into(),
            }],
            ..Default::default()
        };
        assert!(bad.check().is_err());
    }
}
