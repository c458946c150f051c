//! `POST .../sprocs/{id}`: runs a stored procedure inside one logical partition as one
//! transaction; its data operations are served by the item layer's [`Host`].

use crate::api::commit::Commit;
use crate::api::request::Req;
use crate::api::response::Reply;
use crate::api::App;
use crate::error::CosmosError;
use crate::items::document::point_key;
use crate::items::host::{failure, Host};
use crate::script::{self, Finished, Job};
use crate::store::container::Container;
use crate::store::scripts::ScriptKind;
use crate::throughput::charge;
use axum::http::StatusCode;
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;
use strata_query::protocol::header;

/// The largest response body a stored procedure may set (the service's limit, and what its
/// `getMaxResponseBodySize()` says).
pub const MAX_RESPONSE_BYTES: usize = 2 * 1024 * 1024;

/// Percent-encodes a script log as the service sends it in a header.
fn encode_log(log: &str) -> String {
    percent_encoding::utf8_percent_encode(log, LOG_SET).to_string()
}

const LOG_SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');

/// `POST .../sprocs/{id}` with the partition key header and a JSON array of arguments.
pub async fn execute(
    app: &App,
    req: &Req,
    c: &Arc<Container>,
    id: &str,
) -> Result<Reply, CosmosError> {
    let rec = c.scripts().get(c, ScriptKind::Sproc, id).ok_or_else(|| {
        CosmosError::not_found(format!(
            "Resource Not Found: the stored procedure '{id}' does not exist in container '{}'.",
            c.id
        ))
    })?;
    let (pk, epk) = point_key(c, req.partition_key()?, None)?;
    let args = match if req.body.is_empty() {
        Value::Array(Vec::new())
    } else {
        req.json()?
    } {
        Value::Array(a) => a,
        other => vec![other],
    };
    let timeout = c.limits().script_timeout;
    let job = Job {
        body: rec.body.clone(),
        setup: Host::setup(c, Some(&Value::Array(args.clone())), None, "Execute"),
        args,
        timeout,
    };
    let started = Instant::now();
    let mut commit = Commit::admit(app, (c, req), &epk, charge::write(0))?;
    let mut host = Host::new(c, pk, epk);
    let (body, log, ru) = commit
        .transact_blocking(move |t| {
            let out = script::run(job, &mut |op, args| host.serve(t, op, args));
            let Finished { response, log, .. } =
                out.map_err(|e| failure("stored procedure", timeout, e))?;
            // Checked before the commit: a response too large fails the script, writes and all.
            let body = match &response {
                Some(v) => serde_json::to_vec(v).unwrap_or_default(),
                None => Vec::new(),
            };
            if body.len() > MAX_RESPONSE_BYTES {
                return Err(CosmosError::too_large(format!(
                    "Encountered exception while executing function. Exception = the response body is {} bytes; a stored procedure may answer at most {MAX_RESPONSE_BYTES} bytes (getMaxResponseBodySize()). Its writes were rolled back.",
                    body.len()
                )));
            }
            Ok((bytes::Bytes::from(body), log, host.charge))
        })
        .await?;
    commit.durable().await?;
    // Work done, plus the script's own running time (about 1 RU per 10 ms).
    let ru = (ru + 1.0 + started.elapsed().as_secs_f64() * 100.0).round();
    let mut r = Reply::new(StatusCode::OK, body)
        .charge(ru)
        .session(&[commit.range()], c.current_lsn())
        .container(c);
    if req.flag(header::SCRIPT_ENABLE_LOGGING) {
        r = r.header(header::SCRIPT_LOG_RESULTS, encode_log(&log));
    }
    commit.settle(ru);
    Ok(r)
}
