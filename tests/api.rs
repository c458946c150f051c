//! The item API driven with raw signed HTTP: system properties, headers, feeds, self links,
//! and every error case in Cosmos's shape (status, sub-status, `{code, message}`). Accounts,
//! databases and containers are in `resources.rs`.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use strata_tests::{assert_error, TestServer};

const DOCS: &str = "/dbs/db/colls/hpk/docs";

async fn hpk_server() -> TestServer {
    let s = TestServer::start().await;
    s.setup(
        "db",
        "hpk",
        json!({"paths": ["/TenantId", "/UserId", "/SessionId"], "kind": "MultiHash", "version": 2}),
    )
    .await;
    s
}

fn doc(id: &str, t: &str, u: &str, sess: &str) -> Value {
    json!({"id": id, "TenantId": t, "UserId": u, "SessionId": sess, "payload": "x"})
}

#[tokio::test]
async fn item_operations_and_headers() {
    let s = hpk_server().await;
    let pk = json!(["t1", "u1", "s1"]);
    let pkh = pk.to_string();
    let r = s
        .create(
            "db",
            "hpk",
            &pk,
            doc("a b/ü".replace('/', "").as_str(), "t1", "u1", "s1"),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    for k in ["_rid", "_self", "_etag", "_attachments", "_ts"] {
        assert!(r.json.get(k).is_some(), "missing {k}");
    }
    for h in [
        "etag",
        "x-ms-request-charge",
        "x-ms-activity-id",
        "x-ms-session-token",
        "x-ms-alt-content-path",
        "x-ms-content-path",
        "x-ms-documentdb-partitionkeyrangeid",
    ] {
        assert!(r.header(h).is_some(), "missing header {h}: {:?}", r.headers);
    }
    assert_eq!(r.header("x-ms-alt-content-path"), Some("dbs/db/colls/hpk"));
    // A Content-Length, as the service sends, not chunks.
    assert_eq!(r.header("transfer-encoding"), None, "{:?}", r.headers);
    assert_eq!(
        r.header("content-length"),
        Some(r.bytes.len().to_string().as_str())
    );
    let charge: f64 = r.header("x-ms-request-charge").unwrap().parse().unwrap();
    assert!(charge > 1.0);
    let etag = r.header("etag").unwrap().to_string();
    assert_eq!(r.json["_etag"], json!(etag));
    // Percent-encoded ids and trailing slashes.
    let item = format!("{DOCS}/a%20b%C3%BC/");
    let r = s
        .get(&item, &[("x-ms-documentdb-partitionkey", &pkh)])
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.json["id"], "a bü");
    // If-None-Match with the current etag: 304.
    let r = s
        .get(
            &item,
            &[
                ("x-ms-documentdb-partitionkey", &pkh),
                ("if-none-match", &etag),
            ],
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_MODIFIED);
    // Conflict within the logical partition; the same id elsewhere is another item.
    assert_error(
        &s.create("db", "hpk", &pk, doc("a bü", "t1", "u1", "s1"))
            .await,
        409,
        "Conflict",
    );
    let r = s
        .create(
            "db",
            "hpk",
            &json!(["t1", "u1", "s2"]),
            doc("a bü", "t1", "u1", "s2"),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    // Replace with a stale etag: 412; delete with a stale etag: 412.
    let mut d = doc("a bü", "t1", "u1", "s1");
    d["v"] = json!(2);
    let r = s
        .request(
            Method::PUT,
            &item,
            &[("x-ms-documentdb-partitionkey", &pkh), ("if-match", &etag)],
            Some(d.clone()),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let r = s
        .request(
            Method::PUT,
            &item,
            &[("x-ms-documentdb-partitionkey", &pkh), ("if-match", &etag)],
            Some(d.clone()),
        )
        .await;
    assert_error(&r, 412, "PreconditionFailed");
    let r = s
        .request(
            Method::DELETE,
            &item,
            &[("x-ms-documentdb-partitionkey", &pkh), ("if-match", &etag)],
            None,
        )
        .await;
    assert_error(&r, 412, "PreconditionFailed");
    // Upsert: 201 then 200.
    let up = [
        ("x-ms-documentdb-partitionkey", pkh.as_str()),
        ("x-ms-documentdb-is-upsert", "True"),
    ];
    assert_eq!(
        s.post(DOCS, &up, doc("u", "t1", "u1", "s1")).await.status,
        StatusCode::CREATED
    );
    assert_eq!(
        s.post(DOCS, &up, doc("u", "t1", "u1", "s1")).await.status,
        StatusCode::OK
    );
    // Replace of a missing item: 404. Delete: 204, then 404.
    let r = s
        .request(
            Method::PUT,
            &format!("{DOCS}/missing"),
            &[("x-ms-documentdb-partitionkey", &pkh)],
            Some(doc("missing", "t1", "u1", "s1")),
        )
        .await;
    assert_error(&r, 404, "NotFound");
    let r = s
        .request(
            Method::DELETE,
            &format!("{DOCS}/u"),
            &[("x-ms-documentdb-partitionkey", &pkh)],
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert!(r.bytes.is_empty());
    let r = s
        .request(
            Method::DELETE,
            &format!("{DOCS}/u"),
            &[("x-ms-documentdb-partitionkey", &pkh)],
            None,
        )
        .await;
    assert_error(&r, 404, "NotFound");
    s.stop().await;
}

#[tokio::test]
async fn item_validation_errors() {
    let s = hpk_server().await;
    let pkh = json!(["t1", "u1", "s1"]).to_string();
    let h = [("x-ms-documentdb-partitionkey", pkh.as_str())];
    // Header and body disagree: 400 with sub-status 1001.
    let r = s.post(DOCS, &h, doc("x", "t1", "u1", "other")).await;
    assert_error(&r, 400, "BadRequest");
    assert_eq!(r.substatus(), Some(1001));
    // A prefix is not enough for a point operation.
    let r = s
        .post(
            DOCS,
            &[("x-ms-documentdb-partitionkey", r#"["t1"]"#)],
            doc("x", "t1", "u1", "s1"),
        )
        .await;
    assert_error(&r, 400, "BadRequest");
    // Ids: too long (an item's may take 1,023 bytes, a container's 255 characters, with the
    // service's messages), reserved characters, missing, not a string.
    let r = s
        .post(DOCS, &h, doc(&"é".repeat(512), "t1", "u1", "s1"))
        .await;
    assert_error(&r, 400, "BadRequest");
    assert!(r.message().contains("less than '1024' characters"), "{r:?}");
    let r = s
        .post(DOCS, &h, doc(&"x".repeat(1023), "t1", "u1", "s1"))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    let r = s
        .post(
            "/dbs/db/colls",
            &[],
            json!({"id": "c".repeat(256), "partitionKey": {"paths": ["/pk"], "kind": "Hash"}}),
        )
        .await;
    assert_error(&r, 400, "BadRequest");
    assert!(r.message().contains("less than '255' characters"), "{r:?}");
    for bad in ["a/b", "a\\b", "a?b", "a#b"] {
        assert_error(
            &s.post(DOCS, &h, doc(bad, "t1", "u1", "s1")).await,
            400,
            "BadRequest",
        );
    }
    assert_error(
        &s.post(
            DOCS,
            &h,
            json!({"TenantId": "t1", "UserId": "u1", "SessionId": "s1"}),
        )
        .await,
        400,
        "BadRequest",
    );
    assert_error(
        &s.post(
            DOCS,
            &h,
            json!({"id": 5, "TenantId": "t1", "UserId": "u1", "SessionId": "s1"}),
        )
        .await,
        400,
        "BadRequest",
    );
    // Malformed JSON names the position; a non-object body is rejected.
    let r = s
        .request_raw(
            Method::POST,
            DOCS,
            &h,
            Some(b"{\"id\": \"x\",\n  \"a\": }".to_vec()),
        )
        .await;
    assert_error(&r, 400, "BadRequest");
    assert!(r.message().contains("line 2"), "{r:?}");
    assert_error(&s.post(DOCS, &h, json!([1, 2])).await, 400, "BadRequest");
    // Malformed partition key header.
    let r = s
        .post(
            DOCS,
            &[("x-ms-documentdb-partitionkey", "[\"t1\", ")],
            doc("x", "t1", "u1", "s1"),
        )
        .await;
    assert_error(&r, 400, "BadRequest");
    let r = s
        .post(
            DOCS,
            &[("x-ms-documentdb-partitionkey", "[[1], 2, 3]")],
            doc("x", "t1", "u1", "s1"),
        )
        .await;
    assert_error(&r, 400, "BadRequest");
    // Over 2 MB: 413.
    let mut big = doc("big", "t1", "u1", "s1");
    big["payload"] = json!("y".repeat(2 * 1024 * 1024 + 10));
    assert_error(&s.post(DOCS, &h, big).await, 413, "RequestEntityTooLarge");
    // Nothing of the above was stored but the id of 1,023 bytes.
    let r = s.get(DOCS, &[]).await;
    assert_eq!(r.json["_count"], json!(1), "{r:?}");
    assert_eq!(r.json["Documents"][0]["id"], json!("x".repeat(1023)));
    s.stop().await;
}

/// The service refuses an item that lacks a level of a hierarchical key (400, sub-status 1001
/// "partition key mismatch"), whichever way the header spells the absent level — the official
/// SDK's `test_crud_subpartition.py` expects exactly that — while an explicit `null` is a value.
#[tokio::test]
async fn items_missing_a_hierarchy_level_are_refused() {
    let s = hpk_server().await;
    let partial = json!({"id": "p", "TenantId": "t1", "UserId": "u1"});
    for header in [r#"["t1","u1",null]"#, r#"["t1","u1",{}]"#] {
        let r = s
            .post(
                DOCS,
                &[("x-ms-documentdb-partitionkey", header)],
                partial.clone(),
            )
            .await;
        assert_error(&r, 400, "BadRequest");
        assert_eq!(r.substatus(), Some(1001), "{header}: {r:?}");
    }
    // Without a header the key comes from the document: still refused.
    let r = s.post(DOCS, &[], partial.clone()).await;
    assert_error(&r, 400, "BadRequest");
    // A point read with a prefix of the key is a mismatch too.
    let r = s
        .get(
            &format!("{DOCS}/p"),
            &[("x-ms-documentdb-partitionkey", r#"["t1"]"#)],
        )
        .await;
    assert_eq!(
        (r.status.as_u16(), r.substatus()),
        (400, Some(1001)),
        "{r:?}"
    );
    // An explicit null is a value.
    let mut d = partial.clone();
    d["SessionId"] = Value::Null;
    let header = r#"["t1","u1",null]"#;
    let r = s
        .post(DOCS, &[("x-ms-documentdb-partitionkey", header)], d)
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    let r = s
        .get(
            &format!("{DOCS}/p"),
            &[("x-ms-documentdb-partitionkey", header)],
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    s.stop().await;
}

#[tokio::test]
async fn read_feed_pages_with_continuations() {
    let s = hpk_server().await;
    for i in 0..25 {
        let t = format!("t{}", i % 3);
        let pk = json!([t, "u", "s"]);
        s.create("db", "hpk", &pk, doc(&format!("i{i:02}"), &t, "u", "s"))
            .await;
    }
    let mut seen = Vec::new();
    let mut cont: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut h = vec![("x-ms-max-item-count", "10")];
        if let Some(c) = &cont {
            h.push(("x-ms-continuation", c));
        }
        let r = s.get(DOCS, &h).await;
        assert_eq!(r.status, StatusCode::OK, "{r:?}");
        pages += 1;
        let docs = r.json["Documents"].as_array().unwrap();
        assert_eq!(r.header("x-ms-item-count").unwrap(), docs.len().to_string());
        seen.extend(docs.iter().map(|d| d["id"].as_str().unwrap().to_string()));
        cont = r.header("x-ms-continuation").map(str::to_string);
        if cont.is_none() {
            break;
        }
    }
    assert_eq!(pages, 3);
    seen.sort();
    let want: Vec<String> = (0..25).map(|i| format!("i{i:02}")).collect();
    assert_eq!(seen, want);
    // A tampered continuation is a 400, never a crash.
    let r = s.get(DOCS, &[("x-ms-continuation", "garbage!")]).await;
    assert_error(&r, 400, "BadRequest");
    // A prefix header narrows the feed to one tenant.
    let r = s
        .get(DOCS, &[("x-ms-documentdb-partitionkey", r#"["t1"]"#)])
        .await;
    assert_eq!(r.json["_count"], json!(8), "{r:?}");
    s.stop().await;
}

#[tokio::test]
async fn unsupported_and_unknown_paths_are_clean_errors() {
    let s = hpk_server().await;
    for (m, p) in [
        (Method::GET, "/dbs/db/colls/hpk/attachments"),
        (Method::PATCH, "/dbs/db/colls/hpk/sprocs/p"),
        (Method::GET, "/nothing/here"),
        (Method::PATCH, "/dbs/db"),
        (Method::PUT, "/dbs"),
    ] {
        let r = s.request(m.clone(), p, &[], None).await;
        assert!(r.status.is_client_error(), "{m} {p}: {r:?}");
        assert!(r.json["code"].is_string(), "{m} {p}: {r:?}");
    }
    s.stop().await;
}

/// Garbage in any header or body position never produces a 5xx.
#[tokio::test]
async fn hostile_inputs_never_cause_server_errors() {
    let s = hpk_server().await;
    let bodies: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"null".to_vec(),
        b"\xff\xfe\x00".to_vec(),
        b"{\"id\":".to_vec(),
        b"{\"id\": \"\\ud800\"}".to_vec(),
        b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]".to_vec(),
        serde_json::to_vec(&json!({"query": 5})).unwrap(),
        serde_json::to_vec(&json!({"query": "SELECT * FROM c WHERE", "parameters": "x"})).unwrap(),
    ];
    let headers: Vec<Vec<(&str, &str)>> = vec![
        vec![],
        vec![("x-ms-documentdb-partitionkey", "not json")],
        vec![("x-ms-documentdb-partitionkey", "[1,2,3,4]")],
        vec![("x-ms-max-item-count", "-5")],
        vec![("x-ms-continuation", "%%%")],
        vec![("x-ms-documentdb-isquery", "true")],
        vec![("x-ms-documentdb-partitionkeyrangeid", "999")],
        vec![("x-ms-start-epk", "zz"), ("x-ms-end-epk", "FF")],
        vec![
            ("x-ms-documentdb-is-upsert", "true"),
            ("if-match", "\"nope\""),
        ],
    ];
    for path in [
        DOCS,
        "/dbs/db/colls/hpk/docs/x",
        "/dbs/db/colls",
        "/dbs",
        "/dbs/db/colls/hpk/pkranges",
    ] {
        for m in [Method::GET, Method::POST, Method::PUT, Method::DELETE] {
            for b in &bodies {
                for h in &headers {
                    let r = s.request_raw(m.clone(), path, h, Some(b.clone())).await;
                    assert!(
                        !r.status.is_server_error(),
                        "{m} {path} {h:?} {:?}: {r:?}",
                        String::from_utf8_lossy(b)
                    );
                }
            }
        }
    }
    s.stop().await;
}

/// The SDKs address an item by its `_self` link (`dbs/{rid}/colls/{rid}/docs/{rid}`) when a
/// call is given the item rather than its id (Python's `replace_item(item=doc, ...)`).
#[tokio::test]
async fn items_are_addressable_by_their_self_link() {
    let s = hpk_server().await;
    let pk = json!(["t1", "u1", "s1"]).to_string();
    let hdr = [("x-ms-documentdb-partitionkey", pk.as_str())];
    // Neighbours in the same logical partition, so the lookup must pick the right one.
    for i in 0..5 {
        let r = s
            .create(
                "db",
                "hpk",
                &json!(["t1", "u1", "s1"]),
                doc(&format!("n{i}"), "t1", "u1", "s1"),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    }
    let created = s
        .create(
            "db",
            "hpk",
            &json!(["t1", "u1", "s1"]),
            doc("target", "t1", "u1", "s1"),
        )
        .await;
    let self_link = format!("/{}", created.json["_self"].as_str().unwrap());
    assert!(!self_link.contains("/db/"), "rid-based: {self_link}");

    let r = s.request(Method::GET, &self_link, &hdr, None).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.json["id"], "target");
    assert_eq!(r.json["_rid"], created.json["_rid"]);

    let mut changed = r.json.clone();
    changed["payload"] = json!("y");
    let r = s
        .request(Method::PUT, &self_link, &hdr, Some(changed))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.json["payload"], "y");
    assert_eq!(
        r.json["_rid"], created.json["_rid"],
        "a replace keeps the rid"
    );

    let patch = json!({"operations": [{"op": "set", "path": "/payload", "value": "z"}]});
    let r = s
        .request(Method::PATCH, &self_link, &hdr, Some(patch))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.json["payload"], "z");

    let r = s.request(Method::DELETE, &self_link, &hdr, None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{r:?}");
    let r = s.request(Method::GET, &self_link, &hdr, None).await;
    assert_error(&r, 404, "NotFound");
    // The neighbours are untouched.
    let r = s
        .request(Method::GET, &format!("{DOCS}/n3"), &hdr, None)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    // On a name-based path, an id that looks like a rid is just an id.
    let rid = created.json["_rid"].as_str().unwrap();
    let r = s
        .request(Method::GET, &format!("{DOCS}/{rid}"), &hdr, None)
        .await;
    assert_error(&r, 404, "NotFound");
}

/// A replace whose body carries another id renames the item (the service allows it); the new
/// id must be free.
#[tokio::test]
async fn replace_with_a_new_id_renames_the_item() {
    let s = hpk_server().await;
    let key = json!(["t1", "u1", "s1"]);
    let pk = key.to_string();
    let hdr = [("x-ms-documentdb-partitionkey", pk.as_str())];
    for id in ["old", "taken"] {
        let r = s.create("db", "hpk", &key, doc(id, "t1", "u1", "s1")).await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    }
    let r = s
        .request(
            Method::PUT,
            &format!("{DOCS}/old"),
            &hdr,
            Some(doc("taken", "t1", "u1", "s1")),
        )
        .await;
    assert_error(&r, 409, "Conflict");
    let r = s
        .request(
            Method::PUT,
            &format!("{DOCS}/old"),
            &hdr,
            Some(doc("new", "t1", "u1", "s1")),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.json["id"], "new");
    assert_error(
        &s.request(Method::GET, &format!("{DOCS}/old"), &hdr, None)
            .await,
        404,
        "NotFound",
    );
    let r = s
        .request(Method::GET, &format!("{DOCS}/new"), &hdr, None)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let r = s.get("/_strata/containers/db/hpk/partitions", &[]).await;
    let count: u64 = r.json["partitions"]
        .as_array()
        .map(|a| a.iter().filter_map(|p| p["itemCount"].as_u64()).sum())
        .unwrap_or(0);
    assert_eq!(count, 2, "a rename neither adds nor loses an item: {r:?}");
}

/// Conflicts are partitioned like items: a conflicts query that names no partition must enable
/// cross-partition queries (the official Python suite's test_with_null_pk expects the 400).
#[tokio::test]
async fn conflict_queries_follow_the_cross_partition_rule() {
    let s = hpk_server().await;
    let path = "/dbs/db/colls/hpk/conflicts";
    let query = json!({"query": "SELECT * FROM root r WHERE r.resourceType = 'document'"});
    let base = [
        ("x-ms-documentdb-isquery", "true"),
        ("content-type", "application/query+json"),
    ];
    let r = s.post(path, &base, query.clone()).await;
    assert_error(&r, 400, "BadRequest");
    assert!(
        r.message().contains("Cross partition query is required"),
        "{r:?}"
    );
    let mut h = base.to_vec();
    h.push(("x-ms-documentdb-query-enablecrosspartition", "true"));
    let r = s.post(path, &h, query.clone()).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.json["Conflicts"], json!([]));
    let mut h = base.to_vec();
    h.push(("x-ms-documentdb-partitionkey", r#"["t","u","s"]"#));
    let r = s.post(path, &h, query).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    s.stop().await;
}

/// A written body is stored as its own text (its members copied, whitespace outside strings
/// dropped, the system properties the server stamps appended), and what is stored always reads
/// as the properties the body parses to: a repeated key keeps its last value once, a system
/// property spelled with an escape is still replaced, and the index sees the same document.
#[tokio::test]
async fn a_written_body_is_stored_as_the_properties_it_parses_to() {
    let s = hpk_server().await;
    let pk = r#"["t","u","s"]"#;
    let key = r#""TenantId":"t","UserId":"u","SessionId":"s""#;
    let upsert = [
        ("x-ms-documentdb-partitionkey", pk),
        ("x-ms-documentdb-is-upsert", "true"),
        ("content-type", "application/json"),
    ];
    let bodies = [
        format!("{{ \"id\" : \"p1\",\n {key}, \"nested\": {{\"a\": [1, 2.50, {{\"b\": \" x \\\" y \"}}]}},\r\n \"_rid\": \"mine\", \"_ts\": 5, \"_etag\": \"e\", \"x\": 1 }}"),
        format!("{{\"id\":\"p2\",{key},\"x\":1,\"x\":2}}"),
        format!("{{\"id\":\"p3\",{key},\"_r\\u0069d\":\"mine\",\"x\":3}}"),
        format!("{{\"id\":\"p4\",{key},\"\\u0061\":1,\"x\":4}}"),
        format!("{{\"id\":\"p5\",{key},\"_self\":\"mine\",\"_attachments\":\"a\",\"_lsn\":1}}"),
        format!("{{\"id\":\"p6\",{key},\"q\\\"k\\u0001\\\\\":\"v\\n\"}}"),
    ];
    for body in &bodies {
        let sent: serde_json::Map<String, Value> = serde_json::from_str(body).unwrap();
        let id = sent["id"].as_str().unwrap().to_string();
        for _ in 0..2 {
            let r = s
                .request_raw(Method::POST, DOCS, &upsert, Some(body.clone().into_bytes()))
                .await;
            assert!(r.status.is_success(), "{body}: {r:?}");
            let read = s
                .get(
                    &format!("{DOCS}/{id}"),
                    &[("x-ms-documentdb-partitionkey", pk)],
                )
                .await;
            for text in [&r.bytes, &read.bytes] {
                let text = std::str::from_utf8(text).unwrap();
                assert!(!text.contains('\n') && !text.contains(": "), "{text}");
                // Every key once, a repeated one included.
                let v: Value = serde_json::from_str(text).unwrap();
                for k in v.as_object().unwrap().keys() {
                    let quoted = serde_json::to_string(k).unwrap();
                    assert_eq!(text.matches(&format!("{quoted}:")).count(), 1, "{text}");
                }
            }
            let mut got = read.json.as_object().unwrap().clone();
            assert_eq!(got["_etag"], json!(read.header("etag").unwrap()));
            assert!(got["_rid"].as_str().is_some_and(|r| r != "mine"), "{got:?}");
            assert!(
                got["_self"].as_str().unwrap().starts_with("dbs/"),
                "{got:?}"
            );
            assert_eq!(got["_attachments"], json!("attachments/"));
            assert!(got["_ts"].as_u64().unwrap() > 5);
            for k in strata_query::protocol::SYSTEM_PROPERTIES {
                got.remove(k);
            }
            let mut want = sent.clone();
            for k in strata_query::protocol::SYSTEM_PROPERTIES {
                want.remove(k);
            }
            assert_eq!(got, want, "{body}");
        }
    }
    // The index holds what is stored: each x once, the repeated key's last value.
    let query = json!({"query": "SELECT VALUE c.id FROM c WHERE c.x >= 1 ORDER BY c.x"});
    let r = s
        .post(
            DOCS,
            &[
                ("x-ms-documentdb-isquery", "true"),
                ("content-type", "application/query+json"),
                ("x-ms-documentdb-partitionkey", pk),
            ],
            query,
        )
        .await;
    assert_eq!(
        r.json["Documents"],
        json!(["p1", "p2", "p3", "p4"]),
        "{r:?}"
    );
    s.stop().await;
}

/// If-Match guards the version an upsert replaces: with no item to replace the upsert creates
/// it (as the service does for the official SDK's `test_etag_match_condition_compatibility`),
/// and with one, a stale etag is still a 412.
#[tokio::test]
async fn upsert_if_match_applies_only_to_an_existing_item() {
    let s = hpk_server().await;
    let pk = r#"["t","u","s"]"#;
    let doc = json!({"id": "m", "TenantId": "t", "UserId": "u", "SessionId": "s"});
    let h = [
        ("x-ms-documentdb-partitionkey", pk),
        ("x-ms-documentdb-is-upsert", "true"),
        ("if-match", "\"not-an-etag\""),
    ];
    let r = s.post(DOCS, &h, doc.clone()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    let r = s.post(DOCS, &h, doc).await;
    assert_error(&r, 412, "PreconditionFailed");
    s.stop().await;
}

/// The partition metadata the SDKs keep session consistency with travels on failures too,
/// and a read names the LSN of the write that produced the version it returns.
#[tokio::test]
async fn point_operations_report_their_partition_and_lsns() {
    let s = hpk_server().await;
    let pkh = json!(["t1", "u1", "s1"]).to_string();
    let h = [("x-ms-documentdb-partitionkey", pkh.as_str())];
    let lsn = |r: &strata_tests::Resp| r.header("lsn").and_then(|v| v.parse::<u64>().ok());

    // A read of a missing item: 404 with the session token, the partition's LSN and range.
    let missing = s.get(&format!("{DOCS}/a"), &h).await;
    assert_error(&missing, 404, "NotFound");
    assert!(
        missing.header("x-ms-session-token").is_some(),
        "{missing:?}"
    );
    assert_eq!(
        missing.header("x-ms-documentdb-partitionkeyrangeid"),
        Some("0")
    );
    let before = lsn(&missing).expect("lsn on a 404");

    // A create answers with its own LSN; a read of it names that LSN as the item's.
    let created = s
        .create(
            "db",
            "hpk",
            &json!(["t1", "u1", "s1"]),
            doc("a", "t1", "u1", "s1"),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    let written = lsn(&created).expect("lsn on a create");
    assert!(written > before);
    assert!(created.header("x-ms-item-lsn").is_none());
    s.create(
        "db",
        "hpk",
        &json!(["t1", "u1", "s1"]),
        doc("b", "t1", "u1", "s1"),
    )
    .await;
    let read = s.get(&format!("{DOCS}/a"), &h).await;
    assert_eq!(
        read.header("x-ms-item-lsn"),
        Some(written.to_string().as_str())
    );
    assert!(lsn(&read).expect("lsn on a read") > written);
    assert!(read.json.get("_lsn").is_none());

    // A refused write (409, 412) carries them as well.
    let again = s
        .create(
            "db",
            "hpk",
            &json!(["t1", "u1", "s1"]),
            doc("a", "t1", "u1", "s1"),
        )
        .await;
    assert_error(&again, 409, "Conflict");
    assert!(again.header("x-ms-session-token").is_some(), "{again:?}");
    let stale = s
        .request(
            Method::PUT,
            &format!("{DOCS}/a"),
            &[h[0], ("if-match", "\"stale\"")],
            Some(doc("a", "t1", "u1", "s1")),
        )
        .await;
    assert_error(&stale, 412, "PreconditionFailed");
    assert!(stale.header("lsn").is_some(), "{stale:?}");
    s.stop().await;
}
