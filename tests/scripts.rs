//! Server-side JavaScript over HTTP: script resources, stored procedures as one transaction in
//! one logical partition (rollback, confinement, time and memory budgets, the bulk-delete
//! pattern with continuation, logging), pre/post triggers and UDFs in queries.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use strata_server::store::container::Limits;
use strata_tests::{assert_error, Options, Resp, TestServer};

const DB: &str = "js";

async fn server(timeout_ms: u64) -> TestServer {
    let s = TestServer::start_with(Options {
        limits: Some(Limits {
            script_timeout: Duration::from_millis(timeout_ms),
            ..Limits::default()
        }),
        ..Options::default()
    })
    .await;
    s.setup(
        DB,
        "c",
        json!({"paths": ["/pk"], "kind": "Hash", "version": 2}),
    )
    .await;
    s
}

async fn script(s: &TestServer, kind: &str, body: Value) -> Resp {
    s.post(&format!("/dbs/{DB}/colls/c/{kind}"), &[], body)
        .await
}

async fn sproc(s: &TestServer, id: &str, body: &str) {
    let r = script(s, "sprocs", json!({"id": id, "body": body})).await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
}

async fn exec(s: &TestServer, id: &str, pk: &str, args: Value) -> Resp {
    exec_with(s, id, pk, args, &[]).await
}

async fn exec_with(
    s: &TestServer,
    id: &str,
    pk: &str,
    args: Value,
    headers: &[(&str, &str)],
) -> Resp {
    let key = json!([pk]).to_string();
    let mut h = vec![("x-ms-documentdb-partitionkey", key.as_str())];
    h.extend_from_slice(headers);
    s.post(&format!("/dbs/{DB}/colls/c/sprocs/{id}"), &h, args)
        .await
}

async fn read(s: &TestServer, id: &str, pk: &str) -> Resp {
    let key = json!([pk]).to_string();
    s.get(
        &format!("/dbs/{DB}/colls/c/docs/{id}"),
        &[("x-ms-documentdb-partitionkey", &key)],
    )
    .await
}

async fn count(s: &TestServer, pk: &str) -> u64 {
    let key = json!([pk]).to_string();
    let (rows, _) = s
        .query_all(
            DB,
            "c",
            "SELECT VALUE COUNT(1) FROM c",
            json!([]),
            &[("x-ms-documentdb-partitionkey", &key)],
        )
        .await;
    rows.iter().filter_map(Value::as_u64).sum()
}

