//! String functions.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrFn {
    Concat,
    Contains,
    EndsWith,
    StartsWith,
    IndexOf,
    Left,
    Right,
    Length,
    Lower,
    Upper,
    Ltrim,
    Rtrim,
    Trim,
    Replace,
    Replicate,
    Reverse,
    Substring,
    StringEquals,
    ToString,
    StringToArray,
    StringToBoolean,
    StringToNull,
    StringToNumber,
    StringToObject,
    RegexMatch,
    StringJoin,
    StringSplit,
}

pub(super) fn call<'a>(f: StrFn, args: Vec<Val<'a>>, _cx: &Ctx) -> R<Val<'a>> {
    let a = &args;
    Ok(match f {
        StrFn::Concat => concat(a)?,
        StrFn::Contains | StrFn::StartsWith | StrFn::EndsWith => {
            let (Some(x), Some(y), Some(ic)) = (a[0].as_str(), a[1].as_str(), opt_bool(a, 2))
            else {
                return Ok(Val::Undef);
            };
            let (x, y) = if ic {
                (x.to_lowercase(), y.to_lowercase())
            } else {
                (x.to_string(), y.to_string())
            };
            b(match f {
                StrFn::Contains => x.contains(&y),
                StrFn::StartsWith => x.starts_with(&y),
                _ => x.ends_with(&y),
            })
        }
        StrFn::StringEquals => match (a[0].as_str(), a[1].as_str(), opt_bool(a, 2)) {
            (Some(x), Some(y), Some(ic)) => b(if ic {
                x.to_lowercase() == y.to_lowercase()
            } else {
                x == y
            }),
            _ => Val::Undef,
        },
        StrFn::IndexOf => index_of(a)?,
        StrFn::Left | StrFn::Right => {
            let (Some(x), Some(k)) = (a[0].as_str(), int(&a[1])) else {
                return Ok(Val::Undef);
            };
            let c = chars_of(x);
            let k = (k.max(0) as usize).min(c.len());
            s(if f == StrFn::Left {
                c[..k].iter().collect()
            } else {
                c[c.len() - k..].iter().collect()
            })
        }
        StrFn::Length => a[0]
            .as_str()
            .map(|x| n(x.chars().count() as f64))
            .unwrap_or(Val::Undef),
        StrFn::Lower => a[0]
            .as_str()
            .map(|x| s(x.to_lowercase()))
            .unwrap_or(Val::Undef),
        StrFn::Upper => a[0]
            .as_str()
            .map(|x| s(x.to_uppercase()))
            .unwrap_or(Val::Undef),
        StrFn::Ltrim | StrFn::Rtrim | StrFn::Trim => trim(f, a)?,
        StrFn::Replace => match (a[0].as_str(), a[1].as_str(), a[2].as_str()) {
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
        StrFn::Replicate => match (a[0].as_str(), int(&a[1])) {
            (Some(x), Some(k)) if k >= 0 && (k as usize).saturating_mul(x.len()) <= 10_000 => {
                s(x.repeat(k as usize))
            }
            _ => Val::Undef,
        },
        StrFn::Reverse => a[0]
            .as_str()
            .map(|x| s(x.chars().rev().collect()))
            .unwrap_or(Val::Undef),
        StrFn::Substring => {
            let (Some(x), Some(st), Some(len)) = (a[0].as_str(), int(&a[1]), int(&a[2])) else {
                return Ok(Val::Undef);
            };
            let c = chars_of(x);
            let st = (st.max(0) as usize).min(c.len());
            let len = if len < 0 { 0 } else { len as usize };
            let end = st.saturating_add(len).min(c.len());
            s(c[st..end].iter().collect())
        }
        StrFn::ToString => to_string(a)?,
        StrFn::StringToArray
        | StrFn::StringToBoolean
        | StrFn::StringToNull
        | StrFn::StringToNumber
        | StrFn::StringToObject => string_to(f, a)?,
        StrFn::RegexMatch => regex_match(a)?,
        StrFn::StringJoin => string_join(a)?,
        StrFn::StringSplit => match (a[0].as_str(), a[1].as_str()) {
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
    })
}

/// `CONCAT`: undefined when any argument is not a string; bounded by the size budget.
fn concat<'a>(a: &[Val<'a>]) -> R<Val<'a>> {
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
    Ok(s(parts.concat()))
}

/// `INDEX_OF(s, sub[, start])`, in characters.
fn index_of<'a>(a: &[Val<'a>]) -> R<Val<'a>> {
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
    Ok(match hay.find(y) {
        Some(byte) => n((start + hay[..byte].chars().count()) as f64),
        None => n(-1.0),
    })
}

/// `LTRIM`, `RTRIM`, `TRIM`, of whitespace or of the given characters.
fn trim<'a>(f: StrFn, a: &[Val<'a>]) -> R<Val<'a>> {
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
    Ok(s(match f {
        StrFn::Ltrim => x.trim_start_matches(pred).to_string(),
        StrFn::Rtrim => x.trim_end_matches(pred).to_string(),
        _ => x.trim_matches(pred).to_string(),
    }))
}

/// `ToString`: numbers as the service prints them, other values as JSON.
fn to_string<'a>(a: &[Val<'a>]) -> R<Val<'a>> {
    let get = |i: usize| a.get(i).and_then(|v| v.get());
    Ok(match get(0) {
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
    })
}

/// `StringToArray`, `StringToBoolean`, `StringToNull`, `StringToNumber`, `StringToObject`: the JSON a string holds, when it is of the kind asked for.
fn string_to<'a>(f: StrFn, a: &[Val<'a>]) -> R<Val<'a>> {
    let Some(x) = a[0].as_str() else {
        return Ok(Val::Undef);
    };
    let parsed: Option<Value> = serde_json::from_str(x.trim()).ok();
    let ok = matches!(
        (&parsed, f),
        (Some(Value::Array(_)), StrFn::StringToArray)
            | (Some(Value::Bool(_)), StrFn::StringToBoolean)
            | (Some(Value::Null), StrFn::StringToNull)
            | (Some(Value::Number(_)), StrFn::StringToNumber)
            | (Some(Value::Object(_)), StrFn::StringToObject)
    );
    Ok(if ok {
        Val::from_opt(parsed)
    } else {
        Val::Undef
    })
}

/// `RegexMatch(s, pattern[, modifiers])`.
fn regex_match<'a>(a: &[Val<'a>]) -> R<Val<'a>> {
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
    Ok(b(re.is_match(x)))
}

/// `StringJoin(array, separator)`.
fn string_join<'a>(a: &[Val<'a>]) -> R<Val<'a>> {
    let get = |i: usize| a.get(i).and_then(|v| v.get());
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
    Ok(s(parts.join(sep)))
}
