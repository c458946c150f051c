//! The partition key model: container definitions, key values, and their effective partition keys.
//!
//! A container declares one path (`Hash`, version 1 or 2) or up to three paths (`MultiHash`,
//! version 2). A [`PartitionKey`] is the list of values found at those paths; a key with fewer
//! components than the definition has paths is a *prefix* (MultiHash only) and denotes a range of
//! logical partitions. [`epk`] turns either into the hex strings the official SDKs compute.

pub mod epk;
pub mod murmur;

use serde_json::{Map, Value};
use std::fmt;

pub use epk::{EpkRange, EPK_MAX, EPK_MIN};

/// The most levels a hierarchical partition key may have.
pub const MAX_LEVELS: usize = 3;

/// Why a partition key definition or value was rejected. The messages are shown to users as-is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PkError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, PkError> {
    Err(PkError(msg.into()))
}

/// `Hash` (one path) or `MultiHash` (hierarchical, 1 to 3 paths).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionKind {
    Hash,
    MultiHash,
}

impl PartitionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PartitionKind::Hash => "Hash",
            PartitionKind::MultiHash => "MultiHash",
        }
    }
}

/// A container's partition key definition, as declared in its `partitionKey` property.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionKeyDefinition {
    /// The paths as written (`/tenantId`), kept for echoing back to clients.
    pub paths: Vec<String>,
    /// Each path split into property names (`/a/b` -> `["a", "b"]`).
    pub segments: Vec<Vec<String>>,
    pub kind: PartitionKind,
    /// Hash version: 1 (legacy; the default when absent) or 2.
    pub version: u8,
    /// Set for containers created without a partition key: Cosmos gives those a hidden
    /// `/_partitionKey` path and clients address their only logical partition with `[]`.
    pub system_key: bool,
    /// Whether the definition named its version: the service echoes `version` only then (a
    /// definition without one is version 1, or 2 for `MultiHash`).
    pub version_given: bool,
}

impl PartitionKeyDefinition {
    /// A definition for one path, `Hash` version 2.
    pub fn hash_v2(path: &str) -> Self {
        Self::new(&[path], PartitionKind::Hash, 2).expect("static path is valid")
    }

    /// A hierarchical (`MultiHash`, version 2) definition.
    pub fn multi_hash(paths: &[&str]) -> Result<Self, PkError> {
        Self::new(paths, PartitionKind::MultiHash, 2)
    }

    /// Builds and validates a definition.
    pub fn new(paths: &[&str], kind: PartitionKind, version: u8) -> Result<Self, PkError> {
        if paths.is_empty() {
            return err("The partition key definition must contain at least one path.");
        }
        if paths.len() > MAX_LEVELS {
            return err(format!(
                "Too many partition key paths: the definition has {}; at most {MAX_LEVELS} are supported.",
                paths.len()
            ));
        }
        if kind == PartitionKind::Hash && paths.len() > 1 {
            return err(
                "A partition key definition of kind 'Hash' must have exactly one path; use kind 'MultiHash' for hierarchical partition keys.",
            );
        }
        if version != 1 && version != 2 {
            return err(format!(
                "The partition key definition version {version} is not supported; use 1 or 2."
            ));
        }
        if kind == PartitionKind::MultiHash && version != 2 {
            return err("A partition key definition of kind 'MultiHash' requires version 2.");
        }
        let mut segments = Vec::with_capacity(paths.len());
        for (i, p) in paths.iter().enumerate() {
            let segs = parse_path(p)?;
            if paths[..i].contains(p) {
                return err(format!("The partition key path '{p}' is repeated."));
            }
            segments.push(segs);
        }
        Ok(Self {
            paths: paths.iter().map(|s| s.to_string()).collect(),
            segments,
            kind,
            version,
            system_key: false,
            version_given: true,
        })
    }

    /// The definition Cosmos gives a container created without one.
    pub fn system_default() -> Self {
        let mut d = Self::new(&["/_partitionKey"], PartitionKind::Hash, 2).expect("valid");
        d.system_key = true;
        d
    }

