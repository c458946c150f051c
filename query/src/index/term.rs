//! Index terms: a document's indexed values as byte strings whose byte order is Cosmos's
//! value order (null < false < true < numbers < strings; arrays and objects after them), and
//! the entries a document contributes to the index.
//!
//! Every term is self-delimiting, so the server can append the document's key after it and
//! still find where the term ends. Numbers are the IEEE bits made order-preserving (what `=`
//! and ORDER BY compare is the double). Strings longer than [`MAX_STRING`] bytes keep their
//! first bytes and a "truncated" end marker: such a term only narrows the candidates, and
//! the query re-checks the document (ties between truncated terms are sorted from the
//! documents themselves).

use super::policy::{IndexingPolicy, Seg};
use serde_json::Value;

pub const NULL: u8 = 0x01;
pub const FALSE: u8 = 0x02;
pub const TRUE: u8 = 0x03;
pub const NUMBER: u8 = 0x04;
pub const STRING: u8 = 0x05;
/// An array at this path (its elements are indexed under `[]`).
pub const ARRAY: u8 = 0x06;
/// An object at this path (its properties are indexed below it).
pub const OBJECT: u8 = 0x07;

/// Longest string prefix a term holds.
pub const MAX_STRING: usize = 128;

/// A term's encoding of one value. Arrays and objects encode as their type marker only.
pub fn encode(v: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    encode_into(v, &mut out);
    out
}

pub fn encode_into(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Null => out.push(NULL),
        Value::Bool(false) => out.push(FALSE),
        Value::Bool(true) => out.push(TRUE),
        Value::Number(n) => {
            out.push(NUMBER);
            out.extend_from_slice(&number_bits(n.as_f64().unwrap_or(0.0)));
        }
        Value::String(s) => encode_string(s.as_bytes(), out),
        Value::Array(_) => out.push(ARRAY),
        Value::Object(_) => out.push(OBJECT),
    }
}

/// Whether the term encodes its value exactly (the index alone can decide `=` on it).
pub fn is_exact(v: &Value) -> bool {
    match v {
        Value::String(s) => s.len() <= MAX_STRING,
        Value::Array(_) | Value::Object(_) => false,
        _ => true,
    }
}

/// Order-preserving bits of a double: flip the sign bit of positives, every bit of negatives.
pub fn number_bits(x: f64) -> [u8; 8] {
    let x = if x == 0.0 { 0.0 } else { x };
    let b = x.to_bits();
    let o = if b >> 63 == 1 { !b } else { b | (1 << 63) };
    o.to_be_bytes()
}

/// String terms: bytes with 0x00 escaped as 0x00 0xFF, ended by 0x00 0x01 (complete) or
/// 0x00 0x02 (truncated), so a prefix orders before its extensions.
fn encode_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(STRING);
    let (body, truncated) = if s.len() > MAX_STRING {
        (&s[..MAX_STRING], true)
    } else {
        (s, false)
    };
    for &b in body {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, if truncated { 2 } else { 1 }]);
}

/// The smallest term after every string term that starts with `prefix` (`STARTSWITH`).
pub fn string_prefix_bounds(prefix: &str) -> (Vec<u8>, Vec<u8>) {
    let mut lo = vec![STRING];
    for &b in prefix.as_bytes() {
        lo.push(b);
        if b == 0 {
            lo.push(0xFF);
        }
    }
    let mut hi = lo.clone();
    // Every continuation of the prefix is a byte below 0xFF, an escaped 0x00 (0x00 0xFF), or
    // an end marker (0x00 0x01/0x02): all below 0xFF 0xFF.
    hi.extend_from_slice(&[0xFF, 0xFF]);
    (lo, hi)
}

/// Length of the term at the start of `key`, if it is one.
pub fn term_len(key: &[u8]) -> Option<usize> {
    match *key.first()? {
        NULL | FALSE | TRUE | ARRAY | OBJECT => Some(1),
        NUMBER => (key.len() >= 9).then_some(9),
        STRING => {
            let mut i = 1;
            while i + 1 < key.len() {
                if key[i] == 0 {
                    match key[i + 1] {
                        0xFF => i += 2,
                        1 | 2 => return Some(i + 2),
                        _ => return None,
                    }
                } else {
                    i += 1;
                }
            }
            None
        }
        _ => None,
    }
}

/// The bounds of all terms of one type (`IS_NUMBER`-like scans and `IS_DEFINED`).
pub fn type_bounds(tag: u8) -> (Vec<u8>, Vec<u8>) {
    (vec![tag], vec![tag + 1])
}

