//! `--suite steps`: the request-path steps too small to see above the lean suite's run-to-run
//! spread, timed in this process on fixed inputs, each beside the way it was done before:
//!
//! * the index entries of a version an update replaces: parsing its stored text and walking
//!   the tree (before) against walking the text (`term::entries_of_json`);
//! * preparing a query with new parameter values from a kept parse: a copy of the parse per
//!   query (before) against sharing it;
//! * the text a master-key signature covers: lowercased copies formatted together (before)
//!   against `protocol::string_to_sign`.

use crate::{dataset::Dataset, Report};
use serde_json::json;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;
use strata_query::index::{term, IndexingPolicy};
use strata_query::protocol::{string_to_sign, AuthScope};
use strata_query::sql;

/// Rounds per step; the report keeps the fastest (the least disturbed by other work).
const ROUNDS: usize = 3;

pub fn steps(smoke: bool, r: &mut Report) {
    let n = if smoke { 2_000 } else { 200_000 };
    println!("== steps: {n} iterations a round, fastest of {ROUNDS} rounds, ns per call");
    let mut row = |name: &str, before: &mut dyn FnMut(), after: &mut dyn FnMut()| {
        let (b, a) = (fastest(n, before), fastest(n, after));
        println!("  {name}: before {b:.0} ns, after {a:.0} ns");
        r.extra.insert(format!("steps.{name}.before_ns"), json!(b));
        r.extra.insert(format!("steps.{name}.after_ns"), json!(a));
    };

    // The lean suite's 1 KB document as a server stores it (system properties included).
    let ds = Dataset::new(1000, 1024, 100);
    let mut doc = ds.doc(123, 7);
    if let Some(o) = doc.as_object_mut() {
        o.insert("_rid".into(), json!("AbCdEfGhIjKLAAAAAAAAAA=="));
        o.insert(
            "_etag".into(),
            json!("\"00000000-0000-0000-0000-000000000000\""),
        );
        o.insert("_ts".into(), json!(1_764_400_000));
    }
    let text = serde_json::to_vec(&doc).unwrap_or_default();
    let policy = IndexingPolicy::default();
    row(
        "old-version-entries",
        &mut || {
            let v: serde_json::Value = serde_json::from_slice(black_box(&text)).unwrap_or_default();
            black_box(term::entries(&v, &policy));
        },
        &mut || {
            black_box(term::entries_of_json(black_box(&text), &policy).ok());
        },
    );

    let sql_text = "SELECT * FROM c WHERE c.TenantId = @t AND c.UserId = @u AND c.SessionId = @s";
    let (Ok(parsed), Ok(pk)) = (
        sql::parser::parse(sql_text),
        strata_query::pk::PartitionKeyDefinition::multi_hash(&[
            "/TenantId",
            "/UserId",
            "/SessionId",
        ]),
    ) else {
        eprintln!("strata-bench: the steps suite's query does not prepare");
        return;
    };
    let parsed = Arc::new(parsed);
    // New parameter values every query, as the single-partition workload sends them.
    let params = |i: u64| {
        vec![
            ("t".to_string(), json!(format!("tenant-{i}"))),
            ("u".to_string(), json!("user")),
            ("s".to_string(), json!("session")),
        ]
    };
    let (mut i, mut j) = (0u64, 0u64);
    row(
        "prepare-with-new-parameters",
        &mut || {
            i += 1;
            let copy = Arc::new(sql::ast::Query::clone(&parsed));
            black_box(sql::prepare_parsed(sql_text, copy, &params(i), Some(&pk), &[]).ok());
        },
        &mut || {
            j += 1;
            let shared = Arc::clone(&parsed);
            black_box(sql::prepare_parsed(sql_text, shared, &params(j), Some(&pk), &[]).ok());
        },
    );

    let scope = AuthScope::new("docs", "dbs/bench/colls/events/docs/item-000123");
    let date = "Sun, 29 Nov 2026 06:30:00 GMT";
    row(
        "signed-text",
        &mut || {
            black_box(format!(
                "{}\n{}\n{}\n{}\n{}\n",
                "GET".to_lowercase(),
                scope.resource_type.to_lowercase(),
                scope.resource_link,
                date.to_lowercase(),
                "".to_lowercase()
            ));
        },
        &mut || {
            black_box(string_to_sign("GET", black_box(&scope), date, ""));
        },
    );
}

/// The fastest of [`ROUNDS`] rounds of `n` calls, in nanoseconds a call.
fn fastest(n: usize, f: &mut dyn FnMut()) -> f64 {
    (0..ROUNDS)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_nanos() as f64 / n as f64
        })
        .fold(f64::INFINITY, f64::min)
}
