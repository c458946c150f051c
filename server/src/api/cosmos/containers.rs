//! Containers: create, read, list, query, replace, delete.

use crate::api::cosmos::offers::throughput_from_headers;
use crate::api::request::Req;
use crate::api::response::Reply;
use crate::api::App;
use crate::error::CosmosError;
use crate::items::document::validate_id;
use crate::store::catalog::{self, ContainerRecord};
use crate::store::container::{gsi, Container};
use axum::http::StatusCode;
use serde_json::{json, Map, Value};
use strata_query::pk::PartitionKeyDefinition;
use strata_query::protocol::header;

/// Properties the service owns; never stored from a request body.
const SYSTEM: &[&str] = &[
    "id",
    "partitionKey",
    "_rid",
    "_ts",
    "_self",
    "_etag",
    "_docs",
    "_sprocs",
    "_triggers",
    "_udfs",
    "_conflicts",
];

pub fn to_json(c: &Container) -> Value {
    c.with_meta(|meta| render(c, meta))
}

fn render(c: &Container, meta: &ContainerRecord) -> Value {
    let mut m = Map::new();
    m.insert("id".into(), Value::String(c.id.clone()));
    for (k, v) in &meta.props {
        m.insert(k.clone(), v.clone());
    }
    // A global secondary index's build status, as it is now.
    if let Some(Value::Object(d)) = m.get_mut(gsi::PROP) {
        d.insert("status".into(), Value::String(c.gsi_status().into()));
    }
    m.insert("partitionKey".into(), c.pk.to_json());
    m.insert("_rid".into(), Value::String(c.rid.clone()));
    m.insert("_ts".into(), Value::from(meta.ts));
    m.insert(
        "_self".into(),
        Value::String(format!("dbs/{}/colls/{}/", c.db_rid, c.rid)),
    );
    m.insert(
        "_etag".into(),
        Value::String(catalog::etag(0, meta.etag_seq)),
    );
    for (k, v) in [
        ("_docs", "docs/"),
        ("_sprocs", "sprocs/"),
        ("_triggers", "triggers/"),
        ("_udfs", "udfs/"),
        ("_conflicts", "conflicts/"),
    ] {
        m.insert(k.into(), Value::String(v.into()));
    }
    Value::Object(m)
}

fn etag_of(c: &Container) -> String {
    c.with_meta(|m| catalog::etag(0, m.etag_seq))
}

/// The user-settable properties of a container body, validated.
fn user_props(body: &Map<String, Value>) -> Result<Map<String, Value>, CosmosError> {
    let mut props = Map::new();
    for (k, v) in body {
        if SYSTEM.contains(&k.as_str()) {
            continue;
        }
        props.insert(k.clone(), v.clone());
    }
    match props.get("defaultTtl") {
        None | Some(Value::Null) => {
            props.remove("defaultTtl");
        }
        Some(Value::Number(n)) if matches!(n.as_i64(), Some(t) if t == -1 || t > 0) => {}
        Some(other) => {
            return Err(CosmosError::bad_request(format!(
                "The value {other} of 'defaultTtl' is invalid: it must be -1 (items never expire unless they set 'ttl') or a positive number of seconds."
            )))
        }
    }
    if let Some(ip) = props.get("indexingPolicy") {
        if !ip.is_object() {
            return Err(CosmosError::bad_request(
                "The 'indexingPolicy' property must be a JSON object.",
            ));
        }
    }
    Ok(props)
}

pub async fn create(app: &App, req: &Req, db: &str) -> Result<Reply, CosmosError> {
    let body = req.json_object()?;
    let id = validate_id(body.get("id").unwrap_or(&Value::Null), "container")?;
    let pk = match body.get("partitionKey") {
        None | Some(Value::Null) => PartitionKeyDefinition::system_default(),
        Some(v) => PartitionKeyDefinition::from_json(v)?,
    };
    let props = user_props(&body)?;
    let throughput = throughput_from_headers(req)?;
    let c = app
        .store
        .create_container(db, &id, pk, props, throughput)
        .await?;
    Ok(Reply::json(StatusCode::CREATED, &to_json(&c)).header(header::ETAG, etag_of(&c)))
}

