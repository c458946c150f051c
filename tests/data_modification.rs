//! Batches, patch, optimistic concurrency, TTL purge and the change feed over HTTP.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use strata_server::store::container::Limits;
use strata_tests::{Client, Options, TestServer};

const DOCS: &str = "/dbs/db/colls/c/docs";

async fn server(limits: Limits) -> TestServer {
    let s = TestServer::start_with(Options {
        limits: Some(limits),
        ..Default::default()
    })
    .await;
    s.setup(
        "db",
        "c",
        json!({"paths": ["/t", "/u"], "kind": "MultiHash", "version": 2}),
    )
    .await;
    s
}

fn batch_headers(pk: &str) -> Vec<(&'static str, String)> {
    vec![
        ("x-ms-cosmos-is-batch-request", "True".into()),
        ("x-ms-cosmos-batch-atomic", "True".into()),
        ("x-ms-documentdb-partitionkey", pk.to_string()),
        ("content-type", "application/json".into()),
    ]
}

async fn batch(c: &Client, pk: &str, ops: Value) -> strata_tests::Resp {
    let h = batch_headers(pk);
    let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
    c.post(DOCS, &h, ops).await
}

#[tokio::test]
async fn batch_limits_and_atomicity() {
    let s = server(Limits::default()).await;
    let pk = r#"["a","b"]"#;
    let doc = |id: &str| json!({"id": id, "t": "a", "u": "b"});
    let too_many: Vec<Value> = (0..101)
        .map(|i| json!({"operationType": "Create", "resourceBody": doc(&format!("x{i}"))}))
        .collect();
    let r = batch(&s, pk, Value::Array(too_many)).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{r:?}");
    assert!(r.message().contains("100"), "{r:?}");
    let big = json!([{"operationType": "Create", "resourceBody": {"id": "big", "t": "a", "u": "b", "pad": "x".repeat(2_100_000)}}]);
    assert_eq!(
        batch(&s, pk, big).await.status,
        StatusCode::PAYLOAD_TOO_LARGE
    );
    // A batch whose third operation fails applies nothing.
    let r = batch(
        &s,
        pk,
        json!([
            {"operationType": "Create", "resourceBody": doc("1")},
            {"operationType": "Upsert", "resourceBody": doc("2")},
            {"operationType": "Replace", "id": "nope", "resourceBody": doc("nope")},
        ]),
    )
    .await;
    assert_eq!(r.status, StatusCode::MULTI_STATUS, "{r:?}");
    let codes = r.batch_statuses();
    assert_eq!(codes, vec![424, 424, 404]);
    assert_eq!(s.get(DOCS, &[]).await.json["_count"], json!(0));
    // A document of another logical partition fails its operation, as the service reports
    // it: 207, that operation 400 with sub-status 1001, the others 424; nothing applied.
    let r = batch(
        &s,
        pk,
        json!([{"operationType": "Create", "resourceBody": doc("y")},
               {"operationType": "Create", "resourceBody": {"id": "z", "t": "other", "u": "b"}}]),
    )
    .await;
    assert_eq!(r.status, StatusCode::MULTI_STATUS, "{r:?}");
    assert_eq!(r.json[0]["statusCode"], json!(424), "{r:?}");
    assert_eq!(r.json[1]["statusCode"], json!(400), "{r:?}");
    assert_eq!(r.json[1]["subStatusCode"], json!(1001), "{r:?}");
    assert_eq!(s.get(DOCS, &[]).await.json["_count"], json!(0));
    // ifMatch inside a batch.
    let r = batch(
        &s,
        pk,
        json!([{"operationType": "Create", "resourceBody": doc("1")}]),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    let etag = r.json[0]["eTag"].as_str().unwrap().to_string();
    let r = batch(&s, pk, json!([{"operationType": "Replace", "id": "1", "ifMatch": "\"stale\"", "resourceBody": doc("1")}])).await;
    assert_eq!(r.json[0]["statusCode"], json!(412), "{r:?}");
    let r = batch(
        &s,
        pk,
        json!([{"operationType": "Replace", "id": "1", "ifMatch": etag, "resourceBody": doc("1")}]),
    )
    .await;
    assert_eq!(r.json[0]["statusCode"], json!(200), "{r:?}");
    s.stop().await;
}

/// Many writers race on one item with If-Match: each round exactly one wins, the others get
/// 412, and no increment is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn optimistic_concurrency_races() {
    let s = server(Limits::default()).await;
    let pk = r#"["a","b"]"#;
    s.post(
        DOCS,
        &[("x-ms-documentdb-partitionkey", pk)],
        json!({"id": "counter", "t": "a", "u": "b", "n": 0}),
    )
    .await;
    let wins = Arc::new(AtomicU64::new(0));
    let conflicts = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let c = s.client.clone();
        let (wins, conflicts) = (Arc::clone(&wins), Arc::clone(&conflicts));
        tasks.push(tokio::spawn(async move {
            for _ in 0..25 {
                let cur = c
                    .get(
                        &format!("{DOCS}/counter"),
                        &[("x-ms-documentdb-partitionkey", pk)],
                    )
                    .await;
                let etag = cur.header("etag").unwrap().to_string();
                let mut d = cur.json.clone();
                d["n"] = json!(d["n"].as_i64().unwrap() + 1);
                let r = c
                    .request(
                        Method::PUT,
                        &format!("{DOCS}/counter"),
                        &[("x-ms-documentdb-partitionkey", pk), ("if-match", &etag)],
                        Some(d),
                    )
                    .await;
                match r.status {
                    StatusCode::OK => wins.fetch_add(1, Ordering::Relaxed),
                    StatusCode::PRECONDITION_FAILED => conflicts.fetch_add(1, Ordering::Relaxed),
                    other => panic!("unexpected {other}: {r:?}"),
                };
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let fin = s
        .get(
            &format!("{DOCS}/counter"),
            &[("x-ms-documentdb-partitionkey", pk)],
        )
        .await;
    let (w, c) = (
        wins.load(Ordering::Relaxed),
        conflicts.load(Ordering::Relaxed),
    );
    assert_eq!(w + c, 16 * 25);
    assert!(c > 0, "the race produced conflicts");
    assert_eq!(
        fin.json["n"].as_u64().unwrap(),
        w,
        "every winning increment is there, nothing lost"
    );
    // If-None-Match: * on upsert of an existing item: 412.
    let r = s
        .post(
            DOCS,
            &[
                ("x-ms-documentdb-partitionkey", pk),
                ("x-ms-documentdb-is-upsert", "true"),
                ("if-none-match", "*"),
            ],
            json!({"id": "counter", "t": "a", "u": "b"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::PRECONDITION_FAILED);
    s.stop().await;
}

#[tokio::test]
async fn patch_over_http_both_shapes() {
    let s = server(Limits::default()).await;
    let pk = r#"["a","b"]"#;
    s.post(
        DOCS,
        &[("x-ms-documentdb-partitionkey", pk)],
        json!({"id": "p", "t": "a", "u": "b", "n": 1}),
    )
    .await;
    // JS: a bare array without a content type.
    let r = s
        .request(
            Method::PATCH,
            &format!("{DOCS}/p"),
            &[("x-ms-documentdb-partitionkey", pk)],
            Some(json!([{"op": "incr", "path": "/n", "value": 5}])),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.json["n"], json!(6));
    // Python: an object with a condition.
    let r = s
        .request(Method::PATCH, &format!("{DOCS}/p"), &[("x-ms-documentdb-partitionkey", pk), ("content-type", "application/json-patch+json")],
            Some(json!({"condition": "from c where c.n = 6", "operations": [{"op": "set", "path": "/s", "value": "x"}]})))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let r = s
        .request(
            Method::PATCH,
            &format!("{DOCS}/p"),
            &[("x-ms-documentdb-partitionkey", pk)],
            Some(
                json!([{"op": "set", "path": "/a", "value": 1}, {"op": "remove", "path": "/zzz"}]),
            ),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(
        r.message().contains("operation 1"),
        "the error names the failing operation: {r:?}"
    );
    let r = s
        .get(
            &format!("{DOCS}/p"),
            &[("x-ms-documentdb-partitionkey", pk)],
        )
        .await;
    assert!(r.json.get("a").is_none(), "a failed patch applies nothing");
    s.stop().await;
}

#[tokio::test]
async fn ttl_purges_expired_items() {
    let s = TestServer::start().await;
    s.post("/dbs", &[], json!({"id": "db"})).await;
    s.post("/dbs/db/colls", &[], json!({"id": "t", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}, "defaultTtl": 1})).await;
    for i in 0..50 {
        s.create(
            "db",
            "t",
            &json!(["k"]),
            json!({"id": format!("{i}"), "pk": "k"}),
        )
        .await;
    }
    s.create(
        "db",
        "t",
        &json!(["k"]),
        json!({"id": "keep", "pk": "k", "ttl": -1}),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = s.get("/_strata/containers/db/t/partitions", &[]).await;
        let count: u64 = v.json["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["itemCount"].as_u64().unwrap())
            .sum();
        if count == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "expired items were not purged ({count} left)"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        s.get("/dbs/db/colls/t/docs", &[]).await.json["_count"],
        json!(1)
    );
    s.stop().await;
}

/// Reads the change feed of one range until 304; returns the documents and the new etag.
async fn drain(
    c: &Client,
    range: &str,
    etag: Option<&str>,
) -> Result<(Vec<Value>, String), StatusCode> {
    let mut docs = Vec::new();
    let mut etag = etag.map(str::to_string);
    loop {
        let mut h = vec![
            ("a-im", "Incremental Feed"),
            ("x-ms-documentdb-partitionkeyrangeid", range),
            ("x-ms-max-item-count", "50"),
        ];
        if let Some(e) = &etag {
            h.push(("if-none-match", e));
        }
        let r = c.get(DOCS, &h).await;
        match r.status {
            StatusCode::OK => {
                docs.extend(r.json["Documents"].as_array().unwrap().iter().cloned());
                etag = Some(r.header("etag").unwrap().to_string());
            }
            StatusCode::NOT_MODIFIED => return Ok((docs, r.header("etag").unwrap().to_string())),
            other => return Err(other),
        }
    }
}

/// Change feed readers follow every range through splits while writers run: the union of
/// everything read contains every item's final version.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn change_feed_across_splits() {
    let s = server(Limits {
        partition_split_bytes: 24 * 1024,
        ..Limits::default()
    })
    .await;
    let finals: Arc<Mutex<HashMap<String, u64>>> = Arc::new(Mutex::new(HashMap::new()));
    let deadline = Instant::now() + Duration::from_millis(2500);
    let mut writers = Vec::new();
    for w in 0..3u64 {
        let c = s.client.clone();
        let finals = Arc::clone(&finals);
        writers.push(tokio::spawn(async move {
            let mut i = 0u64;
            while Instant::now() < deadline {
                let id = format!("w{w}-{}", i % 60);
                let (t, u) = (format!("t{}", i % 17), format!("u{w}"));
                let body = json!({"id": id, "t": t, "u": u, "v": i, "pad": "p".repeat(200)});
                let r = c
                    .request(
                        Method::POST,
                        DOCS,
                        &[
                            ("x-ms-documentdb-partitionkey", &json!([t, u]).to_string()),
                            ("x-ms-documentdb-is-upsert", "true"),
                        ],
                        Some(body),
                    )
                    .await;
                assert!(r.status.is_success(), "{r:?}");
                finals.lock().unwrap().insert(id, i);
                i += 1;
            }
        }));
    }
    // The reader: a work list of (range id, etag); on 410 the range is replaced by its children
    // (found through their `parents`), which continue from the parent's etag.
    let mut seen: HashMap<String, u64> = HashMap::new();
    let mut work: Vec<(String, Option<String>)> = vec![("0".into(), None)];
    let mut splits_followed = 0;
    let mut quiet_rounds = 0;
    while quiet_rounds < 3 {
        let writers_done = Instant::now() > deadline + Duration::from_millis(200);
        let mut next = Vec::new();
        let mut got = 0;
        for (range, etag) in work {
            match drain(&s, &range, etag.as_deref()).await {
                Ok((docs, e)) => {
                    got += docs.len();
                    for d in docs {
                        let id = d["id"].as_str().unwrap().to_string();
                        let v = d["v"].as_u64().unwrap();
                        let e = seen.entry(id).or_insert(0);
                        *e = (*e).max(v);
                    }
                    next.push((range, Some(e)));
                }
                Err(StatusCode::GONE) => {
                    splits_followed += 1;
                    let ranges = s.get("/dbs/db/colls/c/pkranges", &[]).await.json
                        ["PartitionKeyRanges"]
                        .as_array()
                        .unwrap()
                        .clone();
                    for r in ranges {
                        let parents = r["parents"].as_array().unwrap();
                        if parents.iter().any(|p| p == &json!(range))
                            && !next.iter().any(|(id, _)| *id == r["id"])
                        {
                            next.push((r["id"].as_str().unwrap().to_string(), etag.clone()));
                        }
                    }
                }
                Err(other) => panic!("change feed failed: {other}"),
            }
        }
        // A child listed twice (via two retired ancestors) keeps the older position.
        next.sort();
        next.dedup_by(|a, b| a.0 == b.0);
        work = next;
        if writers_done && got == 0 {
            quiet_rounds += 1;
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    for w in writers {
        w.await.unwrap();
    }
    assert!(
        splits_followed > 0,
        "the container split while the feed was read"
    );
    let finals = finals.lock().unwrap().clone();
    assert_eq!(seen.len(), finals.len(), "every item appeared in the feed");
    for (id, v) in &finals {
        assert_eq!(
            seen.get(id),
            Some(v),
            "item {id}: the feed did not deliver its final version"
        );
    }
    s.stop().await;
}

/// Bulk as the JS, .NET and Java SDKs send it: not atomic, no partition key header, addressed
/// to a partition key range, each operation with its own key.
async fn bulk(c: &Client, range: &str, continue_on_error: bool, ops: Value) -> strata_tests::Resp {
    let coe = if continue_on_error { "True" } else { "False" };
    c.post(
        DOCS,
        &[
            ("x-ms-cosmos-is-batch-request", "True"),
            ("x-ms-cosmos-batch-atomic", "False"),
            ("x-ms-cosmos-batch-continue-on-error", coe),
            ("x-ms-documentdb-partitionkeyrangeid", range),
            ("content-type", "application/json"),
        ],
        ops,
    )
    .await
}

#[tokio::test]
async fn bulk_runs_each_operation_of_a_range_on_its_own() {
    let s = server(Limits {
        initial_partitions: Some(4),
        ..Limits::default()
    })
    .await;
    let ranges: Vec<(String, strata_query::pk::EpkRange)> =
        s.get("/dbs/db/colls/c/pkranges", &[]).await.json["PartitionKeyRanges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["id"].as_str().unwrap().to_string(),
                    strata_query::pk::EpkRange::new(
                        r["minInclusive"].as_str().unwrap(),
                        r["maxExclusive"].as_str().unwrap(),
                    ),
                )
            })
            .collect();
    assert_eq!(ranges.len(), 4);
    let def = strata_query::pk::PartitionKeyDefinition::from_json(
        &json!({"paths": ["/t", "/u"], "kind": "MultiHash", "version": 2}),
    )
    .unwrap();
    let range_of = |t: &str, u: &str| {
        let key = strata_query::pk::PartitionKey::from_header(&json!([t, u]).to_string()).unwrap();
        let epk = strata_query::pk::epk::effective_partition_key(&def, &key).unwrap();
        ranges
            .iter()
            .find(|(_, r)| r.contains(&epk))
            .unwrap()
            .0
            .clone()
    };
    // 200 creates over 40 logical partitions, grouped by range the way the SDKs do.
    let mut by_range: HashMap<String, Vec<Value>> = HashMap::new();
    for i in 0..200 {
        let (t, u) = (format!("t{}", i % 8), format!("u{}", i % 5));
        by_range.entry(range_of(&t, &u)).or_default().push(json!({
            "operationType": "Create",
            "partitionKey": json!([t, u]).to_string(),
            "resourceBody": {"id": format!("b{i}"), "t": t, "u": u, "n": i},
        }));
    }
    assert!(by_range.len() > 1, "the keys reach several ranges");
    for (range, ops) in &by_range {
        for chunk in ops.chunks(100) {
            let r = bulk(&s, range, true, Value::Array(chunk.to_vec())).await;
            assert_eq!(r.status, StatusCode::OK, "{r:?}");
            let results = r.json.as_array().unwrap();
            assert_eq!(results.len(), chunk.len());
            assert!(
                results.iter().all(|x| x["statusCode"] == json!(201)),
                "{r:?}"
            );
            assert!(r.header("x-ms-session-token").is_some());
        }
    }
    let (rows, _) = s
        .query_all("db", "c", "SELECT VALUE COUNT(1) FROM c", json!([]), &[])
        .await;
    assert_eq!(rows.iter().filter_map(Value::as_u64).sum::<u64>(), 200);
    // Every operation type, and one operation of a key outside the addressed range.
    let home = range_of("t0", "u0");
    let stranger = (0..8)
        .flat_map(|t| (0..5).map(move |u| (format!("t{t}"), format!("u{u}"))))
        .find(|(t, u)| range_of(t, u) != home)
        .unwrap();
    let k = json!(["t0", "u0"]).to_string();
    let r = bulk(
        &s,
        &home,
        true,
        json!([
            {"operationType": "Upsert", "partitionKey": k, "resourceBody": {"id": "b0", "t": "t0", "u": "u0", "n": -1}},
            {"operationType": "Read", "partitionKey": k, "id": "b0"},
            {"operationType": "Replace", "partitionKey": k, "id": "b0", "resourceBody": {"id": "b0", "t": "t0", "u": "u0", "n": -2}},
            {"operationType": "Patch", "partitionKey": k, "id": "b0", "resourceBody": {"operations": [{"op": "set", "path": "/n", "value": 7}]}},
            {"operationType": "Create", "partitionKey": json!([stranger.0, stranger.1]).to_string(), "resourceBody": {"id": "x", "t": stranger.0, "u": stranger.1}},
            {"operationType": "Delete", "partitionKey": k, "id": "b40"},
        ]),
    )
    .await;
    assert_eq!(r.status, StatusCode::MULTI_STATUS, "{r:?}");
    let codes: Vec<(u64, u64)> = r
        .json
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["statusCode"].as_u64().unwrap(),
                x["subStatusCode"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        codes,
        vec![
            (200, 0),
            (200, 0),
            (200, 0),
            (200, 0),
            (410, 1002),
            (204, 0)
        ]
    );
    assert_eq!(r.json[3]["resourceBody"]["n"], json!(7));
    // Without continue-on-error, the operations after a failure do not run.
    let r = bulk(
        &s,
        &home,
        false,
        json!([
            {"operationType": "Create", "partitionKey": k, "resourceBody": {"id": "b0", "t": "t0", "u": "u0"}},
            {"operationType": "Create", "partitionKey": k, "resourceBody": {"id": "fresh", "t": "t0", "u": "u0"}},
        ]),
    )
    .await;
    let codes = r.batch_statuses();
    assert_eq!(codes, vec![409, 424], "{r:?}");
    // A range that does not exist (split, or never was) sends the SDK back to /pkranges.
    let r = bulk(
        &s,
        "97",
        true,
        json!([{"operationType": "Read", "partitionKey": k, "id": "b0"}]),
    )
    .await;
    assert_eq!(r.status, StatusCode::GONE, "{r:?}");
    assert_eq!(r.substatus(), Some(1002));
    // An operation without its key is refused alone.
    let r = bulk(
        &s,
        &home,
        true,
        json!([{"operationType": "Read", "id": "b0"}]),
    )
    .await;
    assert_eq!(r.json[0]["statusCode"], json!(400), "{r:?}");
    s.stop().await;
}
