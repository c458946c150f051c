//! Physical partitions: automatic splits under a skewed multi-tenant load, splits under
//! concurrent reads and writes, throughput-driven layouts, lineage and 410/1002, the logical
//! partition size limit, and the inspection endpoint.

use rand::{Rng, SeedableRng};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use strata_query::pk::epk::epk_range;
use strata_query::pk::{EpkRange, PartitionKey, PartitionKeyDefinition};
use strata_query::protocol::{header, QueryRoute};
use strata_server::store::container::Limits;
use strata_tests::{Client, Options, TestServer};

const DOCS: &str = "/dbs/db/colls/ev/docs";

fn hpk() -> Value {
    json!({"paths": ["/TenantId", "/UserId", "/SessionId"], "kind": "MultiHash", "version": 2})
}

async fn server(split_bytes: u64) -> TestServer {
    let s = TestServer::start_with(Options {
        limits: Some(Limits {
            partition_split_bytes: split_bytes,
            ..Limits::default()
        }),
        ..Default::default()
    })
    .await;
    s.setup("db", "ev", hpk()).await;
    s
}

fn event(id: &str, t: &str, u: &str, sess: &str) -> Value {
    json!({"id": id, "TenantId": t, "UserId": u, "SessionId": sess, "pad": "p".repeat(300)})
}

