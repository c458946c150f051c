//! strata on PostgreSQL (`--store postgres://…`, docs/postgres.md), against a throwaway
//! PostgreSQL 15 each test starts: the `Kv` contract over the wire; the API end to end with
//! data surviving a restart of strata; a second process refused while one serves the store.

use serde_json::json;
use strata_server::store::kv::{contract, postgres::PostgresKv, Kv, Op, Space};
use strata_tests::postgres::Postgres;
use strata_tests::{Options, TestServer};

#[test]
fn the_kv_contract_holds_over_postgres() {
    let pg = Postgres::start();
    let kv = PostgresKv::open(&pg.url).expect("open");
    contract::check(&kv);
    // The schema is strata's, versioned.
    assert_eq!(
        pg.psql("SELECT value FROM strata.meta WHERE name = 'schema_version'"),
        "1"
    );
    assert!(kv.disk_space() > 0);
    // One process writes a store: a second open is refused while the first holds it, and
    // allowed once the first gave it up; from then on the first writes nothing (the fence).
    let e = PostgresKv::open(&pg.url).err().expect("refused");
    assert!(e.to_string().contains("another strata process"), "{e}");
    kv.shutdown().expect("give the lock up");
    let again = PostgresKv::open(&pg.url).expect("reopened after the first gave it up");
    let late = kv.apply(vec![Op::Put(Space::Items, b"late".to_vec(), b"x".to_vec())]);
    assert!(late.is_err(), "a process that gave up the lock still wrote");
    assert_eq!(again.get(Space::Items, b"late").expect("get"), None);
    drop(kv);
    assert_eq!(
        again.get(Space::Items, b"b1").expect("get").as_deref(),
        Some(&b"z"[..])
    );
    // PostgreSQL gone: calls fail at once, they do not hang.
    pg.stop();
    let t = std::time::Instant::now();
    assert!(again.get(Space::Items, b"b1").is_err());
    assert!(again
        .apply(vec![Op::Put(Space::Items, b"x".to_vec(), b"y".to_vec())])
        .is_err());
    assert!(again.sync().is_err());
    assert!(
        t.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        t.elapsed()
    );
    let bad = PostgresKv::open("postgres://strata:hunter2@127.0.0.1:1/x")
        .err()
        .expect("no server");
    assert!(!bad.to_string().contains("hunter2"), "{bad}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_serves_from_postgres_and_keeps_data_across_restarts() {
    let pg = Postgres::start();
    let opts = || Options {
        postgres: Some(pg.url.clone()),
        ..Default::default()
    };
    let s = TestServer::start_with(opts()).await;
    s.setup(
        "d",
        "c",
        json!({"paths": ["/t", "/u"], "kind": "MultiHash", "version": 2}),
    )
    .await;
    for i in 0..50 {
        let r = s
            .create(
                "d",
                "c",
                &json!(["t1", format!("u{}", i % 5)]),
                json!({"id": format!("i{i}"), "t": "t1", "u": format!("u{}", i % 5), "n": i}),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
    }
    s.stop().await;
    let s = TestServer::start_with(opts()).await;
    let r = s
        .post(
            "/dbs/d/colls/c/docs",
            &[
                ("x-ms-documentdb-isquery", "true"),
                ("content-type", "application/query+json"),
                ("x-ms-documentdb-query-enablecrosspartition", "true"),
            ],
            json!({"query": "SELECT VALUE COUNT(1) FROM c WHERE c.n >= 10"}),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json["Documents"], json!([40]));
    // The change feed kept its order across the restart.
    let r = s
        .get(
            "/dbs/d/colls/c/docs",
            &[("a-im", "Incremental feed"), ("x-ms-max-item-count", "100")],
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let ns: Vec<i64> = r.json["Documents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["n"].as_i64())
        .collect();
    assert_eq!(ns.len(), 50, "{r:?}");
    s.stop().await;
}

/// PostgreSQL going away under a serving strata: writes fail (never acknowledged), and once it
/// is back this process still refuses writes (503) — a commit whose answer was lost may have
/// happened, so its memory no longer matches the store — while a restart serves again with
/// everything acknowledged before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_postgres_stops_writes_until_a_restart() {
    let pg = Postgres::start();
    let opts = || Options {
        postgres: Some(pg.url.clone()),
        ..Default::default()
    };
    let s = TestServer::start_with(opts()).await;
    s.setup("d", "c", json!({"paths": ["/t"], "kind": "Hash"}))
        .await;
    let r = s
        .create("d", "c", &json!(["a"]), json!({"id": "1", "t": "a"}))
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    pg.stop();
    let r = s
        .create("d", "c", &json!(["a"]), json!({"id": "2", "t": "a"}))
        .await;
    assert!(r.status.is_server_error(), "{r:?}");
    pg.launch();
    // The first write back finds the lock's session gone (500, saying so); from then on the
    // store refuses writes (503) until strata restarts.
    let r = s
        .create("d", "c", &json!(["a"]), json!({"id": "3", "t": "a"}))
        .await;
    assert!(r.status.is_server_error(), "{r:?}");
    let r = s
        .create("d", "c", &json!(["a"]), json!({"id": "4", "t": "a"}))
        .await;
    assert_eq!(r.status, 503, "{r:?}");
    let pk = [("x-ms-documentdb-partitionkey", r#"["a"]"#)];
    assert_eq!(s.get("/dbs/d/colls/c/docs/1", &pk).await.status, 200);
    drop(s);
    let s = TestServer::start_with(opts()).await;
    assert_eq!(s.get("/dbs/d/colls/c/docs/1", &pk).await.status, 200);
    let r = s
        .create("d", "c", &json!(["a"]), json!({"id": "3", "t": "a"}))
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    s.stop().await;
}
