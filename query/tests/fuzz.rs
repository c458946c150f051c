//! Property tests over everything the query crate accepts from a client: SQL text, patch
//! bodies, partition key headers and continuation tokens. For any input: no panic, an answer
//! or a clean error, in bounded time. They run in CI with a fixed case count; set
//! `PROPTEST_CASES` higher for a longer search (and see `fuzz/README.md` for cargo-fuzz).

use proptest::prelude::*;
use serde_json::{json, Value};
use strata_query::sql::token::{Continuation, TokenKey};
use strata_query::sql::{prepare, prepare_condition, Ctx, Flow};

/// SQL-shaped text: fragments of the grammar glued at random, so the parser sees both
/// near-valid queries and nonsense, deep nesting and long chains included.
fn sql_text() -> impl Strategy<Value = String> {
    let frag = prop_oneof![
        Just("SELECT "),
        Just("VALUE "),
        Just("DISTINCT "),
        Just("TOP 3 "),
        Just("* "),
        Just("FROM c "),
        Just("JOIN t IN c.tags "),
        Just("WHERE "),
        Just("ORDER BY c.a "),
        Just("GROUP BY c.a "),
        Just("OFFSET 1 LIMIT 2 "),
        Just("c.a "),
        Just("c[\"b\"] "),
        Just("("),
        Just(")"),
        Just("["),
        Just("]"),
        Just("{\"k\": "),
        Just("}"),
        Just(", "),
        Just("NOT "),
        Just("AND "),
        Just("OR "),
        Just("+ "),
        Just("|| "),
        Just("= "),
        Just("?? "),
        Just("? 1 : 2 "),
        Just("IN (1, 2) "),
        Just("BETWEEN 1 AND 2 "),
        Just("LIKE 'a%' "),
        Just("'str' "),
        Just("12.5 "),
        Just("-"),
        Just("~"),
        Just("@p "),
        Just("true "),
        Just("null "),
        Just("undefined "),
        Just("COUNT(1) "),
        Just("ARRAY_LENGTH(c.tags) "),
        Just("REPLICATE('ab', 100) "),
        Just("REPLACE(c.s, 'a', 'bb') "),
        Just("CONCAT(c.s, c.s) "),
        Just("(SELECT VALUE x FROM x IN c.tags) "),
        Just("EXISTS(SELECT 1) "),
        Just("udf.f(1) "),
        Just("\u{0}"),
        Just("é"),
        Just("--"),
        Just("/*"),
        Just("\""),
    ];
    (
        prop::collection::vec(frag, 0..60),
        0usize..300,
        prop::sample::select(vec!["(", "NOT ", "[", "ABS(", "- "]),
    )
        .prop_map(|(parts, depth, nest)| format!("{}{}", nest.repeat(depth), parts.concat()))
}

fn doc() -> Value {
    json!({"id": "1", "a": 2, "s": "abc", "tags": ["x", "y", 3], "o": {"n": null}})
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn any_sql_text_parses_runs_or_fails_cleanly(text in sql_text()) {
        let params = vec![("p".to_string(), json!([1, "two", {"three": 3}]))];
        if let Ok(q) = prepare(&text, &params, None) {
            let _ = q.eval_doc(&doc(), &Ctx::new(0), &mut |_| Ok(Flow::Continue));
            let _ = q.run_over(&[doc(), json!({"id": "2"})], &Ctx::new(0));
            let _ = q.query.to_string();
            let _ = strata_query::sql::sdkplan::query_plan(&q, &[]);
        }
        let _ = prepare_condition(&text);
    }

    #[test]
    fn arbitrary_unicode_is_never_a_panic(text in "\\PC{0,200}") {
        let _ = prepare(&text, &[], None);
        let _ = prepare_condition(&text);
    }

    #[test]
    fn any_patch_body_applies_or_fails_cleanly(
        ops in prop::collection::vec((
            prop::sample::select(vec!["add", "set", "replace", "remove", "incr", "move", "bogus"]),
            "(/[a-z0-9~_-]{0,4}){0,4}",
            prop::option::of(prop_oneof![Just(json!(1)), Just(json!(1.7e308)), Just(json!(-1.7e308)), Just(json!("s")), Just(json!([1, [2]])), Just(json!({"k": {}})), Just(Value::Null)]),
        ), 0..12)
    ) {
        let body: Vec<Value> = ops
            .into_iter()
            .map(|(op, path, value)| {
                let mut o = json!({"op": op, "path": path, "from": "/a"});
                if let Some(v) = value {
                    o["value"] = v;
                }
                o
            })
            .collect();
        if let Ok(p) = strata_query::patch::parse(&Value::Array(body)) {
            let mut d = doc();
            if strata_query::patch::apply(&mut d, &p.operations, &["/id".to_string()]).is_ok() {
                // What a successful patch leaves must be storable and readable again.
                let text = d.to_string();
                prop_assert!(serde_json::from_str::<Value>(&text).is_ok());
                prop_assert!(!text.contains("\"\":"));
            }
        }
    }

    #[test]
    fn any_partition_key_header_parses_or_fails_cleanly(text in prop_oneof![
        "\\PC{0,40}",
        "\\[(\"[a-z]{0,3}\"|[0-9.e+-]{1,8}|null|true|\\{\\}|\\[\\]|,){0,6}\\]",
    ]) {
        if let Ok(pk) = strata_query::pk::PartitionKey::from_header(&text) {
            prop_assert!(text.trim_start().starts_with('['));
            let _ = format!("{pk:?}");
        }
    }

    #[test]
    fn no_token_but_the_servers_own_is_accepted(bytes in prop::collection::vec(any::<u8>(), 0..200), flip in 0usize..400) {
        let key = TokenKey::new([3; 32]);
        // Random bytes, as text and as base64: never a panic, never accepted.
        let as_text = String::from_utf8_lossy(&bytes).into_owned();
        prop_assert!(Continuation::decode(&as_text, "fp", &key).is_err());
        // A real token with one character changed is rejected.
        let real = Continuation { fp: "fp".into(), consumed: 3, pos: strata_query::sql::token::Position::Index { next: 3 } }
            .encode(&key);
        let mut t = real.clone().into_bytes();
        let i = flip % t.len();
        t[i] = if t[i] == b'A' { b'B' } else { b'A' };
        let edited = String::from_utf8(t).unwrap_or_default();
        if edited != real {
            prop_assert!(Continuation::decode(&edited, "fp", &key).is_err());
        }
    }
}