/// Waits for at least `at_least` partitions, then until splitting has stopped (the
/// partition map's etag stays the same for 300 ms), and returns the ranges.
async fn wait_for_splits(c: &Client, at_least: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let etag = |r: &strata_tests::Resp| r.header("etag").unwrap_or("").to_string();
    loop {
        let r = c.get("/dbs/db/colls/ev/pkranges", &[]).await;
        let n = r.json["PartitionKeyRanges"]
            .as_array()
            .map(Vec::len)
            .unwrap_or(0);
        if n >= at_least {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let again = c.get("/dbs/db/colls/ev/pkranges", &[]).await;
            if etag(&again) == etag(&r) {
                return again.json["PartitionKeyRanges"].as_array().unwrap().clone();
            }
        }
        if Instant::now() > deadline {
            return r.json["PartitionKeyRanges"]
                .as_array()
                .cloned()
                .unwrap_or_default();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every item via the read feed; asserts none is returned twice.
async fn read_feed(c: &Client, page: usize) -> HashSet<String> {
    let mut seen = HashSet::new();
    let mut cont: Option<String> = None;
    let page = page.to_string();
    loop {
        let mut h = vec![("x-ms-max-item-count", page.as_str())];
        if let Some(t) = &cont {
            h.push(("x-ms-continuation", t));
        }
        let r = c.get(DOCS, &h).await;
        assert_eq!(r.status, StatusCode::OK, "{r:?}");
        for d in r.json["Documents"].as_array().unwrap() {
            let id = d["id"].as_str().unwrap().to_string();
            assert!(seen.insert(id.clone()), "read feed returned {id} twice");
        }
        cont = r.header("x-ms-continuation").map(str::to_string);
        if cont.is_none() {
            return seen;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skewed_load_splits_into_many_partitions() {
    let s = server(24 * 1024).await;
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut items = Vec::new();
    // One tenant holds most of the data.
    for i in 0..700 {
        let t = if rng.random_bool(0.7) {
            "big".to_string()
        } else {
            format!("t{}", rng.random_range(0..25))
        };
        let (u, sess) = (
            format!("u{}", rng.random_range(0..40)),
            format!("s{}", rng.random_range(0..3)),
        );
        let id = format!("i{i}");
        let r = s
            .create("db", "ev", &json!([t, u, sess]), event(&id, &t, &u, &sess))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
        items.push((id, t, u, sess));
    }
    let ranges = wait_for_splits(&s, 8).await;
    assert!(ranges.len() >= 8, "only {} partitions", ranges.len());
    // Lineage: children name their ancestors; ids 0.. are gone and answer 410/1002.
    let live: HashSet<String> = ranges
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    assert!(!live.contains("0"));
    assert!(ranges
        .iter()
        .all(|r| r["parents"].as_array().unwrap().contains(&json!("0"))));
    let gone = s
        .post(
            DOCS,
            &[
                ("x-ms-documentdb-isquery", "true"),
                ("content-type", "application/query+json"),
                ("x-ms-documentdb-partitionkeyrangeid", "0"),
            ],
            json!({"query": "SELECT * FROM c"}),
        )
        .await;
    assert_eq!(gone.status, StatusCode::GONE, "{gone:?}");
    assert_eq!(gone.substatus(), Some(1002));
    // Ranges tile the key space.
    let mut bounds: Vec<(String, String)> = ranges
        .iter()
        .map(|r| {
            (
                r["minInclusive"].as_str().unwrap().into(),
                r["maxExclusive"].as_str().unwrap().into(),
            )
        })
        .collect();
    bounds.sort();
    assert_eq!(bounds[0].0, "");
    assert_eq!(bounds.last().unwrap().1, "FF");
    for w in bounds.windows(2) {
        assert_eq!(w[0].1, w[1].0, "ranges are contiguous");
    }
    // The big tenant spans several physical partitions.
    let def = PartitionKeyDefinition::multi_hash(&["/TenantId", "/UserId", "/SessionId"]).unwrap();
    let prefix = epk_range(&def, &PartitionKey::from_header(r#"["big"]"#).unwrap()).unwrap();
    let spanning = bounds
        .iter()
        .filter(|(lo, hi)| EpkRange::new(lo.clone(), hi.clone()).overlaps(&prefix))
        .count();
    assert!(
        spanning >= 2,
        "the big tenant spans {spanning} partition(s)"
    );
    // Every item is readable by point read, and the read feed returns each exactly once.
    for (id, t, u, sess) in &items {
        let pk = json!([t, u, sess]).to_string();
        let r = s
            .get(
                &format!("{DOCS}/{id}"),
                &[("x-ms-documentdb-partitionkey", &pk)],
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{id}: {r:?}");
    }
    let seen = read_feed(&s, 37).await;
    assert_eq!(seen.len(), items.len());
    // A prefix query for the big tenant visits only its partitions and finds all its items.
    let (rows, pages) = s
        .query_all(
            "db",
            "ev",
            "SELECT VALUE c.id FROM c WHERE c.TenantId = 'big'",
            json!([]),
            &[],
        )
        .await;
    assert_eq!(rows.len(), items.iter().filter(|i| i.1 == "big").count());
    let route = pages[0].header(header::QUERY_ROUTE).unwrap();
    assert!(route.starts_with("targeted"), "{route}");
    let visited = QueryRoute::parse(route).expect("route header").ranges.len();
    assert_eq!(visited, spanning, "{route}");
    // The partitions view lists every partition with its largest logical partitions.
    let v = s.get("/_strata/containers/db/ev/partitions", &[]).await;
    assert_eq!(v.status, StatusCode::OK, "{v:?}");
    let parts = v.json["partitions"].as_array().unwrap();
    assert_eq!(parts.len(), ranges.len());
    let total: u64 = parts.iter().map(|p| p["itemCount"].as_u64().unwrap()).sum();
    assert_eq!(total, items.len() as u64);
    assert!(parts
        .iter()
        .any(|p| p["largestLogicalPartitions"][0]["partitionKey"][0] == json!("big")));
    // Children hold 35-65% of what their parent held (cuts between logical partitions).
    for p in parts {
        assert!(
            p["bytes"].as_u64().unwrap() > 0,
            "no empty partition after size splits: {p}"
        );
    }
    s.stop().await;
}

/// Writers and readers run while partitions split; afterwards the items are exactly the
/// acknowledged writes, and no reader ever saw a duplicate or missed a stable item.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn splits_under_concurrent_load_lose_nothing() {
    for seed in [1u64, 2, 3] {
        let s = server(32 * 1024).await;
        // Stable items that must be visible to every reader throughout.
        let mut stable = HashSet::new();
        for i in 0..60 {
            let t = format!("t{}", i % 6);
            let r = s
                .create(
                    "db",
                    "ev",
                    &json!([t, "u", "s"]),
                    event(&format!("stable{i}"), &t, "u", "s"),
                )
                .await;
            assert_eq!(r.status, StatusCode::CREATED);
            stable.insert(format!("stable{i}"));
        }
        let acked: Arc<Mutex<HashMap<String, Value>>> = Arc::new(Mutex::new(HashMap::new()));
        let deadline = Instant::now() + Duration::from_millis(2500);
        let mut tasks = Vec::new();
        for w in 0..4u64 {
            let c = s.client.clone();
            let acked = Arc::clone(&acked);
            tasks.push(tokio::spawn(async move {
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed * 100 + w);
                let mut i = 0;
                while Instant::now() < deadline {
                    let t = if rng.random_bool(0.5) {
                        "hot".to_string()
                    } else {
                        format!("t{}", rng.random_range(0..30))
                    };
                    let u = format!("u{}", rng.random_range(0..50));
                    let id = format!("w{w}-{i}");
                    let body = event(&id, &t, &u, "s");
                    let r = c
                        .request(
                            Method::POST,
                            DOCS,
                            &[(
                                "x-ms-documentdb-partitionkey",
                                &json!([t, u, "s"]).to_string(),
                            )],
                            Some(body.clone()),
                        )
                        .await;
                    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
                    acked.lock().unwrap().insert(id, body);
                    i += 1;
                }
            }));
        }
        for _ in 0..2 {
            let c = s.client.clone();
            let stable = stable.clone();
            tasks.push(tokio::spawn(async move {
                while Instant::now() < deadline {
                    let seen = read_feed(&c, 23).await;
                    let missing: Vec<_> = stable.iter().filter(|id| !seen.contains(*id)).collect();
                    assert!(
                        missing.is_empty(),
                        "a reader missed stable items during splits: {missing:?}"
                    );
                }
            }));
        }
        for t in tasks {
            t.await.expect("task");
        }
        let ranges = wait_for_splits(&s, 4).await;
        assert!(
            ranges.len() >= 4,
            "seed {seed}: only {} partitions",
            ranges.len()
        );
        let seen = read_feed(&s, 100).await;
        let mut want: HashSet<String> = acked.lock().unwrap().keys().cloned().collect();
        want.extend(stable.iter().cloned());
        assert_eq!(
            seen, want,
            "seed {seed}: stored items differ from acknowledged writes"
        );
        s.stop().await;
    }
}

#[tokio::test]
async fn partitions_follow_throughput() {
    let s = TestServer::start().await;
    s.post("/dbs", &[], json!({"id": "db"})).await;
    // As the service: one partition per 6,000 manual RU/s at creation (the official Python
    // suite's THROUGHPUT_FOR_2_PARTITIONS is 12,000 and THROUGHPUT_FOR_5_PARTITIONS 30,000).
    let cases = [
        ("a", "400", 1),
        ("b", "11000", 2),
        ("c", "30000", 5),
        ("d", "6000", 1),
        ("e", "6100", 2),
    ];
    for (name, ru, want) in cases {
        let r = s
            .post("/dbs/db/colls", &[("x-ms-offer-throughput", ru)], json!({"id": name, "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}}))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
        let r = s.get(&format!("/dbs/db/colls/{name}/pkranges"), &[]).await;
        assert_eq!(
            r.json["PartitionKeyRanges"].as_array().unwrap().len(),
            want,
            "{name} at {ru} RU/s"
        );
    }
    // Autoscale max 20000 → 2 partitions.
    let r = s
        .post(
            "/dbs/db/colls",
            &[(
                "x-ms-cosmos-offer-autopilot-settings",
                r#"{"maxThroughput":20000}"#,
            )],
            json!({"id": "auto", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(
        s.get("/dbs/db/colls/auto/pkranges", &[]).await.json["_count"],
        json!(2)
    );
    // Raise container a from 400 to 11000 through its offer; it splits to 2 partitions.
    let coll = s.get("/dbs/db/colls/a", &[]).await;
    let link = coll.json["_self"].as_str().unwrap().to_string();
    for i in 0..50 {
        s.create(
            "db",
            "a",
            &json!([format!("k{i}")]),
            json!({"id": format!("{i}"), "pk": format!("k{i}")}),
        )
        .await;
    }
    let r = s
        .post("/offers", &[("x-ms-documentdb-isquery", "true"), ("content-type", "application/query+json")],
            json!({"query": "SELECT * FROM root r WHERE r.resource = @link", "parameters": [{"name": "@link", "value": link}]}))
        .await;
    let offers = r.json["Offers"].as_array().unwrap();
    assert_eq!(offers.len(), 1, "{r:?}");
    let mut offer = offers[0].clone();
    assert_eq!(offer["content"]["offerThroughput"], json!(400));
    let etag_before = s
        .get("/dbs/db/colls/a/pkranges", &[])
        .await
        .header("etag")
        .unwrap()
        .to_string();
    offer["content"]["offerThroughput"] = json!(11000);
    let id = offer["id"].as_str().unwrap().to_string();
    let r = s
        .request(Method::PUT, &format!("/offers/{id}"), &[], Some(offer))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut announced = false;
    loop {
        let r = s.get("/dbs/db/colls/a/pkranges", &[]).await;
        // First the range to split reports "splitting" under a new etag, as the service's
        // do while a scale-up is under way, and keeps serving.
        if r.json["PartitionKeyRanges"][0]["status"] == json!("splitting") {
            assert_eq!(r.json["_count"], json!(1));
            assert_ne!(r.header("etag").unwrap(), etag_before);
            let q = s.query_all("db", "a", "SELECT VALUE COUNT(1) FROM c", json!([]), &[]);
            assert_eq!(q.await.0, vec![json!(50)]);
            announced = true;
        }
        if r.json["_count"] == json!(2) {
            assert!(announced, "the split was not announced in the range feed");
            let statuses = r.json["PartitionKeyRanges"].as_array().unwrap().iter();
            assert!(statuses.clone().all(|r| r["status"] == json!("online")));
            assert_ne!(
                r.header("etag").unwrap(),
                etag_before,
                "the pkranges etag changes with a split"
            );
            // If-None-Match with the current etag: 304.
            let etag = r.header("etag").unwrap().to_string();
            let r304 = s
                .get(
                    "/dbs/db/colls/a/pkranges",
                    &[("if-none-match", &etag), ("a-im", "Incremental Feed")],
                )
                .await;
            assert_eq!(r304.status, StatusCode::NOT_MODIFIED);
            break;
        }
        assert!(Instant::now() < deadline, "the split did not complete");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = s.get(&format!("/offers/{id}"), &[]).await;
    assert_eq!(r.json["content"]["offerThroughput"], json!(11000));
    assert_eq!(r.json["content"]["isOfferReplacePending"], json!(false));
    let (rows, _) = s
        .query_all("db", "a", "SELECT VALUE COUNT(1) FROM c", json!([]), &[])
        .await;
    assert_eq!(rows, vec![json!(50)]);
    // Invalid throughput values are 400s.
    let mut bad = r.json.clone();
    bad["content"]["offerThroughput"] = json!(150);
    assert_eq!(
        s.request(Method::PUT, &format!("/offers/{id}"), &[], Some(bad))
            .await
            .status,
        StatusCode::BAD_REQUEST
    );
    s.stop().await;
}

#[tokio::test]
async fn logical_partition_size_limit() {
    let s = TestServer::start_with(Options {
        limits: Some(Limits {
            logical_partition_limit_bytes: 4 * 1024,
            ..Limits::default()
        }),
        ..Default::default()
    })
    .await;
    s.setup("db", "ev", hpk()).await;
    let pk = json!(["t", "u", "s"]);
    let mut stored = 0;
    let mut refused = None;
    for i in 0..20 {
        let r = s
            .create("db", "ev", &pk, event(&format!("i{i}"), "t", "u", "s"))
            .await;
        if r.status == StatusCode::CREATED {
            stored += 1;
        } else {
            refused = Some(r);
            break;
        }
    }
    let r = refused.expect("the limit was hit");
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{r:?}");
    assert_eq!(r.substatus(), Some(1014));
    assert!(r.message().contains("maximum size"), "{r:?}");
    // Nothing changed: the refused item is absent, other keys still accept writes.
    let r = s
        .get(
            &format!("{DOCS}/i{stored}"),
            &[("x-ms-documentdb-partitionkey", &pk.to_string())],
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(read_feed(&s, 100).await.len(), stored);
    let r = s
        .create(
            "db",
            "ev",
            &json!(["t", "u", "other"]),
            event("x", "t", "u", "other"),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    s.stop().await;
}

/// Documents are numbered per physical partition, as the service numbers them: DOCUMENTID
/// counts from 1 in each partition and is "unique only within a single physical partition"
/// (https://learn.microsoft.com/en-us/cosmos-db/query/documentid), while `_rid`s stay unique
/// in the container — the SDKs order hybrid search ties by `_rid` and coalesce rows by it.
/// A split's children number on after their parent, so the numbers stay unique in each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_are_numbered_per_physical_partition() {
    let s = server(24 * 1024).await;
    let coll = json!({"id": "n", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}});
    let r = s
        .post("/dbs/db/colls", &[("x-ms-offer-throughput", "12000")], coll)
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    // "2" hashes into the first of the two partitions, "1" into the second.
    for i in 0..6 {
        let pk = json!([((i % 2) + 1).to_string()]);
        let r = s
            .create("db", "n", &pk, json!({"id": i.to_string(), "pk": pk[0]}))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    }
    let sql = "SELECT c.id, c.pk, c._rid, DOCUMENTID(c) AS n FROM c";
    let (rows, _) = s.query_all("db", "n", sql, json!([]), &[]).await;
    let mut by_rid: Vec<(String, String, u64)> = rows
        .iter()
        .map(|r| {
            let f = |k: &str| r[k].as_str().unwrap().to_string();
            (f("_rid"), f("id"), r["n"].as_u64().unwrap())
        })
        .collect();
    by_rid.sort();
    let ids: Vec<&str> = by_rid.iter().map(|(_, id, _)| id.as_str()).collect();
    let numbers: Vec<u64> = by_rid.iter().map(|(_, _, n)| *n).collect();
    assert_eq!(ids, ["1", "0", "3", "2", "5", "4"], "{by_rid:?}");
    assert_eq!(numbers, [1, 1, 2, 2, 3, 3]);

    // Splits: every partition's numbers stay unique, and every `_rid` in the container.
    for i in 0..300 {
        let (t, u) = (format!("t{}", i % 20), format!("u{}", i % 7));
        let id = format!("i{i}");
        let r = s
            .create("db", "ev", &json!([t, u, "s"]), event(&id, &t, &u, "s"))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    }
    let ranges = wait_for_splits(&s, 4).await;
    assert!(ranges.len() >= 4, "only {} partitions", ranges.len());
    let mut rids = HashSet::new();
    for range in &ranges {
        let id = range["id"].as_str().unwrap();
        let h = [("x-ms-documentdb-partitionkeyrangeid", id)];
        let sql = "SELECT c._rid, DOCUMENTID(c) AS n FROM c";
        let (rows, _) = s.query_all("db", "ev", sql, json!([]), &h).await;
        let numbers: HashSet<u64> = rows.iter().map(|r| r["n"].as_u64().unwrap()).collect();
        assert_eq!(numbers.len(), rows.len(), "range {id}: {rows:?}");
        rids.extend(rows.iter().map(|r| r["_rid"].as_str().unwrap().to_string()));
    }
    assert_eq!(rids.len(), 300);
}
