//! Authorization: what a [`Principal`] may do with an [`Endpoint`].
//!
//! The master key may do everything; the read-only key every read (and no permission reads,
//! which would mint tokens that write). A resource token may do exactly what its permission
//! grants: `Read` or `All`, on the named resource and its children, and — when the permission
//! names a `resourcePartitionKey` — only on items whose EPK lies in that key, or (strata's
//! extension) in that prefix of a hierarchical key. Point operations outside it are refused;
//! feeds and queries are narrowed to it (the returned range, which `scope.rs` intersects with
//! every request scope, so a cross-partition query visits only the prefix's ranges). Every
//! token may also read the account and the database and container its resource lives in:
//! the SDKs read them before anything else.

use crate::api::endpoint::{Endpoint, Part, Target};
use crate::api::request::Req;
use crate::api::security::auth::Principal;
use crate::api::App;
use crate::error::CosmosError;
use crate::store::container::Container;
use crate::store::users::{PermissionMode, PermissionRecord};
use serde_json::Value;
use strata_query::pk::epk::epk_range;
use strata_query::pk::{EpkRange, PartitionKey};
use strata_query::protocol::is_rid_based;

fn forbidden(why: impl std::fmt::Display) -> CosmosError {
    CosmosError::forbidden(format!(
        "Insufficient permissions provided in the authorization header for the corresponding request. Please retry with another authorization header. ({why})"
    ))
}

/// Checks that `principal` may call `ep`; for a token scoped to a partition key, returns the
/// EPK range feeds and queries are narrowed to.
pub fn authorize(
    app: &App,
    principal: &Principal,
    ep: &Endpoint,
    req: &Req,
) -> Result<Option<EpkRange>, CosmosError> {
    match principal {
        Principal::Master => Ok(None),
        Principal::ReadOnly => {
            if ep.is_write(&req.method) {
                return Err(forbidden("the read-only key cannot change anything"));
            }
            if matches!(
                ep,
                Endpoint::ListPermissions { .. }
                    | Endpoint::QueryPermissions { .. }
                    | Endpoint::ReadPermission { .. }
            ) {
                return Err(forbidden(
                    "the read-only key cannot read permissions (their tokens may write)",
                ));
            }
            Ok(None)
        }
        Principal::Aad(who) => {
            app.rbac.authorize(who, ep, req)?;
            Ok(None)
        }
        Principal::Resource(claims) => {
            let expired = || {
                CosmosError::unauthorized(
                    "The resource token is no longer valid: its permission was deleted or replaced. Read the permission again for a fresh token.",
                )
            };
            let (_, _, perm) = app
                .store
                .permission_by_rid(&claims.permission_rid)
                .ok_or_else(expired)?;
            if perm.etag_seq != claims.etag_seq {
                return Err(expired());
            }
            Grant::resolve(app, &perm).check(app, ep, req)
        }
    }
}

/// A permission's resource, resolved to names.
struct Grant {
    /// `None`: the resource does not exist (the grant reaches nothing but the account).
    db: Option<String>,
    coll: Option<String>,
    /// A single document, stored procedure, trigger or UDF: (path segment, id).
    leaf: Option<(String, String)>,
    all: bool,
    partition_key: Option<Value>,
    link: String,
}

impl Grant {
    fn resolve(app: &App, p: &PermissionRecord) -> Grant {
        let segs: Vec<String> = p
            .resource
            .split('/')
            .filter(|s| !s.is_empty())
            .map(|s| {
                percent_encoding::percent_decode_str(s)
                    .decode_utf8_lossy()
                    .into_owned()
            })
            .collect();
        let mut g = Grant {
            db: None,
            coll: None,
            leaf: None,
            all: p.mode == PermissionMode::All,
            partition_key: p.partition_key.clone(),
            link: p.resource.clone(),
        };
        let by_rid = is_rid_based(&segs);
        let strs: Vec<&str> = segs.iter().map(String::as_str).collect();
        let (db, rest) = match strs.as_slice() {
            ["dbs", db, rest @ ..] => (*db, rest),
            _ => return g,
        };
        let db_name = if by_rid {
            match app.store.database(db) {
                Ok(d) => d.id,
                Err(_) => return g,
            }
        } else {
            db.to_string()
        };
        match rest {
            [] => g.db = Some(db_name),
            ["colls", coll, more @ ..] => {
                let coll_name = if by_rid {
                    match app.store.container(&db_name, coll) {
                        Ok(c) => c.id.clone(),
                        Err(_) => return g,
                    }
                } else {
                    coll.to_string()
                };
                match more {
                    [] => {}
                    [seg, id] => g.leaf = Some((seg.to_string(), id.to_string())),
                    _ => return g,
                }
                g.db = Some(db_name);
                g.coll = Some(coll_name);
            }
            _ => {}
        }
        g
    }

