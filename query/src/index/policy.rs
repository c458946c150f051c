//! A container's `indexingPolicy`, parsed and validated, and the one rule every other part of
//! indexing asks: is this document path indexed?
//!
//! Paths in a policy are written as the service writes them: `/*` (everything), `/a/b/?` (the
//! scalar value at `a.b`), `/a/*` (`a` and everything below it), `/tags/[]/?` (the elements of
//! the array `tags`), `/"odd name"/?` (quoted segments). When an included and an excluded path
//! both match, the more specific one wins (more segments; at equal length `?` is more specific
//! than `*`), and an exact tie goes to the exclusion — the service documents "the more precise
//! path wins" and refuses policies where the same path is both included and excluded.

use serde_json::Value;
use std::fmt;

/// `indexingMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Consistent,
    /// Accepted for compatibility; strata indexes synchronously, as `consistent`.
    Lazy,
    /// No index at all: queries with filters need the scan header.
    None,
}

/// One segment of a document path: a property name, or `[]` (any array element).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Seg {
    Name(String),
    Elements,
}

/// A policy path: its segments and whether it names one scalar value (`?`) or a subtree (`*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPattern {
    pub segs: Vec<Seg>,
    pub subtree: bool,
}

impl PathPattern {
    fn matches(&self, path: &[Seg], leaf: bool) -> bool {
        if self.subtree {
            path.starts_with(&self.segs)
        } else {
            leaf && path == self.segs.as_slice()
        }
    }

    /// Specificity: longer wins; at equal length a `?` path beats a `*` path.
    fn rank(&self) -> (usize, bool) {
        (self.segs.len(), !self.subtree)
    }
}

/// One path of a composite index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompositePath {
    pub segs: Vec<Seg>,
    pub descending: bool,
}

/// A parsed `indexingPolicy`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexingPolicy {
    pub mode: Mode,
    pub included: Vec<PathPattern>,
    pub excluded: Vec<PathPattern>,
    pub composite: Vec<Vec<CompositePath>>,
    pub spatial: Vec<PathPattern>,
    /// Paths with a full-text index and the language their text is analysed in (from the
    /// container's `fullTextPolicy`; filled by the server, which reads both).
    pub full_text: Vec<(Vec<Seg>, crate::sql::fulltext::Language)>,
}

/// System properties every stored document carries that the index leaves out: they are
/// derived from `_rid` (`_self`) or constant (`_attachments`), and `_etag` changes on every
/// write (the service excludes it by default and always adds that exclusion back).
const NEVER_INDEXED: [&str; 3] = ["_self", "_attachments", "_etag"];

impl Default for IndexingPolicy {
    fn default() -> Self {
        Self {
            mode: Mode::Consistent,
            included: vec![PathPattern {
                segs: Vec::new(),
                subtree: true,
            }],
            excluded: Vec::new(),
            composite: Vec::new(),
            spatial: Vec::new(),
            full_text: Vec::new(),
        }
    }
}

