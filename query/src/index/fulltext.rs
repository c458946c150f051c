//! A container's full-text policy (`fullTextPolicy`) and full-text indexes
//! (`indexingPolicy.fullTextIndexes`), validated as the service validates them: paths that
//! start with `/`, languages it supports, and indexes only on paths the policy lists — and
//! what a full-text index keeps of a document.
//!
//! Per indexed path a document has **postings** ([`postings`]): its length in words and each
//! distinct stem with its term frequency, the stem spelled as the start of the term
//! `stem \x01` ([`stem_span`]'s low bound) so that a stem's postings sort together wherever
//! they are kept. The server keeps them in segments of its own (see its
//! `indexes::text_segments`), and each document's lengths (the total words BM25 averages)
//! under the id of [`lengths_path`] in its directory entry (`indexes::text_lengths`).

use super::policy::Seg;
use super::term::{self, Span};
use crate::sql::ctx::TextLanguages;
use crate::sql::fulltext::{analyze, Language, LANGUAGES};
use serde_json::{Map, Value};

/// The first segment of the paths full-text entries live under (no JSON property of a
/// document reaches them: documents are walked from their own properties).
const POSTINGS: &str = "\u{0}fulltext";
const LENGTHS: &str = "\u{0}fulltext-length";
const SEGMENTS: &str = "\u{0}fulltext-segments";
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

/// The index path under which a text path's posting segments are kept.
pub fn segments_path(segs: &[Seg]) -> Vec<Seg> {
    under(SEGMENTS, segs)
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

/// The length a length entry's term holds (the layout before `indexes::text_lengths`: a
/// store's first start reads them once).
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

/// One document's postings under one indexed path: its length in words, and each distinct
/// stem (as the low bound of its [`stem_span`]) with its term frequency, in stem order.
#[derive(Debug, Clone, PartialEq)]
pub struct TextPostings {
    /// The index of the path in the policy's full-text paths.
    pub path: usize,
    pub length: u32,
    pub stems: Vec<(Vec<u8>, u32)>,
}

/// The postings of `doc` for each indexed path that holds a string (other values are not
/// text). Stems longer than a word of any language, or holding `\x01`, are left out: they
/// stay findable by evaluation, which every query with such a word falls back to.
pub fn postings(doc: &Value, paths: &[(Vec<Seg>, Language)]) -> Vec<TextPostings> {
    let mut out = Vec::new();
    for (i, (segs, lang)) in paths.iter().enumerate() {
        let Some(Value::String(text)) = value_at(doc, segs) else {
            continue;
        };
        let words = analyze(text, *lang);
        let mut sorted: Vec<&str> = words.iter().map(String::as_str).collect();
        sorted.sort_unstable();
        let mut stems = Vec::new();
        for run in sorted.chunk_by(|a, b| a == b) {
            let stem = run[0];
            if stem.len() <= MAX_TERM && !stem.contains('\u{1}') {
                stems.push((stem_key(stem), run.len() as u32));
            }
        }
        out.push(TextPostings {
            path: i,
            length: words.len().min(u32::MAX as usize) as u32,
            stems,
        });
    }
    out
}

/// A stem as its postings are kept: the low bound of its [`stem_span`] (`stem \x01` as the
/// start of a string term), built without the intermediate string. The stem holds no
/// `\x01`.
pub fn stem_key(stem: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(stem.len() + 2);
    k.push(term::STRING);
    for &b in stem.as_bytes() {
        k.push(b);
        if b == 0 {
            k.push(0xFF);
        }
    }
    k.push(1);
    k
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
        let doc = json!({"t": "Swimmers swim; the swimmer swims!"});
        let p = postings(&doc, &paths);
        // "swimmer" twice and "swim" twice, of four terms.
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].length, 4);
        let tfs: Vec<u32> = p[0].stems.iter().map(|s| s.1).collect();
        assert_eq!(tfs, vec![2, 2]);
        let span = stem_span("swim");
        let inside: Vec<_> = p[0]
            .stems
            .iter()
            .filter(|(t, _)| *t >= span.lo && *t < span.hi)
            .collect();
        assert_eq!(inside.len(), 1, "swim's span holds swim, not swimmer");
        for stem in ["swim", "déjà", "x\u{0}y", ""] {
            assert_eq!(stem_key(stem), stem_span(stem).lo, "{stem:?}");
        }
        // A length as strata kept it in an index entry before (a store's first start moves
        // them): a number term.
        assert_eq!(parse_length(&term::encode(&Value::from(4u32))), Some(4));
        assert!(postings(&json!({"t": 5}), &paths).is_empty());
    }
}
