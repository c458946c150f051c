//! The management API of Microsoft's SDK test emulator (`--management-port`), driven as its
//! harnesses drive it: the JSON `ready` record read from the last line of stdout, then plain
//! HTTP to the management endpoint, with the Cosmos API beside it showing each effect.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use strata_tests::Client;

/// A strata process, killed when dropped.
struct Emulator {
    child: Child,
    ready: Value,
    http: reqwest::Client,
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Emulator {
    /// Starts strata and reads stdout up to its `ready` record, which must be the last line.
    fn start(extra: &[&str]) -> Self {
        strata_tests::crypto();
        let child = Command::new(env!("CARGO_BIN_EXE_strata-test-server"))
            .args(["--in-memory", "--port", "0", "--management-port", "0"])
            .args(["--log", "warn"])
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start strata");
        // Owned at once, so a failure below still stops the process.
        let mut e = Self {
            child,
            ready: Value::Null,
            http: reqwest::Client::new(),
        };
        let mut out = BufReader::new(e.child.stdout.take().expect("stdout"));
        let mut lines = Vec::new();
        e.ready = loop {
            let mut line = String::new();
            assert!(
                out.read_line(&mut line).expect("read") > 0,
                "no ready record: {lines:?}"
            );
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                break v;
            }
            lines.push(line);
        };
        assert_eq!(e.ready["event"], "ready", "{}", e.ready);
        e
    }

    fn cosmos(&self, region: usize) -> Client {
        Client::new(
            self.ready["regions"][region]["gatewayEndpoint"]
                .as_str()
                .expect("endpoint"),
        )
    }

