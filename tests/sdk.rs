//! strata-sdk against an in-process strata: every method, typed items, automatic key
//! extraction for 1-, 2- and 3-level keys, prefix queries, paging resumed from a serialized
//! token, batches, patch, the change feed across splits, throughput, error mapping and the
//! retry policy.

use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_sdk::{
    ChangeFeedMode, ChangeFeedOptions, ChangeFeedStart, ContainerProperties, CosmosClient,
    ItemOptions, PartitionKey, PartitionKeyBuilder, PartitionKeyDefinition, PatchOperations,
    PriorityLevel, Query, QueryOptions, RetryOptions, Throughput, TransactionalBatch, EMULATOR_KEY,
};
use strata_server::store::container::Limits;
use strata_tests::{Options, TestServer};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Event {
    id: String,
    #[serde(rename = "TenantId")]
    tenant: String,
    #[serde(rename = "UserId", skip_serializing_if = "Option::is_none")]
    user: Option<String>,
    #[serde(rename = "SessionId", skip_serializing_if = "Option::is_none")]
    session: Option<String>,
    n: i64,
}

fn ev(id: &str, t: &str, u: &str, s: &str, n: i64) -> Event {
    Event {
        id: id.into(),
        tenant: t.into(),
        user: Some(u.into()),
        session: Some(s.into()),
        n,
    }
}

fn hpk() -> PartitionKeyDefinition {
    PartitionKeyDefinition::hierarchical(["/TenantId", "/UserId", "/SessionId"]).unwrap()
}

