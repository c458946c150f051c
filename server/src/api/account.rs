//! `GET /`: the database account. Both SDKs read it first and send every later request to the
//! endpoint it advertises, so that endpoint is built from how the client reached us.

use super::request::Req;
use super::response::Reply;
use crate::error::CosmosError;
use axum::http::StatusCode;
use serde_json::json;
use strata_query::protocol::header;

pub fn read(req: &Req) -> Result<Reply, CosmosError> {
    let loc = json!([{"name": "South Central US", "databaseAccountEndpoint": req.endpoint}]);
    let body = json!({
        "_self": "",
        // Not "localhost": with that id the JS SDK never caches locations and re-reads the
        // account before every operation.
        "id": "strata",
        "_rid": "strata",
        "media": "//media/",
        "addresses": "//addresses/",
        "_dbs": "//dbs/",
        "writableLocations": loc,
        "readableLocations": loc,
        "enableMultipleWriteLocations": false,
        "enablePerPartitionFailoverBehavior": false,
        "userReplicationPolicy": {"asyncReplication": false, "minReplicaSetSize": 1, "maxReplicasetSize": 4},
        "userConsistencyPolicy": {"defaultConsistencyLevel": "Session"},
        "systemReplicationPolicy": {"minReplicaSetSize": 1, "maxReplicasetSize": 4},
        "readPolicy": {"primaryReadCoefficient": 1, "secondaryReadCoefficient": 1},
        "queryEngineConfiguration": "{\"maxSqlQueryInputLength\":262144,\"maxJoinsPerSqlQuery\":5,\"maxLogicalAndPerSqlQuery\":500,\"maxLogicalOrPerSqlQuery\":500,\"maxUdfRefPerSqlQuery\":10,\"maxInExpressionItemsCount\":16000,\"queryMaxInMemorySortDocumentCount\":500,\"maxQueryRequestTimeoutFraction\":0.9,\"sqlAllowNonFiniteNumbers\":false,\"sqlAllowAggregateFunctions\":true,\"sqlAllowSubQuery\":true,\"sqlAllowScalarSubQuery\":true,\"allowNewKeywords\":true,\"sqlAllowLike\":true,\"sqlAllowGroupByClause\":true,\"maxSpatialQueryCells\":12,\"spatialMaxGeometryPointCount\":256,\"sqlDisableOptimizationFlags\":0,\"sqlAllowTop\":true,\"enableSpatialIndexing\":true}"
    });
    Ok(Reply::json(StatusCode::OK, &body)
        .header(header::MAX_MEDIA_STORAGE_USAGE_MB, "10240")
        .header(header::MEDIA_STORAGE_USAGE_MB, "0")
        .header(header::DATABASEACCOUNT_CONSUMED_MB, "0")
        .header(header::DATABASEACCOUNT_RESERVED_MB, "0")
        .header(header::DATABASEACCOUNT_PROVISIONED_MB, "0"))
}
