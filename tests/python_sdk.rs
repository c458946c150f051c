//! The official Python SDK (`azure-cosmos`, unmodified) against strata.

use strata_tests::python::{run_script, testdata};
use strata_tests::{Options, TempDir, TestServer};

async fn script(server: &TestServer, name: &'static str, env: Vec<(String, String)>) -> String {
    let url = server.url.clone();
    tokio::task::spawn_blocking(move || {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        run_script(name, &url, &env)
    })
    .await
    .expect("python task")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crud_on_hierarchical_container() {
    let s = TestServer::start().await;
    script(&s, "crud_hpk.py", vec![]).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crud_over_tls_with_durable_storage() {
    let dir = TempDir::new("tls");
    let s = TestServer::start_with(Options {
        tls: true,
        data_dir: Some(dir.0.clone()),
        ..Default::default()
    })
    .await;
    assert!(s.url.starts_with("https://"), "{}", s.url);
    script(&s, "crud_hpk.py", vec![]).await;
    s.stop().await;
    assert!(
        dir.0.join("tls-cert.pem").exists(),
        "the certificate is kept in the data dir"
    );
}

/// Batch, patch, concurrency, TTL, delete-by-partition-key and change feed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_patch_ttl_and_change_feed() {
    let s = TestServer::start().await;
    script(&s, "data_modification.py", vec![]).await;
    s.stop().await;
}

/// Queries that are halfway through their pages when partitions split.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_survive_partition_splits() {
    let s = TestServer::start_with(Options {
        limits: Some(strata_server::store::container::Limits {
            partition_split_bytes: 16 * 1024,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await;
    let out = script(&s, "split_query.py", vec![]).await;
    assert!(out.contains("ok"), "{out}");
    s.stop().await;
}

/// Query advice, as the SDK's own (skipped) end-to-end test asks for it: each rule's id on the
/// first page, decoded by the SDK into its message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_reads_query_advice() {
    let s = TestServer::start().await;
    let out = script(&s, "query_advice.py", vec![]).await;
    assert!(out.contains("ok"), "{out}");
    s.stop().await;
}

/// The documented query cases (tests/data/query-cases.json) through the official SDK.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documented_query_cases() {
    let s = TestServer::start().await;
    let cases = testdata().join("run_query_cases.py");
    let out = script(
        &s,
        "query_cases.py",
        vec![("STRATA_QUERY_CASES".into(), cases.display().to_string())],
    )
    .await;
    assert!(out.contains(" passed, 0 failed"), "{out}");
    s.stop().await;
}

/// Resource tokens, tenant-scoped on a hierarchical key, in both of the SDK's client forms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_tokens_scope_a_tenant() {
    let s = TestServer::start().await;
    let out = script(&s, "resource_tokens.py", vec![]).await;
    assert!(out.contains("ok"), "{out}");
    s.stop().await;
}

/// The Entra ID example of `docs/security.md`: a Data Reader identity reads and is denied a write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_identity_is_denied_a_write() {
    // The SDKs send bearer tokens over HTTPS only.
    let dir = TempDir::new("rbac");
    let s = TestServer::start_with(Options {
        tls: true,
        data_dir: Some(dir.0.clone()),
        ..Default::default()
    })
    .await;
    let policy = serde_json::json!({"roleAssignments": [{"id": "r", "principalId": "reader-oid", "scope": "/",
        "roleDefinitionId": "00000000-0000-0000-0000-000000000001"}]});
    let r = s
        .request(reqwest::Method::PUT, "/_strata/rbac", &[], Some(policy))
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let out = script(&s, "rbac_reader.py", vec![]).await;
    assert!(
        out.contains("denied: 403 5301") && out.contains("ok"),
        "{out}"
    );
    s.stop().await;
}

/// The failover example of `docs/regions.md`: reads leave a failed region, writes follow a failover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_fails_over_between_regions() {
    let s = TestServer::start_with(Options {
        regions: Some(
            strata_server::regions::RegionsConfig::parse("West US,East US", false)
                .expect("regions"),
        ),
        ..Default::default()
    })
    .await;
    let out = script(&s, "regions_failover.py", vec![]).await;
    assert!(out.contains("ok"), "{out}");
    s.stop().await;
}
