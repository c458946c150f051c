//! The top-level properties of a document's JSON text, read as slices without parsing the
//! values: how a write learns which properties of the version it replaces it changed. Entries
//! of a path-by-path index ([`crate::index::term`]) live under one top-level property each, so a
//! property whose text is the same in both versions has the same entries in both, and a
//! write need only diff the others (on the lean suite's upserts, which rewrite documents with
//! their own text, walking both versions whole was 9.7% of the server's CPU).
//!
//! Equal text is a sufficient test, not a necessary one: `1.0` and `1`, or a key spelled with
//! an escape in one text and without in the other, count as changed, and the diff of their
//! entries then comes out empty. Anything this reader does not follow (not an object, a key
//! repeated) answers `None`, and the caller diffs the documents whole.

use std::collections::HashMap;

/// One top-level property whose text differs between two versions (or that only one has).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed<'a> {
    /// The property's name, unescaped.
    pub name: String,
    /// Its value's text in the old version, if there.
    pub old: Option<&'a [u8]>,
    /// Its value's text in the new version, if there.
    pub new: Option<&'a [u8]>,
}

/// The top-level properties that differ between the object texts `old` and `new`; `None`
/// when either is not a JSON object this reader follows (see the module's doc).
pub fn changed<'a>(old: &'a [u8], new: &'a [u8]) -> Option<Vec<Changed<'a>>> {
    let (old, new) = (members(old)?, members(new)?);
    let keys = Keys::of(&old)?;
    let mut seen = vec![false; old.len()];
    let mut out = Vec::new();
    let mut added: Vec<&[u8]> = Vec::new();
    for (key, text) in &new {
        match keys.find(key) {
            // A name the new text repeats.
            Some(i) if seen[i] => return None,
            Some(i) => {
                seen[i] = true;
                if old[i].1 != *text {
                    out.push(Changed {
                        name: name_of(key)?,
                        old: Some(old[i].1),
                        new: Some(text),
                    });
                }
            }
            None if added.contains(key) => return None,
            None => {
                added.push(key);
                out.push(Changed {
                    name: name_of(key)?,
                    old: None,
                    new: Some(text),
                });
            }
        }
    }
    for (i, (key, text)) in old.iter().enumerate() {
        if seen[i] {
            continue;
        }
        // A name the old text repeats: the search finds its first place only.
        if keys.find(key) != Some(i) {
            return None;
        }
        out.push(Changed {
            name: name_of(key)?,
            old: Some(text),
            new: None,
        });
    }
    Some(out)
}

/// The old version's keys, to find a new one's place among them. Documents have a few dozen
/// properties: a linear search beats hashing them until there are many.
enum Keys<'a> {
    Few(Vec<&'a [u8]>),
    Many(HashMap<&'a [u8], usize>),
}

impl<'a> Keys<'a> {
    /// `None` when a key repeats among many (a repeat among few is found by the caller).
    fn of(members: &[(&'a [u8], &'a [u8])]) -> Option<Self> {
        if members.len() <= 32 {
            return Some(Keys::Few(members.iter().map(|m| m.0).collect()));
        }
        let at: HashMap<&[u8], usize> = members.iter().enumerate().map(|(i, m)| (m.0, i)).collect();
        (at.len() == members.len()).then_some(Keys::Many(at))
    }

    /// The first place of key `k`.
    fn find(&self, k: &[u8]) -> Option<usize> {
        match self {
            Keys::Few(keys) => keys.iter().position(|x| *x == k),
            Keys::Many(at) => at.get(k).copied(),
        }
    }
}

/// A key's name from its text between the quotes.
fn name_of(raw: &[u8]) -> Option<String> {
    if !raw.contains(&b'\\') {
        return String::from_utf8(raw.to_vec()).ok();
    }
    let mut quoted = Vec::with_capacity(raw.len() + 2);
    quoted.push(b'"');
    quoted.extend_from_slice(raw);
    quoted.push(b'"');
    serde_json::from_slice(&quoted).ok()
}

/// The members of the object text `s`: each key's text between its quotes and its value's
/// text, in order.
fn members(s: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    let mut out = Vec::with_capacity(16);
    each_member(s, |k, v| {
        out.push((k, v));
        Some(())
    })?;
    Some(out)
}

/// Calls `f` with each member of the object text `json` in order: its key's text between the
/// quotes (escapes as written) and its value's text. `None` when the text is not an object
/// this reader follows or `f` returns `None`. Skipping a value is a `memchr` search for the
/// quotes and brackets that can end it: serde's `IgnoredAny` reads every digit of a skipped
/// 768-number embedding, which cost a vector query more than its graph search did. What is
/// skipped is not validated; stored documents are JSON this server wrote.
pub fn each_member<'a>(
    json: &'a [u8],
    mut f: impl FnMut(&'a [u8], &'a [u8]) -> Option<()>,
) -> Option<()> {
    let mut i = skip_ws(json, 0);
    if json.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    let mut first = true;
    loop {
        i = skip_ws(json, i);
        match json.get(i)? {
            b'}' if first => break,
            b'"' => {}
            _ => return None,
        }
        first = false;
        let end = string_end(json, i)?;
        let key = &json[i + 1..end - 1];
        i = skip_ws(json, end);
        if json.get(i) != Some(&b':') {
            return None;
        }
        let start = skip_ws(json, i + 1);
        let stop = value_end(json, start)?;
        f(key, &json[start..stop])?;
        i = skip_ws(json, stop);
        match json.get(i)? {
            b',' => i += 1,
            b'}' => break,
            _ => return None,
        }
    }
    (skip_ws(json, i + 1) == json.len()).then_some(())
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\n' | b'\r' | b'\t')) {
        i += 1;
    }
    i
}

