//! Server-side JavaScript: stored procedures, triggers and user-defined functions, run in
//! QuickJS sandboxes ([`sandbox`]).
//!
//! A stored procedure or trigger runs on a script thread (from a pool of threads with warm
//! sandboxes) while the transaction it works in stays on the caller's thread: the script's
//! data operations travel to the caller as messages ([`run`]), which applies each one to the
//! transaction and sends back the answer.
//! The transaction never crosses threads, every operation is the same code a REST request
//! runs, and the caller decides what is accepted (the operation and time budget). UDFs run
//! inside query evaluation, on the query's worker thread, from a per-thread cache of
//! compiled functions ([`udf`]).

pub mod sandbox;
pub mod udf;

use rquickjs::{Function, Object, Persistent};
use sandbox::{entry, failure, get, to_js, Sandbox};
use serde_json::Value;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{mpsc, Mutex};
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

/// The channels of the execution a warm sandbox is running (the host function's way out).
type Channels = (mpsc::Sender<Msg>, mpsc::Receiver<String>);

/// One execution handed to a script thread.
struct Work {
    job: Job,
    msg_tx: mpsc::Sender<Msg>,
    reply_rx: mpsc::Receiver<String>,
}

/// Script threads waiting for work. Each keeps a warm sandbox (runtime, context, compiled
/// prelude): evaluating the prelude is most of the cost of a short execution, so a thread
/// reuses its sandbox until a script fails in a way that may have left it unsound (out of
/// time or memory).
static IDLE: Mutex<Vec<mpsc::Sender<Work>>> = Mutex::new(Vec::new());
/// Most idle script threads kept.
const MAX_IDLE: usize = 16;

/// Runs `job` on a script thread; every data operation it makes is answered by `serve`
/// (operation name, JSON arguments → JSON answer) on the calling thread.
pub fn run(job: Job, serve: &mut dyn FnMut(&str, Value) -> Value) -> Result<Finished, Failure> {
    let (msg_tx, msg_rx) = mpsc::channel::<Msg>();
    let (reply_tx, reply_rx) = mpsc::channel::<String>();
    let mut work = Work {
        job,
        msg_tx,
        reply_rx,
    };
    loop {
        let idle = IDLE.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let worker = match idle {
            Some(w) => w,
            None => spawn_worker()?,
        };
        match worker.send(work) {
            Ok(()) => break,
            // That thread has exited; try another.
            Err(mpsc::SendError(w)) => work = w,
        }
    }
    for msg in msg_rx.iter() {
        match msg {
            Msg::Call(op, json) => {
                let args = serde_json::from_str(&json).unwrap_or(Value::Null);
                let answer = serve(&op, args);
                if reply_tx.send(answer.to_string()).is_err() {
                    break;
                }
            }
            Msg::Done(result) => return result,
        }
    }
    Err(Failure::Internal("the script thread stopped".into()))
}

fn spawn_worker() -> Result<mpsc::Sender<Work>, Failure> {
    let (tx, rx) = mpsc::channel::<Work>();
    let me = tx.clone();
    std::thread::Builder::new()
        .name("strata-script".into())
        .stack_size(8 << 20)
        .spawn(move || worker(rx, me))
        .map_err(|e| Failure::Internal(format!("cannot start a script thread: {e}")))?;
    Ok(tx)
}

fn worker(rx: mpsc::Receiver<Work>, me: mpsc::Sender<Work>) {
    let mut warm: Option<Warm> = None;
    while let Ok(work) = rx.recv() {
        let sandbox = match warm.take() {
            Some(w) => Ok(w),
            None => Warm::new(),
        };
        let done_tx = work.msg_tx.clone();
        let out = match sandbox {
            Ok(w) => {
                let out = w.execute(work);
                // A sandbox a script stopped in mid-flight is not reused.
                if !matches!(
                    out,
                    Err(Failure::Timeout | Failure::Memory | Failure::Internal(_))
                ) {
                    warm = Some(w);
                }
                out
            }
            Err(e) => Err(e),
        };
        let _ = done_tx.send(Msg::Done(out));
        let mut idle = IDLE.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() >= MAX_IDLE {
            return;
        }
        idle.push(me.clone());
    }
}

/// A sandbox with the prelude evaluated, and the slot its host function reads the current
/// execution's channels from.
struct Warm {
    // Field order matters: the saved function must be freed before its runtime.
    start: Persistent<Function<'static>>,
    slot: Rc<RefCell<Option<Channels>>>,
    sb: Sandbox,
}

impl Warm {
    fn new() -> Result<Self, Failure> {
        let sb = Sandbox::new()?;
        let slot: Rc<RefCell<Option<Channels>>> = Rc::new(RefCell::new(None));
        let s = Rc::clone(&slot);
        let host = move |op: String, json: String| -> String {
            let refused = || r#"{"accepted":false}"#.to_string();
            let guard = s.borrow();
            let Some((tx, rx)) = guard.as_ref() else {
                return refused();
            };
            if tx.send(Msg::Call(op, json)).is_err() {
                return refused();
            }
            rx.recv().unwrap_or_else(|_| refused())
        };
        let start = sb.context.with(|ctx| {
            let internal = |what: &str| {
                let (_, m) = sandbox::describe(&ctx, ctx.catch());
                Failure::Internal(format!("script runtime ({what}): {m}"))
            };
            let prelude: Function = ctx.eval(PRELUDE).map_err(|_| internal("prelude"))?;
            let host_fn = Function::new(ctx.clone(), host).map_err(|_| internal("host"))?;
            let start: Function = prelude.call((host_fn,)).map_err(|_| internal("setup"))?;
            Ok::<_, Failure>(Persistent::save(&ctx, start))
        })?;
        Ok(Self { start, slot, sb })
    }

    fn execute(&self, work: Work) -> Result<Finished, Failure> {
        let Work {
            job,
            msg_tx,
            reply_rx,
        } = work;
        *self.slot.borrow_mut() = Some((msg_tx, reply_rx));
        let out = self.run_job(job);
        self.slot.borrow_mut().take();
        self.sb.set_deadline(None);
        out
    }

    fn run_job(&self, job: Job) -> Result<Finished, Failure> {
        let sb = &self.sb;
        sb.context.with(|ctx| {
            let internal = |what: &str| {
                let (_, m) = sandbox::describe(&ctx, ctx.catch());
                Failure::Internal(format!("script runtime ({what}): {m}"))
            };
            let start = self
                .start
                .clone()
                .restore(&ctx)
                .map_err(|e| Failure::Internal(format!("script runtime: {e}")))?;
            let setup = to_js(&ctx, &job.setup)?;
            let runtime: Object = start.call((setup,)).map_err(|_| internal("setup"))?;
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
                return Err(failure(sb, &ctx));
            }
            sb.set_deadline(None);
            let finish: Function = get(&runtime, "finish")?;
            let text: String = finish.call(()).map_err(|_| failure(sb, &ctx))?;
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
}
