//! Full-text and vector search functions.

use super::*;
use crate::sql::distance::Distance;
use crate::sql::fulltext::{self, Language};
use std::rc::Rc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchFn {
    FullTextContains,
    FullTextContainsAll,
    FullTextContainsAny,
    FullTextScore,
    /// `_FullTextScore(path, [terms], documents, words, [hits])`: BM25 under given statistics
    /// (what `FullTextScore` becomes once the query's statistics are known).
    FullTextScoreWith,
    /// `_FullTextWordCount(path)`: the terms of a text (for the statistics).
    FullTextWordCount,
    /// `RRF(score, score, ..., [weights])`: rank fusion, computed over all rows by the
    /// executor (see `sql::hybrid`).
    Rrf,
    VectorDistance,
}

impl SearchFn {
    /// Whether the function reads text (and so analyses it in its path's language).
    pub fn is_full_text(self) -> bool {
        !matches!(self, SearchFn::VectorDistance | SearchFn::Rrf)
    }
}

/// The search terms of a call's arguments: strings, or arrays of strings (the array form the
/// SDKs' rewritten queries use), each analysed into a phrase.
fn phrases(args: &[Val<'_>], lang: Language) -> Vec<Rc<Vec<String>>> {
    let mut out = Vec::new();
    for v in args {
        match v.get() {
            Some(Value::String(t)) => out.push(fulltext::analyzed(t, lang)),
            Some(Value::Array(a)) => out.extend(
                a.iter()
                    .filter_map(Value::as_str)
                    .map(|t| fulltext::analyzed(t, lang)),
            ),
            _ => {}
        }
    }
    out
}

/// Calls a search function; `lang` is the language of the text path the first argument
/// names (from the container's full-text policy).
pub(super) fn call<'a>(f: SearchFn, args: Vec<Val<'a>>, lang: Language) -> R<Val<'a>> {
    let a = &args;
    let get = |i: usize| a.get(i).and_then(|v| v.get());
    Ok(match f {
        SearchFn::FullTextContains
        | SearchFn::FullTextContainsAll
        | SearchFn::FullTextContainsAny => {
            let Some(text) = a[0].as_str() else {
                return Ok(Val::Undef);
            };
            let words = fulltext::analyzed(text, lang);
            let terms = phrases(&a[1..], lang);
            // One-word terms are looked up in the text's words (a set built once), so many
            // terms over a long text cost terms + words, not terms × words.
            let mut set: Option<std::collections::HashSet<&str>> = None;
            let has = |t: &Rc<Vec<String>>| match t.as_slice() {
                [word] if terms.len() > 1 => set
                    .get_or_insert_with(|| words.iter().map(String::as_str).collect())
                    .contains(word.as_str()),
                _ => fulltext::occurrences(&words, t) > 0,
            };
            b(match f {
                SearchFn::FullTextContainsAny => terms.iter().any(has),
                _ => !terms.is_empty() && terms.iter().all(has),
            })
        }
        // Scored only under statistics (`_FullTextScore`): the executor gathers them over
        // the query's scope and rewrites the call before any row is evaluated.
        SearchFn::FullTextScore | SearchFn::Rrf => Val::Undef,
        SearchFn::FullTextScoreWith => {
            let Some(text) = a[0].as_str() else {
                return Ok(Val::Undef);
            };
            let stats = fulltext::Statistics {
                documents: get(2).and_then(Value::as_u64).unwrap_or(0),
                total_words: get(3).and_then(Value::as_u64).unwrap_or(0),
                hits: match get(4) {
                    Some(Value::Array(h)) => h.iter().map(|x| x.as_u64().unwrap_or(0)).collect(),
                    _ => Vec::new(),
                },
            };
            let words = fulltext::analyzed(text, lang);
            let terms: Vec<Vec<String>> =
                phrases(&a[1..2], lang).iter().map(|p| p.to_vec()).collect();
            n(fulltext::bm25(&words, &terms, &stats))
        }
        SearchFn::FullTextWordCount => match a[0].as_str() {
            Some(text) => n(fulltext::analyzed(text, lang).len() as f64),
            None => Val::Undef,
        },
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
            // An unknown function name measures as the default, cosine.
            let func = match get(3) {
                Some(Value::Object(o)) => o
                    .get("distanceFunction")
                    .and_then(Value::as_str)
                    .and_then(Distance::parse),
                _ => None,
            };
            Val::from_opt(crate::sql::distance::score_key(
                func.unwrap_or(Distance::Cosine).score(&xs, &ys),
            ))
        }
    })
}
