//! Cosmos value semantics over JSON: `undefined` is distinct from `null`, comparisons across
//! types are undefined, ORDER BY orders across types, and integers and floats are one number
//! type.

use serde_json::{Map, Value};
use std::cmp::Ordering;

/// The result of evaluating an expression: undefined, or a JSON value borrowed from the
/// document (no copy for the common `c.a.b` case) or computed.
#[derive(Debug, Clone)]
pub enum Val<'a> {
    Undef,
    Ref(&'a Value),
    Own(Value),
}

impl<'a> Val<'a> {
    pub fn get(&self) -> Option<&Value> {
        match self {
            Val::Undef => None,
            Val::Ref(v) => Some(v),
            Val::Own(v) => Some(v),
        }
    }

    pub fn into_owned(self) -> Option<Value> {
        match self {
            Val::Undef => None,
            Val::Ref(v) => Some(v.clone()),
            Val::Own(v) => Some(v),
        }
    }

    pub fn is_undefined(&self) -> bool {
        matches!(self, Val::Undef)
    }

    pub fn from_opt(v: Option<Value>) -> Self {
        match v {
            Some(v) => Val::Own(v),
            None => Val::Undef,
        }
    }

    /// `v.name`: undefined unless `v` is an object with that property.
    pub fn member(self, name: &str) -> Val<'a> {
        match self {
            Val::Ref(Value::Object(m)) => m.get(name).map(Val::Ref).unwrap_or(Val::Undef),
            Val::Own(Value::Object(mut m)) => m.remove(name).map(Val::Own).unwrap_or(Val::Undef),
            _ => Val::Undef,
        }
    }

    /// `v[i]`: array element by number, or object property by string.
    pub fn index(self, idx: &Value) -> Val<'a> {
        match idx {
            Value::String(s) => self.member(s),
            Value::Number(n) => {
                let Some(f) = n.as_f64() else {
                    return Val::Undef;
                };
                if f < 0.0 || f.fract() != 0.0 {
                    return Val::Undef;
                }
                let i = f as usize;
                match self {
                    Val::Ref(Value::Array(a)) => a.get(i).map(Val::Ref).unwrap_or(Val::Undef),
                    Val::Own(Value::Array(mut a)) if i < a.len() => Val::Own(a.swap_remove(i)),
                    _ => Val::Undef,
                }
            }
            _ => Val::Undef,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        self.get().and_then(Value::as_bool)
    }

    pub fn as_f64(&self) -> Option<f64> {
        self.get().and_then(as_number)
    }

    pub fn as_str(&self) -> Option<&str> {
        self.get().and_then(Value::as_str)
    }
}

pub fn as_number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

/// Rank of a type in the cross-type order: undefined < null < booleans < numbers < strings <
/// arrays < objects.
pub fn type_rank(v: Option<&Value>) -> u8 {
    match v {
        None => 0,
        Some(Value::Null) => 1,
        Some(Value::Bool(_)) => 2,
        Some(Value::Number(_)) => 3,
        Some(Value::String(_)) => 4,
        Some(Value::Array(_)) => 5,
        Some(Value::Object(_)) => 6,
    }
}

/// The total order used by ORDER BY, MIN/MAX and group ordering.
pub fn order_cmp(a: Option<&Value>, b: Option<&Value>) -> Ordering {
    let (ra, rb) = (type_rank(a), type_rank(b));
    if ra != rb {
        return ra.cmp(&rb);
    }
    match (a, b) {
        (Some(Value::Bool(x)), Some(Value::Bool(y))) => x.cmp(y),
        (Some(Value::Number(x)), Some(Value::Number(y))) => {
            let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
            x.partial_cmp(&y).unwrap_or(Ordering::Equal)
        }
        (Some(Value::String(x)), Some(Value::String(y))) => x.cmp(y),
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            for (p, q) in x.iter().zip(y) {
                let o = order_cmp(Some(p), Some(q));
                if o != Ordering::Equal {
                    return o;
                }
            }
            x.len().cmp(&y.len())
        }
        (Some(Value::Object(_)), Some(Value::Object(_))) => {
            canonical(a.unwrap_or(&Value::Null)).cmp(&canonical(b.unwrap_or(&Value::Null)))
        }
        _ => Ordering::Equal,
    }
}

/// Comparison for `< > <= >=`: defined only between two numbers, two strings, two booleans or
/// two nulls; anything else is undefined.
pub fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(p), Some(q)) => Some(p.cmp(&q)),
            _ => x.as_f64()?.partial_cmp(&y.as_f64()?),
        },
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (Value::Null, Value::Null) => Some(Ordering::Equal),
        _ => None,
    }
}

/// Equality for `=`: deep for arrays and objects, numbers compared as doubles (two integers
/// exactly); `None` when the types differ (which makes the comparison undefined).
pub fn equals(a: &Value, b: &Value) -> Option<bool> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(p), Some(q)) => Some(p == q),
            _ => Some(x.as_f64() == y.as_f64()),
        },
        (Value::String(x), Value::String(y)) => Some(x == y),
        (Value::Bool(x), Value::Bool(y)) => Some(x == y),
        (Value::Null, Value::Null) => Some(true),
        (Value::Array(x), Value::Array(y)) => {
            Some(x.len() == y.len() && x.iter().zip(y).all(|(p, q)| equals(p, q) == Some(true)))
        }
        (Value::Object(x), Value::Object(y)) => Some(
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| equals(v, w) == Some(true))),
        ),
        _ => None,
    }
}

