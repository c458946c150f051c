//! The wire suite: strata-sdk with Cosmos binary JSON (`binary_encoding(true)`, what
//! `azure_data_cosmos` 1.0 does by default) against the same SDK with JSON text, on one
//! in-process, in-memory strata (no disk, so the format's cost is not hidden behind fsync),
//! in alternating slices: point reads and upserts of a 1 KB item, ops/s of each and their
//! ratio, and the bytes each puts on the wire per operation (request and answer bodies).
//!
//! The item is a typical application document of about 1 KB: short strings, numbers,
//! booleans, a nested object and arrays (not one long padding string, which no format
//! compresses).

use crate::client::Http;
use crate::runner::{self, Measured, Op};
use crate::{in_process, mix, print_rows, Args, Report};
use reqwest::Method;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use strata_query::binary;
use strata_sdk::{
    ContainerClient, ContainerProperties, CosmosClient, ItemOptions, PartitionKeyDefinition,
    EMULATOR_KEY,
};

/// Item `i`, about 1 KB as JSON text.
fn item(i: u64, v: u64) -> Value {
    json!({
        "id": format!("order-{i}"), "tenantId": format!("tenant-{}", i % 50),
        "customer": {"name": "Ada Lovelace", "email": "ada@example.com", "tier": "gold",
                     "since": "2021-03-14T09:26:53Z", "verified": true},
        "status": "shipped", "version": v, "total": 1234.5 + i as f64, "currency": "EUR",
        "items": (0..6).map(|k| json!({"sku": format!("SKU-{:05}", (i + k) % 99_999),
            "qty": 1 + k, "price": 19.99 + k as f64, "gift": k % 2 == 0})).collect::<Vec<_>>(),
        "tags": ["priority", "eu", "returning-customer"],
        "scores": [0.12, 0.5, 0.99, 1.0, 3.25],
        "address": {"line1": "12 Analytical Engine Way", "city": "London", "zip": "NW1 2DB",
                    "country": "GB", "geo": {"type": "Point", "coordinates": [-0.1276, 51.5072]}},
        "createdAt": 1_732_000_000 + i, "updatedAt": 1_732_000_500 + i, "deleted": false,
        "note": "Leave the parcel with the neighbour at number 14 if nobody answers; the side gate is open on weekdays until six."
    })
}

fn read_op(c: ContainerClient, items: u64) -> Op {
    Arc::new(move |n: u64| {
        let c = c.clone();
        Box::pin(async move {
            let i = mix(n) % items;
            let r = c
                .read_item::<Value>(&format!("order-{i}"), format!("tenant-{}", i % 50))
                .await
                .map_err(|e| e.to_string())?;
            Ok(r.request_charge)
        })
    })
}

fn upsert_op(c: ContainerClient, items: u64) -> Op {
    Arc::new(move |n: u64| {
        let c = c.clone();
        Box::pin(async move {
            let doc = item(mix(n) % items, n);
            let r = c
                .upsert_item(&doc, ItemOptions::default())
                .await
                .map_err(|e| e.to_string())?;
            Ok(r.request_charge)
        })
    })
}

/// Body bytes of one point read and one upsert, answered as text and as binary.
async fn bytes_on_the_wire(http: &Http) -> [(usize, usize); 2] {
    let doc = item(7, 1);
    let path = "/dbs/bench/colls/orders/docs";
    let pk = json!(["tenant-7"]).to_string();
    let mut out = [(0, 0); 2];
    for (k, binary_on) in [false, true].into_iter().enumerate() {
        let mut h = vec![("x-ms-documentdb-partitionkey", pk.as_str())];
        if binary_on {
            h.push((
                "x-ms-cosmos-supported-serialization-formats",
                "CosmosBinary",
            ));
        }
        let read = http
            .send_full(Method::GET, &format!("{path}/order-7"), &h, None)
            .await
            .expect("read");
        let text = serde_json::to_vec(&doc).unwrap_or_default();
        let body = if binary_on {
            binary::from_text(&text).unwrap_or_default()
        } else {
            text
        };
        let sent = body.len();
        h.push(("x-ms-documentdb-is-upsert", "True"));
        let upsert = http
            .send_full(Method::POST, path, &h, Some(body))
            .await
            .expect("upsert");
        assert_eq!(binary::is_binary(&read.body), binary_on);
        assert_eq!(binary::is_binary(&upsert.body), binary_on);
        out[k] = (read.body.len(), sent + upsert.body.len());
    }
    // [read: (text, binary), upsert: (text, binary)]
    [(out[0].0, out[1].0), (out[0].1, out[1].1)]
}

pub async fn wire(a: &Args, r: &mut Report) {
    let items: u64 = if a.smoke { 200 } else { 10_000 };
    println!(
        "\n== wire: strata-sdk, Cosmos binary JSON vs JSON text, 1 KB items, in memory, {} clients ==",
        a.clients
    );
    let (running, http) = in_process(None, None).await;
    let text = CosmosClient::new(&running.url(), EMULATOR_KEY).expect("client");
    let bin = CosmosClient::builder(&running.url(), EMULATOR_KEY)
        .binary_encoding(true)
        .build()
        .expect("client");
    let def = PartitionKeyDefinition::new("/tenantId");
    text.create_database_if_not_exists("bench")
        .await
        .expect("database");
    text.database("bench")
        .create_container(ContainerProperties::new("orders", def))
        .await
        .expect("container");
    let (tc, bc) = (
        text.database("bench").container("orders"),
        bin.database("bench").container("orders"),
    );
    let size = serde_json::to_vec(&item(0, 0))
        .map(|v| v.len())
        .unwrap_or(0);
    for i in 0..items {
        tc.upsert_item(&item(i, 0), ItemOptions::default())
            .await
            .expect("load");
    }
    let warm = Duration::from_secs_f64(a.warmup);
    let rounds = (a.seconds.round() as usize).max(1);
    let mut rows: Vec<Measured> = Vec::new();
    for (name, bop, top) in [
        (
            "point-read",
            read_op(bc.clone(), items),
            read_op(tc.clone(), items),
        ),
        (
            "upsert",
            upsert_op(bc.clone(), items),
            upsert_op(tc.clone(), items),
        ),
    ] {
        let (mb, mt) = runner::paired(
            &format!("sdk {name} binary"),
            &format!("sdk {name} text (paired)"),
            a.clients,
            warm,
            rounds,
            bop,
            top,
        )
        .await;
        rows.push(mb);
        rows.push(mt);
    }
    print_rows(&rows);
    let [read_bytes, upsert_bytes] = bytes_on_the_wire(&http).await;
    println!("  item: {size} bytes of JSON text");
    for (name, (t, b)) in [("point read", read_bytes), ("upsert", upsert_bytes)] {
        println!(
            "  {name:<10} body bytes on the wire: text {t:>5}, binary {b:>5} ({:.0}%)",
            100.0 * b as f64 / t.max(1) as f64
        );
    }
    for (i, name) in ["point_read", "upsert"].iter().enumerate() {
        let (b, t) = (&rows[2 * i], &rows[2 * i + 1]);
        r.extra.insert(
            format!("wire_{name}_binary_vs_text"),
            json!((b.ops_per_sec / t.ops_per_sec.max(1e-9) * 100.0).round() / 100.0),
        );
    }
    r.extra.insert(
        "wire_bytes".into(),
        json!({"item": size, "read": {"text": read_bytes.0, "binary": read_bytes.1},
               "upsert": {"text": upsert_bytes.0, "binary": upsert_bytes.1}}),
    );
    r.rows.extend(rows);
    running.stop().await.expect("stop");
}
