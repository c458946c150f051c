//! A container's full-text policy (`fullTextPolicy`) and full-text indexes
//! (`indexingPolicy.fullTextIndexes`), validated as the service validates them: paths that
//! start with `/`, languages it supports, and indexes only on paths the policy lists — and
//! the index entries a full-text index keeps.
//!
//! A full-text index is entries of the secondary index (so it is written in the document's
//! transaction, rebuilt with the policy and split-safe like every entry): under the path
//! `/\0fulltext/<path>` one **posting** per distinct term of the text, its term the string
//! `stem \x01 tf \x01 length` (so one term's postings are one key range, and a posting
//! alone gives BM25 its term frequency and document length); under `/\0fulltext-length/<path>`
//! one entry per document with its length (the total words BM25 averages).

use super::policy::Seg;
use super::term::{self, Entry, Span};
use crate::sql::ctx::TextLanguages;
use crate::sql::fulltext::{analyze, Language, LANGUAGES};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The first segment of the paths full-text entries live under (no JSON property of a
/// document reaches them: documents are walked from their own properties).
const POSTINGS: &str = "\u{0}fulltext";
const LENGTHS: &str = "\u{0}fulltext-length";
/// Longer terms are not indexed (no word of a language is this long; they stay findable by
/// evaluation).
const MAX_TERM: usize = 100;

fn under(first: &str, segs: &[Seg]) -> Vec<Seg> {
    let mut p = vec![Seg::Name(first.to_string())];
    p.extend(segs.iter().cloned());
    p
}

/// The index path of a text path's postings.
pub fn postings_path(segs: &[Seg]) -> Vec<Seg> {
    under(POSTINGS, segs)
}

/// The index path of a text path's document lengths.
pub fn lengths_path(segs: &[Seg]) -> Vec<Seg> {
    under(LENGTHS, segs)
}

/// The text path of a postings path, if `segs` is one.
pub fn text_path(segs: &[Seg]) -> Option<&[Seg]> {
    match segs.first()? {
        Seg::Name(n) if n == POSTINGS => Some(&segs[1..]),
        _ => None,
    }
}

/// The span of one stem's postings.
pub fn stem_span(stem: &str) -> Span {
    let (lo, hi) = term::string_prefix_bounds(&format!("{stem}\u{1}"));
    Span { lo, hi }
}

/// Term frequency and document length of a posting's term.
pub fn parse_posting(t: &[u8]) -> Option<(u32, u32)> {
    let body = t.get(1..t.len().checked_sub(2)?)?;
    let s = std::str::from_utf8(body).ok()?;
    let mut parts = s.rsplitn(3, '\u{1}');
    let dl = parts.next()?.parse().ok()?;
    let tf = parts.next()?.parse().ok()?;
    Some((tf, dl))
}

/// The length a length entry's term holds.
pub fn parse_length(t: &[u8]) -> Option<u64> {
    let bits: [u8; 8] = t.get(1..9)?.try_into().ok()?;
    let b = u64::from_be_bytes(bits);
    // Undo `term::number_bits` for a non-negative number.
    Some(f64::from_bits(b & !(1 << 63)) as u64)
}

/// The value at a path of property names in `doc` (none under `[]`).
pub fn value_at<'a>(doc: &'a Value, segs: &[Seg]) -> Option<&'a Value> {
    let mut v = doc;
    for s in segs {
        match s {
            Seg::Name(n) => v = v.get(n)?,
            Seg::Elements => return None,
        }
    }
    Some(v)
}

/// The full-text entries of `doc` for each indexed path (a string at the path; other values
/// are not text).
pub fn entries(doc: &Value, paths: &[(Vec<Seg>, Language)]) -> Vec<Entry> {
    let mut out = Vec::new();
    for (segs, lang) in paths {
        let Some(Value::String(text)) = value_at(doc, segs) else {
            continue;
        };
        let words = analyze(text, *lang);
        let mut tf: BTreeMap<&str, u32> = BTreeMap::new();
        for w in &words {
            *tf.entry(w.as_str()).or_default() += 1;
        }
        let dl = words.len();
        let pid = term::path_id(&postings_path(segs));
        for (stem, n) in tf {
            if stem.len() > MAX_TERM {
                continue;
            }
            out.push((
                pid,
                term::encode(&Value::String(format!("{stem}\u{1}{n}\u{1}{dl}"))),
            ));
        }
        out.push((
            term::path_id(&lengths_path(segs)),
            term::encode(&Value::from(dl as u64)),
        ));
    }
    out
}

