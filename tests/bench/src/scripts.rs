//! The scripts suite: what server-side JavaScript costs, in-process and in memory.
//!
//! * A UDF filter over every item (`WHERE udf.even(c.n)`, cross-partition, pages of 1,000)
//!   against the same filter in SQL (`WHERE c.n % 2 = 0`): items scanned per second of each,
//!   in alternating runs, and their ratio. Neither filter can use the index, so both read
//!   every document; the difference is the JavaScript call.
//! * A stored procedure that upserts one document, executed one call at a time, against the
//!   same upsert as a plain request: calls per second and their ratio (the price of a
//!   script thread, a fresh sandbox and the prelude per execution).

use crate::dataset::Dataset;
use crate::{in_process, load, Args, Report};
use reqwest::Method;
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

pub async fn scripts(a: &Args, r: &mut Report) {
    let items = if a.smoke { 2_000 } else { a.udf_items };
    println!("\n== scripts: UDF filter vs SQL filter over {items} items; sproc vs plain upsert ==");
    let (running, http) = in_process(None, None).await;
    let ds = Arc::new(Dataset::new(items, 256, a.tenants));
    http.setup("bench", "events", Dataset::definition(), Some(40_000))
        .await
        .expect("setup");
    load(&http, &ds, "events", 0, items, 64).await;
    let r1 = http
        .json(
            Method::POST,
            "/dbs/bench/colls/events/udfs",
            &[],
            &json!({"id": "even", "body": "function (n) { return n % 2 === 0; }"}),
        )
        .await
        .expect("create udf");
    assert_eq!(r1.status, 201, "create udf");

    let reps = if a.smoke { 1 } else { 5 };
    let (mut udf, mut sql) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        for (q, out) in [
            ("SELECT VALUE c.id FROM c WHERE udf.even(c.n)", &mut udf),
            ("SELECT VALUE c.id FROM c WHERE c.n % 2 = 0", &mut sql),
        ] {
            let t = Instant::now();
            let (rows, _) = http
                .query_all("bench", "events", q, json!([]), &[])
                .await
                .expect("query");
            assert_eq!(rows as u64, items.div_ceil(2), "{q}");
            out.push(items as f64 / t.elapsed().as_secs_f64());
        }
    }
    let (udf, sql) = (median(udf), median(sql));
    println!("  UDF filter  {udf:>12.0} items/s");
    println!("  SQL filter  {sql:>12.0} items/s");
    println!("  UDF / SQL   {:>12.2}", udf / sql);
    r.extra
        .insert("udf_filter_items_per_s".into(), json!(udf.round()));
    r.extra
        .insert("sql_filter_items_per_s".into(), json!(sql.round()));

    let r2 = http
        .json(
            Method::POST,
            "/dbs/bench/colls/events/sprocs",
            &[],
            &json!({"id": "put", "body": "function (d) { var c = getContext().getCollection(); c.upsertDocument(c.getSelfLink(), d, function (err, saved) { if (err) throw err; getContext().getResponse().setBody(saved._etag); }); }"}),
        )
        .await
        .expect("create sproc");
    assert_eq!(r2.status, 201, "create sproc");
    let calls = if a.smoke { 50 } else { 2_000 };
    let pk = ds.pk_header(0);
    let (mut via_sproc, mut plain) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let t = Instant::now();
        for i in 0..calls {
            let o = http
                .json(
                    Method::POST,
                    "/dbs/bench/colls/events/sprocs/put",
                    &[("x-ms-documentdb-partitionkey", &pk)],
                    &json!([ds.doc(0, i)]),
                )
                .await
                .expect("execute");
            assert_eq!(o.status, 200, "{}", String::from_utf8_lossy(&o.body));
        }
        via_sproc.push(calls as f64 / t.elapsed().as_secs_f64());
        let t = Instant::now();
        for i in 0..calls {
            let o = http
                .json(
                    Method::POST,
                    "/dbs/bench/colls/events/docs",
                    &[
                        ("x-ms-documentdb-partitionkey", &pk),
                        ("x-ms-documentdb-is-upsert", "true"),
                    ],
                    &ds.doc(0, i),
                )
                .await
                .expect("upsert");
            assert!(o.status < 300);
        }
        plain.push(calls as f64 / t.elapsed().as_secs_f64());
    }
    let (via_sproc, plain) = (median(via_sproc), median(plain));
    println!("  sproc upsert {via_sproc:>11.0} calls/s (one at a time)");
    println!("  plain upsert {plain:>11.0} calls/s (one at a time)");
    println!("  sproc / plain {:>10.2}", via_sproc / plain);
    r.extra
        .insert("sproc_upsert_calls_per_s".into(), json!(via_sproc.round()));
    r.extra
        .insert("plain_upsert_calls_per_s".into(), json!(plain.round()));
    running.stop().await.expect("stop");
}
