//! The resource API driven with raw signed HTTP: authentication, the account, databases and
//! containers, with every error case in Cosmos's shape (status, sub-status, `{code, message}`).

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use strata_query::protocol::AuthScope;
use strata_tests::{assert_error, TestServer};

#[tokio::test]
async fn authentication_errors() {
    let s = TestServer::start().await;
    let url = format!("{}dbs", s.url);
    let now = httpdate::fmt_http_date(std::time::SystemTime::now());
    // Missing authorization.
    let r = s
        .http
        .get(&url)
        .header("x-ms-date", &now)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], "Unauthorized");
    // Malformed.
    let r = s
        .http
        .get(&url)
        .header("x-ms-date", &now)
        .header("authorization", "nonsense")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // Wrong key.
    let other = strata_query::protocol::MasterKey::from_base64("c2VjcmV0").unwrap();
    let scope = AuthScope::new("dbs", "");
    let r = s
        .http
        .get(&url)
        .header("x-ms-date", &now)
        .header("authorization", other.authorization("GET", &scope, &now))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // Signed for another verb.
    let r = s
        .http
        .get(&url)
        .header("x-ms-date", &now)
        .header("authorization", s.key.authorization("POST", &scope, &now))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // Correct signature, date 20 minutes off: 403.
    let old = httpdate::fmt_http_date(
        std::time::SystemTime::now() - std::time::Duration::from_secs(1200),
    );
    let r = s
        .http
        .get(&url)
        .header("x-ms-date", &old)
        .header("authorization", s.key.authorization("GET", &scope, &old))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["message"].as_str().unwrap().contains("15 minutes"),
        "{body}"
    );
    // And a valid request works.
    assert_eq!(s.get("/dbs", &[]).await.status, StatusCode::OK);
    s.stop().await;
}

#[tokio::test]
async fn account_advertises_the_endpoint_the_client_used() {
    let s = TestServer::start().await;
    let r = s.get("/", &[]).await;
    assert_eq!(r.status, StatusCode::OK);
    let ep = r.json["writableLocations"][0]["databaseAccountEndpoint"]
        .as_str()
        .unwrap();
    assert_eq!(ep, s.url, "{r:?}");
    // Every answer says where it was served, as the service's do.
    assert_eq!(r.header("content-location"), Some(s.url.as_str()));
    let dbs = s.get("/dbs", &[]).await;
    assert_eq!(
        dbs.header("content-location"),
        Some(format!("{}dbs", s.url).as_str())
    );
    // Reached as localhost, it names itself by its address, as the official emulator does.
    let port = s.url.rsplit(':').next().unwrap().trim_end_matches('/');
    let by_name = strata_tests::Client::new(&format!("http://localhost:{port}/"));
    let r = by_name.get("/", &[]).await;
    assert_eq!(
        r.json["readableLocations"][0]["databaseAccountEndpoint"],
        format!("http://127.0.0.1:{port}/")
    );
    assert!(r.json["queryEngineConfiguration"].is_string());
    assert_eq!(
        r.json["userConsistencyPolicy"]["defaultConsistencyLevel"],
        "Session"
    );
    s.stop().await;
}

