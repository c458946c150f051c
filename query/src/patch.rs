//! Partial document updates (`PATCH`): `add`, `set`, `replace`, `remove`, `incr`, `move`, with
//! JSON-pointer paths into nested objects and arrays. Pure JSON manipulation; the server
//! applies the result atomically.

use serde_json::{Map, Value};

/// At most this many operations per request, as in Cosmos.
pub const MAX_OPERATIONS: usize = 10;

#[derive(Debug, Clone, PartialEq)]
pub enum PatchOp {
    Add { path: String, value: Value },
    Set { path: String, value: Value },
    Replace { path: String, value: Value },
    Remove { path: String },
    Incr { path: String, value: Value },
    Move { from: String, path: String },
}

impl PatchOp {
    pub fn path(&self) -> &str {
        match self {
            PatchOp::Add { path, .. }
            | PatchOp::Set { path, .. }
            | PatchOp::Replace { path, .. }
            | PatchOp::Remove { path }
            | PatchOp::Incr { path, .. }
            | PatchOp::Move { path, .. } => path,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            PatchOp::Add { .. } => "add",
            PatchOp::Set { .. } => "set",
            PatchOp::Replace { .. } => "replace",
            PatchOp::Remove { .. } => "remove",
            PatchOp::Incr { .. } => "incr",
            PatchOp::Move { .. } => "move",
        }
    }
}

/// A parsed patch request: operations and an optional condition (`FROM c WHERE ...`).
#[derive(Debug, Clone, PartialEq)]
pub struct Patch {
    pub operations: Vec<PatchOp>,
    pub condition: Option<String>,
}

/// Parses both body shapes: `{"operations": [...], "condition": "..."}` (Python) and a bare
/// array of operations (JS).
pub fn parse(body: &Value) -> Result<Patch, String> {
    let (ops, condition) = match body {
        Value::Array(a) => (a, None),
        Value::Object(m) => {
            let ops = m
                .get("operations")
                .and_then(Value::as_array)
                .ok_or("The patch body must have an 'operations' array.")?;
            let cond =
                match m.get("condition") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(_) => return Err(
                        "The patch 'condition' must be a string such as \"FROM c WHERE c.n > 0\"."
                            .into(),
                    ),
                };
            (ops, cond)
        }
        _ => {
            return Err(
                "The patch body must be an array of operations or {\"operations\": [...]}.".into(),
            )
        }
    };
    if ops.is_empty() {
        return Err("The patch has no operations.".into());
    }
    if ops.len() > MAX_OPERATIONS {
        return Err(format!(
            "The patch has {} operations; at most {MAX_OPERATIONS} are allowed per request.",
            ops.len()
        ));
    }
    let mut out = Vec::with_capacity(ops.len());
    for (i, op) in ops.iter().enumerate() {
        let name = op
            .get("op")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("Patch operation {i} has no 'op'."))?;
        let path = op
            .get("path")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("Patch operation {i} ({name}) has no string 'path'."))?
            .to_string();
        check_path(&path).map_err(|why| format!("Patch operation {i} ({name}): {why}"))?;
        let missing = format!("Patch operation {i} ({name} {path}) has no 'value'.");
        let value = || op.get("value").cloned().ok_or_else(|| missing.clone());
        out.push(match name.to_ascii_lowercase().as_str() {
            "add" => PatchOp::Add { path, value: value()? },
            "set" => PatchOp::Set { path, value: value()? },
            "replace" => PatchOp::Replace { path, value: value()? },
            "remove" => PatchOp::Remove { path },
            "incr" | "increment" => {
                let v = value()?;
                if !v.is_number() {
                    return Err(format!(
                        "Patch operation {i} (incr {path}): the value must be a number."
                    ));
                }
                PatchOp::Incr { path, value: v }
            }
            "move" => {
                let from = op
                    .get("from")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("Patch operation {i} (move {path}) has no 'from'."))?
                    .to_string();
                check_path(&from)
                    .map_err(|why| format!("Patch operation {i} (move from): {why}"))?;
                PatchOp::Move { from, path }
            }
            other => {
                return Err(format!(
                    "Patch operation {i}: '{other}' is not a patch operation (add, set, replace, remove, incr, move)."
                ))
            }
        });
    }
    Ok(Patch {
        operations: out,
        condition,
    })
}