#[tokio::test]
async fn script_resources_have_the_service_lifecycle() {
    let s = server(5000).await;
    for kind in ["sprocs", "udfs", "triggers"] {
        let base = format!("/dbs/{DB}/colls/c/{kind}");
        let mut def = json!({"id": "s1", "body": "function () { return 1; }"});
        if kind == "triggers" {
            def["triggerType"] = json!("Pre");
            def["triggerOperation"] = json!("All");
        }
        let r = s.post(&base, &[], def.clone()).await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
        for k in ["_rid", "_self", "_etag", "_ts"] {
            assert!(r.json.get(k).is_some(), "{kind} {k}: {r:?}");
        }
        assert!(r.json["_self"]
            .as_str()
            .unwrap()
            .contains(&format!("/{kind}/")));
        let rid = r.json["_rid"].as_str().unwrap().to_string();
        assert_error(&s.post(&base, &[], def.clone()).await, 409, "Conflict");
        // Replace, read, list, query.
        def["body"] = json!("function () { return 2; }");
        let r = s
            .request(Method::PUT, &format!("{base}/s1"), &[], Some(def.clone()))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{r:?}");
        assert_eq!(r.json["_rid"], json!(rid), "a replace keeps the rid");
        let r = s.get(&format!("{base}/s1"), &[]).await;
        assert_eq!(r.json["body"], json!("function () { return 2; }"));
        let r = s.get(&base, &[]).await;
        assert_eq!(r.json["_count"], json!(1), "{r:?}");
        let r = s
            .post(
                &base,
                &[
                    ("x-ms-documentdb-isquery", "true"),
                    ("content-type", "application/query+json"),
                ],
                json!({"query": "SELECT * FROM root r WHERE r.id = @id",
                       "parameters": [{"name": "@id", "value": "s1"}]}),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{r:?}");
        assert_eq!(r.json["_count"], json!(1), "{r:?}");
        // Upsert creates then replaces.
        let r = s
            .post(
                &base,
                &[("x-ms-documentdb-is-upsert", "true")],
                json!({"id": "s2", "body": "function () {}", "triggerType": "Post",
                       "triggerOperation": "Create"}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
        let r = s
            .post(
                &base,
                &[("x-ms-documentdb-is-upsert", "true")],
                json!({"id": "s2", "body": "function () { }", "triggerType": "Post",
                       "triggerOperation": "Create"}),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{r:?}");
        // Delete, then 404.
        let r = s
            .request(Method::DELETE, &format!("{base}/s1"), &[], None)
            .await;
        assert_eq!(r.status, StatusCode::NO_CONTENT, "{r:?}");
        assert_error(&s.get(&format!("{base}/s1"), &[]).await, 404, "NotFound");
        // Bad bodies.
        assert_error(
            &s.post(&base, &[], json!({"id": "x", "body": 5})).await,
            400,
            "BadRequest",
        );
        assert_error(
            &s.post(&base, &[], json!({"id": "x"})).await,
            400,
            "BadRequest",
        );
    }
    let r = script(
        &s,
        "triggers",
        json!({"id": "t", "body": "function(){}", "triggerType": "Sideways", "triggerOperation": "All"}),
    )
    .await;
    assert_error(&r, 400, "BadRequest");
}

#[tokio::test]
async fn a_stored_procedure_is_one_transaction() {
    let s = server(5000).await;
    // Two creates, then a throw: neither document remains.
    sproc(
        &s,
        "two-then-throw",
        r#"function (fail) {
            var c = getContext().getCollection();
            c.createDocument(c.getSelfLink(), {id: "a", pk: "p"}, function (err) {
                if (err) throw err;
                c.createDocument(c.getSelfLink(), {id: "b", pk: "p"}, function (err) {
                    if (err) throw err;
                    if (fail) throw new Error("changed my mind");
                    getContext().getResponse().setBody("both");
                });
            });
        }"#,
    )
    .await;
    let r = exec(&s, "two-then-throw", "p", json!([true])).await;
    assert_error(&r, 400, "BadRequest");
    assert!(r.message().contains("changed my mind"), "{r:?}");
    assert_eq!(read(&s, "a", "p").await.status, StatusCode::NOT_FOUND);
    assert_eq!(read(&s, "b", "p").await.status, StatusCode::NOT_FOUND);
    let r = exec(&s, "two-then-throw", "p", json!([false])).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.json, json!("both"));
    assert!(r.header("x-ms-request-charge").is_some());
    assert_eq!(read(&s, "a", "p").await.status, StatusCode::OK);
    // An operation's own error, rethrown, keeps its status: 409 for the duplicate id, and
    // the whole transaction (the third document) is rolled back.
    sproc(
        &s,
        "dup",
        r#"function () {
            var c = getContext().getCollection();
            c.createDocument(c.getSelfLink(), {id: "c", pk: "p"});
            c.createDocument(c.getSelfLink(), {id: "a", pk: "p"}, function (err) { if (err) throw err; });
        }"#,
    )
    .await;
    let r = exec(&s, "dup", "p", json!([])).await;
    assert_error(&r, 409, "Conflict");
    assert_eq!(read(&s, "c", "p").await.status, StatusCode::NOT_FOUND);
    // A caught error leaves the transaction usable: the failed create staged nothing.
    sproc(
        &s,
        "caught",
        r#"function () {
            var c = getContext().getCollection();
            c.createDocument(c.getSelfLink(), {id: "a", pk: "p"}, function (err) {
                var status = err ? err.number : 0;
                c.upsertDocument(c.getSelfLink(), {id: "d", pk: "p", saw: status}, function (err, doc) {
                    if (err) throw err;
                    c.readDocument(doc._self, function (err, again) {
                        if (err) throw err;
                        getContext().getResponse().setBody(again.saw);
                    });
                });
            });
        }"#,
    )
    .await;
    let r = exec(&s, "caught", "p", json!([])).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.json, json!(409));
    assert_eq!(read(&s, "d", "p").await.json["saw"], json!(409));
}