/// One index entry of a document: the path's id (see [`path_id`]) and the term.
pub type Entry = (u64, Vec<u8>);

/// The id of a document path: the hash of its canonical string (see [`path_key`]). Entries
/// carry it instead of the path, so a key stays short whatever the path's length.
pub fn path_id(segs: &[Seg]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(path_key(segs).as_bytes())
}

/// The canonical string of a document path: segments as `/name` (with `~`, `/` and `[`
/// escaped as `~0`, `~1`, `~2`) and `/[]`.
pub fn path_key(segs: &[Seg]) -> String {
    let mut s = String::new();
    for seg in segs {
        push_segment(&mut s, seg);
    }
    s
}

fn push_segment(s: &mut String, seg: &Seg) {
    s.push('/');
    match seg {
        Seg::Elements => s.push_str("[]"),
        Seg::Name(n) => push_name(s, n),
    }
}

fn push_name(s: &mut String, n: &str) {
    for c in n.chars() {
        match c {
            '~' => s.push_str("~0"),
            '/' => s.push_str("~1"),
            '[' => s.push_str("~2"),
            c => s.push(c),
        }
    }
}

/// Term bounds inside one path: keys `lo <= k < hi` (each key is term, then document key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub lo: Vec<u8>,
    pub hi: Vec<u8>,
}

impl Span {
    /// Exactly the entries of one term.
    pub fn point(t: Vec<u8>) -> Self {
        let mut hi = t.clone();
        hi.push(0xFF);
        Span { lo: t, hi }
    }
}

/// Every index entry of `doc` under `policy`: one per indexed scalar (array elements under
/// `[]`) and one type marker per indexed non-root array or object, sorted and without
/// duplicates.
pub fn entries(doc: &Value, policy: &IndexingPolicy) -> Vec<Entry> {
    let mut out = Vec::new();
    if policy.is_none() {
        return out;
    }
    let mut w = Walk {
        policy,
        segs: Vec::new(),
        key: String::new(),
        out: &mut out,
    };
    w.value(doc);
    out.sort_unstable();
    out.dedup();
    out
}

/// [`entries`] of a document given as its JSON text, read straight from the text without
/// building it as a value: how a write that replaces a version learns what that version's
/// index holds (parsing the stored version into a tree, then walking it, was 6.5% of a
/// durable upsert's profile; `strata-bench --suite steps` times both on a 1 KB document).
/// The text is one a server stored (serialized from a value, so no name repeats within an
/// object); the entries are those [`entries`] gives the value.
pub fn entries_of_json(
    json: &[u8],
    policy: &IndexingPolicy,
) -> Result<Vec<Entry>, serde_json::Error> {
    let mut out = Vec::new();
    if policy.is_none() {
        return Ok(out);
    }
    let mut w = Walk {
        policy,
        segs: Vec::new(),
        key: String::new(),
        out: &mut out,
    };
    let mut de = serde_json::Deserializer::from_slice(json);
    serde::de::DeserializeSeed::deserialize(&mut w, &mut de)?;
    de.end()?;
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The entries under the document's top-level property `name`, whose value is `v`, appended to
/// `out` unsorted: [`entries`] of a document is the union of these over its properties, so a
/// write diffs only the properties it changed (see [`crate::members`]).
pub fn member_entries(name: &str, v: &Value, policy: &IndexingPolicy, out: &mut Vec<Entry>) {
    if policy.skips_property(name) {
        return;
    }
    let mut w = Walk::under(name, policy, out);
    w.value(v);
}

/// [`member_entries`] of a value given as its JSON text (see [`entries_of_json`]).
pub fn member_entries_of_json(
    name: &str,
    json: &[u8],
    policy: &IndexingPolicy,
    out: &mut Vec<Entry>,
) -> Result<(), serde_json::Error> {
    if policy.skips_property(name) {
        return Ok(());
    }
    let mut w = Walk::under(name, policy, out);
    let mut de = serde_json::Deserializer::from_slice(json);
    serde::de::DeserializeSeed::deserialize(&mut w, &mut de)?;
    de.end()
}

/// The walk over a document: the current path both as segments (for the policy) and as its
/// canonical string (for the id), pushed and popped together so no entry allocates a path.
struct Walk<'a> {
    policy: &'a IndexingPolicy,
    segs: Vec<Seg>,
    key: String,
    out: &'a mut Vec<Entry>,
}