/// Where the JSON value that starts at `i` ends (exclusive). An array ends at the bracket
/// that balances its own, counting only brackets outside strings (braces cannot unbalance
/// them); an object likewise with braces.
fn value_end(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => string_end(b, i),
        open @ (b'[' | b'{') => {
            let close = if open == b'[' { b']' } else { b'}' };
            let (mut at, mut depth) = (i, 0usize);
            loop {
                at += memchr::memchr3(b'"', open, close, &b[at..])?;
                match b[at] {
                    b'"' => {
                        at = string_end(b, at)?;
                        continue;
                    }
                    c if c == open => depth += 1,
                    _ => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                }
                at += 1;
            }
        }
        _ => {
            let n = b[i..]
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t'))
                .unwrap_or(b.len() - i);
            (n > 0).then_some(i + n)
        }
    }
}

/// The end (exclusive) of the string whose opening quote is at `i`.
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        j += memchr::memchr2(b'"', b'\\', b.get(j..)?)?;
        if b[j] == b'"' {
            return Some(j + 1);
        }
        j += 2;
        if j > b.len() {
            return None;
        }
    }
}

/// Copies the members of the object text `json` into `out` as `"key":value`, comma-separated
/// and without the braces, leaving out those whose key `skip` names; each value's whitespace
/// outside strings is dropped. Returns how many members the text has (the skipped ones
/// included) and whether any was copied; `None` when the text is not an object this reader
/// follows or a key is written with an escape (whose name only a parse would know). What the
/// caller stores: a write keeps the client's text rather than writing a parsed document again.
pub fn copy_members(
    json: &[u8],
    out: &mut Vec<u8>,
    skip: impl Fn(&[u8]) -> bool,
) -> Option<(usize, bool)> {
    let (mut n, mut copied) = (0usize, false);
    each_member(json, |k, v| {
        n += 1;
        if k.contains(&b'\\') {
            return None;
        }
        if skip(k) {
            return Some(());
        }
        if copied {
            out.push(b',');
        }
        copied = true;
        out.push(b'"');
        out.extend_from_slice(k);
        out.extend_from_slice(b"\":");
        push_compact(v, out)
    })?;
    Some((n, copied))
}