/// A search term: words, stop words, duplicates, empty strings, punctuation, other scripts.
fn term() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("lorem".to_string()),
        Just("the".to_string()),
        Just(String::new()),
        Just("ipsum dolor".to_string()),
        Just("naïve café".to_string()),
        Just("'".to_string()),
        "[a-z]{1,12}",
        "\\PC{0,16}",
    ]
}

/// One component of a ranking: a full-text score with some terms, or a vector distance with
/// options right or wrong.
fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::collection::vec(term(), 0..4).prop_map(|t| {
            let terms: Vec<String> = t.iter().map(|x| serde_json::to_string(x).unwrap_or_default()).collect();
            format!("FullTextScore(c.text{}{})", if terms.is_empty() { "" } else { ", " }, terms.join(", "))
        }),
        prop::sample::select(vec![
            "VectorDistance(c.v, @q)",
            "VectorDistance(c.v, @q, true)",
            "VectorDistance(c.v, @q, false, {'distanceFunction': 'euclidean'})",
            "VectorDistance(c.v, @q, false, {'distanceFunction': 'dotproduct', 'searchListSizeMultiplier': 1000})",
            "VectorDistance(c.v, [1, 2], false, {'distanceFunction': 42})",
        ])
        .prop_map(str::to_string),
    ]
}

/// Queries over the search operators: term lists of any length (past the 1,000 a call may
/// name), fusions of any number of components (past 16) with weights right or wrong, and
/// vector distances with any query vector; with the terms of its one call and the components
/// of its one fusion.
fn search_query() -> impl Strategy<Value = (String, usize, usize)> {
    let contains = (
        prop::sample::select(vec![
            "FullTextContains",
            "FullTextContainsAll",
            "FullTextContainsAny",
        ]),
        prop::collection::vec(term(), 0..8),
        0usize..1_300,
    )
        .prop_map(|(f, terms, repeat)| {
            let mut list: Vec<String> = terms
                .iter()
                .map(|t| serde_json::to_string(t).unwrap_or_default())
                .collect();
            list.extend((0..repeat).map(|i| format!("'w{}'", i % 97)));
            let n = list.len();
            let q = format!(
                "SELECT TOP 5 c.id FROM c WHERE {f}(c.text{}{})",
                if list.is_empty() { "" } else { ", " },
                list.join(", ")
            );
            (q, n, 0)
        });
    let fused = (
        prop::collection::vec(component(), 0..20),
        prop::option::of(prop::collection::vec(-3.0f64..3.0, 0..20)),
    )
        .prop_map(|(comps, weights)| {
            let mut args = comps.join(", ");
            if let Some(w) = weights {
                let w: Vec<String> = w.iter().map(|x| format!("{x}")).collect();
                args = format!("{args}, [{}]", w.join(", "));
            }
            (
                format!("SELECT TOP 5 c.id FROM c ORDER BY RANK RRF({args})"),
                0,
                comps.len(),
            )
        });
    let ranked =
        component().prop_map(|c| (format!("SELECT TOP 5 c.id FROM c ORDER BY RANK {c}"), 0, 0));
    let nearest = component().prop_map(|c| {
        (
            format!("SELECT TOP 5 c.id, {c} AS d FROM c ORDER BY {c}"),
            0,
            0,
        )
    });
    prop_oneof![contains, fused, ranked, nearest]
}

/// A query vector: right or wrong length, extreme, not numbers at all.
fn query_vector() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::collection::vec(-1.0f64..1.0, 0..8).prop_map(|v| json!(v)),
        Just(json!([1e30, 1e30, 1e30])),
        Just(json!([1, "two", null])),
        Just(json!("not a vector")),
        prop::collection::vec(-1e6f64..1e6, 0..2000).prop_map(|v| json!(v)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Search operators: a query is prepared or refused cleanly (more than 1,000 terms in a
    /// call, or more than 16 fused components, always refused), and one prepared evaluates
    /// over documents with and without a text and a vector without a panic.
    #[test]
    fn search_operators_prepare_run_or_fail_cleanly((text, terms, components) in search_query(), q in query_vector()) {
        let params = vec![("q".to_string(), q)];
        let prepared = prepare(&text, &params, None);
        if terms > strata_query::sql::limits::MAX_SEARCH_TERMS {
            prop_assert!(prepared.is_err(), "{} terms accepted", terms);
        }
        if components > strata_query::sql::limits::MAX_RANK_COMPONENTS {
            prop_assert!(prepared.is_err(), "{} components accepted", components);
        }
        if let Ok(p) = prepared {
            let docs = [
                json!({"id": "1", "text": "Lorem ipsum dolor sit amet, the café", "v": [0.5, -0.5, 1e30]}),
                json!({"id": "2", "text": 7, "v": "none"}),
                json!({"id": "3"}),
            ];
            for d in &docs {
                let _ = p.eval_doc(d, &Ctx::new(0), &mut |_| Ok(Flow::Continue));
            }
            let _ = p.run_over(&docs, &Ctx::new(0));
            let _ = p.query.to_string();
        }
    }
}
