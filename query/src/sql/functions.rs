//! Cosmos SQL system functions.
//!
//! Arguments of the wrong type make a function return undefined (as in Cosmos), never an
//! error; only unknown names, wrong argument counts and invalid regular expressions are
//! errors.

use super::ctx::Ctx;
use super::datetime;
use super::error::QueryError;
use super::limits::SizeBudget;
use super::spatial;
use super::value::{self, canonical, json_equal, number, Val};
use serde_json::{Map, Value};

type R<T> = Result<T, QueryError>;

/// (name, min args, max args) of every system function.
const FUNCTIONS: &[(&str, usize, usize)] = &[
    // type checks
    ("IS_ARRAY", 1, 1),
    ("IS_BOOL", 1, 1),
    ("IS_DEFINED", 1, 1),
    ("IS_FINITE_NUMBER", 1, 1),
    ("IS_INTEGER", 1, 1),
    ("IS_NULL", 1, 1),
    ("IS_NUMBER", 1, 1),
    ("IS_OBJECT", 1, 1),
    ("IS_PRIMITIVE", 1, 1),
    ("IS_STRING", 1, 1),
    // strings
    ("CONCAT", 2, usize::MAX),
    ("CONTAINS", 2, 3),
    ("ENDSWITH", 2, 3),
    ("STARTSWITH", 2, 3),
    ("INDEX_OF", 2, 3),
    ("LEFT", 2, 2),
    ("RIGHT", 2, 2),
    ("LENGTH", 1, 1),
    ("LOWER", 1, 1),
    ("UPPER", 1, 1),
    ("LTRIM", 1, 2),
    ("RTRIM", 1, 2),
    ("TRIM", 1, 2),
    ("REPLACE", 3, 3),
    ("REPLICATE", 2, 2),
    ("REVERSE", 1, 1),
    ("SUBSTRING", 3, 3),
    ("STRINGEQUALS", 2, 3),
    ("TOSTRING", 1, 1),
    ("STRINGTOARRAY", 1, 1),
    ("STRINGTOBOOLEAN", 1, 1),
    ("STRINGTONULL", 1, 1),
    ("STRINGTONUMBER", 1, 1),
    ("STRINGTOOBJECT", 1, 1),
    ("REGEXMATCH", 2, 3),
    ("STRINGJOIN", 2, 2),
    ("STRINGSPLIT", 2, 2),
    // math
    ("ABS", 1, 1),
    ("ACOS", 1, 1),
    ("ASIN", 1, 1),
    ("ATAN", 1, 1),
    ("ATN2", 2, 2),
    ("CEILING", 1, 1),
    ("COS", 1, 1),
    ("COT", 1, 1),
    ("DEGREES", 1, 1),
    ("EXP", 1, 1),
    ("FLOOR", 1, 1),
    ("LOG", 1, 2),
    ("LOG10", 1, 1),
    ("PI", 0, 0),
    ("POWER", 2, 2),
    ("RADIANS", 1, 1),
    ("RAND", 0, 0),
    ("ROUND", 1, 1),
    ("SIGN", 1, 1),
    ("SIN", 1, 1),
    ("SQRT", 1, 1),
    ("SQUARE", 1, 1),
    ("TAN", 1, 1),
    ("TRUNC", 1, 1),
    ("NUMBERBIN", 1, 2),
    ("INTADD", 2, 2),
    ("INTBITAND", 2, 2),
    ("INTBITLEFTSHIFT", 2, 2),
    ("INTBITNOT", 1, 1),
    ("INTBITOR", 2, 2),
    ("INTBITRIGHTSHIFT", 2, 2),
    ("INTBITXOR", 2, 2),
    ("INTDIV", 2, 2),
    ("INTMOD", 2, 2),
    ("INTMUL", 2, 2),
    ("INTSUB", 2, 2),
    // arrays and objects
    ("ARRAY_CONCAT", 2, usize::MAX),
    ("ARRAY_CONTAINS", 2, 3),
    ("ARRAY_CONTAINS_ANY", 2, usize::MAX),
    ("ARRAY_CONTAINS_ALL", 2, usize::MAX),
    ("ARRAY_LENGTH", 1, 1),
    ("ARRAY_SLICE", 2, 3),
    ("SETINTERSECT", 2, 2),
    ("SETUNION", 2, 2),
    ("CHOOSE", 2, usize::MAX),
    ("OBJECTTOARRAY", 1, 3),
    ("IIF", 3, 3),
    ("DOCUMENTID", 1, 1),
    // date and time
    ("GETCURRENTDATETIME", 0, 0),
    ("GETCURRENTDATETIMESTATIC", 0, 0),
    ("GETCURRENTTIMESTAMP", 0, 0),
    ("GETCURRENTTIMESTAMPSTATIC", 0, 0),
    ("GETCURRENTTICKS", 0, 0),
    ("GETCURRENTTICKSSTATIC", 0, 0),
    ("DATETIMEADD", 3, 3),
    ("DATETIMEDIFF", 3, 3),
    ("DATETIMEFROMPARTS", 3, 7),
    ("DATETIMEPART", 2, 2),
    ("DATETIMEBIN", 2, 4),
    ("DATETIMETOTICKS", 1, 1),
    ("DATETIMETOTIMESTAMP", 1, 1),
    ("TICKSTODATETIME", 1, 1),
    ("TIMESTAMPTODATETIME", 1, 1),
    // spatial
    ("ST_DISTANCE", 2, 2),
    ("ST_WITHIN", 2, 2),
    ("ST_INTERSECTS", 2, 2),
    ("ST_ISVALID", 1, 1),
    ("ST_ISVALIDDETAILED", 1, 1),
    ("ST_AREA", 1, 1),
    // search
    ("FULLTEXTCONTAINS", 2, 2),
    ("FULLTEXTCONTAINSALL", 2, usize::MAX),
    ("FULLTEXTCONTAINSANY", 2, usize::MAX),
    ("FULLTEXTSCORE", 2, usize::MAX),
    ("VECTORDISTANCE", 2, 4),
];

