//! The `strata` subcommands as a newcomer meets them: against a port where nothing listens
//! they say so within seconds (not after the SDK's half minute of connection retries); with
//! no endpoint they find the server the way it was started (`PORT`); an export that fails
//! leaves no file; an import refuses a container whose partition key is not the export's.

use reqwest::Method;
use serde_json::json;
use std::process::Command;
use std::time::{Duration, Instant};
use strata_tests::{TempDir, TestServer};

/// Runs `strata` with `env` (and none of the variables that name a server otherwise).
fn strata(args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_strata-test-server"));
    for k in [
        "STRATA_ENDPOINT",
        "STRATA_PORT",
        "PORT",
        "STRATA_TLS",
        "PROTOCOL",
    ] {
        cmd.env_remove(k);
    }
    let out = cmd.args(args).envs(env.iter().copied()).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

async fn strata_async(args: Vec<String>, env: Vec<(String, String)>) -> (bool, String) {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        strata(&args, &env)
    })
    .await
    .unwrap()
}

fn owned(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A port nothing listens on (bound, then closed).
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A server with database `app` and container `c` keyed by `partition_key`.
async fn with_container(partition_key: serde_json::Value) -> TestServer {
    let s = TestServer::start().await;
    let r = s.post("/dbs", &[], json!({"id": "app"})).await;
    assert!(r.status.is_success(), "{r:?}");
    let def = json!({"id": "c", "partitionKey": partition_key});
    let r = s.post("/dbs/app/colls", &[], def).await;
    assert!(r.status.is_success(), "{r:?}");
    s
}

#[test]
fn every_subcommand_says_at_once_that_nothing_listens() {
    let port = closed_port();
    let url = format!("http://127.0.0.1:{port}/");
    let dir = TempDir::new("cli-closed");
    let file = dir.0.join("in.jsonl");
    std::fs::write(&file, "").unwrap();
    let (out_file, cp) = (dir.0.join("out.jsonl"), dir.0.join("cp.json"));
    let p = port.to_string();
    type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>);
    let cases: Vec<Case> = vec![
        (vec!["partitions", "app/c", "--endpoint", &url], vec![]),
        // No endpoint: the server's own variables say where it is, for every subcommand.
        (vec!["partitions", "app/c"], vec![("PORT", &p)]),
        (vec!["ready"], vec![("PORT", &p)]),
        (vec!["ready"], vec![("STRATA_PORT", &p)]),
        (
            vec!["advise", "app/c", "--key", "/a", "--from", &url],
            vec![],
        ),
        (vec!["advise", "app/c", "--key", "/a"], vec![("PORT", &p)]),
        (
            vec![
                "copy",
                "--source",
                "a/b",
                "--dest",
                "a/c",
                "--checkpoint",
                cp.to_str().unwrap(),
            ],
            vec![("PORT", &p)],
        ),
        (
            vec![
                "export",
                "--from",
                &url,
                "--out",
                out_file.to_str().unwrap(),
            ],
            vec![],
        ),
        (
            vec!["import", "--in", file.to_str().unwrap()],
            vec![("PORT", &p)],
        ),
    ];
    for (args, env) in cases {
        let started = Instant::now();
        let (ok, out) = strata(&args, &env);
        let took = started.elapsed();
        assert!(!ok, "{args:?}: {out}");
        assert!(
            out.contains(&format!("nothing is listening at {url}")),
            "{args:?} {env:?}: {out}"
        );
        // The SDK's retries took ~26 s; the probe answers in milliseconds.
        assert!(took < Duration::from_secs(10), "{args:?}: {took:?}");
    }
    assert!(!out_file.exists(), "a failed export leaves no file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_endpoint_subcommands_find_the_server_by_its_port() {
    let s = with_container(json!({"paths": ["/t"], "kind": "Hash", "version": 2})).await;
    let port = s
        .url
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .to_string();
    for var in ["PORT", "STRATA_PORT"] {
        let env = vec![(var.to_string(), port.clone())];
        let (ok, out) = strata_async(owned(&["ready"]), env.clone()).await;
        assert!(ok && out.contains("ready"), "{var}: {out}");
        let (ok, out) = strata_async(owned(&["partitions", "app/c", "--json"]), env).await;
        assert!(ok && out.contains("\"partitions\""), "{var}: {out}");
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_export_leaves_no_file_and_a_good_one_appears_whole() {
    let s = with_container(json!({"paths": ["/t"], "kind": "Hash", "version": 2})).await;
    let dir = TempDir::new("cli-export");
    let out = dir.0.join("backup.jsonl");
    let path = out.to_str().unwrap().to_string();
    let (ok, text) = strata_async(
        owned(&["export", "--from", &s.url, "--out", &path, "app/nope"]),
        vec![],
    )
    .await;
    assert!(!ok && text.contains("nope"), "{text}");
    let left: Vec<_> = std::fs::read_dir(&dir.0).unwrap().collect();
    assert!(left.is_empty(), "nothing left behind: {left:?}");
    let (ok, text) = strata_async(
        owned(&["export", "--from", &s.url, "--out", &path, "app/c"]),
        vec![],
    )
    .await;
    assert!(ok, "{text}");
    assert!(std::fs::read_to_string(&out)
        .unwrap()
        .contains("\"container\""));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_refuses_a_container_keyed_otherwise() {
    let s = with_container(json!({"paths": ["/t"], "kind": "Hash", "version": 2})).await;
    for i in 0..20 {
        let r = s
            .create(
                "app",
                "c",
                &json!([format!("t{i}")]),
                json!({"id": format!("i{i}"), "t": format!("t{i}")}),
            )
            .await;
        assert!(r.status.is_success(), "{r:?}");
    }
    let dir = TempDir::new("cli-import");
    let file = dir.0.join("c.jsonl").to_str().unwrap().to_string();
    let (ok, text) = strata_async(
        owned(&["export", "--from", &s.url, "--out", &file, "app/c"]),
        vec![],
    )
    .await;
    assert!(ok, "{text}");

    // Another server where app/c exists, keyed by /tenant/user.
    let other =
        with_container(json!({"paths": ["/tenant", "/user"], "kind": "MultiHash", "version": 2}))
            .await;
    let (ok, text) = strata_async(
        owned(&["import", "--to", &other.url, "--in", &file]),
        vec![],
    )
    .await;
    assert!(!ok, "{text}");
    assert!(
        text.contains("container app/c exists with the partition key /tenant,/user (MultiHash v2), but the export's is /t (Hash v2)"),
        "{text}"
    );
    let docs = other
        .request(Method::GET, "/dbs/app/colls/c/docs", &[], None)
        .await;
    assert_eq!(docs.json["_count"], 0, "nothing imported: {docs:?}");

    // Keyed the same: the import goes in.
    let (ok, text) = strata_async(owned(&["import", "--to", &s.url, "--in", &file]), vec![]).await;
    assert!(ok && text.contains("imported 20"), "{text}");
    other.stop().await;
    s.stop().await;
}

/// A strata process, killed when dropped (also when a test fails half way).
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts strata with `args` (and `env`) and reads its stdout up to the `Started` line, as a
/// container's log would show it; the process is returned running.
fn banner_of(args: &[&str], env: &[(&str, &str)]) -> (Running, String) {
    use std::io::{BufRead, BufReader};
    let mut child = Running(
        Command::new(env!("CARGO_BIN_EXE_strata-test-server"))
            .args(args)
            .envs(env.iter().copied())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut text = String::new();
    let mut out = BufReader::new(child.0.stdout.take().unwrap());
    loop {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 {
            break;
        }
        text.push_str(&line);
        if line.trim_end().ends_with("Started") {
            break;
        }
    }
    (child, text)
}

/// The banner meets each Testcontainers module's wait strategy, checked as the module checks
/// it: Java matches every log line (with its line ending) against `.*Started\r\n$`; Python
/// searches the whole log for `Started\s*$`; Node waits for a line holding `Now listening on:
/// `. Listening on every interface, it names an address a client can connect to.
#[test]
fn the_banner_meets_the_testcontainers_wait_strategies() {
    let args = [
        "--in-memory",
        "--host",
        "0.0.0.0",
        "--port",
        "0",
        "--log",
        "warn",
    ];
    let (child, text) = banner_of(&args, &[]);
    drop(child);
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    // Java: some line, line ending included, is `.*Started\r\n`.
    assert!(lines.iter().any(|l| l.ends_with("Started\r\n")), "{text:?}");
    // Python: `re.search("Started\\s*$", log)` — `$` without MULTILINE is the log's end.
    assert!(text.trim_end().ends_with("Started"), "{text:?}");
    // Node: a line containing `Now listening on: `, naming a reachable address.
    let listening = lines
        .iter()
        .find_map(|l| l.strip_prefix("Now listening on: "))
        .unwrap_or_else(|| panic!("no 'Now listening on: ' line: {text}"));
    assert!(listening.starts_with("http://127.0.0.1:"), "{text}");
    let endpoint = lines
        .iter()
        .find(|l| l.trim_start().starts_with("endpoint"));
    assert!(endpoint.is_some_and(|l| !l.contains("0.0.0.0")), "{text}");
}

/// Over TLS, as the modules then reach it: .NET's probe (an unsigned `GET /` and `GET
/// /_explorer/emulator.pem`, certificate unchecked), Java's download of that PEM (one
/// `BEGIN CERTIFICATE` block it parses), Python's wait for `/_explorer/index.html` and its copy
/// of the file the image keeps where the official emulator keeps `emulator.pem`
/// (`--cert-copy`), with the variables the Python module sets.
#[tokio::test]
async fn the_tls_contracts_of_the_testcontainers_modules() {
    let dir = TempDir::new("tc-tls");
    let copy = dir.0.join("CosmosDBEmulator").join("emulator.pem");
    let data = dir.0.join("data");
    let args = [
        "--tls",
        "--port",
        "0",
        "--log",
        "warn",
        "--data-dir",
        data.to_str().unwrap(),
        "--cert-copy",
        copy.to_str().unwrap(),
    ];
    let env = [
        ("AZURE_COSMOS_EMULATOR_PARTITION_COUNT", "None"),
        ("AZURE_COSMOS_EMULATOR_ENABLE_DATA_PERSISTENCE", "True"),
        ("AZURE_COSMOS_EMULATOR_IP_ADDRESS_OVERRIDE", "127.0.0.2"),
    ];
    let (_child, text) = banner_of(&args, &env);
    let url = text
        .lines()
        .find_map(|l| l.strip_prefix("Now listening on: "))
        .unwrap_or_else(|| panic!("{text}"))
        .to_string();
    let port = url
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    let base = format!("https://127.0.0.1:{port}/");
    strata_tests::crypto();
    let http = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let get = |path: &str| http.get(format!("{base}{path}")).send();
    assert_eq!(get("").await.unwrap().status(), 200, ".NET: unsigned GET /");
    let pem = get("_explorer/emulator.pem")
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        pem.matches("-----BEGIN CERTIFICATE-----").count(),
        1,
        "{pem}"
    );
    assert_eq!(
        get("_explorer/index.html").await.unwrap().status(),
        200,
        "Python: the explorer page"
    );
    let copied = std::fs::read_to_string(&copy).expect("the certificate's copy");
    assert_eq!(copied, pem, "the copy is the certificate served");
}

/// Startup failures say what failed: the address in use, the path that is not a folder, the
/// folder another strata holds.
#[test]
fn startup_failures_name_what_failed() {
    let dir = TempDir::new("startup");
    let file = dir.0.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let (ok, text) = strata(&["--data-dir", file.to_str().unwrap(), "--port", "0"], &[]);
    assert!(!ok);
    assert!(
        text.contains(&format!("cannot create the data folder {}", file.display())),
        "{text}"
    );
    let held = dir.0.join("held");
    let (mut first, _client) =
        strata_tests::spawn_server(env!("CARGO_BIN_EXE_strata-test-server"), &held);
    let (ok, text) = strata(&["--data-dir", held.to_str().unwrap(), "--port", "0"], &[]);
    assert!(!ok);
    assert!(
        text.contains(&format!(
            "the data folder {} is in use by another strata",
            held.display()
        )),
        "{text}"
    );
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port().to_string();
    let (ok, text) = strata(&["--in-memory", "--port", &port], &[]);
    assert!(!ok);
    assert!(
        text.contains(&format!(
            "cannot listen on 127.0.0.1:{port}: the address is already in use"
        )),
        "{text}"
    );
    let _ = first.kill();
    let _ = first.wait();
}

/// `strata trust` writes the certificate a TLS strata serves, and a bundle of this machine's
/// roots plus it, and prints the variables naming them; a client that trusts only what it
/// wrote verifies the server under `localhost`, and one without it is refused.
#[tokio::test]
async fn trust_writes_the_certificate_clients_then_verify() {
    let dir = TempDir::new("trust");
    let s = TestServer::start_with(strata_tests::Options {
        tls: true,
        data_dir: Some(dir.0.join("data")),
        ..Default::default()
    })
    .await;
    let port = s
        .url
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    let out = dir.0.join("trust");
    let endpoint = format!("https://127.0.0.1:{port}/");
    let (ok, text) = strata_async(
        owned(&[
            "trust",
            "--endpoint",
            &endpoint,
            "--dir",
            out.to_str().unwrap(),
            "--format",
            "env",
        ]),
        vec![],
    )
    .await;
    assert!(ok, "{text}");
    let bundle = out.join("trust-bundle.pem");
    assert!(
        text.contains(&format!("SSL_CERT_FILE={}", bundle.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!("REQUESTS_CA_BUNDLE={}", bundle.display())),
        "{text}"
    );
    let cert = std::fs::read(out.join("strata.pem")).unwrap();
    assert!(std::fs::read_to_string(&bundle)
        .unwrap()
        .ends_with(std::str::from_utf8(&cert).unwrap()));
    let url = format!("https://localhost:{port}/_strata/ready");
    strata_tests::crypto();
    let verifying = |roots: Option<&[u8]>| {
        let only = roots.map(|pem| reqwest::Certificate::from_pem(pem).unwrap());
        reqwest::Client::builder()
            .tls_certs_only(only)
            .build()
            .unwrap()
    };
    let r = verifying(Some(&cert))
        .get(&url)
        .send()
        .await
        .expect("verified");
    assert_eq!(r.status(), 200);
    assert!(
        verifying(None).get(&url).send().await.is_err(),
        "unverifiable without it"
    );
    // Over plain HTTP there is nothing to trust, and it says so.
    let (ok, text) = strata_async(
        owned(&[
            "trust",
            "--endpoint",
            &format!("http://127.0.0.1:{}/", closed_port()),
        ]),
        vec![],
    )
    .await;
    assert!(
        !ok && text.contains("no strata answers over HTTPS"),
        "{text}"
    );
    s.stop().await;
}

/// The image's own environment (the `ENV` of the Dockerfile, its folders moved into a temporary
/// one): strata starts over TLS on every interface, copies its certificate to the file the
/// Python module copies out of the container, and prints the lines the modules wait for.
#[tokio::test]
async fn the_images_environment_meets_the_contracts() {
    let dockerfile =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Dockerfile")).unwrap();
    let env_block: String = dockerfile
        .split("\nENV ")
        .nth(1)
        .expect("an ENV instruction")
        .lines()
        .take_while(|l| l.trim_end().ends_with('\\') || !l.trim().is_empty())
        .map(|l| l.trim().trim_end_matches('\\').trim().to_string())
        .take_while(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let dir = TempDir::new("image-env");
    let root = dir.0.to_str().unwrap().to_string();
    let vars: Vec<(String, String)> = env_block
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| {
            let v = if v.starts_with('/') {
                format!("{root}{v}")
            } else {
                v.to_string()
            };
            (k.to_string(), v)
        })
        .collect();
    let get = |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(get("PROTOCOL").as_deref(), Some("https"), "{env_block}");
    let copy = get("STRATA_CERT_COPY").expect("the image names where the certificate is copied");
    assert!(copy.ends_with(
        "/tmp/cosmos/appdata/.system/profiles/Client/AppData/Local/CosmosDBEmulator/emulator.pem"
    ));
    let mut env: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    env.push(("STRATA_PORT", "0"));
    let (child, text) = banner_of(&["--log", "warn"], &env);
    drop(child);
    assert!(
        text.contains("Now listening on: https://127.0.0.1:"),
        "{text}"
    );
    assert!(text.ends_with("Started\r\n"), "{text:?}");
    let pem = std::fs::read_to_string(&copy).expect("the certificate's copy");
    assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
}
