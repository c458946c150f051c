//! Semantic reranking, offline: the request's documents scored against its query by BM25.
//!
//! The service scores with a hosted language model; strata has none, and does not pretend to.
//! Each document's text (the whole string, or with `document_type: "json"` the values at
//! `target_paths`) and the query are analyzed as the full-text index analyzes English — words
//! lower-cased, stop words dropped, Snowball-stemmed — and each document gets the BM25 of the
//! query's distinct words in it (k1 1.2, b 0.75), the request's documents being the corpus
//! (document frequencies and the average length come from them), mapped to [0, 1) by
//! `s / (1 + s)`. So a document that shares the query's rarer words ranks first — "Paris is
//! the capital of France." for "What is the capital of France?" among other capitals — while
//! a paraphrase without a shared word scores 0, which a model would not do. The same request
//! always gets the same scores; ties keep the documents' order.

use serde_json::{json, Map, Value};
use strata_query::sql::fulltext::{analyze, bm25, Language, Statistics};

/// A rerank request: the query, the documents and the options the SDKs pass through.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub query: String,
    pub documents: Vec<String>,
    /// Answer each score with its document (`return_documents`, default true).
    pub return_documents: bool,
    /// At most this many scores (`top_k`; all by default or at -1).
    pub top_k: Option<usize>,
    /// Highest score first (`sort`, default true), else in the documents' order.
    pub sort: bool,
    /// The documents are JSON (`document_type: "json"`) whose `target_paths` hold the text.
    pub json: Option<Vec<Vec<String>>>,
}

/// The options a request may carry (the SDKs' `options`, merged into the body).
const OPTIONS: [&str; 6] = [
    "return_documents",
    "top_k",
    "batch_size",
    "sort",
    "document_type",
    "target_paths",
];

impl Request {
    /// The request in `body`, or what is wrong with it (a 400's message).
    pub fn parse(body: &[u8]) -> Result<Self, String> {
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| format!("The rerank request body is not JSON: {e}."))?;
        let Value::Object(o) = v else {
            return Err(
                "The rerank request body must be a JSON object with 'query' and 'documents'."
                    .into(),
            );
        };
        if let Some(k) = o
            .keys()
            .find(|k| *k != "query" && *k != "documents" && !OPTIONS.contains(&k.as_str()))
        {
            return Err(format!(
                "Unknown rerank option '{k}'; the options are {}.",
                OPTIONS.join(", ")
            ));
        }
        let query = match o.get("query") {
            Some(Value::String(q)) if !q.trim().is_empty() => q.clone(),
            _ => return Err("'query' must be a non-empty string.".into()),
        };
        let documents = match o.get("documents") {
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, d)| match d {
                    Value::String(s) => Ok(s.clone()),
                    _ => Err(format!("documents[{i}] is not a string (send JSON documents as strings, with document_type 'json').")),
                })
                .collect::<Result<Vec<_>, _>>()?,
            _ => return Err("'documents' must be an array of strings.".into()),
        };
        let flag = |name: &str| match o.get(name) {
            None => Ok(true),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(format!("'{name}' must be true or false, not {other}.")),
        };
        let count = |name: &str| match o.get(name) {
            None => Ok(None),
            Some(v) => match v.as_i64() {
                Some(-1) => Ok(None),
                Some(n) if n >= 1 => Ok(Some(n as usize)),
                _ => Err(format!(
                    "'{name}' must be a positive integer or -1 (all), not {v}."
                )),
            },
        };
        count("batch_size")?;
        let json = match o.get("document_type").map(|t| t.as_str()) {
            None | Some(Some("string")) => {
                if o.contains_key("target_paths") {
                    return Err("'target_paths' applies to document_type 'json' only.".into());
                }
                None
            }
            Some(Some("json")) => Some(target_paths(o.get("target_paths"))?),
            Some(_) => return Err("'document_type' must be 'string' or 'json'.".into()),
        };
        if json.is_some() {
            for (i, d) in documents.iter().enumerate() {
                serde_json::from_str::<Value>(d).map_err(|e| {
                    format!("documents[{i}] is not JSON, and document_type is 'json': {e}.")
                })?;
            }
        }
        Ok(Self {
            query,
            documents,
            return_documents: flag("return_documents")?,
            top_k: count("top_k")?,
            sort: flag("sort")?,
            json,
        })
    }
}

