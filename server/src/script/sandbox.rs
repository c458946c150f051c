//! The JavaScript sandbox: a QuickJS runtime with a memory limit, a stack limit and a
//! deadline, and nothing else — no modules, files, network, processes or timers. Values cross
//! the boundary as JSON text.

use super::Failure;
use rquickjs::{Context, Ctx, Function, Object, Runtime, Value as JsValue};
use serde_json::Value;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

/// Most heap one script runtime may allocate.
pub const MEMORY_LIMIT: usize = 64 * 1024 * 1024;
/// Most native stack a script may use (deep recursion fails with a RangeError well before
/// the thread's own stack ends).
const STACK_LIMIT: usize = 1024 * 1024;

/// One runtime and context. The deadline is shared with the interrupt handler, which stops
/// the script (uncatchably) once it passes.
pub struct Sandbox {
    // Field order matters: the context must go before its runtime.
    pub context: Context,
    runtime: Runtime,
    deadline: Rc<Cell<Option<Instant>>>,
}

impl Sandbox {
    pub fn new() -> Result<Self, Failure> {
        let internal = |e: rquickjs::Error| Failure::Internal(format!("script runtime: {e}"));
        let runtime = Runtime::new().map_err(internal)?;
        runtime.set_memory_limit(MEMORY_LIMIT);
        runtime.set_max_stack_size(STACK_LIMIT);
        let deadline: Rc<Cell<Option<Instant>>> = Rc::new(Cell::new(None));
        let d = Rc::clone(&deadline);
        runtime.set_interrupt_handler(Some(Box::new(move || {
            d.get().is_some_and(|t| Instant::now() >= t)
        })));
        let context = Context::full(&runtime).map_err(internal)?;
        Ok(Self {
            context,
            runtime,
            deadline,
        })
    }

    /// Scripts run until `deadline` (`None`: no limit, for the host's own code).
    pub fn set_deadline(&self, deadline: Option<Instant>) {
        self.deadline.set(deadline);
    }

    pub fn timed_out(&self) -> bool {
        self.deadline.get().is_some_and(|t| Instant::now() >= t)
    }

    /// Heap in use, for the memory test and logs.
    pub fn memory_used(&self) -> i64 {
        self.runtime.memory_usage().memory_used_size
    }
}

/// Compiles a stored script's body into its entry function. A body is a function
/// expression (`function (a, b) { ... }`), or declarations of which the first named function
/// is the entry point, as the service accepts.
pub fn entry<'js>(ctx: &Ctx<'js>, body: &str) -> Result<Function<'js>, Failure> {
    let as_expression = ctx.eval::<JsValue, _>(format!("(\n{body}\n)"));
    match as_expression {
        Ok(v) if v.is_function() => {
            return v
                .into_function()
                .ok_or_else(|| Failure::Compile("not a function".into()))
        }
        Ok(_) => {}
        Err(_) => {
            let first = describe(ctx, ctx.catch()).1;
            let Some(name) = first_function_name(body) else {
                return Err(Failure::Compile(first));
            };
            match ctx.eval::<JsValue, _>(format!("{body}\n;{name}")) {
                Ok(v) if v.is_function() => {
                    if let Some(f) = v.into_function() {
                        return Ok(f);
                    }
                }
                Ok(_) => {}
                Err(_) => return Err(Failure::Compile(describe(ctx, ctx.catch()).1)),
            }
        }
    }
    Err(Failure::Compile(
        "the script's body must be a JavaScript function, for example: function (x) { ... }".into(),
    ))
}

/// The name of the first `function name(` declaration in a body.
fn first_function_name(body: &str) -> Option<&str> {
    let mut rest = body;
    while let Some(i) = rest.find("function") {
        let before_ok = rest[..i]
            .chars()
            .last()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '$'));
        let after = rest[i + 8..].trim_start();
        let name_len = after
            .char_indices()
            .find(|(_, c)| !(c.is_alphanumeric() || *c == '_' || *c == '$'))
            .map(|(n, _)| n)
            .unwrap_or(after.len());
        if before_ok && name_len > 0 && rest[i + 8..].starts_with(char::is_whitespace) {
            return Some(&after[..name_len]);
        }
        rest = &rest[i + 8..];
    }
    None
}