/// The service's answer to a policy it cannot read at all (a value of the wrong JSON type).
const INVALID_INPUT: &str = "One of the specified inputs is invalid";

#[derive(Debug, Clone, Default, PartialEq)]
pub struct FullTextPolicy {
    pub default: Language,
    /// Each full-text path with its language (the default when it names none).
    pub paths: Vec<(String, Language)>,
    /// Paths with a full-text index.
    pub indexes: Vec<String>,
}

fn language(s: &str) -> Result<Language, String> {
    Language::parse(s).ok_or_else(|| {
        let supported: Vec<&str> = LANGUAGES.iter().map(|l| l.code()).collect();
        format!(
            "The Full Text Policy contains an unsupported language {s}. Supported languages are: {}.",
            supported.join(", ")
        )
    })
}

fn valid_path(p: &str) -> bool {
    p.len() > 1 && p.starts_with('/') && !p.ends_with('/') && !p.contains('*')
}

impl FullTextPolicy {
    /// Parses and validates a container's full-text policy and full-text indexes (both
    /// optional).
    pub fn from_props(props: &Map<String, Value>) -> Result<Self, String> {
        let mut out = FullTextPolicy::default();
        match props.get("fullTextPolicy") {
            None | Some(Value::Null) => {}
            Some(Value::Object(p)) => {
                if let Some(d) = p.get("defaultLanguage") {
                    let d = d.as_str().ok_or_else(|| INVALID_INPUT.to_string())?;
                    out.default = language(d)?;
                }
                match p.get("fullTextPaths") {
                    None | Some(Value::Null) => {}
                    Some(Value::Array(list)) => {
                        for e in list {
                            let Some(o) = e.as_object() else {
                                return Err(INVALID_INPUT.into());
                            };
                            let path = match o.get("path") {
                                Some(Value::String(p)) if valid_path(p) => p.clone(),
                                Some(Value::String(p)) => {
                                    return Err(format!(
                                        "The Full Text Policy contains an invalid Path: {p}. A path must start with '/' and name a property."
                                    ))
                                }
                                _ => {
                                    return Err(
                                        "The Full Text Policy is missing the required 'path' of a full text path."
                                            .into(),
                                    )
                                }
                            };
                            if out.paths.iter().any(|(q, _)| *q == path) {
                                return Err(format!(
                                    "The Full Text Policy contains the path {path} more than once."
                                ));
                            }
                            let lang = match o.get("language") {
                                None | Some(Value::Null) => out.default,
                                Some(Value::String(l)) => language(l)?,
                                Some(_) => return Err(INVALID_INPUT.into()),
                            };
                            out.paths.push((path, lang));
                        }
                    }
                    Some(_) => return Err(INVALID_INPUT.into()),
                }
            }
            Some(_) => return Err(INVALID_INPUT.into()),
        }
        match props
            .get("indexingPolicy")
            .and_then(|p| p.get("fullTextIndexes"))
        {
            None | Some(Value::Null) => {}
            Some(Value::Array(list)) => {
                for e in list {
                    let path = match e.get("path") {
                        Some(Value::String(p)) if valid_path(p) => p.clone(),
                        Some(Value::String(p)) => {
                            return Err(format!(
                                "The Full Text Index contains an invalid Path: {p}. A path must start with '/' and name a property."
                            ))
                        }
                        _ => {
                            return Err(
                                "The Full Text Index is missing the required 'path'.".into(),
                            )
                        }
                    };
                    if !out.paths.iter().any(|(q, _)| *q == path) {
                        return Err(format!(
                            "The Full Text Index path {path} is not a path of the container's Full Text Policy. Add it to fullTextPolicy.fullTextPaths."
                        ));
                    }
                    if out.indexes.contains(&path) {
                        return Err(format!(
                            "The Full Text Index has more than one index for path {path}."
                        ));
                    }
                    out.indexes.push(path);
                }
            }
            Some(_) => return Err(INVALID_INPUT.into()),
        }
        Ok(out)
    }