/// Why a policy was refused (the message of the 400).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError(pub String);

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl IndexingPolicy {
    /// Parses and validates a policy as stored on a container (after the service's defaults
    /// were filled in).
    pub fn from_json(v: &Value) -> Result<Self, PolicyError> {
        let Some(obj) = v.as_object() else {
            return Err(PolicyError(
                "The 'indexingPolicy' property must be a JSON object.".into(),
            ));
        };
        let mode = match obj.get("indexingMode") {
            None | Some(Value::Null) => Mode::Consistent,
            Some(Value::String(s)) => match s.to_ascii_lowercase().as_str() {
                "consistent" => Mode::Consistent,
                "lazy" => Mode::Lazy,
                "none" => Mode::None,
                _ => {
                    return Err(PolicyError(format!(
                    "The indexing mode '{s}' is invalid: use 'consistent' or 'none' (or 'lazy')."
                )))
                }
            },
            Some(other) => {
                return Err(PolicyError(format!(
                    "The indexing mode {other} is invalid: it must be a string."
                )))
            }
        };
        let included = path_list(obj.get("includedPaths"), "includedPaths")?;
        let excluded = path_list(obj.get("excludedPaths"), "excludedPaths")?;
        for i in &included {
            if excluded.iter().any(|e| e == i) {
                return Err(PolicyError(format!(
                    "The indexing path '{}' appears in both includedPaths and excludedPaths.",
                    print_pattern(i)
                )));
            }
        }
        let has_root = included
            .iter()
            .chain(&excluded)
            .any(|p| p.segs.is_empty() && p.subtree);
        if mode != Mode::None && !has_root {
            // The service's own message for a policy that names neither `/*` nor `/`.
            return Err(PolicyError(
                "The special mandatory indexing path \"/\" is not provided in any of the path type sets. Please provide this path in one of the sets.".into(),
            ));
        }
        let composite = composite_list(obj.get("compositeIndexes"))?;
        let mut spatial = Vec::new();
        if let Some(list) = obj.get("spatialIndexes") {
            let Some(list) = list.as_array() else {
                return Err(PolicyError("'spatialIndexes' must be an array.".into()));
            };
            for s in list {
                let path = s.get("path").and_then(Value::as_str).ok_or_else(|| {
                    PolicyError("Every spatial index needs a string 'path'.".into())
                })?;
                spatial.push(parse_pattern(path)?);
            }
        }
        Ok(Self {
            mode,
            included,
            excluded,
            composite,
            spatial,
            full_text: Vec::new(),
        })
    }

    /// Whether the value at `path` is indexed: a scalar (`leaf`) or an object or array node
    /// (which only `*` paths cover).
    pub fn indexes(&self, path: &[Seg], leaf: bool) -> bool {
        if self.mode == Mode::None {
            return false;
        }
        if let Some(Seg::Name(first)) = path.first() {
            if NEVER_INDEXED.contains(&first.as_str()) {
                return false;
            }
        }
        let best = |list: &[PathPattern]| {
            list.iter()
                .filter(|p| p.matches(path, leaf))
                .map(PathPattern::rank)
                .max()
        };
        match (best(&self.included), best(&self.excluded)) {
            (Some(i), Some(e)) => i > e,
            (Some(_), None) => true,
            _ => false,
        }
    }

    /// Whether nothing under the top-level property `name` is indexed, whatever the paths
    /// say: the system properties the service never indexes, or no indexing at all.
    pub fn skips_property(&self, name: &str) -> bool {
        self.mode == Mode::None || NEVER_INDEXED.contains(&name)
    }

    /// Whether anything is indexed at all.
    pub fn is_none(&self) -> bool {
        self.mode == Mode::None
    }

    /// The composite index that serves an ORDER BY over `items` (paths and directions), if
    /// any: the same paths in the same order with all directions equal or all inverted.
    pub fn composite_for(&self, items: &[(Vec<Seg>, bool)]) -> Option<&[CompositePath]> {
        self.composite
            .iter()
            .find(|c| {
                c.len() == items.len() && {
                    let same = c
                        .iter()
                        .zip(items)
                        .all(|(p, (s, d))| p.segs == *s && p.descending == *d);
                    let inverted = c
                        .iter()
                        .zip(items)
                        .all(|(p, (s, d))| p.segs == *s && p.descending != *d);
                    same || inverted
                }
            })
            .map(Vec::as_slice)
    }
}

fn path_list(v: Option<&Value>, name: &str) -> Result<Vec<PathPattern>, PolicyError> {
    let Some(v) = v else {
        return Ok(Vec::new());
    };
    let Some(list) = v.as_array() else {
        return Err(PolicyError(format!("'{name}' must be an array of paths.")));
    };
    list.iter()
        .map(|p| {
            let path = p.get("path").and_then(Value::as_str).ok_or_else(|| {
                PolicyError(format!("Every entry of '{name}' needs a string 'path'."))
            })?;
            parse_pattern(path)
        })
        .collect()
}

