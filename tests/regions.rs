//! `--regions`: one account served from several ports over one store. The account read from
//! any region lists every region with its own port; a single-write account refuses writes
//! outside its write region (403/3) until a failover moves it; faults set through
//! `/_strata/regions` answer 503, 403/3, or 408 after a hold, and add latency, while strata's
//! own endpoints stay reachable; bad control requests get Cosmos-shaped errors.

use reqwest::Method;
use serde_json::json;
use strata_server::regions::RegionsConfig;
use strata_tests::{Client, Options, TestServer};

async fn two_regions(multi_write: bool) -> (TestServer, Client) {
    let s = TestServer::start_with(Options {
        regions: Some(RegionsConfig::parse("West US,East US", multi_write).unwrap()),
        ..Default::default()
    })
    .await;
    let east = s.running.as_ref().unwrap().regions[1];
    let east = Client::new(&format!("http://localhost:{}/", east.port()));
    (s, east)
}

fn names(v: &serde_json::Value) -> Vec<(String, String)> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|l| {
            (
                l["name"].as_str().unwrap_or_default().to_string(),
                l["databaseAccountEndpoint"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn each_region_serves_the_same_store_and_only_the_write_region_writes() {
    let (s, east) = two_regions(false).await;
    let ports: Vec<u16> = s
        .running
        .as_ref()
        .unwrap()
        .regions
        .iter()
        .map(|a| a.port())
        .collect();
    assert_eq!(ports.len(), 2);
    for c in [&*s, &east] {
        let a = c.get("/", &[]).await;
        assert_eq!(a.status, 200, "{a:?}");
        let w = names(&a.json["writableLocations"]);
        let r = names(&a.json["readableLocations"]);
        assert_eq!(
            w,
            vec![("West US".into(), format!("http://127.0.0.1:{}/", ports[0]))]
        );
        assert_eq!(
            r[1],
            ("East US".into(), format!("http://127.0.0.1:{}/", ports[1]))
        );
        assert_eq!(a.json["enableMultipleWriteLocations"], false);
    }
    s.setup("d", "c", json!({"paths": ["/pk"], "kind": "Hash"}))
        .await;
    let r = s
        .create("d", "c", &json!(["a"]), json!({"id": "1", "pk": "a"}))
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    // The read region reads what the write region wrote, and refuses writes.
    let pk = [("x-ms-documentdb-partitionkey", r#"["a"]"#)];
    assert_eq!(east.get("/dbs/d/colls/c/docs/1", &pk).await.status, 200);
    let r = east
        .create("d", "c", &json!(["a"]), json!({"id": "2", "pk": "a"}))
        .await;
    assert_eq!((r.status.as_u16(), r.substatus()), (403, Some(3)), "{r:?}");
    assert!(
        r.json["message"]
            .as_str()
            .unwrap_or_default()
            .contains("East US"),
        "{r:?}"
    );
    let r = east.post("/dbs", &[], json!({"id": "d2"})).await;
    assert_eq!((r.status.as_u16(), r.substatus()), (403, Some(3)), "{r:?}");
    // A failover moves the write region: East US writes, West US refuses, and the account
    // lists East US first.
    let r = east
        .post("/_strata/regions/East%20US/failover", &[], json!({}))
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json["regions"][1]["writable"], true);
    let r = east
        .create("d", "c", &json!(["a"]), json!({"id": "2", "pk": "a"}))
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    let r = s
        .create("d", "c", &json!(["a"]), json!({"id": "3", "pk": "a"}))
        .await;
    assert_eq!((r.status.as_u16(), r.substatus()), (403, Some(3)), "{r:?}");
    let a = s.get("/", &[]).await;
    assert_eq!(names(&a.json["writableLocations"])[0].0, "East US");
    assert_eq!(names(&a.json["readableLocations"])[0].0, "East US");
    s.stop().await;
}

#[tokio::test]
async fn faults_answer_as_a_failing_region_and_can_always_be_cleared() {
    let (s, east) = two_regions(false).await;
    s.setup("d", "c", json!({"paths": ["/pk"], "kind": "Hash"}))
        .await;
    let s = &s;
    let fault = |body| async move {
        let r = s
            .request(Method::PUT, "/_strata/regions/East%20US", &[], Some(body))
            .await;
        assert_eq!(r.status, 200, "{r:?}");
    };
    fault(json!({"kind": "unavailable"})).await;
    let r = east.get("/dbs/d", &[]).await;
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(r.json["code"], "ServiceUnavailable", "{r:?}");
    assert_eq!(east.get("/", &[]).await.status, 503);
    // The other region serves; strata's own endpoints in the failed one too.
    assert_eq!(s.get("/dbs/d", &[]).await.status, 200);
    let r = east.get("/_strata/regions", &[]).await;
    assert_eq!(
        r.json["regions"][1]["fault"]["kind"], "unavailable",
        "{r:?}"
    );
    // A timeout holds the request, then answers 408.
    fault(json!({"kind": "timeout", "holdMs": 300})).await;
    let t = std::time::Instant::now();
    let r = east.get("/dbs/d", &[]).await;
    assert_eq!(r.status, 408, "{r:?}");
    assert!(t.elapsed() >= std::time::Duration::from_millis(300));
    // Latency delays and serves.
    fault(json!({"latencyMs": 200})).await;
    let t = std::time::Instant::now();
    assert_eq!(east.get("/dbs/d", &[]).await.status, 200);
    assert!(t.elapsed() >= std::time::Duration::from_millis(200));
    // write-forbidden refuses writes in the write region too, and serves reads.
    let r = s
        .request(
            Method::PUT,
            "/_strata/regions/West%20US",
            &[],
            Some(json!({"kind": "write-forbidden"})),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let r = s
        .create("d", "c", &json!(["a"]), json!({"id": "1", "pk": "a"}))
        .await;
    assert_eq!((r.status.as_u16(), r.substatus()), (403, Some(3)), "{r:?}");
    assert_eq!(s.get("/dbs/d", &[]).await.status, 200);
    // Bad control requests.
    let put = |path: &'static str, body| async move {
        s.request(Method::PUT, path, &[], Some(body)).await
    };
    let r = put("/_strata/regions/Mars", json!({})).await;
    assert_eq!(r.status, 404, "{r:?}");
    let r = put("/_strata/regions/East%20US", json!({"kind": "flaky"})).await;
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.json["message"]
        .as_str()
        .unwrap_or_default()
        .contains("unavailable"));
    let r = put(
        "/_strata/regions/East%20US",
        json!({"latencyMs": 10_000_000}),
    )
    .await;
    assert_eq!(r.status, 400, "{r:?}");
    let r = s
        .request(Method::DELETE, "/_strata/regions", &[], None)
        .await;
    assert_eq!(r.status, 405, "{r:?}");
}

#[tokio::test]
async fn a_multi_write_account_writes_in_every_region() {
    let (s, east) = two_regions(true).await;
    let a = east.get("/", &[]).await;
    assert_eq!(a.json["enableMultipleWriteLocations"], true);
    assert_eq!(names(&a.json["writableLocations"]).len(), 2);
    s.setup("d", "c", json!({"paths": ["/pk"], "kind": "Hash"}))
        .await;
    let r = east
        .create("d", "c", &json!(["a"]), json!({"id": "1", "pk": "a"}))
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    let r = east
        .post("/_strata/regions/West%20US/failover", &[], json!({}))
        .await;
    assert_eq!(r.status, 400, "{r:?}");
    s.stop().await;
}

/// `--region-hosts`: regions reached and advertised by host name on one port, as the SDKs'
/// `LocationCache.GetLocationalEndpoint` names them (`localhost` → `localhost-eastus`).
#[tokio::test]
async fn regions_are_reached_by_host_name_under_region_hosts() {
    let s = TestServer::start_with(Options {
        regions: Some(RegionsConfig {
            by_host: true,
            ..RegionsConfig::parse("West US,East US", false).unwrap()
        }),
        ..Default::default()
    })
    .await;
    let port = s.running.as_ref().unwrap().regions[0].port();
    let host = |name: &str| format!("{name}:{port}");
    let (west, east) = (host("localhost-westus"), host("localhost-eastus"));
    let a = s.get("/", &[("host", &host("localhost"))]).await;
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(
        names(&a.json["readableLocations"]),
        vec![
            ("West US".into(), format!("http://{west}/")),
            ("East US".into(), format!("http://{east}/"))
        ]
    );
    // Read through a region's name, the account names the regions alike.
    let a = s.get("/", &[("host", &east)]).await;
    assert_eq!(
        names(&a.json["writableLocations"]),
        vec![("West US".into(), format!("http://{west}/"))]
    );
    s.setup("d", "c", json!({"paths": ["/pk"], "kind": "Hash"}))
        .await;
    let create = |h: String, id: &str| {
        let doc = json!({"id": id, "pk": "a"});
        let s = &s;
        async move {
            let pk = ("x-ms-documentdb-partitionkey", r#"["a"]"#);
            s.post("/dbs/d/colls/c/docs", &[pk, ("host", &h)], doc)
                .await
        }
    };
    // East US, reached by its name on West US's port, is a read region: 403/3.
    let r = create(east.clone(), "1").await;
    assert_eq!((r.status.as_u16(), r.substatus()), (403, Some(3)), "{r:?}");
    let r = create(west.clone(), "1").await;
    assert_eq!(r.status.as_u16(), 201, "{r:?}");
    assert_eq!(
        r.header("content-location"),
        Some(format!("http://{west}/dbs/d/colls/c/docs").as_str())
    );
}

/// With per-partition automatic failover (`--per-partition-failover`), a single-write account
/// advertises `enablePerPartitionFailoverBehavior`; its read region refuses a write 403/3
/// while the write region is healthy (the partition has not failed over: the Python SDK's
/// `test_ppaf_partition_info_cache_and_routing` expects that refusal from the region its
/// injected error moved the write to), and takes it once the write region fails writes (the
/// service moves the partition's writes to the next region). Without it, always 403/3.
#[tokio::test]
async fn a_read_region_takes_writes_once_the_write_region_fails_under_per_partition_failover() {
    for ppaf in [false, true] {
        let s = TestServer::start_with(Options {
            regions: Some(RegionsConfig {
                per_partition_failover: ppaf,
                ..RegionsConfig::parse("West US,East US", false).unwrap()
            }),
            ..Default::default()
        })
        .await;
        let account = s.get("/", &[]).await;
        assert_eq!(account.json["enablePerPartitionFailoverBehavior"], ppaf);
        s.setup("d", "c", json!({"paths": ["/pk"], "kind": "Hash"}))
            .await;
        let east = s.running.as_ref().unwrap().regions[1];
        let east = Client::new(&format!("http://localhost:{}/", east.port()));
        let create = |id: &'static str| {
            let east = &east;
            async move {
                east.post(
                    "/dbs/d/colls/c/docs",
                    &[("x-ms-documentdb-partitionkey", r#"["a"]"#)],
                    json!({"id": id, "pk": "a"}),
                )
                .await
            }
        };
        let r = create("1").await;
        assert_eq!((r.status.as_u16(), r.substatus()), (403, Some(3)), "{r:?}");
        for kind in ["unavailable", "write-forbidden"] {
            let r = s
                .request(
                    Method::PUT,
                    "/_strata/regions/West%20US",
                    &[],
                    Some(json!({"kind": kind})),
                )
                .await;
            assert_eq!(r.status, 200, "{r:?}");
            let r = create(if kind == "unavailable" { "2" } else { "3" }).await;
            if ppaf {
                assert_eq!(r.status.as_u16(), 201, "{kind}: {r:?}");
            } else {
                assert_eq!((r.status.as_u16(), r.substatus()), (403, Some(3)), "{r:?}");
            }
        }
        // Healthy again: the partition's writes are back in the write region.
        let r = s
            .request(
                Method::PUT,
                "/_strata/regions/West%20US",
                &[],
                Some(json!({})),
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
        let r = create("4").await;
        assert_eq!((r.status.as_u16(), r.substatus()), (403, Some(3)), "{r:?}");
        s.stop().await;
    }
}
