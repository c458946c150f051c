//! `--suite steps`: the request-path steps too small to see above the lean suite's run-to-run
//! spread, timed in this process on fixed inputs, each beside the way it was done before:
//!
//! * the index entries of a version an update replaces: parsing its stored text and walking
//!   the tree (before) against walking the text (`term::entries_of_json`);
//! * preparing a query with new parameter values from a kept parse: a copy of the parse per
//!   query (before) against sharing it;
//! * the text a master-key signature covers: lowercased copies formatted together (before)
//!   against `protocol::string_to_sign`;
//! * one page of the lean suite's single-partition query over its dataset in a durable
//!   container, run from its plan: the index lookup on the key's paths and the filter
//!   evaluated on every document (before) against the pinned logical partition read, its
//!   stored documents passed on as the key implies the filter (`AccessPath::pin_partition`).

use crate::{dataset::Dataset, Report};
use serde_json::json;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;
use strata_query::index::{term, IndexingPolicy};
use strata_query::protocol::{string_to_sign, AuthScope};
use strata_query::sql;

/// Rounds per step; the report keeps the fastest (the least disturbed by other work).
const ROUNDS: usize = 3;

pub fn steps(smoke: bool, r: &mut Report) {
    let n = if smoke { 2_000 } else { 200_000 };
    println!("== steps: {n} iterations a round, fastest of {ROUNDS} rounds, ns per call");
    let mut row = |name: &str, before: &mut dyn FnMut(), after: &mut dyn FnMut()| {
        let (b, a) = (fastest(n, before), fastest(n, after));
        println!("  {name}: before {b:.0} ns, after {a:.0} ns");
        r.extra.insert(format!("steps.{name}.before_ns"), json!(b));
        r.extra.insert(format!("steps.{name}.after_ns"), json!(a));
    };

    // The lean suite's 1 KB document as a server stores it (system properties included).
    let ds = Dataset::new(1000, 1024, 100);
    let mut doc = ds.doc(123, 7);
    if let Some(o) = doc.as_object_mut() {
        o.insert("_rid".into(), json!("AbCdEfGhIjKLAAAAAAAAAA=="));
        o.insert(
            "_etag".into(),
            json!("\"00000000-0000-0000-0000-000000000000\""),
        );
        o.insert("_ts".into(), json!(1_764_400_000));
    }
    let text = serde_json::to_vec(&doc).unwrap_or_default();
    let policy = IndexingPolicy::default();
    row(
        "old-version-entries",
        &mut || {
            let v: serde_json::Value = serde_json::from_slice(black_box(&text)).unwrap_or_default();
            black_box(term::entries(&v, &policy));
        },
        &mut || {
            black_box(term::entries_of_json(black_box(&text), &policy).ok());
        },
    );

    let sql_text = "SELECT * FROM c WHERE c.TenantId = @t AND c.UserId = @u AND c.SessionId = @s";
    let (Ok(parsed), Ok(pk)) = (
        sql::parser::parse(sql_text),
        strata_query::pk::PartitionKeyDefinition::multi_hash(&[
            "/TenantId",
            "/UserId",
            "/SessionId",
        ]),
    ) else {
        eprintln!("strata-bench: the steps suite's query does not prepare");
        return;
    };
    let parsed = Arc::new(parsed);
    // New parameter values every query, as the single-partition workload sends them.
    let params = |i: u64| {
        vec![
            ("t".to_string(), json!(format!("tenant-{i}"))),
            ("u".to_string(), json!("user")),
            ("s".to_string(), json!("session")),
        ]
    };
    let (mut i, mut j) = (0u64, 0u64);
    row(
        "prepare-with-new-parameters",
        &mut || {
            i += 1;
            let copy = Arc::new(sql::ast::Query::clone(&parsed));
            black_box(sql::prepare_parsed(sql_text, copy, &params(i), Some(&pk), &[]).ok());
        },
        &mut || {
            j += 1;
            let shared = Arc::clone(&parsed);
            black_box(sql::prepare_parsed(sql_text, shared, &params(j), Some(&pk), &[]).ok());
        },
    );

    let scope = AuthScope::new("docs", "dbs/bench/colls/events/docs/item-000123");
    let date = "Sun, 29 Nov 2026 06:30:00 GMT";
    row(
        "signed-text",
        &mut || {
            black_box(format!(
                "{}\n{}\n{}\n{}\n{}\n",
                "GET".to_lowercase(),
                scope.resource_type.to_lowercase(),
                scope.resource_link,
                date.to_lowercase(),
                "".to_lowercase()
            ));
        },
        &mut || {
            black_box(string_to_sign("GET", black_box(&scope), date, ""));
        },
    );

    let (items, pages) = if smoke {
        (2_000, 200)
    } else {
        (20_000, 20_000)
    };
    match query_page(items, pages) {
        Ok((before, after)) => {
            let name = "single-partition-query-page";
            println!("  {name} ({items} items, {pages} pages a round): before {before:.0} ns, after {after:.0} ns");
            r.extra
                .insert(format!("steps.{name}.before_ns"), json!(before));
            r.extra
                .insert(format!("steps.{name}.after_ns"), json!(after));
        }
        Err(e) => {
            eprintln!("strata-bench: the steps suite's query page: {e}");
            r.failed.push(format!("the steps suite's query page: {e}"));
        }
    }
}

