//! The Cosmos DB REST API.
//!
//! One function, [`answer`], receives every request: it authenticates it, decodes it into an
//! [`Endpoint`], and calls the one handler for that endpoint. Handlers return a [`Reply`] or an
//! [`CosmosError`]; both become responses with the headers the SDKs expect.

pub mod admin;
pub mod app;
mod buffers;
pub mod commit;
pub mod cosmos;
pub mod endpoint;
pub mod explorer;
pub mod inference;
pub mod request;
pub mod response;
pub mod scope;
pub mod security;
pub mod wire;

use crate::error::CosmosError;
use admin::{advise, inspect, jobs, rbac_admin, regions, storage};
pub use app::{ApiOptions, App, AppInner};
use axum::body::Body;
use axum::http::Request;
use axum::response::Response;
use cosmos::{
    account, batch, changefeed, conflicts, containers, databases, feed, items, offers, pkranges,
    query, scripts, sprocs, users,
};
use endpoint::Endpoint;
use futures::FutureExt as _;
use request::Req;
use response::Reply;
use security::{access, auth};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Which region's port a request reached (an index into [`crate::regions::Regions`]), as the
/// listener that accepted it knows.
#[derive(Debug, Clone, Copy, Default)]
pub struct RegionId(pub usize);

/// Largest request body read (a 2 MB item or batch plus headroom; larger gets 413).
pub const MAX_BODY: usize = 4 * 1024 * 1024;

pub(crate) fn new_activity_id() -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut seed = [0u8; 16];
    seed[..8].copy_from_slice(&n.to_le_bytes());
    seed[8..].copy_from_slice(&t.to_le_bytes());
    let a = xxhash_rust::xxh3::xxh3_64(&seed);
    let b = xxhash_rust::xxh3::xxh3_64(&a.to_le_bytes());
    // A version-4 UUID's layout, `xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx`, written digit by
    // digit (`format!` showed as 1.2% of a point read's server CPU).
    let digits = [
        (a >> 32, 8),
        ((a >> 16) & 0xffff, 4),
        (0x4000 | (a & 0xfff), 4),
        ((b >> 48) | 0x8000, 4),
        (b & 0xffff_ffff_ffff, 12),
    ];
    let mut id = String::with_capacity(36);
    for (i, (value, width)) in digits.into_iter().enumerate() {
        if i > 0 {
            id.push('-');
        }
        for shift in (0..width).rev() {
            let d = ((value >> (4 * shift)) & 0xf) as u32;
            id.push(char::from_digit(d, 16).unwrap_or('0'));
        }
    }
    id
}

/// The host (and port) the client addressed: its `Host` header, or the URI's authority
/// (HTTP/2).
pub(crate) fn host_of<'a>(
    headers: &'a axum::http::HeaderMap,
    uri: &'a axum::http::Uri,
) -> Option<&'a str> {
    headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| uri.authority().map(|a| a.as_str()))
}

/// `Content-Location`: the URL the request was served at, as the service and the official
/// emulator send it (the SDKs' tests compare its host with the region they meant to reach).
fn content_location(app: &App, req: &Request<Body>) -> Option<axum::http::HeaderValue> {
    let path = req.uri().path();
    if path.starts_with("/_explorer") {
        return None;
    }
    let host = host_of(req.headers(), req.uri())?;
    let scheme = if app.options.tls {
        "https://"
    } else {
        "http://"
    };
    // Written once into the buffer the header value keeps (no second copy).
    let mut v = bytes::BytesMut::with_capacity(scheme.len() + host.len() + path.len());
    v.extend_from_slice(scheme.as_bytes());
    v.extend_from_slice(host.as_bytes());
    v.extend_from_slice(path.as_bytes());
    axum::http::HeaderValue::from_maybe_shared(v.freeze()).ok()
}

/// `x-ms-request-duration-ms`: milliseconds to the microsecond, as `{:.3}` of the float
/// would write them, without the float formatting machinery (every answer carries it).
fn duration_value(elapsed: std::time::Duration) -> axum::http::HeaderValue {
    use std::fmt::Write as _;
    let micros = (elapsed.as_nanos() + 500) / 1000;
    let (ms, frac) = (micros / 1000, micros % 1000);
    let mut text = bytes::BytesMut::with_capacity(24);
    let _ = write!(text, "{ms}");
    text.extend_from_slice(b".");
    for d in [frac / 100, frac / 10 % 10, frac % 10] {
        text.extend_from_slice(&[b'0' + d as u8]);
    }
    axum::http::HeaderValue::from_maybe_shared(text.freeze())
        .unwrap_or_else(|_| axum::http::HeaderValue::from_static("0.000"))
}