impl<'a> Walk<'a> {
    /// A walk that starts at the top-level property `name`.
    fn under(name: &str, policy: &'a IndexingPolicy, out: &'a mut Vec<Entry>) -> Self {
        let mut w = Walk {
            policy,
            segs: Vec::new(),
            key: String::new(),
            out,
        };
        w.enter(Seg::Name(name.to_string()));
        w
    }
}

impl Walk<'_> {
    fn emit(&mut self, leaf: bool, term: Vec<u8>) {
        if !self.segs.is_empty() && self.policy.indexes(&self.segs, leaf) {
            let id = xxhash_rust::xxh3::xxh3_64(self.key.as_bytes());
            self.out.push((id, term));
        }
    }

    fn enter(&mut self, seg: Seg) -> usize {
        let len = self.key.len();
        push_segment(&mut self.key, &seg);
        self.segs.push(seg);
        len
    }

    fn leave(&mut self, len: usize) {
        self.segs.pop();
        self.key.truncate(len);
    }

    fn value(&mut self, v: &Value) {
        match v {
            Value::Object(m) => {
                self.emit(false, vec![OBJECT]);
                for (k, child) in m {
                    let len = self.enter(Seg::Name(k.clone()));
                    self.value(child);
                    self.leave(len);
                }
            }
            Value::Array(items) => {
                self.emit(false, vec![ARRAY]);
                let len = self.enter(Seg::Elements);
                for child in items {
                    self.value(child);
                }
                self.leave(len);
            }
            scalar => self.emit(true, encode(scalar)),
        }
    }

    fn number(&mut self, x: f64) {
        let mut t = Vec::with_capacity(9);
        t.push(NUMBER);
        t.extend_from_slice(&number_bits(x));
        self.emit(true, t);
    }
}

