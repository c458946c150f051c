//! The semantic reranker's inference endpoint over HTTP, in the shapes the Python SDK's
//! `semantic_rerank` sends and reads (`azure/cosmos/_inference_service.py`, azure-cosmos
//! 4.17.1): `POST /inference/semanticReranking` with a bearer Entra ID token for
//! `https://dbinference.azure.com`, `{"query", "documents", ...options}` in, `{"Scores":
//! [{"index", "score", "document"}]}` out; account keys and tokens for another audience are
//! refused (401), bad bodies answer 400 with the reason.

use serde_json::{json, Value};
use strata_query::protocol::EMULATOR_KEY;
use strata_server::api::security::aad::emulator_token;
use strata_tests::TestServer;

/// The unix time an hour from now.
fn in_an_hour() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        + 3600
}

/// A token signed the emulator's way (the account key as signature) for audience `aud`.
fn token(aud: &str) -> String {
    let t = emulator_token(EMULATOR_KEY, "rerank-test", in_an_hour());
    let mut parts: Vec<String> = t.split('.').map(str::to_string).collect();
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut claims: Value = serde_json::from_slice(&b64.decode(&parts[1]).unwrap()).unwrap();
    claims["aud"] = json!(aud);
    parts[1] = b64.encode(claims.to_string());
    parts.join(".")
}

async fn rerank(s: &TestServer, auth: &str, body: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{}inference/semanticReranking", s.url))
        .header("authorization", auth)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn rerank_answers_the_sdk_shape_with_entra_id_tokens_only() {
    let s = TestServer::start().await;
    let docs = [
        "Berlin is the capital of Germany.",
        "Paris is the capital of France.",
        "Madrid is the capital of Spain.",
    ];
    let body = json!({"query": "What is the capital of France?", "documents": docs, "return_documents": true, "top_k": 10, "batch_size": 32, "sort": true});
    let bearer = format!("Bearer {}", token("https://dbinference.azure.com"));
    let (status, v) = rerank(&s, &bearer, body.clone()).await;
    assert_eq!(status, 200, "{v}");
    let scores = v["Scores"].as_array().unwrap();
    assert_eq!(scores.len(), 3);
    assert_eq!(scores[0]["document"], docs[1]);
    assert_eq!(scores[0]["index"], 1);
    assert!(scores[0]["score"].as_f64().unwrap() > scores[1]["score"].as_f64().unwrap());
    // The official emulator's own token audience works too.
    let emulator = format!("Bearer {}", emulator_token(EMULATOR_KEY, "x", in_an_hour()));
    assert_eq!(rerank(&s, &emulator, body.clone()).await.0, 200);
    // Refused: the account key, a token for Cosmos DB's data plane, one signed otherwise.
    let scope = strata_query::protocol::AuthScope {
        resource_type: String::new(),
        resource_link: String::new(),
        signed_as: Default::default(),
    };
    let key = s.key.authorization(
        "post",
        &scope,
        &httpdate::fmt_http_date(std::time::SystemTime::now()),
    );
    for auth in [
        key,
        format!("Bearer {}", token("https://cosmos.azure.com")),
        format!("Bearer {}", emulator_token("c2VjcmV0", "x", in_an_hour())),
        String::new(),
    ] {
        let (status, v) = rerank(&s, &auth, body.clone()).await;
        assert_eq!(status, 401, "{auth}: {v}");
        assert_eq!(v["code"], "Unauthorized", "{v}");
    }
    // A bad body says what is wrong.
    let (status, v) = rerank(&s, &bearer, json!({"query": "x", "documents": [1]})).await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("documents[0]"),
        "{v}"
    );
    s.stop().await;
}
