//! The [`Host`] that serves the data operations of stored procedures and triggers.
//!
//! Every operation a script makes is the item layer's own operation ([`ops::apply`]) applied to
//! the script's transaction, behind a savepoint: a failed operation leaves nothing behind and
//! the script may carry on; a script that throws, or runs past its budget, rolls the whole
//! transaction back. Operations are confined to the logical partition of the request's key: a
//! document of another key is refused (400), and reads and queries see only this partition.

use super::document::{check_doc_key, document};
use super::ops::{self, Conditions, Op, Outcome};
use crate::error::CosmosError;
use crate::exec::query_ctx;
use crate::script::{self, Failure};
use crate::store::catalog;
use crate::store::container::{Container, Txn};
use crate::throughput::charge;
use axum::http::StatusCode;
use serde_json::{json, Map, Value};
use std::time::{Duration, Instant};
use strata_query::pk::PartitionKey;
use strata_query::sql::{self, Mode};

/// Most data operations one script execution may make; past it (or past 60% of its time)
/// operations are refused with `false`, so the script can return a continuation, as the
/// service's bounded execution asks scripts to.
pub const MAX_OPERATIONS: u32 = 5000;
/// Page size of a script's query without `pageSize`.
const DEFAULT_PAGE: usize = 100;

/// Serves a script's data operations against a transaction.
pub struct Host {
    pk: PartitionKey,
    epk: String,
    ops: u32,
    /// Request units the operations cost.
    pub charge: f64,
    started: Instant,
    /// When operations stop being accepted.
    soft: Duration,
}

impl Host {
    pub fn new(c: &Container, pk: PartitionKey, epk: String) -> Self {
        Self {
            pk,
            epk,
            ops: 0,
            charge: 0.0,
            started: Instant::now(),
            soft: c.limits().script_timeout.mul_f64(0.6),
        }
    }

    /// The prelude's starting point for a script in `c`.
    pub fn setup(
        c: &Container,
        request: Option<&Value>,
        response: Option<&Value>,
        op: &str,
    ) -> Value {
        let mut m = Map::new();
        m.insert(
            "selfLink".into(),
            Value::String(format!("dbs/{}/colls/{}/", c.db_rid, c.rid)),
        );
        m.insert(
            "altLink".into(),
            Value::String(format!("dbs/{}/colls/{}", c.db, c.id)),
        );
        if let Some(r) = request {
            m.insert("requestBody".into(), r.clone());
        }
        if let Some(r) = response {
            m.insert("responseBody".into(), r.clone());
        }
        m.insert("operationType".into(), Value::String(op.into()));
        Value::Object(m)
    }

    fn accepting(&self) -> bool {
        self.ops < MAX_OPERATIONS && self.started.elapsed() < self.soft
    }

    /// Answers one operation (see `prelude.js` for the shapes).
    pub fn serve(&mut self, t: &mut Txn<'_>, op: &str, args: Value) -> Value {
        if !self.accepting() {
            return json!({"accepted": false});
        }
        self.ops += 1;
        let sp = t.savepoint();
        match self.apply(t, op, &args) {
            Ok((result, options, ru)) => {
                t.release(sp);
                self.charge += ru;
                json!({"accepted": true, "result": result, "options": options})
            }
            Err(e) => {
                t.rollback_to(sp);
                self.charge += 1.0;
                json!({"accepted": true, "error": {"number": e.status.as_u16(), "message": e.message}})
            }
        }
    }

