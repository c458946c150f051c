//! Users and permissions (`/dbs/{db}/users[/{user}[/permissions[/{p}]]]`): create, upsert,
//! read, replace, delete, list and query. Reading a permission (and creating, replacing or
//! listing it) returns its resource token in `_token`, valid for
//! `x-ms-documentdb-expiry-seconds` (default one hour, at most five).

use crate::api::request::Req;
use crate::api::response::{feed_body, Reply};
use crate::api::security::tokens::{
    self, Claims, DEFAULT_VALIDITY_SECS, MAX_VALIDITY_SECS, MIN_VALIDITY_SECS,
};
use crate::api::App;
use crate::error::CosmosError;
use crate::exec::to_bytes;
use crate::items::document::{json_kind, validate_id};
use crate::store::catalog::{self, DatabaseRecord};
use crate::store::users::{
    permission_rid, user_rid, PermissionMode, PermissionRecord, PutMode, UserRecord,
};
use axum::http::StatusCode;
use serde_json::{json, Map, Value};
use strata_query::protocol::header;

fn user_json(d: &DatabaseRecord, u: &UserRecord) -> Value {
    let rid = user_rid(d.seq, u.seq);
    json!({
        "id": u.id,
        "_rid": rid,
        "_self": format!("dbs/{}/users/{rid}/", catalog::db_rid(d.seq)),
        "_etag": catalog::etag(0, u.etag_seq),
        "_ts": u.ts,
        "_permissions": "permissions/",
    })
}

/// The validity a request asks its tokens to have.
fn validity(req: &Req) -> Result<u64, CosmosError> {
    match req.header(header::EXPIRY_SECONDS) {
        None => Ok(DEFAULT_VALIDITY_SECS),
        Some(v) => match v.trim().parse::<u64>() {
            Ok(n) if (MIN_VALIDITY_SECS..=MAX_VALIDITY_SECS).contains(&n) => Ok(n),
            _ => Err(CosmosError::bad_request(format!(
                "Invalid value '{v}' for header x-ms-documentdb-expiry-seconds: a resource token is valid for {MIN_VALIDITY_SECS} to {MAX_VALIDITY_SECS} seconds."
            ))),
        },
    }
}

fn permission_json(
    app: &App,
    d: &DatabaseRecord,
    u: &UserRecord,
    p: &PermissionRecord,
    valid_for: u64,
) -> Value {
    let rid = permission_rid(d.seq, u.seq, p.seq);
    let token = tokens::mint(
        &app.token_key,
        &Claims {
            permission_rid: rid.clone(),
            etag_seq: p.etag_seq,
            expires: catalog::now_secs() + valid_for,
        },
    );
    let mut m = Map::new();
    m.insert("id".into(), Value::String(p.id.clone()));
    m.insert(
        "permissionMode".into(),
        Value::String(p.mode.as_str().into()),
    );
    m.insert("resource".into(), Value::String(p.resource.clone()));
    if let Some(k) = &p.partition_key {
        m.insert("resourcePartitionKey".into(), k.clone());
    }
    m.insert("_rid".into(), Value::String(rid.clone()));
    m.insert(
        "_self".into(),
        Value::String(format!(
            "dbs/{}/users/{}/permissions/{rid}/",
            catalog::db_rid(d.seq),
            user_rid(d.seq, u.seq)
        )),
    );
    m.insert("_etag".into(), Value::String(catalog::etag(0, p.etag_seq)));
    m.insert("_ts".into(), Value::from(p.ts));
    m.insert("_token".into(), Value::String(token));
    Value::Object(m)
}

fn put_mode(req: &Req) -> PutMode {
    if req.flag(header::IS_UPSERT) {
        PutMode::Upsert
    } else {
        PutMode::Create
    }
}

fn status(created: bool) -> StatusCode {
    if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    }
}

fn one(v: Value, etag: String, status: StatusCode) -> Reply {
    Reply::json(status, &v)
        .header(header::ETAG, etag)
        .charge(1.0)
}

// ---- users --------------------------------------------------------------------------------

pub async fn create_user(app: &App, req: &Req, db: &str) -> Result<Reply, CosmosError> {
    let body = req.json_object()?;
    let id = validate_id(body.get("id").unwrap_or(&Value::Null), "user")?;
    let (u, created) = app.store.put_user(db, &id, put_mode(req), &id).await?;
    let d = app.store.database(db)?;
    Ok(one(
        user_json(&d, &u),
        catalog::etag(0, u.etag_seq),
        status(created),
    ))
}