/// `target_paths`: property paths separated by commas, each dotted (`info.text`); none means
/// every string in the document.
fn target_paths(v: Option<&Value>) -> Result<Vec<Vec<String>>, String> {
    match v {
        None => Ok(Vec::new()),
        Some(Value::String(s)) => s
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                let segs: Vec<String> = p.split('.').map(str::to_string).collect();
                if segs.iter().any(String::is_empty) {
                    Err(format!(
                        "'{p}' in target_paths is not a dotted property path."
                    ))
                } else {
                    Ok(segs)
                }
            })
            .collect(),
        Some(other) => Err(format!(
            "'target_paths' must be a string of paths separated by commas, not {other}."
        )),
    }
}

/// The text a document contributes: itself, or its JSON's values at the target paths.
fn text_of(doc: &str, json: Option<&[Vec<String>]>) -> String {
    let Some(paths) = json else {
        return doc.to_string();
    };
    let Ok(v) = serde_json::from_str::<Value>(doc) else {
        return String::new();
    };
    let mut out = String::new();
    if paths.is_empty() {
        strings_in(&v, &mut out);
    }
    for p in paths {
        let mut at = Some(&v);
        for seg in p {
            at = at.and_then(|x| x.get(seg));
        }
        if let Some(x) = at {
            strings_in(x, &mut out);
        }
    }
    out
}

/// Every string and number under `v`, in document order, one per line.
fn strings_in(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Number(n) => {
            out.push_str(&n.to_string());
            out.push('\n');
        }
        Value::Array(a) => a.iter().for_each(|x| strings_in(x, out)),
        Value::Object(o) => o.values().for_each(|x| strings_in(x, out)),
        Value::Bool(_) | Value::Null => {}
    }
}