    /// Parses the `partitionKey` property of a container body.
    pub fn from_json(v: &Value) -> Result<Self, PkError> {
        let obj = match v {
            Value::Object(o) => o,
            _ => return err("The 'partitionKey' property must be a JSON object."),
        };
        let paths: Vec<&str> = match obj.get("paths") {
            Some(Value::Array(a)) => {
                let mut out = Vec::with_capacity(a.len());
                for p in a {
                    match p {
                        Value::String(s) => out.push(s.as_str()),
                        _ => return err("Every partition key path must be a string."),
                    }
                }
                out
            }
            None | Some(Value::Null) => {
                return err("The partition key definition must contain 'paths'.")
            }
            _ => return err("The partition key 'paths' must be an array of strings."),
        };
        let kind = match obj.get("kind") {
            None | Some(Value::Null) => {
                if paths.len() > 1 {
                    PartitionKind::MultiHash
                } else {
                    PartitionKind::Hash
                }
            }
            Some(Value::String(s)) if s.eq_ignore_ascii_case("hash") => PartitionKind::Hash,
            Some(Value::String(s)) if s.eq_ignore_ascii_case("multihash") => {
                PartitionKind::MultiHash
            }
            Some(Value::String(s)) => {
                return err(format!(
                    "The partition key kind '{s}' is not supported; use 'Hash' or 'MultiHash'."
                ))
            }
            Some(_) => return err("The partition key 'kind' must be a string."),
        };
        let version = match obj.get("version") {
            // A missing version means V1, as the service and both SDKs assume... except that a
            // MultiHash definition only exists in version 2.
            None | Some(Value::Null) => {
                if kind == PartitionKind::MultiHash {
                    2
                } else {
                    1
                }
            }
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v @ (1 | 2)) => v as u8,
                _ => {
                    return err(format!(
                        "The partition key definition version {n} is not supported; use 1 or 2."
                    ))
                }
            },
            Some(_) => return err("The partition key 'version' must be a number."),
        };
        let mut def = Self::new(&paths, kind, version)?;
        def.system_key = matches!(obj.get("systemKey"), Some(Value::Bool(true)));
        def.version_given = !matches!(obj.get("version"), None | Some(Value::Null));
        Ok(def)
    }

    /// The `partitionKey` property as the service echoes it: kind filled in, version when the
    /// definition named one.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert(
            "paths".into(),
            Value::Array(self.paths.iter().cloned().map(Value::String).collect()),
        );
        m.insert("kind".into(), Value::String(self.kind.as_str().into()));
        if self.version_given {
            m.insert("version".into(), Value::from(self.version));
        }
        if self.system_key {
            m.insert("systemKey".into(), Value::Bool(true));
        }
        Value::Object(m)
    }

    /// Number of levels of a full key.
    pub fn levels(&self) -> usize {
        self.paths.len()
    }

    /// Reads the partition key of a document. Absent paths (and non-primitive values, which the
    /// SDKs also treat as absent) are `Undefined`.
    pub fn extract(&self, doc: &Value) -> PartitionKey {
        match doc {
            Value::Object(m) => self.extract_map(m),
            // No property of a non-object exists: every level is absent.
            _ => PartitionKey(vec![PkComponent::Undefined; self.segments.len()]),
        }
    }

    /// [`Self::extract`] for a document held as a JSON object (no copy of the document).
    pub fn extract_map(&self, doc: &Map<String, Value>) -> PartitionKey {
        let comps = self
            .segments
            .iter()
            .map(|segs| {
                let Some((first, rest)) = segs.split_first() else {
                    return PkComponent::Undefined;
                };
                let Some(mut cur) = doc.get(first.as_str()) else {
                    return PkComponent::Undefined;
                };
                for s in rest {
                    match cur.get(s.as_str()) {
                        Some(v) => cur = v,
                        None => return PkComponent::Undefined,
                    }
                }
                PkComponent::from_json(cur).unwrap_or(PkComponent::Undefined)
            })
            .collect();
        PartitionKey(comps)
    }

    /// Checks that `pk` addresses exactly one logical partition of this container.
    pub fn check_full(&self, pk: &PartitionKey) -> Result<(), PkError> {
        if self.system_key && pk.0.is_empty() {
            return Ok(());
        }
        if pk.0.len() != self.levels() {
            return err(format!(
                "Partition key provided either doesn't correspond to definition in the collection or doesn't match partition key field values specified in the document. The container has {} partition key path(s) but the key has {} component(s).",
                self.levels(),
                pk.0.len()
            ));
        }
        Ok(())
    }

    /// Checks that `pk` is a full key or (for MultiHash) a non-empty prefix.
    pub fn check_prefix(&self, pk: &PartitionKey) -> Result<(), PkError> {
        if pk.0.len() > self.levels() {
            return err(format!(
                "The partition key has {} component(s) but the container has only {} partition key path(s).",
                pk.0.len(),
                self.levels()
            ));
        }
        if pk.0.len() < self.levels() && self.kind != PartitionKind::MultiHash && !self.system_key {
            return err("A partition key prefix is only valid on a container with a hierarchical (MultiHash) partition key.");
        }
        Ok(())
    }
}

