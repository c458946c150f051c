//! Durability under `kill -9`: a separate strata process is killed with SIGKILL in the middle
//! of a concurrent write burst; after restart every acknowledged write is present and intact,
//! and the store opens without repair. Several rounds on the same data folder.

use reqwest::StatusCode;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use strata_tests::{Client, TempDir};

const ITEMS: &str = "/dbs/db/colls/c/docs";

fn start(dir: &std::path::Path) -> (Child, Client) {
    start_with(dir, &[])
}

fn start_with(dir: &std::path::Path, flags: &[&str]) -> (Child, Client) {
    strata_tests::spawn_server_with(env!("CARGO_BIN_EXE_strata-test-server"), dir, flags)
}

/// How many items each batch (the number before `-` in an item's id) left.
fn items_per_batch(items: &HashMap<String, Value>) -> HashMap<u64, u64> {
    let mut per_batch: HashMap<u64, u64> = HashMap::new();
    for id in items.keys() {
        let b: u64 = id.split('-').next().unwrap().parse().unwrap();
        *per_batch.entry(b).or_default() += 1;
    }
    per_batch
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_writes_survive_sigkill() {
    survive_sigkill(&[]).await;
}

/// The same on PostgreSQL (`--store`): strata is killed, PostgreSQL keeps running.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_writes_survive_sigkill_on_postgres() {
    let pg = strata_tests::postgres::Postgres::start();
    survive_sigkill(&["--store", &pg.url]).await;
}

