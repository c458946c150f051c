//! `strata export` and `strata import` (the real binary, over HTTP): a round trip between two
//! servers keeps every container definition, throughput, script and item exactly (system
//! properties regenerated), plain and gzip; an import reports per-item failures and goes on.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::process::Command;
use strata_tests::{Client, TempDir, TestServer};

fn strata(args: &[&str]) -> (bool, String) {
    strata_in(std::path::Path::new("."), args)
}

/// Runs `strata` in folder `cwd`.
fn strata_in(cwd: &std::path::Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_strata-test-server"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run strata");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

async fn ok(
    s: &TestServer,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> Value {
    let r = s.request(method, path, headers, body).await;
    assert!(r.status.is_success(), "{path}: {r:?}");
    r.json
}

const SYSTEM: &[&str] = &["_rid", "_self", "_etag", "_ts", "_attachments"];

fn user_part(mut v: Value) -> Value {
    if let Some(m) = v.as_object_mut() {
        for k in SYSTEM {
            m.remove(*k);
        }
    }
    v
}

/// Everything a user defined in a server: container definitions, throughput, scripts, items.
async fn contents(s: &TestServer) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for db in ok(s, Method::GET, "/dbs", &[], None).await["Databases"]
        .as_array()
        .unwrap()
        .clone()
    {
        let db = db["id"].as_str().unwrap().to_string();
        for c in ok(s, Method::GET, &format!("/dbs/{db}/colls"), &[], None).await
            ["DocumentCollections"]
            .as_array()
            .unwrap()
            .clone()
        {
            let coll = c["id"].as_str().unwrap().to_string();
            let mut def = c.clone();
            def.as_object_mut()
                .unwrap()
                .retain(|k, _| !k.starts_with('_'));
            out.insert(format!("{db}/{coll}/definition"), def);
            let offers = ok(s, Method::GET, "/offers", &[], None).await;
            let rid = c["_rid"].as_str().unwrap();
            let t = offers["Offers"]
                .as_array()
                .unwrap()
                .iter()
                .find(|o| o["offerResourceId"] == rid)
                .map(|o| o["content"].clone());
            out.insert(format!("{db}/{coll}/throughput"), t.unwrap_or(Value::Null));
            for kind in ["sprocs", "triggers", "udfs"] {
                let key = match kind {
                    "sprocs" => "StoredProcedures",
                    "triggers" => "Triggers",
                    _ => "UserDefinedFunctions",
                };
                for sc in ok(
                    s,
                    Method::GET,
                    &format!("/dbs/{db}/colls/{coll}/{kind}"),
                    &[],
                    None,
                )
                .await[key]
                    .as_array()
                    .unwrap()
                {
                    let mut v = sc.clone();
                    v.as_object_mut()
                        .unwrap()
                        .retain(|k, _| !k.starts_with('_'));
                    out.insert(
                        format!("{db}/{coll}/{kind}/{}", sc["id"].as_str().unwrap()),
                        v,
                    );
                }
            }
            let (rows, _) = s
                .query_all(&db, &coll, "SELECT * FROM c", json!([]), &[])
                .await;
            for r in rows {
                let key = format!("{db}/{coll}/item/{}/{}", r["TenantId"], r["id"]);
                out.insert(key, user_part(r));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_then_import_round_trips_exactly() {
    let src = TestServer::start().await;
    ok(&src, Method::POST, "/dbs", &[], Some(json!({"id": "app"}))).await;
    ok(
        &src,
        Method::POST,
        "/dbs",
        &[],
        Some(json!({"id": "other"})),
    )
    .await;
    ok(&src, Method::POST, "/dbs/app/colls", &[("x-ms-offer-throughput", "1200")], Some(json!({
        "id": "sessions",
        "partitionKey": {"paths": ["/TenantId", "/UserId", "/SessionId"], "kind": "MultiHash", "version": 2},
        "defaultTtl": -1,
        "indexingPolicy": {"indexingMode": "consistent", "includedPaths": [{"path": "/*"}], "excludedPaths": [{"path": "/pad/?"}]},
        "uniqueKeyPolicy": {"uniqueKeys": [{"paths": ["/email"]}]},
    }))).await;
    ok(&src, Method::POST, "/dbs/other/colls", &[], Some(json!({"id": "plain", "partitionKey": {"paths": ["/TenantId"], "kind": "Hash", "version": 2}}))).await;
    ok(
        &src,
        Method::POST,
        "/dbs/app/colls/sessions/sprocs",
        &[],
        Some(json!({"id": "p", "body": "function () { getContext().getResponse().setBody(1); }"})),
    )
    .await;
    ok(&src, Method::POST, "/dbs/app/colls/sessions/triggers", &[], Some(json!({"id": "t", "body": "function () {}", "triggerType": "Pre", "triggerOperation": "Create"}))).await;
    ok(
        &src,
        Method::POST,
        "/dbs/app/colls/sessions/udfs",
        &[],
        Some(json!({"id": "u", "body": "function (x) { return x; }"})),
    )
    .await;
    for i in 0..1500 {
        let (t, u) = (format!("t{}", i % 7), format!("u{}", i % 3));
        let doc = json!({"id": format!("i{i}"), "TenantId": t, "UserId": u, "SessionId": "s", "n": i,
                         "email": format!("e{i}@x"), "_type": "kept", "nested": {"a": [1, {"b": null}], "ü": "ünï"},
                         "pad": "x".repeat(200)});
        let k = json!([t, u, "s"]).to_string();
        ok(
            &src,
            Method::POST,
            "/dbs/app/colls/sessions/docs",
            &[("x-ms-documentdb-partitionkey", &k)],
            Some(doc),
        )
        .await;
    }
    for i in 0..20 {
        let doc = json!({"id": format!("p{i}"), "TenantId": format!("t{i}")});
        let k = json!([format!("t{i}")]).to_string();
        ok(
            &src,
            Method::POST,
            "/dbs/other/colls/plain/docs",
            &[("x-ms-documentdb-partitionkey", &k)],
            Some(doc),
        )
        .await;
    }
    let want = contents(&src).await;
    assert!(want.len() > 1520, "{}", want.len());
    let dir = TempDir::new("transfer");
    for name in ["all.jsonl", "all.jsonl.gz"] {
        let file = dir.0.join(name);
        let file = file.to_str().unwrap();
        let (ok_, text) = strata(&["export", "--from", &src.url, "--out", file]);
        assert!(ok_, "{text}");
        // A .gz name is gzip (the import sniffs, so only the bytes tell).
        let head = std::fs::read(file).unwrap();
        assert_eq!(
            head.starts_with(&[0x1f, 0x8b]),
            name.ends_with(".gz"),
            "{name}: {:?}",
            &head[..4]
        );
        assert!(
            text.contains("exported 1520/1520") && text.contains("2 container(s)"),
            "{text}"
        );
        let dst = TestServer::start().await;
        let conn = format!(
            "AccountEndpoint={};AccountKey={};",
            dst.url,
            strata_query::protocol::EMULATOR_KEY
        );
        let (ok_, text) = strata(&["import", "--to", &conn, "--in", file]);
        assert!(ok_, "{text}");
        assert!(
            text.contains("imported 1520") && !text.contains("failed"),
            "{text}"
        );
        let got = contents(&dst).await;
        assert_eq!(got.len(), want.len(), "{name}");
        for (k, v) in &want {
            assert_eq!(got.get(k), Some(v), "{name}: {k}");
        }
        dst.stop().await;
    }
    // A container or database alone.
    let file = dir.0.join("one.jsonl");
    let (ok_, text) = strata(&[
        "export",
        "--from",
        &src.url,
        "--out",
        file.to_str().unwrap(),
        "other/plain",
    ]);
    assert!(
        ok_ && text.contains("exported 20/20") && text.contains("1 container(s)"),
        "{text}"
    );
    src.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_reports_item_failures_and_goes_on() {
    let dst = TestServer::start().await;
    let dir = TempDir::new("transfer-bad");
    let file = dir.0.join("bad.jsonl");
    let container = json!({"container": {"database": "app", "definition": {
        "id": "people", "partitionKey": {"paths": ["/team"], "kind": "Hash", "version": 2},
        "uniqueKeyPolicy": {"uniqueKeys": [{"paths": ["/email"]}]}}, "throughput": null, "scripts": []}});
    let item = |id: &str, email: &str| {
        json!({"item": {"database": "app", "container": "people",
        "item": {"id": id, "team": "a", "email": email}}})
    };
    let lines = [
        container,
        item("1", "x@y"),
        item("2", "x@y"),
        item("3", "z@y"),
        json!({"item": {"database": "app", "container": "people", "item": {"team": "a"}}}),
    ];
    std::fs::write(
        &file,
        lines
            .iter()
            .map(|l| l.to_string() + "\n")
            .collect::<String>(),
    )
    .unwrap();
    let (ok_, text) = strata(&["import", "--to", &dst.url, "--in", file.to_str().unwrap()]);
    assert!(ok_, "{text}");
    assert!(
        text.contains("imported 2") && text.contains("2 failed"),
        "{text}"
    );
    assert!(text.contains("item '2'") && text.contains("409"), "{text}");
    let r = dst
        .get(
            "/dbs/app/colls/people/docs/3",
            &[("x-ms-documentdb-partitionkey", "[\"a\"]")],
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    // Garbage is refused with the line it is on.
    std::fs::write(&file, "{\"nope\": 1}\n").unwrap();
    let (ok_, text) = strata(&["import", "--to", &dst.url, "--in", file.to_str().unwrap()]);
    assert!(!ok_ && text.contains("line 1"), "{text}");
    dst.stop().await;
}

/// `strata copy` into a three-level key, filling the level old items lack, while a writer
/// keeps writing to the source; run again, it resumes from its checkpoint and catches up;
/// both sides then hold the same items, compared one by one.
/// A server with database `app` and its source container `old` (`/TenantId`, plus `extra`
/// properties), over `partitions` physical partitions when given.
async fn source(partitions: Option<u32>, extra: Value) -> TestServer {
    let s = TestServer::start_with(strata_tests::Options {
        limits: partitions.map(|n| strata_server::store::container::Limits {
            initial_partitions: Some(n),
            ..Default::default()
        }),
        ..Default::default()
    })
    .await;
    ok(&s, Method::POST, "/dbs", &[], Some(json!({"id": "app"}))).await;
    let mut def = json!({"id": "old", "partitionKey": {"paths": ["/TenantId"], "kind": "Hash", "version": 2}});
    if let (Some(d), Some(e)) = (def.as_object_mut(), extra.as_object()) {
        d.extend(e.clone());
    }
    ok(&s, Method::POST, "/dbs/app/colls", &[], Some(def)).await;
    s
}

/// Runs `strata` off the async workers.
async fn strata_async(args: Vec<String>) -> (bool, String) {
    tokio::task::spawn_blocking(move || {
        strata(&args.iter().map(String::as_str).collect::<Vec<_>>())
    })
    .await
    .unwrap()
}

/// `strata copy` of `app/old` into a new `/TenantId/UserId/SessionId` container `app/new`,
/// filling `SessionId` from the id.
fn hpk_copy_args(url: &str, checkpoint: &std::path::Path) -> Vec<String> {
    [
        "copy",
        "--from",
        url,
        "--source",
        "app/old",
        "--dest",
        "app/new",
        "--partition-key",
        "/TenantId,/UserId,/SessionId",
        "--fill",
        "/SessionId=/id",
        "--checkpoint",
        checkpoint.to_str().unwrap(),
    ]
    .iter()
    .map(|x| x.to_string())
    .collect()
}

/// Both sides item by item: `app/new` holds exactly the `n` items of `app/old`, each with
/// `SessionId` filled from its id.
async fn assert_copied_with_session(s: &TestServer, n: usize) {
    let (src, _) = s
        .query_all("app", "old", "SELECT * FROM c", json!([]), &[])
        .await;
    let (dst, _) = s
        .query_all("app", "new", "SELECT * FROM c", json!([]), &[])
        .await;
    let by_id = |rows: Vec<Value>| -> BTreeMap<String, Value> {
        rows.into_iter()
            .map(|r| (r["id"].as_str().unwrap().to_string(), user_part(r)))
            .collect()
    };
    let (src, dst) = (by_id(src), by_id(dst));
    assert_eq!(src.len(), n);
    assert_eq!(
        dst.len(),
        n,
        "nothing more or less in the destination (deletes too)"
    );
    for (id, mut v) in src {
        v["SessionId"] = json!(id.clone());
        assert_eq!(dst.get(&id), Some(&v), "{id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn copy_into_a_hierarchical_key_loses_no_concurrent_write() {
    let s = source(Some(3), json!({})).await;
    let write = |from: usize, to: usize| {
        let client = s.client.clone();
        async move {
            for i in from..to {
                let t = format!("t{}", i % 11);
                let doc = json!({"id": format!("i{i}"), "TenantId": t, "UserId": format!("u{}", i % 4), "n": i});
                let k = json!([t]).to_string();
                let r = client
                    .request(
                        Method::POST,
                        "/dbs/app/colls/old/docs",
                        &[
                            ("x-ms-documentdb-partitionkey", &k),
                            ("x-ms-documentdb-is-upsert", "true"),
                        ],
                        Some(doc),
                    )
                    .await;
                assert!(r.status.is_success(), "{r:?}");
            }
        }
    };
    write(0, 2000).await;
    let dir = TempDir::new("copy");
    let args = hpk_copy_args(&s.url, &dir.0.join("cp.json"));
    let writer = tokio::spawn(write(2000, 2400));
    let (_, first) = strata_async(args.clone()).await;
    assert!(first.contains("copied"), "{first}");
    writer.await.unwrap();
    // Whatever the first run missed, the second (resumed) run copies.
    let (ok_, second) = strata_async(args).await;
    assert!(ok_, "{second}");
    // "(resumed)" when the first run's verification saw the writer still writing, else
    // after a finished copy: either way from the first run's positions.
    assert!(
        (second.contains("(resumed)") || second.contains("(after a finished copy"))
            && second.contains("verified: 2400 items in 11 source logical partitions"),
        "{second}"
    );
    let def = ok(&s, Method::GET, "/dbs/app/colls/new", &[], None).await;
    assert_eq!(
        def["partitionKey"]["paths"],
        json!(["/TenantId", "/UserId", "/SessionId"])
    );
    assert_copied_with_session(&s, 2400).await;
    s.stop().await;
}

/// Loads `n` items of about 330 bytes over 5 tenants into `app/old`, 100 per bulk request.
async fn load_tenants(c: &Client, n: usize) {
    let mut batch = Vec::new();
    for i in 0..n {
        let t = format!("t{}", i % 5);
        batch.push(json!({"operationType": "Upsert", "partitionKey": json!([t]).to_string(),
                          "resourceBody": {"id": format!("i{i}"), "TenantId": t, "pad": "x".repeat(300)}}));
        if batch.len() == 100 || i + 1 == n {
            let r = c
                .request(
                    Method::POST,
                    "/dbs/app/colls/old/docs",
                    &[
                        ("x-ms-cosmos-is-batch-request", "True"),
                        ("x-ms-cosmos-batch-atomic", "False"),
                    ],
                    Some(Value::Array(std::mem::take(&mut batch))),
                )
                .await;
            assert!(r.status.is_success(), "{r:?}");
        }
    }
}

/// kill -9 of the copier mid-copy: run again, it resumes from its checkpoint and the final
/// verification passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_copy_resumes_and_verifies() {
    let s = source(None, json!({})).await;
    load_tenants(&s.client, 6000).await;
    let dir = TempDir::new("copy-kill");
    let checkpoint = dir.0.join("cp.json");
    let args = [
        "copy",
        "--from",
        s.url.as_str(),
        "--source",
        "app/old",
        "--dest",
        "app/new",
        "--checkpoint",
        checkpoint.to_str().unwrap(),
    ];
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata-test-server"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the copy");
    let started = std::time::Instant::now();
    while !checkpoint.exists() && started.elapsed() < std::time::Duration::from_secs(30) {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    assert!(
        checkpoint.exists(),
        "the copy checkpointed before it was killed"
    );
    let (partial, _) = s
        .query_all("app", "new", "SELECT VALUE COUNT(1) FROM c", json!([]), &[])
        .await;
    let copied_before: u64 = partial.iter().filter_map(Value::as_u64).sum();
    assert!(
        copied_before < 6000,
        "killed mid-copy: {copied_before} copied"
    );
    let (ok_, text) = strata_async(args.iter().map(|x| x.to_string()).collect()).await;
    assert!(ok_, "{text}");
    assert!(
        text.contains("(resumed)") && text.contains("verified: 6000 items"),
        "{text}"
    );
    s.stop().await;
}

/// With a source that keeps history, writes of every kind made while the copy runs — creates,
/// replaces and deletes — reach the destination: after a resumed run both sides hold exactly
/// the same items, and the deleted ones are gone from the destination too.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn copy_carries_deletes_and_replaces_made_during_the_copy() {
    let s = source(
        Some(3),
        json!({"changeFeedPolicy": {"retentionDuration": 60}}),
    )
    .await;
    let doc = |i: usize, n: usize| {
        let t = format!("t{}", i % 7);
        (
            json!({"id": format!("i{i}"), "TenantId": t, "UserId": format!("u{}", i % 3), "n": n}),
            json!([t]).to_string(),
        )
    };
    for i in 0..1500 {
        let (d, k) = doc(i, i);
        let r = s
            .request(
                Method::POST,
                "/dbs/app/colls/old/docs",
                &[("x-ms-documentdb-partitionkey", &k)],
                Some(d),
            )
            .await;
        assert!(r.status.is_success(), "{r:?}");
    }
    let client = s.client.clone();
    let writer = tokio::spawn(async move {
        for i in 0..600 {
            let (d, k) = doc(i, i + 100_000);
            let r = match i % 3 {
                // Deletes, replaces and deletes-then-recreates while the copy runs.
                0 => {
                    client
                        .request(
                            Method::DELETE,
                            &format!("/dbs/app/colls/old/docs/i{i}"),
                            &[("x-ms-documentdb-partitionkey", &k)],
                            None,
                        )
                        .await
                }
                1 => {
                    client
                        .request(
                            Method::PUT,
                            &format!("/dbs/app/colls/old/docs/i{i}"),
                            &[("x-ms-documentdb-partitionkey", &k)],
                            Some(d),
                        )
                        .await
                }
                _ => {
                    let r = client
                        .request(
                            Method::DELETE,
                            &format!("/dbs/app/colls/old/docs/i{i}"),
                            &[("x-ms-documentdb-partitionkey", &k)],
                            None,
                        )
                        .await;
                    assert!(r.status.is_success(), "{r:?}");
                    client
                        .request(
                            Method::POST,
                            "/dbs/app/colls/old/docs",
                            &[("x-ms-documentdb-partitionkey", &k)],
                            Some(d),
                        )
                        .await
                }
            };
            assert!(r.status.is_success(), "{r:?}");
        }
    });
    let dir = TempDir::new("copy-deletes");
    let args = hpk_copy_args(&s.url, &dir.0.join("cp.json"));
    let (_, first) = strata_async(args.clone()).await;
    assert!(first.contains("copied"), "{first}");
    writer.await.unwrap();
    let (ok_, second) = strata_async(args).await;
    assert!(ok_, "{second}");
    assert!(second.contains("verified: 1300 items"), "{second}");
    assert!(!second.contains("not carried over"), "{second}");
    assert_copied_with_session(&s, 1300).await;
    s.stop().await;
}

/// Polls a copy job until it is no longer running; returns its last state.
async fn wait_job(c: &Client, id: &str) -> Value {
    let started = std::time::Instant::now();
    loop {
        let r = c.get(&format!("/_strata/jobs/{id}"), &[]).await;
        assert_eq!(r.status, StatusCode::OK, "{r:?}");
        if r.json["state"] != "running" {
            return r.json;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "the job never finished: {}",
            r.json
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The job API: a copy started by `POST /_strata/jobs` runs in the server, reports progress
/// and ends verified; bad jobs get Cosmos-shaped errors; a job is listed, and deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_side_copy_job_copies_and_reports() {
    let s = source(None, json!({})).await;
    load_tenants(&s.client, 1000).await;
    for (body, code) in [
        (json!({"source": "app/old"}), 400),
        (json!({"source": "app/old", "dest": "nope", "id": "x"}), 400),
        (
            json!({"source": "app/old", "dest": "app/new", "bogus": 1}),
            400,
        ),
    ] {
        let r = s.post("/_strata/jobs", &[], body.clone()).await;
        strata_tests::assert_error(&r, code, "BadRequest");
    }
    let r = s.get("/_strata/jobs/none", &[]).await;
    strata_tests::assert_error(&r, 404, "NotFound");
    let r = s
        .post(
            "/_strata/jobs",
            &[],
            json!({"id": "move", "source": "app/old", "dest": "app/new",
                   "partitionKey": ["/TenantId", "/SessionId"], "fill": ["/SessionId=/id"]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    assert_eq!(r.json["id"], "move");
    assert_eq!(r.json["from"], "this server");
    let job = wait_job(&s.client, "move").await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let summary = job["summary"].as_str().unwrap();
    assert!(
        summary.contains("verified: 1000 items in 5 source logical partitions"),
        "{summary}"
    );
    assert_eq!(job["progress"]["items"], 1000);
    assert_eq!(job["progress"]["phase"], "done");
    let def = ok(&s, Method::GET, "/dbs/app/colls/new", &[], None).await;
    assert_eq!(
        def["partitionKey"]["paths"],
        json!(["/TenantId", "/SessionId"])
    );
    let list = ok(&s, Method::GET, "/_strata/jobs", &[], None).await;
    assert_eq!(list["_count"], 1);
    // A job that cannot work fails with the reason, and keeps it.
    let r = s
        .post(
            "/_strata/jobs",
            &[],
            json!({"id": "broken", "source": "app/missing", "dest": "app/x"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    let job = wait_job(&s.client, "broken").await;
    assert_eq!(job["state"], "failed", "{job}");
    assert!(
        job["error"].as_str().unwrap().contains("the source"),
        "{job}"
    );
    let r = s
        .request(Method::DELETE, "/_strata/jobs/broken", &[], None)
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{r:?}");
    let r = s.get("/_strata/jobs/broken", &[]).await;
    strata_tests::assert_error(&r, 404, "NotFound");
    s.stop().await;
}

/// kill -9 of the server in the middle of a copy job: the job is running again after the
/// restart, resumes from its checkpoint, and its final verification passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_copy_job_survives_a_server_kill() {
    let bin = env!("CARGO_BIN_EXE_strata-test-server");
    let dir = TempDir::new("job-kill");
    let data = dir.0.join("data");
    let (mut child, c) = strata_tests::spawn_server(bin, &data);
    let r = c.post("/dbs", &[], json!({"id": "app"})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    let r = c.post("/dbs/app/colls", &[], json!({"id": "old", "partitionKey": {"paths": ["/TenantId"], "kind": "Hash", "version": 2}})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    load_tenants(&c, 6000).await;
    let r = c
        .post("/_strata/jobs", &[], json!({"id": "move", "source": "app/old", "dest": "app/new", "partitionKey": "/TenantId,/id"}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    let checkpoint = data.join("jobs").join("move.checkpoint.json");
    let started = std::time::Instant::now();
    while !checkpoint.exists() && started.elapsed() < std::time::Duration::from_secs(30) {
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    assert!(checkpoint.exists(), "the job checkpointed before the kill");
    let (mut child, c) = strata_tests::spawn_server(bin, &data);
    let job = wait_job(&c, "move").await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let summary = job["summary"].as_str().unwrap();
    assert!(
        summary.contains("(resumed)") && summary.contains("verified: 6000 items"),
        "{summary}"
    );
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
}

/// A following job: it reports "following" and no lag once caught up, copies what is written
/// afterwards, and stops copying when deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_following_job_keeps_copying_until_deleted() {
    let s = source(None, json!({})).await;
    load_tenants(&s.client, 200).await;
    let r = s
        .post(
            "/_strata/jobs",
            &[],
            json!({"id": "live", "source": "app/old", "dest": "app/new", "follow": true}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    let count = || async {
        let (rows, _) = s
            .query_all("app", "new", "SELECT VALUE COUNT(1) FROM c", json!([]), &[])
            .await;
        rows.iter().filter_map(Value::as_u64).sum::<u64>()
    };
    let until = |what: &'static str| {
        let started = std::time::Instant::now();
        move || {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "never: {what}"
            )
        }
    };
    let check = until("caught up");
    loop {
        let j = ok(&s, Method::GET, "/_strata/jobs/live", &[], None).await;
        assert_eq!(j["state"], "running", "{j}");
        if j["progress"]["phase"] == "following"
            && j["progress"]["lag"] == 0
            && count().await == 200
        {
            assert!(
                j["progress"]["line"]
                    .as_str()
                    .unwrap()
                    .ends_with("following, caught up"),
                "{j}"
            );
            break;
        }
        check();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // Written after the catch-up: copied while following.
    let mut batch = Vec::new();
    for i in 1000..1300 {
        let t = format!("t{}", i % 5);
        batch.push(
            json!({"operationType": "Create", "partitionKey": json!([t]).to_string(),
                          "resourceBody": {"id": format!("i{i}"), "TenantId": t}}),
        );
    }
    for chunk in batch.chunks(100) {
        let r = s
            .request(
                Method::POST,
                "/dbs/app/colls/old/docs",
                &[
                    ("x-ms-cosmos-is-batch-request", "True"),
                    ("x-ms-cosmos-batch-atomic", "False"),
                ],
                Some(Value::Array(chunk.to_vec())),
            )
            .await;
        assert!(r.status.is_success(), "{r:?}");
    }
    let check = until("the new items copied");
    while count().await < 500 {
        check();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // Deleted: it stops; later writes stay in the source.
    let r = s
        .request(Method::DELETE, "/_strata/jobs/live", &[], None)
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{r:?}");
    let r = s
        .create(
            "app",
            "old",
            &json!(["t0"]),
            json!({"id": "after", "TenantId": "t0"}),
        )
        .await;
    assert!(r.status.is_success(), "{r:?}");
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_eq!(count().await, 500, "a deleted job copies nothing more");
    s.stop().await;
}

/// Copy jobs that could never end or could leak: a copy into its own source is refused (job
/// API and command line, whatever the spelling of the account); no account key shows in a
/// job's answer, whichever way the copy failed; a source that accepts connections but never
/// answers fails the job within its timeout, with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn copy_jobs_refuse_themselves_keep_keys_secret_and_give_up_on_silent_sources() {
    let s = source(None, json!({})).await;
    load_tenants(&s.client, 50).await;
    let local = s.url.replace("127.0.0.1", "localhost");
    for body in [
        json!({"source": "app/old", "dest": "app/old"}),
        json!({"from": s.url, "to": local, "source": "app/old", "dest": "app/old"}),
    ] {
        let r = s.post("/_strata/jobs", &[], body).await;
        strata_tests::assert_error(&r, 400, "BadRequest");
        assert!(r.message().contains("same container"), "{r:?}");
    }
    let (ok, out) = strata_async(
        [
            "copy", "--from", &s.url, "--source", "app/old", "--dest", "app/old",
        ]
        .map(String::from)
        .to_vec(),
    )
    .await;
    assert!(!ok && out.contains("same container"), "{out}");

    // Keys that are not base64, and valid keys of an account that does not answer.
    const SECRETS: [&str; 2] = ["SECRET-KEY-not-base64!", "U0VDUkVUU0VDUkVUU0VDUkVU"];
    for (i, secret) in SECRETS.iter().enumerate() {
        let conn = format!("AccountEndpoint=http://127.0.0.1:9/;AccountKey={secret};");
        let body = json!({"id": format!("leak{i}"), "from": conn, "source": "app/old", "dest": "app/x", "timeout": 5});
        let r = s.post("/_strata/jobs", &[], body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
        let job = wait_job(&s.client, &format!("leak{i}")).await;
        assert_eq!(job["state"], "failed", "{job}");
        assert!(
            job["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{job}"
        );
    }
    let list = s.get("/_strata/jobs", &[]).await;
    let text = String::from_utf8_lossy(&list.bytes).to_string();
    for secret in SECRETS {
        assert!(!text.contains(secret), "a key leaked: {text}");
    }
    assert!(text.contains("AccountKey=***"), "{text}");

    // A source that accepts the connection and then says nothing.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_url = format!("http://{}/", silent.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((conn, _)) = silent.accept().await {
            open.push(conn);
        }
    });
    let started = std::time::Instant::now();
    let body = json!({"id": "silent", "from": silent_url, "to": s.url, "source": "app/old", "dest": "app/y", "timeout": 2});
    let r = s.post("/_strata/jobs", &[], body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    let job = wait_job(&s.client, "silent").await;
    assert_eq!(job["state"], "failed", "{job}");
    let error = job["error"].as_str().unwrap_or_default();
    assert!(error.contains("no answer within 2 s"), "{job}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    held.abort();
    s.stop().await;
}

/// A copy whose destination is its source under a name the spec check cannot see through
/// (`0.0.0.0` for `127.0.0.1`)
/// reads its own writes back from the source's feed: it must still finish, changing nothing
/// — with the all-versions feed (history) and without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_copy_into_its_own_source_under_another_name_finishes() {
    for (i, extra) in [
        json!({}),
        json!({"changeFeedPolicy": {"retentionDuration": 60}}),
    ]
    .into_iter()
    .enumerate()
    {
        let s = source(None, extra).await;
        load_tenants(&s.client, 200).await;
        let before = contents(&s).await;
        let alias = s.url.replace("127.0.0.1", "0.0.0.0");
        let body = json!({"id": "self", "to": alias, "source": "app/old", "dest": "app/old"});
        let r = s.post("/_strata/jobs", &[], body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
        let job = wait_job(&s.client, "self").await;
        assert_eq!(job["state"], "succeeded", "case {i}: {job}");
        // Each item written back at most twice (the snapshot, then the history's replay of
        // the snapshot's own writes), never without end.
        let copied = job["progress"]["items"].as_u64().unwrap_or(u64::MAX);
        assert!(copied <= 400, "case {i}: {copied} items copied: {job}");
        let dir = TempDir::new("self-copy");
        let checkpoint = dir.0.join("cp.json").display().to_string();
        let (ok, out) = strata_async(
            [
                "copy",
                "--from",
                &s.url,
                "--to",
                &alias,
                "--source",
                "app/old",
                "--dest",
                "app/old",
                "--checkpoint",
                &checkpoint,
            ]
            .map(String::from)
            .to_vec(),
        )
        .await;
        assert!(ok, "case {i}: {out}");
        assert_eq!(contents(&s).await, before, "case {i}: the items changed");
        s.stop().await;
    }
}

/// Copies run one after another from one folder with the default checkpoint each copy all
/// (one file per pair of containers, not one shared file that made the second "resume" and
/// copy nothing); the same copy run again after it finished carries over only what changed
/// since; a checkpoint of another copy is refused, naming the file and the copy it is for.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_checkpoint_belongs_to_one_copy() {
    let s = source(None, json!({})).await;
    load_tenants(&s.client, 200).await;
    let dir = TempDir::new("copy-cwd");
    let cwd = dir.0.clone();
    let url = s.url.clone();
    let copy = move |dest: &str, extra: &[&str]| {
        let mut args: Vec<String> = [
            "copy", "--from", &url, "--source", "app/old", "--dest", dest,
        ]
        .map(String::from)
        .to_vec();
        args.extend(extra.iter().map(|a| a.to_string()));
        let cwd = cwd.clone();
        tokio::task::spawn_blocking(move || {
            strata_in(&cwd, &args.iter().map(String::as_str).collect::<Vec<_>>())
        })
    };
    for dest in ["app/c3", "app/c4"] {
        let (ok, out) = copy(dest, &[]).await.unwrap();
        assert!(
            ok && out.contains("copied 200/200") && out.contains("verified: 200 items"),
            "{dest}: {out}"
        );
    }
    let c3 = dir.0.join("strata-copy.app.old--app.c3.checkpoint.json");
    assert!(
        c3.exists()
            && dir
                .0
                .join("strata-copy.app.old--app.c4.checkpoint.json")
                .exists()
    );

    let r = s
        .create(
            "app",
            "old",
            &json!(["t9"]),
            json!({"id": "late", "TenantId": "t9"}),
        )
        .await;
    assert!(r.status.is_success(), "{r:?}");
    let (ok, out) = copy("app/c3", &[]).await.unwrap();
    assert!(
        ok && out.contains("after a finished copy")
            && out.contains("copied 1/201")
            && out.contains("verified: 201 items"),
        "{out}"
    );

    let (ok, out) = copy("app/c5", &["--checkpoint", c3.to_str().unwrap()])
        .await
        .unwrap();
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!(
            "the checkpoint {} belongs to the copy of app/old",
            c3.display()
        )) && out.contains("into app/c3")
            && out.contains("not of app/old")
            && out.contains("into app/c5"),
        "{out}"
    );
    let gone = s.get("/dbs/app/colls/c5", &[]).await;
    assert_eq!(
        gone.status,
        StatusCode::NOT_FOUND,
        "nothing created: {gone:?}"
    );
    s.stop().await;
}