/// Splits a partition key path (`/a/b`, `/"odd name"`) into property names.
fn parse_path(p: &str) -> Result<Vec<String>, PkError> {
    let bad = |why: &str| {
        err(format!(
            "The partition key path '{p}' is invalid: {why}. Paths look like '/tenantId' or '/address/city'."
        ))
    };
    let Some(rest) = p.strip_prefix('/') else {
        return bad("it must start with '/'");
    };
    if rest.is_empty() {
        return bad("it names no property");
    }
    let mut segs = Vec::new();
    let mut chars = rest.chars().peekable();
    loop {
        let mut seg = String::new();
        // A name with special characters is quoted, in double or single quotes
        // (`/"first level"/'le/vel2'`), as the SDKs' path parsers accept.
        if let Some(quote) = chars.next_if(|c| *c == '"' || *c == '\'') {
            let mut closed = false;
            while let Some(c) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some(e) => seg.push(e),
                        None => return bad("an escape is unfinished"),
                    },
                    c if c == quote => {
                        closed = true;
                        break;
                    }
                    c => seg.push(c),
                }
            }
            if !closed {
                return bad("a quoted name is not closed");
            }
            match chars.next() {
                None => {
                    segs.push(seg);
                    return Ok(segs);
                }
                Some('/') => {}
                Some(_) => return bad("text follows a quoted name"),
            }
        } else {
            loop {
                match chars.next() {
                    None => {
                        if seg.is_empty() {
                            return bad("it has an empty segment");
                        }
                        segs.push(seg);
                        return Ok(segs);
                    }
                    Some('/') => break,
                    Some(c @ ('*' | '?' | '[' | ']')) => {
                        return bad(&format!("the character '{c}' is not allowed"))
                    }
                    Some(c) => seg.push(c),
                }
            }
            if seg.is_empty() {
                return bad("it has an empty segment");
            }
        }
        segs.push(seg);
    }
}

/// One component of a partition key value.
#[derive(Debug, Clone, PartialEq)]
pub enum PkComponent {
    /// The path is absent from the document (`{}` on the wire; Python's `NonePartitionKeyValue`).
    Undefined,
    Null,
    Bool(bool),
    /// Every JSON number is an IEEE-754 double for partitioning purposes.
    Number(f64),
    String(String),
}

impl PkComponent {
    /// Converts a JSON primitive; objects other than `{}` and arrays are not key values.
    pub fn from_json(v: &Value) -> Option<Self> {
        Some(match v {
            Value::Null => PkComponent::Null,
            Value::Bool(b) => PkComponent::Bool(*b),
            Value::Number(n) => PkComponent::Number(n.as_f64()?),
            Value::String(s) => PkComponent::String(s.clone()),
            Value::Object(o) if o.is_empty() => PkComponent::Undefined,
            _ => return None,
        })
    }

    /// The JSON form used in the `x-ms-documentdb-partitionkey` header (`{}` for undefined).
    pub fn to_json(&self) -> Value {
        match self {
            PkComponent::Undefined => Value::Object(Map::new()),
            PkComponent::Null => Value::Null,
            PkComponent::Bool(b) => Value::Bool(*b),
            PkComponent::Number(n) => number_to_json(*n),
            PkComponent::String(s) => Value::String(s.clone()),
        }
    }