    fn check(&self, app: &App, ep: &Endpoint, req: &Req) -> Result<Option<EpkRange>, CosmosError> {
        let write = ep.is_write(&req.method);
        let link = &self.link;
        let Some(gdb) = &self.db else {
            return match ep.target() {
                Target::Account => Ok(None),
                _ => Err(forbidden(format!(
                    "the token's resource '{link}' does not exist"
                ))),
            };
        };
        let need_all = |what: &str| -> Result<(), CosmosError> {
            if write && !self.all {
                return Err(forbidden(format!(
                    "the token's permission on '{link}' is Read; {what} needs All"
                )));
            }
            Ok(())
        };
        let outside = || {
            forbidden(format!(
                "the request is outside the token's resource '{link}'"
            ))
        };
        match ep.target() {
            Target::Account => Ok(None),
            Target::Admin => Err(forbidden(
                "resource tokens cannot manage databases, offers, users or permissions",
            )),
            Target::Database(db) => {
                let name = app.store.database(db).map(|d| d.id).unwrap_or_default();
                if &name != gdb || write {
                    return Err(outside());
                }
                Ok(None)
            }
            Target::Containers(db) => {
                let name = app.store.database(db).map(|d| d.id).unwrap_or_default();
                if &name != gdb || self.coll.is_some() {
                    return Err(outside());
                }
                need_all("creating a container")?;
                Ok(None)
            }
            Target::Container { db, coll, part } => {
                let Ok(c) = app.store.container(db, coll) else {
                    // Let the handler answer 404 for what does not exist, unless the
                    // token could never reach it.
                    let named = app.store.database(db).map(|d| d.id).unwrap_or_default();
                    if &named != gdb {
                        return Err(outside());
                    }
                    return Ok(None);
                };
                if &c.db != gdb || self.coll.as_ref().is_some_and(|g| *g != c.id) {
                    return Err(outside());
                }
                self.check_part(&c, part, write, req)
            }
        }
    }

    fn check_part(
        &self,
        c: &Container,
        part: Part<'_>,
        write: bool,
        req: &Req,
    ) -> Result<Option<EpkRange>, CosmosError> {
        let link = &self.link;
        let need_all = |what: &str| -> Result<(), CosmosError> {
            if !self.all {
                return Err(forbidden(format!(
                    "the token's permission on '{link}' is Read; {what} needs All"
                )));
            }
            Ok(())
        };
        let leaf_only = || {
            forbidden(format!(
                "the token reaches only the resource '{link}', not its container's other contents"
            ))
        };
        match part {
            Part::Itself | Part::Ranges | Part::Conflicts => {
                if write {
                    if self.leaf.is_some() {
                        return Err(leaf_only());
                    }
                    self.whole_container()?;
                    need_all("this change")?;
                }
                Ok(None)
            }
            Part::Items { id, point } => {
                match (&self.leaf, id) {
                    (None, _) => {}
                    (Some((seg, lid)), Some(id)) if seg == "docs" && lid == id => {}
                    _ => return Err(leaf_only()),
                }
                if write {
                    need_all("writing items")?;
                }
                self.key_scope(c, req, point)
            }
            Part::Scripts { kind, id, execute } => {
                match (&self.leaf, id) {
                    (None, _) => {}
                    (Some((seg, lid)), Some(id)) if seg == kind.segment() && lid == id => {}
                    _ => return Err(leaf_only()),
                }
                if execute {
                    need_all("executing a stored procedure")?;
                    return self.key_scope(c, req, true);
                }
                if write {
                    if self.leaf.is_some() {
                        return Err(leaf_only());
                    }
                    self.whole_container()?;
                    need_all("changing scripts")?;
                }
                Ok(None)
            }
        }
    }

    /// Changes to the container itself (its properties, scripts, conflicts) reach every
    /// partition key, so a token scoped to one key or prefix may not make them.
    fn whole_container(&self) -> Result<(), CosmosError> {
        match &self.partition_key {
            Some(v) => Err(forbidden(format!(
                "the token is scoped to the partition key {v}; changing the container itself reaches every key"
            ))),
            None => Ok(()),
        }
    }

    /// With a partition key in the permission: a point request's key must lie in it (403
    /// otherwise), and feeds and queries are narrowed to it.
    fn key_scope(
        &self,
        c: &Container,
        req: &Req,
        point: bool,
    ) -> Result<Option<EpkRange>, CosmosError> {
        let Some(v) = &self.partition_key else {
            return Ok(None);
        };
        let granted = PartitionKey::from_json_value(v)
            .ok()
            .and_then(|pk| epk_range(&c.pk, &pk).ok())
            .ok_or_else(|| {
                forbidden(format!(
                    "the token's resourcePartitionKey {v} does not fit the container's partition key ({})",
                    c.pk.paths.join(", ")
                ))
            })?;
        let asked = match req.partition_key()? {
            Some(pk) => Some(pk),
            None if point => {
                // A create or replace without the header routes by the document's own key.
                let doc = serde_json::from_slice::<Value>(&req.body).ok();
                doc.as_ref()
                    .and_then(Value::as_object)
                    .map(|d| c.pk.extract_map(d))
            }
            None => None,
        };
        match asked {
            Some(pk) => {
                let r = epk_range(&c.pk, &pk).map_err(|e| CosmosError::bad_request(e.0))?;
                if granted.intersect(&r).as_ref() != Some(&r) {
                    return Err(forbidden(format!(
                        "the partition key {pk} is outside the token's resourcePartitionKey {v}"
                    )));
                }
            }
            None if point => {
                return Err(forbidden(format!(
                    "the token is scoped to the partition key {v}; send the x-ms-documentdb-partitionkey header"
                )))
            }
            None => {}
        }
        Ok(Some(granted))
    }
}
