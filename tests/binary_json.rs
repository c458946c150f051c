//! Cosmos binary JSON on the wire, as `azure_data_cosmos` 1.0 speaks it by default: item bodies
//! sent in binary, answers in binary when `x-ms-cosmos-supported-serialization-formats` lists
//! `CosmosBinary`, text for everyone else, and clear errors for malformed bodies.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use strata_query::binary;
use strata_tests::{assert_error, Resp, TestServer};

const DOCS: &str = "/dbs/db/colls/c/docs";
const POINT: (&str, &str) = (
    "x-ms-cosmos-supported-serialization-formats",
    "CosmosBinary",
);
const QUERY: (&str, &str) = (
    "x-ms-cosmos-supported-serialization-formats",
    "JsonText,CosmosBinary",
);

async fn server() -> TestServer {
    let s = TestServer::start().await;
    s.setup(
        "db",
        "c",
        json!({"paths": ["/pk"], "kind": "Hash", "version": 2}),
    )
    .await;
    s
}

/// Sends `doc` as a binary body.
async fn send(
    s: &TestServer,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    doc: &Value,
) -> Resp {
    s.request_raw(method, path, headers, Some(binary::encode(doc)))
        .await
}

/// The body of a binary answer, decoded; fails when the answer is not binary.
fn decoded(r: &Resp) -> Value {
    assert!(
        binary::is_binary(&r.bytes),
        "expected a binary body, got {:?}",
        String::from_utf8_lossy(&r.bytes)
    );
    binary::decode(&r.bytes).expect("a well-formed binary answer")
}

fn user_fields(v: &Value) -> Value {
    let mut m = v.as_object().cloned().unwrap_or_default();
    m.retain(|k, _| !k.starts_with('_'));
    Value::Object(m)
}