/// The answer to `r`: `{"Scores": [{"index", "score", "document"?}]}`.
pub fn rerank(r: &Request) -> Value {
    let lang = Language::EnUs;
    let mut terms: Vec<Vec<String>> = Vec::new();
    for w in analyze(&r.query, lang) {
        if !terms.iter().any(|t| t[0] == w) {
            terms.push(vec![w]);
        }
    }
    let docs: Vec<Vec<String>> = r
        .documents
        .iter()
        .map(|d| analyze(&text_of(d, r.json.as_deref()), lang))
        .collect();
    let stats = Statistics {
        documents: docs.len() as u64,
        total_words: docs.iter().map(|d| d.len() as u64).sum(),
        hits: terms
            .iter()
            .map(|t| docs.iter().filter(|d| d.contains(&t[0])).count() as u64)
            .collect(),
    };
    let mut scored: Vec<(usize, f64)> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let s = bm25(d, &terms, &stats);
            (i, s / (1.0 + s))
        })
        .collect();
    if r.sort {
        // Stable: equal scores keep the documents' order.
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    }
    if let Some(k) = r.top_k {
        scored.truncate(k);
    }
    let scores: Vec<Value> = scored
        .into_iter()
        .map(|(i, s)| {
            let mut m = Map::new();
            m.insert("index".into(), json!(i));
            m.insert("score".into(), json!(s));
            if r.return_documents {
                m.insert("document".into(), json!(r.documents[i]));
            }
            Value::Object(m)
        })
        .collect();
    json!({ "Scores": scores })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPITALS: [&str; 3] = [
        "Berlin is the capital of Germany.",
        "Paris is the capital of France.",
        "Madrid is the capital of Spain.",
    ];

    fn request(v: Value) -> Result<Request, String> {
        Request::parse(v.to_string().as_bytes())
    }

    #[test]
    fn the_document_sharing_the_rarer_words_ranks_first() {
        let r = request(json!({"query": "What is the capital of France?", "documents": CAPITALS, "top_k": 10, "batch_size": 32, "sort": true, "return_documents": true})).unwrap();
        let a = rerank(&r);
        let s = a["Scores"].as_array().unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[0]["document"], CAPITALS[1]);
        assert_eq!(s[0]["index"], 1);
        let first = s[0]["score"].as_f64().unwrap();
        assert!(first > 0.0 && first < 1.0, "{first}");
        // The two others share only "capital": equal scores, in the documents' order.
        assert_eq!(s[1]["score"], s[2]["score"]);
        assert_eq!(
            (s[1]["index"].clone(), s[2]["index"].clone()),
            (json!(0), json!(2))
        );
        assert_eq!(rerank(&r), a, "deterministic");
    }

    #[test]
    fn json_documents_are_scored_by_their_target_paths() {
        let docs: Vec<String> = CAPITALS
            .iter()
            .enumerate()
            .map(|(i, t)| {
                json!({"id": i.to_string(), "info": {"text": t}, "note": "France"}).to_string()
            })
            .collect();
        let r = request(json!({"query": "capital of France", "documents": docs, "document_type": "json", "target_paths": "info.text"})).unwrap();
        let a = rerank(&r);
        assert_eq!(a["Scores"][0]["index"], 1);
        assert_eq!(a["Scores"][0]["document"], docs[1]);
        // Without target paths every string counts, the note's "France" too: every document
        // scores, Paris's (France twice) first, the others tied.
        let r = request(json!({"query": "France", "documents": docs, "document_type": "json"}))
            .unwrap();
        let a = rerank(&r);
        assert_eq!(a["Scores"][0]["index"], 1);
        assert!(a["Scores"][2]["score"].as_f64().unwrap() > 0.0, "{a}");
        assert_eq!(a["Scores"][1]["score"], a["Scores"][2]["score"]);
    }

    #[test]
    fn options_shape_the_answer() {
        let r = request(json!({"query": "capital France", "documents": CAPITALS, "top_k": 1, "return_documents": false})).unwrap();
        let a = rerank(&r);
        assert_eq!(
            a,
            json!({"Scores": [{"index": 1, "score": a["Scores"][0]["score"]}]})
        );
        let r = request(json!({"query": "France", "documents": CAPITALS, "sort": false})).unwrap();
        let idx: Vec<Value> = rerank(&r)["Scores"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["index"].clone())
            .collect();
        assert_eq!(idx, [json!(0), json!(1), json!(2)]);
    }

    #[test]
    fn bad_requests_say_what_is_wrong() {
        for (body, says) in [
            (json!({"documents": CAPITALS}), "'query'"),
            (json!({"query": "x", "documents": "no"}), "'documents'"),
            (json!({"query": "x", "documents": [1]}), "documents[0]"),
            (
                json!({"query": "x", "documents": [], "top_k": 0}),
                "'top_k'",
            ),
            (
                json!({"query": "x", "documents": [], "sort": "yes"}),
                "'sort'",
            ),
            (
                json!({"query": "x", "documents": [], "document_type": "xml"}),
                "'document_type'",
            ),
            (
                json!({"query": "x", "documents": ["{"], "document_type": "json"}),
                "documents[0] is not JSON",
            ),
            (
                json!({"query": "x", "documents": [], "target_paths": "a"}),
                "'target_paths'",
            ),
            (
                json!({"query": "x", "documents": [], "topk": 3}),
                "Unknown rerank option 'topk'",
            ),
        ] {
            let e = request(body.clone()).unwrap_err();
            assert!(e.contains(says), "{body}: {e}");
        }
        assert!(Request::parse(b"[]").is_err());
    }
}
