//! Transactional batch: up to 100 operations on one logical partition, all or nothing; and
//! bulk (see `bulk`): operations of many logical partitions of one partition key range, each
//! on its own.
//!
//! The operations run in one container transaction, so they commit as one atomic engine
//! write (one journal record): readers never see half a batch, even across a crash. If any
//! operation fails, nothing is applied and the response is 207 Multi-Status with the failing
//! operation's real status and 424 (Failed Dependency) for every other one.

use crate::api::commit::{Admission, Commit};
use crate::api::request::Req;
use crate::api::response::Reply;
use crate::api::App;
use crate::error::{substatus, CosmosError};
use crate::items::MAX_ITEM_BYTES;
use crate::items::{apply, check_doc_key, document, point_key, Conditions, Op, Outcome};
use crate::store::container::Container;
use crate::store::StoreError;
use crate::throughput::charge;
use axum::http::StatusCode;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use strata_query::pk::PartitionKey;
use strata_query::protocol::header;

/// Most operations in one batch.
pub const MAX_OPERATIONS: usize = 100;

/// Why an atomic batch stopped.
enum Abort {
    /// Operation `index` failed with this error.
    Op(usize, CosmosError),
    Store(StoreError),
}

impl From<StoreError> for Abort {
    fn from(e: StoreError) -> Self {
        Abort::Store(e)
    }
}

/// One parsed batch operation.
struct BatchOp {
    op: Op,
    id: String,
    cond: Conditions,
}

