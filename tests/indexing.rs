//! Indexing over HTTP, as the service answers: policies validated and enforced, lookups that
//! read only their matches (from query metrics), index-only counts, index metrics, unique
//! keys, and a policy replaced while queries keep answering.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use strata_tests::{assert_error, Resp, TestServer};

const DB: &str = "idx";

async fn items(s: &TestServer, coll: &str, n: usize) {
    for i in 0..n {
        let d = json!({"id": format!("i{i}"), "pk": format!("p{}", i % 7), "n": i,
                       "status": if i % 10 == 0 { "open" } else { "closed" },
                       "tags": [format!("t{}", i % 3)], "owner": {"name": format!("o{}", i % 5)}});
        let r = s.create(DB, coll, &json!([format!("p{}", i % 7)]), d).await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    }
}

async fn query(s: &TestServer, coll: &str, sql: &str, headers: &[(&str, &str)]) -> Resp {
    let mut h = vec![
        ("x-ms-documentdb-isquery", "true"),
        ("content-type", "application/query+json"),
        ("x-ms-documentdb-query-enablecrosspartition", "true"),
        ("x-ms-documentdb-populatequerymetrics", "true"),
        ("x-ms-max-item-count", "1000"),
    ];
    h.extend_from_slice(headers);
    s.post(
        &format!("/dbs/{DB}/colls/{coll}/docs"),
        &h,
        json!({"query": sql, "parameters": []}),
    )
    .await
}

fn metric(r: &Resp, name: &str) -> f64 {
    let m = r.header("x-ms-documentdb-query-metrics").expect("metrics");
    m.split(';')
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} in {m}"))
}