#[tokio::test]
async fn items_written_and_read_in_binary_are_the_same_items_in_text() {
    let s = server().await;
    let pk = ("x-ms-documentdb-partitionkey", r#"["p"]"#);
    let doc = json!({
        "id": "1", "pk": "p", "small": 7, "wide": 9_000_000_000i64, "max": i64::MAX,
        "unsigned": u64::MAX, "negative": -1_234_567, "ratio": 123.456789, "half": 0.5,
        "text": "café ☃ 𝄞 \"quotes\" \\ \u{1}", "empty": "", "none": null, "yes": true,
        "tags": ["alpha", "beta"], "nested": {"values": [1, 2, 3], "deep": [[{"x": []}]]},
        "long": "x".repeat(70_000), "type": "Point"
    });

    // Create in binary, answered in binary with the system properties added.
    let r = send(&s, Method::POST, DOCS, &[pk, POINT], &doc).await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    let created = decoded(&r);
    assert_eq!(user_fields(&created), doc);
    for p in ["_rid", "_self", "_etag", "_ts", "_attachments"] {
        assert!(created.get(p).is_some(), "{p} missing from {created}");
    }
    let etag = r.header("etag").unwrap().to_string();
    assert_eq!(created["_etag"], json!(etag));

    // A text client reads the same document, byte for byte what a binary reader decodes.
    let text = s.get(&format!("{DOCS}/1"), &[pk]).await;
    assert_eq!(text.status, StatusCode::OK);
    assert!(!binary::is_binary(&text.bytes));
    assert_eq!(text.json, created);
    let bin = s.get(&format!("{DOCS}/1"), &[pk, POINT]).await;
    assert_eq!(decoded(&bin), created);
    assert_eq!(bin.header("content-type"), Some("application/json"));

    // Replace and upsert in binary; the ETag moves and the content follows.
    let mut changed = doc.clone();
    changed["small"] = json!(30);
    let r = send(
        &s,
        Method::PUT,
        &format!("{DOCS}/1"),
        &[pk, POINT],
        &changed,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(user_fields(&decoded(&r)), changed);
    assert_ne!(r.header("etag"), Some(etag.as_str()));
    changed["tags"] = json!(["gamma"]);
    let upsert = [pk, POINT, ("x-ms-documentdb-is-upsert", "True")];
    let r = send(&s, Method::POST, DOCS, &upsert, &changed).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(user_fields(&decoded(&r)), changed);

    // Patch (a text body) answered in binary.
    let r = s
        .request(
            Method::PATCH,
            &format!("{DOCS}/1"),
            &[pk, POINT],
            Some(json!({"operations": [{"op": "incr", "path": "/small", "value": 1}]})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(decoded(&r)["small"], json!(31));

    // Without the header every answer stays text.
    let r = send(
        &s,
        Method::POST,
        DOCS,
        &[pk],
        &json!({"id": "2", "pk": "p"}),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(r.json["id"], json!("2"));

    // Query pages and the read feed in binary: the envelope and every document.
    let q = [
        ("x-ms-documentdb-isquery", "True"),
        ("content-type", "application/query+json"),
        pk,
        QUERY,
    ];
    let r = s
        .post(
            DOCS,
            &q,
            json!({"query": "SELECT c.id, c.small, c.max FROM c ORDER BY c.id", "parameters": []}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let page = decoded(&r);
    assert_eq!(page["_count"], json!(2));
    assert_eq!(
        page["Documents"][0],
        json!({"id": "1", "small": 31, "max": i64::MAX})
    );
    let r = s.get(DOCS, &[POINT]).await;
    let feed = decoded(&r);
    assert_eq!(feed["Documents"].as_array().map(Vec::len), Some(2));

    // Errors keep their text body whatever the client accepts.
    let r = s.get(&format!("{DOCS}/nope"), &[pk, POINT]).await;
    assert_error(&r, 404, "NotFound");
    s.stop().await;
}

#[tokio::test]
async fn malformed_binary_bodies_are_clear_errors_and_write_nothing() {
    let s = server().await;
    let pk = ("x-ms-documentdb-partitionkey", r#"["p"]"#);
    let good = binary::encode(&json!({"id": "1", "pk": "p", "n": 1}));
    let bad_bodies: Vec<(Vec<u8>, &str)> = vec![
        (good[..good.len() - 1].to_vec(), "malformed at byte"),
        (
            [&good[..], &[0xD0]].concat(),
            "follow the end of the document",
        ),
        (vec![0x80, 0xE9, 0x2C, 0x82, 0xFF, 0xFE], "not valid UTF-8"),
        (vec![0x80, 0xFF], "0xFF is not a type marker"),
        (vec![0x80, 0xE9, 0x2C, 0x41], "user-dictionary strings"),
        (
            vec![0x80, 0xE9, 0x2C, 0xCC, 0, 0, 0, 0, 0, 0, 0xF8, 0x7F],
            "no JSON form",
        ),
        (vec![0x80, 0xD0], "must be a JSON object"),
    ];
    for (body, says) in bad_bodies {
        let r = s
            .request_raw(Method::POST, DOCS, &[pk, POINT], Some(body.clone()))
            .await;
        assert_error(&r, 400, "BadRequest");
        assert!(r.message().contains(says), "{body:02X?}: {}", r.message());
        assert!(!binary::is_binary(&r.bytes), "errors stay text");
    }

    // A small body that expands past the request limit (one string referenced many times).
    let mut body = vec![0xC2];
    body.extend_from_slice(&60_000u32.to_le_bytes());
    body.extend(std::iter::repeat_n(b'x', 60_000));
    // The string's marker sits after the 10-byte header (preamble, marker, length, count).
    for _ in 0..200 {
        body.extend_from_slice(&[0xC4, 10, 0]);
    }
    let mut bomb = vec![0x80, 0xE7];
    bomb.extend_from_slice(&(body.len() as u32).to_le_bytes());
    bomb.extend_from_slice(&201u32.to_le_bytes());
    bomb.extend_from_slice(&body);
    let r = s
        .request_raw(Method::POST, DOCS, &[pk, POINT], Some(bomb))
        .await;
    assert_error(&r, 413, "RequestEntityTooLarge");

    // Nothing was stored.
    let r = s.get(DOCS, &[]).await;
    assert_eq!(r.json["_count"], json!(0), "{r:?}");
    s.stop().await;
}

#[tokio::test]
async fn batches_and_stored_procedure_arguments_accept_binary_bodies() {
    let s = server().await;
    let pk = ("x-ms-documentdb-partitionkey", r#"["p"]"#);
    let ops = json!([
        {"operationType": "Create", "resourceBody": {"id": "a", "pk": "p", "n": 1}},
        {"operationType": "Upsert", "resourceBody": {"id": "b", "pk": "p", "n": 2}},
        {"operationType": "Read", "id": "a"}
    ]);
    let h = [
        pk,
        ("x-ms-cosmos-is-batch-request", "True"),
        ("x-ms-cosmos-batch-atomic", "True"),
    ];
    let r = send(&s, Method::POST, DOCS, &h, &ops).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.batch_statuses(), vec![201, 201, 200]);

    let sproc = json!({"id": "echo", "body": "function (a, b) { getContext().getResponse().setBody({a: a, b: b}); }"});
    let r = s.post("/dbs/db/colls/c/sprocs", &[], sproc).await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    let args = json!([{"x": [1, 2.5, "s"]}, u64::MAX]);
    let r = send(
        &s,
        Method::POST,
        "/dbs/db/colls/c/sprocs/echo",
        &[pk],
        &args,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.json["a"], json!({"x": [1, 2.5, "s"]}));
    s.stop().await;
}