/// The walk over JSON text ([`entries_of_json`]): the same entries as [`Walk::value`], each
/// value visited as the parser meets it. Numbers arrive as the value would hold them (an
/// integer as `i64` or `u64`, anything else as `f64`) and become the same double.
impl<'de> serde::de::DeserializeSeed<'de> for &mut Walk<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for &mut Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON document")
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        self.emit(true, vec![NULL]);
        Ok(())
    }

    fn visit_bool<E>(self, b: bool) -> Result<(), E> {
        self.emit(true, vec![if b { TRUE } else { FALSE }]);
        Ok(())
    }

    fn visit_i64<E>(self, n: i64) -> Result<(), E> {
        self.number(n as f64);
        Ok(())
    }

    fn visit_u64<E>(self, n: u64) -> Result<(), E> {
        self.number(n as f64);
        Ok(())
    }

    fn visit_f64<E>(self, x: f64) -> Result<(), E> {
        self.number(x);
        Ok(())
    }

    fn visit_str<E>(self, s: &str) -> Result<(), E> {
        let mut t = Vec::with_capacity(s.len().min(MAX_STRING) + 3);
        encode_string(s.as_bytes(), &mut t);
        self.emit(true, t);
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.emit(false, vec![ARRAY]);
        let len = self.enter(Seg::Elements);
        while seq.next_element_seed(&mut *self)?.is_some() {}
        self.leave(len);
        Ok(())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.emit(false, vec![OBJECT]);
        while let Some(name) = map.next_key::<String>()? {
            let len = self.enter(Seg::Name(name));
            map.next_value_seed(&mut *self)?;
            self.leave(len);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::value::order_cmp;
    use serde_json::json;
    use std::cmp::Ordering;

    #[test]
    fn term_order_is_cosmos_value_order() {
        let values = [
            json!(null),
            json!(false),
            json!(true),
            json!(-1e300),
            json!(-2.5),
            json!(-0.0),
            json!(0),
            json!(1),
            json!(1.5),
            json!(10),
            json!(9007199254740993u64),
            json!(""),
            json!("\u{0}"),
            json!("a"),
            json!("a\u{0}"),
            json!("ab"),
            json!("b"),
            json!("é"),
        ];
        for a in &values {
            for b in &values {
                let want = order_cmp(Some(a), Some(b));
                let got = encode(a).cmp(&encode(b));
                assert_eq!(got, want, "{a} vs {b}");
            }
        }
        assert_eq!(encode(&json!(-0.0)), encode(&json!(0)));
    }

    #[test]
    fn terms_delimit_themselves() {
        for v in [
            json!(null),
            json!(3.5),
            json!("a\u{0}b"),
            json!("x".repeat(400)),
        ] {
            let mut k = encode(&v);
            let n = k.len();
            k.extend_from_slice(b"0A1B\0id");
            assert_eq!(term_len(&k), Some(n), "{v}");
        }
    }

    #[test]
    fn long_strings_keep_their_prefix_order() {
        let long_a = json!(format!("{}a", "x".repeat(300)));
        let long_b = json!(format!("{}b", "x".repeat(300)));
        assert_eq!(encode(&long_a), encode(&long_b));
        assert!(!is_exact(&long_a));
        assert_eq!(
            encode(&json!("x".repeat(MAX_STRING))).cmp(&encode(&long_a)),
            Ordering::Less
        );
    }

    #[test]
    fn prefix_bounds_cover_exactly_the_extensions() {
        let (lo, hi) = string_prefix_bounds("ab");
        for (s, inside) in [
            ("ab", true),
            ("abc", true),
            ("ab\u{0}", true),
            ("aa", false),
            ("ac", false),
            ("a", false),
        ] {
            let t = encode(&json!(s));
            assert_eq!(t >= lo && t < hi, inside, "{s}");
        }
    }

    #[test]
    fn entries_of_the_text_are_the_entries_of_the_value() {
        let docs = [
            json!({"id": "1", "a": {"b": 2, "c": [1, 2.5, -0.0, "x", null, true, false, [], {}]}}),
            json!({"id": "e\u{0}", "a/b": {"~[": -7}, "big": 18446744073709551615u64, "neg": -9223372036854775808i64}),
            json!({"id": "long", "s": "y".repeat(300), "esc": "tab\tquote\"é\u{1F600}", "n": 1e300, "f": 0.1}),
            json!({"id": "arr", "m": [[1, [2, {"k": "v"}]], {"x": [null]}], "_ts": 1700000000, "_etag": "\"0\""}),
            json!({}),
        ];
        let policies = [
            IndexingPolicy::default(),
            IndexingPolicy::from_json(&json!({
                "includedPaths": [{"path": "/a/*"}, {"path": "/m/[]/?"}],
                "excludedPaths": [{"path": "/*"}, {"path": "/a/c/*"}],
            }))
            .unwrap(),
            IndexingPolicy::from_json(&json!({"indexingMode": "none"})).unwrap(),
        ];
        for p in &policies {
            for d in &docs {
                let text = serde_json::to_vec(d).unwrap();
                assert_eq!(entries_of_json(&text, p).unwrap(), entries(d, p), "{d}");
                // The document's entries are its top-level properties' entries together.
                let (mut of_values, mut of_texts) = (Vec::new(), Vec::new());
                for (name, v) in d.as_object().unwrap() {
                    member_entries(name, v, p, &mut of_values);
                    let t = serde_json::to_vec(v).unwrap();
                    member_entries_of_json(name, &t, p, &mut of_texts).unwrap();
                }
                for e in [&mut of_values, &mut of_texts] {
                    e.sort_unstable();
                    e.dedup();
                }
                assert_eq!(of_values, entries(d, p), "{d}");
                assert_eq!(of_texts, of_values, "{d}");
            }
        }
        assert!(entries_of_json(b"{\"a\": ", &IndexingPolicy::default()).is_err());
        assert!(entries_of_json(b"{} x", &IndexingPolicy::default()).is_err());
    }

    #[test]
    fn documents_index_leaves_and_nodes() {
        let p = IndexingPolicy::default();
        let doc =
            json!({"id": "1", "a": {"b": 2}, "tags": ["x", "y", "x"], "_etag": "e", "_self": "s"});
        let e = entries(&doc, &p);
        let id = |p: &str| {
            let segs = crate::index::policy::parse_pattern(&format!("{p}/?"))
                .unwrap()
                .segs;
            path_id(&segs)
        };
        // "x" twice under /tags/[] is one entry.
        let mut want: Vec<u64> = ["/a", "/a/b", "/id", "/tags", "/tags/[]", "/tags/[]"]
            .iter()
            .map(|p| id(p))
            .collect();
        want.sort_unstable();
        let mut got: Vec<u64> = e.iter().map(|(p, _)| *p).collect();
        got.sort_unstable();
        assert_eq!(got, want);
        assert_eq!(
            path_key(&[Seg::Name("a/b".into()), Seg::Elements]),
            "/a~1b/[]"
        );
        assert!(entries(
            &doc,
            &IndexingPolicy::from_json(&json!({"indexingMode": "none"})).unwrap()
        )
        .is_empty());
    }
}