fn parse_op(
    i: usize,
    v: &Value,
    c: &crate::store::container::Container,
    pk: &PartitionKey,
) -> Result<BatchOp, CosmosError> {
    let at = |m: String| CosmosError::bad_request(format!("Batch operation {i}: {m}"));
    let o = v
        .as_object()
        .ok_or_else(|| at("it must be a JSON object".into()))?;
    let kind = o
        .get("operationType")
        .and_then(Value::as_str)
        .ok_or_else(|| at("it has no 'operationType'".into()))?;
    if let Some(opk) = o.get("partitionKey") {
        let given = match opk {
            Value::String(s) => PartitionKey::from_header(s),
            other => PartitionKey::from_json_value(other),
        }
        .map_err(|e| at(e.0))?;
        if given != *pk {
            return Err(at(format!(
                "its partition key {given} differs from the batch's {pk}; a batch addresses one logical partition"
            )));
        }
    }
    let cond = Conditions {
        if_match: o.get("ifMatch").and_then(Value::as_str).map(str::to_string),
        if_none_match: o
            .get("ifNoneMatch")
            .and_then(Value::as_str)
            .map(str::to_string),
    };
    let body = o.get("resourceBody").cloned();
    let doc_op = |body: Option<Value>| -> Result<(Map<String, Value>, String), CosmosError> {
        let b = body.ok_or_else(|| at("it needs a 'resourceBody'".into()))?;
        let size = serde_json::to_vec(&b).map(|v| v.len()).unwrap_or(0);
        let (doc, id) = document(b, size).map_err(|e| at(e.message.clone()))?;
        check_doc_key(c, pk, &doc).map_err(|e| {
            let mut a = at(e.message.clone());
            a.sub_status = e.sub_status;
            a
        })?;
        Ok((doc, id))
    };
    let id_of = || -> Result<String, CosmosError> {
        o.get("id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| at(format!("a {kind} needs an 'id'")))
    };
    let (op, id) = match kind.to_ascii_lowercase().as_str() {
        "create" => {
            let (d, id) = doc_op(body)?;
            (Op::Create(d.into()), id)
        }
        "upsert" => {
            let (d, id) = doc_op(body)?;
            (Op::Upsert(d.into()), id)
        }
        "replace" => {
            // A different id in the body renames the item.
            let (d, body_id) = doc_op(body)?;
            let id = o
                .get("id")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or(body_id);
            (Op::Replace(d.into()), id)
        }
        "read" => (Op::Read, id_of()?),
        "delete" => (Op::Delete, id_of()?),
        "patch" => {
            let b =
                body.ok_or_else(|| at("a Patch needs a 'resourceBody' with 'operations'".into()))?;
            let p = strata_query::patch::parse(&b).map_err(at)?;
            (Op::Patch(p), id_of()?)
        }
        other => {
            return Err(at(format!(
                "'{other}' is not a batch operation (Create, Upsert, Read, Replace, Delete, Patch)"
            )))
        }
    };
    Ok(BatchOp { op, id, cond })
}

fn result_json(c: &crate::store::container::Container, o: &Outcome) -> Value {
    let mut r = json!({
        "statusCode": o.status.as_u16(),
        "requestCharge": match o.status {
            StatusCode::OK if o.item.is_some() => charge::read(o.bytes),
            _ => charge::write(o.bytes),
        },
    });
    if let Some(item) = &o.item {
        r["eTag"] = json!(item.etag(c.cid));
        if o.status != StatusCode::NO_CONTENT {
            r["resourceBody"] = serde_json::from_slice(&item.json).unwrap_or(Value::Null);
        }
    }
    r
}

fn error_json(e: &CosmosError) -> Value {
    let mut r =
        json!({"statusCode": e.status.as_u16(), "requestCharge": 1.0, "message": e.message});
    if let Some(s) = e.sub_status {
        r["subStatusCode"] = json!(s);
    }
    r
}

/// The results of an atomic batch whose operation `failed` failed: its error, and 424 for
/// every other operation.
fn failed_results(n: usize, failed: usize, e: &CosmosError) -> Vec<Value> {
    (0..n)
        .map(|i| {
            if i == failed {
                error_json(e)
            } else {
                json!({"statusCode": 424, "requestCharge": 0.0})
            }
        })
        .collect()
}

/// A batch that fails before anything runs.
fn failed_batch(
    c: &crate::store::container::Container,
    epk: &str,
    n: usize,
    failed: usize,
    e: &CosmosError,
) -> Reply {
    Reply::json(
        StatusCode::MULTI_STATUS,
        &Value::Array(failed_results(n, failed, e)),
    )
    .charge(1.0)
    .session(&[c.range_id_of(epk)], c.current_lsn())
    .container(c)
}

/// `POST .../docs` with `x-ms-cosmos-is-batch-request`.
pub async fn batch(app: &App, req: &Req, c: &Arc<Container>) -> Result<Reply, CosmosError> {
    if req.body.len() > MAX_ITEM_BYTES {
        return Err(CosmosError::too_large(format!(
            "The batch request is {} bytes; a batch may carry at most {MAX_ITEM_BYTES} bytes (2 MB).",
            req.body.len()
        )));
    }
    let ops = match req.json()? {
        Value::Array(a) => a,
        _ => {
            return Err(CosmosError::bad_request(
                "A batch body must be a JSON array of operations.",
            ))
        }
    };
    if ops.is_empty() {
        return Err(CosmosError::bad_request(
            "Batch request has no operations. Send a JSON array of 1 to 100 operations.",
        ));
    }
    if ops.len() > MAX_OPERATIONS {
        return Err(CosmosError::bad_request(format!(
            "Batch request has more operations than what is supported. It has {}; at most {MAX_OPERATIONS} are allowed.",
            ops.len()
        )));
    }
    let atomic = req.header(header::BATCH_ATOMIC).is_none() || req.flag(header::BATCH_ATOMIC);
    let Some(pk) = req.partition_key()? else {
        if !atomic {
            return bulk(app, req, c, &ops).await;
        }
        return Err(CosmosError::bad_request("A transactional batch needs the x-ms-documentdb-partitionkey header: it runs in one logical partition. (Bulk requests set x-ms-cosmos-batch-atomic: false and a partition key per operation.)"));
    };
    let (pk, epk) = point_key(c, Some(pk), None)?;
    let mut parsed: Vec<BatchOp> = Vec::with_capacity(ops.len());
    for (i, v) in ops.iter().enumerate() {
        match parse_op(i, v, c, &pk) {
            Ok(b) => parsed.push(b),
            // A document of another logical partition fails that operation (and so the
            // batch), as the service reports it: 207 with the operation's 400/1001.
            Err(e) if e.sub_status == Some(substatus::PARTITION_KEY_MISMATCH) => {
                return Ok(failed_batch(c, &epk, ops.len(), i, &e))
            }
            Err(e) => return Err(e),
        }
    }
    let n = parsed.len();
    let estimate = n as f64 * charge::write(req.body.len() / n.max(1));
    let mut commit = Commit::admit(app, (c, req), &epk, estimate)?;
    let (results, status) = if atomic {
        let run = commit
            .transact(|t| {
                let mut out = Vec::with_capacity(n);
                for (i, b) in parsed.into_iter().enumerate() {
                    match apply(t, &epk, &pk, &b.id, b.op, &b.cond) {
                        Ok(o) => out.push(o),
                        Err(e) => return Err(Abort::Op(i, e)),
                    }
                }
                Ok(out)
            })
            .await;
        match run {
            Ok(outcomes) => (
                outcomes
                    .iter()
                    .map(|o| result_json(c, o))
                    .collect::<Vec<_>>(),
                StatusCode::OK,
            ),
            Err(Abort::Store(e)) => return Err(e.into()),
            Err(Abort::Op(failed, e)) => (failed_results(n, failed, &e), StatusCode::MULTI_STATUS),
        }
    } else {
        // Not atomic (bulk): every operation commits on its own.
        let mut out = Vec::with_capacity(n);
        let mut any_failed = false;
        for b in parsed {
            match commit
                .transact(|t| apply(t, &epk, &pk, &b.id, b.op, &b.cond))
                .await
            {
                Ok(o) => out.push(result_json(c, &o)),
                Err(e) => {
                    any_failed = true;
                    out.push(error_json(&e));
                }
            }
        }
        (
            out,
            if any_failed {
                StatusCode::MULTI_STATUS
            } else {
                StatusCode::OK
            },
        )
    };
    commit.durable().await?;
    let total: f64 = results
        .iter()
        .filter_map(|r| r["requestCharge"].as_f64())
        .sum();
    commit.settle(total.max(1.0));
    Ok(Reply::json(status, &Value::Array(results))
        .charge(total.max(1.0))
        .session(&[c.range_id_of(&epk)], c.current_lsn())
        .container(c))
}

/// The key of one bulk operation: its own `partitionKey` (a JSON string, as the SDKs send it,
/// or the key's JSON value).
fn op_key(i: usize, v: &Value, c: &Container) -> Result<(PartitionKey, String), CosmosError> {
    let raw = v.get("partitionKey").ok_or_else(|| {
        CosmosError::bad_request(format!(
            "Bulk operation {i} has no 'partitionKey': without the x-ms-documentdb-partitionkey header every operation names its own."
        ))
    })?;
    let pk = match raw {
        Value::String(s) => PartitionKey::from_header(s),
        other => PartitionKey::from_json_value(other),
    }
    .map_err(|e| CosmosError::bad_request(format!("Bulk operation {i}: {}", e.0)))?;
    point_key(c, Some(pk), None)
}

/// A bulk request (`x-ms-cosmos-batch-atomic: false`, no partition key header): operations of
/// any logical partitions, addressed to one partition key range
/// (`x-ms-documentdb-partitionkeyrangeid`), each admitted, run and answered on its own. A
/// range that has split answers 410/1002 so the SDK re-routes; an operation outside the range
/// answers 410/1002 alone; with `x-ms-cosmos-batch-continue-on-error: false` the operations
/// after a failure are not run (424).
async fn bulk(
    app: &App,
    req: &Req,
    c: &Arc<Container>,
    ops: &[Value],
) -> Result<Reply, CosmosError> {
    crate::api::commit::refuse_copies(c)?;
    let range = req
        .header(header::PARTITION_KEY_RANGE_ID)
        .map(|id| crate::api::scope::range_by_id(c, id))
        .transpose()?;
    let continue_on_error = req
        .header(header::BATCH_CONTINUE_ON_ERROR)
        .is_none_or(|_| req.flag(header::BATCH_CONTINUE_ON_ERROR));
    // One durability wait for all the operations' transactions; request units are admitted
    // per operation, so one throttled operation does not fail the others.
    let mut commit = Commit::per_operation(app, c);
    let mut results = Vec::with_capacity(ops.len());
    let mut touched: Vec<u32> = Vec::new();
    let mut stopped = false;
    for (i, v) in ops.iter().enumerate() {
        if stopped {
            results.push(json!({"statusCode": 424, "requestCharge": 0.0}));
            continue;
        }
        let run = async {
            let (pk, epk) = op_key(i, v, c)?;
            if range.as_ref().is_some_and(|r| !r.contains(&epk)) {
                return Err(CosmosError::gone(format!(
                    "Bulk operation {i}: its partition key {pk} is not in the partition key range this request addressed; re-read /pkranges and retry."
                )));
            }
            let b = parse_op(i, v, c, &pk)?;
            // As for a transactional batch: the request's size shared among its operations
            // (not each operation serialised again).
            let estimate = match b.op {
                Op::Read => charge::read(0),
                _ => charge::write(req.body.len() / ops.len().max(1)),
            };
            let admitted = Admission::point(app, (c, req), &epk, estimate)?;
            if !touched.contains(&admitted.range()) {
                touched.push(admitted.range());
            }
            let o = commit
                .transact(|t| apply(t, &epk, &pk, &b.id, b.op, &b.cond))
                .await?;
            let r = result_json(c, &o);
            admitted.settle(r["requestCharge"].as_f64().unwrap_or(1.0));
            Ok::<Value, CosmosError>(r)
        };
        match run.await {
            Ok(r) => results.push(r),
            Err(e) => {
                let mut r = error_json(&e);
                if let Some(ms) = e.retry_after_ms {
                    r["retryAfterMilliseconds"] = json!(ms);
                }
                results.push(r);
                stopped = !continue_on_error;
            }
        }
    }
    commit.durable().await?;
    let failed = results
        .iter()
        .any(|r| r["statusCode"].as_u64().is_some_and(|s| s >= 400));
    let total: f64 = results
        .iter()
        .filter_map(|r| r["requestCharge"].as_f64())
        .sum();
    let status = if failed {
        StatusCode::MULTI_STATUS
    } else {
        StatusCode::OK
    };
    Ok(Reply::json(status, &Value::Array(results))
        .charge(total.max(1.0))
        .session(&touched, c.current_lsn())
        .container(c))
}
