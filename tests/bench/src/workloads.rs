//! The named workloads of the throughput suite: each is an operation against a container
//! holding the dataset.

use crate::client::Http;
use crate::dataset::Dataset;
use crate::runner::Op;
use crate::{mix, ok};
use reqwest::Method;
use serde_json::json;
use std::sync::Arc;

/// The operation of a named workload against container `coll` holding `ds`.
pub fn workload(name: &str, http: &Http, ds: &Arc<Dataset>, coll: &str) -> Option<Op> {
    let (http, ds, coll) = (http.clone(), Arc::clone(ds), coll.to_string());
    let docs = format!("/dbs/bench/colls/{coll}/docs");
    let query_headers = |pk: Option<&str>| {
        let mut h = vec![
            ("x-ms-documentdb-isquery".to_string(), "true".to_string()),
            (
                "content-type".to_string(),
                "application/query+json".to_string(),
            ),
            (
                "x-ms-documentdb-query-enablecrosspartition".to_string(),
                "true".to_string(),
            ),
        ];
        if let Some(p) = pk {
            h.push(("x-ms-documentdb-partitionkey".to_string(), p.to_string()));
        }
        h
    };
    let read = {
        let (http, ds, docs) = (http.clone(), Arc::clone(&ds), docs.clone());
        move |n: u64| {
            let (http, ds, docs) = (http.clone(), Arc::clone(&ds), docs.clone());
            Box::pin(async move {
                let i = mix(n) % ds.items;
                let pk = ds.pk_header(i);
                ok(
                    http.send(
                        Method::GET,
                        &format!("{docs}/{}", Dataset::id(i)),
                        &[("x-ms-documentdb-partitionkey", &pk)],
                        None,
                    )
                    .await,
                    &[200],
                )
            }) as futures::future::BoxFuture<'static, Result<f64, String>>
        }
    };
    let upsert = {
        let (http, ds, docs) = (http.clone(), Arc::clone(&ds), docs.clone());
        move |n: u64| {
            let (http, ds, docs) = (http.clone(), Arc::clone(&ds), docs.clone());
            Box::pin(async move {
                let i = mix(n ^ 0x77) % ds.items;
                let pk = ds.pk_header(i);
                ok(
                    http.json(
                        Method::POST,
                        &docs,
                        &[
                            ("x-ms-documentdb-partitionkey", &pk),
                            ("x-ms-documentdb-is-upsert", "true"),
                        ],
                        &ds.doc(i, n),
                    )
                    .await,
                    &[200, 201],
                )
            }) as futures::future::BoxFuture<'static, Result<f64, String>>
        }
    };
    let op: Op = match name {
        "point-read" => Arc::new(read),
        "upsert" => Arc::new(upsert),
        "create" => {
            let base = ds.items * 1000
                + (std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() as u64)
                    .unwrap_or(0)
                    % 1_000_000)
                    * 1_000_000;
            Arc::new(move |n: u64| {
                let (http, ds, docs) = (http.clone(), Arc::clone(&ds), docs.clone());
                Box::pin(async move {
                    let i = base + n;
                    let pk = ds.pk_header(i);
                    ok(
                        http.json(
                            Method::POST,
                            &docs,
                            &[("x-ms-documentdb-partitionkey", &pk)],
                            &ds.doc(i, 0),
                        )
                        .await,
                        &[201],
                    )
                }) as futures::future::BoxFuture<'static, Result<f64, String>>
            })
        }
        "replace" => Arc::new(move |n: u64| {
            let (http, ds, docs) = (http.clone(), Arc::clone(&ds), docs.clone());
            Box::pin(async move {
                let i = mix(n ^ 0x99) % ds.items;
                let pk = ds.pk_header(i);
                ok(
                    http.json(
                        Method::PUT,
                        &format!("{docs}/{}", Dataset::id(i)),
                        &[("x-ms-documentdb-partitionkey", &pk)],
                        &ds.doc(i, n),
                    )
                    .await,
                    &[200],
                )
            }) as futures::future::BoxFuture<'static, Result<f64, String>>
        }),
        "single-partition-query" | "prefix-query" | "fan-out-query" => {
            let kind = name.to_string();
            Arc::new(move |n: u64| {
                let (http, ds, docs, kind) =
                    (http.clone(), Arc::clone(&ds), docs.clone(), kind.clone());
                let hdrs = query_headers(None);
                Box::pin(async move {
                    let i = mix(n ^ 0x33) % ds.items;
                    let (t, u, s) = ds.key(i);
                    let (sql, params, pk) = match kind.as_str() {
                        "single-partition-query" => (
                            "SELECT * FROM c WHERE c.TenantId = @t AND c.UserId = @u AND c.SessionId = @s",
                            json!([{"name": "@t", "value": t}, {"name": "@u", "value": u}, {"name": "@s", "value": s}]),
                            Some(ds.pk_header(i)),
                        ),
                        "prefix-query" => (
                            "SELECT * FROM c WHERE c.TenantId = @t AND c.UserId = @u",
                            json!([{"name": "@t", "value": t}, {"name": "@u", "value": u}]),
                            None,
                        ),
                        _ => ("SELECT TOP 10 c.id FROM c WHERE c.UserId = @u", json!([{"name": "@u", "value": u}]), None),
                    };
                    let mut h: Vec<(&str, &str)> =
                        hdrs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                    if let Some(p) = &pk {
                        h.push(("x-ms-documentdb-partitionkey", p));
                    }
                    ok(
                        http.json(
                            Method::POST,
                            &docs,
                            &h,
                            &json!({"query": sql, "parameters": params}),
                        )
                        .await,
                        &[200],
                    )
                }) as futures::future::BoxFuture<'static, Result<f64, String>>
            })
        }
        "mixed-a" | "mixed-b" => {
            let every = if name == "mixed-a" { 2 } else { 20 };
            Arc::new(move |n: u64| {
                if n.is_multiple_of(every) {
                    upsert(n)
                } else {
                    read(n)
                }
            })
        }
        _ => return None,
    };
    Some(op)
}

pub const WORKLOADS: &[&str] = &[
    "point-read",
    "upsert",
    "create",
    "replace",
    "single-partition-query",
    "prefix-query",
    "fan-out-query",
    "mixed-a",
    "mixed-b",
    "partition-query",
    "query-after-updates",
];