#[tokio::test]
async fn databases_containers_and_items() {
    let s = TestServer::start().await;
    let client = CosmosClient::new(&s.url, EMULATOR_KEY).unwrap();
    let db = client.create_database("app").await.unwrap();
    assert!(client
        .create_database("app")
        .await
        .unwrap_err()
        .is_conflict());
    let db2 = client.create_database_if_not_exists("app").await.unwrap();
    assert_eq!(db2.read().await.unwrap().id, "app");
    assert_eq!(client.list_databases().await.unwrap().len(), 1);

    let events = db
        .create_container(ContainerProperties::new("events", hpk()))
        .await
        .unwrap();
    assert_eq!(
        db.list_containers().await.unwrap()[0]
            .partition_key
            .paths()
            .len(),
        3
    );
    // Automatic extraction of the full 3-level key from a typed item.
    let r = events
        .create_item(&ev("1", "contoso", "alice", "s1", 1))
        .await
        .unwrap();
    assert_eq!(r.status, 201);
    assert!(
        r.etag.is_some()
            && r.request_charge > 0.0
            && r.session_token.is_some()
            && r.activity_id.is_some()
    );
    assert_eq!(r.item.unwrap().n, 1);
    let pk = PartitionKeyBuilder::new()
        .add("contoso")
        .add("alice")
        .add("s1")
        .build();
    let read = events.read_item::<Event>("1", pk.clone()).await.unwrap();
    assert_eq!(read.item.unwrap(), ev("1", "contoso", "alice", "s1", 1));
    // Errors map to status checks.
    let e = events
        .read_item::<Event>("nope", pk.clone())
        .await
        .unwrap_err();
    assert!(
        e.is_not_found() && e.activity_id().is_some() && !e.message().is_empty(),
        "{e}"
    );
    let e = events
        .create_item(&ev("1", "contoso", "alice", "s1", 1))
        .await
        .unwrap_err();
    assert!(e.is_conflict());
    // A prefix is refused by point operations with a clear error, before any request.
    let prefix = PartitionKeyBuilder::new().add("contoso").build();
    let e = events
        .read_item::<Event>("1", prefix.clone())
        .await
        .unwrap_err();
    assert!(e.message().contains("full partition key"), "{e}");
    // Optimistic concurrency.
    let etag = read.etag.clone();
    let mut changed = ev("1", "contoso", "alice", "s1", 2);
    events
        .replace_item(
            "1",
            &changed,
            ItemOptions {
                if_match: etag.clone(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    changed.n = 3;
    let e = events
        .replace_item(
            "1",
            &changed,
            ItemOptions {
                if_match: etag,
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(e.is_precondition_failed());
    // Upsert and delete.
    let r = events
        .upsert_item(&ev("2", "contoso", "bob", "s1", 5), Default::default())
        .await
        .unwrap();
    assert_eq!(r.status, 201);
    let r = events
        .upsert_item(&ev("2", "contoso", "bob", "s1", 6), Default::default())
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    let bob = PartitionKeyBuilder::new()
        .add("contoso")
        .add("bob")
        .add("s1")
        .build();
    events
        .delete_item("2", bob.clone(), Default::default())
        .await
        .unwrap();
    assert!(events
        .delete_item("2", bob, Default::default())
        .await
        .unwrap_err()
        .is_not_found());

    // 1- and 2-level containers, and an absent level.
    let one = db
        .create_container(ContainerProperties::new(
            "one",
            PartitionKeyDefinition::new("/TenantId"),
        ))
        .await
        .unwrap();
    one.create_item(&ev("x", "t", "u", "s", 0)).await.unwrap();
    assert_eq!(
        one.read_item::<Event>("x", "t")
            .await
            .unwrap()
            .item
            .unwrap()
            .tenant,
        "t"
    );
    let two = db
        .create_container(ContainerProperties::new(
            "two",
            PartitionKeyDefinition::hierarchical(["/TenantId", "/UserId"]).unwrap(),
        ))
        .await
        .unwrap();
    two.create_item(&ev("y", "t", "u", "s", 0)).await.unwrap();
    assert!(two
        .read_item::<Event>("y", PartitionKeyBuilder::new().add("t").add("u").build())
        .await
        .is_ok());
    let partial = Event {
        id: "p".into(),
        tenant: "t".into(),
        user: None,
        session: None,
        n: 0,
    };
    // An item without every level of a hierarchical key is refused, as by the service
    // (400 / 1001 partition key mismatch).
    let e = events.create_item(&partial).await.unwrap_err();
    assert_eq!(
        (e.status(), e.sub_status()),
        (Some(400), Some(1001)),
        "{e:?}"
    );
    // Other key kinds.
    let nums = db
        .create_container(ContainerProperties::new(
            "nums",
            PartitionKeyDefinition::new("/k"),
        ))
        .await
        .unwrap();
    nums.create_item(&serde_json::json!({"id": "a", "k": 5}))
        .await
        .unwrap();
    nums.create_item(&serde_json::json!({"id": "b", "k": null}))
        .await
        .unwrap();
    nums.create_item(&serde_json::json!({"id": "c"}))
        .await
        .unwrap();
    assert!(nums.read_item::<serde_json::Value>("a", 5).await.is_ok());
    assert!(nums
        .read_item::<serde_json::Value>("b", PartitionKey::NULL)
        .await
        .is_ok());
    assert!(nums
        .read_item::<serde_json::Value>("c", PartitionKey::NONE)
        .await
        .is_ok());

    events.delete().await.unwrap();
    assert!(events.read().await.unwrap_err().is_not_found());
    db.delete().await.unwrap();
    assert!(client.list_databases().await.unwrap().is_empty());
    s.stop().await;
}

#[tokio::test]
async fn queries_prefixes_and_resumed_paging() {
    let s = TestServer::start_with(Options {
        limits: Some(Limits {
            initial_partitions: Some(4),
            ..Limits::default()
        }),
        ..Default::default()
    })
    .await;
    let client = CosmosClient::new(&s.url, EMULATOR_KEY).unwrap();
    let db = client.create_database("q").await.unwrap();
    let events = db
        .create_container(ContainerProperties::new("events", hpk()))
        .await
        .unwrap();
    for t in 0..3 {
        for u in 0..4 {
            for x in 0..3 {
                let e = ev(
                    &format!("{t}{u}{x}"),
                    &format!("t{t}"),
                    &format!("u{u}"),
                    &format!("s{x}"),
                    t * 100 + u * 10 + x,
                );
                events.create_item(&e).await.unwrap();
            }
        }
    }
    // Full key, prefix and fan-out, with the route each page reports.
    let full = PartitionKeyBuilder::new()
        .add("t1")
        .add("u2")
        .add("s0")
        .build();
    let mut pages = std::pin::pin!(events.query_items::<Event>(
        "SELECT * FROM c",
        QueryOptions {
            partition_key: Some(full),
            ..Default::default()
        }
    ));
    let page = pages.try_next().await.unwrap().unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.route.as_ref().unwrap().kind, "single");
    let tenant = PartitionKeyBuilder::new().add("t1").build();
    let rows: Vec<i64> = events
        .query_all(
            "SELECT VALUE c.n FROM c",
            QueryOptions {
                partition_key: Some(tenant),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 12);
    let q = Query::new("SELECT VALUE c.n FROM c WHERE c.UserId = @u ORDER BY c.n DESC")
        .param("@u", "u3");
    let mut pages = std::pin::pin!(events.query_items::<i64>(q.clone(), Default::default()));
    let first = pages.try_next().await.unwrap().unwrap();
    assert_eq!(first.route.as_ref().unwrap().kind, "fanout");
    assert_eq!(first.route.as_ref().unwrap().ranges.len(), 4);
    // Paging resumed from a serialized token in a fresh stream.
    let opts = QueryOptions {
        max_item_count: Some(4),
        ..Default::default()
    };
    let mut pages = std::pin::pin!(events.query_items::<i64>(q.clone(), opts.clone()));
    let p1 = pages.try_next().await.unwrap().unwrap();
    let token = p1.continuation.clone().expect("more pages");
    let stored = serde_json::to_string(&token).unwrap();
    let restored: String = serde_json::from_str(&stored).unwrap();
    let rest: Vec<i64> = events
        .query_all(
            q,
            QueryOptions {
                continuation: Some(restored),
                ..opts
            },
        )
        .await
        .unwrap();
    let mut all = p1.items.clone();
    all.extend(rest);
    assert_eq!(all, vec![232, 231, 230, 132, 131, 130, 32, 31, 30]);
    // A bad query is a 400 with a message.
    let e = events
        .query_all::<serde_json::Value>("SELECT c.value FROM c", Default::default())
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(400));
    s.stop().await;
}

#[tokio::test]
async fn batch_patch_change_feed_and_throughput() {
    let s = TestServer::start_with(Options {
        limits: Some(Limits {
            partition_split_bytes: 16 * 1024,
            ..Limits::default()
        }),
        ..Default::default()
    })
    .await;
    let client = CosmosClient::new(&s.url, EMULATOR_KEY).unwrap();
    let db = client.create_database("m").await.unwrap();
    let c = db
        .create_container(ContainerProperties::new(
            "c",
            PartitionKeyDefinition::new("/pk"),
        ))
        .await
        .unwrap();
    let doc = |id: &str, pk: &str| serde_json::json!({"id": id, "pk": pk, "n": 0});
    let r = c
        .execute_batch(
            TransactionalBatch::new("a")
                .create_item(&doc("1", "a"))
                .upsert_item(&doc("2", "a"))
                .read_item("1")
                .patch_item("2", PatchOperations::new().incr("/n", 5)),
        )
        .await
        .unwrap();
    assert!(r.is_success());
    assert_eq!(
        r.results.iter().map(|x| x.status).collect::<Vec<_>>(),
        vec![201, 201, 200, 200]
    );
    let r = c
        .execute_batch(
            TransactionalBatch::new("a")
                .create_item(&doc("3", "a"))
                .create_item(&doc("1", "a")),
        )
        .await
        .unwrap();
    assert!(!r.is_success());
    assert_eq!(r.failed_index(), Some(1));
    assert!(c
        .read_item::<serde_json::Value>("3", "a")
        .await
        .unwrap_err()
        .is_not_found());
    let p = c
        .patch_item::<serde_json::Value>(
            "2",
            "a",
            PatchOperations::new().incr("/n", 1).set("/tag", "x"),
            Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(p.item.unwrap()["n"], 6);
    let e = c
        .patch_item::<serde_json::Value>(
            "2",
            "a",
            PatchOperations::new()
                .set("/x", 1)
                .condition("FROM c WHERE c.n > 100"),
            Default::default(),
        )
        .await
        .unwrap_err();
    assert!(e.is_precondition_failed());

    // The change feed reader follows the partitions through splits.
    let mut feed = c.change_feed::<serde_json::Value>(ChangeFeedOptions {
        start: ChangeFeedStart::Beginning,
        ..Default::default()
    });
    let first = feed.next_page().await.unwrap();
    assert_eq!(first.items.len(), 2);
    for i in 0..120 {
        c.create_item(&serde_json::json!({"id": format!("f{i}"), "pk": format!("k{i}"), "pad": "z".repeat(300)})).await.unwrap();
    }
    let mut seen = std::collections::HashSet::new();
    loop {
        let page = feed.next_page().await.unwrap();
        if page.items.is_empty() {
            break;
        }
        for d in page.items {
            seen.insert(d["id"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(seen.len(), 120, "every change once, across splits");
    assert!(
        c.read_partition_key_ranges().await.unwrap().len() > 1,
        "the container split"
    );
    let token = feed.continuation();
    c.create_item(&serde_json::json!({"id": "late", "pk": "late"}))
        .await
        .unwrap();
    let mut resumed = c.change_feed::<serde_json::Value>(ChangeFeedOptions {
        continuation: Some(token),
        ..Default::default()
    });
    let page = resumed.next_page().await.unwrap();
    assert_eq!(
        page.items
            .iter()
            .map(|d| d["id"].as_str().unwrap())
            .collect::<Vec<_>>(),
        vec!["late"]
    );

    // Delete a whole logical partition.
    c.delete_all_items_by_partition_key("a").await.unwrap();
    assert!(c
        .read_item::<serde_json::Value>("1", "a")
        .await
        .unwrap_err()
        .is_not_found());

    // Throughput.
    let t = db
        .create_container_with_throughput(
            ContainerProperties::new("t", PartitionKeyDefinition::new("/pk")),
            Throughput::Manual(400),
        )
        .await
        .unwrap();
    assert_eq!(t.read_throughput().await.unwrap(), Throughput::Manual(400));
    t.replace_throughput(Throughput::Manual(11_000))
        .await
        .unwrap();
    assert_eq!(
        t.read_throughput().await.unwrap(),
        Throughput::Manual(11_000)
    );
    s.stop().await;
}

/// A scripted server: answers `status` for the first `failures` requests, then 200.
async fn scripted(status: u16, failures: u32) -> (String, Arc<AtomicU32>) {
    use axum::http::StatusCode;
    let hits = Arc::new(AtomicU32::new(0));
    let h = Arc::clone(&hits);
    let app = axum::Router::new().fallback(move || {
        let h = Arc::clone(&h);
        async move {
            let n = h.fetch_add(1, Ordering::SeqCst);
            if n < failures {
                (
                    StatusCode::from_u16(status).unwrap(),
                    r#"{"code":"X","message":"scripted"}"#.to_string(),
                )
            } else {
                (
                    StatusCode::OK,
                    r#"{"_rid":"","Databases":[],"_count":0}"#.to_string(),
                )
            }
        }
    });
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (url, hits)
}

#[tokio::test]
async fn retries_follow_the_backoff_formula() {
    let retry = RetryOptions {
        base_delay: Duration::from_millis(50),
        ..RetryOptions::default()
    };
    // 429 twice (without retry-after), then 200: waits ~backoff(1) + backoff(2) and succeeds.
    let (url, hits) = scripted(429, 2).await;
    let client = CosmosClient::builder(&url, EMULATOR_KEY)
        .retry(retry.clone())
        .build()
        .unwrap();
    let started = Instant::now();
    client.list_databases().await.unwrap();
    let took = started.elapsed();
    assert_eq!(hits.load(Ordering::SeqCst), 3);
    let min = retry.backoff(1, 0.8) + retry.backoff(2, 0.8);
    let max = retry.backoff(1, 1.2) + retry.backoff(2, 1.2) + Duration::from_millis(500);
    assert!(
        took >= min && took <= max,
        "waited {took:?}, expected between {min:?} and {max:?}"
    );
    // 503 on a read is retried too.
    let (url, hits) = scripted(503, 1).await;
    CosmosClient::builder(&url, EMULATOR_KEY)
        .retry(retry.clone())
        .build()
        .unwrap()
        .list_databases()
        .await
        .unwrap();
    assert_eq!(hits.load(Ordering::SeqCst), 2);
    // A 401 is never retried.
    let (url, hits) = scripted(401, 5).await;
    let e = CosmosClient::builder(&url, EMULATOR_KEY)
        .retry(retry.clone())
        .build()
        .unwrap()
        .list_databases()
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(401));
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    // Retries stop at max_retries.
    let (url, hits) = scripted(429, 100).await;
    let few = RetryOptions {
        max_retries: 2,
        base_delay: Duration::from_millis(5),
        ..RetryOptions::default()
    };
    let e = CosmosClient::builder(&url, EMULATOR_KEY)
        .retry(few)
        .build()
        .unwrap()
        .list_databases()
        .await
        .unwrap_err();
    assert!(e.is_throttled());
    assert_eq!(hits.load(Ordering::SeqCst), 3);
    // Connection errors are retried, then reported as transport errors.
    let dead = CosmosClient::builder("http://127.0.0.1:9/", EMULATOR_KEY)
        .retry(RetryOptions {
            max_retries: 1,
            base_delay: Duration::from_millis(5),
            ..RetryOptions::default()
        })
        .build()
        .unwrap();
    assert!(dead.list_databases().await.unwrap_err().is_transport());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_recovers_from_real_throttling() {
    let s = TestServer::start_with(Options {
        enforce_throughput: true,
        ..Default::default()
    })
    .await;
    let client = CosmosClient::new(&s.url, EMULATOR_KEY).unwrap();
    let db = client.create_database("thr").await.unwrap();
    let c = db
        .create_container_with_throughput(
            ContainerProperties::new("c", PartitionKeyDefinition::new("/pk")),
            Throughput::Manual(400),
        )
        .await
        .unwrap();
    for i in 0..200 {
        c.create_item(&serde_json::json!({"id": format!("{i}"), "pk": "hot"}))
            .await
            .unwrap();
    }
    let n: Vec<u64> = c
        .query_all("SELECT VALUE COUNT(1) FROM c", Default::default())
        .await
        .unwrap();
    assert_eq!(n, vec![200]);
    s.stop().await;
}

/// The client's throughput bucket and priority reach the server: a bucket capped on the
/// offer throttles its requests with 429 / 3212, an id outside 1–5 is refused, and a
/// Low-priority client runs while nothing else does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_sends_its_bucket_and_priority() {
    let s = TestServer::start_with(Options {
        enforce_throughput: true,
        ..Default::default()
    })
    .await;
    let client = CosmosClient::new(&s.url, EMULATOR_KEY).unwrap();
    let db = client.create_database("b").await.unwrap();
    db.create_container_with_throughput(
        ContainerProperties::new("c", PartitionKeyDefinition::new("/pk")),
        Throughput::Manual(1000),
    )
    .await
    .unwrap();
    let mut offer = s.get("/offers", &[]).await.json["Offers"][0].clone();
    offer["content"]["throughputBuckets"] = json!([{"id": 1, "maxThroughputPercentage": 10}]);
    let path = format!("/offers/{}", offer["id"].as_str().unwrap());
    let r = s
        .request(reqwest::Method::PUT, &path, &[], Some(offer))
        .await;
    assert_eq!(r.status.as_u16(), 200, "{r:?}");
    let with = |b: strata_sdk::CosmosClientBuilder| {
        b.retry(RetryOptions {
            max_retries: 0,
            ..RetryOptions::default()
        })
        .build()
        .unwrap()
        .database("b")
        .container("c")
    };
    let one = with(CosmosClient::builder(&s.url, EMULATOR_KEY).throughput_bucket(1));
    let mut throttled = None;
    for i in 0..40 {
        if let Err(e) = one
            .create_item(&json!({"id": format!("{i}"), "pk": "k"}))
            .await
        {
            throttled = Some(e);
            break;
        }
    }
    let e = throttled.expect("bucket 1 is capped at 100 RU/s");
    assert_eq!((e.status(), e.sub_status()), (Some(429), Some(3212)), "{e}");
    let bad = with(CosmosClient::builder(&s.url, EMULATOR_KEY).throughput_bucket(9));
    let e = bad.read_item::<Value>("0", "k").await.unwrap_err();
    assert_eq!(e.status(), Some(400), "{e}");
    let low = with(CosmosClient::builder(&s.url, EMULATOR_KEY).priority(PriorityLevel::Low));
    low.create_item(&json!({"id": "low", "pk": "k"}))
        .await
        .unwrap();
    s.stop().await;
}

#[tokio::test]
async fn stored_procedures_triggers_and_udfs() {
    use strata_sdk::{ExecuteOptions, Script, TriggerOperation, TriggerType};
    let s = TestServer::start().await;
    let client = CosmosClient::new(&s.url, EMULATOR_KEY).unwrap();
    let db = client.create_database("app").await.unwrap();
    let events = db
        .create_container(ContainerProperties::new("events", hpk()))
        .await
        .unwrap();
    let scripts = events.scripts();
    let created = scripts
        .create_stored_procedure(&Script::new(
            "add",
            r#"function (doc) {
                console.log("adding " + doc.id);
                var c = getContext().getCollection();
                c.createDocument(c.getSelfLink(), doc, function (err, saved) {
                    if (err) throw err;
                    getContext().getResponse().setBody(saved.id);
                });
            }"#,
        ))
        .await
        .unwrap();
    assert!(created.rid.is_some() && created.etag.is_some());
    let key = PartitionKeyBuilder::new()
        .add("contoso")
        .add("alice")
        .add("s1")
        .build();
    let doc = serde_json::to_value(ev("e1", "contoso", "alice", "s1", 1)).unwrap();
    let r = scripts
        .execute_stored_procedure::<String>(
            "add",
            key.clone(),
            std::slice::from_ref(&doc),
            ExecuteOptions {
                enable_script_logging: true,
            },
        )
        .await
        .unwrap();
    assert_eq!(r.value.as_deref(), Some("e1"));
    assert_eq!(r.log.as_deref(), Some("adding e1"));
    assert!(r.request_charge > 0.0);
    // The duplicate's 409 comes back as the error, and nothing was written.
    let err = scripts
        .execute_stored_procedure::<String>("add", key.clone(), &[doc], Default::default())
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(409), "{err}");
    // Triggers through item options.
    scripts
        .create_trigger(&Script::trigger(
            "double",
            "function () { var d = getContext().getRequest().getBody(); d.n = d.n * 2; getContext().getRequest().setBody(d); }",
            TriggerType::Pre,
            TriggerOperation::Create,
        ))
        .await
        .unwrap();
    let listed = scripts.list_triggers().await.unwrap();
    assert_eq!(listed[0].trigger_operation, Some(TriggerOperation::Create));
    let opts = ItemOptions {
        pre_triggers: vec!["double".into()],
        ..Default::default()
    };
    let r = events
        .create_item_with_options(&ev("e2", "contoso", "alice", "s1", 21), opts)
        .await
        .unwrap();
    assert_eq!(r.item.unwrap().n, 42);
    // A UDF in a query.
    scripts
        .create_user_defined_function(&Script::new("neg", "function (n) { return -n; }"))
        .await
        .unwrap();
    let rows: Vec<i64> = events
        .query_all(
            "SELECT VALUE udf.neg(c.n) FROM c ORDER BY c.n",
            QueryOptions {
                partition_key: Some(key.clone()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(rows, vec![-1, -42]);
    scripts.delete_stored_procedure("add").await.unwrap();
    assert!(scripts.list_stored_procedures().await.unwrap().is_empty());
    let err = scripts.read_stored_procedure("add").await.unwrap_err();
    assert_eq!(err.status(), Some(404));
}

#[tokio::test]
async fn users_permissions_and_a_client_built_from_resource_tokens() {
    use strata_sdk::{Permission, PermissionMode};
    let s = TestServer::start().await;
    let admin = CosmosClient::new(&s.url, EMULATOR_KEY).unwrap();
    let db = admin.create_database("app").await.unwrap();
    let events = db
        .create_container(ContainerProperties::new("events", hpk()))
        .await
        .unwrap();
    for (t, u) in [
        ("contoso", "alice"),
        ("contoso", "bob"),
        ("fabrikam", "eve"),
    ] {
        events
            .create_item(&ev(&format!("{t}-{u}"), t, u, "s1", 1))
            .await
            .unwrap();
    }
    let user = db.create_user("contoso-app").await.unwrap();
    assert_eq!(db.list_users().await.unwrap()[0].id, "contoso-app");
    let tenant = PartitionKeyBuilder::new().add("contoso").build();
    let p = user
        .create_permission(
            &Permission::new("tenant", PermissionMode::All, "dbs/app/colls/events")
                .with_partition_key(tenant.clone()),
        )
        .await
        .unwrap();
    assert_eq!(p.permission_mode, PermissionMode::All);
    let read = user
        .read_permission("tenant", Some(Duration::from_secs(600)))
        .await
        .unwrap();
    let token = read.token.expect("token");
    let client =
        CosmosClient::with_resource_tokens(&s.url, [("dbs/app/colls/events".to_string(), token)])
            .unwrap();
    let mine = client.database("app").container("events");
    // Cross-partition: only the tenant's items come back.
    let all: Vec<Event> = mine
        .query_all("SELECT * FROM c", QueryOptions::default())
        .await
        .unwrap();
    let mut ids: Vec<_> = all.iter().map(|e| e.id.as_str()).collect();
    ids.sort();
    assert_eq!(ids, ["contoso-alice", "contoso-bob"]);
    mine.create_item(&ev("contoso-carol", "contoso", "carol", "s1", 2))
        .await
        .unwrap();
    let err = mine
        .create_item(&ev("x", "fabrikam", "mallory", "s1", 3))
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(403), "{err}");
    let err = mine
        .read_item::<Event>(
            "fabrikam-eve",
            PartitionKeyBuilder::new()
                .add("fabrikam")
                .add("eve")
                .add("s1")
                .build(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(403), "{err}");
    assert_eq!(user.list_permissions().await.unwrap().len(), 1);
    user.delete_permission("tenant").await.unwrap();
    let err = mine
        .query_all::<Event>("SELECT * FROM c", QueryOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(401), "{err}");
    user.delete().await.unwrap();
    assert!(db.list_users().await.unwrap().is_empty());
}

/// Session consistency: the tokens a write returns go back with the next read, per range.
#[tokio::test]
async fn session_tokens_are_sent_back_and_connection_strings_work() {
    use axum::http::{HeaderMap, StatusCode as S};
    use std::sync::Mutex;
    let seen: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let seen2 = Arc::clone(&seen);
    let app = axum::Router::new().fallback(move |method: axum::http::Method, uri: axum::http::Uri, h: HeaderMap, body: String| {
        let seen = Arc::clone(&seen2);
        async move {
            let token = h.get("x-ms-session-token").and_then(|v| v.to_str().ok()).map(str::to_string);
            let path = uri.path().to_string();
            let mut headers = HeaderMap::new();
            let (status, body) = match (method.as_str(), path.as_str()) {
                ("GET", "/dbs/d/colls/c") => (S::OK, r#"{"id":"c","_rid":"cc","partitionKey":{"paths":["/pk"],"kind":"Hash","version":2}}"#.to_string()),
                ("POST", "/dbs/d/colls/c/docs") => {
                    headers.insert("x-ms-session-token", "0:-1#7".parse().unwrap());
                    (S::CREATED, body)
                }
                ("GET", "/dbs/d/colls/c/docs/a") => {
                    seen.lock().unwrap().push(token);
                    headers.insert("x-ms-session-token", "1:-1#9".parse().unwrap());
                    (S::OK, r#"{"id":"a","pk":"p"}"#.to_string())
                }
                _ => (S::NOT_FOUND, r#"{"code":"NotFound","message":"no"}"#.to_string()),
            };
            (status, headers, body)
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = CosmosClient::from_connection_string(&format!(
        "AccountEndpoint=http://{addr}/;AccountKey={EMULATOR_KEY};"
    ))
    .unwrap();
    let c = client.database("d").container("c");
    c.read_item::<serde_json::Value>("a", "p").await.unwrap();
    c.create_item(&serde_json::json!({"id": "a", "pk": "p"}))
        .await
        .unwrap();
    c.read_item::<serde_json::Value>("a", "p").await.unwrap();
    c.read_item::<serde_json::Value>("a", "p").await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            None,
            Some("0:-1#7,1:-1#9".to_string()),
            Some("0:-1#7,1:-1#9".to_string())
        ]
    );
    assert_eq!(c.session_token().as_deref(), Some("0:-1#7,1:-1#9"));
    // Against strata: a write's token is kept and reads carry it.
    let s = TestServer::start().await;
    let client = CosmosClient::from_connection_string(&format!(
        "AccountEndpoint={};AccountKey={EMULATOR_KEY}",
        s.url
    ))
    .unwrap();
    let db = client.create_database("app").await.unwrap();
    let events = db
        .create_container(ContainerProperties::new("events", hpk()))
        .await
        .unwrap();
    events
        .create_item(&ev("1", "t", "u", "s", 1))
        .await
        .unwrap();
    let token = events.session_token().expect("a session token");
    assert!(token.contains(":-1#"), "{token}");
    let back: Event = events
        .read_item(
            "1",
            PartitionKeyBuilder::new()
                .add("t")
                .add("u")
                .add("s")
                .build(),
        )
        .await
        .unwrap()
        .item
        .unwrap();
    assert_eq!(back.n, 1);
}

/// read_many: one query per physical partition, items in the order asked, missing ones left
/// out, across splits; the same against `--gateway-compat`.
#[tokio::test]
async fn read_many_by_id_and_key() {
    for gateway_compat in [false, true] {
        let s = TestServer::start_with(Options {
            gateway_compat,
            limits: Some(Limits {
                partition_split_bytes: 32 * 1024,
                ..Limits::default()
            }),
            ..Options::default()
        })
        .await;
        let client = CosmosClient::new(&s.url, EMULATOR_KEY).unwrap();
        let db = client.create_database("app").await.unwrap();
        let events = db
            .create_container(ContainerProperties::new("events", hpk()))
            .await
            .unwrap();
        for i in 0..150 {
            let mut e = ev(
                &format!("e{i}"),
                &format!("t{}", i % 5),
                &format!("u{}", i % 3),
                "s",
                i,
            );
            if i % 7 == 0 {
                e.id = format!("same id {}", i % 2);
            }
            events
                .upsert_item(&serde_json::json!({"pad": "p".repeat(400), "id": e.id, "TenantId": e.tenant, "UserId": e.user, "SessionId": e.session, "n": e.n}), Default::default())
                .await
                .unwrap();
        }
        let ranges = events.read_partition_key_ranges().await.unwrap().len();
        assert!(ranges > 1, "the container split");
        let key = |i: i64| {
            PartitionKeyBuilder::new()
                .add(format!("t{}", i % 5).as_str())
                .add(format!("u{}", i % 3).as_str())
                .add("s")
                .build()
        };
        let mut want = Vec::new();
        for i in (1..150).rev().step_by(4) {
            if i % 7 != 0 {
                want.push((format!("e{i}"), key(i)));
            }
        }
        want.push(("missing".to_string(), key(3)));
        // The same id under two keys is two items.
        want.push(("same id 0".to_string(), key(14)));
        want.push(("same id 1".to_string(), key(7)));
        let got: Vec<Event> = events.read_many(&want).await.unwrap();
        assert_eq!(got.len(), want.len() - 1);
        for (g, (id, _)) in got
            .iter()
            .zip(want.iter().filter(|(id, _)| id != "missing"))
        {
            assert_eq!(&g.id, id);
        }
        assert_eq!(got[got.len() - 2].n, 14);
        assert_eq!(got[got.len() - 1].n, 7);
        assert!(events.read_many::<Event>(&[]).await.unwrap().is_empty());
        let err = events
            .read_many::<Event>(&[("x".into(), PartitionKeyBuilder::new().add("t1").build())])
            .await
            .unwrap_err();
        assert!(err.to_string().contains("full partition keys"), "{err}");
        s.stop().await;
    }
}

/// Bulk: per-operation results in order, failures that do not stop the rest, every kind of
/// operation, while the container splits and under throttling.
#[tokio::test]
async fn execute_bulk_groups_by_range_and_retries() {
    use strata_sdk::{BulkOperation, BulkOptions};
    let s = TestServer::start_with(Options {
        enforce_throughput: true,
        limits: Some(Limits {
            partition_split_bytes: 64 * 1024,
            ..Limits::default()
        }),
        ..Options::default()
    })
    .await;
    let client = CosmosClient::new(&s.url, EMULATOR_KEY).unwrap();
    let db = client.create_database("app").await.unwrap();
    // 2,000 RU/s, throttled: loading 1,200 items (about 7,000 RU) is admitted against it and
    // any 429s are retried.
    let events = db
        .create_container_with_throughput(
            ContainerProperties::new("events", hpk()),
            Throughput::Manual(2_000),
        )
        .await
        .unwrap();
    let doc = |i: i64| {
        serde_json::json!({"id": format!("b{i}"), "TenantId": format!("t{}", i % 7), "UserId": format!("u{}", i % 3),
                           "SessionId": "s", "n": i, "pad": "x".repeat(500)})
    };
    let ops: Vec<BulkOperation> = (0..1200)
        .map(|i| BulkOperation::create(&doc(i)).unwrap())
        .collect();
    let r = events
        .execute_bulk(ops, BulkOptions { concurrency: 4 })
        .await
        .unwrap();
    assert_eq!(r.len(), 1200);
    let bad: Vec<_> = r.iter().filter(|x| x.status != 201).collect();
    assert!(bad.is_empty(), "{:?}", &bad[..bad.len().min(3)]);
    assert!(
        events.read_partition_key_ranges().await.unwrap().len() > 1,
        "the container split while loading"
    );
    let key = |i: i64| {
        PartitionKeyBuilder::new()
            .add(format!("t{}", i % 7).as_str())
            .add(format!("u{}", i % 3).as_str())
            .add("s")
            .build()
    };
    // Mixed: a duplicate create fails alone; reads, deletes, patches and replaces apply.
    let ops = vec![
        BulkOperation::create(&doc(5)).unwrap(),
        BulkOperation::read("b6", key(6)),
        BulkOperation::delete("b7", key(7)),
        BulkOperation::patch("b8", key(8), PatchOperations::new().incr("/n", 1000)).unwrap(),
        BulkOperation::replace("b9", &doc(9)).unwrap(),
        BulkOperation::delete("nope", key(1)),
        BulkOperation::upsert(&doc(5000)).unwrap(),
    ];
    let r = events.execute_bulk(ops, Default::default()).await.unwrap();
    let statuses: Vec<u16> = r.iter().map(|x| x.status).collect();
    assert_eq!(statuses, vec![409, 200, 204, 200, 200, 404, 201]);
    assert_eq!(r[1].resource.as_ref().unwrap()["n"], 6);
    assert_eq!(r[3].resource.as_ref().unwrap()["n"], 1008);
    let gone = events
        .read_item::<serde_json::Value>("b7", key(7))
        .await
        .unwrap_err();
    assert_eq!(gone.status(), Some(404));
}

/// The client-side query pipeline: against `--gateway-compat` (which answers cross-partition
/// ORDER BY, aggregates, GROUP BY, DISTINCT, TOP and OFFSET/LIMIT with 400/1004) strata-sdk
/// merges the results itself, and every case of the documented query corpus — run across
/// four physical partitions, items spread by id — gives the same answer as the server's own
/// merge.
#[tokio::test]
async fn client_side_pipeline_matches_the_server_on_the_corpus() {
    let text = std::fs::read_to_string(strata_tests::python::testdata().join("query-cases.json"))
        .expect("query-cases.json");
    let corpus: serde_json::Value = serde_json::from_str(&text).unwrap();
    let cases = corpus["cases"].as_array().unwrap();
    let limits = Limits {
        initial_partitions: Some(4),
        ..Limits::default()
    };
    let server = TestServer::start_with(Options {
        limits: Some(limits.clone()),
        ..Options::default()
    })
    .await;
    let gateway = TestServer::start_with(Options {
        limits: Some(limits),
        gateway_compat: true,
        ..Options::default()
    })
    .await;
    let mut merged_on_client = 0;
    let mut compared = 0;
    for (n, case) in cases.iter().enumerate() {
        let sql = case["query"].as_str().unwrap();
        let mut answers = Vec::new();
        for (label, s) in [("server", &server), ("gateway", &gateway)] {
            let client = CosmosClient::new(&s.url, EMULATOR_KEY).unwrap();
            let db = client
                .create_database_if_not_exists("corpus")
                .await
                .unwrap();
            let c = db
                .create_container(ContainerProperties::new(
                    format!("c{n}").as_str(),
                    PartitionKeyDefinition::new("/id"),
                ))
                .await
                .unwrap();
            for item in case["items"].as_array().into_iter().flatten() {
                c.upsert_item(item, Default::default()).await.unwrap();
            }
            let mut q = Query::new(sql);
            for p in case["parameters"].as_array().into_iter().flatten() {
                q = q.param(p["name"].as_str().unwrap(), &p["value"]);
            }
            let pages: Result<Vec<strata_sdk::QueryPage<serde_json::Value>>, _> = c
                .query_items(
                    q,
                    QueryOptions {
                        max_item_count: Some(3),
                        ..Default::default()
                    },
                )
                .try_collect()
                .await;
            let answer = pages.map(|pages| {
                if label == "gateway"
                    && pages.iter().any(|p| {
                        p.continuation
                            .as_deref()
                            .is_some_and(|t| t.starts_with("strata-client:"))
                            || p.route.is_none()
                    })
                {
                    merged_on_client += 1;
                }
                pages.into_iter().flat_map(|p| p.items).collect::<Vec<_>>()
            });
            answers.push(answer.map_err(|e| e.status()));
        }
        let ordered = case["order_matters"].as_bool().unwrap_or(false);
        if case["compare"] == "nondeterministic" {
            continue;
        }
        compared += 1;
        match (&answers[0], &answers[1]) {
            (Ok(a), Ok(b)) => {
                let (mut a, mut b) = (a.clone(), b.clone());
                if !ordered {
                    a.sort_by_key(|v| v.to_string());
                    b.sort_by_key(|v| v.to_string());
                }
                assert!(
                    a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| approx_eq(x, y)),
                    "case {} ({sql}):\n server {a:?}\n client {b:?}",
                    case["name"]
                );
            }
            (x, y) => assert_eq!(
                x.as_ref().err(),
                y.as_ref().err(),
                "case {} ({sql})",
                case["name"]
            ),
        }
    }
    assert!(compared > 90, "{compared}");
    assert!(
        merged_on_client > 5,
        "the gateway mode merged on the client: {merged_on_client}"
    );
}

/// JSON equality with numbers equal within 1e-9 relative (sums in another order round
/// differently).
fn approx_eq(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as V;
    match (a, b) {
        (V::Number(x), V::Number(y)) => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs())
        }
        (V::Array(x), V::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| approx_eq(a, b))
        }
        (V::Object(x), V::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| approx_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Feed ranges: one per physical partition, covering everything; queries and change feeds
/// scoped by range see exactly their slice; a tenant's range holds only the tenant. Also with
/// client-side merging (`--gateway-compat`).
#[tokio::test]
async fn feed_ranges_split_queries_and_change_feeds() {
    use std::collections::HashSet;
    use strata_sdk::{ChangeFeedOptions, ChangeFeedStart};
    for gateway_compat in [false, true] {
        let s = TestServer::start_with(Options {
            gateway_compat,
            limits: Some(Limits {
                initial_partitions: Some(4),
                ..Limits::default()
            }),
            ..Options::default()
        })
        .await;
        let client = CosmosClient::new(&s.url, EMULATOR_KEY).unwrap();
        let db = client.create_database("app").await.unwrap();
        let events = db
            .create_container(ContainerProperties::new("events", hpk()))
            .await
            .unwrap();
        for i in 0..60 {
            events
                .create_item(&ev(&format!("e{i}"), &format!("t{}", i % 6), "u", "s", i))
                .await
                .unwrap();
        }
        let ranges = events.feed_ranges().await.unwrap();
        assert_eq!(ranges.len(), 4);
        let mut by_query = HashSet::new();
        let mut by_feed = HashSet::new();
        for r in &ranges {
            let opts = QueryOptions {
                feed_range: Some(r.clone()),
                ..Default::default()
            };
            let rows: Vec<Event> = events
                .query_all("SELECT * FROM c", opts.clone())
                .await
                .unwrap();
            let n: Vec<i64> = events
                .query_all("SELECT VALUE COUNT(1) FROM c", opts)
                .await
                .unwrap();
            assert_eq!(n, vec![rows.len() as i64], "count within the range");
            for e in rows {
                assert!(by_query.insert(e.id), "an item in two ranges");
            }
            let mut feed = events.change_feed::<Event>(ChangeFeedOptions {
                start: ChangeFeedStart::Beginning,
                feed_range: Some(r.clone()),
                ..Default::default()
            });
            loop {
                let page = feed.next_page().await.unwrap();
                if page.items.is_empty() {
                    break;
                }
                for e in page.items {
                    assert!(by_feed.insert(e.id), "a change in two ranges");
                }
            }
        }
        assert_eq!(by_query.len(), 60);
        assert_eq!(by_feed.len(), 60);
        let tenant = events
            .feed_range_for(PartitionKeyBuilder::new().add("t2").build())
            .await
            .unwrap();
        let rows: Vec<Event> = events
            .query_all(
                "SELECT * FROM c ORDER BY c.n",
                QueryOptions {
                    feed_range: Some(tenant),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(rows.len(), 10);
        assert!(rows.iter().all(|e| e.tenant == "t2"));
        assert!(rows.windows(2).all(|w| w[0].n < w[1].n));
        s.stop().await;
    }
}

/// The azure_data_cosmos shape: handles by `database_client`/`container_client`, tuple keys,
/// a query as a stream of items or of pages — also when merged on the client.
#[tokio::test]
async fn the_azure_data_cosmos_shape() {
    for gateway_compat in [false, true] {
        let s = TestServer::start_with(Options {
            gateway_compat,
            limits: Some(Limits {
                initial_partitions: Some(3),
                ..Limits::default()
            }),
            ..Options::default()
        })
        .await;
        let client = CosmosClient::new(&s.url, EMULATOR_KEY).unwrap();
        client.create_database("app").await.unwrap();
        client
            .database_client("app")
            .create_container(ContainerProperties::new("events", hpk()))
            .await
            .unwrap();
        let c = client.database_client("app").container_client("events");
        for i in 0..25 {
            c.create_item(&ev(&format!("e{i}"), &format!("t{}", i % 2), "u", "s", i))
                .await
                .unwrap();
        }
        let item = c
            .read_item::<Event>("e4", ("t0", "u", "s"))
            .await
            .unwrap()
            .item
            .unwrap();
        assert_eq!(item.n, 4);
        let items: Vec<i64> = c
            .query::<i64>(
                "SELECT VALUE c.n FROM c ORDER BY c.n DESC",
                Some(QueryOptions {
                    max_item_count: Some(4),
                    ..Default::default()
                }),
            )
            .try_collect()
            .await
            .unwrap();
        assert_eq!(items, (0..25).rev().collect::<Vec<i64>>());
        let pages: Vec<strata_sdk::QueryPage<Event>> = c
            .query::<Event>(
                "SELECT * FROM c",
                Some(QueryOptions {
                    partition_key: Some(("t1", "u").into()),
                    max_item_count: Some(5),
                    ..Default::default()
                }),
            )
            .into_pages()
            .try_collect()
            .await
            .unwrap();
        assert_eq!(pages.iter().map(|p| p.items.len()).sum::<usize>(), 12);
        assert!(pages.len() >= 3, "{}", pages.len());
        s.stop().await;
    }
}

/// The change feed processor: two instances share the leases of one container; the container
/// splits while they run (leases handed over to the children); every change is handled once
/// and both instances do some of the work. Then an instance stops and the other takes over.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn change_feed_processor_shares_work_across_a_split() {
    use std::collections::HashMap;
    use std::sync::Mutex;
    use strata_sdk::{ChangeFeedProcessor, ProcessorOptions};
    let s = TestServer::start_with(Options {
        limits: Some(Limits {
            initial_partitions: Some(2),
            partition_split_bytes: 96 * 1024,
            ..Limits::default()
        }),
        ..Options::default()
    })
    .await;
    let client = CosmosClient::new(&s.url, EMULATOR_KEY).unwrap();
    let db = client.create_database("app").await.unwrap();
    let events = db
        .create_container(ContainerProperties::new("events", hpk()))
        .await
        .unwrap();
    let leases = db
        .create_container(ContainerProperties::new(
            "leases",
            PartitionKeyDefinition::new("/id"),
        ))
        .await
        .unwrap();
    let write = |from: i64, to: i64| {
        let events = events.clone();
        async move {
            for i in from..to {
                events
                    .upsert_item(
                        &serde_json::json!({"id": format!("e{i}"), "TenantId": format!("t{}", i % 9),
                                            "UserId": "u", "SessionId": "s", "n": i, "pad": "p".repeat(700)}),
                        Default::default(),
                    )
                    .await
                    .unwrap();
            }
        }
    };
    write(0, 60).await;
    let seen: Arc<Mutex<HashMap<String, (u32, String)>>> = Arc::default();
    let (stop_a, stop_b) = (
        Arc::new(tokio::sync::Notify::new()),
        Arc::new(tokio::sync::Notify::new()),
    );
    let mut tasks = Vec::new();
    for (name, stop) in [("a", Arc::clone(&stop_a)), ("b", Arc::clone(&stop_b))] {
        let opts = ProcessorOptions {
            lease_duration: Duration::from_secs(3),
            poll_interval: Duration::from_millis(50),
            max_item_count: Some(10),
            ..ProcessorOptions::new(name)
        };
        let p = ChangeFeedProcessor::new(events.clone(), leases.clone(), opts);
        let seen = Arc::clone(&seen);
        tasks.push(tokio::spawn(async move {
            p.run(
                move |batch: Vec<serde_json::Value>| {
                    let seen = Arc::clone(&seen);
                    async move {
                        let mut m = seen.lock().unwrap();
                        for d in batch {
                            let e = m
                                .entry(d["id"].as_str().unwrap().to_string())
                                .or_insert((0, name.to_string()));
                            e.0 += 1;
                        }
                        Ok(())
                    }
                },
                async move { stop.notified().await },
            )
            .await
            .unwrap();
        }));
    }
    // Both instances hold a lease before the rest is written: an instance whose first round
    // finds only itself alive takes every lease and gives the excess back only between
    // batches, so on a quick run one instance could drain all 60 changes alone.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let owners: Vec<String> = leases
            .query_all(
                "SELECT VALUE c.owner FROM c WHERE STARTSWITH(c.id, 'strata.processor.lease.') AND IS_STRING(c.owner)",
                QueryOptions::default(),
            )
            .await
            .unwrap();
        if owners.iter().any(|o| o == "a") && owners.iter().any(|o| o == "b") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "both instances take a lease: {owners:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // More writes while they run: enough to split the container.
    write(60, 260).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.lock().unwrap().len() < 260 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ranges = events.feed_ranges().await.unwrap().len();
    assert!(ranges > 2, "the container split: {ranges} ranges");
    let lease_docs: Vec<u64> = leases
        .query_all(
            "SELECT VALUE COUNT(1) FROM c WHERE STARTSWITH(c.id, 'strata.processor.lease.')",
            QueryOptions::default(),
        )
        .await
        .unwrap();
    assert!(
        lease_docs[0] > 2,
        "leases were handed over to the children: {lease_docs:?}"
    );
    {
        let m = seen.lock().unwrap();
        assert_eq!(m.len(), 260, "every change handled");
        let twice: Vec<_> = m.iter().filter(|(_, (n, _))| *n != 1).collect();
        assert!(twice.is_empty(), "handled more than once: {twice:?}");
        let by_a = m.values().filter(|(_, w)| w == "a").count();
        assert!(
            by_a > 0 && by_a < 260,
            "both instances worked: a handled {by_a}"
        );
    }
    // One instance stops (releasing its leases); the other handles what follows.
    stop_a.notify_one();
    tokio::time::sleep(Duration::from_millis(200)).await;
    write(260, 300).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.lock().unwrap().len() < 300 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    {
        let m = seen.lock().unwrap();
        assert_eq!(m.len(), 300);
        assert!((260..300).all(|i| m[&format!("e{i}")].1 == "b"));
    }
    stop_b.notify_one();
    for t in tasks {
        t.await.unwrap();
    }
}

/// The change feed as a stream of changes, waiting for new ones.
#[tokio::test]
async fn change_feed_as_a_stream() {
    let s = TestServer::start().await;
    let client = CosmosClient::new(&s.url, EMULATOR_KEY).unwrap();
    let db = client.create_database("app").await.unwrap();
    let events = db
        .create_container(ContainerProperties::new("events", hpk()))
        .await
        .unwrap();
    for i in 0..3 {
        events
            .create_item(&ev(&format!("a{i}"), "t", "u", "s", i))
            .await
            .unwrap();
    }
    let feed = events.change_feed::<Event>(Default::default());
    let mut changes = std::pin::pin!(feed.into_stream(Duration::from_millis(20)));
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(changes.try_next().await.unwrap().unwrap().id);
    }
    let later = events.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        later
            .create_item(&ev("late", "t", "u", "s", 9))
            .await
            .unwrap();
    });
    let next = tokio::time::timeout(Duration::from_secs(5), changes.try_next())
        .await
        .expect("the stream waits for the next change")
        .unwrap()
        .unwrap();
    assert_eq!(got, ["a0", "a1", "a2"]);
    assert_eq!(next.id, "late");
}

/// The change feed's all-versions mode, a pinned "now" and the lag estimate: a reader started
/// now and pinned sees writes made before its first read; the all-versions feed shows deletes;
/// the estimate counts unread changes and is 0 once caught up.
#[tokio::test]
async fn change_feed_modes_pins_and_lag() {
    let s = TestServer::start_with(Options {
        limits: Some(Limits {
            initial_partitions: Some(2),
            ..Limits::default()
        }),
        ..Default::default()
    })
    .await;
    let client = CosmosClient::new(&s.url, EMULATOR_KEY).unwrap();
    let db = client.create_database("cf").await.unwrap();
    let mut props = ContainerProperties::new("c", PartitionKeyDefinition::new("/pk"));
    props.other.insert(
        "changeFeedPolicy".into(),
        serde_json::json!({"retentionDuration": 10}),
    );
    let c = db.create_container(props).await.unwrap();
    let opts = |mode| ChangeFeedOptions {
        mode,
        start: ChangeFeedStart::Now,
        ..Default::default()
    };
    let mut pinned = c.change_feed::<serde_json::Value>(opts(ChangeFeedMode::LatestVersion));
    pinned.pin_start().await.unwrap();
    let mut all = c.change_feed::<serde_json::Value>(opts(ChangeFeedMode::AllVersionsAndDeletes));
    all.pin_start().await.unwrap();
    for i in 0..30 {
        c.create_item(&serde_json::json!({"id": format!("i{i}"), "pk": format!("p{}", i % 6)}))
            .await
            .unwrap();
    }
    c.delete_item("i0", "p0", Default::default()).await.unwrap();
    let lag = pinned.estimate_lag().await.unwrap();
    assert!(lag >= 29, "29 live items unread: {lag}");
    let mut ids = std::collections::BTreeSet::new();
    loop {
        let page = pinned.next_page().await.unwrap();
        if page.items.is_empty() {
            break;
        }
        ids.extend(
            page.items
                .iter()
                .map(|d| d["id"].as_str().unwrap().to_string()),
        );
    }
    assert_eq!(
        ids.len(),
        29,
        "written after the pin, before the first read: {ids:?}"
    );
    assert_eq!(pinned.estimate_lag().await.unwrap(), 0, "caught up");
    let mut ops = Vec::new();
    loop {
        let page = all.next_page().await.unwrap();
        if page.items.is_empty() {
            break;
        }
        ops.extend(
            page.items
                .iter()
                .map(|d| d["metadata"]["operationType"].as_str().unwrap().to_string()),
        );
    }
    assert_eq!(ops.iter().filter(|o| *o == "create").count(), 30);
    assert_eq!(ops.iter().filter(|o| *o == "delete").count(), 1);
    assert_eq!(all.estimate_lag().await.unwrap(), 0);
    s.stop().await;
}

/// `pin_end`: a reader bounded at the feed's end returns what was written before the pin and
/// then empty pages, however much is written after (here: by the reader's own consumer, the
/// way a copy into its own source does); pinned again, it reads exactly what it left out.
#[tokio::test]
async fn change_feed_pinned_end_stops_there_and_moves_on_when_pinned_again() {
    let s = TestServer::start_with(Options {
        limits: Some(Limits {
            initial_partitions: Some(2),
            ..Limits::default()
        }),
        ..Default::default()
    })
    .await;
    let client = CosmosClient::new(&s.url, EMULATOR_KEY).unwrap();
    let db = client.create_database("cf").await.unwrap();
    let c = db
        .create_container(ContainerProperties::new(
            "c",
            PartitionKeyDefinition::new("/pk"),
        ))
        .await
        .unwrap();
    for i in 0..40 {
        c.create_item(
            &serde_json::json!({"id": format!("i{i}"), "pk": format!("p{}", i % 7), "n": 0}),
        )
        .await
        .unwrap();
    }
    let mut feed = c.change_feed::<serde_json::Value>(ChangeFeedOptions {
        max_item_count: Some(3),
        ..Default::default()
    });
    feed.pin_end().await.unwrap();
    let mut seen = Vec::new();
    for _ in 0..200 {
        let page = feed.next_page().await.unwrap();
        if page.items.is_empty() {
            break;
        }
        // Every item read is written again (a new version, after the pin), and ten new ones.
        for d in &page.items {
            let id = d["id"].as_str().unwrap().to_string();
            let mut again = d.clone();
            again["n"] = serde_json::json!(1);
            c.upsert_item(&again, Default::default()).await.unwrap();
            seen.push(id);
        }
    }
    assert_eq!(seen.len(), 40, "each item once, up to the pin: {seen:?}");
    for i in 40..50 {
        c.create_item(
            &serde_json::json!({"id": format!("i{i}"), "pk": format!("p{}", i % 7), "n": 1}),
        )
        .await
        .unwrap();
    }
    assert!(
        feed.next_page().await.unwrap().items.is_empty(),
        "at its end"
    );
    feed.pin_end().await.unwrap();
    let mut later = Vec::new();
    loop {
        let page = feed.next_page().await.unwrap();
        if page.items.is_empty() {
            break;
        }
        assert!(page.items.iter().all(|d| d["n"] == 1), "{:?}", page.items);
        later.extend(
            page.items
                .iter()
                .map(|d| d["id"].as_str().unwrap().to_string()),
        );
    }
    later.sort();
    let mut expected: Vec<String> = (0..50).map(|i| format!("i{i}")).collect();
    expected.sort();
    assert_eq!(later, expected, "what the first pin left out, once each");
    s.stop().await;
}

/// `binary_encoding(true)`: what reaches the server is binary (checked on a stand-in that
/// records requests and answers in binary), and against strata every operation returns what
/// a text client gets.
#[tokio::test]
async fn binary_encoding_sends_and_reads_cosmos_binary_json() {
    use axum::http::{HeaderMap, Method as M, StatusCode as S, Uri};
    use strata_query::binary;
    type Seen = Arc<std::sync::Mutex<Vec<(M, String, Option<String>, Vec<u8>)>>>;
    let seen: Seen = Default::default();
    let app = {
        let seen = seen.clone();
        axum::Router::new().fallback(
            move |method: M, uri: Uri, headers: HeaderMap, body: bytes::Bytes| {
                let seen = seen.clone();
                async move {
                    let formats = headers
                        .get("x-ms-cosmos-supported-serialization-formats")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string);
                    let path = uri.path().to_string();
                    seen.lock().unwrap().push((method.clone(), path.clone(), formats, body.to_vec()));
                    if path.ends_with("/colls/c") {
                        let props = json!({"id": "c", "partitionKey": {"paths": ["/TenantId"], "kind": "Hash", "version": 2}});
                        return (S::OK, [("etag", "\"c\"")], props.to_string().into_bytes());
                    }
                    let mut doc = if method == M::GET {
                        json!({"id": "1", "TenantId": "t", "n": 7})
                    } else {
                        binary::decode(&body).unwrap_or(Value::Null)
                    };
                    doc["_etag"] = json!("\"e1\"");
                    (S::CREATED, [("etag", "\"e1\"")], binary::encode(&doc))
                }
            },
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let client = CosmosClient::builder(&url, EMULATOR_KEY)
        .binary_encoding(true)
        .build()
        .unwrap();
    let c = client.database("db").container("c");
    let item = json!({"id": "1", "TenantId": "t", "n": 7, "big": u64::MAX, "x": 0.25});
    let created = c.create_item(&item).await.expect("create");
    assert_eq!(
        created.item.as_ref().map(|v| v["big"].clone()),
        Some(json!(u64::MAX))
    );
    assert_eq!(created.etag.as_deref(), Some("\"e1\""));
    let read: Value = c.read_item("1", "t").await.expect("read").item.unwrap();
    assert_eq!(read["n"], json!(7));
    {
        let seen = seen.lock().unwrap();
        let post = seen.iter().find(|r| r.0 == M::POST).expect("the create");
        assert!(binary::is_binary(&post.3), "the item body goes in binary");
        assert_eq!(binary::decode(&post.3).unwrap(), item);
        assert_eq!(post.2.as_deref(), Some("CosmosBinary"));
        let get = seen
            .iter()
            .find(|r| r.0 == M::GET && r.1.ends_with("/docs/1"))
            .unwrap();
        assert_eq!(get.2.as_deref(), Some("CosmosBinary"));
        // The container read is not an item operation: no negotiation.
        let props = seen.iter().find(|r| r.1.ends_with("/colls/c")).unwrap();
        assert_eq!(props.2, None);
    }

    // Against strata: the binary client and a text client see the same items everywhere.
    let s = TestServer::start().await;
    let binary_client = CosmosClient::builder(&s.url, EMULATOR_KEY)
        .binary_encoding(true)
        .build()
        .unwrap();
    let text_client = CosmosClient::new(&s.url, EMULATOR_KEY).unwrap();
    let db = binary_client.create_database("db").await.unwrap();
    let def = PartitionKeyDefinition::hierarchical(["/TenantId", "/UserId", "/SessionId"]).unwrap();
    let b = db
        .create_container(ContainerProperties::new("events", def))
        .await
        .unwrap();
    let t = text_client.database("db").container("events");
    for i in 0..20 {
        let e = ev(&format!("e{i}"), &format!("t{}", i % 3), "u", "s", i);
        b.create_item(&e).await.unwrap();
    }
    let mut e = ev("e1", "t1", "u", "s", 100);
    b.upsert_item(&e, ItemOptions::default()).await.unwrap();
    e.n = 101;
    let replaced = b
        .replace_item("e1", &e, ItemOptions::default())
        .await
        .unwrap();
    assert_eq!(replaced.item, Some(e.clone()));
    let key = PartitionKeyBuilder::new()
        .add("t1")
        .add("u")
        .add("s")
        .build();
    let via_binary: Event = b.read_item("e1", key.clone()).await.unwrap().item.unwrap();
    let via_text: Event = t.read_item("e1", key).await.unwrap().item.unwrap();
    assert_eq!(via_binary, e);
    assert_eq!(via_text, e);
    for sql in [
        "SELECT * FROM c ORDER BY c.n DESC",
        "SELECT VALUE COUNT(1) FROM c",
    ] {
        let q = || Query::new(sql);
        let rows_b: Vec<Value> = b.query_all(q(), QueryOptions::default()).await.unwrap();
        let rows_t: Vec<Value> = t.query_all(q(), QueryOptions::default()).await.unwrap();
        assert_eq!(rows_b, rows_t, "{sql}");
        assert!(!rows_b.is_empty());
    }
    s.stop().await;
}

/// strata-sdk runs a vector search across partitions against a gateway-like server (which
/// refuses to merge it: 400/1004) through its client-side pipeline — the non-streaming plan,
/// the rewritten query per range, the merge — and gets what strata answers by itself.
#[tokio::test]
async fn vector_top_k_merged_on_the_client_equals_the_servers() {
    let limits = Limits {
        initial_partitions: Some(4),
        ..Limits::default()
    };
    let mut answers = Vec::new();
    for gateway_compat in [false, true] {
        let s = TestServer::start_with(Options {
            limits: Some(limits.clone()),
            gateway_compat,
            ..Options::default()
        })
        .await;
        s.setup_with(
            "v",
            "docs",
            json!({"partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2},
                "vectorEmbeddingPolicy": {"vectorEmbeddings": [
                    {"path": "/v", "dataType": "float32", "dimensions": 2, "distanceFunction": "cosine"}]}}),
        )
        .await;
        let client = CosmosClient::new(&s.url, EMULATOR_KEY).unwrap();
        let c = client.database("v").container("docs");
        for i in 0..60u32 {
            let a = f64::from(i) * 0.1;
            let doc = json!({"id": format!("d{i}"), "pk": format!("p{}", i % 9), "v": [a.cos(), a.sin()]});
            c.upsert_item(&doc, Default::default()).await.unwrap();
        }
        let q = Query::new("SELECT TOP 5 c.id FROM c ORDER BY VectorDistance(c.v, @q)")
            .param("@q", [1.0, 0.5]);
        let pages: Vec<strata_sdk::QueryPage<Value>> = c
            .query_items(q, QueryOptions::default())
            .try_collect()
            .await
            .unwrap();
        // A page merged on the client has no server route to report.
        assert_eq!(
            pages.iter().all(|p| p.route.is_none()),
            gateway_compat,
            "merged on the client only against the gateway-like server"
        );
        let ids: Vec<Value> = pages
            .into_iter()
            .flat_map(|p| p.items)
            .map(|r| r["id"].clone())
            .collect();
        answers.push(ids);
        s.stop().await;
    }
    // The most similar to (1, 0.5) lie at angle atan(0.5) ≈ 0.46: d5, then d4/d6, d3/d7.
    assert_eq!(answers[0].len(), 5, "{answers:?}");
    assert_eq!(answers[0][0], json!("d5"), "{answers:?}");
    assert_eq!(answers[0], answers[1], "client-merged vs server answer");
}

/// strata-sdk runs a hybrid search across partitions against a gateway-like server (which
/// hands it `hybridSearchQueryInfo`): global statistics summed over the ranges, the component
/// queries per range, rows coalesced by `_rid` and fused by rank — and gets what strata
/// answers by itself.
#[tokio::test]
async fn hybrid_search_fused_on_the_client_equals_the_servers() {
    let limits = Limits {
        initial_partitions: Some(4),
        ..Limits::default()
    };
    let words = ["river", "stone", "bridge", "light", "forest", "night"];
    let mut answers = Vec::new();
    for gateway_compat in [false, true] {
        let s = TestServer::start_with(Options {
            limits: Some(limits.clone()),
            gateway_compat,
            ..Options::default()
        })
        .await;
        s.setup_with(
            "h",
            "docs",
            json!({"partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2},
                "fullTextPolicy": {"defaultLanguage": "en-US", "fullTextPaths": [{"path": "/t"}]},
                "vectorEmbeddingPolicy": {"vectorEmbeddings": [
                    {"path": "/v", "dataType": "float32", "dimensions": 2, "distanceFunction": "cosine"}]},
                "indexingPolicy": {"fullTextIndexes": [{"path": "/t"}]}}),
        )
        .await;
        let client = CosmosClient::new(&s.url, EMULATOR_KEY).unwrap();
        let c = client.database("h").container("docs");
        for i in 0..60usize {
            let a = i as f64 * 0.1;
            let t: Vec<&str> = (0..(3 + i % 5))
                .map(|k| words[(i * 7 + k * k) % 6])
                .collect();
            let doc = json!({"id": format!("d{i}"), "pk": format!("p{}", i % 9), "t": t.join(" "), "v": [a.cos(), a.sin()]});
            c.upsert_item(&doc, Default::default()).await.unwrap();
        }
        // Every document in the answer: each component's rows reach every document, so the
        // client ranks over the same rows the server does.
        let q = Query::new(
            "SELECT c.id FROM c ORDER BY RANK RRF(FullTextScore(c.t, 'bridge', 'night'), VectorDistance(c.v, @q), [1, 3]) OFFSET 0 LIMIT 60",
        )
        .param("@q", [1.0, 0.5]);
        let pages: Vec<strata_sdk::QueryPage<Value>> = c
            .query_items(q, QueryOptions::default())
            .try_collect()
            .await
            .unwrap();
        assert_eq!(
            pages.iter().all(|p| p.route.is_none()),
            gateway_compat,
            "fused on the client only against the gateway-like server"
        );
        let ids: Vec<Value> = pages
            .into_iter()
            .flat_map(|p| p.items)
            .map(|r| r["id"].clone())
            .collect();
        answers.push(ids);
        s.stop().await;
    }
    assert_eq!(answers[0].len(), 60, "{answers:?}");
    assert_eq!(
        answers[0][..10],
        answers[1][..10],
        "client-fused vs server answer"
    );
}
