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
    StringJoin,
    StringSplit,
    ContainsAnyCi,
    ContainsAnyCs,
    ContainsAllCi,
    ContainsAllCs,
    LastIndexOf,
    SubstringAfter,
    SubstringBefore,
    LastSubstringAfter,
    LastSubstringBefore,
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
        StrFn::ContainsAnyCi
        | StrFn::ContainsAnyCs
        | StrFn::ContainsAllCi
        | StrFn::ContainsAllCs => contains_many(f, a),
        StrFn::LastIndexOf => last_index_of(a),
        StrFn::SubstringAfter
        | StrFn::SubstringBefore
        | StrFn::LastSubstringAfter
        | StrFn::LastSubstringBefore => match (a[0].as_str(), a[1].as_str()) {
            (Some(x), Some(d)) => s(split_at_delimiter(f, x, d).to_string()),
            _ => Val::Undef,
        },
    })
}

/// `CONTAINS_ANY_CI/CS` and `CONTAINS_ALL_CI/CS`: as the service defines them, `CONTAINS(x,
/// e1, ci) OR … OR CONTAINS(x, eN, ci)` (AND for ALL) in the language's three-valued logic:
/// a search value that is undefined or not a string is an undefined term, which a `true`
/// (a `false` for ALL) still decides. `CONTAINS_ANY_CS("Have a nice day!", undefined, "had")`
/// is undefined, `CONTAINS_ALL_CS(…, undefined, "had")` false.
fn contains_many<'a>(f: StrFn, a: &[Val<'a>]) -> Val<'a> {
    let ci = matches!(f, StrFn::ContainsAnyCi | StrFn::ContainsAllCi);
    let any = matches!(f, StrFn::ContainsAnyCi | StrFn::ContainsAnyCs);
    let hay = a[0]
        .as_str()
        .map(|x| if ci { x.to_lowercase() } else { x.to_string() });
    let term = |v: &Val<'_>| -> Option<bool> {
        let (hay, w) = (hay.as_deref()?, v.as_str()?);
        Some(if ci {
            hay.contains(&w.to_lowercase())
        } else {
            hay.contains(w)
        })
    };
    let terms: Vec<Option<bool>> = a[1..].iter().map(term).collect();
    if terms.contains(&Some(any)) {
        b(any)
    } else if terms.contains(&None) {
        Val::Undef
    } else {
        b(!any)
    }
}

/// `LASTINDEXOF(x, y[, start])`: the character position of the last `y` in `x` that lies
/// wholly at or before `start` (as .NET's `LastIndexOf` searches back from a position:
/// `LASTINDEXOF("abcdeabc", "abc", 6)` is 0, with 7 it is 5), or -1.
fn last_index_of<'a>(a: &[Val<'a>]) -> Val<'a> {
    let (Some(x), Some(y)) = (a[0].as_str(), a[1].as_str()) else {
        return Val::Undef;
    };
    let (xc, yc) = (chars_of(x), chars_of(y));
    // One past the last position a match may cover.
    let end = match a.get(2) {
        Some(v) => match int(v) {
            Some(i) if i < 0 => return n(-1.0),
            Some(i) => (i as usize).saturating_add(1).min(xc.len()),
            None => return Val::Undef,
        },
        None => xc.len(),
    };
    let Some(last_start) = end.checked_sub(yc.len()) else {
        return n(-1.0);
    };
    let found = (0..=last_start)
        .rev()
        .find(|&i| xc[i..i + yc.len()] == yc[..]);
    n(found.map_or(-1.0, |i| i as f64))
}

/// The part of `x` after (before) the first (last) `d`, for `SUBSTRINGAFTER`,
/// `SUBSTRINGBEFORE`, `LASTSUBSTRINGAFTER` and `LASTSUBSTRINGBEFORE`. Where the service's
/// pages are silent, as XPath's `substring-after` and `substring-before`, whose names these
/// take: no `d` in `x` gives the empty string, and an empty `d` occurs at the start (first)
/// and at the end (last).
fn split_at_delimiter<'x>(f: StrFn, x: &'x str, d: &str) -> &'x str {
    let at = match f {
        StrFn::SubstringAfter | StrFn::SubstringBefore => x.find(d),
        _ => x.rfind(d),
    };
    match (at, f) {
        (None, _) => "",
        (Some(i), StrFn::SubstringAfter | StrFn::LastSubstringAfter) => &x[i + d.len()..],
        (Some(i), _) => &x[..i],
    }
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
