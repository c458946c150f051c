//! Server-side JavaScript: stored procedures, triggers and user-defined functions, run in
//! QuickJS sandboxes ([`sandbox`]).
//!
//! A stored procedure or trigger runs on a thread of its own while the transaction it works
//! in stays on the caller's thread: the script's data operations travel to the caller as
//! messages ([`run`]), which applies each one to the transaction and sends back the answer.
//! The transaction never crosses threads, every operation is the same code a REST request
//! runs, and the caller decides what is accepted (the operation and time budget). UDFs run
//! inside query evaluation, on the query's worker thread, from a per-thread cache of
//! compiled functions ([`udf`]).

pub mod sandbox;
pub mod udf;

use rquickjs::{Function, Object};
use sandbox::{entry, failure, get, to_js, Sandbox};
use serde_json::Value;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The server-side API, evaluated into every stored procedure and trigger context.
const PRELUDE: &str = include_str!("prelude.js");

/// How a script failed; the API maps each to the service's status.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// The body is not a JavaScript function (400).
    Compile(String),
    /// The script threw; `status` is the `number` of a thrown error that carries one (an
    /// operation's error rethrown), else 400.
    Thrown {
        status: Option<u16>,
        message: String,
    },
    /// The script ran past its time budget and was stopped (408).
    Timeout,
    /// The script ran out of its memory budget and was stopped.
    Memory,
    /// The runtime itself failed.
    Internal(String),
}

/// A stored procedure or trigger to run.
pub struct Job {
    pub body: String,
    /// Arguments of the entry function.
    pub args: Vec<Value>,
    /// What the prelude starts from: `selfLink`, `altLink`, `requestBody`, `responseBody`,
    /// `operationType`.
    pub setup: Value,
    pub timeout: Duration,
}

/// What a script left behind.
#[derive(Debug, Clone, Default)]
pub struct Finished {
    /// The response body (`getResponse().setBody(...)`); `None` when never set.
    pub response: Option<Value>,
    /// The request body as the script left it (a pre-trigger's changed document).
    pub request: Option<Value>,
    /// `console.log` lines, joined by newlines.
    pub log: String,
}

enum Msg {
    Call(String, String),
    Done(Result<Finished, Failure>),
}

/// Runs `job` on a sandbox thread; every data operation it makes is answered by `serve`
/// (operation name, JSON arguments → JSON answer) on the calling thread.
pub fn run(job: Job, serve: &mut dyn FnMut(&str, Value) -> Value) -> Result<Finished, Failure> {
    let (msg_tx, msg_rx) = mpsc::channel::<Msg>();
    let (reply_tx, reply_rx) = mpsc::channel::<String>();
    std::thread::scope(|s| {
        let done_tx = msg_tx.clone();
        let thread = std::thread::Builder::new()
            .name("strata-script".into())
            .stack_size(8 << 20)
            .spawn_scoped(s, move || {
                let host = move |op: String, json: String| -> String {
                    if msg_tx.send(Msg::Call(op, json)).is_err() {
                        return r#"{"accepted":false}"#.to_string();
                    }
                    reply_rx
                        .recv()
                        .unwrap_or_else(|_| r#"{"accepted":false}"#.to_string())
                };
                let out = run_in_sandbox(job, host);
                let _ = done_tx.send(Msg::Done(out));
            })
            .map_err(|e| Failure::Internal(format!("cannot start a script thread: {e}")))?;
        let mut out = Err(Failure::Internal("the script thread stopped".into()));
        for msg in msg_rx.iter() {
            match msg {
                Msg::Call(op, json) => {
                    let args = serde_json::from_str(&json).unwrap_or(Value::Null);
                    let answer = serve(&op, args);
                    if reply_tx.send(answer.to_string()).is_err() {
                        break;
                    }
                }
                Msg::Done(result) => {
                    out = result;
                    break;
                }
            }
        }
        if thread.join().is_err() {
            return Err(Failure::Internal("the script thread panicked".into()));
        }
        out
    })
}

fn run_in_sandbox(
    job: Job,
    host: impl Fn(String, String) -> String + 'static,
) -> Result<Finished, Failure> {
    let sb = Sandbox::new()?;
    sb.context.with(|ctx| {
        let internal = |what: &str| {
            let (_, m) = sandbox::describe(&ctx, ctx.catch());
            Failure::Internal(format!("script runtime ({what}): {m}"))
        };
        let prelude: Function = ctx.eval(PRELUDE).map_err(|_| internal("prelude"))?;
        let host_fn = Function::new(ctx.clone(), host).map_err(|_| internal("host"))?;
        let setup = to_js(&ctx, &job.setup)?;
        let runtime: Object = prelude
            .call((host_fn, setup))
            .map_err(|_| internal("setup"))?;
        sb.set_deadline(Some(Instant::now() + job.timeout));
        let f = match entry(&ctx, &job.body) {
            Ok(f) => f,
            Err(Failure::Compile(m)) if sb.timed_out() => {
                tracing::debug!(message = %m, "script compile stopped at its deadline");
                return Err(Failure::Timeout);
            }
            Err(e) => return Err(e),
        };
        let args = to_js(&ctx, &Value::Array(job.args))?;
        let run: Function = get(&runtime, "run")?;
        if run.call::<_, ()>((f, args)).is_err() {
            return Err(failure(&sb, &ctx));
        }
        sb.set_deadline(None);
        let finish: Function = get(&runtime, "finish")?;
        let text: String = finish.call(()).map_err(|_| failure(&sb, &ctx))?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| Failure::Internal(format!("script result: {e}")))?;
        let has_response = v.get("hasResponse").and_then(Value::as_bool) == Some(true);
        Ok(Finished {
            response: if has_response {
                Some(v.get("response").cloned().unwrap_or(Value::Null))
            } else {
                None
            },
            request: v.get("request").cloned(),
            log: v
                .get("log")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        })
    })
}