/// Validates a call at bind time: known name, valid argument count.
pub fn check(name: &str, nargs: usize) -> R<()> {
    match FUNCTIONS.iter().find(|(n, _, _)| *n == name) {
        None => Err(QueryError::semantic(format!(
            "'{name}' is not a recognized built-in function name."
        ))),
        Some((_, lo, hi)) if nargs < *lo || nargs > *hi => {
            let expected = if lo == hi {
                format!("{lo}")
            } else if *hi == usize::MAX {
                format!("at least {lo}")
            } else {
                format!("{lo} to {hi}")
            };
            Err(QueryError::semantic(format!(
                "The function '{name}' takes {expected} argument(s), not {nargs}."
            )))
        }
        Some(_) => Ok(()),
    }
}

fn b<'a>(x: bool) -> Val<'a> {
    Val::Own(Value::Bool(x))
}

fn n<'a>(f: f64) -> Val<'a> {
    Val::from_opt(number(f))
}

fn s<'a>(x: String) -> Val<'a> {
    Val::Own(Value::String(x))
}

fn math1<'a>(args: &[Val<'a>], f: impl Fn(f64) -> f64) -> Val<'a> {
    args[0].as_f64().map(|x| n(f(x))).unwrap_or(Val::Undef)
}

/// An integer argument (for the Int* functions and counts).
fn int(v: &Val<'_>) -> Option<i64> {
    let f = v.as_f64()?;
    (f.fract() == 0.0 && f.abs() <= 9.007_199_254_740_992e15).then_some(f as i64)
}

fn int2<'a>(args: &[Val<'a>], f: impl Fn(i64, i64) -> Option<i64>) -> Val<'a> {
    match (int(&args[0]), int(&args[1])) {
        (Some(a), Some(b)) => f(a, b).map(|r| n(r as f64)).unwrap_or(Val::Undef),
        _ => Val::Undef,
    }
}

