//! Throughput (offers): how containers and databases declare RU/s, read and replaced through
//! `/offers` with the `_rid` linkage the SDKs use (`resource` = the container's `_self`).

use crate::api::request::Req;
use crate::api::response::Reply;
use crate::api::App;
use crate::error::{substatus, CosmosError};
use crate::store::catalog::{self, Buckets, Throughput, ThroughputRequest};
use axum::http::StatusCode;
use serde_json::{json, Value};
use strata_query::protocol::header;

/// Reads `x-ms-offer-throughput` (manual) or `x-ms-cosmos-offer-autopilot-settings`
/// (autoscale, `{"maxThroughput": N}`) from a create request.
pub fn throughput_from_headers(req: &Req) -> Result<Option<ThroughputRequest>, CosmosError> {
    if let Some(v) = req.header(header::OFFER_THROUGHPUT) {
        let n: u64 = v.trim().parse().map_err(|_| {
            CosmosError::bad_request(format!(
                "Invalid value '{v}' for x-ms-offer-throughput: it must be a whole number of RU/s."
            ))
        })?;
        validate_manual(n)?;
        return Ok(Some(ThroughputRequest {
            manual: Some(n),
            autoscale_max: None,
            autoscale_increment_percent: 0,
            buckets: None,
        }));
    }
    if let Some(v) = req.header(header::OFFER_AUTOPILOT_SETTINGS) {
        let parsed: Value = serde_json::from_str(v).map_err(|e| {
            CosmosError::bad_request(format!(
                "Invalid x-ms-cosmos-offer-autopilot-settings '{v}': {e}. Expected {{\"maxThroughput\": 4000}}."
            ))
        })?;
        return autoscale_settings(&parsed).map(Some);
    }
    Ok(None)
}

/// Autoscale settings (`{"maxThroughput": N, "autoUpgradePolicy": {"throughputPolicy":
/// {"incrementPercent": P}}}`), from a create header or an offer's content.
fn autoscale_settings(v: &Value) -> Result<ThroughputRequest, CosmosError> {
    let max = match v.get("maxThroughput") {
        Some(Value::Number(n)) => n.as_i64().ok_or_else(|| {
            CosmosError::bad_request(format!(
                "The autoscale maxThroughput {n} must be a whole number of RU/s."
            ))
        })?,
        _ => {
            return Err(CosmosError::bad_request(format!(
                "The autoscale settings {v} have no numeric 'maxThroughput'."
            )))
        }
    };
    if max < 1000 {
        return Err(CosmosError::bad_request(format!(
            "Requested throughput {max} is less than required minimum throughput 1000."
        )));
    }
    validate_autoscale(max as u64)?;
    let increment = v
        .pointer("/autoUpgradePolicy/throughputPolicy/incrementPercent")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let increment = u32::try_from(increment).map_err(|_| {
        CosmosError::bad_request(format!(
            "The autoscale incrementPercent {increment} is out of range."
        ))
    })?;
    Ok(ThroughputRequest {
        manual: None,
        autoscale_max: Some(max as u64),
        autoscale_increment_percent: increment,
        buckets: None,
    })
}

pub fn validate_manual(n: u64) -> Result<(), CosmosError> {
    if n < 400 {
        return Err(CosmosError::bad_request(format!(
            "The offer throughput {n} RU/s is below the minimum of 400 RU/s."
        )));
    }
    if !n.is_multiple_of(100) {
        return Err(CosmosError::bad_request(format!(
            "The offer throughput {n} RU/s must be a multiple of 100."
        )));
    }
    if n > MAX_THROUGHPUT {
        return Err(CosmosError::bad_request(format!(
            "The offer throughput {n} RU/s is above the maximum of 1,000,000 RU/s."
        )));
    }
    Ok(())
}

pub fn validate_autoscale(n: u64) -> Result<(), CosmosError> {
    if n < 1000 || !n.is_multiple_of(1000) {
        return Err(CosmosError::bad_request(format!(
            "The autoscale maximum throughput {n} RU/s must be at least 1000 and a multiple of 1000."
        )));
    }
    if n > MAX_THROUGHPUT {
        return Err(CosmosError::bad_request(format!(
            "The autoscale maximum throughput {n} RU/s is above the maximum of 1,000,000 RU/s."
        )));
    }
    Ok(())
}

