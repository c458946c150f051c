//! Hostile requests, one test per class found by probing: each gets a Cosmos-shaped 4xx and the
//! server keeps serving.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use strata_query::protocol::{auth_scope, path_segments, AuthScope};
use strata_tests::{Resp, TestServer};

const QUERY: [(&str, &str); 2] = [
    ("x-ms-documentdb-isquery", "true"),
    ("content-type", "application/query+json"),
];

/// Database QA with a `/pk` hash container named `coll`.
async fn hash_container(s: &TestServer, coll: &str) {
    s.setup(
        "QA",
        coll,
        json!({"paths": ["/pk"], "kind": "Hash", "version": 2}),
    )
    .await;
}

async fn server() -> TestServer {
    let s = TestServer::start().await;
    hash_container(&s, "C1").await;
    let r = s
        .post(
            "/dbs/QA/colls/C1/docs",
            &[("x-ms-documentdb-partitionkey", "[\"p\"]")],
            json!({"id": "1", "pk": "p", "n": 1}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    let t1 = json!({"id": "T1", "partitionKey": {"paths": ["/pk"], "kind": "Hash"}});
    let r = s
        .post("/dbs/QA/colls", &[("x-ms-offer-throughput", "400")], t1)
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    s
}

/// A Cosmos-shaped client error: 4xx with `code` and `message`.
fn assert_client_error(r: &Resp, what: &str) {
    assert!(r.status.is_client_error(), "{what}: {r:?}");
    assert!(
        r.json.get("code").is_some() && r.json.get("message").is_some(),
        "{what}: not Cosmos-shaped: {r:?}"
    );
}

async fn still_serving(s: &TestServer) {
    let r = s
        .get(
            "/dbs/QA/colls/C1/docs/1",
            &[("x-ms-documentdb-partitionkey", "[\"p\"]")],
        )
        .await;
    assert_eq!(
        r.status,
        StatusCode::OK,
        "the server stopped serving: {r:?}"
    );
}

/// A method, a path and the headers it needs.
type Route<'a> = (Method, String, Vec<(&'a str, &'a str)>);

fn swap_case(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_uppercase() {
                c.to_ascii_lowercase()
            } else {
                c.to_ascii_uppercase()
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signature_verifies_only_for_the_resource_it_was_made_for() {
    let s = server().await;
    let offer_rid = {
        let r = s.get("/offers", &[]).await;
        r.json["Offers"][0]["id"].as_str().map(str::to_string)
    };
    let pk = ("x-ms-documentdb-partitionkey", "[\"p\"]");
    let mut routes: Vec<Route> = vec![
        (Method::GET, "/dbs".into(), vec![]),
        (Method::GET, "/dbs/QA".into(), vec![]),
        (Method::DELETE, "/dbs/QB".into(), vec![]),
        (Method::GET, "/dbs/QA/colls".into(), vec![]),
        (Method::POST, "/dbs/QA/colls".into(), vec![]),
        (Method::GET, "/dbs/QA/colls/C1".into(), vec![]),
        (Method::PUT, "/dbs/QA/colls/C1".into(), vec![]),
        (Method::DELETE, "/dbs/QA/colls/C2".into(), vec![]),
        (Method::GET, "/dbs/QA/colls/C1/docs".into(), vec![]),
        (Method::POST, "/dbs/QA/colls/C1/docs".into(), vec![pk]),
        (Method::GET, "/dbs/QA/colls/C1/docs/1".into(), vec![pk]),
        (Method::PUT, "/dbs/QA/colls/C1/docs/1".into(), vec![pk]),
        (Method::PATCH, "/dbs/QA/colls/C1/docs/1".into(), vec![pk]),
        (Method::DELETE, "/dbs/QA/colls/C1/docs/2".into(), vec![pk]),
        (Method::GET, "/dbs/QA/colls/C1/pkranges".into(), vec![]),
        (
            Method::POST,
            "/dbs/QA/colls/C1/operations/partitionkeydelete".into(),
            vec![("x-ms-documentdb-partitionkey", "[\"none\"]")],
        ),
        (Method::GET, "/dbs/QA/colls/C1/conflicts".into(), vec![]),
        (
            Method::GET,
            "/_strata/containers/QA/C1/partitions".into(),
            vec![],
        ),
        (Method::GET, "/offers".into(), vec![]),
    ];
    if let Some(rid) = &offer_rid {
        routes.push((Method::GET, format!("/offers/{rid}"), vec![]));
    }
    for (method, path, headers) in &routes {
        let segs = path_segments(path).unwrap();
        let exact = auth_scope(&segs);
        let r = s
            .request_signed_as(method.clone(), path, &exact, headers, Some(b"{}".to_vec()))
            .await;
        assert_ne!(
            r.status,
            StatusCode::UNAUTHORIZED,
            "exact {method} {path}: {r:?}"
        );
        let mut wrong: Vec<(&str, AuthScope)> = vec![
            (
                "other type",
                AuthScope::new(
                    if exact.resource_type == "dbs" {
                        "colls"
                    } else {
                        "dbs"
                    },
                    exact.resource_link.clone(),
                ),
            ),
            (
                "parent",
                auth_scope(
                    &segs[..segs.len().saturating_sub(if segs.len().is_multiple_of(2) {
                        2
                    } else {
                        1
                    })],
                ),
            ),
            (
                "other resource",
                AuthScope::new(
                    exact.resource_type.clone(),
                    exact.resource_link.replace("QA", "QB").replace("C1", "C9"),
                ),
            ),
            (
                "lower-cased link",
                AuthScope::new(
                    exact.resource_type.clone(),
                    exact.resource_link.to_lowercase(),
                ),
            ),
            (
                "last segment only",
                AuthScope::new(
                    exact.resource_type.clone(),
                    segs.last().cloned().unwrap_or_default(),
                ),
            ),
        ];
        if exact.resource_type == "colls" {
            wrong.push((
                "partitionkey type",
                AuthScope::new("partitionkey", exact.resource_link.clone()),
            ));
        }
        let rid_based = path.starts_with("/offers/") || strata_query::protocol::is_rid_based(&segs);
        let pk_delete = path.ends_with("partitionkeydelete");
        for (what, scope) in wrong {
            let same = scope.resource_type == exact.resource_type
                && scope.resource_link == exact.resource_link;
            if same
                || (rid_based && matches!(what, "lower-cased link" | "last segment only"))
                || (pk_delete && what == "partitionkey type")
            {
                continue; // the same signature, or a spelling the SDKs use for this resource
            }
            let r = s
                .request_signed_as(method.clone(), path, &scope, headers, Some(b"{}".to_vec()))
                .await;
            assert_eq!(
                r.status,
                StatusCode::UNAUTHORIZED,
                "{what} ({scope:?}) for {method} {path}: {r:?}"
            );
        }
    }
    // The spellings the SDKs do use still verify.
    let pkd = "/dbs/QA/colls/C1/operations/partitionkeydelete";
    let r = s
        .request_signed_as(
            Method::POST,
            pkd,
            &AuthScope::new("partitionkey", "dbs/QA/colls/C1"),
            &[("x-ms-documentdb-partitionkey", "[\"none\"]")],
            None,
        )
        .await;
    assert_ne!(r.status, StatusCode::UNAUTHORIZED, "{r:?}");
    if let Some(rid) = &offer_rid {
        let r = s
            .request_signed_as(
                Method::GET,
                &format!("/offers/{rid}"),
                &AuthScope::new("offers", rid.to_lowercase()),
                &[],
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{r:?}");
    }
    // Names are case-sensitive: a request signed for dbs/qa does not read dbs/QA.
    let r = s
        .request_signed_as(
            Method::GET,
            "/dbs/QA",
            &AuthScope::new("dbs", swap_case("dbs/QA")),
            &[],
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    still_serving(&s).await;
    s.stop().await;
}

/// Every text that used to overflow the stack, through every door that parses SQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_and_huge_queries_are_400s_everywhere() {
    let s = server().await;
    let terms = |op: &str, n: usize| vec!["c.n"; n].join(op);
    let probes = vec![
        format!(
            "SELECT * FROM c WHERE {}true{}",
            "(".repeat(1000),
            ")".repeat(1000)
        ),
        format!("SELECT * FROM c WHERE {}true", "NOT ".repeat(5000)),
        format!(
            "SELECT VALUE {}1{} FROM c",
            "[".repeat(5000),
            "]".repeat(5000)
        ),
        format!(
            "SELECT VALUE {}1{} FROM c",
            "{\"a\":".repeat(3000),
            "}".repeat(3000)
        ),
        format!(
            "SELECT VALUE {}1{} FROM c",
            "ABS(".repeat(3000),
            ")".repeat(3000)
        ),
        format!(
            "SELECT VALUE {}1{} FROM c",
            "(SELECT VALUE ".repeat(500),
            ")".repeat(500)
        ),
        format!("SELECT VALUE {} FROM c", terms(" + ", 20_000)),
        format!("SELECT VALUE c{} FROM c", ".a".repeat(20_000)),
        format!("SELECT * FROM c WHERE c.s = '{}'", "x".repeat(600 * 1024)),
    ];
    let docs = "/dbs/QA/colls/C1/docs";
    for q in &probes {
        let body = json!({"query": q, "parameters": []});
        let short = &q[..60.min(q.len())];
        let r = s.post(docs, &QUERY, body.clone()).await;
        assert_client_error(&r, &format!("query {short}"));
        let r = s
            .post(
                docs,
                &[
                    QUERY[0],
                    QUERY[1],
                    ("x-ms-cosmos-is-query-plan-request", "true"),
                ],
                body.clone(),
            )
            .await;
        assert_client_error(&r, &format!("query plan {short}"));
        let r = s.post("/dbs", &QUERY, body.clone()).await;
        assert_client_error(&r, &format!("database query {short}"));
        let r = s.post("/dbs/QA/colls", &QUERY, body.clone()).await;
        assert_client_error(&r, &format!("container query {short}"));
        let r = s.post("/offers", &QUERY, body).await;
        assert_client_error(&r, &format!("offer query {short}"));
        // The same hostile expression as a patch condition: the WHERE clause, or the
        // projected value tested with IS_DEFINED.
        let cond = match q.split_once(" WHERE ") {
            Some((_, w)) => format!("FROM c WHERE {w}"),
            None => {
                let expr = q
                    .strip_prefix("SELECT VALUE ")
                    .and_then(|r| r.strip_suffix(" FROM c"))
                    .expect("every probe is SELECT VALUE <expr> FROM c or has a WHERE");
                format!("FROM c WHERE IS_DEFINED({expr})")
            }
        };
        let r = s
            .request(
                Method::PATCH,
                "/dbs/QA/colls/C1/docs/1",
                &[("x-ms-documentdb-partitionkey", "[\"p\"]")],
                Some(json!({"operations": [{"op": "set", "path": "/x", "value": 1}], "condition": cond})),
            )
            .await;
        assert_client_error(&r, &format!("patch condition {short}"));
    }
    // Amplification: 114 bytes that allocated 3 GB.
    let hundred = "a".repeat(100);
    let q = format!("SELECT VALUE LENGTH(REPLACE(REPLACE(REPLACE(REPLICATE('a', 10000), 'a', '{hundred}'), 'a', '{hundred}'), 'a', '{hundred}')) FROM c");
    let r = s.post(docs, &QUERY, json!({"query": q})).await;
    assert_client_error(&r, "amplifying query");
    // Bounds the service documents.
    let joins: String = (0..11).map(|i| format!(" JOIN j{i} IN c.a")).collect();
    let r = s
        .post(
            docs,
            &QUERY,
            json!({"query": format!("SELECT * FROM c{joins}")}),
        )
        .await;
    assert_client_error(&r, "11 joins");
    // JOINs of a large array with itself: a clean error, not hours of CPU.
    let big = json!({"id": "big", "pk": "p", "a": vec![1; 2000]});
    let r = s
        .post(docs, &[("x-ms-documentdb-partitionkey", "[\"p\"]")], big)
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    let explode = "SELECT VALUE 1 FROM c JOIN x IN c.a JOIN y IN c.a JOIN z IN c.a WHERE false";
    let r = s
        .post(
            docs,
            &[
                QUERY[0],
                QUERY[1],
                ("x-ms-documentdb-partitionkey", "[\"p\"]"),
            ],
            json!({"query": explode}),
        )
        .await;
    assert_client_error(&r, "JOIN explosion");
    let params: Vec<Value> = (0..10_001)
        .map(|i| json!({"name": format!("@p{i}"), "value": i}))
        .collect();
    let r = s
        .post(
            docs,
            &QUERY,
            json!({"query": "SELECT * FROM c", "parameters": params}),
        )
        .await;
    assert_client_error(&r, "10,001 parameters");
    still_serving(&s).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throughput_outside_the_service_bounds_is_400_before_anything_is_allocated() {
    let s = server().await;
    let create =
        |id: &'static str| json!({"id": id, "partitionKey": {"paths": ["/pk"], "kind": "Hash"}});
    for (h, v) in [
        ("x-ms-offer-throughput", "10000000000000000000"),
        ("x-ms-offer-throughput", "1e19"),
        ("x-ms-offer-throughput", "1000100"),
        ("x-ms-offer-throughput", "300"),
        ("x-ms-offer-throughput", "450"),
        (
            "x-ms-cosmos-offer-autopilot-settings",
            "{\"maxThroughput\": 1000000000000000}",
        ),
        (
            "x-ms-cosmos-offer-autopilot-settings",
            "{\"maxThroughput\": 2000000}",
        ),
        (
            "x-ms-cosmos-offer-autopilot-settings",
            "{\"maxThroughput\": 1e19}",
        ),
        (
            "x-ms-cosmos-offer-autopilot-settings",
            "{\"maxThroughput\": 1500}",
        ),
    ] {
        let r = s.post("/dbs/QA/colls", &[(h, v)], create("big")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{h}: {v}: {r:?}");
        let r = s.post("/dbs", &[(h, v)], json!({"id": "bigdb"})).await;
        assert_eq!(
            r.status,
            StatusCode::BAD_REQUEST,
            "database {h}: {v}: {r:?}"
        );
    }
    // Raising an offer past the maximum is refused too, and leaves the splitter idle.
    let offers = s.get("/offers", &[]).await;
    let offer = offers.json["Offers"][0].clone();
    let id = offer["id"].as_str().unwrap().to_string();
    let mut raised = offer.clone();
    raised["content"] = json!({"offerAutopilotSettings": {"maxThroughput": 2_000_000}});
    let r = s
        .request(Method::PUT, &format!("/offers/{id}"), &[], Some(raised))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{r:?}");
    // The largest allowed container gets its 167 partitions (one per 6,000 RU/s).
    let r = s
        .post(
            "/dbs/QA/colls",
            &[("x-ms-offer-throughput", "1000000")],
            create("max"),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    let r = s.get("/dbs/QA/colls/max/pkranges", &[]).await;
    assert_eq!(
        r.json["PartitionKeyRanges"].as_array().map(Vec::len),
        Some(167)
    );
    still_serving(&s).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patches_never_corrupt_a_document() {
    let s = server().await;
    let item = "/dbs/QA/colls/C1/docs/1";
    let pk = [("x-ms-documentdb-partitionkey", "[\"p\"]")];
    let r = s
        .request(
            Method::PATCH,
            item,
            &pk,
            Some(json!([{"op": "set", "path": "/big", "value": 1.7e308}])),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    for ops in [
        json!([{"op": "incr", "path": "/big", "value": 1.7e308}]),
        json!([{"op": "set", "path": "/", "value": 1}]),
        json!([{"op": "add", "path": "/a//b", "value": 1}]),
        json!([{"op": "set", "path": "/deep", "value": (0..126).fold(json!(1), |v, _| json!([v]))}]),
    ] {
        let r = s.request(Method::PATCH, item, &pk, Some(ops.clone())).await;
        assert_client_error(&r, &ops.to_string());
        let r = s
            .post(
                "/dbs/QA/colls/C1/docs",
                &[
                    pk[0],
                    ("x-ms-cosmos-is-batch-request", "true"),
                    ("x-ms-cosmos-batch-atomic", "true"),
                ],
                json!([{"operationType": "Patch", "id": "1", "resourceBody": {"operations": ops}}]),
            )
            .await;
        assert!(
            r.status.is_client_error()
                || r.json[0]["statusCode"]
                    .as_u64()
                    .is_some_and(|c| (400..500).contains(&c)),
            "batch {ops}: {r:?}"
        );
    }
    let r = s.get(item, &pk).await;
    assert_eq!(r.json["big"], json!(1.7e308), "{r:?}");
    assert!(r.json.get("").is_none());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_key_header_must_be_a_json_array() {
    let s = server().await;
    for bad in ["\"p\"", "5", "null", "{}", "p"] {
        let r = s
            .get(
                "/dbs/QA/colls/C1/docs/1",
                &[("x-ms-documentdb-partitionkey", bad)],
            )
            .await;
        assert_client_error(&r, bad);
        let r = s
            .post(
                "/dbs/QA/colls/C1/docs",
                &[("x-ms-documentdb-partitionkey", bad)],
                json!({"id": "x", "pk": "p"}),
            )
            .await;
        assert_client_error(&r, bad);
    }
    still_serving(&s).await;
    s.stop().await;
}

mod connections {
    use super::*;
    use std::time::{Duration, Instant};
    use strata_tests::Options;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    async fn quick_server(max: usize) -> TestServer {
        let s = TestServer::start_with(Options {
            connections: Some(strata_server::Connections {
                max,
                header_timeout: Duration::from_secs(1),
                body_timeout: Duration::from_secs(1),
                idle_timeout: Duration::from_secs(2),
            }),
            ..Default::default()
        })
        .await;
        hash_container(&s, "C1").await;
        s
    }

    fn addr(s: &TestServer) -> String {
        s.url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string()
    }

    /// Reads until the server closes the connection (or 10 s pass); returns what arrived.
    async fn read_until_closed(c: &mut TcpStream) -> (String, Duration) {
        let started = Instant::now();
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match tokio::time::timeout(Duration::from_secs(10), c.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
                Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            }
        }
        (
            String::from_utf8_lossy(&out).into_owned(),
            started.elapsed(),
        )
    }

    fn signed_head(s: &TestServer, method: &str, path: &str, extra: &str) -> String {
        let scope = auth_scope(&path_segments(path).unwrap());
        let date = httpdate::fmt_http_date(std::time::SystemTime::now());
        let auth = s.key.authorization(method, &scope, &date);
        format!("{method} {path} HTTP/1.1\r\nhost: localhost\r\nx-ms-date: {date}\r\nauthorization: {auth}\r\n{extra}\r\n")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn slow_idle_and_stalled_clients_are_cut_off() {
        let s = quick_server(100).await;
        // Slowloris: headers that never finish.
        let mut c = TcpStream::connect(addr(&s)).await.unwrap();
        c.write_all(b"GET /dbs HTTP/1.1\r\nhost: x\r\n")
            .await
            .unwrap();
        let (_, took) = read_until_closed(&mut c).await;
        assert!(
            took < Duration::from_secs(8),
            "half-sent headers held the connection {took:?}"
        );
        // A connection that never sends anything.
        let mut c = TcpStream::connect(addr(&s)).await.unwrap();
        let (_, took) = read_until_closed(&mut c).await;
        assert!(
            took < Duration::from_secs(8),
            "a silent connection stayed open {took:?}"
        );
        // A body that stops arriving: 408, Cosmos-shaped.
        let mut c = TcpStream::connect(addr(&s)).await.unwrap();
        let head = signed_head(
            &s,
            "POST",
            "/dbs",
            "content-length: 100\r\ncontent-type: application/json\r\n",
        );
        c.write_all(head.as_bytes()).await.unwrap();
        c.write_all(b"{\"id\":").await.unwrap();
        let (answer, _) = read_until_closed(&mut c).await;
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains("\"code\":\"RequestTimeout\""), "{answer}");
        // A huge declared body is refused before it is sent.
        let mut c = TcpStream::connect(addr(&s)).await.unwrap();
        let head = signed_head(&s, "POST", "/dbs", "content-length: 1000000000000\r\n");
        c.write_all(head.as_bytes()).await.unwrap();
        let mut buf = [0u8; 2048];
        let n = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf))
            .await
            .expect("an early answer")
            .unwrap();
        let answer = String::from_utf8_lossy(&buf[..n]);
        assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
        let r = s.get("/dbs", &[]).await;
        assert_eq!(r.status, StatusCode::OK);
        s.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connections_beyond_the_limit_wait_for_a_free_slot() {
        let s = quick_server(2).await;
        let a = TcpStream::connect(addr(&s)).await.unwrap();
        let b = TcpStream::connect(addr(&s)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        // A third client is not served while both slots are held...
        let mut c = TcpStream::connect(addr(&s)).await.unwrap();
        c.write_all(signed_head(&s, "GET", "/dbs", "").as_bytes())
            .await
            .unwrap();
        let mut buf = [0u8; 4096];
        let early = tokio::time::timeout(Duration::from_millis(300), c.read(&mut buf)).await;
        assert!(early.is_err(), "served past the connection limit");
        // ...and is once one closes.
        drop(a);
        let n = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf))
            .await
            .expect("served after a slot freed")
            .unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        drop(b);
        s.stop().await;
    }

    /// HTTP/2 (which the official Rust SDK speaks): a client that never opens a stream is cut
    /// off after the header timeout, as an HTTP/1 client that sends no request is, even while
    /// its PINGs keep every read under the idle timeout.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_http2_connection_that_opens_no_stream_is_cut_off() {
        let s = quick_server(100).await;
        let pk = [("x-ms-documentdb-partitionkey", "[\"p\"]")];
        let r = s
            .post("/dbs/QA/colls/C1/docs", &pk, json!({"id": "1", "pk": "p"}))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
        let (mut rd, mut wr) = TcpStream::connect(addr(&s)).await.unwrap().into_split();
        wr.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            .await
            .unwrap();
        wr.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap(); // an empty SETTINGS frame
        let pinger = tokio::spawn(async move {
            for i in 0..100u8 {
                let ping = [0, 0, 8, 6, 0, 0, 0, 0, 0, i, 0, 0, 0, 0, 0, 0, 0];
                if wr.write_all(&ping).await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
        let started = Instant::now();
        let (mut received, mut buf) = (Vec::new(), [0u8; 4096]);
        loop {
            match tokio::time::timeout(Duration::from_secs(10), rd.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
                Ok(Ok(n)) => received.extend_from_slice(&buf[..n]),
            }
        }
        let took = started.elapsed();
        pinger.abort();
        // The frames the server sent: 9-byte headers (length, type, flags, stream).
        let (mut kinds, mut at) = (Vec::new(), 0);
        while at + 9 <= received.len() {
            let len = u32::from_be_bytes([0, received[at], received[at + 1], received[at + 2]]);
            kinds.push(received[at + 3]);
            at += 9 + len as usize;
        }
        assert!(kinds.contains(&4), "no SETTINGS from the server: {kinds:?}");
        // Closed gracefully: a GOAWAY tells the client to open no stream on it.
        assert!(kinds.contains(&7), "no GOAWAY before the close: {kinds:?}");
        assert!(
            took < Duration::from_secs(6),
            "an HTTP/2 client that opened no stream held the connection {took:?}"
        );
        still_serving(&s).await;
        s.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continuation_tokens_work_only_where_they_were_issued() {
    let s = server().await;
    hash_container(&s, "C2").await;
    for c in ["C1", "C2"] {
        for i in 0..5 {
            let r = s
                .post(
                    &format!("/dbs/QA/colls/{c}/docs"),
                    &[("x-ms-documentdb-partitionkey", "[\"p\"]")],
                    json!({"id": format!("i{i}"), "pk": "p"}),
                )
                .await;
            assert!(r.status.is_success(), "{r:?}");
        }
    }
    let q = json!({"query": "SELECT * FROM c"});
    let page = [
        QUERY[0],
        QUERY[1],
        ("x-ms-max-item-count", "2"),
        ("x-ms-documentdb-query-enablecrosspartition", "true"),
    ];
    let r = s.post("/dbs/QA/colls/C1/docs", &page, q.clone()).await;
    let token = r
        .header("x-ms-continuation")
        .expect("a continuation")
        .to_string();
    // The same token resumes the same query on the same container...
    let r = s
        .post(
            "/dbs/QA/colls/C1/docs",
            &with_token(&page, &token),
            q.clone(),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    // ...but not on another container, nor edited, nor made up.
    let r = s
        .post(
            "/dbs/QA/colls/C2/docs",
            &with_token(&page, &token),
            q.clone(),
        )
        .await;
    assert_client_error(&r, "a token from another container");
    let mut forged = token.clone().into_bytes();
    let last = forged.len() - 3;
    forged[last] = if forged[last] == b'A' { b'B' } else { b'A' };
    let r = s
        .post(
            "/dbs/QA/colls/C1/docs",
            &with_token(&page, &String::from_utf8(forged).unwrap()),
            q.clone(),
        )
        .await;
    assert_client_error(&r, "an edited token");
    let made_up = base64_url(&json!({"strata": 1, "c": {"fp": "x", "consumed": 0, "pos": {"k": "Index", "next": 0}}, "sum": "00"}).to_string());
    let r = s
        .post("/dbs/QA/colls/C1/docs", &with_token(&page, &made_up), q)
        .await;
    assert_client_error(&r, "a made-up token");
    // Read-feed tokens likewise.
    let r = s
        .get("/dbs/QA/colls/C1/docs", &[("x-ms-max-item-count", "2")])
        .await;
    let feed_token = r
        .header("x-ms-continuation")
        .expect("a feed continuation")
        .to_string();
    let r = s
        .get(
            "/dbs/QA/colls/C1/docs",
            &[
                ("x-ms-max-item-count", "2"),
                ("x-ms-continuation", &feed_token),
            ],
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let r = s
        .get(
            "/dbs/QA/colls/C2/docs",
            &[
                ("x-ms-max-item-count", "2"),
                ("x-ms-continuation", &feed_token),
            ],
        )
        .await;
    assert_client_error(&r, "a feed token from another container");
    s.stop().await;
}

/// `headers` plus an `x-ms-continuation`.
fn with_token<'a>(headers: &[(&'a str, &'a str)], token: &'a str) -> Vec<(&'a str, &'a str)> {
    let mut h = headers.to_vec();
    h.push(("x-ms-continuation", token));
    h
}

fn base64_url(s: &str) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let b = s.as_bytes();
    let mut out = String::new();
    for chunk in b.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, &x)| acc | (u32::from(x) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// Every way out of a write settles its admitted charge the same way: a write the store
/// refuses costs 1 RU, whether it came alone or in a batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_writes_cost_one_request_unit() {
    let s = TestServer::start_with(strata_tests::Options {
        limits: Some(strata_server::store::container::Limits {
            logical_partition_limit_bytes: 4096,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await;
    hash_container(&s, "C1").await;
    let pk = [("x-ms-documentdb-partitionkey", "[\"p\"]")];
    let big = "x".repeat(3000);
    let r = s
        .post(
            "/dbs/QA/colls/C1/docs",
            &pk,
            json!({"id": "a", "pk": "p", "s": big}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    let total = || async {
        let v = s.get("/_strata/containers/QA/C1/partitions", &[]).await;
        v.json["partitions"][0]["requestUnits"]["consumedTotal"]
            .as_f64()
            .unwrap()
    };
    let before = total().await;
    // The logical partition is full: the store refuses both writes.
    let r = s
        .post(
            "/dbs/QA/colls/C1/docs",
            &pk,
            json!({"id": "b", "pk": "p", "s": big}),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{r:?}");
    let batch: Vec<Value> = (0..10)
        .map(|i| json!({"operationType": "Create", "id": format!("c{i}"), "resourceBody": {"id": format!("c{i}"), "pk": "p", "s": big}}))
        .collect();
    let r = s
        .post(
            "/dbs/QA/colls/C1/docs",
            &[
                pk[0],
                ("x-ms-cosmos-is-batch-request", "true"),
                ("x-ms-cosmos-batch-atomic", "true"),
            ],
            Value::Array(batch),
        )
        .await;
    assert_eq!(r.status, StatusCode::MULTI_STATUS, "{r:?}");
    assert_eq!(r.json[0]["statusCode"], json!(403), "{r:?}");
    let spent = total().await - before;
    assert!(
        (spent - 2.0).abs() < 1e-6,
        "two refused writes cost {spent} RU, not 2"
    );
    s.stop().await;
}

/// Peak resident memory of this process so far, in MB (nextest runs each test alone).
fn peak_rss_mb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}

/// A tiny query that multiplies rows: three JOINs over a 20-element array make 8,000 rows per
/// document. With a 4 MB query budget (64 MB by default) over 12 documents (96,000 rows): a
/// DISTINCT with 8,000 values answers in full, since rows alike are dropped as they come;
/// one with 96,000 values stops at the budget with a 400, and the process's peak memory
/// grows by a small bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_that_multiply_rows_stay_within_a_memory_budget() {
    let s = TestServer::start_with(strata_tests::Options {
        limits: Some(strata_server::store::container::Limits {
            query_memory_bytes: 4 << 20,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await;
    hash_container(&s, "joins").await;
    let arr: Vec<u32> = (0..20).collect();
    for i in 0..12 {
        let pk = json!([format!("p{}", i % 4)]).to_string();
        let r = s
            .post(
                "/dbs/QA/colls/joins/docs",
                &[("x-ms-documentdb-partitionkey", &pk)],
                json!({"id": format!("d{i}"), "pk": format!("p{}", i % 4), "arr": arr}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED);
    }
    let before = peak_rss_mb();
    let (rows, _) = s
        .query_all(
            "QA",
            "joins",
            "SELECT DISTINCT VALUE [a, b, d] FROM c JOIN a IN c.arr JOIN b IN c.arr JOIN d IN c.arr",
            json!([]),
            &[],
        )
        .await;
    assert_eq!(rows.len(), 8000);
    let r = s
        .post(
            "/dbs/QA/colls/joins/docs",
            &[QUERY[0], QUERY[1], ("x-ms-documentdb-query-enablecrosspartition", "true")],
            json!({"query": "SELECT DISTINCT VALUE [c.id, a, b, d] FROM c JOIN a IN c.arr JOIN b IN c.arr JOIN d IN c.arr", "parameters": []}),
        )
        .await;
    assert_client_error(&r, "memory budget");
    assert!(
        r.message()
            .contains("more than 4 MB of intermediate results"),
        "{r:?}"
    );
    // GROUP BY's groups count too.
    let r = s
        .post(
            "/dbs/QA/colls/joins/docs",
            &[QUERY[0], QUERY[1], ("x-ms-documentdb-query-enablecrosspartition", "true")],
            json!({"query": "SELECT COUNT(1) AS n FROM c JOIN a IN c.arr JOIN b IN c.arr JOIN d IN c.arr GROUP BY c.id, a, b, d", "parameters": []}),
        )
        .await;
    assert_client_error(&r, "memory budget of groups");
    let peak = peak_rss_mb();
    println!("peak RSS: {before} MB before, {peak} MB after");
    assert!(peak - before < 60, "{before} -> {peak} MB");
    // The server goes on answering, and the budget is per query.
    let (n, _) = s
        .query_all(
            "QA",
            "joins",
            "SELECT VALUE COUNT(1) FROM c",
            json!([]),
            &[],
        )
        .await;
    assert_eq!(n, vec![json!(12)]);
    s.stop().await;
}

/// Idle keep-alive connections up to the connection limit do not lock new clients out: the
/// connection idle the longest is closed to admit a new one (before, the newcomer waited in
/// the backlog until an idle one timed out, five minutes by default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_at_the_limit_make_room_for_new_clients() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = TestServer::start_with(strata_tests::Options {
        connections: Some(strata_server::Connections {
            max: 8,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await;
    let addr = s
        .url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let mut idle = Vec::new();
    for _ in 0..8 {
        let mut sock = tokio::net::TcpStream::connect(&addr).await.unwrap();
        sock.write_all(b"GET /_strata/ready HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 512];
        let n = sock.read(&mut buf).await.unwrap();
        assert!(
            buf[..n].starts_with(b"HTTP/1.1 200"),
            "{:?}",
            String::from_utf8_lossy(&buf[..n])
        );
        idle.push(sock);
    }
    let fresh = strata_tests::Client::new(&s.url);
    let answered =
        tokio::time::timeout(std::time::Duration::from_secs(10), fresh.get("/dbs", &[])).await;
    let r = answered.expect("a new client is served while idle connections fill the limit");
    assert_eq!(r.status, StatusCode::OK);
    // The oldest idle connections were closed: reading them ends.
    let mut closed = 0;
    for sock in &mut idle {
        let mut buf = [0u8; 16];
        if let Ok(Ok(0)) =
            tokio::time::timeout(std::time::Duration::from_millis(200), sock.read(&mut buf)).await
        {
            closed += 1;
        }
    }
    assert!(closed >= 1, "no idle connection was closed");
    s.stop().await;
}

/// A request hyper cannot parse (two `Content-Length` headers, a header name with a space)
/// used to get hyper's own 400 with an empty body; it gets a Cosmos-shaped one now, and the
/// server goes on serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unparseable_requests_get_a_cosmos_shaped_400() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = server().await;
    let addr = s
        .url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    for raw in [
        "POST /dbs HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        "GET /dbs HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n",
    ] {
        let mut conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
        conn.write_all(raw.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            conn.read_to_end(&mut out),
        )
        .await;
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("HTTP/1.1 400 "), "{text}");
        let body = text.split("\r\n\r\n").nth(1).unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(body).expect("a JSON body");
        assert_eq!(v["code"], "BadRequest", "{text}");
        assert!(v["message"]
            .as_str()
            .is_some_and(|m| m.contains("could not be parsed")));
    }
    still_serving(&s).await;
    s.stop().await;
}
