//! `--fill`: properties items lack, filled from another property or a JSON value on the way
//! to the destination; and the path helpers the copy shares.

use super::super::strip_item;
use serde_json::Value;

#[derive(Debug, Clone)]
pub enum Fill {
    Path(Vec<String>, Vec<String>),
    Value(Vec<String>, Value),
}

pub fn segments(p: &str) -> Vec<String> {
    p.split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

pub fn parse_fill(s: &str) -> Result<Fill, String> {
    let (path, value) = s
        .split_once('=')
        .ok_or_else(|| format!("--fill '{s}' must be /PATH=/OTHER or /PATH=JSON"))?;
    let target = segments(path);
    if target.is_empty() {
        return Err(format!("--fill '{s}' names no property"));
    }
    if value.starts_with('/') {
        Ok(Fill::Path(target, segments(value)))
    } else {
        let v = serde_json::from_str(value)
            .map_err(|e| format!("--fill '{s}': the value is not JSON ({e})"))?;
        Ok(Fill::Value(target, v))
    }
}

pub fn get<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

pub fn set(v: &mut Value, path: &[String], value: Value) {
    let mut cur = v;
    for (i, k) in path.iter().enumerate() {
        let Some(m) = cur.as_object_mut() else { return };
        if i + 1 == path.len() {
            m.insert(k.clone(), value);
            return;
        }
        cur = m
            .entry(k.clone())
            .or_insert_with(|| Value::Object(Default::default()));
    }
}

/// An item as the destination gets it: without system properties, missing properties filled.
pub fn map(item: Value, fills: &[Fill]) -> Value {
    let mut item = strip_item(item);
    for f in fills {
        match f {
            Fill::Path(to, from) if get(&item, to).is_none() => {
                if let Some(v) = get(&item, from).cloned() {
                    set(&mut item, to, v);
                }
            }
            Fill::Value(to, v) if get(&item, to).is_none() => set(&mut item, to, v.clone()),
            _ => {}
        }
    }
    item
}
