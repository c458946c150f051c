//! Queries over HTTP: routing to physical partitions, paging in every execution mode,
//! continuation tokens, and the gateway-compatible 400/1004 path.

use reqwest::StatusCode;
use serde_json::{json, Value};
use strata_query::protocol::{header, unescape_plan, QueryRoute};
use strata_server::store::container::Limits;
use strata_tests::{Options, Resp, TestServer};

async fn loaded(partitions: u32, gateway_compat: bool) -> TestServer {
    let s = TestServer::start_with(Options {
        limits: Some(Limits {
            initial_partitions: Some(partitions),
            ..Limits::default()
        }),
        gateway_compat,
        ..Default::default()
    })
    .await;
    s.setup_with(
        "db",
        "ev",
        json!({
            "partitionKey": {"paths": ["/TenantId", "/UserId", "/SessionId"], "kind": "MultiHash", "version": 2},
            // ORDER BY over two properties needs a composite index, as in the service.
            "indexingPolicy": {"includedPaths": [{"path": "/*"}],
                "compositeIndexes": [[{"path": "/TenantId"}, {"path": "/n", "order": "descending"}]]}
        }),
    )
    .await;
    for t in 0..4 {
        for u in 0..5 {
            for sess in 0..3 {
                let pk = json!([format!("t{t}"), format!("u{u}"), format!("s{sess}")]);
                let d = json!({"id": format!("e{t}{u}{sess}"), "TenantId": format!("t{t}"), "UserId": format!("u{u}"),
                    "SessionId": format!("s{sess}"), "n": t * 100 + u * 10 + sess, "tags": ["a", format!("t{t}")]});
                let r = s.create("db", "ev", &pk, d).await;
                assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
            }
        }
    }
    s
}

fn route(r: &Resp) -> (String, Vec<u32>) {
    let h = r.header(header::QUERY_ROUTE).expect("route header");
    let route = QueryRoute::parse(h).expect("a route header");
    let ranges = route.ranges.iter().map(|s| s.parse().unwrap()).collect();
    (route.kind, ranges)
}