    /// Whether the value at a document path satisfies this header component. An absent level
    /// may be spelled `null` (Python) or `{}` (JS), so both match an undefined document value.
    pub fn matches_document(&self, doc_value: &PkComponent) -> bool {
        match (self, doc_value) {
            (PkComponent::Undefined | PkComponent::Null, PkComponent::Undefined) => true,
            (PkComponent::Number(a), PkComponent::Number(b)) => a == b,
            (a, b) => a == b,
        }
    }
}

/// Renders a double as JSON, as an integer when it is one (so `5` stays `5`, not `5.0`).
pub fn number_to_json(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9.007_199_254_740_992e15 && !(n == 0.0 && n.is_sign_negative())
    {
        Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n)
            .map(Value::Number)
            .unwrap_or(Value::Null)
    }
}

/// A partition key value: the components for the container's paths, in order. Fewer components
/// than paths make a prefix.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PartitionKey(pub Vec<PkComponent>);

impl PartitionKey {
    /// Parses the `x-ms-documentdb-partitionkey` header: a JSON array of primitives, where `{}`
    /// stands for an undefined component.
    pub fn from_header(text: &str) -> Result<Self, PkError> {
        if let Some(pk) = Self::plain_strings(text) {
            return Ok(pk);
        }
        let v: Value = serde_json::from_str(text.trim()).map_err(|e| {
            PkError(format!(
                "The partition key header '{text}' is not valid JSON: {e}. Expected a JSON array such as [\"tenant1\",\"user1\"]."
            ))
        })?;
        // The header is always an array (the SDKs send `["t1"]`, `[5]`, `[]`); the service
        // answers 400 to a bare value.
        if !v.is_array() {
            return err(format!(
                "The partition key header '{text}' must be a JSON array of the key's components, such as [\"tenant1\"] or [\"tenant1\",\"user1\"]."
            ));
        }
        Self::from_json_value(&v)
    }

    /// The header's key when it is an array of up to [`MAX_LEVELS`] strings without escapes
    /// (what the SDKs send for string keys, with or without spaces between tokens), read
    /// without a JSON tree: parsing the header through one was 1.6% of a point read's server
    /// CPU. Anything else is `None`, for the general reading and its messages.
    fn plain_strings<'a>(text: &'a str) -> Option<Self> {
        // Between tokens, JSON's whitespace only (the whole header is trimmed as before).
        let json_ws = |s: &'a str| s.trim_start_matches([' ', '\t', '\n', '\r']);
        let mut rest = json_ws(text.trim().strip_prefix('[')?);
        let mut comps = Vec::with_capacity(MAX_LEVELS);
        if let Some(end) = rest.strip_prefix(']') {
            return end.is_empty().then_some(PartitionKey(comps));
        }
        loop {
            let body = rest.strip_prefix('"')?;
            let close = body.find('"')?;
            let s = &body[..close];
            if s.bytes().any(|b| b == b'\\' || b < 0x20) || comps.len() == MAX_LEVELS {
                return None;
            }
            comps.push(PkComponent::String(s.to_string()));
            rest = json_ws(&body[close + 1..]);
            if let Some(end) = rest.strip_prefix(']') {
                return end.is_empty().then_some(PartitionKey(comps));
            }
            rest = json_ws(rest.strip_prefix(',')?);
        }
    }

    /// Parses a partition key given as JSON: an array of components, or a single primitive.
    pub fn from_json_value(v: &Value) -> Result<Self, PkError> {
        let items: Vec<&Value> = match v {
            Value::Array(a) => a.iter().collect(),
            other => vec![other],
        };
        if items.len() > MAX_LEVELS {
            return err(format!(
                "The partition key has {} components; at most {MAX_LEVELS} are supported.",
                items.len()
            ));
        }
        let mut comps = Vec::with_capacity(items.len());
        for it in items {
            match PkComponent::from_json(it) {
                Some(c) => comps.push(c),
                None => {
                    return err(format!(
                        "The partition key component {it} is invalid: components must be strings, numbers, booleans, null or {{}} (undefined)."
                    ))
                }
            }
        }
        Ok(PartitionKey(comps))
    }

    /// The header form, a compact JSON array with non-ASCII escaped as the SDKs send it.
    pub fn to_header(&self) -> String {
        let v = Value::Array(self.0.iter().map(PkComponent::to_json).collect());
        escape_non_ascii(&v.to_string())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for PartitionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_header())
    }
}

