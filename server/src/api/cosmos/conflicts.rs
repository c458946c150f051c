//! Conflicts: the feed of writes that lost a multi-region conflict. strata has one write
//! region, so writes never conflict: the feed and every query over it are empty, and a
//! named conflict is never found. The SDKs' conflict calls therefore behave as they do on a
//! single-region account instead of failing as unsupported.

use crate::api::response::Reply;
use crate::api::{query, App, Req};
use crate::error::CosmosError;
use axum::http::StatusCode;
use serde_json::json;
use strata_query::protocol::header;

/// `GET .../colls/{coll}/conflicts`.
pub fn list(app: &App, db: &str, coll: &str) -> Result<Reply, CosmosError> {
    let c = app.store.container(db, coll)?;
    Ok(Reply::json(
        StatusCode::OK,
        &json!({"_rid": c.rid, "Conflicts": [], "_count": 0}),
    )
    .header(header::ITEM_COUNT, "0"))
}

/// `POST .../colls/{coll}/conflicts` with a query: validated like any query, over no rows.
pub fn query(app: &App, req: &Req, db: &str, coll: &str) -> Result<Reply, CosmosError> {
    let c = app.store.container(db, coll)?;
    // Conflicts live in partitions like items: a query naming none must enable
    // cross-partition queries.
    if req.partition_key()?.is_none() {
        query::require_cross_partition(req)?;
    }
    query::query_resources(req, &c.rid, "Conflicts", Vec::new())
}

/// `GET` or `DELETE .../colls/{coll}/conflicts/{id}`.
pub fn one(app: &App, db: &str, coll: &str, id: &str) -> Result<Reply, CosmosError> {
    let c = app.store.container(db, coll)?;
    Err(CosmosError::not_found(format!(
        "Conflict '{id}' does not exist in container '{}': strata has a single write region, so writes never conflict.",
        c.id
    )))
}