#[tokio::test]
async fn the_five_documented_routing_queries() {
    let s = loaded(8, false).await;
    let cases = [
        (
            "SELECT * FROM c WHERE c.TenantId = 't1' AND c.UserId = 'u2' AND c.SessionId = 's0'",
            "single",
            1,
        ),
        (
            "SELECT * FROM c WHERE c.TenantId = 't1' AND c.UserId = 'u2'",
            "targeted",
            3,
        ),
        ("SELECT * FROM c WHERE c.TenantId = 't1'", "targeted", 15),
        ("SELECT * FROM c WHERE c.UserId = 'u2'", "fanout", 12),
        ("SELECT * FROM c WHERE c.SessionId = 's0'", "fanout", 20),
    ];
    for (sql, want_route, want_rows) in cases {
        let metrics = [("x-ms-documentdb-populatequerymetrics", "true")];
        let (rows, pages) = s.query_all("db", "ev", sql, json!([]), &metrics).await;
        assert_eq!(rows.len(), want_rows, "{sql}");
        let (kind, ranges) = route(&pages[0]);
        assert_eq!(kind, want_route, "{sql}");
        match want_route {
            "single" => assert_eq!(ranges.len(), 1, "{sql}"),
            "fanout" => assert_eq!(ranges.len(), 8, "{sql}"),
            // A prefix visits only the physical partitions its EPK range overlaps.
            _ => assert!(ranges.len() < 8, "{sql}: {ranges:?}"),
        }
        let metrics = pages[0].header("x-ms-documentdb-query-metrics").unwrap();
        assert!(metrics.contains("retrievedDocumentCount="), "{metrics}");
    }
    // The partition key header scopes a query the same way as the WHERE clause.
    let (rows, pages) = s
        .query_all(
            "db",
            "ev",
            "SELECT VALUE c.id FROM c",
            json!([]),
            &[("x-ms-documentdb-partitionkey", r#"["t2","u1"]"#)],
        )
        .await;
    assert_eq!(rows.len(), 3);
    assert_eq!(route(&pages[0]).0, "targeted");
    // Metrics come when asked for, as the service gives them.
    assert!(pages[0].header("x-ms-documentdb-query-metrics").is_none());
    s.stop().await;
}

#[tokio::test]
async fn explain_returns_the_plan_for_every_route() {
    let s = loaded(8, false).await;
    let explain = [(header::EXPLAIN, "true")];
    for (sql, first_line, scans) in [
        (
            "SELECT * FROM c WHERE c.TenantId = 't1' AND c.UserId = 'u2' AND c.SessionId = 's0'",
            "Route: single (WHERE pins 1 full key(s) (1 EPK range)); partitions [",
            1,
        ),
        (
            "SELECT VALUE c.n FROM c WHERE c.TenantId = 't1' ORDER BY c.n DESC",
            "Route: targeted (WHERE pins 1 key prefix(es) (1 EPK range)); partitions [",
            0,
        ),
        (
            "SELECT COUNT(1) FROM c WHERE c.UserId = 'u2'",
            "Route: fanout (no partition key in the request or the WHERE clause); partitions [0, 1, 2, 3, 4, 5, 6, 7]",
            8,
        ),
    ] {
        let (_, pages) = s.query_all("db", "ev", sql, json!([]), &explain).await;
        let plan = unescape_plan(pages[0].header(header::QUERY_PLAN).expect("a plan"));
        let lines: Vec<&str> = plan.lines().collect();
        assert!(lines[0].starts_with(first_line), "{sql}:\n{plan}");
        let scanned = lines.iter().filter(|l| l.trim_start().starts_with("Scan: partition")).count();
        if scans > 0 {
            assert_eq!(scanned, scans, "{sql}:\n{plan}");
        } else {
            assert!((1..8).contains(&scanned), "{sql}:\n{plan}");
        }
        // The plan names the same partitions the route header reports.
        let (_, ranges) = route(&pages[0]);
        let listed = lines[0].rsplit('[').next().unwrap().trim_end_matches(']');
        let ids: Vec<u32> = listed.split(", ").filter(|x| !x.is_empty()).map(|x| x.parse().unwrap()).collect();
        assert_eq!(ids, ranges, "{sql}");
    }
    // Without the header there is no plan.
    let (_, pages) = s
        .query_all("db", "ev", "SELECT * FROM c", json!([]), &[])
        .await;
    assert!(pages[0].header(header::QUERY_PLAN).is_none());
    s.stop().await;
}

#[tokio::test]
async fn every_mode_pages_to_the_same_answer() {
    let s = loaded(4, false).await;
    let cases = [
        "SELECT VALUE c.id FROM c",
        "SELECT c.id, t FROM c JOIN t IN c.tags",
        "SELECT VALUE c.n FROM c ORDER BY c.n DESC",
        "SELECT c.TenantId, c.n FROM c ORDER BY c.TenantId ASC, c.n DESC",
        "SELECT VALUE c.n FROM c ORDER BY c.n OFFSET 7 LIMIT 20",
        "SELECT TOP 13 VALUE c.id FROM c",
        "SELECT DISTINCT VALUE c.UserId FROM c",
        "SELECT c.TenantId, COUNT(1) AS n, SUM(c.n) AS s FROM c GROUP BY c.TenantId",
        "SELECT VALUE COUNT(1) FROM c WHERE c.n > 100",
        "SELECT VALUE c.id FROM c WHERE c.n >= 200 OFFSET 3 LIMIT 5",
    ];
    for sql in cases {
        let (all, _) = s
            .query_all(
                "db",
                "ev",
                sql,
                json!([]),
                &[("x-ms-max-item-count", "1000")],
            )
            .await;
        let (paged, pages) = s
            .query_all("db", "ev", sql, json!([]), &[("x-ms-max-item-count", "4")])
            .await;
        assert_eq!(all, paged, "{sql}");
        assert!(!all.is_empty(), "{sql}");
        if all.len() > 4 {
            assert!(pages.len() > 1, "{sql} should page");
        }
    }
    let (rows, _) = s
        .query_all(
            "db",
            "ev",
            "SELECT VALUE c.n FROM c ORDER BY c.n OFFSET 7 LIMIT 20",
            json!([]),
            &[("x-ms-max-item-count", "3")],
        )
        .await;
    let want: Vec<Value> = {
        let mut v: Vec<i64> = (0..4)
            .flat_map(|t| (0..5).flat_map(move |u| (0..3).map(move |x| t * 100 + u * 10 + x)))
            .collect();
        v.sort();
        v.into_iter().skip(7).take(20).map(Value::from).collect()
    };
    assert_eq!(rows, want);
    s.stop().await;
}

#[tokio::test]
async fn bad_queries_are_400s_with_positions() {
    let s = loaded(1, false).await;
    let h = [
        ("x-ms-documentdb-isquery", "true"),
        ("content-type", "application/query+json"),
    ];
    for sql in [
        "SELECT c.value FROM c",
        "SELECT * FROM c WHERE",
        "SELECT nosuch(1) FROM c",
        "SELECT * FROM c WHERE x.id = 1",
    ] {
        let r = s
            .post("/dbs/db/colls/ev/docs", &h, json!({"query": sql}))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{sql}: {r:?}");
        assert_eq!(r.json["code"], "BadRequest");
    }
    let r = s
        .post(
            "/dbs/db/colls/ev/docs",
            &h,
            json!({"query": "SELECT c.value FROM c"}),
        )
        .await;
    assert!(r.message().contains("line 1, column"), "{r:?}");
    // An empty partition key scopes nothing (Cosmos rejects it; no key means all partitions).
    let mut hh = h.to_vec();
    hh.push(("x-ms-documentdb-partitionkey", "[]"));
    let r = s
        .post(
            "/dbs/db/colls/ev/docs",
            &hh,
            json!({"query": "SELECT * FROM c"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{r:?}");
    assert!(r.message().contains("partition key []"), "{r:?}");
    // Without a key, a scope or the cross-partition flag, a query is refused even on a
    // container of one physical partition, as the service does (the official Python suite's
    // test_with_null_pk expects it); a WHERE clause that pins the full key needs no flag.
    let r = s
        .post(
            "/dbs/db/colls/ev/docs",
            &h,
            json!({"query": "SELECT * FROM c"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{r:?}");
    assert!(
        r.message().contains("Cross partition query is required"),
        "{r:?}"
    );
    let r = s
        .post(
            "/dbs/db/colls/ev/docs",
            &h,
            json!({"query": "SELECT * FROM c WHERE c.TenantId = 't0' AND c.UserId = 'u0' AND c.SessionId = 's0'"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.json["_count"], json!(1), "{r:?}");
    // A continuation token from another query is rejected.
    let (_, pages) = s
        .query_all(
            "db",
            "ev",
            "SELECT VALUE c.id FROM c",
            json!([]),
            &[("x-ms-max-item-count", "5")],
        )
        .await;
    let token = pages[0].header("x-ms-continuation").unwrap().to_string();
    let mut hh = h.to_vec();
    hh.push(("x-ms-documentdb-query-enablecrosspartition", "true"));
    hh.push(("x-ms-continuation", &token));
    let r = s
        .post(
            "/dbs/db/colls/ev/docs",
            &hh,
            json!({"query": "SELECT VALUE c.n FROM c"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{r:?}");
    // A token in the service's own format that names another container's document is
    // ignored, as the service does; other undecodable tokens are still refused.
    for (token, want) in [
        (
            "-RID:~a0NPAOszCpOChB4AAAAAAA==#RT:1#TRC:2#ISV:2#IEO:65567#QCF:8",
            StatusCode::OK,
        ),
        ("-RID:~garbage", StatusCode::BAD_REQUEST),
        ("not a token", StatusCode::BAD_REQUEST),
    ] {
        let mut hh = h.to_vec();
        hh.push(("x-ms-documentdb-query-enablecrosspartition", "true"));
        hh.push(("x-ms-continuation", token));
        let r = s
            .post(
                "/dbs/db/colls/ev/docs",
                &hh,
                json!({"query": "SELECT VALUE c.id FROM c"}),
            )
            .await;
        assert_eq!(r.status, want, "{token}: {r:?}");
        if want == StatusCode::OK {
            assert!(!r.json["Documents"].as_array().unwrap().is_empty());
        }
    }
    s.stop().await;
}

#[tokio::test]
async fn gateway_compat_answers_1004_with_a_plan() {
    let s = loaded(3, true).await;
    let h = [
        ("x-ms-documentdb-isquery", "true"),
        ("content-type", "application/query+json"),
        ("x-ms-documentdb-query-enablecrosspartition", "true"),
    ];
    let r = s
        .post(
            "/dbs/db/colls/ev/docs",
            &h,
            json!({"query": "SELECT * FROM c ORDER BY c.n"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.substatus(), Some(1004));
    let plan: Value =
        serde_json::from_str(r.json["additionalErrorInfo"].as_str().unwrap()).unwrap();
    assert_eq!(plan["queryInfo"]["orderBy"], json!(["Ascending"]));
    // The rewritten query runs per partition key range.
    let rq = plan["queryInfo"]["rewrittenQuery"]
        .as_str()
        .unwrap()
        .replace("{documentdb-formattableorderbyquery-filter}", "true");
    let mut total = 0;
    for id in ["0", "1", "2"] {
        let (rows, _) = s
            .query_all(
                "db",
                "ev",
                &rq,
                json!([]),
                &[("x-ms-documentdb-partitionkeyrangeid", id)],
            )
            .await;
        for w in rows.windows(2) {
            assert!(
                w[0]["orderByItems"][0]["item"].as_i64()
                    <= w[1]["orderByItems"][0]["item"].as_i64()
            );
        }
        total += rows.len();
    }
    assert_eq!(total, 60);
    // Streaming cross-partition queries and single-partition queries still run directly.
    let (rows, _) = s
        .query_all("db", "ev", "SELECT VALUE c.id FROM c", json!([]), &[])
        .await;
    assert_eq!(rows.len(), 60);
    // The plan request.
    let r = s
        .post(
            "/dbs/db/colls/ev/docs",
            &[
                ("x-ms-cosmos-is-query-plan-request", "True"),
                ("content-type", "application/json"),
            ],
            json!({"query": "SELECT VALUE COUNT(1) FROM c"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.json["queryInfo"]["aggregates"], json!(["Count"]));
    assert_eq!(r.json["queryRanges"][0]["min"], "");
    s.stop().await;
}