#[tokio::test]
async fn a_stored_procedure_is_confined_to_its_partition_key() {
    let s = server(5000).await;
    s.create(
        DB,
        "c",
        &json!(["other"]),
        json!({"id": "x", "pk": "other"}),
    )
    .await;
    sproc(
        &s,
        "create-other",
        r#"function () {
            var c = getContext().getCollection();
            c.createDocument(c.getSelfLink(), {id: "y", pk: "other"}, function (err) { if (err) throw err; });
        }"#,
    )
    .await;
    let r = exec(&s, "create-other", "mine", json!([])).await;
    assert_error(&r, 400, "BadRequest");
    assert!(r.message().contains("PartitionKey"), "{r:?}");
    sproc(
        &s,
        "read-other",
        r#"function () {
            var c = getContext().getCollection();
            c.readDocument(c.getAltLink() + "/docs/x", function (err, doc) {
                getContext().getResponse().setBody(err ? err.number : doc.id);
            });
        }"#,
    )
    .await;
    assert_eq!(
        exec(&s, "read-other", "mine", json!([])).await.json,
        json!(404)
    );
    assert_eq!(
        exec(&s, "read-other", "other", json!([])).await.json,
        json!("x")
    );
    // Queries see only the partition.
    sproc(
        &s,
        "count",
        r#"function () {
            var c = getContext().getCollection();
            c.queryDocuments(c.getSelfLink(), "SELECT VALUE COUNT(1) FROM c", {}, function (err, r) {
                if (err) throw err;
                getContext().getResponse().setBody(r[0]);
            });
        }"#,
    )
    .await;
    assert_eq!(exec(&s, "count", "mine", json!([])).await.json, json!(0));
    assert_eq!(exec(&s, "count", "other", json!([])).await.json, json!(1));
    // No partition key: the service's 400.
    let r = s
        .post(&format!("/dbs/{DB}/colls/c/sprocs/count"), &[], json!([]))
        .await;
    assert_error(&r, 400, "BadRequest");
    // A missing sproc: 404.
    assert_error(&exec(&s, "nope", "mine", json!([])).await, 404, "NotFound");
    // A body that is not JavaScript fails to compile when it runs.
    sproc(&s, "broken", "function ( {").await;
    let r = exec(&s, "broken", "mine", json!([])).await;
    assert_error(&r, 400, "BadRequest");
    assert!(r.message().contains("compiling"), "{r:?}");
}