/// A patch path names a property or element below the document's root: `/a/b/0`. The root
/// itself (`/`) and empty segments (`/a//b`, `/a/`) name nothing the service can patch; left
/// alone they would write a property called "" into the document.
fn check_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err(format!("the path '{path}' must start with '/'."));
    }
    if path[1..].split('/').any(str::is_empty) {
        return Err(format!(
            "the path '{path}' is not valid: it must name a property below the document root, with no empty segments (e.g. '/address/city')."
        ));
    }
    Ok(())
}

/// How deeply `v` nests (a scalar is 0, `[1]` is 1), without recursion.
pub fn depth(v: &Value) -> usize {
    let mut deepest = 0;
    let mut todo = vec![(v, 0usize)];
    while let Some((v, d)) = todo.pop() {
        deepest = deepest.max(d);
        match v {
            Value::Array(a) => todo.extend(a.iter().map(|x| (x, d + 1))),
            Value::Object(m) => todo.extend(m.values().map(|x| (x, d + 1))),
            _ => {}
        }
    }
    deepest
}

/// Deepest nesting of a stored document, counting the document itself: what serde_json reads
/// back (and so what a create or replace body may have). The service documents "Maximum level
/// of nesting for embedded objects / arrays: 128"; a patch may not go past what strata could
/// read again.
pub const MAX_DOCUMENT_DEPTH: usize = 127;

/// Splits a JSON pointer into unescaped tokens (`~1` is `/`, `~0` is `~`).
fn tokens(path: &str) -> Vec<String> {
    path[1..]
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// The container of the target and the last token.
fn parent<'a>(doc: &'a mut Value, toks: &[String]) -> Result<(&'a mut Value, String), String> {
    let (last, init) = toks.split_last().ok_or("The path is empty.")?;
    let mut cur = doc;
    for t in init {
        cur = match cur {
            Value::Object(m) => m
                .get_mut(t)
                .ok_or_else(|| format!("the path segment '{t}' does not exist"))?,
            Value::Array(a) => {
                let i: usize = t
                    .parse()
                    .map_err(|_| format!("'{t}' is not an array index"))?;
                let len = a.len();
                a.get_mut(i)
                    .ok_or_else(|| format!("index {i} is out of bounds (array of {len})"))?
            }
            _ => {
                return Err(format!(
                    "'{t}' is inside a value that is not an object or array"
                ))
            }
        };
    }
    Ok((cur, last.clone()))
}