/// Most RU/s of one container or database, manual or autoscale maximum. Service quota:
/// "Maximum RUs per container (dedicated throughput provisioned mode): 1,000,000" (and the
/// same per database with shared throughput); the service raises it only by support ticket.
pub const MAX_THROUGHPUT: u64 = 1_000_000;

/// The throughput buckets an offer replace sets (`content.throughputBuckets`; absent: as
/// they are, `[]`: none). Only a container's offer has them, and they change at most once
/// every ten minutes (429 / 3213, as the service; its throughput-buckets FAQ).
fn buckets(content: &Value, owner: &Owner) -> Result<Option<Buckets>, CosmosError> {
    let Some(v) = content.get("throughputBuckets").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let new = Buckets::parse(v).map_err(CosmosError::bad_request)?;
    let Owner::Container(c) = owner else {
        if new.is_empty() {
            return Ok(None);
        }
        return Err(CosmosError::bad_request(
            "Throughput buckets apply to a container's own throughput, not a database's shared throughput.",
        ));
    };
    let Some(t) = c.throughput() else {
        return Ok(Some(new));
    };
    // A change stamped in the future (the clock went back) counts as long ago.
    let now = catalog::now_secs();
    let since = now
        .checked_sub(t.buckets_changed)
        .unwrap_or(BUCKET_CHANGE_SECS);
    if new != t.buckets && t.buckets_changed > 0 && since < BUCKET_CHANGE_SECS {
        let mut e = CosmosError::throttled(
            (BUCKET_CHANGE_SECS - since) * 1000,
            format!(
                "The throughput buckets of '{}' changed {since} s ago; they can change once every {} minutes.",
                c.id,
                BUCKET_CHANGE_SECS / 60
            ),
        );
        e.sub_status = Some(substatus::THROUGHPUT_BUCKET_CHANGE_TOO_SOON);
        return Err(e);
    }
    Ok(Some(new))
}

/// How often a container's throughput buckets may change.
const BUCKET_CHANGE_SECS: u64 = 600;

/// An offer as the service renders it.
fn offer_json(t: &Throughput, resource: String, resource_rid: &str, pending: bool) -> Value {
    let rid = catalog::offer_rid(t.offer_seq);
    let mut content = json!({
        "offerThroughput": t.manual.unwrap_or_else(|| t.autoscale_max.unwrap_or(4000) / 10),
        "offerIsRUPerMinuteThroughputEnabled": false,
        "offerMinimumThroughputParameters": {"maxThroughputEverProvisioned": t.max_ru(), "maxConsumedStorageEverInKB": 0},
        "isOfferReplacePending": pending,
    });
    if !t.buckets.is_empty() {
        content["throughputBuckets"] = t.buckets.to_json();
    }
    if let Some(max) = t.autoscale_max {
        content["offerAutopilotSettings"] = json!({
            "maxThroughput": max,
            "autoUpgradePolicy": {"throughputPolicy": {"incrementPercent": t.autoscale_increment_percent}},
        });
    }
    json!({
        "resource": resource,
        "offerType": "Invalid",
        "offerResourceId": resource_rid,
        "offerVersion": "V2",
        "content": content,
        "id": rid,
        "_rid": rid,
        "_self": format!("offers/{rid}/"),
        "_etag": catalog::etag(0, t.etag_seq),
        "_ts": t.ts,
    })
}

/// Every offer, with a way back to what it provisions.
enum Owner {
    Database(String),
    Container(std::sync::Arc<crate::store::container::Container>),
}

fn all(app: &App) -> Vec<(Value, Owner)> {
    let mut out = Vec::new();
    for d in app.store.list_databases() {
        if let Some(t) = &d.throughput {
            let rid = catalog::db_rid(d.seq);
            out.push((
                offer_json(t, format!("dbs/{rid}/"), &rid, false),
                Owner::Database(d.id.clone()),
            ));
        }
    }
    for c in app.store.all_containers() {
        if let Some(t) = c.throughput() {
            let pending = c.throughput_split_pending();
            out.push((
                offer_json(
                    &t,
                    format!("dbs/{}/colls/{}/", c.db_rid, c.rid),
                    &c.rid,
                    pending,
                ),
                Owner::Container(c),
            ));
        }
    }
    out
}