#[tokio::test]
async fn runaway_scripts_are_stopped_without_harming_other_requests() {
    let s = server(500).await;
    s.create(DB, "c", &json!(["p"]), json!({"id": "seed", "pk": "p"}))
        .await;
    sproc(
        &s,
        "forever",
        r#"function () {
            var c = getContext().getCollection();
            c.createDocument(c.getSelfLink(), {id: "partial", pk: "p"});
            while (true) {}
        }"#,
    )
    .await;
    sproc(
        &s,
        "hog",
        r#"function () { var a = []; while (true) { a.push(new Array(100000).fill("x")); } }"#,
    )
    .await;
    let started = Instant::now();
    let (looping, hogging, reads) = tokio::join!(
        exec(&s, "forever", "p", json!([])),
        exec(&s, "hog", "p", json!([])),
        async {
            // Reads keep answering while both scripts run.
            let mut fast = 0;
            for _ in 0..20 {
                let t = Instant::now();
                let r = read(&s, "seed", "p").await;
                assert_eq!(r.status, StatusCode::OK);
                if t.elapsed() < Duration::from_millis(200) {
                    fast += 1;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            fast
        }
    );
    assert_error(&looping, 408, "RequestTimeout");
    assert!(hogging.status.is_client_error(), "{hogging:?}");
    assert!(
        hogging.message().contains("memory") || hogging.status == StatusCode::REQUEST_TIMEOUT,
        "{hogging:?}"
    );
    assert!(reads >= 15, "reads were slowed down: {reads} of 20 fast");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(read(&s, "partial", "p").await.status, StatusCode::NOT_FOUND);
    // The server goes on serving scripts.
    sproc(
        &s,
        "ok",
        "function () { getContext().getResponse().setBody(7); }",
    )
    .await;
    assert_eq!(exec(&s, "ok", "p", json!([])).await.json, json!(7));
}

#[tokio::test]
async fn bulk_delete_with_continuation_empties_ten_thousand_items() {
    let s = server(5000).await;
    // A bulk import that stops when the budget says so and reports how far it got.
    sproc(
        &s,
        "bulkImport",
        r#"function (from, to) {
            var c = getContext().getCollection();
            var done = from;
            function next() {
                if (done >= to) { getContext().getResponse().setBody(done); return; }
                var ok = c.createDocument(c.getSelfLink(), {id: "i" + done, pk: "bulk", n: done},
                    function (err) { if (err) throw err; done++; next(); });
                if (!ok) getContext().getResponse().setBody(done);
            }
            next();
        }"#,
    )
    .await;
    let mut done = 0u64;
    let mut calls = 0;
    while done < 10_000 {
        let r = exec(&s, "bulkImport", "bulk", json!([done, 10_000])).await;
        assert_eq!(r.status, StatusCode::OK, "{r:?}");
        let now = r.json.as_u64().expect("count");
        assert!(now > done, "no progress: {r:?}");
        done = now;
        calls += 1;
    }
    assert!(
        calls >= 2,
        "10,000 creates fit one execution's budget: {calls}"
    );
    assert_eq!(count(&s, "bulk").await, 10_000);
    // The documentation's bulk delete: query a page, delete it, repeat; when the budget
    // says no, return with continuation: true and let the client call again.
    sproc(
        &s,
        "bulkDelete",
        r#"function (query) {
            var c = getContext().getCollection();
            var response = getContext().getResponse();
            var body = { deleted: 0, continuation: true };
            tryQueryAndDelete();
            function tryQueryAndDelete(continuation) {
                var ok = c.queryDocuments(c.getSelfLink(), query, { continuation: continuation },
                    function (err, docs, options) {
                        if (err) throw err;
                        if (docs.length > 0) tryDelete(docs);
                        else if (options.continuation) tryQueryAndDelete(options.continuation);
                        else { body.continuation = false; response.setBody(body); }
                    });
                if (!ok) response.setBody(body);
            }
            function tryDelete(docs) {
                if (docs.length > 0) {
                    var ok = c.deleteDocument(docs[0]._self, {}, function (err) {
                        if (err) throw err;
                        body.deleted++;
                        docs.shift();
                        tryDelete(docs);
                    });
                    if (!ok) response.setBody(body);
                } else {
                    tryQueryAndDelete();
                }
            }
        }"#,
    )
    .await;
    let mut deleted = 0u64;
    let mut rounds = 0;
    loop {
        let r = exec(&s, "bulkDelete", "bulk", json!(["SELECT * FROM c"])).await;
        assert_eq!(r.status, StatusCode::OK, "{r:?}");
        deleted += r.json["deleted"].as_u64().expect("deleted");
        rounds += 1;
        assert!(rounds < 50, "bulk delete does not finish");
        if r.json["continuation"] == json!(false) {
            break;
        }
    }
    assert_eq!(deleted, 10_000);
    assert!(rounds >= 2, "the budget never asked for a continuation");
    assert_eq!(count(&s, "bulk").await, 0);
}

