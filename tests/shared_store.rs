//! Several strata processes over one PostgreSQL store (`docs/postgres.md`,
//! `strata_server::follower`): the process holding the store's lock serves it, the others
//! forward to it and take over when it dies. Each test starts a throwaway PostgreSQL and
//! separate strata processes, so that one can be killed with SIGKILL.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use strata_query::protocol::auth_scope_of_path;
use strata_tests::{postgres::Postgres, Client, TempDir};

const DOCS: &str = "/dbs/db/colls/c/docs";

/// A strata process, killed with SIGKILL when dropped (a failing test leaves none behind).
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A strata process over the store at `url`, with its local files in `dir`.
fn start(dir: &TempDir, url: &str) -> (Proc, Client) {
    let (child, client) = strata_tests::spawn_server_with(
        env!("CARGO_BIN_EXE_strata-test-server"),
        &dir.0,
        &["--store", url],
    );
    (Proc(child), client)
}

fn kill(p: &mut Proc) {
    p.0.kill().expect("SIGKILL");
    p.0.wait().expect("reap");
}

async fn create_container(c: &Client) {
    let r = c.post("/dbs", &[], json!({"id": "db"})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    let r = c
        .post(
            "/dbs/db/colls",
            &[],
            json!({"id": "c", "partitionKey": {"paths": ["/t"], "kind": "Hash", "version": 2}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
}

/// Upserts `doc` without panicking when the process is gone: `Some(status)` if it answered.
async fn upsert(c: &Client, doc: &Value) -> Option<StatusCode> {
    let pk = json!([doc["t"]]).to_string();
    c.send(
        Method::POST,
        DOCS,
        &auth_scope_of_path(DOCS),
        &[
            ("x-ms-documentdb-partitionkey", &pk),
            ("x-ms-documentdb-is-upsert", "true"),
        ],
        Some(doc.to_string().into_bytes()),
    )
    .await
    .ok()
    .map(|r| r.status)
}

/// Waits until `c` answers a read of `path` again (the survivor took the store over).
async fn until_served(c: &Client, path: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = c
            .send(Method::GET, path, &auth_scope_of_path(path), &[], None)
            .await;
        if matches!(&r, Ok(r) if r.status == StatusCode::OK) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no process took over: {:?}",
            r.map(|r| r.status)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A change-feed reader on one process sees every write made through the other exactly once,
/// in the order written; a session token from one process is honoured by the other; and a
/// query's continuation from the serving process resumes on the other after it was killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reader_on_one_process_sees_every_write_through_the_other_once_in_order() {
    let pg = Postgres::start();
    let (da, db) = (TempDir::new("shared-a"), TempDir::new("shared-b"));
    let (mut a, ca) = start(&da, &pg.url);
    let (b, cb) = start(&db, &pg.url);
    // Created through the process that forwards.
    create_container(&cb).await;
    let r = ca
        .get(
            DOCS,
            &[("a-im", "Incremental Feed"), ("if-none-match", "*")],
        )
        .await;
    let mut etag = r.header("etag").expect("etag").to_string();

    const N: u64 = 300;
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (ca, done) = (ca.clone(), Arc::clone(&done));
        tokio::spawn(async move {
            for n in 0..N {
                let doc = json!({"id": format!("i{n}"), "t": format!("t{}", n % 5), "n": n});
                assert_eq!(upsert(&ca, &doc).await, Some(StatusCode::CREATED), "{doc}");
            }
            done.store(true, Ordering::Release);
        })
    };
    let mut seen: Vec<u64> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let finished = done.load(Ordering::Acquire);
        let h = [
            ("a-im", "Incremental Feed"),
            ("if-none-match", etag.as_str()),
            ("x-ms-max-item-count", "7"),
        ];
        let r = cb.get(DOCS, &h).await;
        match r.status {
            StatusCode::OK => {
                for d in r.json["Documents"].as_array().expect("documents") {
                    seen.push(d["n"].as_u64().expect("n"));
                }
                etag = r.header("etag").expect("etag").to_string();
            }
            StatusCode::NOT_MODIFIED if finished => break,
            StatusCode::NOT_MODIFIED => tokio::time::sleep(Duration::from_millis(5)).await,
            s => panic!("change feed answered {s}: {r:?}"),
        }
        assert!(
            Instant::now() < deadline,
            "the change feed stalled at {}",
            seen.len()
        );
    }
    writer.await.expect("writer");
    assert_eq!(
        seen,
        (0..N).collect::<Vec<_>>(),
        "every change once, in order"
    );

    // A request another process forwarded already is not forwarded again (a stale address
    // must never make two processes forward to each other): 503, which clients retry.
    let r = cb.get("/dbs/db", &[("x-strata-forwarded", "1")]).await;
    strata_tests::assert_error(&r, 503, "ServiceUnavailable");

    // Read-your-writes across processes: A's session token is good on B.
    let doc = json!({"id": "s", "t": "t0", "n": 0});
    let r = ca
        .post(DOCS, &[("x-ms-documentdb-partitionkey", "[\"t0\"]")], doc)
        .await;
    let session = r.header("x-ms-session-token").expect("session").to_string();
    let r = cb
        .get(
            &format!("{DOCS}/s"),
            &[
                ("x-ms-documentdb-partitionkey", "[\"t0\"]"),
                ("x-ms-session-token", &session),
                ("x-ms-consistency-level", "Session"),
            ],
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");

    // A query's first page from A; A dies; B takes over and serves the rest from the token.
    let q = json!({"query": "SELECT c.n FROM c WHERE c.t = 't1' ORDER BY c.n", "parameters": []});
    let query_headers = [
        ("x-ms-documentdb-isquery", "True"),
        ("content-type", "application/query+json"),
        ("x-ms-documentdb-partitionkey", "[\"t1\"]"),
        ("x-ms-max-item-count", "10"),
    ];
    let r = ca.post(DOCS, &query_headers, q.clone()).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let mut got: Vec<u64> = r.json["Documents"]
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|d| d["n"].as_u64())
        .collect();
    let mut cont = r
        .header("x-ms-continuation")
        .expect("more pages")
        .to_string();
    kill(&mut a);
    until_served(&cb, "/dbs/db").await;
    loop {
        let mut h = query_headers.to_vec();
        h.push(("x-ms-continuation", &cont));
        let r = cb.post(DOCS, &h, q.clone()).await;
        assert_eq!(r.status, StatusCode::OK, "{r:?}");
        got.extend(
            r.json["Documents"]
                .as_array()
                .expect("rows")
                .iter()
                .filter_map(|d| d["n"].as_u64()),
        );
        match r.header("x-ms-continuation") {
            Some(c) => cont = c.to_string(),
            None => break,
        }
    }
    assert_eq!(got, (0..N).filter(|n| n % 5 == 1).collect::<Vec<_>>());
    drop(b);
}

/// Writers send to both processes while one is killed with SIGKILL: the serving one twice
/// (the survivor takes over, the killed one comes back and forwards, then the new server is
/// killed), then the forwarding one. Every acknowledged write is present after each kill,
/// and writes continue through the survivor.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_either_process_loses_nothing_acknowledged() {
    let pg = Postgres::start();
    let dirs = [TempDir::new("shared-a"), TempDir::new("shared-b")];
    let mut procs: Vec<(Proc, Client)> = dirs.iter().map(|d| start(d, &pg.url)).collect();
    create_container(&procs[1].1).await;
    let acked: Arc<Mutex<HashMap<String, Value>>> = Arc::default();
    // The first process started serves; rounds 0 and 1 kill the serving one, round 2 the
    // forwarding one.
    let mut serving = 0;
    for round in 0..3 {
        let victim = if round < 2 { serving } else { 1 - serving };
        let clients: Vec<Client> = procs.iter().map(|(_, c)| c.clone()).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let through_survivor = Arc::new(Mutex::new(HashSet::new()));
        let mut writers = Vec::new();
        for w in 0..6usize {
            let (c, acked, stop) = (
                clients[w % 2].clone(),
                Arc::clone(&acked),
                Arc::clone(&stop),
            );
            let (survivor, through_survivor) = (w % 2 != victim, Arc::clone(&through_survivor));
            writers.push(tokio::spawn(async move {
                let mut i = 0u64;
                while !stop.load(Ordering::Acquire) {
                    let id = format!("r{round}-w{w}-{i}");
                    let doc = json!({"id": id, "t": format!("t{}", i % 7), "n": i, "pad": "p".repeat(200)});
                    match upsert(&c, &doc).await {
                        Some(s) if s.is_success() => {
                            acked.lock().unwrap().insert(id.clone(), doc);
                            if survivor {
                                through_survivor.lock().unwrap().insert(id);
                            }
                        }
                        _ => tokio::time::sleep(Duration::from_millis(20)).await,
                    }
                    i += 1;
                }
            }));
        }
        let before = acked.lock().unwrap().len();
        let deadline = Instant::now() + Duration::from_secs(60);
        while acked.lock().unwrap().len() < before + 150 {
            assert!(
                Instant::now() < deadline,
                "round {round}: the burst wrote too little"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        kill(&mut procs[victim].0);
        // The survivor's writers carry on (once it has taken over, if it has to).
        let since_kill = through_survivor.lock().unwrap().len();
        let deadline = Instant::now() + Duration::from_secs(60);
        while through_survivor.lock().unwrap().len() < since_kill + 100 {
            assert!(
                Instant::now() < deadline,
                "round {round}: no writes after the takeover"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        stop.store(true, Ordering::Release);
        for w in writers {
            w.await.expect("writer");
        }
        // Everything acknowledged is there, read through the survivor.
        let survivor = 1 - victim;
        let items = procs[survivor].1.all_items(DOCS).await;
        let acked_now = acked.lock().unwrap().clone();
        for (id, want) in &acked_now {
            let got = items
                .get(id)
                .unwrap_or_else(|| panic!("round {round}: acknowledged {id} lost"));
            assert_eq!(got["n"], want["n"], "{id}");
            assert_eq!(got["pad"], want["pad"], "{id}");
        }
        // The killed process comes back and forwards to the serving one.
        procs[victim] = start(&dirs[victim], &pg.url);
        assert_eq!(procs[victim].1.all_items(DOCS).await.len(), items.len());
        if victim == serving {
            serving = survivor;
        }
    }
}

/// The official Python SDK, unchanged, through the forwarding process (its account names
/// that process, so every later request goes there too), then again through the same
/// address after the serving process was killed and the forwarding one took over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_works_through_a_forwarding_process_and_after_a_takeover() {
    let pg = Postgres::start();
    let (da, db) = (TempDir::new("shared-a"), TempDir::new("shared-b"));
    let (mut a, _) = start(&da, &pg.url);
    let (_b, cb) = start(&db, &pg.url);
    let run = |url: String| {
        tokio::task::spawn_blocking(move || {
            strata_tests::python::run_script("crud_hpk.py", &url, &[])
        })
    };
    run(cb.url.clone())
        .await
        .expect("python through the forwarding process");
    kill(&mut a);
    until_served(&cb, "/").await;
    run(cb.url.clone())
        .await
        .expect("python after the takeover");
}