/// Times one page of the single-partition query both ways (see the module's doc): `items`
/// of the lean dataset in a durable container in a folder of its own, `n` pages a round.
/// On a thread of its own, with a runtime of its own (the suite runs inside the bench's).
fn query_page(items: u64, n: usize) -> Result<(f64, f64), String> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let dir = std::env::temp_dir().join(format!("strata-bench-steps-{}", std::process::id()));
        let out = rt.block_on(query_page_in(&dir, items, n));
        let _ = std::fs::remove_dir_all(&dir);
        out
    })
    .join()
    .map_err(|_| "the query step's thread panicked".to_string())?
}

async fn query_page_in(dir: &std::path::Path, items: u64, n: usize) -> Result<(f64, f64), String> {
    use strata_query::pk::{epk::effective_partition_key, PartitionKey, PartitionKeyDefinition};
    use strata_query::sql::route_plan::RequestScope;
    use strata_server::exec::{self, Paging, Plan};
    use strata_server::store::{container::Limits, Store, StoreConfig};
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let store = Store::open(StoreConfig {
        data_dir: Some(dir.to_path_buf()),
        postgres: None,
        limits: Limits::default(),
    })
    .map_err(|e| err(&e))?;
    store
        .create_database("bench", None)
        .await
        .map_err(|e| err(&e))?;
    let def = PartitionKeyDefinition::multi_hash(&["/TenantId", "/UserId", "/SessionId"])
        .map_err(|e| err(&e))?;
    let c = store
        .create_container("bench", "events", def, Default::default(), None)
        .await
        .map_err(|e| err(&e))?;
    let ds = Dataset::new(items, 1024, 100);
    let epk = |i: u64| -> Result<String, String> {
        let key = PartitionKey::from_header(&ds.pk_header(i)).map_err(|e| err(&e))?;
        effective_partition_key(&c.pk, &key).map_err(|e| err(&e))
    };
    for chunk in (0..items).collect::<Vec<_>>().chunks(500) {
        let docs = chunk
            .iter()
            .map(|&i| match ds.doc(i, 0) {
                serde_json::Value::Object(doc) => Ok((epk(i)?, Dataset::id(i), doc)),
                _ => Err("a dataset document is not an object".to_string()),
            })
            .collect::<Result<Vec<_>, String>>()?;
        let (_, token) = c
            .write(|t| {
                for (epk, id, doc) in docs {
                    strata_server::items::ops::put(t, &epk, &id, doc, None)?;
                }
                Ok::<_, strata_server::error::CosmosError>(())
            })
            .map_err(|e| e.message)?;
        c.durable(token).await.map_err(|e| err(&e))?;
    }
    // Both plans of 64 items' queries, the lean workload's text and parameters.
    let sql_text = "SELECT * FROM c WHERE c.TenantId = @t AND c.UserId = @u AND c.SessionId = @s";
    let parsed = Arc::new(sql::parser::parse(sql_text).map_err(|e| err(&e))?);
    let paging = Paging {
        page_size: 100,
        per_range: false,
    };
    let mut plans = Vec::new();
    for i in (0..items).step_by((items as usize / 64).max(1)).take(64) {
        let (t, u, s) = ds.key(i);
        let params = [("t", t), ("u", u), ("s", s)].map(|(k, v)| (k.to_string(), json!(v)));
        let p = Arc::new(
            sql::prepare_parsed(sql_text, Arc::clone(&parsed), &params, Some(&c.pk), &[])
                .map_err(|e| err(&e))?,
        );
        let routing = exec::route(&c, &p, &RequestScope::whole());
        let pinned =
            Plan::new(&c, Arc::clone(&p), routing, false, paging, None).map_err(|e| err(&e))?;
        let mut lookup = pinned.clone();
        lookup.access = Arc::new(exec::access(&c, &p, false).map_err(|e| err(&e))?);
        let (a, b) = (&pinned.access, &lookup.access);
        if a.implied.is_none() || !a.filter_implied || b.lookup.is_none() || b.filter_implied {
            return Err(format!(
                "the plans are not the two reads compared:\n{pinned}\n{lookup}"
            ));
        }
        plans.push((Arc::new(lookup), Arc::new(pinned)));
    }
    let mut times = [f64::INFINITY; 2];
    for _ in 0..ROUNDS {
        for (which, time) in times.iter_mut().enumerate() {
            let started = Instant::now();
            for k in 0..n {
                let (lookup, pinned) = &plans[k % plans.len()];
                let plan = if which == 0 { lookup } else { pinned };
                let page = exec::run(Arc::clone(&c), Arc::clone(plan), None)
                    .await
                    .map_err(|e| err(&e))?;
                if page.docs.is_empty() {
                    return Err("a query found nothing".into());
                }
                black_box(page);
            }
            *time = time.min(started.elapsed().as_nanos() as f64 / n as f64);
        }
    }
    Ok((times[0], times[1]))
}

/// The fastest of [`ROUNDS`] rounds of `n` calls, in nanoseconds a call.
fn fastest(n: usize, f: &mut dyn FnMut()) -> f64 {
    (0..ROUNDS)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_nanos() as f64 / n as f64
        })
        .fold(f64::INFINITY, f64::min)
}
