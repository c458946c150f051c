//! Array, object and conditional functions.

use super::*;
use std::cmp::Ordering;
use std::collections::HashSet;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrayFn {
    ArrayConcat,
    ArrayContains,
    ArrayContainsAny,
    ArrayContainsAll,
    ArrayLength,
    ArraySlice,
    SetIntersect,
    SetUnion,
    SetDifference,
    SetEqual,
    ArrayMax,
    ArrayMin,
    ArraySum,
    ArrayAvg,
    ArrayMedian,
    Choose,
    ObjectToArray,
    Iif,
    DocumentId,
}

pub(super) fn call<'a>(f: ArrayFn, args: Vec<Val<'a>>, _cx: &Ctx) -> R<Val<'a>> {
    let a = &args;
    let get = |i: usize| a.get(i).and_then(|v| v.get());
    Ok(match f {
        ArrayFn::ArrayConcat => {
            let mut out = Vec::new();
            let mut budget = SizeBudget::default();
            for v in a {
                match v.get() {
                    Some(arr @ Value::Array(x)) => {
                        budget.add(arr)?;
                        out.extend(x.iter().cloned());
                    }
                    _ => return Ok(Val::Undef),
                }
            }
            Val::Own(Value::Array(out))
        }
        ArrayFn::ArrayContains => {
            let (Some(Value::Array(arr)), Some(partial)) = (get(0), opt_bool(a, 2)) else {
                return Ok(Val::Undef);
            };
            let Some(x) = get(1) else {
                return Ok(b(false));
            };
            b(arr.iter().any(|e| contains_match(e, x, partial)))
        }
        ArrayFn::ArrayContainsAny | ArrayFn::ArrayContainsAll => contains_any_all(f, a)?,
        ArrayFn::ArrayLength => match get(0) {
            Some(Value::Array(x)) => n(x.len() as f64),
            _ => Val::Undef,
        },
        ArrayFn::ArraySlice => array_slice(a)?,
        ArrayFn::SetIntersect | ArrayFn::SetUnion | ArrayFn::SetDifference => set_op(f, a)?,
        ArrayFn::SetEqual => match (get(0), get(1)) {
            (Some(Value::Array(x)), Some(Value::Array(y))) => {
                let set = |v: &[Value]| v.iter().map(canonical).collect::<HashSet<String>>();
                b(set(x) == set(y))
            }
            _ => Val::Undef,
        },
        ArrayFn::ArrayMax | ArrayFn::ArrayMin => match get(0) {
            Some(Value::Array(x)) => Val::from_opt(extreme(x, f == ArrayFn::ArrayMax)),
            _ => Val::Undef,
        },
        ArrayFn::ArraySum | ArrayFn::ArrayAvg | ArrayFn::ArrayMedian => match get(0) {
            Some(Value::Array(x)) => Val::from_opt(numeric(f, x).and_then(number)),
            _ => Val::Undef,
        },
        ArrayFn::Choose => match int(&a[0]) {
            Some(i) if i >= 1 && (i as usize) < a.len() => {
                args.into_iter().nth(i as usize).unwrap_or(Val::Undef)
            }
            _ => Val::Undef,
        },
        ArrayFn::ObjectToArray => object_to_array(a)?,
        ArrayFn::Iif => {
            let cond = a[0].as_bool() == Some(true);
            let mut it = args.into_iter();
            it.next();
            let yes = it.next().unwrap_or(Val::Undef);
            let no = it.next().unwrap_or(Val::Undef);
            if cond {
                yes
            } else {
                no
            }
        }
        ArrayFn::DocumentId => match get(0) {
            Some(Value::Object(m)) => m
                .get("_rid")
                .and_then(Value::as_str)
                .and_then(document_id)
                .map(|id| n(id as f64))
                .unwrap_or(Val::Undef),
            _ => Val::Undef,
        },
    })
}

/// `ARRAY_CONTAINS_ANY` and `ARRAY_CONTAINS_ALL`: whether the array holds any (all) of the values.
fn contains_any_all<'a>(f: ArrayFn, a: &[Val<'a>]) -> R<Val<'a>> {
    let get = |i: usize| a.get(i).and_then(|v| v.get());
    let Some(Value::Array(arr)) = get(0) else {
        return Ok(Val::Undef);
    };
    let wanted: Vec<&Value> = a[1..].iter().filter_map(|v| v.get()).collect();
    let some_undefined = wanted.len() < a.len() - 1;
    let has = |w: &Value| arr.iter().any(|e| json_equal(e, w));
    // An undefined argument makes the answer undefined unless the defined ones decide it.
    Ok(if f == ArrayFn::ArrayContainsAny {
        if wanted.iter().any(|w| has(w)) {
            b(true)
        } else if some_undefined {
            Val::Undef
        } else {
            b(false)
        }
    } else if !wanted.iter().all(|w| has(w)) {
        b(false)
    } else if some_undefined {
        Val::Undef
    } else {
        b(true)
    })
}

/// `ARRAY_SLICE(array, start[, length])`, negative positions counting from the end.
fn array_slice<'a>(a: &[Val<'a>]) -> R<Val<'a>> {
    let get = |i: usize| a.get(i).and_then(|v| v.get());
    let (Some(Value::Array(arr)), Some(st)) = (get(0), int(&a[1])) else {
        return Ok(Val::Undef);
    };
    let len = arr.len() as i64;
    let st = if st < 0 {
        (len + st).max(0)
    } else {
        st.min(len)
    };
    let end = match a.get(2) {
        Some(v) => match int(v) {
            Some(k) if k < 0 => (len + k).max(st),
            Some(k) => (st + k).min(len),
            None => return Ok(Val::Undef),
        },
        None => len,
    };
    Ok(Val::Own(Value::Array(
        arr[st as usize..end.max(st) as usize].to_vec(),
    )))
}