/// Answers one request that reached region `region`'s listener (errors included: every
/// failure becomes a Cosmos-shaped response). The listeners call it directly, not through a
/// router: with one handler for every path, a router's matching, its boxed handler future
/// and its extensions were 8% of a point read's server CPU.
pub async fn answer(app: &App, region: RegionId, req: Request<Body>) -> Response {
    let started = Instant::now();
    let activity_id = req
        .headers()
        .get(&response::names::ACTIVITY_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 64)
        .map(str::to_string)
        .unwrap_or_else(new_activity_id);
    let method = req.method().clone();
    // Cheap to clone (shared bytes); only read when logging.
    let uri = req.uri().clone();
    let content_location = content_location(app, &req);
    let path = uri.path();
    // A bug in one handler answers 500 and the server keeps serving.
    let outcome = std::panic::AssertUnwindSafe(dispatch(app, region, req, &activity_id))
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(CosmosError::internal(format!(
                "strata failed while serving this request ({what}); the server keeps running. Please report it with the request that caused it."
            )))
        });
    let resp = match outcome {
        Ok(r) => r.into_response_with(&activity_id),
        Err(e) => {
            if e.status.is_server_error() {
                tracing::error!(%method, %path, status = e.status.as_u16(), message = %e.message, "request failed");
            } else {
                tracing::debug!(%method, %path, status = e.status.as_u16(), message = %e.message, "request rejected");
            }
            response::error_response(e, &activity_id)
        }
    };
    let mut resp = resp;
    let elapsed = started.elapsed();
    // The server-side duration the SDKs report in their diagnostics, on every answer.
    resp.headers_mut().insert(
        response::names::REQUEST_DURATION_MS,
        duration_value(elapsed),
    );
    if let Some(v) = content_location {
        resp.headers_mut()
            .insert(axum::http::header::CONTENT_LOCATION, v);
    }
    tracing::debug!(%method, %path, status = resp.status().as_u16(), micros = elapsed.as_micros() as u64, "request");
    resp
}

async fn dispatch(
    app: &App,
    region: RegionId,
    req: Request<Body>,
    activity_id: &str,
) -> Result<Reply, CosmosError> {
    let (parts, body) = req.into_parts();
    // The explorer's files, the certificate and readiness need no key. Only the explorer's
    // session request has a body, read here under a small limit.
    let (method, uri, headers) = (&parts.method, &parts.uri, &parts.headers);
    if method == axum::http::Method::POST && uri.path() == "/_explorer/session" {
        let body = axum::body::to_bytes(body, 16 * 1024)
            .await
            .map_err(|_| CosmosError::too_large("The session request is too large."))?;
        return app
            .explorer
            .serve(method, uri, headers, &body)
            .unwrap_or_else(|| Err(CosmosError::not_found("The Data Explorer is off.")));
    }
    if let Some(r) = app.explorer.serve(method, uri, headers, &[]) {
        return r;
    }
    // The semantic reranker's inference endpoint: bearer tokens, its own body.
    if inference::is_inference(method, uri.path()) {
        return inference::serve(app, headers, body).await;
    }
    dispatch_api(app, region, parts, body, activity_id).await
}

async fn dispatch_api(
    app: &App,
    reached: RegionId,
    parts: axum::http::request::Parts,
    body: Body,
    activity_id: &str,
) -> Result<Reply, CosmosError> {
    let segs = endpoint::path_segments(parts.uri.path())?;
    let host = host_of(&parts.headers, &parts.uri).unwrap_or("localhost:8081");
    // The region the host name names (`--region-hosts`), else the one whose port it reached.
    let region = app.regions.region_of_host(host).unwrap_or(reached.0);
    let principal = match app.explorer.principal(&parts.headers, &parts.uri) {
        Some(p) => p?,
        None => auth::verify(
            (&app.keys, &app.verified),
            &app.token_key,
            &parts.method,
            &endpoint::auth_scope(&segs),
            &parts.headers,
        )?,
    };
    let ep = Endpoint::decode(&parts.method, &segs, &parts.headers)?;
    // A region's fault and write role apply to the Cosmos API, never to strata's own
    // endpoints (so a fault can always be cleared).
    if segs.first().map(|s| s.as_ref()) != Some("_strata") {
        let write = ep.is_write(&parts.method);
        app.regions.gate(region, write).await?;
    }
    let body = read_body(app, &parts.headers, body).await?;
    let body = wire::request_body(body)?;
    let mut req = Req {
        uri: parts.uri,
        method: parts.method,
        headers: parts.headers,
        body,
        activity_id: activity_id.to_string(),
        tls: app.options.tls,
        epk_limit: None,
        region,
        reads_only: match &principal {
            auth::Principal::ReadOnly => true,
            auth::Principal::Aad(id) => id.read_only,
            _ => false,
        },
    };
    req.epk_limit = access::authorize(app, &principal, &ep, &req)?;
    let binary = wire::wants_binary(&req.headers) && wire::answers_in_binary(&ep);
    let reply = route(app, &req, ep).await?;
    Ok(if binary {
        wire::encode_reply(reply)
    } else {
        reply
    })
}

