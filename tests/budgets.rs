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
    // The query plan the SDKs ask for first carries the same parameters, and weighs the same.
    let mut plan = QUERY.to_vec();
    plan.push(("x-ms-cosmos-is-query-plan-request", "True"));
    let r = s
        .post(
            "/dbs/QA/colls/C/docs",
            &plan,
            json!({"query": sql, "parameters": [{"name": "@ids", "value": digits}]}),
        )
        .await;
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

/// A container with a full-text index on `/text` holding `texts` as documents `d{i}`.
async fn full_text(s: &TestServer, coll: &str, texts: &[String]) {
    s.setup_with(
        "QA",
        coll,
        json!({"partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2},
            "fullTextPolicy": {"defaultLanguage": "en-US",
                "fullTextPaths": [{"path": "/text", "language": "en-US"}]},
            "indexingPolicy": {"fullTextIndexes": [{"path": "/text"}]}}),
    )
    .await;
    for (i, t) in texts.iter().enumerate() {
        let pk = format!("p{}", i % 4);
        let r = s
            .create(
                "QA",
                coll,
                &json!([pk]),
                json!({"id": format!("d{i}"), "pk": pk, "text": t}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    }
}

fn ids(r: &Resp) -> Vec<String> {
    let mut v: Vec<String> = r.json["Documents"]
        .as_array()
        .map(|d| {
            d.iter()
                .filter_map(|x| x["id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Full-text term lists: `FullTextContainsAny` with 10,000 terms (79 KB of query) took 887 MB
/// and 2 s — one index probe per term, each with the whole predicate's text. Now the terms
/// are one probe of distinct stems, capped at 1,000 per call (the service documents no cap),
/// and matched against a document's words as a set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_text_term_lists_are_capped_and_deduplicated() {
    let s = TestServer::start().await;
    let texts: Vec<String> = (0..12)
        .map(|i| format!("the quick word{i} jumps over the lazy dog number{}", i % 3))
        .collect();
    full_text(&s, "ft", &texts).await;
    let list = |n: usize, last: &str| {
        let mut t: Vec<String> = (0..n - 1).map(|i| format!("'absent{i}'")).collect();
        t.push(format!("'{last}'"));
        t.join(", ")
    };
    let sql =
        |terms: String| format!("SELECT c.id FROM c WHERE FullTextContainsAny(c.text, {terms})");
    let r = query(&s, "ft", &sql(list(10_000, "word3")), json!([])).await;
    assert_refused(&r, 400, "at most 1000 are allowed");
    let r = query(&s, "ft", &sql(list(1_000, "word3")), json!([])).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(ids(&r), ["d3"]);
    // The same word many times is one stem; an array parameter counts its elements.
    let r = query(&s, "ft", &sql(vec!["'number1'"; 500].join(", ")), json!([])).await;
    assert_eq!(ids(&r), ["d1", "d10", "d4", "d7"]);
    let terms: Vec<String> = (0..1_001).map(|i| format!("w{i}")).collect();
    let r = query(
        &s,
        "ft",
        "SELECT c.id FROM c WHERE FullTextContainsAll(c.text, @t)",
        json!([{"name": "@t", "value": terms}]),
    )
    .await;
    assert_refused(&r, 400, "at most 1000 are allowed");
    s.stop().await;
}

/// Rank fusion: 50 `FullTextScore` components took 16 s beside one 2 MB document (each
/// component, and each of the statistics query's counts, analysed the text again) and held
/// the turns an unrelated `COUNT` needed. Now a text is analysed once per document, RRF takes
/// at most 16 components (the service documents no cap), and searches wait for turns of their
/// own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rank_fusion_is_capped_and_reads_each_text_once() {
    let s = TestServer::start().await;
    let mut texts: Vec<String> = (0..8)
        .map(|i| format!("lorem ipsum w{i} dolor sit amet"))
        .collect();
    // One document near the 2 MB item limit, whose text names lorem once.
    texts.push(format!("lorem {}", "filler ".repeat(270_000)));
    full_text(&s, "rrf", &texts).await;
    let components = |k: usize| vec!["FullTextScore(c.text, 'lorem')"; k].join(", ");
    let sql = |k: usize| {
        format!(
            "SELECT TOP 3 c.id FROM c ORDER BY RANK RRF({})",
            components(k)
        )
    };
    let r = query(&s, "rrf", &sql(50), json!([])).await;
    assert_refused(&r, 400, "at most 16 are allowed");
    let r = query(&s, "rrf", &sql(16), json!([])).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let got = ids(&r);
    assert_eq!(got.len(), 3, "{r:?}");
    assert!(
        !got.contains(&"d8".to_string()),
        "the long text ranks last: {got:?}"
    );
    s.stop().await;
}

/// The partition-key advisor: 10,000 candidate keys took a minute, 2.5 GB and a 183 MB reply.
/// Now a request weighs at most 8 distinct candidates (repeats count once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_advisor_weighs_a_bounded_number_of_candidates() {
    let s = TestServer::start().await;
    s.setup(
        "QA",
        "adv",
        json!({"paths": ["/pk"], "kind": "Hash", "version": 2}),
    )
    .await;
    for i in 0..20 {
        let pk = format!("t{}", i % 5);
        let r = s
            .create(
                "QA",
                "adv",
                &json!([pk]),
                json!({"id": format!("{i}"), "pk": pk, "u": i}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED);
    }
    let advise = |keys: Vec<String>| {
        s.post(
            "/_strata/containers/QA/adv/advise",
            &[],
            json!({"keys": keys}),
        )
    };
    let many: Vec<String> = (0..10_000).map(|i| format!("/pk,/k{i}")).collect();
    let r = advise(many).await;
    assert_refused(&r, 400, "at most 8 are weighed at once");
    let repeated = vec!["/pk,/u".to_string(); 9_000];
    let r = advise(repeated).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    s.stop().await;
}

/// Search candidates and ORDER BY rows: each partition keeps its best `TOP k` (or `OFFSET n`)
/// rows until the merge, so a large k over large documents held them all. They are charged
/// to the query's budget now (here 1 MB): a page that would keep more is a 400 that says so,
/// whichever path reads the rows (index order, a vector index, a scan).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_rows_and_search_candidates_are_charged_to_the_query_budget() {
    let s = TestServer::start_with(strata_tests::Options {
        limits: Some(strata_server::store::container::Limits {
            query_memory_bytes: 1 << 20,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await;
    s.setup_with(
        "QA",
        "big",
        json!({"partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2},
            "vectorEmbeddingPolicy": {"vectorEmbeddings": [
                {"path": "/v", "dataType": "float32", "dimensions": 3, "distanceFunction": "cosine"}]},
            "indexingPolicy": {"vectorIndexes": [{"path": "/v", "type": "flat"}]}}),
    )
    .await;
    let pad = "x".repeat(8_000);
    for i in 0..300 {
        let pk = format!("p{}", i % 4);
        let doc =
            json!({"id": format!("{i}"), "pk": pk, "n": i, "v": [1.0, i as f64, 0.5], "pad": pad});
        let r = s.create("QA", "big", &json!([pk]), doc).await;
        assert_eq!(r.status, StatusCode::CREATED);
    }
    let q = json!([{"name": "@q", "value": [1.0, 2.0, 0.5]}]);
    for (sql, what) in [
        ("SELECT TOP 1000 * FROM c ORDER BY c.n", "index order"),
        (
            "SELECT TOP 1000 * FROM c ORDER BY VectorDistance(c.v, @q)",
            "vector index",
        ),
        (
            "SELECT TOP 1000 * FROM c WHERE c.n >= 0 ORDER BY c.id",
            "scan",
        ),
    ] {
        let mut headers = QUERY.to_vec();
        headers.push(("x-ms-max-item-count", "1000"));
        let r = s
            .post(
                "/dbs/QA/colls/big/docs",
                &headers,
                json!({"query": sql, "parameters": q}),
            )
            .await;
        assert_refused(&r, 400, "intermediate results");
        let small = sql.replace("TOP 1000", "TOP 5");
        let r = query(&s, "big", &small, q.clone()).await;
        assert_eq!(r.status, StatusCode::OK, "{what}: {r:?}");
        assert_eq!(
            r.json["Documents"].as_array().map(Vec::len),
            Some(5),
            "{what}"
        );
    }
    s.stop().await;
}
