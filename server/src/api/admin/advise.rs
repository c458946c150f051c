//! strata's advisor endpoints (the explorer's Advise view and `strata advise` read them):
//!
//! * `GET /_strata/containers/{db}/{c}/queries`: the container's query sample
//!   ([`crate::advise::sample`]); `DELETE` forgets it.
//! * `POST /_strata/containers/{db}/{c}/advise` with `{"keys": ["/a,/b,/c", …], "throughput",
//!   "growth", "windowSecs", "sample"}`: the advice for those candidate keys, computed here
//!   from the stored items (no round trip per page), as JSON with the text report beside it.
//!   At most [`MAX_CANDIDATES`] keys a request (each is a simulated partition map, a routing
//!   of every sampled query and a section of the reply); a principal that may only read is
//!   held to a sample of [`READ_ONLY_SAMPLE`] items, the work of a query, not of a full read
//!   per candidate.

use crate::advise::advice::{definition, parse_key, share, Advisor, Source};
use crate::advise::model::Settings;
use crate::api::request::Req;
use crate::api::response::Reply;
use crate::api::App;
use crate::error::CosmosError;
use crate::store::container::Container;
use axum::http::StatusCode;
use serde::Deserialize;
use std::sync::Arc;

pub fn export(app: &App, db: &str, coll: &str) -> Result<Reply, CosmosError> {
    let c = app.store.container(db, coll)?;
    let sample = serde_json::to_value(app.queries.export(db, coll, &c.rid))
        .map_err(|e| CosmosError::internal(format!("the query sample did not serialize: {e}")))?;
    Ok(Reply::json(StatusCode::OK, &sample))
}

pub fn clear(app: &App, db: &str, coll: &str) -> Result<Reply, CosmosError> {
    app.store.container(db, coll)?;
    app.queries.clear(db, coll);
    Ok(Reply::new(StatusCode::NO_CONTENT, Vec::new()))
}

/// The most candidate keys one advise request weighs (the current key comes on top).
pub const MAX_CANDIDATES: usize = 8;

/// The most items an advise request of a read-only principal reads (a sample, scaled up).
pub const READ_ONLY_SAMPLE: u64 = 10_000;

/// What the advisor holds per item read and key weighed, at most (a logical partition's key
/// value, size and count, when every item has a key of its own).
const BYTES_PER_ITEM_AND_KEY: u64 = 192;

/// The most bytes one advice holds: past it the items are sampled (and scaled up) so that
/// it fits, as `sample` asks.
const ADVICE_BYTES: u64 = 4 * crate::exec::memory::QUERY_MEMORY_BYTES as u64;

/// The body of an advise request.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Ask {
    keys: Vec<String>,
    throughput: Option<u64>,
    #[serde(default = "default_growth")]
    growth: f64,
    #[serde(default = "default_window")]
    window_secs: u64,
    /// Read at most this many items (a sample, scaled up).
    sample: Option<u64>,
}

fn default_growth() -> f64 {
    2.0
}

fn default_window() -> u64 {
    3600
}

pub async fn advise(app: &App, req: &Req, db: &str, coll: &str) -> Result<Reply, CosmosError> {
    let c = app.store.container(db, coll)?;
    let ask: Ask = serde_json::from_value(req.json()?).map_err(|e| {
        CosmosError::bad_request(format!(
            "The advise request must be {{\"keys\": [\"/a,/b,/c\", …], \"throughput\"?, \"growth\"?, \"windowSecs\"?, \"sample\"?}}: {e}"
        ))
    })?;
    if !(ask.growth >= 1.0 && ask.growth.is_finite()) {
        return Err(CosmosError::bad_request(
            "The growth factor must be a number of at least 1.",
        ));
    }
    let mut keys: Vec<Vec<String>> = Vec::new();
    for k in &ask.keys {
        let paths = parse_key(k).map_err(CosmosError::bad_request)?;
        if !keys.contains(&paths) {
            keys.push(paths);
        }
    }
    if keys.len() > MAX_CANDIDATES {
        return Err(CosmosError::bad_request(format!(
            "The advise request names {} candidate keys; at most {MAX_CANDIDATES} are weighed at once. Ask again with the most promising ones.",
            keys.len()
        )));
    }
    let candidates = keys
        .iter()
        .map(|paths| definition(paths).map_err(CosmosError::bad_request))
        .collect::<Result<Vec<_>, _>>()?;
    let total: u64 = c.partitions().ranges.iter().map(|r| r.count).sum();
    let mut limit = ask.sample.unwrap_or(u64::MAX).max(1);
    if req.reads_only {
        limit = limit.min(READ_ONLY_SAMPLE);
    }
    // Every key weighed (the current one too) keeps a tally per logical partition it finds.
    let per_item = BYTES_PER_ITEM_AND_KEY * (candidates.len() as u64 + 1);
    limit = limit.min(ADVICE_BYTES / per_item).max(1);
    let _held = crate::exec::memory::reserve(
        usize::try_from(limit.min(total.max(1)).saturating_mul(per_item)).unwrap_or(usize::MAX),
        ADVICE_BYTES as usize,
        "advice",
    )
    .await?;
    let settings = Settings {
        throughput: ask
            .throughput
            .or_else(|| c.throughput().map(|t| t.max_ru()))
            .unwrap_or(400),
        growth: ask.growth,
        split_bytes: c.limits().partition_split_bytes,
        logical_limit: c.limits().logical_partition_limit_bytes,
        max_partitions: c.limits().max_partitions,
        window_secs: ask.window_secs.max(1),
        now: crate::store::catalog::now_secs(),
        scale: (total as f64 / limit.min(total).max(1) as f64).max(1.0),
    };
    let shapes = app.queries.export(db, coll, &c.rid).queries;
    let current = c.pk.clone();
    let c2 = Arc::clone(&c);
    let advisor = tokio::task::spawn_blocking(move || {
        let mut a = Advisor::new(current, candidates, settings);
        read_items(&c2, limit, &mut a).map(|_| a)
    })
    .await
    .map_err(|e| CosmosError::internal(format!("the advisor failed: {e}")))??;
    let advice = advisor.finish(
        &shapes,
        Source {
            database: db.to_string(),
            container: coll.to_string(),
            from: String::new(),
            items_total: Some(total),
        },
    );
    let mut body = serde_json::to_value(&advice)
        .map_err(|e| CosmosError::internal(format!("the advice did not serialize: {e}")))?;
    body["report"] = serde_json::Value::String(crate::advise::report::render(&advice));
    Ok(Reply::json(StatusCode::OK, &body))
}

/// Feeds up to `limit` stored items to the advisor, spread over the container: when
/// sampling, every physical partition gives its share from its start (whole logical
/// partitions of the current key, in EPK order).
fn read_items(c: &Container, limit: u64, a: &mut Advisor) -> Result<(), CosmosError> {
    let ranges = c.partitions().ranges;
    for (k, r) in ranges.iter().enumerate() {
        let per_range = share(limit, ranges.len(), k);
        let mut after = None;
        let mut taken = 0u64;
        while taken < per_range {
            let want = (per_range - taken).min(1000) as usize;
            let rows = c.scan_docs(&r.range, None, after.as_ref(), want)?;
            let Some(last) = rows.last().map(|(p, _)| p.clone()) else {
                break;
            };
            for (_, item) in &rows {
                if let Ok(doc) = serde_json::from_slice::<serde_json::Value>(&item.json) {
                    a.add(&doc);
                }
            }
            taken += rows.len() as u64;
            after = Some(last);
        }
    }
    Ok(())
}