    fn apply(
        &mut self,
        t: &mut Txn<'_>,
        op: &str,
        args: &Value,
    ) -> Result<(Value, Value, f64), CosmosError> {
        let c = t.container();
        let empty = Map::new();
        let opts = args
            .get("options")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let link = args.get("link").and_then(Value::as_str).unwrap_or_default();
        let etag = |name: &str| opts.get(name).and_then(Value::as_str).map(str::to_string);
        let cond = Conditions {
            if_match: etag("etag").or_else(|| etag("ifMatch")),
            if_none_match: etag("ifNoneMatch"),
        };
        let (pk, epk) = (self.pk.clone(), self.epk.clone());
        let done = |o: Outcome, ru: f64| -> Result<(Value, Value, f64), CosmosError> {
            let doc = match &o.item {
                Some(i) if o.status != StatusCode::NOT_MODIFIED => {
                    serde_json::from_slice(&i.json).unwrap_or(Value::Null)
                }
                _ => Value::Null,
            };
            Ok((doc, json!({}), ru))
        };
        match op {
            "create" | "upsert" => {
                collection_link(c, link)?;
                let mut doc = match args.get("body") {
                    Some(Value::Object(m)) => m.clone(),
                    _ => {
                        return Err(CosmosError::bad_request(
                            "The document to create must be a JSON object.",
                        ))
                    }
                };
                let auto_id = !opts
                    .get("disableAutomaticIdGeneration")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                if auto_id && !doc.contains_key("id") {
                    doc.insert("id".into(), Value::String(new_id()));
                }
                let size = serde_json::to_vec(&doc).map(|v| v.len()).unwrap_or(0);
                let (doc, id) = document(Value::Object(doc), size)?;
                check_doc_key(c, &pk, &doc)?;
                let op = if op == "create" {
                    Op::Create(doc.into())
                } else {
                    Op::Upsert(doc.into())
                };
                let o = ops::apply(t, &epk, &pk, &id, op, &cond)?;
                let ru = charge::write(o.bytes);
                done(o, ru)
            }
            "replace" => {
                let id = document_id(t, link, &epk)?;
                let doc = match args.get("body") {
                    Some(Value::Object(m)) => m.clone(),
                    _ => {
                        return Err(CosmosError::bad_request(
                            "The replacement document must be a JSON object.",
                        ))
                    }
                };
                let size = serde_json::to_vec(&doc).map(|v| v.len()).unwrap_or(0);
                let (doc, _) = document(Value::Object(doc), size)?;
                check_doc_key(c, &pk, &doc)?;
                let o = ops::apply(t, &epk, &pk, &id, Op::Replace(doc.into()), &cond)?;
                let ru = charge::write(o.bytes);
                done(o, ru)
            }
            "read" => {
                let id = document_id(t, link, &epk)?;
                let o = ops::apply(t, &epk, &pk, &id, Op::Read, &cond)?;
                let ru = charge::read(o.bytes);
                done(o, ru)
            }
            "delete" => {
                let id = document_id(t, link, &epk)?;
                let o = ops::apply(t, &epk, &pk, &id, Op::Delete, &cond)?;
                Ok((Value::Null, json!({}), charge::write(o.bytes)))
            }
            "patch" => {
                let id = document_id(t, link, &epk)?;
                let ops = args.get("operations").cloned().unwrap_or(Value::Null);
                let patch = strata_query::patch::parse(&ops).map_err(CosmosError::bad_request)?;
                let o = ops::apply(t, &epk, &pk, &id, Op::Patch(patch), &cond)?;
                let ru = charge::write(o.bytes);
                done(o, ru)
            }
            "query" => {
                collection_link(c, link)?;
                self.query(t, args, opts)
            }
            other => Err(CosmosError::bad_request(format!(
                "Unknown script operation '{other}'."
            ))),
        }
    }

    /// A query over the logical partition as the transaction sees it: streaming queries page
    /// by document id (robust to the deletes a bulk-delete script makes between pages), the
    /// others by position in their complete result.
    fn query(
        &self,
        t: &Txn<'_>,
        args: &Value,
        opts: &Map<String, Value>,
    ) -> Result<(Value, Value, f64), CosmosError> {
        let c = t.container();
        let text = args
            .get("query")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let params = sql::parse_parameters(args.get("parameters").cloned())?;
        let p = sql::prepare(text, &params, None)?;
        let page = match opts.get("pageSize").and_then(Value::as_i64) {
            Some(n) if n > 0 => n as usize,
            Some(_) => usize::MAX,
            None => DEFAULT_PAGE,
        };
        let token: Option<Value> = opts
            .get("continuation")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(|s| {
                serde_json::from_str(s).map_err(|_| {
                    CosmosError::bad_request(
                        "The continuation token is invalid; pass the one the previous page returned.",
                    )
                })
            })
            .transpose()?;
        let docs = t.logical_partition(&self.epk)?;
        let cx = query_ctx(c, &p);
        let parse = |json: &[u8]| -> Result<Value, CosmosError> {
            serde_json::from_slice(json)
                .map_err(|e| CosmosError::internal(format!("a stored document is not JSON: {e}")))
        };
        let mut rows = Vec::new();
        let mut next: Option<Value> = None;
        let mut scanned = 0u64;
        if p.mode == Mode::Streaming {
            let after = token
                .as_ref()
                .and_then(|t| t.get("after"))
                .and_then(Value::as_str);
            for (id, item) in &docs {
                if after.is_some_and(|a| id.as_str() <= a) {
                    continue;
                }
                scanned += 1;
                rows.extend(p.run_over(&[parse(&item.json)?], &cx)?);
                if rows.len() >= page {
                    next = Some(json!({ "after": id }));
                    break;
                }
            }
            // Nothing after the last document: no continuation.
            if let (Some(n), Some((last, _))) = (&next, docs.last()) {
                if n.get("after").and_then(Value::as_str) == Some(last.as_str()) {
                    next = None;
                }
            }
        } else {
            let all: Vec<Value> = docs
                .iter()
                .map(|(_, i)| parse(&i.json))
                .collect::<Result<_, _>>()?;
            scanned = all.len() as u64;
            let skip = token
                .as_ref()
                .and_then(|t| t.get("skip"))
                .and_then(Value::as_u64)
                .unwrap_or(0) as usize;
            let result = p.run_over(&all, &cx)?;
            let end = skip.saturating_add(page).min(result.len());
            if end < result.len() {
                next = Some(json!({ "skip": end }));
            }
            rows = result
                .into_iter()
                .skip(skip)
                .take(end - skip.min(end))
                .collect();
        }
        let bytes = rows.iter().map(|r| r.to_string().len()).sum();
        let options = match next {
            Some(n) => json!({ "continuation": n.to_string() }),
            None => json!({}),
        };
        Ok((
            Value::Array(rows),
            options,
            charge::query(scanned, bytes, 1),
        ))
    }
}

