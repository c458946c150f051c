//! Reading only the part of a stored document a query looks at.
//!
//! Most queries touch a few top-level properties (`WHERE c.pk = @p`, `SELECT c.id ...`), yet
//! parsing a whole stored document into a `Value` allocates every string and object in it:
//! measured, that was the largest cost of a single-partition query over 1 KB items. When every
//! use of the document in a query is a property of its root (`c.name`, `c["name"]`, or deeper
//! paths under them), the document is parsed with everything else skipped in place. Queries
//! whose output is the document itself (`SELECT *`) still return the stored bytes unchanged.

use super::ast::{Expr, OrderBy, Projection, Query, Slot, SourceKind, DOC_SLOT};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// The top-level properties the bound `q` reads from a document, or `None` when it may read
/// the document as a whole (or when the analysis cannot tell). `raw_output`: rows are the
/// stored documents themselves, so `SELECT *` needs nothing. `ordered`: the ORDER BY's
/// properties too (not when an index has put the documents in order already).
pub fn root_fields(q: &Query, raw_output: bool, ordered: bool) -> Option<Vec<String>> {
    let from = q.from.as_ref()?;
    // Slots bound to the whole document: the container root, and the alias of `FROM c`.
    let mut whole: Vec<Slot> = vec![DOC_SLOT];
    let mut exprs: Vec<&Expr> = Vec::new();
    match &from.first.kind {
        SourceKind::Value(Expr::Slot(DOC_SLOT, _)) => whole.push(from.first.slot),
        SourceKind::Value(e) | SourceKind::Iterate(e) => exprs.push(e),
        SourceKind::Subquery(_) => return None,
    }
    for j in &from.joins {
        match &j.kind {
            SourceKind::Value(e) | SourceKind::Iterate(e) => exprs.push(e),
            SourceKind::Subquery(_) => return None,
        }
    }
    exprs.extend(q.where_.iter());
    exprs.extend(q.group_by.iter());
    exprs.extend(q.aggregates.iter().map(|(_, e)| e));
    match &q.select.projection {
        Projection::Star if raw_output => {}
        Projection::Star => return None,
        Projection::Value(e) => exprs.push(e),
        Projection::List(items) => exprs.extend(items.iter().map(|i| &i.expr)),
    }
    match &q.order_by {
        Some(OrderBy::Items(items)) if ordered => exprs.extend(items.iter().map(|i| &i.expr)),
        Some(OrderBy::Rank(e)) if ordered => exprs.push(e),
        _ => {}
    }
    let mut fields = BTreeSet::new();
    let (mut uses, mut as_property, mut opaque) = (0usize, 0usize, false);
    for e in exprs {
        e.walk(&mut |x| match x {
            Expr::Slot(s, _) if whole.contains(s) => uses += 1,
            Expr::Member(base, name) => {
                if let Expr::Slot(s, _) = base.as_ref() {
                    if whole.contains(s) {
                        as_property += 1;
                        fields.insert(name.clone());
                    }
                }
            }
            Expr::Index(base, key) => {
                if let (Expr::Slot(s, _), Expr::Lit(Value::String(name))) =
                    (base.as_ref(), key.as_ref())
                {
                    if whole.contains(s) {
                        as_property += 1;
                        fields.insert(name.clone());
                    }
                }
            }
            // Subqueries are not walked into; they may use the document in any way.
            Expr::Exists(_) | Expr::ArraySub(_) | Expr::Scalar(_) => opaque = true,
            _ => {}
        });
    }
    (!opaque && uses == as_property).then(|| fields.into_iter().collect())
}

/// Parses a stored document keeping only the top-level `fields` (sorted); everything else is
/// skipped without being allocated.
pub fn parse_fields(json: &[u8], fields: &[String]) -> serde_json::Result<Value> {
    if let Some(v) = scan_fields(json, fields) {
        return Ok(v);
    }
    let mut de = serde_json::Deserializer::from_slice(json);
    let v = Only(fields).deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

/// [`parse_fields`] by finding each top-level property's extent
/// ([`crate::members::each_member`]) and parsing the wanted ones alone. `None` when the
/// text is anything but an object with keys free of escapes, or when a wanted value does not
/// parse: then serde's path reads it (and reports its errors).
fn scan_fields(json: &[u8], fields: &[String]) -> Option<Value> {
    let mut out = Map::new();
    crate::members::each_member(json, |key, value| {
        if key.contains(&b'\\') {
            return None;
        }
        let key = std::str::from_utf8(key).ok()?;
        if let Ok(k) = fields.binary_search_by(|f| f.as_str().cmp(key)) {
            let v = serde_json::from_slice(value).ok()?;
            out.insert(fields[k].clone(), v);
        }
        Some(())
    })?;
    Some(Value::Object(out))
}

struct Only<'a>(&'a [String]);

impl<'de> DeserializeSeed<'de> for Only<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Only<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON document")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(wanted) = map.next_key_seed(FieldIndex(self.0))? {
            match wanted {
                Some(i) => {
                    let v: Value = map.next_value()?;
                    out.insert(self.0[i].clone(), v);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(out))
    }
}

/// A key, looked up among the wanted fields without being copied: its index if wanted.
struct FieldIndex<'a>(&'a [String]);

