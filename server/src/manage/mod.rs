//! The management API of Microsoft's SDK test emulator (`azure_data_cosmos_emulator`), so the
//! SDK harnesses that drive it can drive strata: the actions the Cosmos wire protocol has no
//! request for — split or merge a partition, pause a region's replication, turn per-partition
//! failover on — on a port of their own (`--management-port`), plain HTTP on loopback, with
//! no key (only this machine reaches it). Errors are `{"error": "..."}` as there.
//!
//! * `GET /health`, `GET /account`
//! * `POST /databases/{db}/containers/{c}/partitions/{id}/split` (body optional: `mode`
//!   midpoint|epk|storage, `epk`, `progressionMode` automatic|manual, `lockDurationMs`)
//! * `POST /databases/{db}/containers/{c}/partitions/merge` (`partitionIds: [a, b]`, ...)
//! * `GET /operations/{id}`, `POST /operations/{id}/advance` (see [`operations`])
//! * `PUT /config/per-partition-failover` (`{"enabled": bool}`)
//! * `POST /regions/{region}/replication/pause` and `.../resume`

pub mod operations;

use crate::regions::Regions;
use crate::store::container::Container;
use crate::store::{Store, StoreError};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use operations::{AdvanceError, Change, Operation, Registry};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// The longest `Swapping` an automatic operation may hold.
const MAX_LOCK_MS: u64 = 60_000;
/// The largest body a management request may send.
const MAX_BODY: usize = 1024 * 1024;

/// What the management endpoint works on.
#[derive(Clone)]
pub struct Manage {
    store: Store,
    regions: Regions,
    /// Each region's name and Cosmos endpoint, in the order the regions were named.
    endpoints: Arc<Vec<(String, String)>>,
    operations: Arc<Registry>,
}

impl Manage {
    pub fn new(store: Store, regions: Regions, endpoints: Vec<(String, String)>) -> Self {
        Self {
            store,
            regions,
            endpoints: Arc::new(endpoints),
            operations: Arc::default(),
        }
    }

    pub fn router(self) -> Router {
        let partitions = "/databases/{db}/containers/{coll}/partitions";
        Router::new()
            .route("/health", get(health))
            .route("/account", get(account))
            .route(&format!("{partitions}/{{id}}/split"), post(split))
            .route(&format!("{partitions}/merge"), post(merge))
            .route("/operations/{id}", get(operation))
            .route("/operations/{id}/advance", post(advance))
            .route(
                "/config/per-partition-failover",
                put(per_partition_failover),
            )
            .route("/regions/{region}/replication/pause", post(pause))
            .route("/regions/{region}/replication/resume", post(resume))
            .fallback(|| async { ApiError::not_found("no such management route".into()) })
            .with_state(self)
    }
}

/// An error as the SDK test emulator's management API answers it.
#[derive(Debug)]
pub struct ApiError(StatusCode, String);

impl ApiError {
    fn bad_request(m: String) -> Self {
        Self(StatusCode::BAD_REQUEST, m)
    }
    fn not_found(m: String) -> Self {
        Self(StatusCode::NOT_FOUND, m)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({"error": self.1}))).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        let status = match &e {
            StoreError::NotFound(_) => StatusCode::NOT_FOUND,
            StoreError::BadRequest(_) => StatusCode::BAD_REQUEST,
            StoreError::Conflict(_) => StatusCode::CONFLICT,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self(status, e.to_string())
    }
}

type ApiResult<T> = Result<T, ApiError>;

async fn health() -> Json<Value> {
    // strata serves no Gateway 2.0 (RNTBD) endpoint, so it has no probes or requests to count.
    Json(
        json!({"status": "ok", "gateway20Enabled": false, "connectivityProbes": 0,
        "gateway20Requests": 0}),
    )
}

async fn account(State(m): State<Manage>) -> Json<Value> {
    let regions: Vec<Value> = m
        .endpoints
        .iter()
        .map(|(name, url)| json!({"name": name, "gatewayEndpoint": url}))
        .collect();
    Json(json!({
        "id": "strata",
        "writeMode": if m.regions.multi_write() { "multi" } else { "single" },
        "consistency": "Session",
        "perPartitionFailover": m.regions.per_partition_failover(),
        "regions": regions,
    }))
}

/// A body that may be empty (the defaults), else JSON of type `T` with no unknown fields.
fn optional_json<T: Default + DeserializeOwned>(headers: &HeaderMap, body: &[u8]) -> ApiResult<T> {
    if body.is_empty() {
        return Ok(T::default());
    }
    json_body(headers, body)
}

