//! The built-in Data Explorer in a real browser: headless Chromium (Debian's `chromium`
//! package, which CI installs) driven by `tests/explorer/explorer.mjs` through playwright-core.
//! It creates a MultiHash container, inserts and edits items, walks tenant → user → session,
//! runs a prefix query and reads `targeted` with its ranges, opens the partitions view after
//! splits, and checks that another origin cannot use the page's secret; on a server that
//! listens beyond loopback, the page asks for the account key first. Screenshots of each
//! page are kept in `target/explorer-screens/`.
//!
//! Also, without a browser: the keyless conventions (readiness, certificate, the redirect)
//! and the API's refusal of the secret from elsewhere.

use reqwest::StatusCode;
use std::path::{Path, PathBuf};
use std::process::Command;
use strata_server::store::container::Limits;
use strata_tests::{Options, TestServer};

fn chromium() -> PathBuf {
    let p = std::env::var_os("STRATA_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(
        p.exists(),
        "the explorer test needs Chromium at {} (apt-get install chromium, or set STRATA_CHROMIUM)",
        p.display()
    );
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_explorer_in_a_browser() {
    let browser = chromium();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("explorer");
    strata_tests::npm_ci(&dir, "playwright-core");
    // A small split threshold: the 361 items the page writes split the container.
    let s = TestServer::start_with(Options {
        limits: Some(Limits {
            partition_split_bytes: 64 * 1024,
            ..Limits::default()
        }),
        regions: Some(
            strata_server::regions::RegionsConfig::parse("West US,East US", false)
                .expect("regions"),
        ),
        ..Default::default()
    })
    .await;
    let shots = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/explorer-screens")
        .to_path_buf();
    // The same explorer on a server that listens beyond loopback asks for the key.
    let closed = TestServer::start_with(Options {
        host: Some("0.0.0.0".into()),
        ..Default::default()
    })
    .await;
    let closed_url = closed.url.replace("0.0.0.0", "127.0.0.1");
    let env = [
        ("STRATA_URL", s.url.clone()),
        ("STRATA_URL_CLOSED", closed_url),
        (
            "STRATA_KEY",
            strata_query::protocol::EMULATOR_KEY.to_string(),
        ),
        ("SCREENSHOTS", shots.display().to_string()),
        ("CHROMIUM", browser.display().to_string()),
    ];
    let (ok, text) = strata_tests::run_node(
        dir,
        "explorer.mjs",
        env.iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    )
    .await;
    assert!(ok, "{text}");
    let line = |prefix: &str| -> String {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no '{prefix}' in {text}"))
            .to_string()
    };
    assert_eq!(
        line("container: "),
        "MultiHash /TenantId,/UserId,/SessionId"
    );
    assert_eq!(line("items written: "), "361");
    assert_eq!(
        line("navigated: "),
        "t1 has 4 users; opened first (typed in the explorer)"
    );
    assert_eq!(line("edited: "), "edited in the explorer");
    assert_eq!(
        line("gsi: "),
        "global secondary index of events (SELECT c.UserId, c.note FROM c) · Active · caught up; tree: byUser/UserId · index of events"
    );
    assert_eq!(
        line("regions: "),
        "East US unavailable; then none; after failover West US reads, East US writes and reads"
    );
    assert_eq!(
        line("access: "),
        "3 roles; writer-oid Item writer at /dbs/shop"
    );
    assert!(line("deleted: ").starts_with("i0 gone"), "{text}");
    assert_eq!(
        line("closed explorer: "),
        "data hidden before the key true, wrong key refused, right key opens true"
    );
    let q = line("query route: ");
    assert!(q.starts_with("targeted; ranges: "), "{q}");
    let visited = q["targeted; ranges: ".len()..]
        .split(';')
        .next()
        .unwrap_or_default();
    let parts: usize = line("partitions: ")
        .split(';')
        .next()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(parts >= 4, "the container split: {parts} partitions");
    // "N (ids a, b, …)" or "1 (id a)": a count, then the range ids.
    let (count, ids) = visited.split_once(" (").unwrap_or((visited, ""));
    let visited: usize = count.trim().parse().unwrap_or(0);
    assert_eq!(ids.split(',').count(), visited, "{q}");
    assert!(
        visited >= 1 && visited < parts,
        "a prefix visits some ranges, not all: {q}"
    );
    assert!(line("partitions: ").ends_with("lineage shown: true"));
    assert_eq!(line("count query: "), "[360]");
    assert_eq!(line("hybrid query: "), "t2/u1,t2/u1,t2/u1");
    assert_eq!(line("cross-origin: "), "api blocked, page blocked");
    assert_eq!(line("paged: "), "20 then 20, 0 repeated");
    assert_eq!(line("copy job: "), "succeeded; verified: 360 items");
    let advise = line("advise: ");
    assert!(
        advise.starts_with("3 keys, 6 checks, partitions drawn; ")
            && (advise.ends_with("copy succeeded") || advise.contains("Keep ")),
        "{advise}"
    );
    // The same partitions view on the command line.
    let out = Command::new(env!("CARGO_BIN_EXE_strata-test-server"))
        .args(["partitions", "app/events", "--endpoint", s.url.as_str()])
        .output()
        .expect("run strata partitions");
    let cli = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{cli}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        cli.contains(&format!("{parts} physical partition(s)")) && cli.contains("split from 0"),
        "{cli}"
    );
    assert!(
        cli.contains("largest logical partitions:") && cli.contains("no warnings"),
        "{cli}"
    );
    s.stop().await;
    closed.stop().await;
}

