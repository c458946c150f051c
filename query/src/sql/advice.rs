//! Query advice, as the service's Query Advisor gives it (learn.microsoft.com/cosmos-db/query/
//! advisor, and one page per rule, `…/advisor/qa1000` to `qa1009`): asked for with
//! `x-ms-cosmos-populatequeryadvice: true`, the first page of a query carries
//! `x-ms-cosmos-query-advice`, a URL-encoded JSON array of `{"Id": "QA10xx", "Params": []}`
//! — the rules the query's text matches. The SDKs hold each rule's message and link; the
//! service sends only the ids.
//!
//! | Id | The query uses |
//! |---|---|
//! | QA1000 | `ARRAY_CONTAINS(…, …, true)` (a partial match) |
//! | QA1001 | `DISTINCT` with a `JOIN` |
//! | QA1002 | `CONTAINS` |
//! | QA1003 | `STARTSWITH(…, …, true)` or `StringEquals(…, …, true)` (ignoring case) |
//! | QA1004 | `ENDSWITH(…, …, true)` |
//! | QA1005 | a scalar expression other than a property path in `GROUP BY` |
//! | QA1006 | `UPPER` or `LOWER` compared in the `WHERE` clause |
//! | QA1007 | `GetCurrentDateTime` (not its `Static` form) |
//! | QA1008 | `GetCurrentTicks` |
//! | QA1009 | `GetCurrentTimestamp` |
//!
//! Each id is given once, in the order the query first matches it, the `WHERE` clause read
//! first: the reference's example `SELECT GetCurrentTicks() FROM c WHERE
//! GetCurrentTimestamp() > 10` gets QA1009, then QA1008.

use super::ast::{BinOp, Expr, OrderBy, Projection, Query, SourceKind};
use super::functions::{ArrayFn, DateFn, Func, StrFn};
use serde_json::Value;

/// The rule ids `q` matches (see the module's doc), each once.
pub fn advice(q: &Query) -> Vec<&'static str> {
    let mut ids = Vec::new();
    rules_of(q, &mut ids);
    ids
}

