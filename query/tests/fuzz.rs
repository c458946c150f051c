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
