//! Users, permissions and resource tokens over HTTP.
//!
//! * A table: every kind of endpoint (43 requests) × every kind of credential (none, a bad signature, a
//!   stale date, the master key, the read-only key, tenant-scoped tokens with Read and All,
//!   tokens for another tenant, another container, another database, an expired token and a
//!   token with a flipped byte). Each cell is either allowed (2xx) or refused (401/403); zero
//!   unexpected 2xx.
//! * A property test: a token scoped to a hierarchical-key prefix never reads or writes an
//!   item outside its prefix — point operations, cross-partition queries, the change feed —
//!   while the container splits underneath.

use proptest::prelude::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::collections::HashSet;
use strata_query::protocol::{auth_scope_of_path, MasterKey, EMULATOR_KEY};
use strata_server::store::container::Limits;
use strata_tests::{Options, Resp, TestServer};

const RO_KEY: &str = "cmVhZC1vbmx5LWtleS1mb3ItdGVzdHM=";
const HPK: &str =
    r#"{"paths": ["/TenantId", "/UserId", "/SessionId"], "kind": "MultiHash", "version": 2}"#;

/// A credential a request is sent with.
#[derive(Clone, Debug)]
enum Cred {
    None,
    BadSignature,
    StaleDate,
    Master,
    ReadOnly,
    Token(String),
}