pub async fn replace_user(
    app: &App,
    req: &Req,
    db: &str,
    user: &str,
) -> Result<Reply, CosmosError> {
    let body = req.json_object()?;
    let id = validate_id(body.get("id").unwrap_or(&Value::Null), "user")?;
    let (u, _) = app.store.put_user(db, &id, PutMode::Replace, user).await?;
    let d = app.store.database(db)?;
    Ok(one(
        user_json(&d, &u),
        catalog::etag(0, u.etag_seq),
        StatusCode::OK,
    ))
}

pub fn read_user(app: &App, db: &str, user: &str) -> Result<Reply, CosmosError> {
    let d = app.store.database(db)?;
    let e = app.store.user(db, user)?;
    Ok(one(
        user_json(&d, &e.user),
        catalog::etag(0, e.user.etag_seq),
        StatusCode::OK,
    ))
}

pub async fn delete_user(app: &App, db: &str, user: &str) -> Result<Reply, CosmosError> {
    app.store.delete_user(db, user).await?;
    Ok(Reply::empty(StatusCode::NO_CONTENT).charge(1.0))
}

fn all_users(app: &App, db: &str) -> Result<(DatabaseRecord, Vec<Value>), CosmosError> {
    let d = app.store.database(db)?;
    let users = app.store.list_users(db)?;
    let docs = users.iter().map(|e| user_json(&d, &e.user)).collect();
    Ok((d, docs))
}

pub fn list_users(app: &App, db: &str) -> Result<Reply, CosmosError> {
    let (d, docs) = all_users(app, db)?;
    let bytes: Vec<_> = docs.iter().map(to_bytes).collect();
    Ok(Reply::new(
        StatusCode::OK,
        feed_body(&catalog::db_rid(d.seq), "Users", &bytes),
    )
    .header(header::ITEM_COUNT, bytes.len().to_string())
    .charge(1.0))
}

pub fn query_users(app: &App, req: &Req, db: &str) -> Result<Reply, CosmosError> {
    let (d, docs) = all_users(app, db)?;
    crate::api::cosmos::query::query_resources(req, &catalog::db_rid(d.seq), "Users", docs)
}

// ---- permissions --------------------------------------------------------------------------

/// A permission as a client sent it, checked.
fn new_permission(req: &Req) -> Result<PermissionRecord, CosmosError> {
    let body = req.json_object()?;
    let id = validate_id(body.get("id").unwrap_or(&Value::Null), "permission")?;
    let mode = match body.get("permissionMode") {
        Some(Value::String(m)) if m.eq_ignore_ascii_case("read") => PermissionMode::Read,
        Some(Value::String(m)) if m.eq_ignore_ascii_case("all") => PermissionMode::All,
        Some(other) => {
            return Err(CosmosError::bad_request(format!(
                "The permission's 'permissionMode' {other} is invalid: use \"Read\" or \"All\"."
            )))
        }
        None => {
            return Err(CosmosError::bad_request(
                "The input content is invalid because the required properties - 'permissionMode; ' - are missing.",
            ))
        }
    };
    let resource = match body.get("resource") {
        Some(Value::String(r)) if r.split('/').any(|s| s == "dbs") => r.clone(),
        Some(Value::String(r)) => {
            return Err(CosmosError::bad_request(format!(
                "The permission's 'resource' '{r}' is not a resource link: give one like dbs/{{db}}/colls/{{container}}[/docs/{{id}}]."
            )))
        }
        Some(other) => {
            return Err(CosmosError::bad_request(format!(
                "The permission's 'resource' must be a string link, not {}.",
                json_kind(other)
            )))
        }
        None => {
            return Err(CosmosError::bad_request(
                "The input content is invalid because the required properties - 'resource; ' - are missing.",
            ))
        }
    };
    let partition_key = match body.get("resourcePartitionKey") {
        None | Some(Value::Null) => None,
        Some(v @ Value::Array(a)) if !a.is_empty() && a.len() <= 3 => {
            strata_query::pk::PartitionKey::from_json_value(v)
                .map_err(|e| CosmosError::bad_request(e.0))?;
            Some(v.clone())
        }
        Some(v) => {
            return Err(CosmosError::bad_request(format!(
                "The permission's 'resourcePartitionKey' {v} is invalid: give a JSON array of one to three partition key values (a full key, or a prefix of a hierarchical key)."
            )))
        }
    };
    Ok(PermissionRecord {
        id,
        mode,
        resource,
        partition_key,
        seq: 0,
        ts: 0,
        etag_seq: 0,
    })
}

