//! Databases: create, read, list, query, delete.

use crate::api::cosmos::offers::throughput_from_headers;
use crate::api::request::Req;
use crate::api::response::Reply;
use crate::api::App;
use crate::error::CosmosError;
use crate::items::document::validate_id;
use crate::store::catalog::{self, DatabaseRecord};
use axum::http::StatusCode;
use serde_json::{json, Value};
use strata_query::protocol::header;

pub fn to_json(d: &DatabaseRecord) -> Value {
    let rid = catalog::db_rid(d.seq);
    json!({
        "id": d.id,
        "_rid": rid,
        "_self": format!("dbs/{rid}/"),
        "_etag": catalog::etag(0, d.etag_seq),
        "_colls": "colls/",
        "_users": "users/",
        "_ts": d.ts,
    })
}

pub async fn create(app: &App, req: &Req) -> Result<Reply, CosmosError> {
    let body = req.json_object()?;
    let id = validate_id(body.get("id").unwrap_or(&Value::Null), "database")?;
    let throughput = throughput_from_headers(req)?;
    let d = app.store.create_database(&id, throughput).await?;
    Ok(Reply::json(StatusCode::CREATED, &to_json(&d))
        .header(header::ETAG, catalog::etag(0, d.etag_seq)))
}

pub fn read(app: &App, db: &str) -> Result<Reply, CosmosError> {
    let d = app.store.database(db)?;
    Ok(
        Reply::json(StatusCode::OK, &to_json(&d))
            .header(header::ETAG, catalog::etag(0, d.etag_seq)),
    )
}

pub fn all(app: &App) -> Vec<Value> {
    app.store.list_databases().iter().map(to_json).collect()
}

pub fn list(app: &App) -> Result<Reply, CosmosError> {
    let docs = all(app);
    Ok(Reply::json(
        StatusCode::OK,
        &json!({"_rid": "", "Databases": docs, "_count": docs.len()}),
    )
    .header(header::ITEM_COUNT, docs.len().to_string()))
}

pub async fn delete(app: &App, db: &str) -> Result<Reply, CosmosError> {
    app.store.delete_database(db).await?;
    Ok(Reply::empty(StatusCode::NO_CONTENT))
}