/// Escapes every non-ASCII character of serialized JSON as `\uXXXX` (UTF-16 units).
pub fn escape_non_ascii(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut buf = [0u16; 2];
            for u in c.encode_utf16(&mut buf) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn definition_defaults_and_validation() {
        let d = PartitionKeyDefinition::from_json(&json!({"paths": ["/pk"]})).unwrap();
        assert_eq!((d.kind, d.version), (PartitionKind::Hash, 1));
        let d = PartitionKeyDefinition::from_json(
            &json!({"paths": ["/a", "/b", "/c"], "kind": "MultiHash", "version": 2}),
        )
        .unwrap();
        assert_eq!(d.segments, vec![vec!["a"], vec!["b"], vec!["c"]]);
        for bad in [
            json!({"paths": ["/a", "/b", "/c", "/d"], "kind": "MultiHash", "version": 2}),
            json!({"paths": ["a"], "kind": "Hash", "version": 2}),
            json!({"paths": ["/a", "/b"], "kind": "MultiHash", "version": 1}),
            json!({"paths": ["/a", "/b"], "kind": "Hash", "version": 2}),
            json!({"paths": ["/a"], "kind": "Range"}),
            json!({"paths": []}),
            json!({"paths": ["/a//b"]}),
            json!({"paths": ["/a", "/a"], "kind": "MultiHash", "version": 2}),
        ] {
            assert!(PartitionKeyDefinition::from_json(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn quoted_path_segments() {
        assert_eq!(
            parse_path("/\"a b\"/c").unwrap(),
            vec!["a b".to_string(), "c".to_string()]
        );
        // The official SDK's tests use both quote styles, with the other quote, '*' and '/'
        // inside the name.
        assert_eq!(
            parse_path("/'first level\" 1*()'/'first le/vel2'").unwrap(),
            vec![
                "first level\" 1*()".to_string(),
                "first le/vel2".to_string()
            ]
        );
        assert_eq!(
            parse_path("/\"second level' 1*()\"/\"le/vel2\"").unwrap(),
            vec!["second level' 1*()".to_string(), "le/vel2".to_string()]
        );
        assert!(parse_path("/'open").is_err());
    }

    #[test]
    fn extraction_treats_missing_and_objects_as_undefined() {
        let d = PartitionKeyDefinition::multi_hash(&["/t", "/u/v", "/s"]).unwrap();
        let pk = d.extract(&json!({"t": "a", "u": {"v": 3}, "s": {"x": 1}}));
        assert_eq!(
            pk.0,
            vec![
                PkComponent::String("a".into()),
                PkComponent::Number(3.0),
                PkComponent::Undefined
            ]
        );
    }

    #[test]
    fn header_round_trip() {
        let pk = PartitionKey::from_header(r#"["t1", 5, null, {}]"#);
        assert!(pk.is_err(), "4 components are too many");
        let pk = PartitionKey::from_header(r#"["bü", 5.5, {}]"#).unwrap();
        assert_eq!(pk.to_header(), r#"["b\u00fc",5.5,{}]"#);
        assert!(PartitionKey::from_header("[[1]]").is_err());
        // Plain strings read without a JSON tree give what the general reading gives, and
        // anything else is left to it.
        for text in [
            r#"["a","b","c"]"#,
            r#" [ "a" , "b" ] "#,
            r#"["bü", ""]"#,
            "[]",
            r#"["a\"b"]"#,
            r#"["a\u0041"]"#,
            r#"["a","b","c","d"]"#,
            r#"["a",]"#,
            r#"["a"] x"#,
            r#"["a" "b"]"#,
            r#"["a""#,
            "[\"a\tb\"]",
            r#"["a", 5]"#,
            "[\u{a0}\"a\"]",
        ] {
            let general = serde_json::from_str::<Value>(text.trim())
                .ok()
                .filter(Value::is_array)
                .and_then(|v| PartitionKey::from_json_value(&v).ok());
            assert_eq!(PartitionKey::from_header(text).ok(), general, "{text}");
            if let Some(plain) = PartitionKey::plain_strings(text) {
                assert_eq!(Some(plain), general, "{text}");
            }
        }
        assert!(PartitionKey::from_header("[").is_err());
    }
}
