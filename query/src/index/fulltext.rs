//! A container's full-text policy (`fullTextPolicy`) and full-text indexes
//! (`indexingPolicy.fullTextIndexes`), validated as the service validates them: paths that
//! start with `/`, languages it supports, and indexes only on paths the policy lists.

use crate::sql::ctx::TextLanguages;
use crate::sql::fulltext::{Language, LANGUAGES};
use serde_json::{Map, Value};

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
}
