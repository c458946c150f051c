//! Entra ID (AAD) tokens and data-plane RBAC: the official emulator's token shape is
//! accepted; without role assignments every principal may use the data plane (as the
//! emulator), never the management plane (403/5300); with assignments, a reader identity is
//! refused a write (403/5301, the service's message) and a contributor scoped to one
//! container writes there only; `--disable-local-auth` refuses the account key (401); with
//! a tenant's signing keys (`--entra-jwks`), real RS256 tokens of that tenant verify and are
//! held to the same roles.

use reqwest::Method;
use serde_json::{json, Value};
use strata_query::protocol::EMULATOR_KEY;
use strata_server::api::security::aad::{emulator_token, entra_token, Jwks};
use strata_tests::{Options, TestServer};

/// `authorization` for principal `oid`, as the SDKs' emulator credential builds it.
fn aad(oid: &str) -> String {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        + 3600;
    let raw = format!(
        "type=aad&ver=1.0&sig={}",
        emulator_token(EMULATOR_KEY, oid, exp)
    );
    percent_encoding::utf8_percent_encode(&raw, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// A request with `authorization`; returns the status, sub-status and body.
async fn call(
    s: &TestServer,
    auth: &str,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (u16, u32, Value) {
    let mut rb = reqwest::Client::new()
        .request(method, format!("{}{}", s.url.trim_end_matches('/'), path))
        .header("authorization", auth)
        .header(
            "x-ms-date",
            httpdate::fmt_http_date(std::time::SystemTime::now()),
        )
        .header("x-ms-version", "2020-07-15");
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    let r = rb.send().await.unwrap();
    let status = r.status().as_u16();
    let sub = r
        .headers()
        .get("x-ms-substatus")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (status, sub, r.json().await.unwrap_or(Value::Null))
}

async fn create_item(s: &TestServer, auth: &str, coll: &str, id: &str) -> (u16, u32, Value) {
    call(
        s,
        auth,
        Method::POST,
        &format!("/dbs/app/colls/{coll}/docs"),
        &[("x-ms-documentdb-partitionkey", "[\"t\"]")],
        Some(json!({"id": id, "pk": "t"})),
    )
    .await
}

async fn setup(s: &TestServer) {
    s.setup(
        "app",
        "c",
        json!({"paths": ["/pk"], "kind": "Hash", "version": 2}),
    )
    .await;
    s.setup(
        "app",
        "d",
        json!({"paths": ["/pk"], "kind": "Hash", "version": 2}),
    )
    .await;
}

#[tokio::test]
async fn without_roles_a_token_uses_the_data_plane_never_the_management_plane() {
    let s = TestServer::start().await;
    setup(&s).await;
    let me = aad("96313034-4739-43cb-93cd-74193adbe5b6");
    assert_eq!(create_item(&s, &me, "c", "1").await.0, 201);
    let (st, _, doc) = call(
        &s,
        &me,
        Method::GET,
        "/dbs/app/colls/c/docs/1",
        &[("x-ms-documentdb-partitionkey", "[\"t\"]")],
        None,
    )
    .await;
    assert_eq!((st, doc["id"].as_str()), (200, Some("1")));
    assert_eq!(
        call(&s, &me, Method::GET, "/dbs/app/colls/c", &[], None)
            .await
            .0,
        200
    );
    let (st, sub, body) = call(
        &s,
        &me,
        Method::POST,
        "/dbs",
        &[],
        Some(json!({"id": "new"})),
    )
    .await;
    assert_eq!((st, sub), (403, 5300), "{body}");
    assert_eq!(
        body["message"].as_str().unwrap().split("\r\n").next().unwrap(),
        "Request blocked by Auth strata : The given request [POST /dbs] cannot be authorized by AAD token in data plane. Learn more: https://aka.ms/cosmos-native-rbac."
    );
    // Tokens that are not this account's, or expired, are refused.
    let forged = percent_encoding::utf8_percent_encode(
        &format!(
            "type=aad&ver=1.0&sig={}",
            emulator_token("c2VjcmV0", "x", i64::MAX / 2)
        ),
        percent_encoding::NON_ALPHANUMERIC,
    )
    .to_string();
    assert_eq!(create_item(&s, &forged, "c", "2").await.0, 401);
    let expired = percent_encoding::utf8_percent_encode(
        &format!(
            "type=aad&ver=1.0&sig={}",
            emulator_token(EMULATOR_KEY, "x", 1_000_000)
        ),
        percent_encoding::NON_ALPHANUMERIC,
    )
    .to_string();
    let (st, _, body) = create_item(&s, &expired, "c", "2").await;
    assert!(
        st == 401 && body["message"].as_str().unwrap().contains("expired"),
        "{body}"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_reader_identity_is_denied_a_write_and_a_scoped_contributor_writes_only_there() {
    let s = TestServer::start().await;
    setup(&s).await;
    let policy = json!({
        "roleAssignments": [
            {"id": "r", "roleDefinitionId": "00000000-0000-0000-0000-000000000001", "principalId": "reader-oid", "scope": "/"},
            {"id": "w", "roleDefinitionId": "00000000-0000-0000-0000-000000000002", "principalId": "writer-oid", "scope": "/dbs/app/colls/c"}
        ]
    });
    let r = s
        .request(Method::PUT, "/_strata/rbac", &[], Some(policy))
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.json["roleDefinitions"][0]["roleName"],
        "Cosmos DB Built-in Data Reader"
    );
    let (reader, writer) = (aad("reader-oid"), aad("writer-oid"));

    assert_eq!(create_item(&s, &writer, "c", "1").await.0, 201);
    let (st, sub, body) = create_item(&s, &writer, "d", "1").await;
    assert_eq!((st, sub), (403, 5301), "{body}");

    let (st, _, _) = call(
        &s,
        &reader,
        Method::GET,
        "/dbs/app/colls/c/docs/1",
        &[("x-ms-documentdb-partitionkey", "[\"t\"]")],
        None,
    )
    .await;
    assert_eq!(st, 200);
    let (st, sub, body) = create_item(&s, &reader, "c", "2").await;
    assert_eq!((st, sub), (403, 5301));
    assert_eq!(
        body["message"].as_str().unwrap().split("\r\n").next().unwrap(),
        "Request blocked by Auth strata : Request is blocked because principal [reader-oid] does not have required RBAC permissions to perform action [Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/items/create] on resource [/dbs/app/colls/c]. Learn more: https://aka.ms/cosmos-native-rbac."
    );
    // Someone with no assignment may not even read the account's metadata.
    let (st, sub, _) = call(
        &s,
        &aad("stranger"),
        Method::GET,
        "/dbs/app/colls/c",
        &[],
        None,
    )
    .await;
    assert_eq!((st, sub), (403, 5301));
    // A policy naming a role that does not exist is refused whole.
    let bad = json!({"roleAssignments": [{"id": "x", "roleDefinitionId": "nope", "principalId": "p", "scope": "/"}]});
    let r = s
        .request(Method::PUT, "/_strata/rbac", &[], Some(bad))
        .await;
    strata_tests::assert_error(&r, 400, "BadRequest");
    s.stop().await;
}

#[tokio::test]
async fn with_local_auth_disabled_keys_are_refused() {
    let s = TestServer::start_with(Options {
        disable_local_auth: true,
        ..Default::default()
    })
    .await;
    let r = s.get("/dbs", &[]).await;
    assert_eq!(r.status, 401);
    assert!(
        r.message().starts_with(
            "Local Authorization is disabled. Use an AAD token to authorize all requests."
        ),
        "{}",
        r.message()
    );
    let (st, _, body) = call(&s, &aad("me"), Method::GET, "/dbs", &[], None).await;
    assert_eq!(st, 200, "{body}");
    s.stop().await;
}

/// With local authorization disabled the Data Explorer hands out no key-equivalent secret —
/// not on loopback, not for the account key — and signs in with an Entra ID token instead,
/// acting as that principal: management operations and the RBAC policy stay refused (403/5300),
/// as for the same token sent by an SDK.
#[tokio::test]
async fn without_local_auth_the_explorer_acts_as_a_signed_in_principal() {
    let s = TestServer::start_with(Options {
        disable_local_auth: true,
        ..Default::default()
    })
    .await;
    let http = reqwest::Client::new();
    let url = |p: &str| format!("{}{}", s.url.trim_end_matches('/'), p);
    let page = http
        .get(url("/_explorer/index.html"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(r#"name="strata-token" content="""#),
        "no secret in the page"
    );
    assert!(page.contains(r#"name="strata-auth" content="entra""#));
    let session = |body: Value| http.post(url("/_explorer/session")).json(&body).send();
    let r = session(json!({"key": EMULATOR_KEY})).await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let v: Value = r.json().await.unwrap();
    assert!(
        v["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Local Authorization is disabled"),
        "{v}"
    );
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        + 3600;
    let r = session(json!({"token": emulator_token(EMULATOR_KEY, "ann", exp)}))
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["principal"], "ann");
    let secret = v["token"].as_str().unwrap().to_string();
    let as_explorer = |method: Method, path: &str, body: Option<Value>| {
        let mut rb = http
            .request(method, url(path))
            .header("x-strata-explorer-token", secret.as_str());
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        rb.send()
    };
    let sub = |r: &reqwest::Response| {
        r.headers()
            .get("x-ms-substatus")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let r = as_explorer(Method::GET, "/dbs", None).await.unwrap();
    assert_eq!(r.status().as_u16(), 200, "a data-plane read");
    let r = as_explorer(Method::POST, "/dbs", Some(json!({"id": "x"})))
        .await
        .unwrap();
    assert_eq!(
        (r.status().as_u16(), sub(&r).as_deref()),
        (403, Some("5300"))
    );
    let r = as_explorer(
        Method::PUT,
        "/_strata/rbac",
        Some(json!({"roleAssignments": []})),
    )
    .await
    .unwrap();
    assert_eq!(
        r.status().as_u16(),
        403,
        "the RBAC policy is the account key's"
    );
    // A guessed secret is no session.
    let r = http
        .get(url("/dbs"))
        .header("x-strata-explorer-token", "0".repeat(48))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    s.stop().await;
}

#[tokio::test]
async fn real_entra_tokens_of_the_tenant_verify_and_are_held_to_their_roles() {
    const TENANT: &str = "0b6f3d1e-5c42-4d1a-9d5e-3f2a1c0e7b11";
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/data/entra");
    let jwks = Jwks::load(std::path::Path::new(&format!("{data}/jwks.json")), TENANT).unwrap();
    let pkcs8 = std::fs::read(format!("{data}/test-signing-key.pk8")).unwrap();
    let s = TestServer::start_with(Options {
        entra: Some(jwks),
        ..Default::default()
    })
    .await;
    setup(&s).await;
    let policy = json!({"roleAssignments": [
        {"id": "r", "roleDefinitionId": "00000000-0000-0000-0000-000000000001", "principalId": "bob-oid", "scope": "/"}
    ]});
    let r = s
        .request(Method::PUT, "/_strata/rbac", &[], Some(policy))
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let token = |tid: &str| {
        let claims = json!({"aud": "https://cosmos.azure.com", "tid": tid, "oid": "bob-oid",
            "iss": format!("https://login.microsoftonline.com/{tid}/v2.0"),
            "exp": now + 3600, "nbf": now - 60, "iat": now - 60});
        let jwt = entra_token(&pkcs8, "strata-test-key-1", &claims).unwrap();
        percent_encoding::utf8_percent_encode(
            &format!("type=aad&ver=1.0&sig={jwt}"),
            percent_encoding::NON_ALPHANUMERIC,
        )
        .to_string()
    };
    let bob = token(TENANT);
    let (st, _, body) = call(&s, &bob, Method::GET, "/dbs/app/colls/c", &[], None).await;
    assert_eq!(st, 200, "{body}");
    let (st, sub, body) = create_item(&s, &bob, "c", "1").await;
    assert_eq!((st, sub), (403, 5301), "{body}");
    // The same principal, signed by the same key, for another tenant.
    let (st, _, body) = call(
        &s,
        &token("11111111-2222-3333-4444-555555555555"),
        Method::GET,
        "/dbs/app/colls/c",
        &[],
        None,
    )
    .await;
    assert!(
        st == 401 && body["message"].as_str().unwrap().contains("tenant"),
        "{st} {body}"
    );
    s.stop().await;
}
