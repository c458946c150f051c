//! The all-versions-and-deletes change feed over HTTP (`A-IM: Full-Fidelity Feed`): every
//! create, replace and delete with the service's metadata, from now or a continuation, by
//! partition key, paged, TTL expiries marked — and a 400 where the container keeps no history.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use strata_tests::{assert_error, TestServer};

const DOCS: &str = "/dbs/db/colls/h/docs";

async fn server(props: Value) -> TestServer {
    let s = TestServer::start().await;
    let mut body =
        json!({"partitionKey": {"paths": ["/t", "/u"], "kind": "MultiHash", "version": 2}});
    for (k, v) in props.as_object().unwrap() {
        body[k] = v.clone();
    }
    s.setup_with("db", "h", body).await;
    s
}

/// Reads the feed from `etag` until 304, `page` items at a time; returns changes and etag.
async fn all_versions(
    s: &TestServer,
    etag: &str,
    extra: &[(&str, &str)],
    page: &str,
) -> (Vec<Value>, String) {
    let mut out = Vec::new();
    let mut etag = etag.to_string();
    for _ in 0..100 {
        let mut h = vec![
            ("a-im", "Full-Fidelity Feed"),
            ("x-ms-cosmos-changefeed-wire-format-version", "2021-09-15"),
            ("x-ms-max-item-count", page),
            ("if-none-match", etag.as_str()),
        ];
        h.extend_from_slice(extra);
        let r = s.get(DOCS, &h).await;
        let next = r.header("etag").expect("etag").to_string();
        match r.status {
            StatusCode::OK => out.extend(r.json["Documents"].as_array().unwrap().iter().cloned()),
            StatusCode::NOT_MODIFIED => return (out, next),
            other => panic!("{other}: {r:?}"),
        }
        etag = next;
    }
    panic!("the feed never ended");
}

fn ops(changes: &[Value]) -> Vec<(String, String)> {
    changes
        .iter()
        .map(|c| {
            let op = c["metadata"]["operationType"].as_str().unwrap().to_string();
            let id = if op == "delete" {
                c["metadata"]["id"].as_str().unwrap().to_string()
            } else {
                c["current"]["id"].as_str().unwrap().to_string()
            };
            (op, id)
        })
        .collect()
}

async fn write(s: &TestServer, method: Method, path: &str, pk: Value, body: Option<Value>) {
    let pk = pk.to_string();
    let mut h = vec![("x-ms-documentdb-partitionkey", pk.as_str())];
    if method == Method::POST {
        h.push(("x-ms-documentdb-is-upsert", "true"));
    }
    let r = s.request(method, path, &h, body).await;
    assert!(r.status.is_success(), "{r:?}");
}

#[tokio::test]
async fn every_version_and_every_delete_in_order() {
    let s = server(json!({"changeFeedPolicy": {"retentionDuration": 10}})).await;
    // From now: nothing yet.
    let (none, now) = all_versions(&s, "*", &[], "100").await;
    assert!(none.is_empty());
    let a = json!(["t1", "u1"]);
    let b = json!(["t1", "u2"]);
    write(
        &s,
        Method::POST,
        DOCS,
        a.clone(),
        Some(json!({"id": "a", "t": "t1", "u": "u1", "v": 1})),
    )
    .await;
    write(
        &s,
        Method::POST,
        DOCS,
        b.clone(),
        Some(json!({"id": "b", "t": "t1", "u": "u2", "v": 1})),
    )
    .await;
    write(
        &s,
        Method::PUT,
        &format!("{DOCS}/a"),
        a.clone(),
        Some(json!({"id": "a", "t": "t1", "u": "u1", "v": 2})),
    )
    .await;
    write(
        &s,
        Method::POST,
        DOCS,
        a.clone(),
        Some(json!({"id": "a", "t": "t1", "u": "u1", "v": 3})),
    )
    .await;
    write(&s, Method::DELETE, &format!("{DOCS}/b"), b.clone(), None).await;
    write(
        &s,
        Method::POST,
        DOCS,
        json!(["t2", "u1"]),
        Some(json!({"id": "c", "t": "t2", "u": "u1"})),
    )
    .await;

    let (changes, end) = all_versions(&s, &now, &[], "100").await;
    let want: Vec<(String, String)> = [
        ("create", "a"),
        ("create", "b"),
        ("replace", "a"),
        ("replace", "a"),
        ("delete", "b"),
        ("create", "c"),
    ]
    .iter()
    .map(|(o, i)| (o.to_string(), i.to_string()))
    .collect();
    assert_eq!(ops(&changes), want);
    // LSNs rise; each replace names the version it replaced by its LSN, with no `previous`
    // image (as the service sends with a retention policy alone).
    let lsns: Vec<u64> = changes
        .iter()
        .map(|c| c["metadata"]["lsn"].as_u64().unwrap())
        .collect();
    assert!(lsns.windows(2).all(|w| w[0] < w[1]), "{lsns:?}");
    assert_eq!(changes[2]["metadata"]["previousImageLSN"], json!(lsns[0]));
    assert!(changes[2].get("previous").is_none(), "{}", changes[2]);
    assert_eq!(changes[3]["current"]["v"], json!(3));
    assert!(changes[0]["metadata"]["crts"].as_u64().unwrap() > 1_600_000_000);
    // The delete names the item and its full hierarchical key.
    let del = &changes[4];
    assert_eq!(del["current"], json!({}));
    assert_eq!(
        del["metadata"]["partitionKey"],
        json!({"t": "t1", "u": "u2"})
    );
    assert_eq!(del["metadata"]["timeToLiveExpired"], json!(false));
    assert_eq!(del["metadata"]["previousImageLSN"], json!(lsns[1]));
    assert_eq!(del["metadata"]["id"], json!("b"));
    assert!(del.get("previous").is_none(), "{del}");
    // Paged two at a time: the same sequence.
    let (paged, _) = all_versions(&s, &now, &[], "2").await;
    assert_eq!(ops(&paged), want);
    // By partition key: only that logical partition's history.
    let pk = a.to_string();
    let (only_a, _) = all_versions(
        &s,
        &now,
        &[("x-ms-documentdb-partitionkey", pk.as_str())],
        "100",
    )
    .await;
    assert_eq!(ops(&only_a).len(), 3);
    // And the latest-version feed still has each item once, without deletes.
    let r = s.get(DOCS, &[("a-im", "Incremental Feed")]).await;
    assert_eq!(r.json["Documents"].as_array().unwrap().len(), 2);
    // The end position yields nothing more.
    assert!(all_versions(&s, &end, &[], "100").await.0.is_empty());
    s.stop().await;
}

