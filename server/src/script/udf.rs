//! User-defined functions in queries: `udf.name(args)` calls the container's JavaScript
//! function of that name.
//!
//! Compiling a container's UDFs costs a fresh runtime and a parse of every body, far more than
//! a call, so each worker thread keeps the last set it compiled, keyed by container and script
//! version: a UDF in a WHERE over 100k documents compiles once per thread, not per document.

use super::sandbox::{describe, entry, from_js, to_js, Sandbox};
use super::Failure;
use crate::store::container::Container;
use crate::store::scripts::ScriptKind;
use rquickjs::function::Args;
use rquickjs::{Function, Object, Value as JsValue};
use serde_json::Value;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_query::sql::ctx::Udfs;

/// The UDFs of one container at one version, callable from query evaluation.
pub struct ContainerUdfs {
    key: (u32, u64),
    bodies: Arc<Vec<(String, String)>>,
    timeout: Duration,
}

/// The UDF caller for queries over `c`.
pub fn of(c: &Container) -> Arc<dyn Udfs> {
    let scripts = c.scripts();
    let bodies = scripts
        .of(ScriptKind::Udf)
        .map(|r| (r.id.clone(), r.body.clone()))
        .collect();
    Arc::new(ContainerUdfs {
        key: (c.cid, scripts.version),
        bodies: Arc::new(bodies),
        timeout: c.limits().script_timeout,
    })
}

/// A thread's compiled UDFs: the functions live in the context's `__udfs` object; bodies
/// that did not compile keep their error.
struct Compiled {
    key: (u32, u64),
    sandbox: Sandbox,
    broken: HashMap<String, String>,
}

thread_local! {
    static COMPILED: RefCell<Option<Compiled>> = const { RefCell::new(None) };
}

fn compile(key: (u32, u64), bodies: &[(String, String)]) -> Result<Compiled, String> {
    let sandbox = Sandbox::new().map_err(|e| format!("{e:?}"))?;
    let mut broken = HashMap::new();
    sandbox.context.with(|ctx| -> Result<(), String> {
        let table = Object::new(ctx.clone()).map_err(|e| e.to_string())?;
        for (name, body) in bodies {
            match entry(&ctx, body) {
                Ok(f) => table.set(name.as_str(), f).map_err(|e| e.to_string())?,
                Err(Failure::Compile(m)) => {
                    broken.insert(name.clone(), m);
                }
                Err(e) => return Err(format!("{e:?}")),
            }
        }
        ctx.globals()
            .set("__udfs", table)
            .map_err(|e| e.to_string())
    })?;
    Ok(Compiled {
        key,
        sandbox,
        broken,
    })
}

impl Udfs for ContainerUdfs {
    fn call(&self, name: &str, args: &[Option<Value>]) -> Result<Option<Value>, String> {
        COMPILED.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.as_ref().is_none_or(|c| c.key != self.key) {
                *slot = None;
                *slot = Some(compile(self.key, &self.bodies)?);
            }
            let Some(compiled) = slot.as_ref() else {
                return Err("the UDF runtime is unavailable".to_string());
            };
            if let Some(m) = compiled.broken.get(name) {
                return Err(format!(
                    "Encountered exception while compiling Javascript. Exception = {m} (udf.{name})"
                ));
            }
            let sb = &compiled.sandbox;
            sb.set_deadline(Some(Instant::now() + self.timeout));
            let out = sb.context.with(|ctx| {
                let table: Object = ctx.globals().get("__udfs").map_err(|e| e.to_string())?;
                let f: Option<Function> = table.get(name).map_err(|e| e.to_string())?;
                let Some(f) = f else {
                    return Err(format!(
                        "Unknown user-defined function 'udf.{name}': the container has no UDF with that id."
                    ));
                };
                let mut a = Args::new(ctx.clone(), args.len());
                for v in args {
                    let js = match v {
                        Some(v) => to_js(&ctx, v).map_err(|e| format!("{e:?}"))?,
                        None => JsValue::new_undefined(ctx.clone()),
                    };
                    a.push_arg(js).map_err(|e| e.to_string())?;
                }
                match f.call_arg::<JsValue>(a) {
                    Ok(v) => from_js(&ctx, v).map_err(|e| match e {
                        Failure::Thrown { message, .. } => message,
                        other => format!("{other:?}"),
                    }),
                    Err(_) if sb.timed_out() => {
                        sb.set_deadline(None);
                        let _ = ctx.catch();
                        Err(format!(
                            "The user-defined function 'udf.{name}' ran longer than {} ms and was stopped.",
                            self.timeout.as_millis()
                        ))
                    }
                    Err(_) => {
                        let (_, m) = describe(&ctx, ctx.catch());
                        Err(format!(
                            "Encountered exception while executing Javascript. Exception = {m} (udf.{name})"
                        ))
                    }
                }
            });
            sb.set_deadline(None);
            out
        })
    }
}