/// A prefix key only makes sense on a hierarchical container: checked when the resource is a
/// container that exists (a permission may name one that does not, as in the service).
fn check_key_fits(app: &App, p: &PermissionRecord) -> Result<(), CosmosError> {
    let (Some(v), Some((db, coll))) = (&p.partition_key, container_of(&p.resource)) else {
        return Ok(());
    };
    let Ok(c) = app.store.container(&db, &coll) else {
        return Ok(());
    };
    let pk = strata_query::pk::PartitionKey::from_json_value(v)
        .map_err(|e| CosmosError::bad_request(e.0))?;
    strata_query::pk::epk::epk_range(&c.pk, &pk).map_err(|e| {
        CosmosError::bad_request(format!(
            "The permission's 'resourcePartitionKey' {v} does not fit container '{}' ({}): {}",
            c.id,
            c.pk.paths.join(", "),
            e.0
        ))
    })?;
    Ok(())
}

fn container_of(link: &str) -> Option<(String, String)> {
    let segs: Vec<&str> = link.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["dbs", db, "colls", coll, ..] => Some((db.to_string(), coll.to_string())),
        _ => None,
    }
}

fn permission_reply(
    app: &App,
    req: &Req,
    db: &str,
    user: &str,
    p: &PermissionRecord,
    status: StatusCode,
) -> Result<Reply, CosmosError> {
    let d = app.store.database(db)?;
    let e = app.store.user(db, user)?;
    let v = permission_json(app, &d, &e.user, p, validity(req)?);
    Ok(one(v, catalog::etag(0, p.etag_seq), status))
}

/// Creates (or upserts) a permission, or replaces the one named `target`.
async fn put_permission(
    app: &App,
    req: &Req,
    db: &str,
    user: &str,
    mode: PutMode,
    target: Option<&str>,
) -> Result<Reply, CosmosError> {
    let p = new_permission(req)?;
    check_key_fits(app, &p)?;
    validity(req)?;
    let target = target.unwrap_or(&p.id).to_string();
    let (p, created) = app.store.put_permission(db, user, p, mode, &target).await?;
    permission_reply(app, req, db, user, &p, status(created))
}

pub async fn create_permission(
    app: &App,
    req: &Req,
    db: &str,
    user: &str,
) -> Result<Reply, CosmosError> {
    put_permission(app, req, db, user, put_mode(req), None).await
}

pub async fn replace_permission(
    app: &App,
    req: &Req,
    db: &str,
    user: &str,
    id: &str,
) -> Result<Reply, CosmosError> {
    put_permission(app, req, db, user, PutMode::Replace, Some(id)).await
}

pub fn read_permission(
    app: &App,
    req: &Req,
    db: &str,
    user: &str,
    id: &str,
) -> Result<Reply, CosmosError> {
    let d = app.store.database(db)?;
    let e = app.store.user(db, user)?;
    let p = e.permission(d.seq, id).cloned().ok_or_else(|| {
        CosmosError::not_found(format!(
            "Resource Not Found: the permission '{id}' does not exist for user '{}'.",
            e.user.id
        ))
    })?;
    permission_reply(app, req, db, user, &p, StatusCode::OK)
}

pub async fn delete_permission(
    app: &App,
    db: &str,
    user: &str,
    id: &str,
) -> Result<Reply, CosmosError> {
    app.store.delete_permission(db, user, id).await?;
    Ok(Reply::empty(StatusCode::NO_CONTENT).charge(1.0))
}

fn all_permissions(
    app: &App,
    req: &Req,
    db: &str,
    user: &str,
) -> Result<(String, Vec<Value>), CosmosError> {
    let d = app.store.database(db)?;
    let e = app.store.user(db, user)?;
    let valid_for = validity(req)?;
    let docs = e
        .permissions
        .values()
        .map(|p| permission_json(app, &d, &e.user, p, valid_for))
        .collect();
    Ok((user_rid(d.seq, e.user.seq), docs))
}

pub fn list_permissions(app: &App, req: &Req, db: &str, user: &str) -> Result<Reply, CosmosError> {
    let (rid, docs) = all_permissions(app, req, db, user)?;
    let bytes: Vec<_> = docs.iter().map(to_bytes).collect();
    Ok(
        Reply::new(StatusCode::OK, feed_body(&rid, "Permissions", &bytes))
            .header(header::ITEM_COUNT, bytes.len().to_string())
            .charge(1.0),
    )
}

pub fn query_permissions(app: &App, req: &Req, db: &str, user: &str) -> Result<Reply, CosmosError> {
    let (rid, docs) = all_permissions(app, req, db, user)?;
    crate::api::cosmos::query::query_resources(req, &rid, "Permissions", docs)
}