fn find(app: &App, id: &str) -> Result<(Value, Owner), CosmosError> {
    all(app)
        .into_iter()
        .find(|(o, _)| o["id"] == id)
        .ok_or_else(|| CosmosError::not_found(format!("The offer '{id}' does not exist.")))
}

fn reply(offer: Value) -> Reply {
    let pending = offer["content"]["isOfferReplacePending"] == json!(true);
    let etag = offer["_etag"].as_str().unwrap_or("").to_string();
    Reply::json(StatusCode::OK, &offer)
        .header(header::ETAG, etag)
        .header(
            header::OFFER_REPLACE_PENDING,
            if pending { "true" } else { "false" },
        )
}

pub fn list(app: &App) -> Result<Reply, CosmosError> {
    let offers: Vec<Value> = all(app).into_iter().map(|(o, _)| o).collect();
    Ok(Reply::json(
        StatusCode::OK,
        &json!({"_rid": "", "Offers": offers, "_count": offers.len()}),
    )
    .header(header::ITEM_COUNT, offers.len().to_string()))
}

pub fn query(app: &App, req: &Req) -> Result<Reply, CosmosError> {
    let offers: Vec<Value> = all(app).into_iter().map(|(o, _)| o).collect();
    crate::api::cosmos::query::query_resources(req, "", "Offers", offers)
}

pub fn read_offer(app: &App, id: &str) -> Result<Reply, CosmosError> {
    Ok(reply(find(app, id)?.0))
}

/// `PUT /offers/{id}`: a new `content.offerThroughput` or autoscale maximum.
/// Offer replaces, one at a time: each checks what the last one left (the If-Match etag, the
/// ten-minute rule of throughput buckets) before it writes, and two at once both passed the
/// checks against the same state. Rare, administrative requests; one lock for the process.
static REPLACING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub async fn replace(app: &App, req: &Req, id: &str) -> Result<Reply, CosmosError> {
    let _one = REPLACING.lock().await;
    let (current, owner) = find(app, id)?;
    let body = req.json_object()?;
    if let Some(bid) = body.get("id").and_then(Value::as_str) {
        if bid != id {
            return Err(CosmosError::bad_request(format!(
                "The offer id '{bid}' in the body does not match '{id}' in the path."
            )));
        }
    }
    if let Some(m) = req.if_match() {
        if !crate::items::etag_matches(m, current["_etag"].as_str().unwrap_or("")) {
            return Err(CosmosError::precondition_failed(
                "The offer changed since the given etag (If-Match).",
            ));
        }
    }
    let content = body.get("content").ok_or_else(|| {
        CosmosError::bad_request("The offer has no 'content'; set content.offerThroughput.")
    })?;
    let t = match content.get("offerAutopilotSettings") {
        Some(a) if a.get("maxThroughput").is_some() => autoscale_settings(a)?,
        _ => {
            let n = content
                .get("offerThroughput")
                .and_then(Value::as_u64)
                .ok_or_else(|| {
                    CosmosError::bad_request(
                        "content.offerThroughput must be a whole number of RU/s.",
                    )
                })?;
            validate_manual(n)?;
            ThroughputRequest {
                manual: Some(n),
                autoscale_max: None,
                autoscale_increment_percent: 0,
                buckets: None,
            }
        }
    };
    let t = ThroughputRequest {
        buckets: buckets(content, &owner)?,
        ..t
    };
    match owner {
        Owner::Container(c) => app.store.set_container_throughput(&c, t).await?,
        Owner::Database(db) => {
            let d = app.store.database(&db)?;
            let (etag_seq, _) = app.store.next_etag_seq();
            let offer_seq = d.throughput.as_ref().map(|x| x.offer_seq).unwrap_or(0);
            app.store
                .set_database_throughput(
                    &db,
                    Some(Throughput {
                        manual: t.manual,
                        autoscale_max: t.autoscale_max,
                        autoscale_increment_percent: t.autoscale_increment_percent,
                        buckets: Default::default(),
                        buckets_changed: 0,
                        offer_seq,
                        ts: catalog::now_secs(),
                        etag_seq,
                    }),
                )
                .await?;
        }
    }
    Ok(reply(find(app, id)?.0))
}