fn get<'a>(doc: &'a Value, toks: &[String]) -> Option<&'a Value> {
    let mut cur = doc;
    for t in toks {
        cur = match cur {
            Value::Object(m) => m.get(t)?,
            Value::Array(a) => a.get(t.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn insert(
    doc: &mut Value,
    toks: &[String],
    value: Value,
    array_insert: bool,
) -> Result<(), String> {
    let (p, last) = parent(doc, toks)?;
    match p {
        Value::Object(m) => {
            m.insert(last, value);
            Ok(())
        }
        Value::Array(a) => {
            if last == "-" {
                a.push(value);
                return Ok(());
            }
            let i: usize = last
                .parse()
                .map_err(|_| format!("'{last}' is not an array index"))?;
            if array_insert {
                if i > a.len() {
                    return Err(format!("index {i} is out of bounds (array of {})", a.len()));
                }
                a.insert(i, value);
            } else {
                let len = a.len();
                let slot = a
                    .get_mut(i)
                    .ok_or_else(|| format!("index {i} is out of bounds (array of {len})"))?;
                *slot = value;
            }
            Ok(())
        }
        _ => Err("the parent of the path is not an object or array".into()),
    }
}

fn remove(doc: &mut Value, toks: &[String]) -> Result<Value, String> {
    let (p, last) = parent(doc, toks)?;
    match p {
        Value::Object(m) => m
            .shift_remove(&last)
            .ok_or_else(|| format!("the property '{last}' does not exist")),
        Value::Array(a) => {
            let i: usize = last
                .parse()
                .map_err(|_| format!("'{last}' is not an array index"))?;
            if i >= a.len() {
                return Err(format!("index {i} is out of bounds (array of {})", a.len()));
            }
            Ok(a.remove(i))
        }
        _ => Err("the parent of the path is not an object or array".into()),
    }
}

/// Applies the operations in order to `doc`. `protected` lists paths that may not be changed
/// (`/id` and the partition key paths). Errors name the failing operation.
pub fn apply(doc: &mut Value, ops: &[PatchOp], protected: &[String]) -> Result<(), String> {
    for (i, op) in ops.iter().enumerate() {
        let fail = |why: String| {
            format!(
                "Patch operation {i} ({} {}) failed: {why}.",
                op.name(),
                op.path()
            )
        };
        for p in std::iter::once(op.path()).chain(match op {
            PatchOp::Move { from, .. } => Some(from.as_str()),
            _ => None,
        }) {
            if protected.iter().any(|x| x == p) || p.starts_with("/_") {
                return Err(fail(format!(
                    "'{p}' cannot be patched (the id, the partition key and system properties are immutable)"
                )));
            }
        }
        let toks = tokens(op.path());
        match op {
            PatchOp::Add { value, .. } => insert(doc, &toks, value.clone(), true).map_err(fail)?,
            PatchOp::Set { value, .. } => insert(doc, &toks, value.clone(), false).map_err(fail)?,
            PatchOp::Replace { value, .. } => {
                if get(doc, &toks).is_none() {
                    return Err(fail("the path does not exist".into()));
                }
                insert(doc, &toks, value.clone(), false).map_err(fail)?
            }
            PatchOp::Remove { .. } => {
                remove(doc, &toks).map_err(fail)?;
            }
            PatchOp::Incr { value, .. } => {
                let by = value.as_f64().unwrap_or(0.0);
                let next = match get(doc, &toks) {
                    None => value.clone(),
                    Some(Value::Number(n)) => {
                        let sum = match (n.as_i64(), value.as_i64()) {
                            (Some(a), Some(b)) => match a.checked_add(b) {
                                Some(s) => Value::from(s),
                                None => crate::pk::number_to_json(a as f64 + b as f64),
                            },
                            _ => crate::pk::number_to_json(n.as_f64().unwrap_or(0.0) + by),
                        };
                        // JSON has no infinity: a sum past f64's range is an error, never null.
                        if sum.is_null() {
                            return Err(fail(format!(
                                "adding {value} to {n} overflows the range of a JSON number"
                            )));
                        }
                        sum
                    }
                    Some(_) => return Err(fail("the current value is not a number".into())),
                };
                insert(doc, &toks, next, false).map_err(fail)?
            }
            PatchOp::Move { from, path } => {
                if path.starts_with(&format!("{from}/")) {
                    return Err(fail("a value cannot be moved into itself".into()));
                }
                let v = remove(doc, &tokens(from)).map_err(fail)?;
                insert(doc, &toks, v, true).map_err(fail)?
            }
        }
    }
    if !doc.is_object() {
        return Err("The patched document is no longer an object.".into());
    }
    if depth(doc) > MAX_DOCUMENT_DEPTH {
        return Err(format!(
            "The patched document would nest more than {MAX_DOCUMENT_DEPTH} levels of objects and arrays (the service's limit)."
        ));
    }
    Ok(())
}

/// Convenience for an object document.
pub fn apply_to_object(
    doc: Map<String, Value>,
    ops: &[PatchOp],
    protected: &[String],
) -> Result<Map<String, Value>, String> {
    let mut v = Value::Object(doc);
    apply(&mut v, ops, protected)?;
    match v {
        Value::Object(m) => Ok(m),
        _ => Err("The patched document is no longer an object.".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nest(levels: usize) -> Value {
        (0..levels).fold(json!(1), |v, _| json!([v]))
    }

    #[test]
    fn patches_never_store_what_cannot_be_read_back() {
        let doc = json!({"id": "1", "n": 1.7e308, "i": 9_007_199_254_740_000i64});
        let err = run(
            doc.clone(),
            json!([{"op": "incr", "path": "/n", "value": 1.7e308}]),
        );
        assert!(err.unwrap_err().contains("overflows"));
        for bad in ["/", "//", "/a/", "/a//b"] {
            let e = parse(&json!([{"op": "set", "path": bad, "value": 1}])).unwrap_err();
            assert!(e.contains("not valid"), "{bad}: {e}");
        }
        // The deepest document allowed is one serde_json reads back; one level more is refused.
        let top = run(
            doc.clone(),
            json!([{"op": "set", "path": "/d", "value": nest(MAX_DOCUMENT_DEPTH - 1)}]),
        )
        .unwrap();
        assert_eq!(depth(&top), MAX_DOCUMENT_DEPTH);
        assert!(serde_json::from_str::<Value>(&top.to_string()).is_ok());
        let over = run(
            doc,
            json!([{"op": "set", "path": "/d", "value": nest(MAX_DOCUMENT_DEPTH)}]),
        );
        assert!(over.unwrap_err().contains("nest more than"));
    }

    fn run(doc: Value, ops: Value) -> Result<Value, String> {
        let p = parse(&ops)?;
        let mut d = doc;
        apply(
            &mut d,
            &p.operations,
            &["/id".to_string(), "/pk".to_string()],
        )?;
        Ok(d)
    }

    #[test]
    fn operations() {
        let d = json!({"id": "1", "pk": "a", "n": 1, "tags": ["x"], "o": {"a": 1}});
        let r = run(
            d.clone(),
            json!([
                {"op": "incr", "path": "/n", "value": 5},
                {"op": "add", "path": "/tags/-", "value": "y"},
                {"op": "add", "path": "/tags/0", "value": "w"},
                {"op": "set", "path": "/o/b", "value": 2},
                {"op": "replace", "path": "/o/a", "value": 9},
                {"op": "move", "from": "/o/b", "path": "/moved"},
                {"op": "remove", "path": "/tags/1"},
            ]),
        )
        .unwrap();
        assert_eq!(
            r,
            json!({"id": "1", "pk": "a", "n": 6, "tags": ["w", "y"], "o": {"a": 9}, "moved": 2})
        );
        let r = run(
            d.clone(),
            json!({"operations": [{"op": "incr", "path": "/new", "value": 1.5}]}),
        )
        .unwrap();
        assert_eq!(r["new"], json!(1.5));
    }

    #[test]
    fn errors_name_the_operation() {
        let d = json!({"id": "1", "pk": "a", "s": "x"});
        let e = run(d.clone(), json!([{"op": "set", "path": "/a", "value": 1}, {"op": "replace", "path": "/nope", "value": 1}])).unwrap_err();
        assert!(e.contains("operation 1") && e.contains("/nope"), "{e}");
        assert!(run(
            d.clone(),
            json!([{"op": "set", "path": "/id", "value": "2"}])
        )
        .is_err());
        assert!(run(d.clone(), json!([{"op": "remove", "path": "/pk"}])).is_err());
        assert!(run(d.clone(), json!([{"op": "incr", "path": "/s", "value": 1}])).is_err());
        assert!(run(d.clone(), json!([{"op": "remove", "path": "/missing"}])).is_err());
        assert!(run(d.clone(), json!([{"op": "explode", "path": "/s"}])).is_err());
        let many: Vec<Value> = (0..11)
            .map(|i| json!({"op": "set", "path": format!("/k{i}"), "value": i}))
            .collect();
        assert!(run(d, Value::Array(many)).is_err());
    }
}