#[tokio::test]
async fn keyless_conventions_and_the_secret_from_elsewhere() {
    let s = TestServer::start().await;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let get = |path: &str| http.get(format!("{}{}", s.url, path.trim_start_matches('/')));
    let r = get("/_strata/ready").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        r.json::<serde_json::Value>().await.unwrap()["status"],
        "ready"
    );
    // A browser at the root lands in the explorer; an unsigned probe (Testcontainers for
    // .NET waits for one to succeed) is told the server is ready; a wrong signature is a 401.
    let r = get("/")
        .header("accept", "text/html,*/*")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FOUND);
    assert_eq!(r.headers()["location"], "/_explorer/index.html");
    let r = get("/").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        r.json::<serde_json::Value>().await.unwrap()["status"],
        "ready"
    );
    // An SDK client given no key (it still sends its x-ms-version) gets the service's 401,
    // as the official suite's test_authorization expects, not the probe's answer.
    let r = get("/")
        .header("x-ms-version", "2020-07-15")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        get("/")
            .header("authorization", "type=master&ver=1.0&sig=bm9wZQ==")
            .header(
                "x-ms-date",
                httpdate::fmt_http_date(std::time::SystemTime::now())
            )
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::UNAUTHORIZED
    );
    // Plain HTTP has no certificate: a clear 404 in Cosmos's shape.
    let r = get("/_explorer/emulator.pem").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["code"], "NotFound");
    assert!(body["message"].as_str().unwrap().contains("--tls"));
    // The page carries the secret; the API takes it from this origin only.
    let html = get("/_explorer/index.html")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let token = html
        .split("name=\"strata-token\" content=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .to_string();
    assert_eq!(token.len(), 48);
    let with = |origin: Option<&str>| {
        let mut b = get("/dbs").header("x-strata-explorer-token", &token);
        if let Some(o) = origin {
            b = b.header("origin", o);
        }
        b
    };
    assert_eq!(with(None).send().await.unwrap().status(), StatusCode::OK);
    let same = s.url.trim_end_matches('/').to_string();
    assert_eq!(
        with(Some(&same)).send().await.unwrap().status(),
        StatusCode::OK
    );
    let r = with(Some("https://evil.example")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let r = get("/dbs")
        .header("x-strata-explorer-token", "0".repeat(48))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // Without the secret or a signature nothing is served.
    assert_eq!(
        get("/dbs").send().await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    s.stop().await;
}

/// With TLS the certificate is served and the same across restarts (kept in the data
/// folder), so a client that trusted it once keeps working.
#[tokio::test]
async fn the_certificate_is_served_and_stable() {
    let dir = strata_tests::TempDir::new("cert");
    let mut pems = Vec::new();
    for _ in 0..2 {
        let s = TestServer::start_with(Options {
            tls: true,
            data_dir: Some(dir.0.clone()),
            ..Default::default()
        })
        .await;
        let http = reqwest::Client::builder()
            .danger_accept_invalid_certs(true)
            .build()
            .unwrap();
        let r = http
            .get(format!("{}_explorer/emulator.pem", s.url))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let pem = r.text().await.unwrap();
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
        pems.push(pem);
        s.stop().await;
    }
    assert_eq!(pems[0], pems[1]);
}