/// Rounds of a concurrent write burst killed with SIGKILL; every acknowledged write is
/// present and intact after each restart.
async fn survive_sigkill(flags: &[&str]) {
    let dir = TempDir::new("crash");
    let acked: Arc<Mutex<HashMap<String, Value>>> = Arc::new(Mutex::new(HashMap::new()));
    for round in 0..3 {
        let (mut child, client) = start_with(&dir.0, flags);
        if round == 0 {
            let r = client.post("/dbs", &[], json!({"id": "db"})).await;
            assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
            let r = client
                .post("/dbs/db/colls", &[], json!({"id": "c", "partitionKey": {"paths": ["/t", "/u"], "kind": "MultiHash", "version": 2}}))
                .await;
            assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
        } else {
            // Everything acknowledged before the previous kill is there, intact.
            let items = client.all_items(ITEMS).await;
            let acked = acked.lock().unwrap().clone();
            for (id, want) in &acked {
                let got = items
                    .get(id)
                    .unwrap_or_else(|| panic!("round {round}: acknowledged item {id} lost"));
                assert_eq!(
                    got["payload"], want["payload"],
                    "round {round}: item {id} corrupted"
                );
                assert_eq!(got["n"], want["n"], "round {round}: item {id} corrupted");
            }
            for (id, d) in &items {
                assert_eq!(
                    d["payload"].as_str().map(str::len),
                    Some(512),
                    "item {id} is intact"
                );
            }
        }
        // A concurrent write burst: creates, and upserts that overwrite earlier items. It
        // runs until strata is killed (the writers' requests then fail and they end).
        let before = acked.lock().unwrap().len();
        let stop_at = Instant::now() + Duration::from_secs(60);
        let mut writers = Vec::new();
        for w in 0..8 {
            let client = client.clone();
            let acked = Arc::clone(&acked);
            writers.push(tokio::spawn(async move {
                let mut i = 0u64;
                while Instant::now() < stop_at {
                    let id = format!("r{round}-w{w}-{i}");
                    let (t, u) = (format!("t{}", i % 7), format!("u{w}"));
                    let body = json!({"id": id, "t": t, "u": u, "n": i, "payload": format!("{:0>512}", i)});
                    let pk = json!([t, u]).to_string();
                    let r = client
                        .request(
                            reqwest::Method::POST,
                            ITEMS,
                            &[("x-ms-documentdb-partitionkey", &pk), ("x-ms-documentdb-is-upsert", "true")],
                            Some(body.clone()),
                        )
                        .await;
                    if r.status.is_success() {
                        acked.lock().unwrap().insert(id, body);
                    }
                    i += 1;
                }
            }));
        }
        // Kill in the middle of the burst: once it has written enough to mean something,
        // however slow the machine (a fixed delay acknowledged too few on a loaded CI runner).
        let enough = Instant::now() + Duration::from_secs(30);
        while acked.lock().unwrap().len() < before + 150 && Instant::now() < enough {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        for w in writers {
            let _ = w.await;
        }
        let wrote = acked.lock().unwrap().len() - before;
        assert!(wrote >= 150, "the burst wrote only {wrote} items in 30 s");
    }
    // Final check after the last kill.
    let (mut child, client) = start_with(&dir.0, flags);
    let items = client.all_items(ITEMS).await;
    let acked = acked.lock().unwrap().clone();
    let missing: Vec<&String> = acked.keys().filter(|k| !items.contains_key(*k)).collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged writes lost, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    child.kill().ok();
    child.wait().ok();
}

/// kill -9 during a stream of transactional batches: after restart each batch is entirely
/// present or entirely absent, and every acknowledged batch is present.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batches_are_all_or_nothing_across_sigkill() {
    let dir = TempDir::new("crash-batch");
    let acked: Arc<Mutex<Vec<(u64, u64)>>> = Arc::new(Mutex::new(Vec::new()));
    let sent: Arc<Mutex<Vec<(u64, u64)>>> = Arc::new(Mutex::new(Vec::new()));
    const OPS: u64 = 20;
    for round in 0..2 {
        let (mut child, client) = start(&dir.0);
        if round == 0 {
            client.post("/dbs", &[], json!({"id": "db"})).await;
            let r = client
                .post("/dbs/db/colls", &[], json!({"id": "c", "partitionKey": {"paths": ["/t", "/u"], "kind": "MultiHash", "version": 2}}))
                .await;
            assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
        }
        let before = acked.lock().unwrap().len();
        let stop_at = Instant::now() + Duration::from_secs(60);
        let mut writers = Vec::new();
        for w in 0..4u64 {
            let (client, acked, sent) = (client.clone(), Arc::clone(&acked), Arc::clone(&sent));
            writers.push(tokio::spawn(async move {
                let mut b = 0u64;
                while Instant::now() < stop_at {
                    let batch_id = round * 1_000_000 + w * 10_000 + b;
                    let (t, u) = (format!("t{w}"), format!("b{batch_id}"));
                    let ops: Vec<Value> = (0..OPS)
                        .map(|i| json!({"operationType": "Create", "resourceBody": {"id": format!("{batch_id}-{i}"), "t": t, "u": u, "pad": "q".repeat(256)}}))
                        .collect();
                    let pk = json!([t, u]).to_string();
                    sent.lock().unwrap().push((batch_id, OPS));
                    let r = client
                        .request(
                            reqwest::Method::POST,
                            ITEMS,
                            &[("x-ms-cosmos-is-batch-request", "True"), ("x-ms-cosmos-batch-atomic", "True"), ("x-ms-documentdb-partitionkey", &pk)],
                            Some(Value::Array(ops)),
                        )
                        .await;
                    if r.status == StatusCode::OK {
                        acked.lock().unwrap().push((batch_id, OPS));
                    }
                    b += 1;
                }
            }));
        }
        // Kill once some batches were acknowledged, however slow the machine.
        let enough = Instant::now() + Duration::from_secs(30);
        while acked.lock().unwrap().len() < before + 12 && Instant::now() < enough {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        for w in writers {
            let _ = w.await;
        }
    }
    let (mut child, client) = start(&dir.0);
    let per_batch = items_per_batch(&client.all_items(ITEMS).await);
    for (b, n) in &per_batch {
        assert_eq!(
            *n, OPS,
            "batch {b} is partially present ({n} of {OPS} items)"
        );
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() > 20, "batches were acknowledged");
    for (b, _) in &acked {
        assert!(per_batch.contains_key(b), "acknowledged batch {b} was lost");
    }
    let sent = sent.lock().unwrap().len();
    assert!(per_batch.len() <= sent);
    child.kill().ok();
    child.wait().ok();
}

/// kill -9 while stored procedures run: after restart each execution's writes are entirely
/// present or entirely absent, every acknowledged one is present, and one killed half way
/// (it wrote its documents, then was still running) left nothing. The long execution runs
/// in a container of its own: a running script holds its container's writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stored_procedures_are_all_or_nothing_across_sigkill() {
    let dir = TempDir::new("crash-sproc");
    const DOCS: u64 = 40;
    let (mut child, client) = start(&dir.0);
    client.post("/dbs", &[], json!({"id": "db"})).await;
    for coll in ["c", "slow"] {
        let r = client
            .post(
                "/dbs/db/colls",
                &[],
                json!({"id": coll, "partitionKey": {"paths": ["/t"], "kind": "Hash", "version": 2}}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    }
    // Writes `n` documents, then keeps running for `spin` ms before it returns.
    let body = r#"function (batch, n, spin) {
        var c = getContext().getCollection();
        for (var i = 0; i < n; i++) {
            c.createDocument(c.getSelfLink(), {id: batch + "-" + i, t: "x", pad: "q".repeat(200)});
        }
        var until = Date.now() + spin;
        while (Date.now() < until) {}
        getContext().getResponse().setBody(batch);
    }"#;
    for coll in ["c", "slow"] {
        let r = client
            .post(
                &format!("/dbs/db/colls/{coll}/sprocs"),
                &[],
                json!({"id": "fill", "body": body}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    }
    let acked: Arc<Mutex<Vec<u64>>> = Arc::new(Mutex::new(Vec::new()));
    let run = |client: Client, coll: &'static str, batch: u64, spin: u64| async move {
        client
            .post(
                &format!("/dbs/db/colls/{coll}/sprocs/fill"),
                &[("x-ms-documentdb-partitionkey", "[\"x\"]")],
                json!([batch, DOCS, spin]),
            )
            .await
    };
    let stop_at = Instant::now() + Duration::from_millis(3500);
    let mut writers = Vec::new();
    for w in 0..3u64 {
        let (client, acked) = (client.clone(), Arc::clone(&acked));
        writers.push(tokio::spawn(async move {
            let mut b = 0u64;
            while Instant::now() < stop_at {
                let batch = w * 10_000 + b;
                if run(client.clone(), "c", batch, b % 20).await.status == StatusCode::OK {
                    acked.lock().unwrap().push(batch);
                }
                b += 1;
            }
        }));
    }
    // One execution still running (past its writes) when the process dies.
    let long = tokio::spawn(run(client.clone(), "slow", 99_999, 4_000));
    // Kill once the slow execution is past its writes and some executions were acknowledged
    // (on a loaded machine that takes longer than 700 ms), while the slow one still spins.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let deadline = Instant::now() + Duration::from_millis(2300);
    while acked.lock().unwrap().len() <= 5 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    for w in writers {
        let _ = w.await;
    }
    let _ = long.await;

    let (mut child, client) = start(&dir.0);
    let r = client.get("/dbs/db/colls/slow/docs", &[]).await;
    assert_eq!(
        r.json["_count"],
        json!(0),
        "the execution killed half way left its writes: {r:?}"
    );
    let per_batch = items_per_batch(&client.all_items(ITEMS).await);
    for (b, n) in &per_batch {
        assert_eq!(
            *n, DOCS,
            "execution {b} is partially present ({n} of {DOCS})"
        );
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() > 5,
        "executions were acknowledged: {}",
        acked.len()
    );
    for b in &acked {
        assert!(
            per_batch.contains_key(b),
            "acknowledged execution {b} was lost"
        );
    }
    child.kill().ok();
    child.wait().ok();
}

/// kill -9 during a burst of full-text writes (creates, and rewrites that move a document to
/// other words): the postings pending in memory die with the process, and after the restart
/// `FullTextContains` — answered from the index, as the plan says — finds exactly the
/// documents whose stored text has the word, every acknowledged one among them. Two rounds,
/// so the second restart also reads what the first caught up.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn full_text_postings_survive_sigkill() {
    const WORDS: [&str; 6] = ["river", "stone", "bridge", "forest", "ocean", "light"];
    let dir = TempDir::new("crash-fulltext");
    let acked: Arc<Mutex<HashMap<String, Value>>> = Arc::new(Mutex::new(HashMap::new()));
    for round in 0..2 {
        let (mut child, client) = start(&dir.0);
        if round == 0 {
            let r = client.post("/dbs", &[], json!({"id": "db"})).await;
            assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
            let coll = json!({"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2},
                "fullTextPolicy": {"defaultLanguage": "en-US", "fullTextPaths": [{"path": "/t", "language": "en-US"}]},
                "indexingPolicy": {"fullTextIndexes": [{"path": "/t"}]}});
            let r = client.post("/dbs/db/colls", &[], coll).await;
            assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
        }
        let before = acked.lock().unwrap().len();
        let stop_at = Instant::now() + Duration::from_secs(60);
        let mut writers = Vec::new();
        for w in 0..4 {
            let (client, acked) = (client.clone(), Arc::clone(&acked));
            writers.push(tokio::spawn(async move {
                let mut i = 0usize;
                while Instant::now() < stop_at {
                    // Ids repeat across rounds and writers' turns: most writes rewrite.
                    let id = format!("w{w}-{}", i % 97);
                    let t = format!("{} {} {round}x{i}", WORDS[i % 6], WORDS[(i / 6 + w) % 6]);
                    // An id keeps the partition of its first write.
                    let first = acked.lock().unwrap().get(&id).map(|d| d["pk"].clone());
                    let pk = first.unwrap_or_else(|| json!(format!("p{}", i % 11)));
                    let body = json!({"id": id, "pk": pk, "t": t});
                    let pk = json!([pk]).to_string();
                    let headers = [
                        ("x-ms-documentdb-partitionkey", pk.as_str()),
                        ("x-ms-documentdb-is-upsert", "true"),
                    ];
                    let r = client
                        .request(reqwest::Method::POST, ITEMS, &headers, Some(body.clone()))
                        .await;
                    if r.status.is_success() {
                        acked.lock().unwrap().insert(id, body);
                    }
                    i += 1;
                }
            }));
        }
        let enough = Instant::now() + Duration::from_secs(30);
        while acked.lock().unwrap().len() < before + 100 && Instant::now() < enough {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        for w in writers {
            let _ = w.await;
        }
        let (mut child, client) = start(&dir.0);
        let items = client.all_items(ITEMS).await;
        for (id, want) in acked.lock().unwrap().iter() {
            assert!(
                items.contains_key(id),
                "round {round}: acknowledged {id} lost: {want}"
            );
        }
        for word in WORDS {
            let sql = format!("SELECT c.id FROM c WHERE FullTextContains(c.t, '{word}')");
            let (rows, pages) = client
                .query_all("db", "c", &sql, json!([]), &[("x-strata-explain", "true")])
                .await;
            let plan = pages[0].header("x-strata-query-plan").unwrap_or_default();
            let plan = strata_query::protocol::unescape_plan(plan);
            assert!(plan.contains("full-text postings of /t"), "{plan}");
            let mut got: Vec<&str> = rows.iter().filter_map(|r| r["id"].as_str()).collect();
            got.sort_unstable();
            let mut want: Vec<&str> = items
                .iter()
                .filter(|(_, d)| {
                    d["t"]
                        .as_str()
                        .unwrap_or_default()
                        .split(' ')
                        .any(|w| w == word)
                })
                .map(|(id, _)| id.as_str())
                .collect();
            want.sort_unstable();
            assert_eq!(got, want, "round {round}: FullTextContains(c.t, '{word}')");
        }
        child.kill().ok();
        child.wait().ok();
    }
}
