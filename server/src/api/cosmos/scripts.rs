//! Stored procedures, triggers and UDFs as resources: create, upsert, read, replace, delete,
//! list and query (`.../colls/{coll}/sprocs|triggers|udfs[/{id}]`). Executing a stored
//! procedure is [`crate::api::cosmos::sprocs`]; triggers run from item writes ([`crate::items::triggers`]).

use crate::api::request::Req;
use crate::api::response::{feed_body, Reply};
use crate::api::App;
use crate::error::CosmosError;
use crate::exec::to_bytes;
use crate::items::document::{json_kind, validate_id};
use crate::store::container::Container;
use crate::store::scripts::{NewScript, PutMode, ScriptKind, ScriptRecord, TriggerSpec};
use axum::http::StatusCode;
use serde_json::{Map, Value};
use std::sync::Arc;
use strata_query::protocol::header;

/// A script as the service shows it.
pub fn to_json(c: &Container, r: &ScriptRecord) -> Value {
    let rid = r.rid(c);
    let mut m = Map::new();
    m.insert("id".into(), Value::String(r.id.clone()));
    m.insert("body".into(), Value::String(r.body.clone()));
    if let Some(t) = &r.trigger {
        m.insert("triggerType".into(), Value::String(t.trigger_type.clone()));
        m.insert(
            "triggerOperation".into(),
            Value::String(t.trigger_operation.clone()),
        );
    }
    m.insert("_rid".into(), Value::String(rid.clone()));
    m.insert(
        "_self".into(),
        Value::String(format!(
            "dbs/{}/colls/{}/{}/{rid}/",
            c.db_rid,
            c.rid,
            r.kind.segment()
        )),
    );
    m.insert("_etag".into(), Value::String(r.etag()));
    m.insert("_ts".into(), Value::from(r.ts));
    Value::Object(m)
}

fn one(c: &Container, r: &ScriptRecord, status: StatusCode) -> Reply {
    Reply::json(status, &to_json(c, r))
        .header(header::ETAG, r.etag())
        .charge(1.0)
        .container(c)
}

fn not_found(c: &Container, kind: ScriptKind, id: &str) -> CosmosError {
    CosmosError::not_found(format!(
        "Resource Not Found: the {} '{id}' does not exist in container '{}'.",
        kind.noun(),
        c.id
    ))
}

/// Reads and checks a script body from a request.
fn new_script(req: &Req, kind: ScriptKind) -> Result<NewScript, CosmosError> {
    let body = req.json_object()?;
    let id = validate_id(body.get("id").unwrap_or(&Value::Null), kind.noun())?;
    let text = match body.get("body") {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => {
            return Err(CosmosError::bad_request(format!(
                "The input content is invalid because the required properties - 'body; ' - are missing: a {} needs its JavaScript source in a string 'body'.",
                kind.noun()
            )))
        }
        Some(other) => {
            return Err(CosmosError::bad_request(format!(
                "The {} 'body' must be a string of JavaScript, not {}.",
                kind.noun(),
                json_kind(other)
            )))
        }
    };
    let trigger = match kind {
        ScriptKind::Trigger => Some(trigger_spec(&body)?),
        _ => None,
    };
    Ok(NewScript {
        kind,
        id,
        body: text,
        trigger,
    })
}

fn trigger_spec(body: &Map<String, Value>) -> Result<TriggerSpec, CosmosError> {
    let field = |name: &str, allowed: &[&str]| -> Result<String, CosmosError> {
        let v = body.get(name).and_then(Value::as_str).ok_or_else(|| {
            CosmosError::bad_request(format!(
                "The input content is invalid because the required properties - '{name}; ' - are missing: a trigger needs '{name}' ({}).",
                allowed.join(", ")
            ))
        })?;
        if !allowed.iter().any(|a| a.eq_ignore_ascii_case(v)) {
            return Err(CosmosError::bad_request(format!(
                "The trigger's '{name}' value '{v}' is invalid: use one of {}.",
                allowed.join(", ")
            )));
        }
        Ok(v.to_string())
    };
    Ok(TriggerSpec {
        trigger_type: field("triggerType", &["Pre", "Post"])?,
        trigger_operation: field(
            "triggerOperation",
            &["All", "Create", "Replace", "Delete", "Upsert", "Update"],
        )?,
    })
}

/// `POST .../{kind}`: create, or upsert with `x-ms-documentdb-is-upsert`.
pub async fn create(
    app: &App,
    req: &Req,
    c: &Arc<Container>,
    kind: ScriptKind,
) -> Result<Reply, CosmosError> {
    let new = new_script(req, kind)?;
    let mode = if req.flag(header::IS_UPSERT) {
        PutMode::Upsert
    } else {
        PutMode::Create
    };
    let target = new.id.clone();
    let (rec, created) = app
        .store
        .put_script(c, new, mode, &target, req.if_match())
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(one(c, &rec, status))
}

/// `PUT .../{kind}/{id}`.
pub async fn replace(
    app: &App,
    req: &Req,
    c: &Arc<Container>,
    kind: ScriptKind,
    id: &str,
) -> Result<Reply, CosmosError> {
    let new = new_script(req, kind)?;
    let (rec, _) = app
        .store
        .put_script(c, new, PutMode::Replace, id, req.if_match())
        .await?;
    Ok(one(c, &rec, StatusCode::OK))
}

/// `GET .../{kind}/{id}`.
pub fn read(
    req: &Req,
    c: &Arc<Container>,
    kind: ScriptKind,
    id: &str,
) -> Result<Reply, CosmosError> {
    let rec = c
        .scripts()
        .get(c, kind, id)
        .ok_or_else(|| not_found(c, kind, id))?;
    if let Some(inm) = req.if_none_match() {
        if crate::items::etag_matches(inm, &rec.etag()) {
            return Ok(Reply::empty(StatusCode::NOT_MODIFIED)
                .header(header::ETAG, rec.etag())
                .charge(1.0));
        }
    }
    Ok(one(c, &rec, StatusCode::OK))
}

/// `DELETE .../{kind}/{id}`.
pub async fn delete(
    app: &App,
    c: &Arc<Container>,
    kind: ScriptKind,
    id: &str,
) -> Result<Reply, CosmosError> {
    app.store.delete_script(c, kind, id).await?;
    Ok(Reply::empty(StatusCode::NO_CONTENT)
        .charge(1.0)
        .container(c))
}

/// Every script of a kind, as documents.
fn all(c: &Container, kind: ScriptKind) -> Vec<Value> {
    c.scripts().of(kind).map(|r| to_json(c, r)).collect()
}

/// `GET .../{kind}`.
pub fn list(c: &Arc<Container>, kind: ScriptKind) -> Result<Reply, CosmosError> {
    let docs: Vec<_> = all(c, kind).iter().map(to_bytes).collect();
    Ok(
        Reply::new(StatusCode::OK, feed_body(&c.rid, kind.feed_key(), &docs))
            .header(header::ITEM_COUNT, docs.len().to_string())
            .charge(1.0)
            .container(c),
    )
}

/// `POST .../{kind}` with a query.
pub fn query(req: &Req, c: &Arc<Container>, kind: ScriptKind) -> Result<Reply, CosmosError> {
    crate::api::cosmos::query::query_resources(req, &c.rid, kind.feed_key(), all(c, kind))
}