fn composite_list(v: Option<&Value>) -> Result<Vec<Vec<CompositePath>>, PolicyError> {
    let Some(v) = v else {
        return Ok(Vec::new());
    };
    let Some(list) = v.as_array() else {
        return Err(PolicyError(
            "'compositeIndexes' must be an array of arrays of paths.".into(),
        ));
    };
    let mut out = Vec::new();
    for c in list {
        let Some(paths) = c.as_array() else {
            return Err(PolicyError(
                "Every composite index must be an array of paths.".into(),
            ));
        };
        if paths.len() < 2 {
            return Err(PolicyError(
                "The number of paths in a composite index must be at least 2.".into(),
            ));
        }
        let mut idx = Vec::new();
        for p in paths {
            let path = p.get("path").and_then(Value::as_str).ok_or_else(|| {
                PolicyError("Every path of a composite index needs a string 'path'.".into())
            })?;
            let descending = match p.get("order").and_then(Value::as_str) {
                None => false,
                Some(o) if o.eq_ignore_ascii_case("ascending") => false,
                Some(o) if o.eq_ignore_ascii_case("descending") => true,
                Some(o) => {
                    return Err(PolicyError(format!(
                    "The composite index order '{o}' is invalid: use 'ascending' or 'descending'."
                )))
                }
            };
            // Composite paths name a scalar and are written without a trailing `/?`.
            let segs = parse_segments(path, path.len())?;
            if segs
                .iter()
                .any(|s| matches!(s, Seg::Name(n) if n == "*" || n == "?"))
            {
                return Err(PolicyError(format!(
                    "The composite index path '{path}' is invalid: composite paths name one property and end without '/?' or '/*'."
                )));
            }
            idx.push(CompositePath { segs, descending });
        }
        out.push(idx);
    }
    Ok(out)
}

/// The service's message for a path it cannot parse.
fn bad_path(path: &str, pos: usize) -> PolicyError {
    PolicyError(format!(
        "The indexing path '{path}' could not be accepted, failed near position {pos}. Please ensure that the path is a valid path. Common errors include invalid characters or absence of quotes around labels."
    ))
}

/// Parses a policy path (`/a/"b"/[]/?`, `/a/*`, `/*`, and the legacy `/` for the root).
pub fn parse_pattern(path: &str) -> Result<PathPattern, PolicyError> {
    if path == "/" {
        return Ok(PathPattern {
            segs: Vec::new(),
            subtree: true,
        });
    }
    let (body, subtree) = if let Some(b) = path.strip_suffix("/*") {
        (b, true)
    } else if let Some(b) = path.strip_suffix("/?") {
        (b, false)
    } else {
        return Err(bad_path(path, path.len()));
    };
    if !subtree && body.is_empty() {
        return Err(bad_path(path, 1));
    }
    let segs = parse_segments(path, body.len())?;
    Ok(PathPattern { segs, subtree })
}

/// The segments of `path[..end]`: `/name`, `/"quoted name"`, `/[]`.
fn parse_segments(path: &str, end: usize) -> Result<Vec<Seg>, PolicyError> {
    let body = &path[..end];
    let mut segs = Vec::new();
    let bytes = body.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'/' {
            return Err(bad_path(path, i));
        }
        i += 1;
        if i < bytes.len() && bytes[i] == b'"' {
            let start = i + 1;
            let Some(close) = body[start..].find('"') else {
                return Err(bad_path(path, i));
            };
            segs.push(Seg::Name(body[start..start + close].to_string()));
            i = start + close + 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && bytes[i] != b'/' {
            i += 1;
        }
        let name = &body[start..i];
        if name.is_empty() || name.contains(['"', ' ']) {
            return Err(bad_path(path, start));
        }
        segs.push(if name == "[]" {
            Seg::Elements
        } else {
            Seg::Name(name.to_string())
        });
    }
    Ok(segs)
}

/// A path as a policy writes it (`/a/b/?` or `/a/*`).
pub fn print_pattern(p: &PathPattern) -> String {
    let mut s = print_path(&p.segs);
    s.push_str(if p.subtree { "/*" } else { "/?" });
    if s == "//*" {
        return "/*".into();
    }
    s
}

