//! `GET /`: the database account. The SDKs read it first and send every later request to the
//! endpoints it advertises, so those are built from how the client reached us (`localhost`
//! named by its address, as the official emulator does), one per region (see
//! [`crate::regions`]).

use crate::api::request::Req;
use crate::api::response::Reply;
use crate::api::App;
use crate::error::CosmosError;
use axum::http::StatusCode;
use serde_json::json;
use strata_query::protocol::header;

/// The endpoint the account advertises: how the client reached us, except that the official
/// emulator names itself by its address, not `localhost` (the SDKs' multi-region tests tell
/// the write region from the read region by exactly that).
fn advertised(endpoint: &str) -> String {
    match endpoint.split_once("://localhost") {
        Some((scheme, rest)) if rest.starts_with(':') || rest.starts_with('/') => {
            format!("{scheme}://127.0.0.1{rest}")
        }
        _ => endpoint.to_string(),
    }
}

/// The account as read through region `req.region`: every region's endpoint with its own
/// port, the write region(s) writable, all readable in failover priority.
pub fn read(app: &App, req: &Req) -> Result<Reply, CosmosError> {
    // Regions by host name keep the client's host name: each region's is made from it.
    let endpoint = match app.regions.by_host() {
        true => req.endpoint(),
        false => advertised(&req.endpoint()),
    };
    let locations = app.regions.locations(&endpoint, req.region);
    let body = json!({
        "_self": "",
        // Not "localhost": with that id the JS SDK never caches locations and re-reads the
        // account before every operation.
        "id": "strata",
        "_rid": "strata",
        "media": "//media/",
        "addresses": "//addresses/",
        "_dbs": "//dbs/",
        "writableLocations": locations.writable,
        "readableLocations": locations.readable,
        "enableMultipleWriteLocations": app.regions.multi_write(),
        "enablePerPartitionFailoverBehavior": app.regions.per_partition_failover(),
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

#[cfg(test)]
mod tests {
    use super::advertised;

    #[test]
    fn localhost_is_named_by_its_address_other_hosts_as_reached() {
        assert_eq!(
            advertised("https://localhost:8081/"),
            "https://127.0.0.1:8081/"
        );
        assert_eq!(advertised("http://localhost/"), "http://127.0.0.1/");
        assert_eq!(
            advertised("https://localhost.corp:8081/"),
            "https://localhost.corp:8081/"
        );
        assert_eq!(advertised("https://cosmos:8081/"), "https://cosmos:8081/");
    }
}