/// The header's value for `ids`: `[{"Id":…,"Params":[]},…]`, percent-encoded (spaces too,
/// as `%20`: the Python SDK's decoder does not read `+` as a space).
pub fn header_value(ids: &[&str]) -> String {
    let entries: Vec<Value> = ids
        .iter()
        .map(|id| serde_json::json!({"Id": id, "Params": []}))
        .collect();
    let json = Value::Array(entries).to_string();
    let mut out = String::with_capacity(json.len() * 2);
    for b in json.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn add(ids: &mut Vec<&'static str>, id: &'static str) {
    if !ids.contains(&id) {
        ids.push(id);
    }
}

/// The rules of one query level and the subqueries in it.
fn rules_of(q: &Query, ids: &mut Vec<&'static str>) {
    if let Some(w) = &q.where_ {
        exprs(w, true, ids);
    }
    match &q.select.projection {
        Projection::Star => {}
        Projection::Value(e) => exprs(e, false, ids),
        Projection::List(items) => items.iter().for_each(|i| exprs(&i.expr, false, ids)),
    }
    if let Some(from) = &q.from {
        if q.select.distinct && !from.joins.is_empty() {
            add(ids, "QA1001");
        }
        for s in std::iter::once(&from.first).chain(&from.joins) {
            match &s.kind {
                SourceKind::Value(e) | SourceKind::Iterate(e) => exprs(e, false, ids),
                SourceKind::Subquery(sub) => rules_of(sub, ids),
            }
        }
    }
    for g in &q.group_by {
        if !is_path(g) {
            add(ids, "QA1005");
        }
        exprs(g, false, ids);
    }
    match &q.order_by {
        Some(OrderBy::Items(items)) => items.iter().for_each(|i| exprs(&i.expr, false, ids)),
        Some(OrderBy::Rank(e)) => exprs(e, false, ids),
        None => {}
    }
}

/// The rules an expression matches; `filter`: it is (part of) the WHERE clause.
fn exprs(e: &Expr, filter: bool, ids: &mut Vec<&'static str>) {
    let lit_true = |a: &[Expr], i: usize| matches!(a.get(i), Some(Expr::Lit(Value::Bool(true))));
    let case_folded = |e: &Expr| matches!(e, Expr::Call(Func::Str(StrFn::Upper | StrFn::Lower), _));
    e.walk(&mut |x| match x {
        Expr::Call(Func::Array(ArrayFn::ArrayContains), a) if lit_true(a, 2) => add(ids, "QA1000"),
        Expr::Call(Func::Str(StrFn::Contains), _) => add(ids, "QA1002"),
        Expr::Call(Func::Str(StrFn::StartsWith | StrFn::StringEquals), a) if lit_true(a, 2) => {
            add(ids, "QA1003")
        }
        Expr::Call(Func::Str(StrFn::EndsWith), a) if lit_true(a, 2) => add(ids, "QA1004"),
        Expr::Binary(op, l, r)
            if filter
                && matches!(
                    op,
                    BinOp::Eq | BinOp::Neq | BinOp::Lt | BinOp::Gt | BinOp::Le | BinOp::Ge
                )
                && (case_folded(l) || case_folded(r)) =>
        {
            add(ids, "QA1006")
        }
        Expr::Call(Func::Date(DateFn::GetCurrentDateTime), _) => add(ids, "QA1007"),
        Expr::Call(Func::Date(DateFn::GetCurrentTicks), _) => add(ids, "QA1008"),
        Expr::Call(Func::Date(DateFn::GetCurrentTimestamp), _) => add(ids, "QA1009"),
        Expr::Exists(q) | Expr::ArraySub(q) | Expr::Scalar(q) => rules_of(q, ids),
        _ => {}
    });
}

/// A property path: `c.a.b`, `c["a"]`, `c`.
fn is_path(e: &Expr) -> bool {
    match e {
        Expr::Slot(..) | Expr::Ident(_) => true,
        Expr::Member(x, _) => is_path(x),
        Expr::Index(x, i) => is_path(x) && matches!(**i, Expr::Lit(_)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(sql: &str) -> Vec<&'static str> {
        advice(&crate::sql::prepare(sql, &[], None).expect("prepare").query)
    }

    /// The queries of the Python SDK's end-to-end advice tests (`test_populate_query_advice`
    /// in `test_query.py` and its async and cross-partition copies) and the reference's.
    #[test]
    fn each_rule_as_the_sdk_tests_and_the_reference_ask() {
        for (sql, want) in [
            (r#"SELECT * FROM c WHERE ARRAY_CONTAINS(c.tags, {"name": "python"}, true)"#, vec!["QA1000"]),
            (r#"SELECT * FROM c WHERE CONTAINS(c.name, "test")"#, vec!["QA1002"]),
            (r#"SELECT * FROM c WHERE STARTSWITH(c.name, "test", true)"#, vec!["QA1003"]),
            (r#"SELECT * FROM c WHERE ENDSWITH(c.name, "document", true)"#, vec!["QA1004"]),
            ("SELECT * FROM c WHERE c.timestamp < GetCurrentDateTime()", vec!["QA1007"]),
            ("SELECT * FROM c WHERE c.ticks < GetCurrentTicks()", vec!["QA1008"]),
            ("SELECT * FROM c WHERE c.ts < GetCurrentTimestamp()", vec!["QA1009"]),
            ("SELECT GetCurrentTicks() FROM c WHERE GetCurrentTimestamp() > 10", vec!["QA1009", "QA1008"]),
            ("SELECT VALUE r.id FROM root r WHERE CONTAINS(r.name, 'Abc')", vec!["QA1002"]),
            ("SELECT DISTINCT t FROM c JOIN t IN c.tags", vec!["QA1001"]),
            ("SELECT LOWER(c.a) AS l, COUNT(1) AS n FROM c GROUP BY LOWER(c.a)", vec!["QA1005"]),
            ("SELECT * FROM c WHERE LOWER(c.name) = 'abc'", vec!["QA1006"]),
            ("SELECT * FROM c WHERE EXISTS(SELECT VALUE t FROM t IN c.tags WHERE CONTAINS(t.name, 'p'))", vec!["QA1002"]),
            // The forms the rules do not cover.
            ("SELECT * FROM c WHERE STARTSWITH(c.name, 'test') AND ARRAY_CONTAINS(c.tags, 'x')", vec![]),
            ("SELECT c.a.b FROM c WHERE c.ts < GetCurrentTimestampStatic() GROUP BY c.a.b", vec![]),
            ("SELECT LOWER(c.name) FROM c", vec![]),
        ] {
            assert_eq!(ids(sql), want, "{sql}");
        }
    }

    #[test]
    fn the_header_is_url_encoded_json_the_sdks_decode() {
        let v = header_value(&["QA1008", "QA1009"]);
        assert_eq!(
            v,
            "%5B%7B%22Id%22%3A%22QA1008%22%2C%22Params%22%3A%5B%5D%7D%2C%7B%22Id%22%3A%22QA1009%22%2C%22Params%22%3A%5B%5D%7D%5D"
        );
        assert_eq!(header_value(&[]), "%5B%5D");
    }
}
