//! Query text built to exhaust the stack or memory: every such text is a clean error (or a
//! correct answer), never a crash. Each construct is tried at the nesting limit, where it must
//! still work (parse, bind, plan, evaluate, print, rewrite for SDK query plans), and far past
//! it, where it must be rejected as too deep.

use serde_json::{json, Value};
use strata_query::sql::limits::{MAX_DEPTH, MAX_IN_LIST, MAX_JOINS, MAX_QUERY_BYTES};
use strata_query::sql::{prepare, Ctx, Flow, QueryError};

/// Parses, binds, plans and evaluates `sql` over one document; returns the rows.
fn run(sql: &str) -> Result<Vec<Value>, QueryError> {
    let q = prepare(sql, &[], None)?;
    let doc = json!({"id": "1", "a": 1, "s": "ab", "arr": [1, 2, 3], "o": {"a": {"a": 1}}});
    let mut rows = Vec::new();
    q.eval_doc(&doc, &Ctx::new(0), &mut |r| {
        rows.push(r.value.unwrap_or(Value::Null));
        Ok(Flow::Continue)
    })?;
    // Every later pass that walks the tree must cope with it too.
    let _ = q.query.to_string();
    let _ = strata_query::sql::sdkplan::query_plan(&q, &[]);
    Ok(rows)
}

fn nested(open: &str, inner: &str, close: &str, n: usize) -> String {
    format!("{}{inner}{}", open.repeat(n), close.repeat(n))
}

fn assert_too_deep(sql: &str) {
    match run(sql) {
        Err(e) => assert!(
            e.to_string().contains("nested too deeply"),
            "wrong error for a deep query: {e}"
        ),
        Ok(_) => panic!("a query past the nesting limit was accepted"),
    }
}

/// Constructs that recurse, as (prefix, inner, suffix) around `SELECT VALUE … FROM c`.
fn constructs() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    vec![
        ("parentheses", "(", "c.a", ")"),
        ("NOT", "NOT ", "true", ""),
        ("unary minus", "- ", "c.a", ""),
        ("bitwise not", "~ ", "c.a", ""),
        ("arrays", "[", "1", "]"),
        ("objects", "{\"k\": ", "1", "}"),
        ("function calls", "ABS(", "c.a", ")"),
        ("coalesce", "c.x ?? ", "1", ""),
        ("ternary", "true ? ", "1", " : 0"),
    ]
}

#[test]
fn every_nesting_construct_works_at_the_limit_and_is_rejected_past_it() {
    // The projection itself, `SELECT VALUE`, and the query sit at the first levels.
    let usable = MAX_DEPTH - 4;
    for (name, open, inner, close) in constructs() {
        let ok = format!("SELECT VALUE {} FROM c", nested(open, inner, close, usable));
        assert!(
            run(&ok).is_ok(),
            "{name} nested {usable} deep: {:?}",
            run(&ok).err()
        );
        for n in [MAX_DEPTH + 1, 5_000] {
            assert_too_deep(&format!(
                "SELECT VALUE {} FROM c",
                nested(open, inner, close, n)
            ));
        }
    }
}

#[test]
fn subqueries_nest_to_the_limit_and_no_further() {
    let sub = |n: usize| {
        format!(
            "SELECT VALUE {} FROM c",
            nested("(SELECT VALUE ", "c.a", ")", n)
        )
    };
    assert!(run(&sub(MAX_DEPTH / 2 - 2)).is_ok());
    assert_too_deep(&sub(500));
    let from = |n: usize| format!("{}c{}", "SELECT * FROM (".repeat(n), ")".repeat(n));
    assert_too_deep(&from(500));
}

#[test]
fn operator_chains_are_bounded_and_and_or_chains_are_not() {
    for op in ["+", "*", "||", "=", "&", "|", "^", "<<"] {
        let chain = |n: usize| {
            let terms: Vec<&str> = std::iter::repeat_n("c.a", n).collect();
            format!("SELECT VALUE {} FROM c", terms.join(&format!(" {op} ")))
        };
        assert!(run(&chain(100)).is_ok(), "{op} chain of 100");
        assert_too_deep(&chain(20_000));
    }
    // Generated filters of thousands of terms are ordinary; they become balanced trees.
    for op in ["AND", "OR"] {
        let terms: Vec<String> = (0..20_000).map(|i| format!("c.a != {i}")).collect();
        let sql = format!(
            "SELECT VALUE c.id FROM c WHERE {}",
            terms.join(&format!(" {op} "))
        );
        let rows = run(&sql).expect("long AND/OR chain");
        // c.a is 1: some `c.a != i` is false (AND), most are true (OR).
        assert_eq!(rows.len(), usize::from(op == "OR"), "{op}");
    }
    let path = |n: usize| format!("SELECT VALUE c{} FROM c", ".a".repeat(n));
    assert!(run(&path(100)).is_ok());
    assert_too_deep(&path(20_000));
    let index = |n: usize| format!("SELECT VALUE c{} FROM c", "[0]".repeat(n));
    assert_too_deep(&index(20_000));
}