#[tokio::test]
async fn databases_lifecycle() {
    let s = TestServer::start().await;
    let r = s.post("/dbs", &[], json!({"id": "d1"})).await;
    assert_eq!(r.status, StatusCode::CREATED);
    for k in ["_rid", "_self", "_etag", "_ts", "_colls", "_users"] {
        assert!(r.json.get(k).is_some(), "missing {k}: {r:?}");
    }
    assert_error(
        &s.post("/dbs", &[], json!({"id": "d1"})).await,
        409,
        "Conflict",
    );
    assert_error(
        &s.post("/dbs", &[], json!({"name": "x"})).await,
        400,
        "BadRequest",
    );
    assert_error(
        &s.post("/dbs", &[], json!({"id": "a/b"})).await,
        400,
        "BadRequest",
    );
    assert_eq!(
        s.get("/dbs/d1/", &[]).await.status,
        StatusCode::OK,
        "trailing slash"
    );
    assert_error(&s.get("/dbs/nope", &[]).await, 404, "NotFound");
    s.post("/dbs", &[], json!({"id": "d2"})).await;
    let r = s.get("/dbs", &[]).await;
    assert_eq!(r.json["_count"], json!(2));
    let r = s
        .post(
            "/dbs",
            &[("x-ms-documentdb-isquery", "true"), ("content-type", "application/query+json")],
            json!({"query": "SELECT * FROM root r WHERE r.id = @id", "parameters": [{"name": "@id", "value": "d2"}]}),
        )
        .await;
    assert_eq!(r.json["Databases"].as_array().unwrap().len(), 1, "{r:?}");
    // Deleting a database removes its containers and items.
    s.post(
        "/dbs/d1/colls",
        &[],
        json!({"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}}),
    )
    .await;
    s.create("d1", "c", &json!(["a"]), json!({"id": "1", "pk": "a"}))
        .await;
    assert_eq!(
        s.request(Method::DELETE, "/dbs/d1", &[], None).await.status,
        StatusCode::NO_CONTENT
    );
    assert_error(&s.get("/dbs/d1/colls/c", &[]).await, 404, "NotFound");
    s.post("/dbs", &[], json!({"id": "d1"})).await;
    s.post(
        "/dbs/d1/colls",
        &[],
        json!({"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}}),
    )
    .await;
    let r = s.get("/dbs/d1/colls/c/docs", &[]).await;
    assert_eq!(
        r.json["_count"],
        json!(0),
        "a re-created container starts empty: {r:?}"
    );
    s.stop().await;
}

#[tokio::test]
async fn container_validation() {
    let s = TestServer::start().await;
    s.post("/dbs", &[], json!({"id": "d"})).await;
    let bad = [
        json!({"id": "c", "partitionKey": {"paths": ["/a", "/b", "/c", "/d"], "kind": "MultiHash", "version": 2}}),
        json!({"id": "c", "partitionKey": {"paths": ["a"], "kind": "Hash", "version": 2}}),
        json!({"id": "c", "partitionKey": {"paths": ["/a", "/b"], "kind": "MultiHash", "version": 1}}),
        json!({"id": "c", "partitionKey": {"paths": ["/a", "/b"], "kind": "Hash", "version": 2}}),
        json!({"id": "c", "partitionKey": {"paths": ["/a"], "kind": "Range"}}),
        json!({"id": "c", "partitionKey": {"paths": ["/a"]}, "defaultTtl": 0}),
    ];
    for b in bad {
        let r = s.post("/dbs/d/colls", &[], b.clone()).await;
        assert_error(&r, 400, "BadRequest");
        assert!(
            r.message().len() > 20,
            "the message names the problem: {r:?}"
        );
    }
    // A missing version is V1; the service echoes the kind filled in and no version (the
    // official SDKs read a version-less definition as V1). A given version is echoed.
    let r = s
        .post(
            "/dbs/d/colls",
            &[],
            json!({"id": "v1", "partitionKey": {"paths": ["/pk"]}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(
        r.json["partitionKey"],
        json!({"paths": ["/pk"], "kind": "Hash"})
    );
    let read = s.get("/dbs/d/colls/v1", &[]).await;
    assert_eq!(
        read.json["partitionKey"],
        json!({"paths": ["/pk"], "kind": "Hash"})
    );
    let named = s
        .post(
            "/dbs/d/colls",
            &[],
            json!({"id": "v1-named", "partitionKey": {"paths": ["/pk"], "version": 1}}),
        )
        .await;
    assert_eq!(
        named.json["partitionKey"],
        json!({"paths": ["/pk"], "kind": "Hash", "version": 1})
    );
    let deleted = s
        .request(Method::DELETE, "/dbs/d/colls/v1-named", &[], None)
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    assert!(r.json["indexingPolicy"].is_object());
    for k in [
        "_rid",
        "_self",
        "_etag",
        "_ts",
        "_docs",
        "_sprocs",
        "_triggers",
        "_udfs",
        "_conflicts",
        "conflictResolutionPolicy",
    ] {
        assert!(r.json.get(k).is_some(), "missing {k}");
    }
    assert_error(
        &s.post(
            "/dbs/d/colls",
            &[],
            json!({"id": "v1", "partitionKey": {"paths": ["/pk"]}}),
        )
        .await,
        409,
        "Conflict",
    );
    // Replace: properties change, the partition key cannot.
    let r = s
        .request(
            Method::PUT,
            "/dbs/d/colls/v1",
            &[],
            Some(json!({"id": "v1", "partitionKey": {"paths": ["/pk"]}, "defaultTtl": 60})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.json["defaultTtl"], json!(60));
    let r = s
        .request(
            Method::PUT,
            "/dbs/d/colls/v1",
            &[],
            Some(json!({"id": "v1", "partitionKey": {"paths": ["/other"]}})),
        )
        .await;
    assert_error(&r, 400, "BadRequest");
    let r = s.get("/dbs/d/colls", &[]).await;
    assert_eq!(r.json["DocumentCollections"].as_array().unwrap().len(), 1);
    assert_eq!(
        s.request(Method::DELETE, "/dbs/d/colls/v1", &[], None)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_error(&s.get("/dbs/d/colls/v1", &[]).await, 404, "NotFound");
    s.stop().await;
}

/// What the official SDK's container tests read back: a normalized indexing policy, per-range
/// statistics and index progress on request, and an (always empty) conflicts feed.
#[tokio::test]
async fn container_details_the_sdks_read() {
    let s = TestServer::start().await;
    assert_eq!(
        s.post("/dbs", &[], json!({"id": "d"})).await.status,
        StatusCode::CREATED
    );
    let r = s
        .post(
            "/dbs/d/colls",
            &[],
            json!({"id": "c", "partitionKey": {"paths": ["/'first level\" 1*()'/\"le/vel2\""], "kind": "Hash", "version": 2},
                   "indexingPolicy": {"automatic": true, "indexingMode": "consistent",
                       "includedPaths": [{"path": "/", "indexes": [{"kind": "Hash", "dataType": "Number", "precision": 2}]}],
                       "excludedPaths": [{"path": "/\"systemMetadata\"/*"}]}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    let ip = &r.json["indexingPolicy"];
    assert_eq!(
        ip["includedPaths"],
        json!([{"path": "/"}]),
        "legacy indexes dropped"
    );
    assert_eq!(
        ip["excludedPaths"],
        json!([{"path": "/\"systemMetadata\"/*"}, {"path": "/\"_etag\"/?"}]),
        "_etag is always excluded"
    );
    // The quoted partition key path reaches into the document.
    let pk = json!(["v"]).to_string();
    let r = s
        .post(
            "/dbs/d/colls/c/docs",
            &[("x-ms-documentdb-partitionkey", pk.as_str())],
            json!({"id": "1", "first level\" 1*()": {"le/vel2": "v"}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    let wrong = json!(["w"]).to_string();
    let r = s
        .post(
            "/dbs/d/colls/c/docs",
            &[("x-ms-documentdb-partitionkey", wrong.as_str())],
            json!({"id": "2", "first level\" 1*()": {"le/vel2": "v"}}),
        )
        .await;
    assert_error(&r, 400, "BadRequest");

    let r = s.get("/dbs/d/colls/c", &[]).await;
    assert_eq!(
        r.header("x-ms-documentdb-collection-index-transformation-progress"),
        Some("100")
    );
    assert!(r.json.get("statistics").is_none(), "only on request");
    let r = s
        .get(
            "/dbs/d/colls/c",
            &[("x-ms-documentdb-populatepartitionstatistics", "true")],
        )
        .await;
    let stats = r.json["statistics"].as_array().expect("statistics");
    assert_eq!(stats.len(), 1);
    assert_eq!(stats[0]["documentCount"], 1);

    let r = s.get("/dbs/d/colls/c/conflicts", &[]).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.json["Conflicts"], json!([]));
    // Cross-partition, as the SDKs send it when enabled (without the flag the service answers
    // 400: see api.rs, conflict_queries_follow_the_cross_partition_rule).
    let q = [
        ("x-ms-documentdb-isquery", "true"),
        ("content-type", "application/query+json"),
        ("x-ms-documentdb-query-enablecrosspartition", "true"),
    ];
    let r = s
        .post(
            "/dbs/d/colls/c/conflicts",
            &q,
            json!({"query": "SELECT * FROM root r WHERE r.resourceType = 'document'"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.json["Conflicts"], json!([]));
    let r = s
        .post(
            "/dbs/d/colls/c/conflicts",
            &q,
            json!({"query": "SELECT FROM"}),
        )
        .await;
    assert_error(&r, 400, "BadRequest");
    assert_error(
        &s.get("/dbs/d/colls/c/conflicts/x", &[]).await,
        404,
        "NotFound",
    );
    let r = s
        .request(Method::DELETE, "/dbs/d/colls/c/conflicts/x", &[], None)
        .await;
    assert_error(&r, 404, "NotFound");
    assert_error(
        &s.get("/dbs/d/colls/nope/conflicts", &[]).await,
        404,
        "NotFound",
    );
    s.stop().await;
}