    /// A management request with an optional JSON body; the status and the JSON answer.
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let base = self.ready["managementEndpoint"].as_str().expect("endpoint");
        let mut rb = self
            .http
            .request(method, format!("{}{}", base.trim_end_matches('/'), path));
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        let r = rb.send().await.expect("management request");
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Polls an operation until it is terminal.
    async fn settle(&self, id: &str) -> Value {
        for _ in 0..200 {
            let (s, op) = self
                .call(Method::GET, &format!("/operations/{id}"), None)
                .await;
            assert_eq!(s, StatusCode::OK, "{op}");
            if op["status"] != "Running" {
                return op;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("operation {id} did not finish")
    }
}

/// A container `app/c` keyed by `/pk` with one item per letter.
async fn letters(c: &Client) {
    c.setup(
        "app",
        "c",
        json!({"paths": ["/pk"], "kind": "Hash", "version": 2}),
    )
    .await;
    for l in 'a'..='z' {
        let r = c
            .create(
                "app",
                "c",
                &json!([l.to_string()]),
                json!({"id": l.to_string(), "pk": l.to_string()}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    }
}

async fn read_item(c: &Client, id: &str) -> strata_tests::Resp {
    let pk = json!([id]).to_string();
    c.get(
        &format!("/dbs/app/colls/c/docs/{id}"),
        &[("x-ms-documentdb-partitionkey", &pk)],
    )
    .await
}

async fn ranges(c: &Client) -> Vec<Value> {
    let r = c.get("/dbs/app/colls/c/pkranges", &[]).await;
    r.json["PartitionKeyRanges"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn the_ready_record_health_and_account_are_the_emulators() {
    let e = Emulator::start(&[]);
    let r = &e.ready;
    assert!(
        r["managementEndpoint"]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:"),
        "{r}"
    );
    assert_eq!(r["regions"][0]["name"], "South Central US");
    assert_eq!(r["accountEndpoint"], r["regions"][0]["gatewayEndpoint"]);
    let (s, health) = e.call(Method::GET, "/health", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        health,
        json!({"status": "ok", "gateway20Enabled": false, "connectivityProbes": 0, "gateway20Requests": 0})
    );
    let (s, account) = e.call(Method::GET, "/account", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(account["writeMode"], "single");
    assert_eq!(account["consistency"], "Session");
    assert_eq!(account["perPartitionFailover"], false);
    assert_eq!(account["regions"], r["regions"]);
    let (s, err) = e.call(Method::GET, "/capabilities", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert!(err["error"].is_string(), "{err}");
    // The Cosmos account answers at the endpoint the record names.
    assert_eq!(e.cosmos(0).get("/", &[]).await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_manual_split_shows_each_phase() {
    let e = Emulator::start(&[]);
    let c = e.cosmos(0);
    letters(&c).await;
    let body = json!({"progressionMode": "manual"});
    let (s, op) = e
        .call(
            Method::POST,
            "/databases/app/containers/c/partitions/0/split",
            Some(body),
        )
        .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{op}");
    assert_eq!(
        (op["status"].as_str(), op["phase"].as_str()),
        (Some("Running"), Some("Preparing"))
    );
    let id = op["operationId"].as_str().unwrap().to_string();
    assert_eq!(id, "op-split-1");
    // Preparing: the old range serves.
    assert_eq!(read_item(&c, "q").await.status, StatusCode::OK);
    let (s, op) = e
        .call(Method::POST, &format!("/operations/{id}/advance"), None)
        .await;
    assert_eq!(
        (s, op["phase"].as_str()),
        (StatusCode::OK, Some("Swapping")),
        "{op}"
    );
    // Swapping: the range being replaced answers 410/1007, by key and by range id.
    let r = read_item(&c, "q").await;
    assert_eq!(
        (r.status, r.substatus()),
        (StatusCode::GONE, Some(1007)),
        "{r:?}"
    );
    let r = c
        .get(
            "/dbs/app/colls/c/docs",
            &[("x-ms-documentdb-partitionkeyrangeid", "0")],
        )
        .await;
    assert_eq!(
        (r.status, r.substatus()),
        (StatusCode::GONE, Some(1007)),
        "{r:?}"
    );
    let (s, _) = e
        .call(Method::POST, &format!("/operations/{id}/advance"), None)
        .await;
    assert_eq!(s, StatusCode::OK);
    let done = e.settle(&id).await;
    assert_eq!(
        (done["status"].as_str(), done["phase"].as_str()),
        (Some("Succeeded"), Some("Succeeded")),
        "{done}"
    );
    assert_eq!(done["parent"], 0);
    assert_eq!(done["children"], json!([1, 2]));
    assert_eq!(
        (done["database"].as_str(), done["container"].as_str()),
        (Some("app"), Some("c"))
    );
    assert_eq!(done["mode"], "midpoint");
    let cut = done["splitEpk"].as_str().unwrap().to_string();
    let now = ranges(&c).await;
    assert_eq!(now.len(), 2, "{now:?}");
    assert_eq!(now[0]["maxExclusive"], cut.as_str());
    assert_eq!(now[1]["parents"], json!(["0"]));
    // Succeeded: every item is served again; the finished operation cannot move.
    for l in 'a'..='z' {
        assert_eq!(read_item(&c, &l.to_string()).await.status, StatusCode::OK);
    }
    let (s, err) = e
        .call(Method::POST, &format!("/operations/{id}/advance"), None)
        .await;
    assert_eq!(s, StatusCode::CONFLICT, "{err}");
}

#[tokio::test]
async fn automatic_splits_and_merges_change_the_routing_map() {
    let e = Emulator::start(&[]);
    let c = e.cosmos(0);
    letters(&c).await;
    let body = json!({"mode": "storage", "lockDurationMs": 50});
    let (s, op) = e
        .call(
            Method::POST,
            "/databases/app/containers/c/partitions/0/split",
            Some(body),
        )
        .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{op}");
    let done = e.settle(op["operationId"].as_str().unwrap()).await;
    assert_eq!(done["status"], "Succeeded", "{done}");
    assert_eq!(done["mode"], "storage");
    // Advancing an automatic operation is a conflict.
    let (s, _) = e
        .call(
            Method::POST,
            &format!(
                "/operations/{}/advance",
                done["operationId"].as_str().unwrap()
            ),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::CONFLICT);
    let body = json!({"partitionIds": [2, 1]});
    let (s, op) = e
        .call(
            Method::POST,
            "/databases/app/containers/c/partitions/merge",
            Some(body),
        )
        .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{op}");
    assert!(
        op["operationId"].as_str().unwrap().starts_with("op-merge-"),
        "{op}"
    );
    let done = e.settle(op["operationId"].as_str().unwrap()).await;
    assert_eq!(done["status"], "Succeeded", "{done}");
    assert_eq!(
        (done["merged"].clone(), done["into"].clone()),
        (json!([2, 1]), json!(3))
    );
    let now = ranges(&c).await;
    assert_eq!(now.len(), 1, "{now:?}");
    assert_eq!(
        (
            now[0]["id"].as_str(),
            now[0]["minInclusive"].as_str(),
            now[0]["maxExclusive"].as_str()
        ),
        (Some("3"), Some(""), Some("FF"))
    );
    assert_eq!(now[0]["parents"], json!(["0", "1", "2"]));
    // The merged children are gone to a client with an old map; the items are all there.
    let r = c
        .get(
            "/dbs/app/colls/c/docs",
            &[("x-ms-documentdb-partitionkeyrangeid", "1")],
        )
        .await;
    assert_eq!(
        (r.status, r.substatus()),
        (StatusCode::GONE, Some(1002)),
        "{r:?}"
    );
    let r = c.get("/dbs/app/colls/c/docs", &[]).await;
    assert_eq!(r.json["_count"], 26, "{r:?}");
}

#[tokio::test]
async fn bad_requests_get_the_emulators_errors() {
    let e = Emulator::start(&[]);
    let c = e.cosmos(0);
    letters(&c).await;
    let split = "/databases/app/containers/c/partitions/0/split";
    let base = e.ready["managementEndpoint"]
        .as_str()
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    // A body that is not JSON by its content type: 415.
    let r = e
        .http
        .post(format!("{base}{split}"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let err: Value = r.json().await.unwrap();
    assert_eq!(
        err["error"],
        "nonempty request bodies require application/json"
    );
    for (body, status) in [
        (
            json!({"mode": "midpoint", "colour": "red"}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"progressionMode": "manual", "lockDurationMs": 10}),
            StatusCode::BAD_REQUEST,
        ),
        (json!({"lockDurationMs": 60_001}), StatusCode::BAD_REQUEST),
        (json!({"mode": "epk"}), StatusCode::BAD_REQUEST),
        (
            json!({"mode": "epk", "epk": "ABC"}),
            StatusCode::BAD_REQUEST,
        ),
        (json!({"mode": "sideways"}), StatusCode::BAD_REQUEST),
        (json!({"progressionMode": "later"}), StatusCode::BAD_REQUEST),
    ] {
        let (s, err) = e.call(Method::POST, split, Some(body.clone())).await;
        assert_eq!(s, status, "{body} -> {err}");
        assert!(err["error"].is_string(), "{body} -> {err}");
    }
    let missing = [
        "/databases/app/containers/nope/partitions/0/split",
        "/databases/app/containers/c/partitions/7/split",
        "/operations/op-split-99",
    ];
    for path in missing {
        let method = if path.starts_with("/operations") {
            Method::GET
        } else {
            Method::POST
        };
        let (s, err) = e.call(method, path, None).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{path} -> {err}");
        assert!(err["error"].is_string(), "{path} -> {err}");
    }
    // One range cannot merge with itself; a merge needs its partitions.
    let merge = "/databases/app/containers/c/partitions/merge";
    let (s, err) = e
        .call(Method::POST, merge, Some(json!({"partitionIds": [0, 0]})))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{err}");
    let (s, err) = e.call(Method::POST, merge, Some(json!({}))).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{err}");
    // An EPK outside the range's span.
    let (s, err) = e
        .call(
            Method::POST,
            split,
            Some(json!({"mode": "epk", "epk": "FF00"})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{err}");
}

#[tokio::test]
async fn per_partition_failover_is_advertised_to_the_sdks() {
    let e = Emulator::start(&[]);
    let path = "/config/per-partition-failover";
    let (s, echo) = e
        .call(Method::PUT, path, Some(json!({"enabled": true})))
        .await;
    assert_eq!((s, echo), (StatusCode::OK, json!({"enabled": true})));
    let account = e.cosmos(0).get("/", &[]).await;
    assert_eq!(
        account.json["enablePerPartitionFailoverBehavior"], true,
        "{account:?}"
    );
    let (_, management) = e.call(Method::GET, "/account", None).await;
    assert_eq!(management["perPartitionFailover"], true);
    let (s, _) = e
        .call(Method::PUT, path, Some(json!({"enabled": false})))
        .await;
    assert_eq!(s, StatusCode::OK);
    let account = e.cosmos(0).get("/", &[]).await;
    assert_eq!(account.json["enablePerPartitionFailoverBehavior"], false);
    let (s, _) = e
        .call(Method::PUT, path, Some(json!({"enabled": "yes"})))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_paused_region_refuses_sessions_it_has_not_seen() {
    let e = Emulator::start(&["--regions", "West US,East US"]);
    assert_eq!(e.ready["regions"][1]["name"], "East US");
    let (west, east) = (e.cosmos(0), e.cosmos(1));
    letters(&west).await;
    let (s, paused) = e
        .call(Method::POST, "/regions/East US/replication/pause", None)
        .await;
    assert_eq!(
        (s, paused),
        (
            StatusCode::OK,
            json!({"region": "East US", "replication": "paused"})
        )
    );
    let pk = json!(["a"]).to_string();
    let w = west
        .request(
            Method::PUT,
            "/dbs/app/colls/c/docs/a",
            &[("x-ms-documentdb-partitionkey", &pk)],
            Some(json!({"id": "a", "pk": "a", "v": 2})),
        )
        .await;
    assert_eq!(w.status, StatusCode::OK, "{w:?}");
    let token = w.header("x-ms-session-token").unwrap().to_string();
    let headers = [
        ("x-ms-documentdb-partitionkey", pk.as_str()),
        ("x-ms-session-token", token.as_str()),
    ];
    // East has not seen the write: a read in that session is not available there (404/1002);
    // the write region has it.
    let r = east.get("/dbs/app/colls/c/docs/a", &headers).await;
    assert_eq!(
        (r.status, r.substatus()),
        (StatusCode::NOT_FOUND, Some(1002)),
        "{r:?}"
    );
    assert_eq!(
        west.get("/dbs/app/colls/c/docs/a", &headers).await.status,
        StatusCode::OK
    );
    let (s, resumed) = e
        .call(Method::POST, "/regions/East US/replication/resume", None)
        .await;
    assert_eq!(
        (s, resumed["replication"].as_str()),
        (StatusCode::OK, Some("resumed"))
    );
    assert_eq!(
        east.get("/dbs/app/colls/c/docs/a", &headers).await.status,
        StatusCode::OK
    );
    let (s, err) = e
        .call(Method::POST, "/regions/Mars/replication/pause", None)
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{err}");
}

/// Operations left running (a manual one waits for its advances indefinitely) are bounded:
/// past the limit a new one is refused with 429, and finishing one makes room.
#[tokio::test]
async fn running_operations_are_bounded() {
    let e = Emulator::start(&[]);
    let c = e.cosmos(0);
    letters(&c).await;
    let split = "/databases/app/containers/c/partitions/0/split";
    let manual = json!({"progressionMode": "manual"});
    for n in 0..1000 {
        let (s, op) = e.call(Method::POST, split, Some(manual.clone())).await;
        assert_eq!(s, StatusCode::ACCEPTED, "operation {n}: {op}");
    }
    let (s, err) = e.call(Method::POST, split, Some(manual.clone())).await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{err}");
    assert!(
        err["error"]
            .as_str()
            .unwrap()
            .contains("1000 operations are running"),
        "{err}"
    );
    // The first one, advanced to its end, leaves room.
    for _ in 0..2 {
        let (s, _) = e
            .call(Method::POST, "/operations/op-split-1/advance", None)
            .await;
        assert_eq!(s, StatusCode::OK);
    }
    assert_eq!(e.settle("op-split-1").await["status"], "Succeeded");
    // Its partition is gone; its child takes the room it left.
    let child = "/databases/app/containers/c/partitions/1/split";
    let (s, op) = e.call(Method::POST, child, Some(manual)).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{op}");
}
