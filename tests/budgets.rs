//! Byte budgets, one section per way a single request could take the server's memory or its
//! shared turns: a query's inputs (its parameters and what the caches keep of them), the
//! full-text operators' term lists, rank fusion's components, and the partition-key advisor.
//! Each was found by a hostile probe (issue 47) and fails on the code before its fix.

use reqwest::StatusCode;
use serde_json::{json, Value};
use strata_tests::{Resp, TestServer};

const QUERY: [(&str, &str); 3] = [
    ("x-ms-documentdb-isquery", "true"),
    ("content-type", "application/query+json"),
    ("x-ms-documentdb-query-enablecrosspartition", "true"),
];

async fn query(s: &TestServer, coll: &str, sql: &str, params: Value) -> Resp {
    s.post(
        &format!("/dbs/QA/colls/{coll}/docs"),
        &QUERY,
        json!({"query": sql, "parameters": params}),
    )
    .await
}

/// A Cosmos-shaped client error with `status`, whose message contains `says`.
fn assert_refused(r: &Resp, status: u16, says: &str) {
    assert_eq!(r.status.as_u16(), status, "{r:?}");
    assert!(r.json.get("code").is_some(), "not Cosmos-shaped: {r:?}");
    assert!(r.message().contains(says), "{}", r.message());
}

/// Query inputs: a request over the service's 2 MB is a 413; one whose parameters would hold
/// more than the query's budget in memory (a megabyte of one-digit numbers is 32 MB of parsed
/// values, copied as the query runs) is a 413 that says so; an ordinary large parameter runs,
/// and the query sample keeps its shape but not the value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_inputs_are_held_to_the_request_size_and_the_query_budget() {
    let s = TestServer::start().await;
    s.setup(
        "QA",
        "C",
        json!({"paths": ["/pk"], "kind": "Hash", "version": 2}),
    )
    .await;
    let r = s
        .create("QA", "C", &json!(["p"]), json!({"id": "1", "pk": "p"}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let sql = "SELECT TOP 1 c.id FROM c WHERE ARRAY_CONTAINS(@ids, c.id) OR c.id = '1'";
    let three_mb: Vec<String> = (0..80_000).map(|i| format!("id-{i:034}")).collect();
    let r = query(&s, "C", sql, json!([{"name": "@ids", "value": three_mb}])).await;
    assert_refused(&r, 413, "Request size is too large");
    let digits = vec![1u8; 900_000];
    let r = query(&s, "C", sql, json!([{"name": "@ids", "value": digits}])).await;
    assert_refused(&r, 413, "more than the 64 MB one query may use");
    // 8,000 ids of 40 characters (360 KB): runs, and is not kept.
    let ids: Vec<String> = (0..8_000).map(|i| format!("id-{i:036}")).collect();
    for _ in 0..3 {
        let r = query(&s, "C", sql, json!([{"name": "@ids", "value": ids}])).await;
        assert_eq!(r.status, StatusCode::OK, "{r:?}");
        assert_eq!(r.json["Documents"], json!([{"id": "1"}]));
    }
    let sample = s.get("/_strata/containers/QA/C/queries", &[]).await;
    assert_eq!(sample.status, StatusCode::OK, "{sample:?}");
    let shape = &sample.json["queries"][0];
    assert_eq!(shape["count"], json!(3.0), "{shape}");
    let example = &shape["examples"][0];
    assert_eq!(example["elided"], json!(true), "{example}");
    assert_eq!(example["parameters"][0]["value"], Value::Null, "{example}");
    s.stop().await;
}