/// A document path as the service prints it in index metrics (`/a/b`, `/tags/[]`).
pub fn print_path(segs: &[Seg]) -> String {
    let mut s = String::new();
    for seg in segs {
        s.push('/');
        match seg {
            Seg::Elements => s.push_str("[]"),
            Seg::Name(n) if n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => {
                s.push_str(n)
            }
            Seg::Name(n) => {
                s.push('"');
                s.push_str(n);
                s.push('"');
            }
        }
    }
    if s.is_empty() {
        s.push('/');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn segs(p: &str) -> Vec<Seg> {
        parse_segments(p, p.len()).unwrap()
    }

    fn policy(v: Value) -> IndexingPolicy {
        IndexingPolicy::from_json(&v).unwrap()
    }

    /// The precedence rules of the service's documentation ("Indexing policies in Azure Cosmos
    /// DB", section "Include and exclude strategy"): the more precise path wins.
    #[test]
    fn the_more_specific_path_wins() {
        let p = policy(json!({
            "includedPaths": [{"path": "/*"}, {"path": "/food/ingredients/nutrition/*"}],
            "excludedPaths": [{"path": "/food/ingredients/*"}, {"path": "/\"_etag\"/?"}]
        }));
        let cases: &[(&str, bool, bool)] = &[
            ("/name", true, true),
            ("/food/ingredients/sugar", true, false),
            ("/food/ingredients/nutrition/calories", true, true),
            ("/food/ingredients", false, false),
            ("/food", false, true),
            ("/_etag", true, false),
            ("/_self", true, false),
            ("/tags/[]", true, true),
        ];
        for (path, leaf, want) in cases {
            assert_eq!(p.indexes(&segs(path), *leaf), *want, "{path}");
        }
        let only = policy(json!({
            "includedPaths": [{"path": "/status/?"}, {"path": "/owner/*"}],
            "excludedPaths": [{"path": "/*"}]
        }));
        assert!(only.indexes(&segs("/status"), true));
        assert!(
            !only.indexes(&segs("/status"), false),
            "? covers scalars only"
        );
        assert!(!only.indexes(&segs("/status/x"), true));
        assert!(only.indexes(&segs("/owner/name"), true));
        assert!(!only.indexes(&segs("/other"), true));
    }

    #[test]
    fn invalid_policies_are_refused_with_the_services_messages() {
        let bad = [
            json!({"includedPaths": [{"path": "/a/?"}]}),
            json!({"includedPaths": [{"path": "/*"}, {"path": "a/?"}]}),
            json!({"includedPaths": [{"path": "/*"}, {"path": "/a"}]}),
            json!({"indexingMode": "sometimes", "includedPaths": [{"path": "/*"}]}),
            json!({"includedPaths": [{"path": "/*"}], "excludedPaths": [{"path": "/*"}]}),
            json!({"includedPaths": [{"path": "/*"}], "compositeIndexes": [[{"path": "/a"}]]}),
            json!({"includedPaths": [{"path": "/*"}],
                   "compositeIndexes": [[{"path": "/a"}, {"path": "/b", "order": "up"}]]}),
        ];
        for b in bad {
            assert!(IndexingPolicy::from_json(&b).is_err(), "{b}");
        }
        let e =
            IndexingPolicy::from_json(&json!({"includedPaths": [{"path": "/a/?"}]})).unwrap_err();
        assert!(e.0.contains("special mandatory indexing path"));
        // Legacy shapes the official SDK tests still send.
        policy(
            json!({"includedPaths": [{"path": "/"}], "excludedPaths": [{"path": "/\"systemMetadata\"/*"}]}),
        );
        policy(json!({"indexingMode": "none", "automatic": false}));
    }

    #[test]
    fn composite_indexes_serve_same_or_inverted_directions() {
        let p = policy(json!({
            "includedPaths": [{"path": "/*"}],
            "compositeIndexes": [[{"path": "/a", "order": "ascending"}, {"path": "/b", "order": "descending"}]]
        }));
        let a = segs("/a");
        let b = segs("/b");
        assert!(p
            .composite_for(&[(a.clone(), false), (b.clone(), true)])
            .is_some());
        assert!(p
            .composite_for(&[(a.clone(), true), (b.clone(), false)])
            .is_some());
        assert!(p
            .composite_for(&[(a.clone(), false), (b.clone(), false)])
            .is_none());
        assert!(p.composite_for(&[(b, true), (a, false)]).is_none());
    }

    #[test]
    fn paths_print_as_written() {
        for p in ["/*", "/a/?", "/a/b/*", "/tags/[]/?", "/\"odd name\"/?"] {
            assert_eq!(print_pattern(&parse_pattern(p).unwrap()), p);
        }
    }
}
