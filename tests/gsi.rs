//! Global secondary indexes over HTTP, as the service documents them
//! (<https://learn.microsoft.com/azure/cosmos-db/nosql/global-secondary-indexes>): a container
//! created with `globalSecondaryIndexDefinition` is a read-only copy of its source under its
//! own partition key, one copy per source item (the source's `id` as `_id`), kept in sync with
//! every create, replace and delete; its definition is checked and cannot change; a source
//! cannot be deleted before its indexes; and after `kill -9` an index catches up with every
//! acknowledged write.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use strata_tests::{assert_error, Client, TempDir, TestServer};

const SOURCE: &str = "/dbs/db/colls/src/docs";
const INDEX: &str = "/dbs/db/colls/byEmail/docs";

fn index_body(id: &str, definition: &str) -> Value {
    json!({
        "id": id,
        "partitionKey": {"paths": ["/email"], "kind": "Hash", "version": 2},
        "globalSecondaryIndexDefinition": {"sourceCollectionId": "src", "definition": definition},
    })
}

/// Creates a container of database `db` from `body`; its JSON.
async fn create(c: &Client, body: Value) -> Value {
    let r = c.post("/dbs/db/colls", &[], body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    r.json
}

async fn upsert(c: &Client, doc: Value) {
    let pk = json!([doc["tenant"]]).to_string();
    let r = c
        .request(
            Method::POST,
            SOURCE,
            &[
                ("x-ms-documentdb-partitionkey", &pk),
                ("x-ms-documentdb-is-upsert", "true"),
            ],
            Some(doc),
        )
        .await;
    assert!(r.status.is_success(), "{r:?}");
}

/// The index's copies by source id, once they are exactly `want` (source id → email, n).
async fn converged(c: &Client, want: &HashMap<String, (String, u64)>) -> HashMap<String, Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // While the index catches up, a copy moving to another partition may be read twice:
        // read again (the converged index is read once without).
        let Ok(read) = c.read_feed(INDEX).await else {
            assert!(Instant::now() < deadline, "the index did not settle");
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let copies: HashMap<String, Value> = read
            .into_values()
            .map(|d| (d["_id"].as_str().unwrap_or_default().to_string(), d))
            .collect();
        let got: HashMap<String, (String, u64)> = copies
            .iter()
            .map(|(k, d)| {
                let email = d["email"].as_str().unwrap_or_default().to_string();
                (k.clone(), (email, d["n"].as_u64().unwrap_or(u64::MAX)))
            })
            .collect();
        if got == *want {
            return copies;
        }
        assert!(
            Instant::now() < deadline,
            "the index did not catch up: {} copies, {} wanted",
            got.len(),
            want.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn an_index_copies_its_source_and_follows_every_change() {
    let s = TestServer::start().await;
    s.setup("db", "src", json!({"paths": ["/tenant"], "kind": "Hash"}))
        .await;
    let mut want = HashMap::new();
    for i in 0..40u64 {
        let (id, email) = (format!("u{i}"), format!("e{i}@x"));
        upsert(&s, json!({"id": id, "tenant": format!("t{}", i % 4), "email": email, "n": i, "secret": "s"})).await;
        want.insert(id, (email, i));
    }
    let source = s.get("/dbs/db/colls/src", &[]).await;
    let created = create(&s, index_body("byEmail", "SELECT c.email, c.n FROM c")).await;
    let def = &created["globalSecondaryIndexDefinition"];
    assert_eq!(def["sourceCollectionId"], "src");
    assert_eq!(def["definition"], "SELECT c.email, c.n FROM c");
    assert_eq!(def["sourceCollectionRid"], source.json["_rid"]);
    assert!(def["status"].is_string(), "{def}");
    // Writes after the index exists are copied too.
    for i in 40..60u64 {
        let (id, email) = (format!("u{i}"), format!("e{i}@x"));
        upsert(
            &s,
            json!({"id": id, "tenant": "t9", "email": email, "n": i}),
        )
        .await;
        want.insert(id, (email, i));
    }
    let copies = converged(&s, &want).await;
    let one = &copies["u7"];
    assert_eq!(one["_id"], "u7");
    assert!(
        one.get("secret").is_none() && one.get("tenant").is_none(),
        "{one}"
    );
    assert_ne!(one["id"], "u7", "the copy's id is its own");
    // A copy's partition key value changes: it moves; a source delete removes it.
    upsert(
        &s,
        json!({"id": "u3", "tenant": "t3", "email": "moved@x", "n": 3}),
    )
    .await;
    want.insert("u3".into(), ("moved@x".into(), 3));
    let r = s
        .request(
            Method::DELETE,
            "/dbs/db/colls/src/docs/u4",
            &[("x-ms-documentdb-partitionkey", r#"["t0"]"#)],
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{r:?}");
    want.remove("u4");
    converged(&s, &want).await;
    let q = s
        .query_all(
            "db",
            "byEmail",
            "SELECT c._id FROM c WHERE c.email = 'moved@x'",
            json!([]),
            &[("x-ms-documentdb-partitionkey", r#"["moved@x"]"#)],
        )
        .await
        .0;
    assert_eq!(q, vec![json!({"_id": "u3"})]);
    let read = s.get("/dbs/db/colls/byEmail", &[]).await;
    assert_eq!(
        read.json["globalSecondaryIndexDefinition"]["status"], "Active",
        "{read:?}"
    );
    assert_eq!(read.header("x-strata-gsi-lag"), Some("changes=0;seconds=0"));
    // Clients cannot write an index's items.
    let r = s
        .request(
            Method::POST,
            INDEX,
            &[("x-ms-documentdb-partitionkey", r#"["a@x"]"#)],
            Some(json!({"id": "x", "email": "a@x"})),
        )
        .await;
    assert_error(&r, 400, "BadRequest");
    // The source goes after its indexes.
    let r = s
        .request(Method::DELETE, "/dbs/db/colls/src", &[], None)
        .await;
    assert_error(&r, 400, "BadRequest");
    let r = s
        .request(Method::DELETE, "/dbs/db/colls/byEmail", &[], None)
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{r:?}");
    let r = s
        .request(Method::DELETE, "/dbs/db/colls/src", &[], None)
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{r:?}");
}

#[tokio::test]
async fn definitions_are_checked_and_cannot_change() {
    let s = TestServer::start().await;
    s.setup("db", "src", json!({"paths": ["/tenant"], "kind": "Hash"}))
        .await;
    for (definition, what) in [
        ("SELECT c.email AS e FROM c", "an alias"),
        ("SELECT c.email FROM c WHERE c.n > 1", "a WHERE clause"),
        ("SELECT c.address.city FROM c", "a nested property"),
        ("SELECT LOWER(c.email) FROM c", "a function"),
        ("SELECT DISTINCT c.email FROM c", "DISTINCT"),
    ] {
        let r = s
            .post("/dbs/db/colls", &[], index_body("bad", definition))
            .await;
        assert_error(&r, 400, "BadRequest");
        assert!(r.message().contains("not supported"), "{what}: {r:?}");
    }
    let mut missing = index_body("bad", "SELECT * FROM c");
    missing["globalSecondaryIndexDefinition"]["sourceCollectionId"] = json!("nope");
    let r = s.post("/dbs/db/colls", &[], missing).await;
    assert_error(&r, 400, "BadRequest");
    // At most five indexes a source.
    for i in 0..5 {
        let r = s
            .post(
                "/dbs/db/colls",
                &[],
                index_body(&format!("i{i}"), "SELECT * FROM c"),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    }
    let r = s
        .post("/dbs/db/colls", &[], index_body("i5", "SELECT * FROM c"))
        .await;
    assert_error(&r, 400, "BadRequest");
    // A replace cannot change the definition; one without it keeps it.
    let r = s
        .request(
            Method::PUT,
            "/dbs/db/colls/i0",
            &[],
            Some(index_body("i0", "SELECT c.email FROM c")),
        )
        .await;
    assert_error(&r, 400, "BadRequest");
    let body = json!({"id": "i0", "partitionKey": {"paths": ["/email"], "kind": "Hash", "version": 2}, "defaultTtl": 60});
    let r = s
        .request(Method::PUT, "/dbs/db/colls/i0", &[], Some(body))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(
        r.json["globalSecondaryIndexDefinition"]["definition"],
        "SELECT * FROM c"
    );
    // An index cannot be another index's source.
    let mut chained = index_body("chained", "SELECT * FROM c");
    chained["globalSecondaryIndexDefinition"]["sourceCollectionId"] = json!("i0");
    let r = s.post("/dbs/db/colls", &[], chained).await;
    assert_error(&r, 400, "BadRequest");
}

/// An index's copies are writes of the index and spend its own throughput (the service's
/// indexes have their own RU/s): under enforcement an index of 400 RU/s copies a burst
/// its source took at 10,000 RU/s over the seconds its budget allows, lagging behind
/// instead of overspending, and its partitions view shows what the copies cost.
#[tokio::test]
async fn copies_spend_the_index_throughput_and_lag_when_it_is_spent() {
    let s = TestServer::start_with(strata_tests::Options {
        enforce_throughput: true,
        ..Default::default()
    })
    .await;
    s.post("/dbs", &[], json!({"id": "db"})).await;
    let source = json!({"id": "src", "partitionKey": {"paths": ["/tenant"], "kind": "Hash"}});
    let r = s
        .post(
            "/dbs/db/colls",
            &[("x-ms-offer-throughput", "10000")],
            source,
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    let mut want = HashMap::new();
    let start = Instant::now();
    let mut write = |i: u64| {
        let (id, email) = (format!("u{i}"), format!("e{i}@x"));
        want.insert(id.clone(), (email.clone(), i));
        json!({"id": id, "tenant": format!("t{}", i % 8), "email": email, "n": i})
    };
    // Half before the index exists (its initial build copies them), half after.
    for i in 0..100u64 {
        upsert(&s, write(i)).await;
    }
    let r = s
        .post(
            "/dbs/db/colls",
            &[("x-ms-offer-throughput", "400")],
            index_body("byEmail", "SELECT c.email, c.n FROM c"),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    for i in 100..200u64 {
        upsert(&s, write(i)).await;
    }
    // Caught up once the index reports no lag (reading the container's resource spends
    // nothing; a query of the index now would compete with the copies for its budget).
    let deadline = start + Duration::from_secs(30);
    loop {
        let r = s.get("/dbs/db/colls/byEmail", &[]).await;
        if r.header("x-strata-gsi-lag") == Some("changes=0;seconds=0")
            && r.json["globalSecondaryIndexDefinition"]["status"] == "Active"
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the index did not catch up: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // 200 copies of about 5.7 RU each is 1,142 RU: a full second of budget (400) and then
    // 400 a second, so no less than 1.85 s.
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(1800), "{took:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    converged(&s, &want).await;
    let p = s
        .get("/_strata/containers/db/byEmail/partitions", &[])
        .await;
    let spent: f64 = p.json["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["requestUnits"]["consumedTotal"].as_f64().unwrap())
        .sum();
    assert!(spent >= 200.0 * 5.71 - 0.01, "{spent} {p:?}");
    s.stop().await;
}

/// A write burst on the source, strata killed with SIGKILL right after it, twice: after each
/// restart the index holds exactly the acknowledged versions.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_index_catches_up_after_kill_9() {
    let dir = TempDir::new("gsi-crash");
    let bin = env!("CARGO_BIN_EXE_strata-test-server");
    let mut want = HashMap::new();
    for round in 0..2u64 {
        let (mut child, c) = strata_tests::spawn_server_with(bin, &dir.0, &[]);
        if round == 0 {
            let r = c.post("/dbs", &[], json!({"id": "db"})).await;
            assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
            let source =
                json!({"id": "src", "partitionKey": {"paths": ["/tenant"], "kind": "Hash"}});
            create(&c, source).await;
            create(&c, index_body("byEmail", "SELECT c.email, c.n FROM c")).await;
        } else {
            converged(&c, &want).await;
        }
        let mut writers = Vec::new();
        for w in 0..4u64 {
            let c = c.clone();
            writers.push(tokio::spawn(async move {
                let mut done = Vec::new();
                for i in 0..150u64 {
                    // Half the writes replace an earlier item with a new email.
                    let k = w * 1000 + (i % 75);
                    let (id, email) = (format!("u{k}"), format!("e{k}-{round}-{i}@x"));
                    upsert(
                        &c,
                        json!({"id": id, "tenant": format!("t{w}"), "email": email, "n": i}),
                    )
                    .await;
                    done.push((id, (email, i)));
                }
                done
            }));
        }
        for w in writers {
            want.extend(w.await.expect("writer"));
        }
        child.kill().expect("kill -9");
        child.wait().expect("reaped");
    }
    let (mut child, c) = strata_tests::spawn_server_with(bin, &dir.0, &[]);
    converged(&c, &want).await;
    child.kill().expect("kill");
    child.wait().expect("reaped");
}