/// Deep equality that treats type mismatches as unequal.
pub fn json_equal(a: &Value, b: &Value) -> bool {
    equals(a, b) == Some(true)
}

/// A canonical text for a value (object keys sorted, numbers normalized), used as the identity
/// of DISTINCT values and GROUP BY keys.
pub fn canonical(v: &Value) -> String {
    let mut s = String::new();
    write_canonical(&mut s, v);
    s
}

/// Canonical key of a possibly-undefined value.
pub fn canonical_opt(v: Option<&Value>) -> String {
    match v {
        None => "~undefined".to_string(),
        Some(v) => canonical(v),
    }
}

fn write_canonical(s: &mut String, v: &Value) {
    match v {
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or(0.0);
            s.push_str(&crate::pk::number_to_json(f).to_string());
        }
        Value::Array(a) => {
            s.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                write_canonical(s, x);
            }
            s.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            s.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                s.push_str(&serde_json::to_string(k).unwrap_or_default());
                s.push(':');
                write_canonical(s, &m[k.as_str()]);
            }
            s.push('}');
        }
        other => s.push_str(&other.to_string()),
    }
}

/// A JSON number from a double (integers stay integers); non-finite results are undefined.
pub fn number(f: f64) -> Option<Value> {
    if f.is_finite() {
        Some(crate::pk::number_to_json(f))
    } else {
        None
    }
}

/// JSON cannot hold NaN or the infinities, yet Cosmos SQL has `NaN` and `Infinity` literals.
/// They travel as this marker object, which only the functions that understand non-finite
/// numbers (ToString, IS_NUMBER, unary minus) look into.
const NONFINITE: &str = "$strataNonFinite";

pub fn nonfinite(f: f64) -> Value {
    let tag = if f.is_nan() {
        "NaN"
    } else if f > 0.0 {
        "Infinity"
    } else {
        "-Infinity"
    };
    let mut m = Map::new();
    m.insert(NONFINITE.into(), Value::String(tag.into()));
    Value::Object(m)
}

pub fn as_nonfinite(v: &Value) -> Option<f64> {
    match v {
        Value::Object(m) if m.len() == 1 => match m.get(NONFINITE)?.as_str()? {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
}

pub fn object(m: Map<String, Value>) -> Value {
    Value::Object(m)
}

/// Feeds a JSON value into the hash by its structure: numbers by their bits, not their text
/// (a vector query's parameter is hundreds of numbers, and formatting each one cost more than
/// the rest of a prepared-query lookup). Values equal as parameters hash equal; a cache that
/// keys on this still compares them on a hit. The structure is written out first and hashed
/// in one update: two streaming updates per number were 2% of a vector query.
pub fn hash_into(h: &mut xxhash_rust::xxh3::Xxh3, v: &Value) {
    let mut bytes = Vec::with_capacity(256);
    encode(&mut bytes, v);
    h.update(&bytes);
}

fn encode(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.push(b'n'),
        Value::Bool(b) => out.push(if *b { b't' } else { b'f' }),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => {
                out.push(b'u');
                out.extend_from_slice(&u.to_le_bytes());
            }
            (None, Some(i), _) => {
                out.push(b'i');
                out.extend_from_slice(&i.to_le_bytes());
            }
            (None, None, f) => {
                out.push(b'd');
                out.extend_from_slice(&f.unwrap_or(f64::NAN).to_bits().to_le_bytes());
            }
        },
        Value::String(t) => {
            out.push(b's');
            out.extend_from_slice(&(t.len() as u64).to_le_bytes());
            out.extend_from_slice(t.as_bytes());
        }
        Value::Array(a) => {
            out.push(b'[');
            out.extend_from_slice(&(a.len() as u64).to_le_bytes());
            out.reserve(a.len() * 9);
            for x in a {
                encode(out, x);
            }
        }
        Value::Object(o) => {
            out.push(b'{');
            out.extend_from_slice(&(o.len() as u64).to_le_bytes());
            for (k, x) in o {
                out.extend_from_slice(&(k.len() as u64).to_le_bytes());
                out.extend_from_slice(k.as_bytes());
                encode(out, x);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cross_type_order() {
        let vals = [
            None,
            Some(json!(null)),
            Some(json!(false)),
            Some(json!(true)),
            Some(json!(-1)),
            Some(json!(2.5)),
            Some(json!("a")),
            Some(json!("b")),
            Some(json!([1])),
            Some(json!({"a": 1})),
        ];
        for w in vals.windows(2) {
            assert_eq!(
                order_cmp(w[0].as_ref(), w[1].as_ref()),
                Ordering::Less,
                "{w:?}"
            );
        }
    }

    #[test]
    fn comparisons_across_types_are_undefined() {
        assert_eq!(compare(&json!(1), &json!("1")), None);
        assert_eq!(equals(&json!(1), &json!(1.0)), Some(true));
        assert_eq!(
            equals(&json!({"a": [1, 2]}), &json!({"a": [1, 2.0]})),
            Some(true)
        );
        assert_eq!(equals(&json!(null), &json!(false)), None);
        assert_eq!(canonical(&json!({"b": 1, "a": 2.0})), r#"{"a":2,"b":1}"#);
    }
}