async fn send(
    s: &TestServer,
    cred: &Cred,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> Resp {
    let scope = auth_scope_of_path(path);
    let now = std::time::SystemTime::now();
    let date = match cred {
        Cred::StaleDate => httpdate::fmt_http_date(now - std::time::Duration::from_secs(3600)),
        _ => httpdate::fmt_http_date(now),
    };
    let auth = match cred {
        Cred::None => None,
        Cred::BadSignature => Some(
            MasterKey::from_base64("d3Jvbmcta2V5")
                .unwrap()
                .authorization(method.as_str(), &scope, &date),
        ),
        Cred::StaleDate | Cred::Master => {
            Some(MasterKey::from_base64(EMULATOR_KEY).unwrap().authorization(
                method.as_str(),
                &scope,
                &date,
            ))
        }
        Cred::ReadOnly => Some(MasterKey::from_base64(RO_KEY).unwrap().authorization(
            method.as_str(),
            &scope,
            &date,
        )),
        Cred::Token(t) => Some(
            percent_encoding::utf8_percent_encode(t, percent_encoding::NON_ALPHANUMERIC)
                .to_string(),
        ),
    };
    let mut rb = s
        .client
        .http
        .request(method, format!("{}{path}", s.url.trim_end_matches('/')))
        .header("x-ms-date", &date)
        .header("x-ms-version", "2020-07-15");
    if let Some(a) = auth {
        rb = rb.header("authorization", a);
    }
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    if let Some(b) = body {
        rb = rb.body(b.to_string());
    }
    let r = rb.send().await.expect("request sent");
    let status = r.status();
    let headers = r.headers().clone();
    let bytes = r.bytes().await.unwrap_or_default();
    Resp {
        status,
        headers,
        json: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        bytes: bytes.to_vec(),
    }
}

async fn master(
    s: &TestServer,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> Resp {
    let r = send(s, &Cred::Master, method, path, headers, body).await;
    assert!(r.status.is_success(), "setup {path}: {r:?}");
    r
}

async fn token(
    s: &TestServer,
    user: &str,
    id: &str,
    resource: &str,
    mode: &str,
    pk: Option<Value>,
    expiry: Option<&str>,
) -> String {
    let mut body = json!({"id": id, "permissionMode": mode, "resource": resource});
    if let Some(pk) = pk {
        body["resourcePartitionKey"] = pk;
    }
    let mut h = vec![];
    if let Some(e) = expiry {
        h.push(("x-ms-documentdb-expiry-seconds", e));
    }
    let r = master(
        s,
        Method::POST,
        &format!("/dbs/app/users/{user}/permissions"),
        &h,
        Some(body),
    )
    .await;
    let t = r.json["_token"].as_str().expect("token").to_string();
    assert!(t.starts_with("type=resource&ver=1.0&sig="), "{t}");
    t
}

fn key(t: &str) -> String {
    json!([t, "u1", "s1"]).to_string()
}

/// One request of the table: what it is, and who may make it.
struct Case {
    name: &'static str,
    method: Method,
    path: String,
    headers: Vec<(&'static str, String)>,
    body: Option<Value>,
    /// Credentials (by label) allowed to make it.
    allowed: &'static [&'static str],
}

const READERS: &[&str] = &["master", "read-only", "tenant-read", "tenant-all"];

#[tokio::test]
async fn every_endpoint_against_every_credential() {
    let s = TestServer::start_with(Options {
        read_only_key: Some(RO_KEY.into()),
        ..Options::default()
    })
    .await;
    let hpk: Value = serde_json::from_str(HPK).unwrap();
    master(&s, Method::POST, "/dbs", &[], Some(json!({"id": "app"}))).await;
    master(
        &s,
        Method::POST,
        "/dbs",
        &[],
        Some(json!({"id": "otherdb"})),
    )
    .await;
    for (db, coll) in [("app", "sessions"), ("app", "other"), ("otherdb", "c")] {
        master(
            &s,
            Method::POST,
            &format!("/dbs/{db}/colls"),
            &[],
            Some(json!({"id": coll, "partitionKey": hpk})),
        )
        .await;
    }
    for t in ["contoso", "fabrikam"] {
        master(
            &s,
            Method::POST,
            "/dbs/app/colls/sessions/docs",
            &[("x-ms-documentdb-partitionkey", &key(t))],
            Some(json!({"id": "seed", "TenantId": t, "UserId": "u1", "SessionId": "s1", "n": 1})),
        )
        .await;
    }
    master(&s, Method::POST, "/dbs/app/colls/sessions/sprocs", &[], Some(json!({"id": "count",
        "body": "function () { var c = getContext().getCollection(); c.queryDocuments(c.getSelfLink(), 'SELECT VALUE COUNT(1) FROM c', function (e, r) { if (e) throw e; getContext().getResponse().setBody(r[0]); }); }"}))).await;
    master(
        &s,
        Method::POST,
        "/dbs/app/users",
        &[],
        Some(json!({"id": "alice"})),
    )
    .await;
    let sessions = "dbs/app/colls/sessions";
    let mut creds: Vec<(&str, Cred)> = vec![
        ("none", Cred::None),
        ("bad-signature", Cred::BadSignature),
        ("stale-date", Cred::StaleDate),
        ("master", Cred::Master),
        ("read-only", Cred::ReadOnly),
        (
            "tenant-read",
            Cred::Token(
                token(
                    &s,
                    "alice",
                    "r",
                    sessions,
                    "Read",
                    Some(json!(["contoso"])),
                    None,
                )
                .await,
            ),
        ),
        (
            "tenant-all",
            Cred::Token(
                token(
                    &s,
                    "alice",
                    "a",
                    sessions,
                    "All",
                    Some(json!(["contoso"])),
                    None,
                )
                .await,
            ),
        ),
        (
            "other-tenant",
            Cred::Token(
                token(
                    &s,
                    "alice",
                    "f",
                    sessions,
                    "All",
                    Some(json!(["fabrikam"])),
                    None,
                )
                .await,
            ),
        ),
        (
            "other-container",
            Cred::Token(token(&s, "alice", "o", "dbs/app/colls/other", "All", None, None).await),
        ),
        (
            "other-database",
            Cred::Token(token(&s, "alice", "d", "dbs/otherdb/colls/c", "All", None, None).await),
        ),
    ];
    // Retired and expired tokens: a deleted permission, a replaced one, one past its expiry.
    let deleted = token(&s, "alice", "gone", sessions, "All", None, None).await;
    master(
        &s,
        Method::DELETE,
        "/dbs/app/users/alice/permissions/gone",
        &[],
        None,
    )
    .await;
    creds.push(("deleted-permission", Cred::Token(deleted)));
    let replaced = token(
        &s,
        "alice",
        "swap",
        sessions,
        "Read",
        Some(json!(["contoso"])),
        None,
    )
    .await;
    master(
        &s,
        Method::PUT,
        "/dbs/app/users/alice/permissions/swap",
        &[],
        Some(json!({"id": "swap", "permissionMode": "All", "resource": sessions})),
    )
    .await;
    creds.push(("replaced-permission", Cred::Token(replaced)));
    let expiring = token(&s, "alice", "short", sessions, "All", None, Some("10")).await;
    let flipped = {
        let all = match &creds[6].1 {
            Cred::Token(t) => t.clone(),
            _ => unreachable!(),
        };
        let mut b = all.into_bytes();
        let i = b.len() - 5;
        b[i] = if b[i] == b'A' { b'B' } else { b'A' };
        String::from_utf8(b).unwrap()
    };
    creds.push(("flipped-byte", Cred::Token(flipped)));

    // The table. Resources a request destroys or creates are named per credential ({i}).
    let ck = key("contoso");
    let fk = key("fabrikam");
    let q = |b: &str| Some(json!({"query": b, "parameters": []}));
    let query_h = |pk: Option<&str>| {
        let mut h = vec![
            ("x-ms-documentdb-isquery", "true".to_string()),
            ("content-type", "application/query+json".to_string()),
            (
                "x-ms-documentdb-query-enablecrosspartition",
                "true".to_string(),
            ),
        ];
        if let Some(pk) = pk {
            h.push(("x-ms-documentdb-partitionkey", pk.to_string()));
        }
        h
    };
    let pk_h = |k: &str| vec![("x-ms-documentdb-partitionkey", k.to_string())];
    let cases = |i: usize| -> Vec<Case> {
        let doc = |t: &str, id: String| json!({"id": id, "TenantId": t, "UserId": "u1", "SessionId": "s1"});
        vec![
            Case {
                name: "read account",
                method: Method::GET,
                path: "/".into(),
                headers: vec![],
                body: None,
                allowed: &[
                    "master",
                    "read-only",
                    "tenant-read",
                    "tenant-all",
                    "other-tenant",
                    "other-container",
                    "other-database",
                ],
            },
            Case {
                name: "list databases",
                method: Method::GET,
                path: "/dbs".into(),
                headers: vec![],
                body: None,
                allowed: &["master", "read-only"],
            },
            Case {
                name: "create database",
                method: Method::POST,
                path: "/dbs".into(),
                headers: vec![],
                body: Some(json!({"id": format!("new{i}")})),
                allowed: &["master"],
            },
            Case {
                name: "read database",
                method: Method::GET,
                path: "/dbs/app".into(),
                headers: vec![],
                body: None,
                allowed: &[
                    "master",
                    "read-only",
                    "tenant-read",
                    "tenant-all",
                    "other-tenant",
                    "other-container",
                ],
            },
            Case {
                name: "delete database",
                method: Method::DELETE,
                path: format!("/dbs/gone{i}"),
                headers: vec![],
                body: None,
                allowed: &["master"],
            },
            Case {
                name: "list containers",
                method: Method::GET,
                path: "/dbs/app/colls".into(),
                headers: vec![],
                body: None,
                allowed: &["master", "read-only"],
            },
            Case {
                name: "read container",
                method: Method::GET,
                path: "/dbs/app/colls/sessions".into(),
                headers: vec![],
                body: None,
                allowed: &[
                    "master",
                    "read-only",
                    "tenant-read",
                    "tenant-all",
                    "other-tenant",
                ],
            },
            Case {
                name: "replace container",
                method: Method::PUT,
                path: "/dbs/app/colls/sessions".into(),
                headers: vec![],
                body: Some(
                    json!({"id": "sessions", "partitionKey": serde_json::from_str::<Value>(HPK).unwrap()}),
                ),
                allowed: &["master"],
            },
            Case {
                name: "delete container",
                method: Method::DELETE,
                path: format!("/dbs/app/colls/doomed{i}"),
                headers: vec![],
                body: None,
                allowed: &["master"],
            },
            Case {
                name: "read other container",
                method: Method::GET,
                path: "/dbs/app/colls/other".into(),
                headers: vec![],
                body: None,
                allowed: &["master", "read-only", "other-container"],
            },
            Case {
                name: "read other database's container",
                method: Method::GET,
                path: "/dbs/otherdb/colls/c".into(),
                headers: vec![],
                body: None,
                allowed: &["master", "read-only", "other-database"],
            },
            Case {
                name: "partition key ranges",
                method: Method::GET,
                path: "/dbs/app/colls/sessions/pkranges".into(),
                headers: vec![],
                body: None,
                allowed: &[
                    "master",
                    "read-only",
                    "tenant-read",
                    "tenant-all",
                    "other-tenant",
                ],
            },
            Case {
                name: "create in own tenant",
                method: Method::POST,
                path: "/dbs/app/colls/sessions/docs".into(),
                headers: pk_h(&ck),
                body: Some(doc("contoso", format!("new{i}"))),
                allowed: &["master", "tenant-all"],
            },
            Case {
                name: "create in own tenant, key from the body",
                method: Method::POST,
                path: "/dbs/app/colls/sessions/docs".into(),
                headers: vec![],
                body: Some(doc("contoso", format!("body{i}"))),
                allowed: &["master", "tenant-all"],
            },
            Case {
                name: "create in other tenant",
                method: Method::POST,
                path: "/dbs/app/colls/sessions/docs".into(),
                headers: pk_h(&fk),
                body: Some(doc("fabrikam", format!("new{i}"))),
                allowed: &["master", "other-tenant"],
            },
            Case {
                name: "read own tenant's item",
                method: Method::GET,
                path: "/dbs/app/colls/sessions/docs/seed".into(),
                headers: pk_h(&ck),
                body: None,
                allowed: READERS,
            },
            Case {
                name: "read other tenant's item",
                method: Method::GET,
                path: "/dbs/app/colls/sessions/docs/seed".into(),
                headers: pk_h(&fk),
                body: None,
                allowed: &["master", "read-only", "other-tenant"],
            },
            Case {
                name: "replace own tenant's item",
                method: Method::PUT,
                path: "/dbs/app/colls/sessions/docs/seed".into(),
                headers: pk_h(&ck),
                body: Some(doc("contoso", "seed".into())),
                allowed: &["master", "tenant-all"],
            },
            Case {
                name: "patch own tenant's item",
                method: Method::PATCH,
                path: "/dbs/app/colls/sessions/docs/seed".into(),
                headers: pk_h(&ck),
                body: Some(json!({"operations": [{"op": "set", "path": "/n", "value": 2}]})),
                allowed: &["master", "tenant-all"],
            },
            Case {
                name: "delete own tenant's item",
                method: Method::DELETE,
                path: format!("/dbs/app/colls/sessions/docs/del{i}"),
                headers: pk_h(&ck),
                body: None,
                allowed: &["master", "tenant-all"],
            },
            Case {
                name: "delete other tenant's item",
                method: Method::DELETE,
                path: format!("/dbs/app/colls/sessions/docs/del{i}"),
                headers: pk_h(&fk),
                body: None,
                allowed: &["master", "other-tenant"],
            },
            Case {
                name: "query across partitions",
                method: Method::POST,
                path: "/dbs/app/colls/sessions/docs".into(),
                headers: query_h(None),
                body: q("SELECT * FROM c"),
                allowed: &[
                    "master",
                    "read-only",
                    "tenant-read",
                    "tenant-all",
                    "other-tenant",
                ],
            },
            Case {
                name: "query another tenant's key",
                method: Method::POST,
                path: "/dbs/app/colls/sessions/docs".into(),
                headers: query_h(Some(&fk)),
                body: q("SELECT * FROM c"),
                allowed: &["master", "read-only", "other-tenant"],
            },
            Case {
                name: "read feed",
                method: Method::GET,
                path: "/dbs/app/colls/sessions/docs".into(),
                headers: vec![],
                body: None,
                allowed: &[
                    "master",
                    "read-only",
                    "tenant-read",
                    "tenant-all",
                    "other-tenant",
                ],
            },
            Case {
                name: "change feed",
                method: Method::GET,
                path: "/dbs/app/colls/sessions/docs".into(),
                headers: vec![("a-im", "Incremental Feed".into())],
                body: None,
                allowed: &[
                    "master",
                    "read-only",
                    "tenant-read",
                    "tenant-all",
                    "other-tenant",
                ],
            },
            Case {
                name: "batch in own tenant",
                method: Method::POST,
                path: "/dbs/app/colls/sessions/docs".into(),
                headers: vec![
                    ("x-ms-cosmos-is-batch-request", "True".into()),
                    ("x-ms-cosmos-batch-atomic", "True".into()),
                    ("x-ms-documentdb-partitionkey", ck.clone()),
                ],
                body: Some(
                    json!([{"operationType": "Upsert", "resourceBody": doc("contoso", format!("b{i}"))}]),
                ),
                allowed: &["master", "tenant-all"],
            },
            Case {
                name: "delete own tenant's partition",
                method: Method::POST,
                path: "/dbs/app/colls/sessions/operations/partitionkeydelete".into(),
                headers: pk_h(&json!(["contoso", format!("nobody{i}")]).to_string()),
                body: None,
                allowed: &["master", "tenant-all"],
            },
            Case {
                name: "execute sproc in own tenant",
                method: Method::POST,
                path: "/dbs/app/colls/sessions/sprocs/count".into(),
                headers: pk_h(&ck),
                body: Some(json!([])),
                allowed: &["master", "tenant-all"],
            },
            Case {
                name: "list sprocs",
                method: Method::GET,
                path: "/dbs/app/colls/sessions/sprocs".into(),
                headers: vec![],
                body: None,
                allowed: &[
                    "master",
                    "read-only",
                    "tenant-read",
                    "tenant-all",
                    "other-tenant",
                ],
            },
            Case {
                name: "create sproc",
                method: Method::POST,
                path: "/dbs/app/colls/sessions/sprocs".into(),
                headers: vec![],
                body: Some(json!({"id": format!("p{i}"), "body": "function () {}"})),
                allowed: &["master"],
            },
            Case {
                name: "list users",
                method: Method::GET,
                path: "/dbs/app/users".into(),
                headers: vec![],
                body: None,
                allowed: &["master", "read-only"],
            },
            Case {
                name: "create user",
                method: Method::POST,
                path: "/dbs/app/users".into(),
                headers: vec![],
                body: Some(json!({"id": format!("u{i}")})),
                allowed: &["master"],
            },
            Case {
                name: "read permission",
                method: Method::GET,
                path: "/dbs/app/users/alice/permissions/a".into(),
                headers: vec![],
                body: None,
                allowed: &["master"],
            },
            Case {
                name: "list offers",
                method: Method::GET,
                path: "/offers".into(),
                headers: vec![],
                body: None,
                allowed: &["master", "read-only"],
            },
        ]
    };
    // Per-credential resources the destructive cases use.
    for i in 0..creds.len() + 1 {
        master(
            &s,
            Method::POST,
            "/dbs",
            &[],
            Some(json!({"id": format!("gone{i}")})),
        )
        .await;
        master(
            &s,
            Method::POST,
            "/dbs/app/colls",
            &[],
            Some(json!({"id": format!("doomed{i}"), "partitionKey": hpk})),
        )
        .await;
        for t in ["contoso", "fabrikam"] {
            master(&s, Method::POST, "/dbs/app/colls/sessions/docs", &[("x-ms-documentdb-partitionkey", &key(t))],
                Some(json!({"id": format!("del{i}"), "TenantId": t, "UserId": "u1", "SessionId": "s1"}))).await;
        }
        master(
            &s,
            Method::POST,
            "/dbs/app/colls/sessions/sprocs",
            &[],
            Some(json!({"id": format!("s{i}"), "body": "function () {}"})),
        )
        .await;
        master(
            &s,
            Method::POST,
            "/dbs/app/users",
            &[],
            Some(json!({"id": format!("x{i}")})),
        )
        .await;
    }
    let mut unexpected = Vec::new();
    let mut cells = 0;
    for (i, (label, cred)) in creds.iter().enumerate() {
        for c in cases(i) {
            let h: Vec<(&str, &str)> = c.headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let r = send(&s, cred, c.method.clone(), &c.path, &h, c.body.clone()).await;
            cells += 1;
            let allowed = c.allowed.contains(label);
            // Every request here carries x-ms-version, as the SDKs' do: an unsigned GET / is
            // refused like the rest (the bare readiness probe is `tests/explorer.rs`'s).
            let ok = if allowed {
                r.status.is_success()
            } else {
                matches!(r.status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
                    && r.json["code"].is_string()
            };
            if !ok {
                unexpected.push(format!(
                    "{label} × {}: {} {}",
                    c.name,
                    r.status,
                    r.message()
                ));
            }
            // What a tenant-scoped token read is only its tenant's.
            if allowed && r.status.is_success() && label.starts_with("tenant") {
                for d in r.json["Documents"].as_array().into_iter().flatten() {
                    assert_eq!(d["TenantId"], json!("contoso"), "{label} × {}: {d}", c.name);
                }
            }
        }
    }
    assert!(
        unexpected.is_empty(),
        "{} of {cells} cells unexpected:\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
    assert!(cells > 400, "{cells}");
    // Expiry: the short token works, then is refused once its ten seconds pass.
    let short = Cred::Token(expiring);
    let r = send(
        &s,
        &short,
        Method::GET,
        "/dbs/app/colls/sessions",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    tokio::time::sleep(std::time::Duration::from_secs(11)).await;
    let r = send(
        &s,
        &short,
        Method::GET,
        "/dbs/app/colls/sessions",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{r:?}");
    assert!(r.message().contains("expired"), "{r:?}");
}

#[tokio::test]
async fn users_and_permissions_have_the_service_lifecycle() {
    let s = TestServer::start().await;
    master(&s, Method::POST, "/dbs", &[], Some(json!({"id": "app"}))).await;
    let r = master(
        &s,
        Method::POST,
        "/dbs/app/users",
        &[],
        Some(json!({"id": "alice"})),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED);
    for k in ["_rid", "_self", "_etag", "_ts", "_permissions"] {
        assert!(r.json.get(k).is_some(), "{k}: {r:?}");
    }
    let dup = send(
        &s,
        &Cred::Master,
        Method::POST,
        "/dbs/app/users",
        &[],
        Some(json!({"id": "alice"})),
    )
    .await;
    assert_eq!(dup.status, StatusCode::CONFLICT);
    let p = master(&s, Method::POST, "/dbs/app/users/alice/permissions", &[],
        Some(json!({"id": "p", "permissionMode": "Read", "resource": "dbs/app/colls/c", "resourcePartitionKey": ["t1"]}))).await;
    assert_eq!(p.json["permissionMode"], json!("read"));
    assert_eq!(p.json["resourcePartitionKey"], json!(["t1"]));
    // Renaming the user keeps its permissions (and their tokens).
    let t = p.json["_token"].as_str().unwrap().to_string();
    master(
        &s,
        Method::PUT,
        "/dbs/app/users/alice",
        &[],
        Some(json!({"id": "alicia"})),
    )
    .await;
    let r = master(
        &s,
        Method::GET,
        "/dbs/app/users/alicia/permissions",
        &[],
        None,
    )
    .await;
    assert_eq!(r.json["_count"], json!(1), "{r:?}");
    let r = send(&s, &Cred::Token(t.clone()), Method::GET, "/", &[], None).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    // Bad permissions are 400s.
    for bad in [
        json!({"id": "x", "permissionMode": "Write", "resource": "dbs/app/colls/c"}),
        json!({"id": "x", "permissionMode": "All"}),
        json!({"id": "x", "permissionMode": "All", "resource": "nowhere"}),
        json!({"id": "x", "permissionMode": "All", "resource": "dbs/app/colls/c", "resourcePartitionKey": "t1"}),
    ] {
        let r = send(
            &s,
            &Cred::Master,
            Method::POST,
            "/dbs/app/users/alicia/permissions",
            &[],
            Some(bad),
        )
        .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{r:?}");
    }
    let r = send(
        &s,
        &Cred::Master,
        Method::GET,
        "/dbs/app/users/alicia/permissions/p",
        &[("x-ms-documentdb-expiry-seconds", "999999")],
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{r:?}");
    // Deleting the database removes its users; their tokens stop working.
    master(&s, Method::DELETE, "/dbs/app", &[], None).await;
    let r = send(&s, &Cred::Token(t), Method::GET, "/", &[], None).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{r:?}");
}

/// Users, permissions and their tokens survive a restart.
#[tokio::test]
async fn permissions_are_durable() {
    let dir = strata_tests::TempDir::new("perms");
    let opts = Options {
        data_dir: Some(dir.0.clone()),
        ..Options::default()
    };
    let s = TestServer::start_with(opts.clone()).await;
    master(&s, Method::POST, "/dbs", &[], Some(json!({"id": "app"}))).await;
    master(
        &s,
        Method::POST,
        "/dbs/app/colls",
        &[],
        Some(json!({"id": "c", "partitionKey": {"paths": ["/t"], "kind": "Hash", "version": 2}})),
    )
    .await;
    master(
        &s,
        Method::POST,
        "/dbs/app/users",
        &[],
        Some(json!({"id": "bob"})),
    )
    .await;
    let t = token(
        &s,
        "bob",
        "p",
        "dbs/app/colls/c",
        "All",
        Some(json!(["x"])),
        None,
    )
    .await;
    s.stop().await;
    let s = TestServer::start_with(opts).await;
    let r = send(
        &s,
        &Cred::Token(t),
        Method::POST,
        "/dbs/app/colls/c/docs",
        &[("x-ms-documentdb-partitionkey", "[\"x\"]")],
        Some(json!({"id": "1", "t": "x"})),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    s.stop().await;
}

const TENANTS: [&str; 4] = ["t0", "t1", "t2", "t3"];
const USERS: [&str; 3] = ["u0", "u1", "u2"];

#[derive(Debug, Clone)]
enum Probe {
    Read { t: usize, u: usize, n: usize },
    Create { t: usize, u: usize, n: usize },
    Query { filter: usize },
    ChangeFeed,
}

fn probe() -> impl Strategy<Value = Probe> {
    prop_oneof![
        (0..4usize, 0..3usize, 0..40usize).prop_map(|(t, u, n)| Probe::Read { t, u, n }),
        (0..4usize, 0..3usize, 0..1000usize).prop_map(|(t, u, n)| Probe::Create { t, u, n }),
        (0..3usize).prop_map(|filter| Probe::Query { filter }),
        Just(Probe::ChangeFeed),
    ]
}

fn in_scope(doc: &Value, t: usize, u: Option<usize>) -> bool {
    doc["TenantId"] == json!(TENANTS[t]) && u.is_none_or(|u| doc["UserId"] == json!(USERS[u]))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// A token for a tenant (or tenant › user) prefix never reads or writes outside it, also
    /// through cross-partition queries, the read feed and the change feed, while the
    /// container splits.
    #[test]
    fn a_prefix_token_never_leaves_its_prefix(
        t in 0..4usize,
        u in proptest::option::of(0..3usize),
        probes in proptest::collection::vec(probe(), 1..12),
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async move {
            let s = TestServer::start_with(Options {
                limits: Some(Limits { partition_split_bytes: 48 * 1024, ..Limits::default() }),
                ..Options::default()
            }).await;
            let hpk: Value = serde_json::from_str(HPK).unwrap();
            master(&s, Method::POST, "/dbs", &[], Some(json!({"id": "app"}))).await;
            master(&s, Method::POST, "/dbs/app/colls", &[], Some(json!({"id": "sessions", "partitionKey": hpk}))).await;
            for i in 0..120 {
                let (tt, uu) = (TENANTS[i % 4], USERS[i % 3]);
                let k = json!([tt, uu, "s"]).to_string();
                master(&s, Method::POST, "/dbs/app/colls/sessions/docs", &[("x-ms-documentdb-partitionkey", &k)],
                    Some(json!({"id": format!("d{}", i / 12), "TenantId": tt, "UserId": uu, "SessionId": "s", "pad": "p".repeat(600)}))).await;
            }
            master(&s, Method::POST, "/dbs/app/users", &[], Some(json!({"id": "app-user"}))).await;
            let prefix = match u {
                Some(u) => json!([TENANTS[t], USERS[u]]),
                None => json!([TENANTS[t]]),
            };
            let tok = Cred::Token(token(&s, "app-user", "p", "dbs/app/colls/sessions", "All", Some(prefix), None).await);
            let mut created_outside = HashSet::new();
            for p in &probes {
                match p {
                    Probe::Read { t: rt_, u: ru, n } => {
                        let k = json!([TENANTS[*rt_], USERS[*ru], "s"]).to_string();
                        let r = send(&s, &tok, Method::GET, &format!("/dbs/app/colls/sessions/docs/d{n}"), &[("x-ms-documentdb-partitionkey", &k)], None).await;
                        let inside = *rt_ == t && u.is_none_or(|u| u == *ru);
                        if !inside {
                            assert_eq!(r.status, StatusCode::FORBIDDEN, "read outside: {r:?}");
                        } else {
                            assert!(r.status == StatusCode::OK || r.status == StatusCode::NOT_FOUND, "{r:?}");
                        }
                    }
                    Probe::Create { t: ct, u: cu, n } => {
                        let (tt, uu) = (TENANTS[*ct], USERS[*cu]);
                        let id = format!("c{n}");
                        let body = json!({"id": id, "TenantId": tt, "UserId": uu, "SessionId": "s", "pad": "q".repeat(900)});
                        // Half with the header, half routed by the body's own key.
                        let k = json!([tt, uu, "s"]).to_string();
                        let h: Vec<(&str, &str)> = if n % 2 == 0 { vec![("x-ms-documentdb-partitionkey", &k), ("x-ms-documentdb-is-upsert", "true")] } else { vec![("x-ms-documentdb-is-upsert", "true")] };
                        let r = send(&s, &tok, Method::POST, "/dbs/app/colls/sessions/docs", &h, Some(body)).await;
                        let inside = *ct == t && u.is_none_or(|u| u == *cu);
                        if inside {
                            assert!(r.status.is_success(), "{r:?}");
                        } else {
                            assert_eq!(r.status, StatusCode::FORBIDDEN, "write outside: {r:?}");
                            created_outside.insert((k, id));
                        }
                    }
                    Probe::Query { filter } => {
                        let sql = ["SELECT * FROM c", "SELECT * FROM c WHERE c.UserId = 'u1'", "SELECT c.id, c.TenantId, c.UserId FROM c ORDER BY c.id"][*filter];
                        let mut cont: Option<String> = None;
                        loop {
                            let mut h = vec![("x-ms-documentdb-isquery", "true"), ("content-type", "application/query+json"),
                                ("x-ms-documentdb-query-enablecrosspartition", "true"), ("x-ms-max-item-count", "7")];
                            if let Some(c) = &cont { h.push(("x-ms-continuation", c)); }
                            let r = send(&s, &tok, Method::POST, "/dbs/app/colls/sessions/docs", &h, Some(json!({"query": sql}))).await;
                            assert_eq!(r.status, StatusCode::OK, "{r:?}");
                            for d in r.json["Documents"].as_array().into_iter().flatten() {
                                assert!(in_scope(d, t, u), "query leaked {d}");
                            }
                            cont = r.header("x-ms-continuation").map(str::to_string);
                            if cont.is_none() { break; }
                        }
                    }
                    Probe::ChangeFeed => {
                        // By every physical partition, as the SDKs read it.
                        let ranges = send(&s, &Cred::Master, Method::GET, "/dbs/app/colls/sessions/pkranges", &[], None).await;
                        for r in ranges.json["PartitionKeyRanges"].as_array().into_iter().flatten() {
                            let id = r["id"].as_str().unwrap().to_string();
                            let f = send(&s, &tok, Method::GET, "/dbs/app/colls/sessions/docs",
                                &[("a-im", "Incremental Feed"), ("x-ms-documentdb-partitionkeyrangeid", &id), ("x-ms-max-item-count", "1000")], None).await;
                            assert!(f.status.is_success() || f.status == StatusCode::NOT_MODIFIED || f.status == StatusCode::GONE, "{f:?}");
                            for d in f.json["Documents"].as_array().into_iter().flatten() {
                                assert!(in_scope(d, t, u), "change feed leaked {d}");
                            }
                        }
                    }
                }
            }
            let ranges = send(&s, &Cred::Master, Method::GET, "/dbs/app/colls/sessions/pkranges", &[], None).await;
            assert!(ranges.json["_count"].as_u64().unwrap_or(0) > 1, "the container split: {ranges:?}");
            // Nothing refused was written.
            for (k, id) in created_outside {
                let r = send(&s, &Cred::Master, Method::GET, &format!("/dbs/app/colls/sessions/docs/{id}"), &[("x-ms-documentdb-partitionkey", &k)], None).await;
                assert_eq!(r.status, StatusCode::NOT_FOUND, "a refused write landed: {r:?}");
            }
            s.stop().await;
        });
    }
}
