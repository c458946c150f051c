//! The official JavaScript SDK (`@azure/cosmos`, pinned in `tests/js/package.json`) against
//! strata: bulk execution over a hierarchical key while partitions split, and the server-side
//! script API (stored procedures, triggers, UDFs), resource tokens, and vector search across
//! partitions.

use std::path::{Path, PathBuf};
use strata_server::store::container::Limits;
use strata_tests::{Options, TestServer};

fn js_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("js")
}

/// Installs the pinned SDK with npm when it is missing (CI installs it up front).
fn ensure_sdk() {
    strata_tests::npm_ci(&js_dir(), "@azure/cosmos");
}

/// Runs one of the `tests/js` programs against `url`; returns what it printed (it must exit
/// successfully and print "ok").
async fn run_node(script: &'static str, url: &str) -> String {
    let env = vec![
        ("STRATA_ENDPOINT".to_string(), url.to_string()),
        (
            "STRATA_KEY".to_string(),
            strata_query::protocol::EMULATOR_KEY.to_string(),
        ),
    ];
    let (ok, text) = strata_tests::run_node(js_dir(), script, env).await;
    assert!(ok, "{script}: {text}");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_bulk_over_a_hierarchical_key_during_splits() {
    ensure_sdk();
    // Small split threshold: 250 items of ~1.6 KB split the container while bulk runs.
    let s = TestServer::start_with(Options {
        limits: Some(Limits {
            partition_split_bytes: 128 * 1024,
            ..Limits::default()
        }),
        ..Default::default()
    })
    .await;
    let text = run_node("bulk.mjs", &s.url).await;
    let ranges: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("partition key ranges: "))
        .and_then(|n| n.trim().parse().ok())
        .expect("the script reports the ranges");
    assert!(ranges > 1, "the container split while bulk ran: {text}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_stored_procedures_triggers_and_udfs() {
    ensure_sdk();
    let s = TestServer::start().await;
    run_node("scripts.mjs", &s.url).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_resource_tokens_and_token_provider() {
    ensure_sdk();
    let s = TestServer::start().await;
    run_node("tokens.mjs", &s.url).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_vector_search_across_partitions() {
    ensure_sdk();
    // As the gateway: the SDK must merge the cross-partition top k itself.
    let s = TestServer::start_with(Options {
        gateway_compat: true,
        ..Default::default()
    })
    .await;
    run_node("vector.mjs", &s.url).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_full_text_and_hybrid_search_across_partitions() {
    ensure_sdk();
    // As the gateway: the SDK gathers the statistics and fuses the ranks itself.
    let s = TestServer::start_with(Options {
        gateway_compat: true,
        ..Default::default()
    })
    .await;
    run_node("hybrid.mjs", &s.url).await;
    s.stop().await;
}
