//! The partition-key advisor on a realistic multi-tenant case: a `/TenantId` container where
//! one tenant (`contoso`) holds most of the data — near the logical partition limit — and
//! takes most of the writes, and a query mix that names tenant, user and session. `strata
//! advise` (the real binary, over HTTP) must rank `/TenantId/UserId/SessionId` first and say
//! why; its copy command must then build the map it simulated: the same number of physical
//! partitions, the same route for every sampled query, and the same partitions visited
//! (within half a partition on average for prefixes, whose cuts depend on arrival order).
//!
//! Limits are scaled down so that the case runs in seconds: logical partitions hold at most
//! 1 MB (the service's 20 GB) and the destination's physical partitions split past 256 KB.

use reqwest::Method;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use strata_tests::{Client, TestServer};

const USERS_BIG: usize = 28;
const SMALL_TENANTS: usize = 19;

/// Runs `strata` in a folder of its own (a copy leaves its checkpoint there).
fn strata(args: Vec<String>) -> (bool, String, String) {
    let dir = strata_tests::TempDir::new("advise");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_strata-test-server"))
        .args(&args)
        .current_dir(&dir.0)
        .output()
        .expect("run strata");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn strata_async(args: Vec<String>) -> (bool, String, String) {
    tokio::task::spawn_blocking(move || strata(args))
        .await
        .unwrap()
}

fn item(tenant: &str, user: usize, session: usize, n: usize) -> Value {
    json!({
        "id": format!("{tenant}-{user}-{session}-{n}"),
        "TenantId": tenant,
        "UserId": format!("u{user}"),
        "SessionId": format!("s{session}"),
        "kind": if n == 0 { "audit" } else { "event" },
        "at": n,
        "payload": "x".repeat(250),
    })
}

/// Upserts `items` 100 per bulk request.
async fn load(c: &Client, items: Vec<Value>) {
    for chunk in items.chunks(100) {
        let ops: Vec<Value> = chunk
            .iter()
            .map(|d| json!({"operationType": "Upsert", "partitionKey": json!([d["TenantId"]]).to_string(), "resourceBody": d}))
            .collect();
        let r = c
            .request(
                Method::POST,
                "/dbs/app/colls/sessions/docs",
                &[
                    ("x-ms-cosmos-is-batch-request", "True"),
                    ("x-ms-cosmos-batch-atomic", "False"),
                ],
                Some(Value::Array(ops)),
            )
            .await;
        assert!(r.status.is_success(), "{r:?}");
        assert!(
            r.batch_statuses().iter().all(|s| (200..300).contains(s)),
            "{r:?}"
        );
    }
}

/// The dataset: contoso with 28 users × 5 sessions × 10 events (about 850 KB), 19 small
/// tenants with 3 users × 2 sessions × 10 events, written in no particular order (as an
/// application writes them, seeded), and contoso's users editing their events meanwhile.
async fn seed(c: &Client) {
    let mut items = Vec::new();
    for u in 0..USERS_BIG {
        for s in 0..5 {
            for n in 0..10 {
                items.push(item("contoso", u, s, n));
            }
        }
    }
    for t in 0..SMALL_TENANTS {
        for u in 0..3 {
            for s in 0..2 {
                for n in 0..10 {
                    items.push(item(&format!("t{t:02}"), u, s, n));
                }
            }
        }
    }
    // The hot tenant: its users keep writing (the edits land among the first writes).
    for i in 0..600 {
        let mut d = item("contoso", i % USERS_BIG, i % 5, 1 + i % 9);
        d["edits"] = json!(i);
        items.push(d);
    }
    // A seeded shuffle (xorshift), so every run writes in the same order.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in (1..items.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        items.swap(i, (x % (i as u64 + 1)) as usize);
    }
    load(c, items).await;
}