fn json_body<T: DeserializeOwned>(headers: &HeaderMap, body: &[u8]) -> ApiResult<T> {
    if body.len() > MAX_BODY {
        return Err(ApiError(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request bodies are limited to {MAX_BODY} bytes"),
        ));
    }
    let media = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default();
    if media != "application/json"
        && !(media.starts_with("application/") && media.ends_with("+json"))
    {
        return Err(ApiError(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "nonempty request bodies require application/json".into(),
        ));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
}

/// How an operation moves on, from its request's `progressionMode` and `lockDurationMs`.
struct Progression {
    progression_mode: Option<String>,
    lock_duration_ms: Option<u64>,
}

impl Progression {
    /// `Some(hold)` for an automatic operation, `None` for a manual one.
    fn automatic(&self) -> ApiResult<Option<Duration>> {
        match (self.progression_mode.as_deref(), self.lock_duration_ms) {
            (Some("manual"), Some(_)) => Err(ApiError::bad_request(
                "lockDurationMs is accepted only when progressionMode is 'automatic'".into(),
            )),
            (Some("manual"), None) => Ok(None),
            (None | Some("automatic"), Some(ms)) if ms > MAX_LOCK_MS => Err(ApiError::bad_request(
                format!("lockDurationMs must be <= {MAX_LOCK_MS}"),
            )),
            (None | Some("automatic"), ms) => Ok(Some(Duration::from_millis(ms.unwrap_or(0)))),
            (Some(other), _) => Err(ApiError::bad_request(format!(
                "progressionMode '{other}' is not automatic or manual"
            ))),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SplitRequest {
    mode: Option<String>,
    epk: Option<String>,
    progression_mode: Option<String>,
    lock_duration_ms: Option<u64>,
}

fn container(m: &Manage, db: &str, coll: &str) -> ApiResult<Arc<Container>> {
    Ok(m.store.container(db, coll)?)
}

async fn split(
    State(m): State<Manage>,
    Path((db, coll, id)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let id: u32 = id
        .parse()
        .map_err(|_| ApiError::bad_request(format!("partition id '{id}' is not a number")))?;
    let req: SplitRequest = optional_json(&headers, &body)?;
    let progression = Progression {
        progression_mode: req.progression_mode,
        lock_duration_ms: req.lock_duration_ms,
    };
    let automatic = progression.automatic()?;
    let (mode, at) = operations::split_mode(
        req.mode.as_deref().unwrap_or("midpoint"),
        req.epk.as_deref(),
    )
    .map_err(ApiError::bad_request)?;
    let c = container(&m, &db, &coll)?;
    let c2 = Arc::clone(&c);
    let cut = tokio::task::spawn_blocking(move || c2.plan_cut(id, &at))
        .await
        .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))??;
    let op = Operation {
        container: c,
        change: Change::Split {
            parent: id,
            mode,
            cut,
        },
    };
    let view = m
        .operations
        .start(&m.store, "split", op, automatic)
        .map_err(|e| ApiError(StatusCode::TOO_MANY_REQUESTS, e))?;
    Ok((StatusCode::ACCEPTED, Json(view)))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MergeRequest {
    partition_ids: [u32; 2],
    progression_mode: Option<String>,
    lock_duration_ms: Option<u64>,
}

async fn merge(
    State(m): State<Manage>,
    Path((db, coll)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let req: MergeRequest = json_body(&headers, &body)?;
    let automatic = Progression {
        progression_mode: req.progression_mode,
        lock_duration_ms: req.lock_duration_ms,
    }
    .automatic()?;
    let c = container(&m, &db, &coll)?;
    let [a, b] = req.partition_ids;
    c.check_merge(a, b)?;
    let op = Operation {
        container: c,
        change: Change::Merge { ids: [a, b] },
    };
    let view = m
        .operations
        .start(&m.store, "merge", op, automatic)
        .map_err(|e| ApiError(StatusCode::TOO_MANY_REQUESTS, e))?;
    Ok((StatusCode::ACCEPTED, Json(view)))
}

async fn operation(State(m): State<Manage>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    m.operations
        .get(&id)
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("operation '{id}' does not exist")))
}

async fn advance(State(m): State<Manage>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    m.operations
        .advance(&m.store, &id)
        .map(Json)
        .map_err(|e| match e {
            AdvanceError::NotFound(msg) => ApiError::not_found(msg),
            AdvanceError::Conflict(msg) => ApiError(StatusCode::CONFLICT, msg),
        })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Enabled {
    enabled: bool,
}

async fn per_partition_failover(
    State(m): State<Manage>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let req: Enabled = json_body(&headers, &body)?;
    m.regions.set_per_partition_failover(req.enabled);
    Ok(Json(json!({"enabled": req.enabled})))
}

async fn pause(State(m): State<Manage>, Path(region): Path<String>) -> ApiResult<Json<Value>> {
    // What the region has seen: every container's log as of now.
    let seen = m
        .store
        .all_containers()
        .iter()
        .map(|c| (c.rid.clone(), c.current_lsn()))
        .collect();
    let name = m
        .regions
        .pause_replication(&region, seen)
        .map_err(|e| ApiError::not_found(e.message))?;
    Ok(Json(json!({"region": name, "replication": "paused"})))
}

async fn resume(State(m): State<Manage>, Path(region): Path<String>) -> ApiResult<Json<Value>> {
    let name = m
        .regions
        .resume_replication(&region)
        .map_err(|e| ApiError::not_found(e.message))?;
    Ok(Json(json!({"region": name, "replication": "resumed"})))
}