fn opt_bool(args: &[Val<'_>], i: usize) -> Option<bool> {
    match args.get(i) {
        None => Some(false),
        Some(v) => v.as_bool(),
    }
}

fn chars_of(x: &str) -> Vec<char> {
    x.chars().collect()
}

/// Rounds half away from zero, as Cosmos's ROUND does.
fn round_half_away(x: f64) -> f64 {
    x.round()
}

pub fn call<'a>(name: &str, args: Vec<Val<'a>>, cx: &Ctx) -> R<Val<'a>> {
    let a = &args;
    let get = |i: usize| a.get(i).and_then(|v| v.get());
    Ok(match name {
        "IS_ARRAY" => b(matches!(get(0), Some(Value::Array(_)))),
        "IS_BOOL" => b(matches!(get(0), Some(Value::Bool(_)))),
        "IS_DEFINED" => b(get(0).is_some()),
        "IS_FINITE_NUMBER" => b(a[0].as_f64().is_some_and(f64::is_finite)),
        "IS_INTEGER" => b(
            matches!(get(0), Some(Value::Number(x)) if x.is_i64() || x.is_u64() || x.as_f64().is_some_and(|f| f.fract() == 0.0 && f.abs() < 9.3e18)),
        ),
        "IS_NULL" => b(matches!(get(0), Some(Value::Null))),
        "IS_NUMBER" => b(matches!(get(0), Some(Value::Number(_)))
            || get(0).and_then(value::as_nonfinite).is_some()),
        "IS_OBJECT" => b(matches!(get(0), Some(Value::Object(_)))),
        "IS_PRIMITIVE" => b(matches!(
            get(0),
            Some(Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_))
        )),
        "IS_STRING" => b(matches!(get(0), Some(Value::String(_)))),

        "CONCAT" => {
            let mut parts = Vec::with_capacity(a.len());
            let mut budget = SizeBudget::default();
            for v in a {
                match v.as_str() {
                    Some(x) => {
                        budget.add_bytes(x.len())?;
                        parts.push(x);
                    }
                    None => return Ok(Val::Undef),
                }
            }
            s(parts.concat())
        }
        "CONTAINS" | "STARTSWITH" | "ENDSWITH" => {
            let (Some(x), Some(y), Some(ic)) = (a[0].as_str(), a[1].as_str(), opt_bool(a, 2))
            else {
                return Ok(Val::Undef);
            };
            let (x, y) = if ic {
                (x.to_lowercase(), y.to_lowercase())
            } else {
                (x.to_string(), y.to_string())
            };
            b(match name {
                "CONTAINS" => x.contains(&y),
                "STARTSWITH" => x.starts_with(&y),
                _ => x.ends_with(&y),
            })
        }
        "STRINGEQUALS" => match (a[0].as_str(), a[1].as_str(), opt_bool(a, 2)) {
            (Some(x), Some(y), Some(ic)) => b(if ic {
                x.to_lowercase() == y.to_lowercase()
            } else {
                x == y
            }),
            _ => Val::Undef,
        },
        "INDEX_OF" => {
            let (Some(x), Some(y)) = (a[0].as_str(), a[1].as_str()) else {
                return Ok(Val::Undef);
            };
            let start = match a.get(2) {
                Some(v) => match int(v) {
                    Some(i) => i.max(0) as usize,
                    None => return Ok(Val::Undef),
                },
                None => 0,
            };
            let xc = chars_of(x);
            if start > xc.len() {
                return Ok(n(-1.0));
            }
            let hay: String = xc[start..].iter().collect();
            match hay.find(y) {
                Some(byte) => n((start + hay[..byte].chars().count()) as f64),
                None => n(-1.0),
            }
        }
        "LEFT" | "RIGHT" => {
            let (Some(x), Some(k)) = (a[0].as_str(), int(&a[1])) else {
                return Ok(Val::Undef);
            };
            let c = chars_of(x);
            let k = (k.max(0) as usize).min(c.len());
            s(if name == "LEFT" {
                c[..k].iter().collect()
            } else {
                c[c.len() - k..].iter().collect()
            })
        }
        "LENGTH" => a[0]
            .as_str()
            .map(|x| n(x.chars().count() as f64))
            .unwrap_or(Val::Undef),
        "LOWER" => a[0]
            .as_str()
            .map(|x| s(x.to_lowercase()))
            .unwrap_or(Val::Undef),
        "UPPER" => a[0]
            .as_str()
            .map(|x| s(x.to_uppercase()))
            .unwrap_or(Val::Undef),
        "LTRIM" | "RTRIM" | "TRIM" => {
            let Some(x) = a[0].as_str() else {
                return Ok(Val::Undef);
            };
            let set: Option<Vec<char>> = match a.get(1) {
                Some(v) => match v.as_str() {
                    Some(t) => Some(t.chars().collect()),
                    None => return Ok(Val::Undef),
                },
                None => None,
            };
            let pred = |c: char| match &set {
                Some(cs) => cs.contains(&c),
                None => c.is_whitespace(),
            };
            s(match name {
                "LTRIM" => x.trim_start_matches(pred).to_string(),
                "RTRIM" => x.trim_end_matches(pred).to_string(),
                _ => x.trim_matches(pred).to_string(),
            })
        }
        "REPLACE" => match (a[0].as_str(), a[1].as_str(), a[2].as_str()) {
            (Some(x), Some(f), Some(r)) if !f.is_empty() => {
                if r.len() > f.len() {
                    let grows = x.matches(f).count() * (r.len() - f.len());
                    SizeBudget::default().add_bytes(x.len().saturating_add(grows))?;
                }
                s(x.replace(f, r))
            }
            (Some(x), Some(_), Some(_)) => s(x.to_string()),
            _ => Val::Undef,
        },
        "REPLICATE" => match (a[0].as_str(), int(&a[1])) {
            (Some(x), Some(k)) if k >= 0 && (k as usize).saturating_mul(x.len()) <= 10_000 => {
                s(x.repeat(k as usize))
            }
            _ => Val::Undef,
        },
        "REVERSE" => a[0]
            .as_str()
            .map(|x| s(x.chars().rev().collect()))
            .unwrap_or(Val::Undef),
        "SUBSTRING" => {
            let (Some(x), Some(st), Some(len)) = (a[0].as_str(), int(&a[1]), int(&a[2])) else {
                return Ok(Val::Undef);
            };
            let c = chars_of(x);
            let st = (st.max(0) as usize).min(c.len());
            let len = if len < 0 { 0 } else { len as usize };
            let end = st.saturating_add(len).min(c.len());
            s(c[st..end].iter().collect())
        }
        "TOSTRING" => match get(0) {
            None => Val::Undef,
            Some(Value::String(x)) => s(x.clone()),
            Some(v) if value::as_nonfinite(v).is_some() => {
                let f = value::as_nonfinite(v).unwrap_or(f64::NAN);
                s(if f.is_nan() {
                    "NaN".into()
                } else if f > 0.0 {
                    "Infinity".into()
                } else {
                    "-Infinity".into()
                })
            }
            Some(Value::Number(x)) => s(number(x.as_f64().unwrap_or(0.0))
                .map(|v| v.to_string())
                .unwrap_or_default()),
            Some(other) => s(other.to_string()),
        },
        "STRINGTOARRAY" | "STRINGTOBOOLEAN" | "STRINGTONULL" | "STRINGTONUMBER"
        | "STRINGTOOBJECT" => {
            let Some(x) = a[0].as_str() else {
                return Ok(Val::Undef);
            };
            let parsed: Option<Value> = serde_json::from_str(x.trim()).ok();
            let ok = matches!(
                (&parsed, name),
                (Some(Value::Array(_)), "STRINGTOARRAY")
                    | (Some(Value::Bool(_)), "STRINGTOBOOLEAN")
                    | (Some(Value::Null), "STRINGTONULL")
                    | (Some(Value::Number(_)), "STRINGTONUMBER")
                    | (Some(Value::Object(_)), "STRINGTOOBJECT")
            );
            if ok {
                Val::from_opt(parsed)
            } else {
                Val::Undef
            }
        }
        "REGEXMATCH" => {
            let (Some(x), Some(p)) = (a[0].as_str(), a[1].as_str()) else {
                return Ok(Val::Undef);
            };
            let mods = match a.get(2) {
                Some(v) => match v.as_str() {
                    Some(m) => m.to_string(),
                    None => return Ok(Val::Undef),
                },
                None => String::new(),
            };
            let mut builder = regex::RegexBuilder::new(p);
            for m in mods.chars() {
                match m {
                    'i' => builder.case_insensitive(true),
                    'm' => builder.multi_line(true),
                    's' => builder.dot_matches_new_line(true),
                    'x' => builder.ignore_whitespace(true),
                    other => {
                        return Err(QueryError::semantic(format!(
                            "Invalid RegexMatch modifier '{other}': use i, m, s or x."
                        )))
                    }
                };
            }
            let re = builder.build().map_err(|e| {
                QueryError::semantic(format!("Invalid regular expression in RegexMatch: {e}"))
            })?;
            b(re.is_match(x))
        }
        "STRINGJOIN" => {
            let (Some(Value::Array(items)), Some(sep)) = (get(0), a[1].as_str()) else {
                return Ok(Val::Undef);
            };
            let mut parts = Vec::with_capacity(items.len());
            let mut budget = SizeBudget::default();
            for it in items {
                match it.as_str() {
                    Some(t) => {
                        budget.add_bytes(t.len() + sep.len())?;
                        parts.push(t);
                    }
                    None => return Ok(Val::Undef),
                }
            }
            s(parts.join(sep))
        }
        "STRINGSPLIT" => match (a[0].as_str(), a[1].as_str()) {
            (Some(x), Some(sep)) if !sep.is_empty() => {
                // Each piece costs a string header besides its bytes.
                let pieces = x.matches(sep).count() + 1;
                SizeBudget::default()
                    .add_bytes(x.len().saturating_add(pieces.saturating_mul(32)))?;
                Val::Own(Value::Array(
                    x.split(sep).map(|p| Value::String(p.to_string())).collect(),
                ))
            }
            (Some(x), Some(_)) => Val::Own(Value::Array(vec![Value::String(x.to_string())])),
            _ => Val::Undef,
        },

        "ABS" => math1(a, f64::abs),
        "ACOS" => math1(a, f64::acos),
        "ASIN" => math1(a, f64::asin),
        "ATAN" => math1(a, f64::atan),
        "ATN2" => match (a[0].as_f64(), a[1].as_f64()) {
            (Some(y), Some(x)) => n(y.atan2(x)),
            _ => Val::Undef,
        },
        "CEILING" => math1(a, f64::ceil),
        "COS" => math1(a, f64::cos),
        "COT" => math1(a, |x| 1.0 / x.tan()),
        "DEGREES" => math1(a, f64::to_degrees),
        "EXP" => math1(a, f64::exp),
        "FLOOR" => math1(a, f64::floor),
        "LOG" => match (a[0].as_f64(), a.get(1)) {
            (Some(x), None) => n(x.ln()),
            (Some(x), Some(base)) => base.as_f64().map(|bs| n(x.log(bs))).unwrap_or(Val::Undef),
            _ => Val::Undef,
        },
        "LOG10" => math1(a, f64::log10),
        "PI" => n(std::f64::consts::PI),
        "POWER" => match (a[0].as_f64(), a[1].as_f64()) {
            (Some(x), Some(y)) => n(x.powf(y)),
            _ => Val::Undef,
        },
        "RADIANS" => math1(a, f64::to_radians),
        "RAND" => {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            let r = xxhash_rust::xxh3::xxh3_64(&t.to_le_bytes());
            n((r >> 11) as f64 / (1u64 << 53) as f64)
        }
        "ROUND" => math1(a, round_half_away),
        "SIGN" => math1(a, |x| {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                0.0
            }
        }),
        "SIN" => math1(a, f64::sin),
        "SQRT" => math1(a, f64::sqrt),
        "SQUARE" => math1(a, |x| x * x),
        "TAN" => math1(a, f64::tan),
        "TRUNC" => math1(a, f64::trunc),
        "NUMBERBIN" => {
            let Some(x) = a[0].as_f64() else {
                return Ok(Val::Undef);
            };
            let bin = match a.get(1) {
                Some(v) => match v.as_f64() {
                    Some(b) => b,
                    None => return Ok(Val::Undef),
                },
                None => 1.0,
            };
            if bin == 0.0 {
                return Ok(Val::Undef);
            }
            let q = (x / bin).floor() * bin;
            // Undo binary noise such as 37.7000000001 for a bin of 0.1.
            let decimals = decimals_of(bin);
            n(if decimals > 0 {
                let p = 10f64.powi(decimals);
                (q * p).round() / p
            } else {
                q
            })
        }
        "INTADD" => int2(a, |x, y| x.checked_add(y)),
        "INTSUB" => int2(a, |x, y| x.checked_sub(y)),
        "INTMUL" => int2(a, |x, y| x.checked_mul(y)),
        "INTDIV" => int2(a, |x, y| x.checked_div(y)),
        "INTMOD" => int2(a, |x, y| x.checked_rem(y)),
        "INTBITAND" => int2(a, |x, y| Some(x & y)),
        "INTBITOR" => int2(a, |x, y| Some(x | y)),
        "INTBITXOR" => int2(a, |x, y| Some(x ^ y)),
        "INTBITLEFTSHIFT" => int2(a, |x, y| (0..64).contains(&y).then(|| x << y)),
        "INTBITRIGHTSHIFT" => int2(a, |x, y| (0..64).contains(&y).then(|| x >> y)),
        "INTBITNOT" => int(&a[0]).map(|x| n(!x as f64)).unwrap_or(Val::Undef),

        "ARRAY_CONCAT" => {
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
        "ARRAY_CONTAINS" => {
            let (Some(Value::Array(arr)), Some(partial)) = (get(0), opt_bool(a, 2)) else {
                return Ok(Val::Undef);
            };
            let Some(x) = get(1) else {
                return Ok(b(false));
            };
            b(arr.iter().any(|e| contains_match(e, x, partial)))
        }
        "ARRAY_CONTAINS_ANY" | "ARRAY_CONTAINS_ALL" => {
            let Some(Value::Array(arr)) = get(0) else {
                return Ok(Val::Undef);
            };
            let wanted: Vec<&Value> = a[1..].iter().filter_map(|v| v.get()).collect();
            let some_undefined = wanted.len() < a.len() - 1;
            let has = |w: &Value| arr.iter().any(|e| json_equal(e, w));
            // An undefined argument makes the answer undefined unless the defined ones decide it.
            if name == "ARRAY_CONTAINS_ANY" {
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
            }
        }
        "ARRAY_LENGTH" => match get(0) {
            Some(Value::Array(x)) => n(x.len() as f64),
            _ => Val::Undef,
        },
        "ARRAY_SLICE" => {
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
            Val::Own(Value::Array(
                arr[st as usize..end.max(st) as usize].to_vec(),
            ))
        }
        "SETINTERSECT" | "SETUNION" => {
            let (Some(Value::Array(x)), Some(Value::Array(y))) = (get(0), get(1)) else {
                return Ok(Val::Undef);
            };
            let mut seen = std::collections::HashSet::new();
            let mut out = Vec::new();
            if name == "SETUNION" {
                for v in x.iter().chain(y) {
                    if seen.insert(canonical(v)) {
                        out.push(v.clone());
                    }
                }
            } else {
                // Cosmos returns the intersection in the order of the second array.
                let xs: std::collections::HashSet<String> = x.iter().map(canonical).collect();
                for v in y {
                    let k = canonical(v);
                    if xs.contains(&k) && seen.insert(k) {
                        out.push(v.clone());
                    }
                }
            }
            Val::Own(Value::Array(out))
        }
        "CHOOSE" => match int(&a[0]) {
            Some(i) if i >= 1 && (i as usize) < a.len() => {
                args.into_iter().nth(i as usize).unwrap_or(Val::Undef)
            }
            _ => Val::Undef,
        },
        "OBJECTTOARRAY" => {
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
            Val::Own(Value::Array(
                m.iter()
                    .map(|(k, v)| {
                        let mut o = Map::new();
                        o.insert(kname.clone(), Value::String(k.clone()));
                        o.insert(vname.clone(), v.clone());
                        Value::Object(o)
                    })
                    .collect(),
            ))
        }
        "IIF" => {
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
        "DOCUMENTID" => match get(0) {
            Some(Value::Object(m)) => m
                .get("_rid")
                .and_then(Value::as_str)
                .and_then(document_id)
                .map(|id| n(id as f64))
                .unwrap_or(Val::Undef),
            _ => Val::Undef,
        },

        "GETCURRENTDATETIME" => s(datetime::format_ticks(datetime::unix_ms_to_ticks(
            datetime::now_millis(),
        ))),
        "GETCURRENTDATETIMESTATIC" => s(datetime::format_ticks(datetime::unix_ms_to_ticks(
            cx.now_millis,
        ))),
        "GETCURRENTTIMESTAMP" => n(datetime::now_millis() as f64),
        "GETCURRENTTIMESTAMPSTATIC" => n(cx.now_millis as f64),
        "GETCURRENTTICKS" => n(datetime::now_unix_ticks() as f64),
        "GETCURRENTTICKSSTATIC" => n((cx.now_millis * 10_000) as f64),
        "DATETIMEADD"
        | "DATETIMEDIFF"
        | "DATETIMEFROMPARTS"
        | "DATETIMEPART"
        | "DATETIMEBIN"
        | "DATETIMETOTICKS"
        | "DATETIMETOTIMESTAMP"
        | "TICKSTODATETIME"
        | "TIMESTAMPTODATETIME" => Val::from_opt(datetime::call(name, a)),

        "ST_DISTANCE" | "ST_WITHIN" | "ST_INTERSECTS" | "ST_ISVALID" | "ST_ISVALIDDETAILED"
        | "ST_AREA" => Val::from_opt(spatial::call(name, get(0), get(1))),

        "FULLTEXTCONTAINS" | "FULLTEXTCONTAINSALL" | "FULLTEXTCONTAINSANY" => {
            let Some(text) = a[0].as_str() else {
                return Ok(Val::Undef);
            };
            let words = tokenize_words(text);
            let terms: Vec<Vec<String>> = a[1..]
                .iter()
                .filter_map(|v| v.as_str().map(tokenize_words))
                .collect();
            let has = |t: &Vec<String>| {
                !t.is_empty() && words.windows(t.len()).any(|w| w == t.as_slice())
            };
            b(match name {
                "FULLTEXTCONTAINSANY" => terms.iter().any(has),
                _ => terms.iter().all(has),
            })
        }
        "FULLTEXTSCORE" => {
            let Some(text) = a[0].as_str() else {
                return Ok(Val::Undef);
            };
            let words = tokenize_words(text);
            let mut score = 0.0;
            for t in a[1..].iter().filter_map(|v| v.as_str()) {
                for term in tokenize_words(t) {
                    let tf = words.iter().filter(|w| **w == term).count() as f64;
                    score += tf / (tf + 1.2 * (0.25 + 0.75 * words.len() as f64 / 50.0));
                }
            }
            n(score)
        }
        "VECTORDISTANCE" => {
            let (Some(Value::Array(x)), Some(Value::Array(y))) = (get(0), get(1)) else {
                return Ok(Val::Undef);
            };
            let xs: Option<Vec<f64>> = x.iter().map(value::as_number).collect();
            let ys: Option<Vec<f64>> = y.iter().map(value::as_number).collect();
            let (Some(xs), Some(ys)) = (xs, ys) else {
                return Ok(Val::Undef);
            };
            if xs.len() != ys.len() || xs.is_empty() {
                return Ok(Val::Undef);
            }
            let func = match get(3) {
                Some(Value::Object(o)) => o
                    .get("distanceFunction")
                    .and_then(Value::as_str)
                    .unwrap_or("cosine")
                    .to_ascii_lowercase(),
                _ => "cosine".into(),
            };
            let dot: f64 = xs.iter().zip(&ys).map(|(p, q)| p * q).sum();
            match func.as_str() {
                "dotproduct" => n(dot),
                "euclidean" => n(xs
                    .iter()
                    .zip(&ys)
                    .map(|(p, q)| (p - q) * (p - q))
                    .sum::<f64>()
                    .sqrt()),
                _ => {
                    let nx = xs.iter().map(|p| p * p).sum::<f64>().sqrt();
                    let ny = ys.iter().map(|p| p * p).sum::<f64>().sqrt();
                    if nx == 0.0 || ny == 0.0 {
                        Val::Undef
                    } else {
                        n(dot / (nx * ny))
                    }
                }
            }
        }
        other => {
            return Err(QueryError::semantic(format!(
                "'{other}' is not a recognized built-in function name."
            )))
        }
    })
}

/// Decimal places of a bin size like 0.01 (to round away binary noise).
fn decimals_of(bin: f64) -> i32 {
    let text = format!("{}", bin.abs());
    match text.split_once('.') {
        Some((_, frac)) => frac.len() as i32,
        None => 0,
    }
}

/// ARRAY_CONTAINS: full equality, or (partial) the element is an object containing every
/// property of the wanted object.
fn contains_match(elem: &Value, wanted: &Value, partial: bool) -> bool {
    if partial {
        if let (Value::Object(e), Value::Object(w)) = (elem, wanted) {
            return w
                .iter()
                .all(|(k, v)| e.get(k).is_some_and(|x| json_equal(x, v)));
        }
    }
    json_equal(elem, wanted)
}

/// The document number inside a document `_rid` (bytes 8..16, little-endian).
fn document_id(rid: &str) -> Option<u64> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(rid.replace('-', "/"))
        .ok()?;
    if bytes.len() < 16 {
        return None;
    }
    Some(u64::from_le_bytes(bytes[8..16].try_into().ok()?))
}

fn tokenize_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase())
        .collect()
}
