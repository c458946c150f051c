//! `GET /_strata/storage`: where a durable store's bytes go, by key space on disk and by
//! holder in memory; what the scale benchmark prints per item.

use reqwest::StatusCode;
use serde_json::json;
use strata_tests::{Options, TempDir, TestServer};

#[tokio::test]
async fn the_storage_view_names_each_key_space_and_what_memory_holds() {
    let dir = TempDir::new("storage");
    let s = TestServer::start_with(Options {
        data_dir: Some(dir.0.clone()),
        ..Default::default()
    })
    .await;
    s.setup(
        "db",
        "c",
        json!({"paths": ["/t"], "kind": "Hash", "version": 2}),
    )
    .await;
    let pk = json!(["t1"]);
    for i in 0..200 {
        let r = s
            .create(
                "db",
                "c",
                &pk,
                json!({"id": format!("i{i}"), "t": "t1", "text": "x".repeat(500)}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    }
    let read = s
        .get(
            "/dbs/db/colls/c/docs/i7",
            &[("x-ms-documentdb-partitionkey", "[\"t1\"]")],
        )
        .await;
    assert_eq!(read.status, StatusCode::OK, "{read:?}");
    let r = s.get("/_strata/storage", &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let spaces = r.json["disk"]["bytesByKeySpace"]
        .as_object()
        .expect("bytes by key space");
    for name in [
        "items",
        "feed",
        "directory",
        "index",
        "partitions",
        "unique",
        "history",
    ] {
        assert!(spaces.contains_key(name), "{name} missing: {r:?}");
    }
    // 200 documents of 500 characters are in the write buffers (not flushed yet) and the
    // journal; the writes left their versions in the hot-item cache.
    let memory = &r.json["memory"];
    assert!(
        memory["writeBufferBytes"].as_u64().unwrap_or(0) > 100_000,
        "{r:?}"
    );
    assert!(
        r.json["disk"]["journalBytes"].as_u64().unwrap_or(0) > 100_000,
        "{r:?}"
    );
    assert!(memory["hotItemBytes"].as_u64().unwrap_or(0) > 0, "{r:?}");
    assert!(
        memory["residentBytes"].as_u64().unwrap_or(0) > 1_000_000,
        "{r:?}"
    );
    let refused = s
        .client
        .request(reqwest::Method::DELETE, "/_strata/storage", &[], None)
        .await;
    assert_eq!(
        refused.status,
        StatusCode::METHOD_NOT_ALLOWED,
        "{refused:?}"
    );
    s.stop().await;
}
