//! The inference endpoint the SDKs' semantic reranker calls (`ContainerProxy.semantic_rerank`
//! in Python): `POST /inference/semanticReranking` with `Authorization: Bearer <Entra ID
//! token>` for `https://dbinference.azure.com`, a body `{"query", "documents": [string],
//! ...options}`, and an answer `{"Scores": [{"index", "score", "document"}]}`. The service
//! runs it on a separate host the SDKs are pointed at
//! (`AZURE_COSMOS_SEMANTIC_RERANKER_INFERENCE_ENDPOINT`); strata serves it on its own port,
//! so that variable names strata's address (over HTTPS: the SDKs send bearer tokens nowhere
//! else). Only Entra ID tokens are accepted, as by the service: an emulator token (signed
//! with the account key) or, with `--entra-jwks`, the tenant's.
//!
//! The scores are strata's own and say so: no language model runs here. [`rerank`] scores
//! each document by BM25 against the query — see its doc for what that can and cannot
//! rank — so an application's reranking code path runs locally and deterministically, never
//! with the service's relevance.

pub mod rerank;

use crate::api::app::App;
use crate::api::response::Reply;
use crate::api::security::aad;
use crate::error::CosmosError;
use axum::body::Body;
use axum::http::{HeaderMap, Method, StatusCode};
use strata_query::protocol::header;

/// The path the SDKs post a rerank to.
pub const RERANK_PATH: &str = "/inference/semanticReranking";

/// Whether a request is for the inference endpoint.
pub fn is_inference(method: &Method, path: &str) -> bool {
    method == Method::POST && path.trim_end_matches('/') == RERANK_PATH
}

/// Serves a rerank: the token checked, the body read within the API's size and time limits,
/// the documents scored.
pub async fn serve(app: &App, headers: &HeaderMap, body: Body) -> Result<Reply, CosmosError> {
    authenticate(app, headers)?;
    let body = crate::api::read_body(app, headers, body).await?;
    let request = rerank::Request::parse(&body).map_err(CosmosError::bad_request)?;
    let answer = rerank::rerank(&request);
    Ok(Reply::json(StatusCode::OK, &answer).charge(0.0))
}

/// The bearer token's principal must verify for the inference service's audience.
fn authenticate(app: &App, headers: &HeaderMap) -> Result<(), CosmosError> {
    let raw = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .trim();
    let Some(jwt) = raw
        .strip_prefix("Bearer ")
        .or_else(|| raw.strip_prefix("bearer "))
    else {
        return Err(CosmosError::unauthorized(
            "The inference endpoint takes Entra ID tokens only: 'Authorization: Bearer <token for https://dbinference.azure.com>' (account keys and resource tokens are not accepted, as by the service).",
        ));
    };
    let keys = &app.keys;
    let account = aad::AccountKeys {
        read_write: &keys.read_write,
        read_only: keys.read_only.as_ref(),
        jwks: keys.entra.as_deref(),
        skew: aad::TOKEN_CLOCK_SKEW,
    };
    let now = crate::store::catalog::now_secs() as i64;
    aad::verify_for(&account, jwt, now, aad::Audience::Inference).map(|_| ())
}