#[test]
fn documented_size_limits() {
    let long = format!(
        "SELECT * FROM c WHERE c.s = '{}'",
        "x".repeat(MAX_QUERY_BYTES)
    );
    assert!(run(&long)
        .unwrap_err()
        .to_string()
        .contains("maximum allowed length"));
    let joins = |n: usize| {
        let mut q = "SELECT VALUE 1 FROM c".to_string();
        for i in 0..n {
            q.push_str(&format!(" JOIN j{i} IN c.arr"));
        }
        q
    };
    assert!(prepare(&joins(MAX_JOINS), &[], None).is_ok());
    assert!(prepare(&joins(MAX_JOINS + 1), &[], None)
        .unwrap_err()
        .to_string()
        .contains("JOINs"));
    let list = |n: usize| {
        let v: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        format!("SELECT * FROM c WHERE c.a IN ({})", v.join(","))
    };
    assert!(run(&list(MAX_IN_LIST)).is_ok());
    assert!(run(&list(MAX_IN_LIST + 1))
        .unwrap_err()
        .to_string()
        .contains("IN list"));
}

#[test]
fn patch_conditions_share_the_limits() {
    let deep = format!("FROM c WHERE {}", nested("(", "true", ")", 5_000));
    assert!(strata_query::sql::prepare_condition(&deep)
        .unwrap_err()
        .to_string()
        .contains("nested too deeply"));
}

#[test]
fn no_query_builds_an_unbounded_value() {
    // 114 bytes that used to allocate 3 GB: each REPLACE multiplies the string by 100.
    let hundred = "a".repeat(100);
    let amplify = format!(
        "SELECT VALUE LENGTH(REPLACE(REPLACE(REPLACE(REPLICATE('a', 10000), 'a', '{hundred}'), 'a', '{hundred}'), 'a', '{hundred}')) FROM c"
    );
    assert!(run(&amplify)
        .unwrap_err()
        .to_string()
        .contains("larger than"));
    // REPLICATE follows the service: more than 10,000 characters is undefined.
    assert_eq!(
        run("SELECT VALUE IS_DEFINED(REPLICATE('ab', 5001)) FROM c").unwrap(),
        vec![json!(false)]
    );
    // Doubling through arrays, concatenation and subqueries.
    // Nine doublings of 10,000 characters: 5 MB from about 12 KB of text.
    let mut arr = "[REPLICATE('a', 10000)]".to_string();
    let mut s = "REPLICATE('a', 10000)".to_string();
    let mut piped = s.clone();
    for _ in 0..9 {
        arr = format!("ARRAY_CONCAT({arr}, {arr})");
        s = format!("CONCAT({s}, {s})");
        piped = format!("({piped} || {piped})");
    }
    for sql in [
        format!("SELECT VALUE ARRAY_LENGTH({arr}) FROM c"),
        format!("SELECT VALUE LENGTH({s}) FROM c"),
        format!("SELECT VALUE LENGTH({piped}) FROM c"),
        format!(
            "SELECT VALUE LENGTH(StringJoin([{}], '')) FROM c",
            vec!["REPLICATE('a', 10000)"; 500].join(", ")
        ),
    ] {
        match run(&sql) {
            Err(e) => assert!(
                e.to_string().contains("larger than") || e.to_string().contains("nested"),
                "{e}"
            ),
            Ok(rows) => panic!("an amplifying query answered {rows:?}"),
        }
    }
    let thousand = vec!["1"; 1000].join(",");
    let wide = format!(
        "SELECT VALUE ARRAY(SELECT VALUE REPLICATE('a', 10000) FROM x IN [{thousand}]) FROM c"
    );
    assert!(run(&wide).unwrap_err().to_string().contains("larger than"));
    // Ordinary values are untouched.
    assert_eq!(
        run("SELECT VALUE CONCAT(c.s, 'c') FROM c").unwrap(),
        vec![json!("abc")]
    );
}

#[test]
fn joins_cannot_multiply_without_bound() {
    let q = prepare(
        "SELECT VALUE 1 FROM c JOIN a IN c.big JOIN b IN c.big JOIN d IN c.big WHERE false",
        &[],
        None,
    )
    .unwrap();
    let doc = json!({"id": "1", "big": vec![1; 2000]});
    let err = q
        .eval_doc(&doc, &Ctx::new(0), &mut |_| Ok(Flow::Continue))
        .unwrap_err();
    assert!(err.to_string().contains("rows from one document"), "{err}");
    // The budget is per document: an ordinary JOIN over many documents is unaffected.
    let q = prepare("SELECT VALUE a FROM c JOIN a IN c.big", &[], None).unwrap();
    let cx = Ctx::new(0);
    let doc = json!({"id": "1", "big": vec![1; 1000]});
    for _ in 0..2000 {
        q.eval_doc(&doc, &cx, &mut |_| Ok(Flow::Continue)).unwrap();
    }
}

#[test]
fn a_pathological_like_is_an_error_not_a_stall() {
    let q = prepare(
        &format!("SELECT VALUE c.s LIKE '%{}b' FROM c", "a".repeat(20_000)),
        &[],
        None,
    )
    .unwrap();
    let doc = json!({"id": "1", "s": "a".repeat(1_000_000)});
    // 20,000 × 1,000,000 steps unbounded; the step budget stops it with a clear error.
    let err = q
        .eval_doc(&doc, &Ctx::new(0), &mut |_| Ok(Flow::Continue))
        .unwrap_err();
    assert!(err.to_string().contains("LIKE"), "{err}");
}
