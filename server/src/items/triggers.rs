//! Pre- and post-triggers on item writes, named by `x-ms-documentdb-pre-trigger-include` and
//! `x-ms-documentdb-post-trigger-include` (comma-separated ids).
//!
//! Both run inside the write's transaction on the blocking pool: a pre-trigger may change the
//! incoming document (`getRequest().setBody`), a post-trigger sees the written document
//! (`getResponse().getBody()`) and may read and write more; a throw from either rolls the
//! whole write back.

use super::document::{check_doc_key, document};
use super::host::{failure, Host};
use super::ops::{self, Conditions, Op, Outcome};
use crate::error::CosmosError;
use crate::script::{self, Job};
use crate::store::container::{Container, Txn};
use crate::store::scripts::{ScriptKind, ScriptRecord};
use serde_json::Value;
use std::sync::Arc;
use strata_query::pk::PartitionKey;
use strata_query::protocol::header;

/// The triggers a write request asked for, in the order named.
#[derive(Default)]
pub struct Requested {
    pre: Vec<Arc<ScriptRecord>>,
    post: Vec<Arc<ScriptRecord>>,
    operation: &'static str,
}

impl Requested {
    pub fn is_empty(&self) -> bool {
        self.pre.is_empty() && self.post.is_empty()
    }
}

/// The operation name triggers are declared for.
fn operation_of(op: &Op) -> &'static str {
    match op {
        Op::Create(_) => "Create",
        Op::Upsert(_) => "Upsert",
        Op::Replace(_) | Op::Patch(_) => "Replace",
        Op::Delete => "Delete",
        Op::Read => "Read",
    }
}

fn applies(declared: &str, operation: &str) -> bool {
    declared.eq_ignore_ascii_case("All")
        || declared.eq_ignore_ascii_case(operation)
        || (operation == "Replace" && declared.eq_ignore_ascii_case("Update"))
}

/// Resolves the trigger lists of a write (the values of `x-ms-documentdb-pre-trigger-include` and `-post-trigger-include`):
/// 404 for a trigger that does not exist, 400 for one of the other type or declared for
/// another operation.
pub fn requested(
    c: &Container,
    pre: Option<&str>,
    post: Option<&str>,
    op: &Op,
) -> Result<Requested, CosmosError> {
    let operation = operation_of(op);
    let mut out = Requested {
        operation,
        ..Requested::default()
    };
    let scripts = c.scripts();
    for (name, want, list) in [
        (header::PRE_TRIGGER_INCLUDE, "Pre", pre),
        (header::POST_TRIGGER_INCLUDE, "Post", post),
    ] {
        let Some(list) = list else {
            continue;
        };
        for id in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let t = scripts.get(c, ScriptKind::Trigger, id).ok_or_else(|| {
                CosmosError::not_found(format!(
                    "Resource Not Found: the trigger '{id}' named in {name} does not exist in container '{}'.",
                    c.id
                ))
            })?;
            let spec = t.trigger.clone().unwrap_or_default();
            if !spec.trigger_type.eq_ignore_ascii_case(want) {
                return Err(CosmosError::bad_request(format!(
                    "The trigger '{id}' is a {} trigger and cannot be used as a {want} trigger ({name}).",
                    spec.trigger_type
                )));
            }
            if !applies(&spec.trigger_operation, operation) {
                return Err(CosmosError::bad_request(format!(
                    "The trigger '{id}' runs on {} operations and cannot be used with operation '{operation}'.",
                    spec.trigger_operation
                )));
            }
            if want == "Pre" {
                out.pre.push(t);
            } else {
                out.post.push(t);
            }
        }
    }
    Ok(out)
}

/// The document an operation carries, if any.
fn body_of(op: &Op) -> Option<Value> {
    match op {
        Op::Create(d) | Op::Upsert(d) | Op::Replace(d) => Some(Value::Object(d.map.clone())),
        _ => None,
    }
}

/// Runs one write with its triggers in transaction `t`.
#[allow(clippy::too_many_arguments)]
pub fn run(
    t: &mut Txn<'_>,
    triggers: &Requested,
    pk: &PartitionKey,
    epk: &str,
    id: &str,
    mut op: Op,
    cond: &Conditions,
) -> Result<(Outcome, f64), CosmosError> {
    let c = t.container();
    let timeout = c.limits().script_timeout;
    let mut host = Host::new(c, pk.clone(), epk.to_string());
    let mut id = id.to_string();
    for trig in &triggers.pre {
        let job = Job {
            body: trig.body.clone(),
            args: Vec::new(),
            setup: Host::setup(c, body_of(&op).as_ref(), None, triggers.operation),
            timeout,
        };
        let done = script::run(job, &mut |name, args| host.serve(t, name, args))
            .map_err(|e| failure("trigger", timeout, e))?;
        if let (Some(changed), Some(_)) = (done.request, body_of(&op)) {
            let size = serde_json::to_vec(&changed).map(|v| v.len()).unwrap_or(0);
            let (doc, new_id) = document(changed, size)?;
            check_doc_key(c, pk, &doc)?;
            op = match op {
                Op::Create(_) => {
                    id = new_id;
                    Op::Create(doc.into())
                }
                Op::Upsert(_) => {
                    id = new_id;
                    Op::Upsert(doc.into())
                }
                Op::Replace(_) => Op::Replace(doc.into()),
                other => other,
            };
        }
    }
    let request = body_of(&op);
    let outcome = ops::apply(t, epk, pk, &id, op, cond)?;
    let written: Option<Value> = outcome
        .item
        .as_ref()
        .and_then(|i| serde_json::from_slice(&i.json).ok());
    for trig in &triggers.post {
        let job = Job {
            body: trig.body.clone(),
            args: Vec::new(),
            setup: Host::setup(c, request.as_ref(), written.as_ref(), triggers.operation),
            timeout,
        };
        script::run(job, &mut |name, args| host.serve(t, name, args))
            .map_err(|e| failure("trigger", timeout, e))?;
    }
    Ok((outcome, host.charge))
}