/// One query request as an SDK sends it; returns the `x-strata-query-route` header.
async fn query(c: &Client, coll: &str, text: &str, params: Value, pk: Option<&Value>) -> String {
    let pk_text = pk.map(|k| k.to_string());
    let mut headers = vec![
        ("x-ms-documentdb-isquery", "True"),
        ("content-type", "application/query+json"),
        ("x-ms-documentdb-query-enablecrosspartition", "True"),
    ];
    if let Some(k) = &pk_text {
        headers.push(("x-ms-documentdb-partitionkey", k));
    }
    let r = c
        .request(
            Method::POST,
            &format!("/dbs/app/colls/{coll}/docs"),
            &headers,
            Some(json!({"query": text, "parameters": params})),
        )
        .await;
    assert!(r.status.is_success(), "{text}: {r:?}");
    r.header("x-strata-query-route")
        .unwrap_or_default()
        .to_string()
}

/// The workload: mostly session reads scoped by a tenant header, then a user's sessions,
/// a tenant's latest events, and a rare cross-tenant count. 70% of it is contoso's.
async fn workload(c: &Client) {
    for i in 0..200 {
        let tenant = if i % 10 < 7 {
            "contoso".to_string()
        } else {
            format!("t{:02}", i % SMALL_TENANTS)
        };
        let users = if tenant == "contoso" { USERS_BIG } else { 3 };
        let params = json!([{"name": "@u", "value": format!("u{}", i % users)}, {"name": "@s", "value": format!("s{}", i % 2)}]);
        let text = "SELECT * FROM c WHERE c.UserId = @u AND c.SessionId = @s";
        query(c, "sessions", text, params, Some(&json!([tenant]))).await;
        if i % 2 == 0 {
            let text = format!(
                "SELECT * FROM c WHERE c.TenantId = '{tenant}' AND c.UserId = 'u{}'",
                i % users
            );
            query(c, "sessions", &text, json!([]), None).await;
        }
        if i % 8 == 0 {
            let text =
                format!("SELECT TOP 20 * FROM c WHERE c.TenantId = '{tenant}' ORDER BY c.at DESC");
            query(c, "sessions", &text, json!([]), None).await;
        }
        if i % 20 == 0 {
            query(
                c,
                "sessions",
                "SELECT VALUE COUNT(1) FROM c WHERE c.kind = 'audit'",
                json!([]),
                None,
            )
            .await;
        }
    }
}

fn candidate<'a>(advice: &'a Value, key: &str) -> &'a Value {
    advice["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            c["key"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_str().unwrap())
                .collect::<Vec<_>>()
                .join(",")
                == key
        })
        .unwrap_or_else(|| panic!("{key} measured"))
}

fn check<'a>(c: &'a Value, name: &str) -> &'a Value {
    c["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == name)
        .unwrap_or_else(|| panic!("check {name}"))
}