pub fn read(app: &App, req: &Req, db: &str, coll: &str) -> Result<Reply, CosmosError> {
    let c = app.store.container(db, coll)?;
    let mut body = to_json(&c);
    let (bytes, count) = {
        let map = c.partitions();
        // Per-range statistics, as the service returns them when asked.
        if req.flag(header::POPULATE_PARTITION_STATISTICS) {
            let stats = map
                .ranges
                .iter()
                .map(|r| {
                    json!({"id": r.id.to_string(), "sizeInKB": r.bytes.div_ceil(1024),
                           "documentCount": r.count, "partitionKeys": []})
                })
                .collect();
            body["statistics"] = Value::Array(stats);
        }
        map.ranges
            .iter()
            .fold((0u64, 0u64), |(b, n), r| (b + r.bytes, n + r.count))
    };
    let mut reply = Reply::json(StatusCode::OK, &body);
    // strata's own: how far a global secondary index is behind its source (the Data
    // Explorer shows it).
    if let Some((lsns, seconds)) = app.store.gsi_lag(&c) {
        reply = reply.header(header::GSI_LAG, format!("changes={lsns};seconds={seconds}"));
    }
    Ok(reply
        .header(header::ETAG, etag_of(&c))
        // Below 100 while the index of a replaced policy is being built.
        .header(
            header::INDEX_TRANSFORMATION_PROGRESS,
            c.index_progress().to_string(),
        )
        .header(
            header::RESOURCE_USAGE,
            format!(
                "documentSize={};documentsCount={count};collectionSize={}",
                bytes / 1024,
                bytes / 1024
            ),
        )
        .header(
            header::RESOURCE_QUOTA,
            "documentSize=10240;documentsCount=-1;collectionSize=10240",
        )
        .container(&c))
}

pub fn all(app: &App, db: &str) -> Result<Vec<Value>, CosmosError> {
    Ok(app
        .store
        .list_containers(db)?
        .iter()
        .map(|c| to_json(c))
        .collect())
}

pub fn list(app: &App, db: &str) -> Result<Reply, CosmosError> {
    let d = app.store.database(db)?;
    let docs = all(app, db)?;
    let body = serde_json::json!({
        "_rid": catalog::db_rid(d.seq),
        "DocumentCollections": docs,
        "_count": docs.len(),
    });
    Ok(Reply::json(StatusCode::OK, &body).header(header::ITEM_COUNT, docs.len().to_string()))
}

pub async fn replace(app: &App, req: &Req, db: &str, coll: &str) -> Result<Reply, CosmosError> {
    let c = app.store.container(db, coll)?;
    if let Some(m) = req.if_match() {
        if m != "*" && m != etag_of(&c) {
            return Err(CosmosError::precondition_failed(
                "The container was changed since the given etag (If-Match).",
            ));
        }
    }
    let body = req.json_object()?;
    let id = validate_id(body.get("id").unwrap_or(&Value::Null), "container")?;
    if id != c.id {
        return Err(CosmosError::bad_request(format!(
            "The id '{id}' in the body does not match the container '{}' being replaced.",
            c.id
        )));
    }
    if let Some(v) = body.get("partitionKey").filter(|v| !v.is_null()) {
        let new = PartitionKeyDefinition::from_json(v)?;
        if new.paths != c.pk.paths || new.kind != c.pk.kind || new.version != c.pk.version {
            return Err(CosmosError::bad_request(
                "The partition key of a container cannot be changed; create a new container and copy the data.",
            ));
        }
    }
    let props = user_props(&body)?;
    app.store.replace_container(&c, props).await?;
    Ok(Reply::json(StatusCode::OK, &to_json(&c))
        .header(header::ETAG, etag_of(&c))
        .container(&c))
}

pub async fn delete(app: &App, db: &str, coll: &str) -> Result<Reply, CosmosError> {
    app.store.delete_container(db, coll).await?;
    Ok(Reply::empty(StatusCode::NO_CONTENT))
}