#[tokio::test]
async fn script_logging_and_the_server_side_api() {
    let s = server(5000).await;
    sproc(
        &s,
        "api",
        r#"function (a, b) {
            console.log("args %s and %s", a, b.x);
            var ctx = getContext();
            var coll = __;
            coll.upsertDocument(coll.getSelfLink(), {id: "q1", pk: "api", n: 1});
            coll.upsertDocument(coll.getSelfLink(), {id: "q2", pk: "api", n: 2});
            coll.createDocument(coll.getAltLink(), {pk: "api", n: 3}, function (err, doc) {
                if (err) throw err;
                __.filter(function (d) { return d.n >= 2; }, function (err, found) {
                    if (err) throw err;
                    ctx.getResponse().setBody({
                        self: coll.getSelfLink().indexOf("dbs/") === 0,
                        alt: coll.getAltLink(),
                        request: ctx.getRequest().getBody(),
                        generatedId: doc.id.length,
                        found: found.map(function (d) { return d.n; }).sort()
                    });
                });
            });
        }"#,
    )
    .await;
    let r = exec_with(
        &s,
        "api",
        "api",
        json!([1, {"x": "y z"}]),
        &[("x-ms-documentdb-script-enable-logging", "true")],
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.json["self"], json!(true));
    assert_eq!(r.json["alt"], json!(format!("dbs/{DB}/colls/c")));
    assert_eq!(r.json["request"], json!([1, {"x": "y z"}]));
    assert_eq!(r.json["generatedId"], json!(36));
    assert_eq!(r.json["found"], json!([2, 3]));
    assert_eq!(
        r.header("x-ms-documentdb-script-log-results"),
        Some("args%201%20and%20y%20z")
    );
    let r = exec(&s, "api", "api", json!([1, {"x": 2}])).await;
    assert!(r.header("x-ms-documentdb-script-log-results").is_none());
}

#[tokio::test]
async fn triggers_change_documents_and_roll_writes_back() {
    let s = server(5000).await;
    for (id, ty, op, body) in [
        (
            "stamp",
            "Pre",
            "All",
            r#"function () {
                var doc = getContext().getRequest().getBody();
                doc.stamped = getContext().getRequest().getOperationType();
                getContext().getRequest().setBody(doc);
            }"#,
        ),
        (
            "audit",
            "Post",
            "Create",
            r#"function () {
                var doc = getContext().getResponse().getBody();
                var c = getContext().getCollection();
                c.createDocument(c.getSelfLink(), {id: "audit-" + doc.id, pk: doc.pk, etag: doc._etag});
            }"#,
        ),
        (
            "veto",
            "Post",
            "All",
            r#"function () { throw new Error("vetoed"); }"#,
        ),
        ("ondelete", "Pre", "Delete", "function () {}"),
    ] {
        let r = script(
            &s,
            "triggers",
            json!({"id": id, "body": body, "triggerType": ty, "triggerOperation": op}),
        )
        .await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    }
    let key = json!(["t"]).to_string();
    let create = |doc: Value, headers: Vec<(&'static str, &'static str)>| {
        let key = key.clone();
        let s = &s;
        async move {
            let mut h = vec![("x-ms-documentdb-partitionkey", key.as_str())];
            h.extend(headers);
            s.post(&format!("/dbs/{DB}/colls/c/docs"), &h, doc).await
        }
    };
    let r = create(
        json!({"id": "d1", "pk": "t"}),
        vec![
            ("x-ms-documentdb-pre-trigger-include", "stamp"),
            ("x-ms-documentdb-post-trigger-include", "audit"),
        ],
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    assert_eq!(r.json["stamped"], json!("Create"));
    let audit = read(&s, "audit-d1", "t").await;
    assert_eq!(audit.status, StatusCode::OK, "{audit:?}");
    assert_eq!(audit.json["etag"], r.json["_etag"]);
    // A post-trigger that throws rolls the write back.
    let r = create(
        json!({"id": "d2", "pk": "t"}),
        vec![("x-ms-documentdb-post-trigger-include", "veto")],
    )
    .await;
    assert_error(&r, 400, "BadRequest");
    assert!(r.message().contains("vetoed"), "{r:?}");
    assert_eq!(read(&s, "d2", "t").await.status, StatusCode::NOT_FOUND);
    // The service's errors: a missing trigger, a trigger of the other type, another operation.
    let r = create(
        json!({"id": "d3", "pk": "t"}),
        vec![("x-ms-documentdb-pre-trigger-include", "missing")],
    )
    .await;
    assert_error(&r, 404, "NotFound");
    let r = create(
        json!({"id": "d3", "pk": "t"}),
        vec![("x-ms-documentdb-pre-trigger-include", "audit")],
    )
    .await;
    assert_error(&r, 400, "BadRequest");
    let r = create(
        json!({"id": "d3", "pk": "t"}),
        vec![("x-ms-documentdb-pre-trigger-include", "ondelete")],
    )
    .await;
    assert_error(&r, 400, "BadRequest");
    assert_eq!(read(&s, "d3", "t").await.status, StatusCode::NOT_FOUND);
    // Replace runs the All trigger with its own operation type.
    let r = s
        .request(
            Method::PUT,
            &format!("/dbs/{DB}/colls/c/docs/d1"),
            &[
                ("x-ms-documentdb-partitionkey", &key),
                ("x-ms-documentdb-pre-trigger-include", "stamp"),
            ],
            Some(json!({"id": "d1", "pk": "t"})),
        )
        .await;
    assert_eq!(r.json["stamped"], json!("Replace"), "{r:?}");
}