/// A fresh id for a document created without one (a random UUID, as the service makes).
fn new_id() -> String {
    let mut b = [0u8; 16];
    if getrandom::fill(&mut b).is_err() {
        let t = catalog::now_millis().to_le_bytes();
        b[..8].copy_from_slice(&t);
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

fn segments(link: &str) -> Vec<&str> {
    link.split('/').filter(|s| !s.is_empty()).collect()
}

fn names_this(c: &Container, segs: &[&str]) -> bool {
    matches!(segs, ["dbs", db, "colls", coll, ..]
        if (*db == c.db || *db == c.db_rid) && (*coll == c.id || *coll == c.rid))
}

/// Checks that a collection link names the script's own container.
fn collection_link(c: &Container, link: &str) -> Result<(), CosmosError> {
    let segs = segments(link);
    if segs.len() == 4 && names_this(c, &segs) {
        return Ok(());
    }
    Err(CosmosError::bad_request(format!(
        "The collection link '{link}' does not name this script's collection; use getContext().getCollection().getSelfLink() or getAltLink()."
    )))
}

/// The id of the document a link names (by id, or by `_rid` in a `_self` link).
fn document_id(t: &Txn<'_>, link: &str, epk: &str) -> Result<String, CosmosError> {
    let c = t.container();
    let segs = segments(link);
    match segs.as_slice() {
        [.., "docs", id] if segs.len() == 6 && names_this(c, &segs) => {
            if segs[1] == c.db_rid && segs[3] == c.rid {
                if let Some(seq) = catalog::doc_seq_of(&c.rid, id) {
                    return t.id_by_doc_seq(epk, seq)?.ok_or_else(|| {
                        CosmosError::not_found(format!(
                            "Entity with the specified id does not exist in the system: no document with _rid '{id}' in this logical partition."
                        ))
                    });
                }
            }
            Ok(id.to_string())
        }
        _ => Err(CosmosError::bad_request(format!(
            "The document link '{link}' does not name a document of this script's collection; use the document's _self, or getAltLink() + '/docs/' + id."
        ))),
    }
}

/// A script failure in the service's shape.
pub fn failure(kind: &str, timeout: Duration, f: Failure) -> CosmosError {
    match f {
        Failure::Compile(m) => CosmosError::bad_request(format!(
            "Encountered exception while compiling Javascript. Exception = {m}"
        )),
        Failure::Thrown { status, message } => {
            let status = status
                .and_then(|s| StatusCode::from_u16(s).ok())
                .filter(|s| s.is_client_error() || s.is_server_error())
                .unwrap_or(StatusCode::BAD_REQUEST);
            CosmosError::new(
                status,
                status_code_name(status),
                format!("Encountered exception while executing function. Exception = {message}"),
            )
        }
        Failure::Timeout => CosmosError::new(
            StatusCode::REQUEST_TIMEOUT,
            "RequestTimeout",
            format!(
                "The {kind} ran longer than its {} ms budget and was stopped; its writes were rolled back. Return before the budget ends: operations return false once it nears, so the script can answer with a continuation.",
                timeout.as_millis()
            ),
        ),
        Failure::Memory => CosmosError::bad_request(format!(
            "The {kind} exceeded its memory limit of {} MB and was stopped; its writes were rolled back.",
            script::sandbox::MEMORY_LIMIT >> 20
        )),
        Failure::Internal(m) => CosmosError::internal(m),
    }
}

fn status_code_name(s: StatusCode) -> &'static str {
    match s.as_u16() {
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        408 => "RequestTimeout",
        409 => "Conflict",
        412 => "PreconditionFailed",
        413 => "RequestEntityTooLarge",
        429 => "TooManyRequests",
        449 => "RetryWith",
        500 => "InternalServerError",
        503 => "ServiceUnavailable",
        _ => "BadRequest",
    }
}