    /// The indexed paths with their languages (what [`entries`] reads).
    pub fn indexed(&self) -> Vec<(Vec<Seg>, Language)> {
        self.indexes
            .iter()
            .map(|p| {
                let lang = self
                    .paths
                    .iter()
                    .find(|(q, _)| q == p)
                    .map(|(_, l)| *l)
                    .unwrap_or(self.default);
                let segs = p
                    .split('/')
                    .filter(|s| !s.is_empty())
                    .map(|s| Seg::Name(s.to_string()))
                    .collect();
                (segs, lang)
            })
            .collect()
    }

    /// The languages queries analyse text in.
    pub fn languages(&self) -> TextLanguages {
        TextLanguages {
            default: self.default,
            paths: self.paths.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<FullTextPolicy, String> {
        FullTextPolicy::from_props(v.as_object().expect("object"))
    }

    #[test]
    fn policies_validate_as_the_service() {
        let ok = parse(json!({
            "fullTextPolicy": {"defaultLanguage": "fr-FR", "fullTextPaths": [
                {"path": "/a", "language": "en-US"}, {"path": "/b"}]},
            "indexingPolicy": {"fullTextIndexes": [{"path": "/a"}]}
        }))
        .expect("valid");
        assert_eq!(ok.default, Language::FrFr);
        assert_eq!(
            ok.paths,
            vec![("/a".into(), Language::EnUs), ("/b".into(), Language::FrFr)]
        );
        assert_eq!(ok.indexes, vec!["/a".to_string()]);
        let err = |v| parse(v).err().unwrap_or_default();
        assert!(
            err(json!({"fullTextPolicy": {"fullTextPaths": [{"path": "abstract"}]}}))
                .contains("The Full Text Policy contains an invalid Path: abstract")
        );
        assert!(
            err(json!({"fullTextPolicy": {"defaultLanguage": "spa-SPA"}}))
                .contains("The Full Text Policy contains an unsupported language spa-SPA")
        );
        assert!(err(
            json!({"fullTextPolicy": {"fullTextPaths": [{"path": "/a", "language": "xx"}]}})
        )
        .contains("unsupported language"));
        assert!(
            err(json!({"indexingPolicy": {"fullTextIndexes": [{"path": "/path"}]}}))
                .contains("not a path of the container's Full Text Policy")
        );
        assert!(err(
            json!({"fullTextPolicy": {"fullTextPaths": [{"path": "/a"}]},
            "indexingPolicy": {"fullTextIndexes": [{"not_path": "a"}]}})
        )
        .contains("missing the required 'path'"));
        assert_eq!(parse(json!({})), Ok(FullTextPolicy::default()));
    }

    #[test]
    fn postings_carry_term_frequency_and_length() {
        let paths = vec![(vec![Seg::Name("t".into())], Language::EnUs)];
        let e = entries(&json!({"t": "Swimmers swim; the swimmer swims!"}), &paths);
        let pid = term::path_id(&postings_path(&paths[0].0));
        let posting: Vec<(u32, u32)> = e
            .iter()
            .filter(|(p, _)| *p == pid)
            .filter_map(|(_, t)| parse_posting(t))
            .collect();
        // "swimmer" twice and "swim" twice, of four terms.
        assert_eq!(posting, vec![(2, 4), (2, 4)]);
        let span = stem_span("swim");
        let inside: Vec<_> = e
            .iter()
            .filter(|(p, t)| *p == pid && *t >= span.lo && *t < span.hi)
            .collect();
        assert_eq!(inside.len(), 1, "swim's span holds swim, not swimmer");
        let len = e
            .iter()
            .find(|(p, _)| *p == term::path_id(&lengths_path(&paths[0].0)));
        assert_eq!(len.and_then(|(_, t)| parse_length(t)), Some(4));
        assert!(entries(&json!({"t": 5}), &paths).is_empty());
    }
}