#[tokio::test]
async fn udfs_run_in_queries_on_one_and_many_partitions() {
    let s = server(500).await;
    for (id, body) in [
        ("double", "function (x) { return x * 2; }"),
        (
            "tax",
            "function (price, rate) { return Math.round(price * rate * 100) / 100; }",
        ),
        ("maybe", "function (x) { if (x > 2) return x; }"),
        (
            "boom",
            "function (x) { throw new Error('bad input ' + x); }",
        ),
        ("spin", "function (x) { while (true) {} }"),
    ] {
        let r = script(&s, "udfs", json!({"id": id, "body": body})).await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    }
    for i in 0..20 {
        s.create(
            DB,
            "c",
            &json!([format!("p{}", i % 4)]),
            json!({"id": format!("u{i}"), "pk": format!("p{}", i % 4), "n": i}),
        )
        .await;
    }
    // Cross-partition, in WHERE and SELECT.
    let (rows, _) = s
        .query_all(
            DB,
            "c",
            "SELECT VALUE udf.double(c.n) FROM c WHERE udf.double(c.n) >= 30",
            json!([]),
            &[],
        )
        .await;
    let mut got: Vec<i64> = rows.iter().filter_map(Value::as_i64).collect();
    got.sort();
    assert_eq!(got, vec![30, 32, 34, 36, 38]);
    // One partition, with parameters; undefined results leave the property out.
    let key = json!(["p1"]).to_string();
    let (rows, _) = s
        .query_all(
            DB,
            "c",
            "SELECT c.id, udf.maybe(c.n) AS m, udf.tax(c.n, @r) AS t FROM c ORDER BY c.n",
            json!([{"name": "@r", "value": 0.175}]),
            &[("x-ms-documentdb-partitionkey", &key)],
        )
        .await;
    assert_eq!(rows[0], json!({"id": "u1", "t": 0.18}), "{rows:?}");
    assert_eq!(rows[1], json!({"id": "u5", "m": 5, "t": 0.88}), "{rows:?}");
    // A throwing UDF, an unknown UDF, a UDF that does not return: 400s naming the cause.
    for (sql, words) in [
        ("SELECT VALUE udf.boom(c.n) FROM c", "bad input"),
        ("SELECT VALUE udf.nope(c.n) FROM c", "udf.nope"),
        ("SELECT VALUE udf.spin(c.n) FROM c", "stopped"),
    ] {
        let r = s
            .post(
                &format!("/dbs/{DB}/colls/c/docs"),
                &[
                    ("x-ms-documentdb-isquery", "true"),
                    ("content-type", "application/query+json"),
                    ("x-ms-documentdb-partitionkey", &key),
                ],
                json!({"query": sql}),
            )
            .await;
        assert_error(&r, 400, "BadRequest");
        assert!(r.message().contains(words), "{sql}: {r:?}");
    }
    // A replaced UDF is used at once (the compiled cache follows the script version).
    let r = s
        .request(
            Method::PUT,
            &format!("/dbs/{DB}/colls/c/udfs/double"),
            &[],
            Some(json!({"id": "double", "body": "function (x) { return x * 3; }"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let (rows, _) = s
        .query_all(
            DB,
            "c",
            "SELECT VALUE udf.double(c.n) FROM c WHERE c.id = 'u1'",
            json!([]),
            &[("x-ms-documentdb-partitionkey", &key)],
        )
        .await;
    assert_eq!(rows, vec![json!(3)]);
}

#[tokio::test]
async fn scripts_see_nothing_outside_their_sandbox() {
    let s = server(5000).await;
    sproc(
        &s,
        "probe",
        r#"function () {
            var names = ["require", "process", "os", "std", "fetch", "XMLHttpRequest",
                         "setTimeout", "setInterval", "WebAssembly", "Deno", "Bun", "importScripts"];
            var found = names.filter(function (n) { return typeof globalThis[n] !== "undefined"; });
            getContext().getResponse().setBody({found: found, now: typeof Date.now()});
        }"#,
    )
    .await;
    let r = exec(&s, "probe", "p", json!([])).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.json["found"], json!([]), "{r:?}");
    assert_eq!(r.json["now"], json!("number"));
}

/// A stored procedure's response body is capped at the service's 2 MB: `setBody` past it
/// throws 413 where the script can catch it; uncaught, the call answers 413 and its writes
/// roll back. A body just under the cap is answered in full.
#[tokio::test]
async fn stored_procedure_responses_are_capped() {
    let s = server(5_000).await;
    // 40 references to one 1 MB string: 40 MB as JSON.
    sproc(
        &s,
        "huge",
        r#"function () {
            var c = getContext().getCollection();
            c.createDocument(c.getSelfLink(), {id: "written", pk: "p"});
            var big = new Array(1024 * 1024 + 1).join("x");
            var refs = [];
            for (var i = 0; i < 40; i++) refs.push(big);
            getContext().getResponse().setBody(refs);
        }"#,
    )
    .await;
    let r = exec(&s, "huge", "p", json!([])).await;
    assert_error(&r, 413, "RequestEntityTooLarge");
    assert!(r.message().contains("at most 2097152 bytes"), "{r:?}");
    assert_eq!(read(&s, "written", "p").await.status, StatusCode::NOT_FOUND);

    sproc(
        &s,
        "caught",
        r#"function () {
            var res = getContext().getResponse();
            try { res.setBody(new Array(3 * 1024 * 1024).join("y")); }
            catch (e) { res.setBody({caught: e.number, max: res.getMaxResponseBodySize()}); }
        }"#,
    )
    .await;
    let r = exec(&s, "caught", "p", json!([])).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.json, json!({"caught": 413, "max": 2097152}));

    // appendBody in a loop reaches the cap the same way.
    sproc(
        &s,
        "append",
        r#"function (n) {
            var res = getContext().getResponse(), chunk = new Array(64 * 1024 + 1).join("z");
            for (var i = 0; i < n; i++) res.appendBody(chunk);
        }"#,
    )
    .await;
    let r = exec(&s, "append", "p", json!([31])).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.bytes.len(), 31 * 64 * 1024 + 2);
    let r = exec(&s, "append", "p", json!([40])).await;
    assert_error(&r, 413, "RequestEntityTooLarge");
    s.stop().await;
}