/// A thrown value as (the status it carries in `number`, if any, and its text as
/// `Name: message`, a string as itself, anything else as JSON).
pub fn describe<'js>(ctx: &Ctx<'js>, thrown: JsValue<'js>) -> (Option<u16>, String) {
    if let Some(s) = thrown.as_string() {
        return (None, s.to_string().unwrap_or_default());
    }
    if let Some(o) = thrown.as_object() {
        let number = o
            .get::<_, Option<f64>>("number")
            .ok()
            .flatten()
            .filter(|n| (400.0..600.0).contains(n) && n.fract() == 0.0)
            .map(|n| n as u16);
        let message = o.get::<_, Option<String>>("message").ok().flatten();
        if let Some(message) = message {
            let name = o
                .get::<_, Option<String>>("name")
                .ok()
                .flatten()
                .unwrap_or_else(|| "Error".into());
            return (number, format!("{name}: {message}"));
        }
        let text = ctx
            .json_stringify(thrown.clone())
            .ok()
            .flatten()
            .and_then(|s| s.to_string().ok())
            .unwrap_or_else(|| "[object]".into());
        return (number, text);
    }
    if thrown.is_undefined() {
        return (None, "undefined".into());
    }
    let text = ctx
        .json_stringify(thrown)
        .ok()
        .flatten()
        .and_then(|s| s.to_string().ok())
        .unwrap_or_default();
    (None, text)
}

/// A JSON value into the script's world.
pub fn to_js<'js>(ctx: &Ctx<'js>, v: &Value) -> Result<JsValue<'js>, Failure> {
    ctx.json_parse(v.to_string())
        .map_err(|e| Failure::Internal(format!("passing a value to the script: {e}")))
}

/// A script value back as JSON (`None`: undefined, or a value JSON cannot hold).
pub fn from_js<'js>(ctx: &Ctx<'js>, v: JsValue<'js>) -> Result<Option<Value>, Failure> {
    if v.is_undefined() || v.is_function() {
        return Ok(None);
    }
    let text = match ctx.json_stringify(v) {
        Ok(Some(s)) => s
            .to_string()
            .map_err(|e| Failure::Internal(format!("reading a script value: {e}")))?,
        Ok(None) => return Ok(None),
        Err(_) => {
            let (_, msg) = describe(ctx, ctx.catch());
            return Err(Failure::Thrown {
                status: None,
                message: msg,
            });
        }
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| Failure::Internal(format!("reading a script value: {e}")))
}

/// The failure a script's exception stands for: past the deadline it was stopped; out of
/// memory; else what it threw.
pub fn failure<'js>(sb: &Sandbox, ctx: &Ctx<'js>) -> Failure {
    if sb.timed_out() {
        sb.set_deadline(None);
        let _ = ctx.catch();
        return Failure::Timeout;
    }
    let (status, message) = describe(ctx, ctx.catch());
    if message.contains("out of memory") {
        return Failure::Memory;
    }
    Failure::Thrown { status, message }
}

/// Reads a property of an object, for the host's glue code.
pub fn get<'js, T: rquickjs::FromJs<'js>>(o: &Object<'js>, key: &str) -> Result<T, Failure> {
    o.get(key)
        .map_err(|e| Failure::Internal(format!("script runtime: {key}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_named_function() {
        assert_eq!(
            first_function_name("function bulk(q) { function inner() {} }"),
            Some("bulk")
        );
        assert_eq!(
            first_function_name("var x = 1; function  a_b$() {}"),
            Some("a_b$")
        );
        assert_eq!(first_function_name("myfunction() {}"), None);
        assert_eq!(first_function_name("function () {}"), None);
    }
}