#[tokio::test]
async fn ttl_expiries_are_marked_and_a_container_without_history_refuses() {
    let s = server(json!({"changeFeedPolicy": {"retentionDuration": 10}, "defaultTtl": 1})).await;
    let (_, now) = all_versions(&s, "*", &[], "100").await;
    write(
        &s,
        Method::POST,
        DOCS,
        json!(["t", "u"]),
        Some(json!({"id": "x", "t": "t", "u": "u"})),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let changes = loop {
        let (changes, _) = all_versions(&s, &now, &[], "100").await;
        if changes.len() == 2 || Instant::now() > deadline {
            break changes;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        ops(&changes),
        [
            ("create".to_string(), "x".to_string()),
            ("delete".to_string(), "x".to_string())
        ]
    );
    assert_eq!(changes[1]["metadata"]["timeToLiveExpired"], json!(true));

    s.setup_with(
        "db",
        "plain",
        json!({"partitionKey": {"paths": ["/t"], "kind": "Hash", "version": 2}}),
    )
    .await;
    let r = s
        .get(
            "/dbs/db/colls/plain/docs",
            &[("a-im", "Full-Fidelity Feed"), ("if-none-match", "*")],
        )
        .await;
    assert_error(&r, 400, "BadRequest");
    assert!(
        r.message().contains("All Versions and Deletes") && r.message().contains("must be enabled")
    );
    // An invalid policy is refused.
    let r = s
        .post(
            "/dbs/db/colls",
            &[],
            json!({"id": "bad", "partitionKey": {"paths": ["/t"], "kind": "Hash"},
                   "changeFeedPolicy": {"retentionDuration": -5}}),
        )
        .await;
    assert_error(&r, 400, "BadRequest");
    s.stop().await;
}

/// A transactional batch commits at one LSN: both feeds hand out all of its changes at once
/// (even when the batch is the newest write), and never again after its position.
#[tokio::test]
async fn a_batch_is_one_position_in_both_feeds() {
    let s = server(json!({"changeFeedPolicy": {"retentionDuration": 10}})).await;
    let (_, now) = all_versions(&s, "*", &[], "100").await;
    let r = s
        .get(
            DOCS,
            &[("a-im", "Incremental Feed"), ("if-none-match", "*")],
        )
        .await;
    let latest_now = r.header("etag").expect("etag").to_string();
    let ops: Vec<Value> = (0..3)
        .map(|i| json!({"operationType": "Create", "resourceBody": {"id": format!("b{i}"), "t": "t", "u": "u"}}))
        .collect();
    let r = s
        .post(
            DOCS,
            &[
                ("x-ms-cosmos-is-batch-request", "True"),
                ("x-ms-cosmos-batch-atomic", "True"),
                ("x-ms-documentdb-partitionkey", r#"["t","u"]"#),
            ],
            Value::Array(ops),
        )
        .await;
    assert_eq!(r.batch_statuses(), [201, 201, 201], "{r:?}");
    // All versions, one page or one change at a time: the whole batch, once.
    for page in ["100", "1"] {
        let (changes, end) = all_versions(&s, &now, &[], page).await;
        assert_eq!(changes.len(), 3, "page size {page}");
        assert!(all_versions(&s, &end, &[], page).await.0.is_empty());
    }
    // Latest version: the same.
    let h = [
        ("a-im", "Incremental Feed"),
        ("if-none-match", latest_now.as_str()),
    ];
    let r = s.get(DOCS, &h).await;
    assert_eq!(
        r.json["Documents"].as_array().map(Vec::len),
        Some(3),
        "{r:?}"
    );
    let end = r.header("etag").expect("etag").to_string();
    let r = s
        .get(
            DOCS,
            &[
                ("a-im", "Incremental Feed"),
                ("if-none-match", end.as_str()),
            ],
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_MODIFIED, "{r:?}");
    s.stop().await;
}
