//! `/_strata/rbac`: reading and replacing the account's data-plane RBAC policy with the
//! account key. The policy itself, and the authorization it decides, is [`crate::api::security::rbac`].

use crate::api::request::Req;
use crate::api::response::Reply;
use crate::api::security::rbac::{built_in, Policy};
use crate::api::App;
use crate::error::CosmosError;

/// `GET /_strata/rbac`: the policy, built-in roles included.
pub fn read(app: &App) -> Result<Reply, CosmosError> {
    let mut p = app.rbac.get();
    p.role_definitions.splice(0..0, built_in().iter().cloned());
    let v = serde_json::to_value(&p).map_err(|e| CosmosError::internal(e.to_string()))?;
    Ok(Reply::json(axum::http::StatusCode::OK, &v))
}

/// `PUT /_strata/rbac`: replaces the custom roles and the assignments (built-in roles sent
/// back are ignored).
pub fn replace(app: &App, req: &Req) -> Result<Reply, CosmosError> {
    let mut p: Policy = serde_json::from_value(req.json()?).map_err(|e| {
        CosmosError::bad_request(format!(
            "The RBAC policy must be {{\"roleDefinitions\": [...], \"roleAssignments\": [...]}}: {e}"
        ))
    })?;
    p.role_definitions
        .retain(|d| built_in().iter().all(|b| b.id != d.id));
    app.rbac.set(p)?;
    read(app)
}