/// Six looping stored procedures called at once on one container: they run one after the
/// other, each stopped at its budget, while a plain write waits for at most the one script
/// ahead of it (not for all six), and reads go on answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_runaway_scripts_delay_a_write_by_one_budget_at_most() {
    let budget = Duration::from_millis(1_000);
    let s = server(budget.as_millis() as u64).await;
    s.create(DB, "c", &json!(["p"]), json!({"id": "seed", "pk": "p"}))
        .await;
    sproc(&s, "forever", "function () { while (true) {} }").await;
    let scripts = futures::future::join_all((0..6).map(|_| exec(&s, "forever", "p", json!([]))));
    let write = async {
        // Once the scripts are all queued.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let t = Instant::now();
        let r = s
            .create(DB, "c", &json!(["p"]), json!({"id": "plain", "pk": "p"}))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
        let waited = t.elapsed();
        let t = Instant::now();
        assert_eq!(read(&s, "seed", "p").await.status, StatusCode::OK);
        (waited, t.elapsed())
    };
    let (results, (waited, read_took)) = tokio::join!(scripts, write);
    for r in &results {
        assert_error(r, 408, "RequestTimeout");
    }
    // One budget for the script ahead, and room for a slow machine; six budgets before.
    assert!(waited < budget * 3, "the write waited {waited:?}");
    assert!(read_took < budget, "a read waited {read_took:?}");
}