/// A request's body, at most [`MAX_BODY`] bytes (413 beyond: a declared length past it
/// before a byte is read) and within `--body-timeout` (408 after it).
pub(crate) async fn read_body(
    app: &App,
    headers: &axum::http::HeaderMap,
    body: Body,
) -> Result<bytes::Bytes, CosmosError> {
    let too_large = || {
        CosmosError::too_large(format!(
            "The request body is larger than {MAX_BODY} bytes; items and batches are limited to 2 MB."
        ))
    };
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return Err(too_large());
    }
    // A request without a body (every read) has nothing to wait for: arming the timeout's
    // timer for it was 1.9% of a point read's server CPU.
    if axum::body::HttpBody::is_end_stream(&body) {
        return Ok(bytes::Bytes::new());
    }
    let read = axum::body::to_bytes(body, MAX_BODY);
    match app.options.body_timeout {
        Some(t) => tokio::time::timeout(t, read).await.map_err(|_| {
            CosmosError::request_timeout(format!(
                "The request body did not arrive within {} s.",
                t.as_secs()
            ))
        })?,
        None => read.await,
    }
    .map_err(|_| too_large())
}

async fn route(app: &App, req: &Req, ep: Endpoint) -> Result<Reply, CosmosError> {
    use Endpoint as E;
    // Item-level endpoints get their container resolved here, once, with the request's
    // intended-collection check; handlers never look one up themselves.
    let in_coll = |db: &str, coll: &str| items::container(app, req, db, coll);
    match ep {
        E::ReadAccount => account::read(app, req),
        E::ListDatabases => databases::list(app),
        E::CreateDatabase => databases::create(app, req).await,
        E::ReadDatabase { db } => databases::read(app, &db),
        E::DeleteDatabase { db } => databases::delete(app, &db).await,
        E::ListContainers { db } => containers::list(app, &db),
        E::CreateContainer { db } => containers::create(app, req, &db).await,
        E::ReadContainer { db, coll } => containers::read(app, req, &db, &coll),
        E::ReplaceContainer { db, coll } => containers::replace(app, req, &db, &coll).await,
        E::DeleteContainer { db, coll } => containers::delete(app, &db, &coll).await,
        E::ReadItemFeed { db, coll } => feed::read_feed(app, req, &in_coll(&db, &coll)?),
        E::CreateItem { db, coll } => items::create(app, req, &in_coll(&db, &coll)?).await,
        E::ReadItem { db, coll, id } => items::read(app, req, &in_coll(&db, &coll)?, &db, &id),
        E::ReplaceItem { db, coll, id } => {
            items::replace(app, req, &in_coll(&db, &coll)?, &db, &id).await
        }
        E::DeleteItem { db, coll, id } => {
            items::delete(app, req, &in_coll(&db, &coll)?, &db, &id).await
        }
        E::ReadPkRanges { db, coll } => pkranges::read_ranges(req, &in_coll(&db, &coll)?),
        E::QueryItems { db, coll } => query::query_items(app, req, &in_coll(&db, &coll)?).await,
        E::RoutePlan { db, coll } => query::query_plan(req, &in_coll(&db, &coll)?).await,
        E::QueryDatabases => query::query_resources(req, "", "Databases", databases::all(app)),
        E::QueryContainers { db } => {
            let d = app.store.database(&db)?;
            let docs = containers::all(app, &db)?;
            query::query_resources(
                req,
                &crate::store::catalog::db_rid(d.seq),
                "DocumentCollections",
                docs,
            )
        }
        E::ChangeFeed { db, coll } => changefeed::read(app, req, &in_coll(&db, &coll)?),
        E::Batch { db, coll } => batch::batch(app, req, &in_coll(&db, &coll)?).await,
        E::PatchItem { db, coll, id } => {
            items::patch(app, req, &in_coll(&db, &coll)?, &db, &id).await
        }
        E::DeleteAllItemsByPartitionKey { db, coll } => {
            items::delete_partition(app, req, &in_coll(&db, &coll)?).await
        }
        E::ListOffers => offers::list(app),
        E::QueryOffers => offers::query(app, req),
        E::ReadOffer { id } => offers::read_offer(app, &id),
        E::ReplaceOffer { id } => offers::replace(app, req, &id).await,
        E::InspectPartitions { db, coll } => inspect::partitions(app, &db, &coll),
        E::ReadQuerySample { db, coll } => advise::export(app, &db, &coll),
        E::ClearQuerySample { db, coll } => advise::clear(app, &db, &coll),
        E::Advise { db, coll } => advise::advise(app, req, &db, &coll).await,
        E::ReadRegions => regions::read(app),
        E::ReadStorage => storage::read(app),
        E::SetRegionFault { region } => regions::set_fault(app, req, &region),
        E::FailOver { region } => regions::fail_over(app, &region),
        E::ReadRbac => rbac_admin::read(app),
        E::ReplaceRbac => rbac_admin::replace(app, req),
        E::ListJobs => jobs::list(app),
        E::CreateJob => jobs::create(app, req),
        E::ReadJob { id } => jobs::read(app, &id),
        E::DeleteJob { id } => jobs::delete(app, &id),
        E::ListConflicts { db, coll } => conflicts::list(app, &db, &coll),
        E::QueryConflicts { db, coll } => conflicts::query(app, req, &db, &coll),
        E::Conflict { db, coll, id } => conflicts::one(app, &db, &coll, &id),
        E::ListScripts { db, coll, kind } => scripts::list(&in_coll(&db, &coll)?, kind),
        E::QueryScripts { db, coll, kind } => scripts::query(req, &in_coll(&db, &coll)?, kind),
        E::CreateScript { db, coll, kind } => {
            scripts::create(app, req, &in_coll(&db, &coll)?, kind).await
        }
        E::ReadScript { db, coll, kind, id } => {
            scripts::read(req, &in_coll(&db, &coll)?, kind, &id)
        }
        E::ReplaceScript { db, coll, kind, id } => {
            scripts::replace(app, req, &in_coll(&db, &coll)?, kind, &id).await
        }
        E::DeleteScript { db, coll, kind, id } => {
            scripts::delete(app, &in_coll(&db, &coll)?, kind, &id).await
        }
        E::ExecuteStoredProcedure { db, coll, id } => {
            sprocs::execute(app, req, &in_coll(&db, &coll)?, &id).await
        }
        E::ListUsers { db } => users::list_users(app, &db),
        E::QueryUsers { db } => users::query_users(app, req, &db),
        E::CreateUser { db } => users::create_user(app, req, &db).await,
        E::ReadUser { db, user } => users::read_user(app, &db, &user),
        E::ReplaceUser { db, user } => users::replace_user(app, req, &db, &user).await,
        E::DeleteUser { db, user } => users::delete_user(app, &db, &user).await,
        E::ListPermissions { db, user } => users::list_permissions(app, req, &db, &user),
        E::QueryPermissions { db, user } => users::query_permissions(app, req, &db, &user),
        E::CreatePermission { db, user } => users::create_permission(app, req, &db, &user).await,
        E::ReadPermission { db, user, id } => users::read_permission(app, req, &db, &user, &id),
        E::ReplacePermission { db, user, id } => {
            users::replace_permission(app, req, &db, &user, &id).await
        }
        E::DeletePermission { db, user, id } => {
            users::delete_permission(app, &db, &user, &id).await
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations_are_written_as_milliseconds_to_the_microsecond() {
        use std::time::Duration;
        for (d, want) in [
            (Duration::from_nanos(0), "0.000"),
            (Duration::from_nanos(1_499), "0.001"),
            (Duration::from_micros(12_345), "12.345"),
            (Duration::from_nanos(7_000_600), "7.001"),
            (Duration::from_secs(3), "3000.000"),
        ] {
            assert_eq!(super::duration_value(d), want, "{d:?}");
            let float = format!("{:.3}", d.as_secs_f64() * 1000.0);
            assert_eq!(float, want, "{d:?}: the float formatting it replaces");
        }
        // A half microsecond rounds up (the float's binary fraction may round it down).
        assert_eq!(
            super::duration_value(Duration::from_nanos(7_000_500)),
            "7.001"
        );
    }

    #[test]
    fn activity_ids_are_version_4_uuids_and_differ() {
        let (a, b) = (super::new_activity_id(), super::new_activity_id());
        assert_ne!(a, b);
        for id in [a, b] {
            let groups: Vec<&str> = id.split('-').collect();
            let widths: Vec<usize> = groups.iter().map(|g| g.len()).collect();
            assert_eq!(widths, [8, 4, 4, 4, 12], "{id}");
            assert!(
                id.chars().all(|c| c == '-' || c.is_ascii_hexdigit()),
                "{id}"
            );
            assert!(groups[2].starts_with('4'), "{id}");
            assert!("89abcdef".contains(&groups[3][..1]), "{id}");
        }
    }
}