/// `SetIntersect`, `SetUnion` and `SetDifference`: distinct values, in first appearance
/// order (of the second array for an intersection, as the service answers; of the first for
/// a difference: `SETDIFFERENCE([1, 2, 6, 7], [1, 2, 3])` is `[6, 7]`).
fn set_op<'a>(f: ArrayFn, a: &[Val<'a>]) -> R<Val<'a>> {
    let get = |i: usize| a.get(i).and_then(|v| v.get());
    let (Some(Value::Array(x)), Some(Value::Array(y))) = (get(0), get(1)) else {
        return Ok(Val::Undef);
    };
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    if f == ArrayFn::SetUnion {
        for v in x.iter().chain(y) {
            if seen.insert(canonical(v)) {
                out.push(v.clone());
            }
        }
    } else if f == ArrayFn::SetDifference {
        let ys: HashSet<String> = y.iter().map(canonical).collect();
        for v in x {
            let k = canonical(v);
            if !ys.contains(&k) && seen.insert(k) {
                out.push(v.clone());
            }
        }
    } else {
        // Cosmos returns the intersection in the order of the second array.
        let xs: HashSet<String> = x.iter().map(canonical).collect();
        for v in y {
            let k = canonical(v);
            if xs.contains(&k) && seen.insert(k) {
                out.push(v.clone());
            }
        }
    }
    Ok(Val::Own(Value::Array(out)))
}

/// `ObjectToArray(object[, keyName[, valueName]])`: one `{k, v}` object per property.
fn object_to_array<'a>(a: &[Val<'a>]) -> R<Val<'a>> {
    let get = |i: usize| a.get(i).and_then(|v| v.get());
    let Some(Value::Object(m)) = get(0) else {
        return Ok(Val::Undef);
    };
    let kname = match a.get(1) {
        Some(v) => match v.as_str() {
            Some(k) => k.to_string(),
            None => return Ok(Val::Undef),
        },
        None => "k".into(),
    };
    let vname = match a.get(2) {
        Some(v) => match v.as_str() {
            Some(k) => k.to_string(),
            None => return Ok(Val::Undef),
        },
        None => "v".into(),
    };
    Ok(Val::Own(Value::Array(
        m.iter()
            .map(|(k, v)| {
                let mut o = Map::new();
                o.insert(kname.clone(), Value::String(k.clone()));
                o.insert(vname.clone(), v.clone());
                Value::Object(o)
            })
            .collect(),
    )))
}

/// `ARRAY_MAX` (`max`) or `ARRAY_MIN` of an array's strings, numbers, booleans and nulls,
/// ranked as the service documents: any string above any number, above any boolean, above
/// null; strings by code point, numbers by value, `false` below `true`. An object or array
/// element, or no element, has no answer (undefined).
fn extreme(x: &[Value], max: bool) -> Option<Value> {
    let rank = |v: &Value| match v {
        Value::Null => Some(0),
        Value::Bool(_) => Some(1),
        Value::Number(_) => Some(2),
        Value::String(_) => Some(3),
        _ => None,
    };
    let cmp = |p: &Value, q: &Value| -> Ordering {
        match (p, q) {
            (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
            (Value::Number(a), Value::Number(b)) => {
                let (a, b) = (a.as_f64().unwrap_or(0.0), b.as_f64().unwrap_or(0.0));
                a.total_cmp(&b)
            }
            (Value::String(a), Value::String(b)) => a.cmp(b),
            _ => rank(p).cmp(&rank(q)),
        }
    };
    let mut best: Option<&Value> = None;
    for v in x {
        rank(v)?;
        let wanted = if max {
            Ordering::Greater
        } else {
            Ordering::Less
        };
        if best.is_none_or(|cur| cmp(v, cur) == wanted) {
            best = Some(v);
        }
    }
    best.cloned()
}

/// `ARRAY_SUM`, `ARRAY_AVG` or `ARRAY_MEDIAN` of an array of numbers: any other element makes
/// it undefined (the array literal has already left undefined elements out, as the service
/// ignores them). Sums run left to right in `f64`, as the documented results come out
/// (`ARRAY_AVG([1, -2.7, 3, -4])` is -0.675); a median of an even count is the mean of the
/// middle two (`-0.8500000000000001` for those numbers). The sum of no numbers is 0; their
/// average and median are undefined.
fn numeric(f: ArrayFn, x: &[Value]) -> Option<f64> {
    let nums: Vec<f64> = x.iter().map(Value::as_f64).collect::<Option<_>>()?;
    let sum = || nums.iter().fold(0.0, |acc, v| acc + v);
    match f {
        ArrayFn::ArraySum => Some(sum()),
        _ if nums.is_empty() => None,
        ArrayFn::ArrayAvg => Some(sum() / nums.len() as f64),
        _ => {
            let mut sorted = nums.clone();
            sorted.sort_by(f64::total_cmp);
            let mid = sorted.len() / 2;
            Some(if sorted.len() % 2 == 1 {
                sorted[mid]
            } else {
                (sorted[mid - 1] + sorted[mid]) / 2.0
            })
        }
    }
}