impl<'de> DeserializeSeed<'de> for FieldIndex<'_> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for FieldIndex<'_> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a property name")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Option<usize>, E> {
        Ok(self.0.binary_search_by(|f| f.as_str().cmp(key)).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields_of(sql: &str) -> Option<Vec<String>> {
        let p = super::super::prepare(sql, &[], None).unwrap();
        root_fields(&p.query, p.raw_documents, true)
    }

    #[test]
    fn finds_the_properties_a_query_reads() {
        assert_eq!(
            fields_of("SELECT * FROM c WHERE c.pk = 'a' AND c.n.x > 1"),
            Some(vec!["n".into(), "pk".into()])
        );
        assert_eq!(
            fields_of("SELECT TOP 10 c.id FROM c WHERE c.UserId = 'u' ORDER BY c.ts"),
            Some(vec!["UserId".into(), "id".into(), "ts".into()])
        );
        assert_eq!(
            fields_of("SELECT VALUE COUNT(1) FROM c WHERE c.x > 5"),
            Some(vec!["x".into()])
        );
        assert_eq!(
            fields_of("SELECT t FROM c JOIN t IN c.tags"),
            Some(vec!["tags".into()])
        );
        assert_eq!(fields_of("SELECT * FROM c"), Some(vec![]));
    }

    /// Rows an index has put in order read no ORDER BY property.
    #[test]
    fn rows_in_order_leave_the_order_by_out() {
        let sql = "SELECT TOP 10 c.id FROM c ORDER BY RANK FullTextScore(c.text, 'fox')";
        let p = super::super::prepare(sql, &[], None).unwrap();
        assert_eq!(p.fields, Some(vec!["id".into(), "text".into()]));
        assert_eq!(p.row_fields, Some(vec!["id".into()]));
    }

    #[test]
    fn whole_document_uses_read_everything() {
        assert_eq!(fields_of("SELECT VALUE c FROM c"), None);
        assert_eq!(fields_of("SELECT * FROM c WHERE IS_DEFINED(c)"), None);
        assert_eq!(fields_of("SELECT c.id FROM c WHERE c[c.k] = 1"), None);
        assert_eq!(
            fields_of("SELECT c.id FROM c WHERE EXISTS(SELECT VALUE t FROM t IN c.tags)"),
            None
        );
    }

    /// The scan and serde's path agree on every document, whatever it nests, escapes or
    /// spaces; documents the scan does not take (escaped keys, not an object, trailing text)
    /// go to serde's path.
    #[test]
    fn the_scan_reads_what_serde_reads() {
        let docs: [&[u8]; 9] = [
            br#"{"id":"1","v":[0.10000000149011612,-2e-7,3,[4,[5]]],"pk":"a"}"#,
            br#" { "id" : "x\"]}" , "s":"[{\\", "v" : [ 1 , "]" , {"a":"}"} ] , "pk" : null } "#,
            br#"{"pk":{"deep":[{"x":"}]"}],"y":{}},"id":true,"v":[],"n":-0.5e3}"#,
            r#"{"id":"\u00e9t\u00e9","pk":"café","v":[1.5]}"#.as_bytes(),
            br#"{}"#,
            br#"{"a\"b":1,"id":"2"}"#,
            br#"[1,2]"#,
            br#"{"id":"1"} x"#,
            br#"{"id":"1","pk":"a","id":"2"}"#,
        ];
        let wanted: Vec<String> = vec!["id".into(), "pk".into()];
        for doc in docs {
            let mut de = serde_json::Deserializer::from_slice(doc);
            let serde = Only(&wanted)
                .deserialize(&mut de)
                .and_then(|v| de.end().map(|_| v));
            let scan = scan_fields(doc, &wanted);
            match (&serde, &scan) {
                (Ok(a), Some(b)) => assert_eq!(a, b, "{}", String::from_utf8_lossy(doc)),
                (_, None) => {}
                (Err(e), Some(b)) => panic!("serde failed ({e}), the scan read {b}"),
            }
            assert_eq!(parse_fields(doc, &wanted).ok(), serde.ok());
        }
        assert!(scan_fields(docs[0], &wanted).is_some());
        assert!(scan_fields(docs[1], &wanted).is_some());
        assert!(scan_fields(docs[5], &wanted).is_none(), "an escaped key");
    }

    #[test]
    fn parses_only_the_listed_properties() {
        let doc = br#"{"id":"1","pk":"a","pad":"xxxxxxxx","n":{"x":[1,2,{"y":null}]},"z":true}"#;
        let v = parse_fields(doc, &["n".into(), "pk".into()]).unwrap();
        assert_eq!(v, json!({"pk": "a", "n": {"x": [1, 2, {"y": null}]}}));
        assert_eq!(parse_fields(doc, &[]).unwrap(), json!({}));
        assert!(parse_fields(b"{\"a\":1", &[]).is_err());
        assert!(parse_fields(b"{\"a\":1} x", &[]).is_err());
        // Escaped keys are compared decoded.
        let v = parse_fields(br#"{"p\u006b":1}"#, &["pk".into()]).unwrap();
        assert_eq!(v, json!({"pk": 1}));
    }
}