/// Appends value text `v` without its whitespace outside strings.
fn push_compact(v: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let spaced = |b: &[u8]| {
        memchr::memchr3(b' ', b'\n', b'\t', b).is_some() || memchr::memchr(b'\r', b).is_some()
    };
    if v.first() == Some(&b'"') || !spaced(v) {
        out.extend_from_slice(v);
        return Some(());
    }
    let mut i = 0;
    while let Some(&b) = v.get(i) {
        match b {
            b'"' => {
                let end = string_end(v, i)?;
                out.extend_from_slice(&v[i..end]);
                i = end;
            }
            b' ' | b'\n' | b'\r' | b'\t' => i += 1,
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(c: &[Changed<'_>]) -> Vec<String> {
        let mut n: Vec<String> = c.iter().map(|c| c.name.clone()).collect();
        n.sort();
        n
    }

    #[test]
    fn only_the_properties_whose_text_differs_are_changed() {
        let old = json!({"id": "a", "n": 1, "tags": ["x", {"y": "}"}], "s": "q\"}", "gone": null, "_etag": "\"1\""});
        let new = json!({"id": "a", "n": 2, "tags": ["x", {"y": "}"}], "s": "q\"}", "new": {"k": [1]}, "_etag": "\"2\""});
        let (o, n) = (old.to_string(), new.to_string());
        let c = changed(o.as_bytes(), n.as_bytes()).unwrap();
        assert_eq!(names(&c), ["_etag", "gone", "n", "new"]);
        let n_ = c.iter().find(|c| c.name == "n").unwrap();
        assert_eq!((n_.old, n_.new), (Some(&b"1"[..]), Some(&b"2"[..])));
        let gone = c.iter().find(|c| c.name == "gone").unwrap();
        assert_eq!((gone.old, gone.new), (Some(&b"null"[..]), None));
        let added = c.iter().find(|c| c.name == "new").unwrap();
        assert_eq!((added.old, added.new), (None, Some(&br#"{"k":[1]}"#[..])));
        assert_eq!(changed(o.as_bytes(), o.as_bytes()), Some(vec![]));
    }

    #[test]
    fn whitespace_escapes_and_order_are_read() {
        let old = br#" { "a\"b" : [ 1 , 2 ] , "c" : true } "#;
        let new = br#"{"c":true,"a\"b":[1,2]}"#;
        let c = changed(old, new).unwrap();
        // The same values spelled with other spaces count as changed; their entries agree.
        assert_eq!(names(&c), ["a\"b"]);
        assert_eq!(c[0].old, Some(&b"[ 1 , 2 ]"[..]));
    }

    #[test]
    fn what_it_cannot_follow_is_none() {
        for (old, new) in [
            (&b"[1]"[..], &b"{}"[..]),
            (b"{\"a\":1,\"a\":2}", b"{\"a\":1}"),
            (b"{\"a\":1}", b"{\"a\":1,\"a\":2}"),
            (b"{\"a\":}", b"{\"a\":1}"),
            (b"{\"a\":1", b"{\"a\":1}"),
            (b"{\"a\":1} x", b"{\"a\":1}"),
        ] {
            assert_eq!(changed(old, new), None, "{:?}", std::str::from_utf8(old));
        }
        assert_eq!(changed(b"{}", b"{ }"), Some(vec![]));
    }

    #[test]
    fn many_properties_are_matched_by_hash() {
        let mut old = serde_json::Map::new();
        for i in 0..100 {
            old.insert(format!("p{i}"), json!(i));
        }
        let mut new = old.clone();
        new.insert("p7".into(), json!("seven"));
        new.remove("p9");
        let (o, n) = (
            Value::Object(old).to_string(),
            Value::Object(new).to_string(),
        );
        let c = changed(o.as_bytes(), n.as_bytes()).unwrap();
        assert_eq!(names(&c), ["p7", "p9"]);
        let dup = format!("{{\"p1\":1,{}", &o[1..]);
        assert_eq!(changed(dup.as_bytes(), n.as_bytes()), None);
    }

    fn copied(text: &str, skip: &[&str]) -> Option<(String, usize, bool)> {
        let mut out = Vec::new();
        let (n, any) = copy_members(text.as_bytes(), &mut out, |k| {
            skip.iter().any(|s| s.as_bytes() == k)
        })?;
        Some((String::from_utf8(out).unwrap(), n, any))
    }

    #[test]
    fn members_are_copied_compact_and_in_order_without_the_skipped() {
        let text = "{ \"id\" : \"a b\",\n \"_rid\": \"x\", \"n\": [1, 2,\t{\"s\": \" in \\\" string \"}],\r\n \"e\":1.0E2 }";
        let (out, n, any) = copied(text, &["_rid"]).unwrap();
        assert_eq!(
            out,
            "\"id\":\"a b\",\"n\":[1,2,{\"s\":\" in \\\" string \"}],\"e\":1.0E2"
        );
        assert_eq!((n, any), (4, true));
        // The copy reads as the same document, the skipped member left out.
        let mut whole: serde_json::Map<String, Value> = serde_json::from_str(text).unwrap();
        whole.remove("_rid");
        let back: Value = serde_json::from_str(&format!("{{{out}}}")).unwrap();
        assert_eq!(back, Value::Object(whole));
        assert_eq!(copied("{}", &[]).unwrap(), (String::new(), 0, false));
        assert_eq!(
            copied("{\"_rid\":1}", &["_rid"]).unwrap(),
            (String::new(), 1, false)
        );
    }

    #[test]
    fn a_key_with_an_escape_or_a_text_not_followed_is_not_copied() {
        assert_eq!(copied("{\"_r\\u0069d\":1}", &["_rid"]), None);
        assert_eq!(copied("[1]", &[]), None);
        assert_eq!(copied("{\"a\":1", &[]), None);
        // A repeated key is copied twice: the caller compares the count with its parse's.
        assert_eq!(copied("{\"a\":1,\"a\":2}", &[]).unwrap().1, 2);
    }

    use serde_json::Value;
}