fn docs(r: &Resp) -> Vec<Value> {
    r.json["Documents"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn selective_filters_read_only_their_matches() {
    let s = TestServer::start().await;
    s.setup(
        DB,
        "c",
        json!({"paths": ["/pk"], "kind": "Hash", "version": 2}),
    )
    .await;
    items(&s, "c", 200).await;
    for (sql, want) in [
        ("SELECT * FROM c WHERE c.status = 'open'", 20),
        ("SELECT * FROM c WHERE c.n IN (3, 4, 5)", 3),
        ("SELECT * FROM c WHERE c.n >= 190", 10),
        ("SELECT * FROM c WHERE STARTSWITH(c.id, 'i19')", 11),
        (
            "SELECT * FROM c WHERE ARRAY_CONTAINS(c.tags, 't1') AND c.n < 30",
            10,
        ),
        ("SELECT * FROM c WHERE c.owner.name = 'o2' AND c.n < 50", 10),
    ] {
        let r = query(&s, "c", sql, &[]).await;
        assert_eq!(r.status, StatusCode::OK, "{r:?}");
        assert_eq!(docs(&r).len(), want, "{sql}");
        let read = metric(&r, "retrievedDocumentCount");
        assert!(read <= 2.0 * 67.0, "{sql}: read {read}");
    }
    // The equality reads exactly its matches.
    let r = query(&s, "c", "SELECT * FROM c WHERE c.status = 'open'", &[]).await;
    assert_eq!(metric(&r, "retrievedDocumentCount"), 20.0);
    assert!(metric(&r, "indexHitDocumentCount") >= 20.0);
    // An index-only count reads no document (as `test_partition_scoped_count_is_index_only`
    // of the official SDK expects).
    let r = query(
        &s,
        "c",
        "SELECT VALUE COUNT(1) FROM c",
        &[("x-ms-documentdb-partitionkey", r#"["p3"]"#)],
    )
    .await;
    assert_eq!(docs(&r), vec![json!(29)]);
    assert_eq!(metric(&r, "retrievedDocumentCount"), 0.0);
    assert_eq!(metric(&r, "indexUtilizationRatio"), 1.0);
    s.stop().await;
}

#[tokio::test]
async fn index_metrics_name_used_and_missing_indexes() {
    let s = TestServer::start().await;
    s.setup_with(
        DB,
        "m",
        json!({"partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2},
               "indexingPolicy": {"includedPaths": [{"path": "/*"}], "excludedPaths": [{"path": "/blob/*"}]}}),
    )
    .await;
    items(&s, "m", 10).await;
    let r = query(
        &s,
        "m",
        "SELECT * FROM c WHERE c.status = 'open' AND c.blob.x = 1",
        &[
            ("x-ms-cosmos-populateindexmetrics", "true"),
            ("x-ms-documentdb-partitionkey", r#"["p0"]"#),
        ],
    )
    .await;
    use base64::Engine as _;
    let raw = r
        .header("x-ms-cosmos-index-utilization")
        .expect("index metrics");
    let m: Value = serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(raw)
            .expect("base64"),
    )
    .expect("json");
    let specs = |k: &str| -> Vec<String> {
        m[k].as_array()
            .unwrap()
            .iter()
            .map(|i| i["IndexSpec"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(specs("UtilizedSingleIndexes"), ["/pk/?", "/status/?"]);
    assert_eq!(specs("PotentialSingleIndexes"), ["/blob/x/?"]);
    assert!(m["UtilizedCompositeIndexes"].is_array());
    s.stop().await;
}

/// The service's messages, as its users report them (400, sub-status 0): "The order by query
/// does not have a corresponding composite index that it can be served from." and "The index
/// path corresponding to the specified order-by item is excluded."
#[tokio::test]
async fn queries_the_index_cannot_serve_are_refused_as_the_service_does() {
    let s = TestServer::start().await;
    s.setup_with(
        DB,
        "p",
        json!({"partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2},
               "indexingPolicy": {"includedPaths": [{"path": "/*"}], "excludedPaths": [{"path": "/secret/?"}],
                   "compositeIndexes": [[{"path": "/status"}, {"path": "/n", "order": "descending"}]]}}),
    )
    .await;
    s.setup_with(
        DB,
        "none",
        json!({"partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2},
               "indexingPolicy": {"indexingMode": "none", "automatic": false}}),
    )
    .await;
    items(&s, "p", 30).await;
    items(&s, "none", 30).await;
    let r = query(&s, "p", "SELECT * FROM c ORDER BY c.n, c.id", &[]).await;
    assert_error(&r, 400, "BadRequest");
    assert!(
        r.message().contains("corresponding composite index"),
        "{r:?}"
    );
    let r = query(&s, "p", "SELECT * FROM c ORDER BY c.secret", &[]).await;
    assert_error(&r, 400, "BadRequest");
    assert!(r.message().contains("order-by item is excluded"), "{r:?}");
    // The composite index serves its order and its inverse.
    for sql in [
        "SELECT VALUE c.n FROM c ORDER BY c.status, c.n DESC",
        "SELECT VALUE c.n FROM c ORDER BY c.status DESC, c.n",
    ] {
        let r = query(
            &s,
            "p",
            sql,
            &[("x-ms-documentdb-partitionkey", r#"["p1"]"#)],
        )
        .await;
        assert_eq!(r.status, StatusCode::OK, "{sql}: {r:?}");
    }
    // No index at all: a filter needs the scan header; reading everything does not.
    let r = query(&s, "none", "SELECT * FROM c WHERE c.n = 3", &[]).await;
    assert_error(&r, 400, "BadRequest");
    assert!(r.message().contains("allow scan"), "{r:?}");
    let r = query(
        &s,
        "none",
        "SELECT * FROM c WHERE c.n = 3",
        &[("x-ms-documentdb-query-enable-scan", "true")],
    )
    .await;
    assert_eq!(docs(&r).len(), 1, "{r:?}");
    let r = query(&s, "none", "SELECT VALUE COUNT(1) FROM c", &[]).await;
    assert_eq!(docs(&r), vec![json!(30)]);
    // Invalid policies are refused when the container is created.
    for bad in [
        json!({"includedPaths": [{"path": "/a/?"}]}),
        json!({"includedPaths": [{"path": "/*"}, {"path": "no-slash/?"}]}),
        json!({"includedPaths": [{"path": "/*"}], "compositeIndexes": [[{"path": "/a"}]]}),
    ] {
        let r = s
            .post(
                &format!("/dbs/{DB}/colls"),
                &[],
                json!({"id": "bad", "partitionKey": {"paths": ["/pk"], "kind": "Hash"}, "indexingPolicy": bad}),
            )
            .await;
        assert_error(&r, 400, "BadRequest");
    }
    s.stop().await;
}

#[tokio::test]
async fn unique_keys_hold_within_each_logical_partition() {
    let s = TestServer::start().await;
    s.setup_with(
        DB,
        "u",
        json!({"partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2},
               "uniqueKeyPolicy": {"uniqueKeys": [{"paths": ["/email"]}]}}),
    )
    .await;
    let pk = json!(["a"]);
    let r = s
        .create(DB, "u", &pk, json!({"id": "1", "pk": "a", "email": "x@y"}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let r = s
        .create(DB, "u", &pk, json!({"id": "2", "pk": "a", "email": "x@y"}))
        .await;
    assert_error(&r, 409, "Conflict");
    // Another logical partition may hold the same value.
    let r = s
        .create(
            DB,
            "u",
            &json!(["b"]),
            json!({"id": "2", "pk": "b", "email": "x@y"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    // Replace and upsert into a taken value conflict; moving off a value frees it.
    let r = s
        .create(DB, "u", &pk, json!({"id": "2", "pk": "a", "email": "z@y"}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    let h = [("x-ms-documentdb-partitionkey", r#"["a"]"#)];
    let r = s
        .request(
            Method::PUT,
            &format!("/dbs/{DB}/colls/u/docs/2"),
            &h,
            Some(json!({"id": "2", "pk": "a", "email": "x@y"})),
        )
        .await;
    assert_error(&r, 409, "Conflict");
    let upsert = [
        ("x-ms-documentdb-partitionkey", r#"["a"]"#),
        ("x-ms-documentdb-is-upsert", "true"),
    ];
    let r = s
        .post(
            &format!("/dbs/{DB}/colls/u/docs"),
            &upsert,
            json!({"id": "3", "pk": "a", "email": "x@y"}),
        )
        .await;
    assert_error(&r, 409, "Conflict");
    let r = s
        .request(
            Method::PUT,
            &format!("/dbs/{DB}/colls/u/docs/1"),
            &h,
            Some(json!({"id": "1", "pk": "a", "email": "w@y"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let r = s
        .create(DB, "u", &pk, json!({"id": "4", "pk": "a", "email": "x@y"}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "the value was freed");
    // Two missing values are two nulls: they conflict.
    let r = s.create(DB, "u", &pk, json!({"id": "5", "pk": "a"})).await;
    assert_eq!(r.status, StatusCode::CREATED);
    let r = s.create(DB, "u", &pk, json!({"id": "6", "pk": "a"})).await;
    assert_error(&r, 409, "Conflict");
    // Deleting frees the value.
    let r = s
        .request(
            Method::DELETE,
            &format!("/dbs/{DB}/colls/u/docs/5"),
            &h,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let r = s.create(DB, "u", &pk, json!({"id": "6", "pk": "a"})).await;
    assert_eq!(r.status, StatusCode::CREATED);
    // A transactional batch that would break the key fails as a whole.
    let r = s
        .post(
            &format!("/dbs/{DB}/colls/u/docs"),
            &[("x-ms-cosmos-is-batch-request", "True"), ("x-ms-cosmos-batch-atomic", "True"), ("x-ms-documentdb-partitionkey", r#"["a"]"#)],
            json!([{"operationType": "Create", "resourceBody": {"id": "7", "pk": "a", "email": "q@y"}},
                   {"operationType": "Create", "resourceBody": {"id": "8", "pk": "a", "email": "q@y"}}]),
        )
        .await;
    assert_eq!(r.batch_statuses(), [424, 409], "{r:?}");
    let r = s.get(&format!("/dbs/{DB}/colls/u/docs/7"), &h).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "rolled back");
    // The policy is fixed at creation.
    let r = s
        .request(
            Method::PUT,
            &format!("/dbs/{DB}/colls/u"),
            &[],
            Some(
                json!({"id": "u", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2},
                        "uniqueKeyPolicy": {"uniqueKeys": [{"paths": ["/other"]}]}}),
            ),
        )
        .await;
    assert_error(&r, 400, "BadRequest");
    s.stop().await;
}

#[tokio::test]
async fn a_replaced_policy_is_built_while_queries_keep_answering() {
    let s = TestServer::start().await;
    s.setup_with(
        DB,
        "r",
        json!({"partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2},
               "indexingPolicy": {"includedPaths": [{"path": "/*"}], "excludedPaths": [{"path": "/status/?"}]}}),
    )
    .await;
    items(&s, "r", 300).await;
    let sql = "SELECT VALUE c.id FROM c WHERE c.status = 'open'";
    let before = query(&s, "r", sql, &[]).await;
    assert_eq!(docs(&before).len(), 30);
    assert_eq!(
        metric(&before, "retrievedDocumentCount"),
        300.0,
        "excluded: a scan"
    );
    let r = s
        .request(
            Method::PUT,
            &format!("/dbs/{DB}/colls/r"),
            &[],
            Some(
                json!({"id": "r", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2},
                        "indexingPolicy": {"includedPaths": [{"path": "/*"}]}}),
            ),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let mut progress = 0;
    for _ in 0..500 {
        let during = query(&s, "r", sql, &[]).await;
        assert_eq!(docs(&during).len(), 30, "correct during the build");
        let r = s.get(&format!("/dbs/{DB}/colls/r"), &[]).await;
        progress = r
            .header("x-ms-documentdb-collection-index-transformation-progress")
            .and_then(|p| p.parse().ok())
            .expect("progress header");
        if progress == 100 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(progress, 100);
    let after = query(&s, "r", sql, &[]).await;
    assert_eq!(docs(&after).len(), 30);
    assert_eq!(
        metric(&after, "retrievedDocumentCount"),
        30.0,
        "now from the index"
    );
    s.stop().await;
}

/// Computed properties read as document properties in filters, projections and ORDER BY,
/// are not stored (SELECT * leaves them out), follow a replaced definition, and an invalid
/// definition is refused with the service's wording.
#[tokio::test]
async fn computed_properties_are_queryable() {
    let s = TestServer::start().await;
    let cps = json!([{"name": "cp_lower", "query": "SELECT VALUE LOWER(c.g) FROM c"},
                     {"name": "cp_len", "query": "SELECT VALUE LENGTH(c.word) FROM c"}]);
    s.setup_with(
        DB,
        "cp",
        json!({"partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}, "computedProperties": cps}),
    )
    .await;
    for (i, (g, w)) in [("GroUp1", "ab"), ("group1", "abcd"), ("GROUP2", "abc")]
        .iter()
        .enumerate()
    {
        let d = json!({"id": format!("{i}"), "pk": "p", "g": g, "word": w});
        assert_eq!(
            s.create(DB, "cp", &json!(["p"]), d).await.status,
            StatusCode::CREATED
        );
    }
    let r = s.get(&format!("/dbs/{DB}/colls/cp"), &[]).await;
    assert_eq!(r.json["computedProperties"], cps);
    let pk = [("x-ms-documentdb-partitionkey", r#"["p"]"#)];
    let r = query(&s, "cp", "SELECT * FROM c WHERE c.cp_lower = 'group1'", &pk).await;
    assert_eq!(docs(&r).len(), 2);
    assert!(
        docs(&r).iter().all(|d| d.get("cp_lower").is_none()),
        "not stored"
    );
    let r = query(
        &s,
        "cp",
        "SELECT VALUE c.cp_len FROM c ORDER BY c.cp_len DESC",
        &pk,
    )
    .await;
    assert_eq!(docs(&r), vec![json!(4), json!(3), json!(2)]);
    let r = query(
        &s,
        "cp",
        "SELECT VALUE COUNT(1) FROM c WHERE c.cp_len > 2",
        &pk,
    )
    .await;
    assert_eq!(docs(&r), vec![json!(2)]);
    // A replaced definition takes effect.
    let new = json!([{"name": "cp_upper", "query": "SELECT VALUE UPPER(c.g) FROM c"}]);
    let r = s
        .request(
            Method::PUT,
            &format!("/dbs/{DB}/colls/cp"),
            &[],
            Some(
                json!({"id": "cp", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2},
                        "computedProperties": new}),
            ),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let r = query(
        &s,
        "cp",
        "SELECT VALUE c.id FROM c WHERE c.cp_upper = 'GROUP1'",
        &pk,
    )
    .await;
    assert_eq!(docs(&r).len(), 2);
    let r = query(
        &s,
        "cp",
        "SELECT VALUE c.id FROM c WHERE c.cp_lower = 'group1'",
        &pk,
    )
    .await;
    assert!(docs(&r).is_empty(), "the old one is gone");
    let r = s
        .post(
            &format!("/dbs/{DB}/colls"),
            &[],
            json!({"id": "bad", "partitionKey": {"paths": ["/pk"], "kind": "Hash"},
                   "computedProperties": {"name": "x", "query": "SELECT VALUE 1 FROM c"}}),
        )
        .await;
    assert_error(&r, 400, "BadRequest");
    assert!(
        r.message()
            .contains("One of the specified inputs is invalid"),
        "{r:?}"
    );
    s.stop().await;
}

/// Vector policies are validated on create and replace with the service's 400s (the messages
/// themselves are checked case by case in `strata_query::index::vector`): an index needs an
/// embedding at its path, and a replace keeps existing embeddings and vector indexes.
#[tokio::test]
async fn vector_policies_are_validated_on_create_and_replace() {
    let s = TestServer::start().await;
    s.setup(
        DB,
        "plain",
        json!({"paths": ["/pk"], "kind": "Hash", "version": 2}),
    )
    .await;
    let pk = json!({"paths": ["/pk"], "kind": "Hash", "version": 2});
    let embedding = json!({"vectorEmbeddings": [
        {"path": "/v", "dataType": "float32", "dimensions": 3, "distanceFunction": "cosine"}]});
    let flat = json!({"vectorIndexes": [{"path": "/v", "type": "flat"}]});
    let colls = format!("/dbs/{DB}/colls");
    let r = s
        .post(
            &colls,
            &[],
            json!({"id": "bad", "partitionKey": pk, "indexingPolicy": flat}),
        )
        .await;
    assert_error(&r, 400, "BadRequest");
    assert!(
        r.message()
            .contains("path::/v not matching in Embedding's path"),
        "{r:?}"
    );
    let r = s
        .post(
            &colls,
            &[],
            json!({"id": "bad", "partitionKey": pk, "vectorEmbeddingPolicy":
            {"vectorEmbeddings": [{"path": "/v", "dataType": "float64", "dimensions": 3}]}}),
        )
        .await;
    assert_error(&r, 400, "BadRequest");
    let r = s.get(&format!("{colls}/bad"), &[]).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "nothing created: {r:?}");

    let def = json!({"id": "vec", "partitionKey": pk, "vectorEmbeddingPolicy": embedding,
        "indexingPolicy": {"includedPaths": [{"path": "/*"}], "excludedPaths": [{"path": "/v/*"}],
                           "vectorIndexes": flat["vectorIndexes"]}});
    let r = s.post(&colls, &[], def.clone()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    assert_eq!(r.json["vectorEmbeddingPolicy"], embedding);
    assert_eq!(
        r.json["indexingPolicy"]["vectorIndexes"],
        flat["vectorIndexes"]
    );
    // Other parts of the indexing policy may change; the vector index may not.
    let mut narrower = def.clone();
    narrower["indexingPolicy"]["includedPaths"] = json!([{"path": "/color/?"}]);
    narrower["indexingPolicy"]["excludedPaths"] = json!([{"path": "/*"}]);
    let put = |body: Value| {
        let s = &s;
        async move {
            s.request(
                Method::PUT,
                &format!("/dbs/{DB}/colls/vec"),
                &[],
                Some(body),
            )
            .await
        }
    };
    let r = put(narrower).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let mut other = def.clone();
    other["indexingPolicy"]["vectorIndexes"] = json!([{"path": "/v", "type": "quantizedFlat"}]);
    let r = put(other).await;
    assert_error(&r, 400, "BadRequest");
    assert!(
        r.message()
            .contains("Paths in existing vector indexing policy cannot be modified"),
        "{r:?}"
    );
    let mut other = def.clone();
    other["vectorEmbeddingPolicy"]["vectorEmbeddings"][0]["dimensions"] = json!(4);
    let r = put(other).await;
    assert_error(&r, 400, "BadRequest");
    assert!(
        r.message()
            .contains("Paths in existing embedding policy cannot be modified"),
        "{r:?}"
    );
    let r = s.get(&format!("{colls}/vec"), &[]).await;
    assert_eq!(r.json["vectorEmbeddingPolicy"], embedding, "unchanged");
    s.stop().await;
}

/// `ORDER BY VectorDistance(...)` orders by similarity under the container's distance function
/// (ascending for euclidean, descending for cosine), across partitions; writing ASC or DESC
/// is the service's 400; and the query plan the SDKs ask for is a non-streaming ORDER BY
/// whose rewritten query each partition runs as it is.
#[tokio::test]
async fn vector_distance_orders_by_the_containers_distance_function() {
    let s = TestServer::start().await;
    let pk = json!({"paths": ["/pk"], "kind": "Hash", "version": 2});
    s.setup_with(
        DB,
        "near",
        json!({"partitionKey": pk, "vectorEmbeddingPolicy": {"vectorEmbeddings": [
            {"path": "/v", "dataType": "float32", "dimensions": 2, "distanceFunction": "euclidean"}]},
            "indexingPolicy": {"vectorIndexes": [{"path": "/v", "type": "flat"}]}}),
    )
    .await;
    for i in 0..40 {
        let x = f64::from(i);
        let r = s
            .create(
                DB,
                "near",
                &json!([format!("p{}", i % 7)]),
                json!({"id": format!("d{i}"), "pk": format!("p{}", i % 7), "v": [x, 1.0]}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    }
    let ids = |r: &Resp| -> Vec<String> {
        docs(r)
            .iter()
            .map(|d| d["id"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    // Euclidean from the policy: the nearest first.
    let sql = "SELECT TOP 3 c.id, VectorDistance(c.v, [10, 1]) AS d FROM c ORDER BY VectorDistance(c.v, [10, 1])";
    let r = query(&s, "near", sql, &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let got = ids(&r);
    assert_eq!(got[0], "d10", "{r:?}");
    assert!(
        got[1..].contains(&"d9".to_string()) && got[1..].contains(&"d11".to_string()),
        "{got:?}"
    );
    assert_eq!(docs(&r)[0]["d"].as_f64(), Some(0.0));
    // The printed plan says how it ranks.
    let r = query(&s, "near", sql, &[("x-strata-explain", "true")]).await;
    let plan =
        strata_query::protocol::unescape_plan(r.header("x-strata-query-plan").unwrap_or_default());
    assert!(
        plan.contains("ranked by VectorDistance over /v (euclidean), candidates from the flat index on /v (40 vectors"),
        "{plan}"
    );
    // The call's own function wins: dot product, the largest first.
    let sql = "SELECT TOP 2 c.id FROM c ORDER BY VectorDistance(c.v, [1, 0], false, {'distanceFunction': 'dotproduct'})";
    let r = query(&s, "near", sql, &[]).await;
    assert_eq!(ids(&r), ["d39", "d38"], "{r:?}");
    // ASC/DESC is refused as the service refuses it.
    let r = query(
        &s,
        "near",
        "SELECT TOP 2 c.id FROM c ORDER BY VectorDistance(c.v, [1, 0]) ASC",
        &[],
    )
    .await;
    assert_error(&r, 400, "BadRequest");
    assert!(r.message().contains("Specifying a sorting order (ASC or DESC) with VectorDistance function is not supported."), "{r:?}");
    // The plan: non-streaming, ascending, a rewritten query with no filter to format.
    let r = s
        .post(
            &format!("/dbs/{DB}/colls/near/docs"),
            &[
                ("x-ms-cosmos-is-query-plan-request", "True"),
                ("content-type", "application/json"),
            ],
            json!({"query": "SELECT TOP 3 c.id FROM c ORDER BY VectorDistance(c.v, [10, 1])"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let info = &r.json["queryInfo"];
    assert_eq!(info["hasNonStreamingOrderBy"], json!(true), "{r:?}");
    assert_eq!(info["orderBy"], json!(["Ascending"]));
    assert_eq!(info["top"], json!(3));
    let rewritten = info["rewrittenQuery"].as_str().unwrap_or_default();
    // A client that cannot merge without streaming is told so.
    let r = s
        .post(
            &format!("/dbs/{DB}/colls/near/docs"),
            &[
                ("x-ms-cosmos-is-query-plan-request", "True"),
                ("content-type", "application/json"),
                ("x-ms-cosmos-supported-query-features", "OrderBy, Top"),
            ],
            json!({"query": "SELECT TOP 3 c.id FROM c ORDER BY VectorDistance(c.v, [10, 1])"}),
        )
        .await;
    assert_error(&r, 400, "BadRequest");
    assert!(r.message().contains("NonStreamingOrderBy"), "{r:?}");
    assert!(
        !rewritten.contains("{documentdb-formattableorderbyquery-filter}"),
        "{rewritten}"
    );
    // Each partition runs it as it is: its rows carry orderByItems and the payload.
    let r = query(
        &s,
        "near",
        rewritten,
        &[("x-ms-documentdb-partitionkey", r#"["p3"]"#)],
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let first = &docs(&r)[0];
    assert_eq!(first["payload"]["id"], "d10", "{r:?}");
    assert_eq!(first["orderByItems"][0]["item"].as_f64(), Some(0.0));
    s.stop().await;
}

/// A spatial index narrows ST_DISTANCE, ST_WITHIN and ST_INTERSECTS filters to the grid cells
/// near their geometry: the same answers as a container without it, fewer documents read, and
/// a plan that names it. A policy change builds the cells for documents already there.
#[tokio::test]
async fn spatial_indexes_narrow_spatial_filters_to_the_same_answers() {
    let s = TestServer::start().await;
    s.post("/dbs", &[], json!({"id": DB})).await;
    let spatial = json!({"indexingMode": "consistent", "includedPaths": [{"path": "/*"}],
        "spatialIndexes": [{"path": "/loc/*", "types": ["Point", "Polygon"]}]});
    for (coll, policy) in [("geo", Some(spatial.clone())), ("plain", None)] {
        let mut body =
            json!({"id": coll, "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}});
        if let Some(p) = policy {
            body["indexingPolicy"] = p;
        }
        let r = s.post(&format!("/dbs/{DB}/colls"), &[], body).await;
        assert!(r.status.is_success(), "{r:?}");
        // A grid of points around Seattle (0.01° apart), a few far away, a park polygon,
        // and values that are not geometry.
        for i in 0..400 {
            let (lon, lat) = (
                -122.3 + (i % 20) as f64 * 0.01,
                47.5 + (i / 20) as f64 * 0.01,
            );
            let d = json!({"id": format!("p{i}"), "pk": format!("k{}", i % 5),
                           "loc": {"type": "Point", "coordinates": [lon, lat]}});
            assert!(s
                .create(DB, coll, &json!([format!("k{}", i % 5)]), d)
                .await
                .status
                .is_success());
        }
        for (id, loc) in [
            (
                "paris",
                json!({"type": "Point", "coordinates": [2.35, 48.85]}),
            ),
            (
                "park",
                json!({"type": "Polygon", "coordinates": [[[-122.26, 47.56], [-122.24, 47.56], [-122.24, 47.58], [-122.26, 47.58], [-122.26, 47.56]]]}),
            ),
            ("text", json!("not a place")),
            ("bad", json!({"type": "Point", "coordinates": [0, 95]})),
        ] {
            let d = json!({"id": id, "pk": "k0", "loc": loc});
            assert!(s
                .create(DB, coll, &json!(["k0"]), d)
                .await
                .status
                .is_success());
        }
    }
    let near = "{'type': 'Point', 'coordinates': [-122.25, 47.57]}";
    let box_ = "{'type': 'Polygon', 'coordinates': [[[-122.255, 47.565], [-122.225, 47.565], [-122.225, 47.595], [-122.255, 47.595], [-122.255, 47.565]]]}";
    // Each filter, and whether the park matches it (it overlaps the box, not within it).
    let filters = [
        (format!("ST_DISTANCE(c.loc, {near}) < 1500"), true),
        (format!("2000 >= ST_DISTANCE({near}, c.loc)"), true),
        (format!("ST_WITHIN(c.loc, {box_})"), false),
        (format!("ST_INTERSECTS({box_}, c.loc)"), true),
    ];
    for (f, park) in &filters {
        let sql = format!("SELECT VALUE c.id FROM c WHERE {f}");
        let (indexed, plain) = (
            query(&s, "geo", &sql, &[]).await,
            query(&s, "plain", &sql, &[]).await,
        );
        assert_eq!(indexed.status, StatusCode::OK, "{indexed:?}");
        let sorted = |r: &Resp| {
            let mut v: Vec<String> = docs(r)
                .iter()
                .map(|d| d.as_str().unwrap().to_string())
                .collect();
            v.sort();
            v
        };
        assert_eq!(sorted(&indexed), sorted(&plain), "{f}");
        let found = sorted(&plain);
        assert!(
            found.len() >= 9 && found.contains(&"park".to_string()) == *park,
            "{f}: {found:?}"
        );
        let (read, all) = (
            metric(&indexed, "retrievedDocumentCount"),
            metric(&plain, "retrievedDocumentCount"),
        );
        assert!(
            read < all / 3.0,
            "{f}: the index read {read} documents, the scan {all}"
        );
    }
    let r = query(
        &s,
        "geo",
        &format!("SELECT VALUE c.id FROM c WHERE {}", filters[0].0),
        &[("x-strata-explain", "true")],
    )
    .await;
    let plan =
        strata_query::protocol::unescape_plan(r.header("x-strata-query-plan").unwrap_or_default());
    assert!(plan.contains("spatial index of /loc ("), "{plan}");
    // Adding the index to the plain container builds the cells of its documents.
    let coll = s.get(&format!("/dbs/{DB}/colls/plain"), &[]).await.json;
    let mut replaced = coll.clone();
    replaced["indexingPolicy"] = spatial;
    let r = s
        .request(
            Method::PUT,
            &format!("/dbs/{DB}/colls/plain"),
            &[],
            Some(replaced),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let sql = format!("SELECT VALUE c.id FROM c WHERE {}", filters[0].0);
    let mut read = f64::MAX;
    for _ in 0..100 {
        let r = query(&s, "plain", &sql, &[]).await;
        read = metric(&r, "retrievedDocumentCount");
        if read < 100.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        read < 100.0,
        "after the rebuild the index read {read} documents"
    );
    s.stop().await;
}