/// Splits run in the background: wait until the map stops changing.
async fn settled_partitions(c: &Client, coll: &str) -> usize {
    let mut last = (0, 0);
    let mut stable = 0;
    for _ in 0..200 {
        let v = c
            .get(&format!("/_strata/containers/app/{coll}/partitions"), &[])
            .await
            .json;
        let now = (
            v["partitions"].as_array().map_or(0, Vec::len),
            v["generation"].as_u64().unwrap_or(0),
        );
        if now == last {
            stable += 1;
            if stable == 5 {
                return now.0;
            }
        } else {
            stable = 0;
            last = now;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!("the partition map never settled");
}

/// `app/sessions`, keyed by `/TenantId`.
async fn tenants_container(c: &Client) {
    c.setup(
        "app",
        "sessions",
        json!({"paths": ["/TenantId"], "kind": "Hash", "version": 2}),
    )
    .await;
}

/// A server whose logical partitions hold at most 1 MB and whose physical partitions split
/// past `split` bytes.
async fn server(split: u64) -> TestServer {
    TestServer::start_with(strata_tests::Options {
        limits: Some(strata_server::store::container::Limits {
            partition_split_bytes: split,
            logical_partition_limit_bytes: 1024 * 1024,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_advisor_ranks_the_hierarchical_key_first_and_its_simulation_matches_the_copy() {
    // The application's account, and the account it migrates into, whose partitions split
    // past 256 KB. The source keeps one physical partition, so the copy writes the items in
    // the order the application wrote them (its change feed's), as organic growth would.
    let s = server(50 << 30).await;
    let d = server(256 * 1024).await;
    tenants_container(&s).await;
    seed(&s.client).await;
    workload(&s.client).await;
    let sample = s
        .get("/_strata/containers/app/sessions/queries", &[])
        .await
        .json;
    assert_eq!(sample["queries"].as_array().unwrap().len(), 4, "{sample:#}");

    let args = |extra: &[&str]| -> Vec<String> {
        [
            "advise",
            "app/sessions",
            "--from",
            &s.url,
            "--key",
            "/TenantId,/UserId,/SessionId",
            "--key",
            "/UserId",
            "--throughput",
            "1000",
            "--growth",
            "2",
            "--window",
            "30",
            "--split-bytes",
            "256KB",
        ]
        .iter()
        .chain(extra)
        .map(|x| x.to_string())
        .collect()
    };
    let (ok, text, err) = strata_async(args(&[])).await;
    assert!(ok, "{text}{err}");
    println!("{text}");
    let (ok, out, err) = strata_async(args(&["--json"])).await;
    assert!(ok, "{err}");
    let advice: Value = serde_json::from_str(&out).expect("JSON advice");

    // Ranked: the three-level key first, recommended, for the reasons the guidance gives.
    let three = "/TenantId,/UserId,/SessionId";
    assert_eq!(
        advice["candidates"][0]["key"],
        json!(["/TenantId", "/UserId", "/SessionId"]),
        "{text}"
    );
    assert_eq!(
        advice["recommendation"]["key"],
        advice["candidates"][0]["key"]
    );
    let tenant = candidate(&advice, "/TenantId");
    assert_eq!(tenant["current"], true);
    assert_eq!(tenant["logical"]["largestKey"], json!(["contoso"]));
    assert_eq!(
        check(tenant, "logical partitions under the limit")["ok"],
        true,
        "near, not over"
    );
    assert_eq!(check(tenant, "room to grow")["ok"], false);
    assert_eq!(check(tenant, "no hot partition")["ok"], false, "{text}");
    let best = candidate(&advice, three);
    for name in [
        "logical partitions under the limit",
        "room to grow",
        "no hot partition",
        "queries name the key",
        "items have every level",
    ] {
        assert_eq!(check(best, name)["ok"], true, "{name}: {text}");
    }
    let reasons = advice["recommendation"]["reasons"].to_string();
    assert!(
        reasons.contains("fixes \\\"room to grow\\\"")
            && reasons.contains("fixes \\\"no hot partition\\\""),
        "{reasons}"
    );
    // /UserId fans the tenant queries out.
    assert!(
        candidate(&advice, "/UserId")["routing"]["fanout"]
            .as_f64()
            .unwrap()
            > best["routing"]["fanout"].as_f64().unwrap()
    );
    assert!(
        text.contains("Recommendation: /TenantId,/UserId,/SessionId"),
        "{text}"
    );

    // The copy command it printed, run as printed.
    let cmd = advice["recommendation"]["command"]
        .as_str()
        .expect("a copy command")
        .to_string();
    let words: Vec<String> = cmd
        .split_whitespace()
        .skip(1)
        .map(|w| w.trim_matches('\'').to_string())
        .collect();
    let dest = words[words.iter().position(|w| w == "--dest").unwrap() + 1]
        .split('/')
        .nth(1)
        .unwrap()
        .to_string();
    let mut words = words;
    words.extend(["--to".to_string(), d.url.clone()]);
    let (ok, out, err) = strata_async(words).await;
    assert!(ok, "{cmd}: {out}{err}");

    // The map strata built is the one simulated.
    let real = settled_partitions(&d.client, &dest).await;
    let simulated = best["physical"]["partitions"].as_u64().unwrap();
    assert_eq!(
        real as u64, simulated,
        "real {real}, simulated {simulated}: {text}"
    );
    assert!(real > 1);

    // Every sampled query, with every recorded value, routes as replayed.
    let simulated: BTreeMap<String, (String, f64)> = best["routing"]["queries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| {
            (
                q["text"].as_str().unwrap().to_string(),
                (
                    q["route"].as_str().unwrap().to_string(),
                    q["partitions"].as_f64().unwrap(),
                ),
            )
        })
        .collect();
    for shape in sample["queries"].as_array().unwrap() {
        let text = shape["text"].as_str().unwrap();
        let mut visited = 0usize;
        let mut routes = Vec::new();
        let examples = shape["examples"].as_array().unwrap();
        for ex in examples {
            // As the advisor assumes, the application names under the new key what it knows
            // of it: the old tenant header's value joins the filter.
            let (text, params) = match ex.get("partitionKey") {
                Some(k) => {
                    let mut p = ex["parameters"].as_array().unwrap().clone();
                    p.push(json!({"name": "@tenant", "value": k[0]}));
                    (format!("{text} AND c.TenantId = @tenant"), Value::Array(p))
                }
                None => (text.to_string(), ex["parameters"].clone()),
            };
            let header = query(&d.client, &dest, &text, params, None).await;
            let mut parts = header.split("; ");
            routes.push(parts.next().unwrap().to_string());
            let ranges = parts.next().unwrap().trim_start_matches("ranges=");
            visited += ranges.split(',').filter(|x| !x.is_empty()).count();
        }
        let (route, partitions) = &simulated[text];
        assert!(
            routes.iter().all(|r| r == route),
            "{text}: real {routes:?}, simulated {route}"
        );
        // Single-partition and fan-out queries visit exactly as many partitions (one, all).
        // A prefix may straddle a cut: the real splitter cut each partition where the data
        // that had arrived by then was halved, the simulation where all of it is, so the
        // maps agree in size but a cut may sit one logical partition away.
        let real_avg = visited as f64 / examples.len() as f64;
        let tolerance = if route == "targeted" { 0.5 } else { 1e-9 };
        assert!(
            (real_avg - partitions).abs() <= tolerance,
            "{text}: real {real_avg} partitions, simulated {partitions}"
        );
    }
    s.stop().await;
    d.stop().await;
}

/// The advisor's endpoints: the sample's export and reset, the advice computed by the server,
/// and bad requests answered in Cosmos's shape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_advise_endpoints_answer_and_refuse_in_cosmos_shape() {
    let s = server(64 * 1024).await;
    tenants_container(&s).await;
    let items: Vec<Value> = (0..200)
        .map(|i| item(&format!("t{}", i % 7), i % 5, i % 3, i))
        .collect();
    load(&s.client, items).await;
    for t in ["t1", "t2"] {
        let text = format!("SELECT * FROM c WHERE c.TenantId = '{t}'");
        query(&s.client, "sessions", &text, json!([]), None).await;
    }
    let sample = s.get("/_strata/containers/app/sessions/queries", &[]).await;
    assert_eq!(sample.status, 200);
    let q = &sample.json["queries"][0];
    assert_eq!(q["text"], "SELECT * FROM c WHERE c.TenantId = @__v1");
    assert_eq!(
        (q["count"].as_f64(), q["route"].as_str()),
        (Some(2.0), Some("single"))
    );
    assert_eq!(q["examples"].as_array().unwrap().len(), 2);

    let r = s
        .post(
            "/_strata/containers/app/sessions/advise",
            &[],
            json!({"keys": ["/TenantId,/UserId"], "growth": 3}),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json["itemsRead"], 200);
    assert_eq!(r.json["candidates"].as_array().unwrap().len(), 2);
    assert!(r.json["report"]
        .as_str()
        .unwrap()
        .contains("Recommendation: "));

    let bad = s
        .post(
            "/_strata/containers/app/sessions/advise",
            &[],
            json!({"keys": ["TenantId"]}),
        )
        .await;
    strata_tests::assert_error(&bad, 400, "BadRequest");
    assert!(
        bad.message().contains("one to three paths"),
        "{}",
        bad.message()
    );
    let bad = s
        .post(
            "/_strata/containers/app/sessions/advise",
            &[],
            json!({"keys": ["/a"], "growth": 0.5}),
        )
        .await;
    strata_tests::assert_error(&bad, 400, "BadRequest");
    let missing = s.get("/_strata/containers/app/nope/queries", &[]).await;
    strata_tests::assert_error(&missing, 404, "NotFound");
    let wrong = s
        .request(
            Method::PUT,
            "/_strata/containers/app/sessions/advise",
            &[],
            Some(json!({})),
        )
        .await;
    assert_eq!(wrong.status, 405, "{wrong:?}");

    let cleared = s
        .request(
            Method::DELETE,
            "/_strata/containers/app/sessions/queries",
            &[],
            None,
        )
        .await;
    assert_eq!(cleared.status, 204);
    let sample = s.get("/_strata/containers/app/sessions/queries", &[]).await;
    assert_eq!(sample.json["queries"], json!([]));

    // A sample: at most 50 items read, sizes scaled to the 200 stored, and said so.
    let sampled = |extra: &[&str]| -> Vec<String> {
        [
            "advise",
            "app/sessions",
            "--key",
            "/UserId",
            "--sample",
            "50",
            "--from",
            &s.url,
        ]
        .iter()
        .chain(extra)
        .map(|x| x.to_string())
        .collect()
    };
    let (ok, out, err) = strata_async(sampled(&["--json"])).await;
    assert!(ok, "{err}");
    let advice: Value = serde_json::from_str(&out).unwrap();
    assert!(
        advice["itemsRead"].as_u64().unwrap() <= 50,
        "{}",
        advice["itemsRead"]
    );
    assert_eq!(advice["source"]["itemsTotal"], 200);
    assert!(advice["settings"]["scale"].as_f64().unwrap() >= 4.0);
    let (ok, text, _) = strata_async(sampled(&[])).await;
    assert!(ok && text.contains("of 200 items read (a sample"), "{text}");

    // An empty container: every key measured, nothing failed for want of items.
    s.setup(
        "app",
        "empty",
        json!({"paths": ["/TenantId"], "kind": "Hash", "version": 2}),
    )
    .await;
    let r = s
        .post(
            "/_strata/containers/app/empty/advise",
            &[],
            json!({"keys": ["/UserId"]}),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json["itemsRead"], 0);
    for c in r.json["candidates"].as_array().unwrap() {
        assert!(
            c["checks"]
                .as_array()
                .unwrap()
                .iter()
                .all(|k| k["ok"] == true),
            "{c}"
        );
    }

    // The command line refuses what it cannot use, with a reason and exit status 1.
    let (ok, _, err) = strata_async(vec![
        "advise".into(),
        "no-slash".into(),
        "--key".into(),
        "/a".into(),
        "--from".into(),
        s.url.clone(),
    ])
    .await;
    assert!(!ok && err.contains("DB/CONTAINER"), "{err}");
    let (ok, _, err) = strata_async(vec![
        "advise".into(),
        "app/sessions".into(),
        "--key".into(),
        "/a,/b,/c,/d".into(),
        "--from".into(),
        s.url.clone(),
    ])
    .await;
    assert!(!ok && err.contains("one to three paths"), "{err}");
    s.stop().await;
}

/// `--record-queries` keeps the sample in the data folder: it is there after a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_sample_outlives_a_restart() {
    let dir = strata_tests::TempDir::new("advise-sample");
    let bin = env!("CARGO_BIN_EXE_strata-test-server");
    let (mut child, c) = strata_tests::spawn_server_with(bin, &dir.0, &["--record-queries"]);
    tenants_container(&c).await;
    query(
        &c,
        "sessions",
        "SELECT * FROM c WHERE c.TenantId = 'a'",
        json!([]),
        None,
    )
    .await;
    // A clean stop (SIGTERM) writes the sample.
    let stopped = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    child.wait().unwrap();
    let (mut child, c) = strata_tests::spawn_server_with(bin, &dir.0, &["--record-queries"]);
    let sample = c
        .get("/_strata/containers/app/sessions/queries", &[])
        .await
        .json;
    assert_eq!(
        sample["queries"][0]["text"], "SELECT * FROM c WHERE c.TenantId = @__v1",
        "{sample}"
    );
    assert_eq!(sample["queries"][0]["count"], 1.0);
    child.kill().unwrap();
    child.wait().unwrap();
}

/// A query for a prefix of a hierarchical key, as the Python SDK sends it (`partition_key=
/// ["contoso"]`: requests scoped by the prefix's EPK range, no key header), is sampled as the
/// prefix query it is: the advisor replays it as targeted under the current key, not as a
/// fan-out that a coarser key would seem to fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefix_query_sent_by_epk_range_is_sampled_as_targeted() {
    use strata_query::pk::{epk::epk_range, PartitionKey, PartitionKeyDefinition};
    let s = TestServer::start_with(strata_tests::Options {
        limits: Some(strata_server::store::container::Limits {
            initial_partitions: Some(4),
            ..Default::default()
        }),
        ..Default::default()
    })
    .await;
    let paths = ["/TenantId", "/UserId", "/SessionId"];
    s.setup_with(
        "app",
        "h",
        json!({"partitionKey": {"paths": paths, "kind": "MultiHash", "version": 2}}),
    )
    .await;
    for t in ["contoso", "fabrikam", "northwind"] {
        for u in 0..4 {
            let key = json!([t, format!("u{u}"), "s1"]);
            let doc = json!({"id": format!("{t}-{u}"), "TenantId": t, "UserId": format!("u{u}"), "SessionId": "s1", "n": u});
            let r = s.create("app", "h", &key, doc).await;
            assert!(r.status.is_success(), "{r:?}");
        }
    }
    let def = PartitionKeyDefinition::multi_hash(&paths).unwrap();
    let prefix = PartitionKey::from_json_value(&json!(["contoso"])).unwrap();
    let range = epk_range(&def, &prefix).unwrap();
    for _ in 0..3 {
        let r = s
            .post(
                "/dbs/app/colls/h/docs",
                &[
                    ("x-ms-documentdb-isquery", "True"),
                    ("content-type", "application/query+json"),
                    ("x-ms-documentdb-query-enablecrosspartition", "True"),
                    ("x-ms-start-epk", &range.min),
                    ("x-ms-end-epk", &range.max),
                ],
                json!({"query": "SELECT * FROM c WHERE c.n >= 0", "parameters": []}),
            )
            .await;
        assert!(r.status.is_success(), "{r:?}");
        assert_eq!(r.json["Documents"].as_array().map(Vec::len), Some(4));
    }
    let sample = s.get("/_strata/containers/app/h/queries", &[]).await;
    let shape = &sample.json["queries"][0];
    assert_eq!(shape["partitionKeyHeader"], json!(true), "{shape}");
    assert_eq!(
        shape["examples"][0]["partitionKey"],
        json!(["contoso"]),
        "{shape}"
    );
    let r = s
        .post(
            "/_strata/containers/app/h/advise",
            &[],
            json!({"keys": ["/TenantId,/UserId,/SessionId", "/TenantId"]}),
        )
        .await;
    assert!(r.status.is_success(), "{r:?}");
    let current = candidate(&r.json, "/TenantId,/UserId,/SessionId");
    assert_eq!(
        current["routing"]["fanout"],
        json!(0.0),
        "{}",
        current["routing"]
    );
    assert_eq!(current["routing"]["queries"][0]["route"], "targeted");
    s.stop().await;
}
