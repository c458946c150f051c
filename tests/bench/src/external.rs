//! `--endpoint URL --key K`: the throughput workloads against a server this process did not
//! start — strata run separately (e.g. `strata --data-dir d`), the official emulator, or an
//! Azure account — so users can measure their own setup.
//!
//! The same client also drives an in-process empty HTTP handler (the baseline) in the same
//! run, so a figure reads as a ratio to what this machine and client can do at all; for a
//! remote account the ratio mostly shows the network.

use crate::client::Http;
use crate::dataset::Dataset;
use crate::profile::Profiled;
use crate::workloads::{workload, WORKLOADS};
use crate::{baseline, baseline_ops, hot, load, paired_with_baseline, print_rows, Args, Report};
use reqwest::Method;
use serde_json::json;
use std::sync::Arc;

pub async fn external(a: &Args, r: &mut Report, profiled: Option<&Profiled>) {
    let Some(endpoint) = a.endpoint.as_deref() else {
        return;
    };
    let http = match Http::with_key(endpoint, &a.key) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("strata-bench: {e}");
            return;
        }
    };
    println!(
        "== external: {endpoint}, {} clients, {} s per workload after {} s warm-up, {} items of {} B",
        a.clients, a.seconds, a.warmup, a.items, a.item_size
    );
    let ds = Arc::new(Dataset::new(a.items, a.item_size, a.tenants));
    if let Err(e) = http
        .setup("bench", "events", Dataset::definition(), None)
        .await
    {
        eprintln!("strata-bench: cannot create bench/events at {endpoint}: {e}");
        return;
    }
    let rate = load(&http, &ds, "events", 0, a.items, 64).await;
    println!(
        "  loaded {} items at {rate:.0} items/s (upserts, 64 concurrent)",
        a.items
    );
    r.extra
        .insert("external_load_items_per_sec".into(), json!(rate));
    let base = Http::new(&baseline::start(a.item_size).await);
    let (get, post) = baseline_ops(&base, &ds);
    let selected: Vec<&str> = match &a.workloads {
        Some(w) => w.split(',').map(str::trim).collect(),
        // The hot-item workloads need the server's internals; the rest need only the protocol.
        None => WORKLOADS
            .iter()
            .copied()
            .filter(|w| hot::selected(&[w]) == (false, false))
            .collect(),
    };
    let mut rows = Vec::new();
    for w in selected {
        let Some(op) = workload(w, &http, &ds, "events") else {
            eprintln!("unknown workload {w}");
            continue;
        };
        let recording = profiled.map(|p| p.start(w));
        let (m, paired_base) = paired_with_baseline(a, w, op, &get, &post).await;
        if let (Some(p), Some(rec)) = (profiled, recording) {
            let rounds = a.seconds.round().max(1.0);
            let warm = a.warmup + 0.1 * (rounds - 1.0);
            let (cpu_us, top) = p.finish(rec, &m, warm);
            match cpu_us {
                Some(us) => {
                    println!("  {w}: server CPU {us:.1} µs per request");
                    r.extra
                        .insert(format!("server_cpu_us_per_request.{w}"), json!(us));
                }
                None => println!("  {w}: the server's CPU time could not be read (did it exit?)"),
            }
            if let Some(top) = top {
                let file = p.dir.join(format!("{w}.txt"));
                let _ = std::fs::write(&file, &top);
                println!("  {w}: heaviest functions (self time), {}:", file.display());
                for l in top.lines().take(12) {
                    println!("      {l}");
                }
            }
        }
        rows.push(m);
        rows.push(paired_base);
    }
    print_rows(&rows);
    r.rows.extend(rows);
    if !a.keep {
        match http.send(Method::DELETE, "/dbs/bench", &[], None).await {
            Ok(o) if o.status < 300 => {}
            Ok(o) => eprintln!(
                "strata-bench: could not delete the bench database ({})",
                o.status
            ),
            Err(e) => eprintln!("strata-bench: could not delete the bench database: {e}"),
        }
    }
}
