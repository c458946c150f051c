//! Full-text and vector search functions.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchFn {
    FullTextContains,
    FullTextContainsAll,
    FullTextContainsAny,
    FullTextScore,
    VectorDistance,
}

pub(super) fn call<'a>(f: SearchFn, args: Vec<Val<'a>>, _cx: &Ctx) -> R<Val<'a>> {
    let a = &args;
    let get = |i: usize| a.get(i).and_then(|v| v.get());
    Ok(match f {
        SearchFn::FullTextContains
        | SearchFn::FullTextContainsAll
        | SearchFn::FullTextContainsAny => {
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
            b(match f {
                SearchFn::FullTextContainsAny => terms.iter().any(has),
                _ => terms.iter().all(has),
            })
        }
        SearchFn::FullTextScore => {
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
        SearchFn::VectorDistance => {
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
    })
}
