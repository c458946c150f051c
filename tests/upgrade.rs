//! Opening a data directory written by an older strata: `tests/data/format1/store` was
//! written by strata in storage format 1 (every EPK in hex; see its `make.py`), with what that
//! strata read back saved beside it in `expected.json`. Today's strata migrates it at its first
//! start (`server/src/store/format.rs`) and must then serve every item, change-feed entry,
//! index lookup and unique key exactly as the old one did — and again after a restart.

use reqwest::StatusCode;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;
use strata_tests::{Client, Options, TempDir, TestServer};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read fixture") {
        let e = e.expect("entry");
        let target = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).expect("copy");
        }
    }
}

fn fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/format1")
}

/// The partition key header of a document of container `coll`.
fn pk_of(coll: &str, d: &Value) -> String {
    match coll {
        "three" => json!([d["tenant"], d["user"], d["session"]]).to_string(),
        _ => json!([d["pk"]]).to_string(),
    }
}

/// Every document of `coll` by the read feed, all pages.
async fn read_feed(c: &Client, coll: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cont: Option<String> = None;
    loop {
        let mut h = vec![("x-ms-max-item-count", "37")];
        if let Some(t) = &cont {
            h.push(("x-ms-continuation", t));
        }
        let r = c.get(&format!("/dbs/fx/colls/{coll}/docs"), &h).await;
        assert_eq!(r.status, StatusCode::OK, "{r:?}");
        out.extend(r.json["Documents"].as_array().cloned().unwrap_or_default());
        cont = r.header("x-ms-continuation").map(str::to_string);
        if cont.is_none() {
            return out;
        }
    }
}

/// The incremental change feed of `coll` from the beginning, page by page until it reports
/// no more changes.
async fn change_feed(c: &Client, coll: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut from: Option<String> = None;
    loop {
        let mut h = vec![("a-im", "Incremental Feed"), ("x-ms-max-item-count", "37")];
        if let Some(e) = &from {
            h.push(("if-none-match", e));
        }
        let r = c.get(&format!("/dbs/fx/colls/{coll}/docs"), &h).await;
        if r.status == StatusCode::NOT_MODIFIED {
            return out;
        }
        assert_eq!(r.status, StatusCode::OK, "{r:?}");
        let docs = r.json["Documents"].as_array().cloned().unwrap_or_default();
        if docs.is_empty() {
            return out;
        }
        out.extend(docs);
        from = Some(r.header("etag").expect("etag").to_string());
    }
}

fn ids(docs: &[Value]) -> Vec<String> {
    docs.iter()
        .map(|d| d["id"].as_str().expect("id").to_string())
        .collect()
}

/// Everything `expected.json` recorded, read back through the API.
async fn check(c: &Client, expected: &Value) {
    for coll in ["three", "two", "one"] {
        let want = &expected[coll];
        let want_items = want["items"].as_array().expect("items");

        // Read feed: every item, whole (system properties included), nothing else.
        let mut got = read_feed(c, coll).await;
        got.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
        assert_eq!(got.len(), want_items.len(), "{coll}: item count");
        assert_eq!(&got, want_items, "{coll}: items differ after the upgrade");

        // Point reads by id and partition key.
        for d in want_items {
            let id = d["id"].as_str().expect("id");
            let pk = pk_of(coll, d);
            let r = c
                .get(
                    &format!("/dbs/fx/colls/{coll}/docs/{id}"),
                    &[("x-ms-documentdb-partitionkey", &pk)],
                )
                .await;
            assert_eq!(r.status, StatusCode::OK, "{coll}/{id}: {r:?}");
            assert_eq!(&r.json, d, "{coll}/{id}");
        }

        // The change feed from the beginning: each live item once, in LSN order.
        let feed = change_feed(c, coll).await;
        let lsns: Vec<u64> = feed
            .iter()
            .map(|d| d["_lsn"].as_u64().expect("_lsn"))
            .collect();
        assert!(
            lsns.windows(2).all(|w| w[0] < w[1]),
            "{coll}: feed out of LSN order"
        );
        let got: BTreeSet<String> = ids(&feed).into_iter().collect();
        let want_feed: BTreeSet<String> = want["feed"]
            .as_array()
            .expect("feed")
            .iter()
            .map(|v| v.as_str().expect("id").to_string())
            .collect();
        assert_eq!(got.len(), feed.len(), "{coll}: an item twice in the feed");
        assert_eq!(got, want_feed, "{coll}: change feed differs");

        // An indexed equality lookup across partitions.
        let (rows, _) = c
            .query_all(
                "fx",
                coll,
                "SELECT c.id FROM c WHERE c.n = 7",
                json!([]),
                &[],
            )
            .await;
        let mut got = ids(&rows);
        got.sort();
        assert_eq!(json!(got), want["n7"], "{coll}: WHERE c.n = 7");
    }
    // A query scoped to a key prefix (a targeted range of the three-level key).
    let (rows, _) = c
        .query_all(
            "fx",
            "three",
            "SELECT c.id FROM c WHERE c.tenant = 't3' AND c.user = 'u4'",
            json!([]),
            &[("x-ms-documentdb-partitionkey", r#"["t3","u4"]"#)],
        )
        .await;
    let mut got = ids(&rows);
    got.sort();
    assert_eq!(json!(got), expected["three"]["t3"], "prefix query");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_format_1_data_directory_migrates_and_reads_back_everything() {
    let expected: Value = serde_json::from_slice(
        &std::fs::read(fixture().join("expected.json")).expect("expected.json"),
    )
    .expect("json");
    let dir = TempDir::new("upgrade");
    copy_dir(&fixture().join("store"), &dir.0);
    let opts = Options {
        data_dir: Some(dir.0.clone()),
        ..Default::default()
    };

    let s = TestServer::start_with(opts.clone()).await;
    check(&s, &expected).await;

    // Unique keys still hold within a logical partition, in the new spelling too.
    let taken = &expected["three"]["items"][0];
    let mut dup = json!({"id": "dup", "tenant": taken["tenant"], "user": taken["user"],
        "session": taken["session"], "email": taken["email"], "n": 0});
    let pk = pk_of("three", &dup);
    let h = [("x-ms-documentdb-partitionkey", pk.as_str())];
    let r = s.post("/dbs/fx/colls/three/docs", &h, dup.clone()).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{r:?}");
    dup["email"] = json!("fresh@x");
    let r = s.post("/dbs/fx/colls/three/docs", &h, dup.clone()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    // Deleting a migrated item frees its unique value.
    let victim = taken["id"].as_str().expect("id");
    let r = s
        .request(
            reqwest::Method::DELETE,
            &format!("/dbs/fx/colls/three/docs/{victim}"),
            &h,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{r:?}");
    dup["id"] = json!("dup2");
    dup["email"] = taken["email"].clone();
    let r = s.post("/dbs/fx/colls/three/docs", &h, dup).await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    s.stop().await;

    // A second start finds the migrated store and serves the same (plus the new item).
    let s = TestServer::start_with(opts).await;
    let r = s
        .get(
            "/dbs/fx/colls/three/docs/dup",
            &[("x-ms-documentdb-partitionkey", pk.as_str())],
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let r = s
        .get(
            &format!("/dbs/fx/colls/three/docs/{victim}"),
            &[("x-ms-documentdb-partitionkey", pk.as_str())],
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{r:?}");
    s.stop().await;
}
