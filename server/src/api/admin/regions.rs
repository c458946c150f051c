//! `/_strata/regions`: the account's regions (`--regions`), their injected faults and the write
//! region. `GET` lists them; `PUT /_strata/regions/{name}` sets a region's fault
//! (`{"kind": "unavailable" | "write-forbidden" | "timeout" | "none", "latencyMs": N,
//! "holdMs": N}`; `{}` clears it); `POST /_strata/regions/{name}/failover` makes a region the
//! write region of a single-write account.

use crate::api::request::Req;
use crate::api::response::Reply;
use crate::api::App;
use crate::error::CosmosError;
use crate::regions::Fault;
use axum::http::StatusCode;
use serde_json::json;

pub fn read(app: &App) -> Result<Reply, CosmosError> {
    Ok(Reply::json(
        StatusCode::OK,
        &json!({
            "multiWrite": app.regions.multi_write(),
            "regions": app.regions.view(),
        }),
    ))
}

pub fn set_fault(app: &App, req: &Req, region: &str) -> Result<Reply, CosmosError> {
    let fault: Fault = serde_json::from_value(req.json()?).map_err(|e| {
        CosmosError::bad_request(format!(
            "A region's fault is {{\"kind\": \"none\" | \"unavailable\" | \"write-forbidden\" | \"timeout\", \"latencyMs\": N, \"holdMs\": N}}: {e}"
        ))
    })?;
    app.regions.set_fault(region, fault)?;
    read(app)
}

pub fn fail_over(app: &App, region: &str) -> Result<Reply, CosmosError> {
    app.regions.fail_over(region)?;
    read(app)
}
