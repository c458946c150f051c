//! `--suite lean`: point reads and durable upserts driven by `wrk` (Debian's `wrk`), a load
//! generator in C that spends far less CPU per request than this bench's own client — which
//! shares the two cores with the server and so flatters the ratio. strata runs as a separate
//! process (`--server-bin`, else `target/release/strata`), the baseline in this process; each
//! workload alternates slices of wrk against the baseline and against strata, and reports
//! the ratio of requests per second slice by slice and their median.
//!
//! wrk cannot sign requests, so the suite pre-signs them: a request's signature covers its
//! verb, resource and date, not its body, and stays valid for the server's 15-minute clock
//! skew window. A Lua script cycles through 1,000 pre-formatted requests (distinct items,
//! each with its partition key; for upserts, distinct bodies).

use crate::client::Http;
use crate::dataset::Dataset;
use crate::{baseline, load, scale, temp_dir, Args, Report};
use serde_json::json;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

/// Requests in a script's cycle.
const CYCLE: u64 = 1000;

pub async fn lean(a: &Args, r: &mut Report) {
    if Command::new("wrk").arg("--version").output().is_err() {
        println!("== lean: skipped, `wrk` is not installed (apt-get install wrk)");
        return;
    }
    let bin = scale::server_bin(a);
    let data = temp_dir("lean");
    let (mut child, url) = scale::spawn_server(&bin, &data);
    let http = Http::new(&url);
    let ds = Arc::new(Dataset::new(a.items, a.item_size, a.tenants));
    println!(
        "== lean: wrk (1 thread, {} connections), {} s slices, {} items of {} B, strata {}",
        a.clients,
        a.seconds,
        a.items,
        a.item_size,
        bin.display()
    );
    if let Err(e) = http
        .setup("bench", "events", Dataset::definition(), None)
        .await
    {
        eprintln!("strata-bench: {e}");
        let _ = child.kill();
        return;
    }
    let rate = load(&http, &ds, "events", 0, a.items, 64).await;
    println!("  loaded {} items at {rate:.0} items/s", a.items);
    let base = baseline::start(a.item_size).await;
    let dir = temp_dir("lean-scripts");
    // `--workloads` picks one of the two (to profile it alone, say).
    let chosen = |w: &str| {
        a.workloads
            .as_deref()
            .is_none_or(|l| l.split(',').any(|x| x.trim() == w))
    };
    for w in ["point-read", "upsert"].into_iter().filter(|w| chosen(w)) {
        let script = dir.join(format!("{w}.lua"));
        if let Err(e) = write_script(&http, &ds, w, &script) {
            eprintln!("strata-bench: {e}");
            continue;
        }
        let mut ratios = Vec::new();
        let (mut s_total, mut b_total) = (0.0, 0.0);
        let (mut s_cpu, mut b_cpu) = (Vec::new(), Vec::new());
        for slice in 0..3 {
            // Each server's CPU over its own slice (the baseline runs in this process, idle
            // otherwise): per request, the figure that does not depend on wrk's share of the
            // cores.
            let own = std::process::id();
            let t0 = crate::cpu_ticks(own);
            let b = wrk(&base, &script, a);
            let t1 = crate::cpu_ticks(own);
            let c0 = commits(&http).await;
            let t2 = crate::cpu_ticks(child.id());
            let s = wrk(&url, &script, a);
            let t3 = crate::cpu_ticks(child.id());
            let c1 = commits(&http).await;
            match (b, s) {
                (Ok(b), Ok(s)) => {
                    let per = |t: (Option<u64>, Option<u64>), rps: f64| match t {
                        (Some(x), Some(y)) if rps > 0.0 => {
                            (y - x) as f64 * 10_000.0 / (rps * a.seconds.max(1.0).round())
                        }
                        _ => f64::NAN,
                    };
                    let (sc, bc) = (per((t2, t3), s.rps), per((t0, t1), b.rps));
                    s_cpu.push(sc);
                    b_cpu.push(bc);
                    println!(
                        "  {w} slice {}: strata {:.0} req/s (p99 {}, {} errors, {sc:.1} us server CPU per request), baseline {:.0} req/s ({bc:.1} us): {:.0}%",
                        slice + 1,
                        s.rps,
                        s.p99,
                        s.errors,
                        b.rps,
                        100.0 * s.rps / b.rps
                    );
                    // Group commit over the slice: writes made durable per journal sync.
                    if let (Some(c0), Some(c1)) = (c0, c1) {
                        let (writes, syncs) = (c1.0 - c0.0, c1.1 - c0.1);
                        if syncs > 0 {
                            println!(
                                "  {w} slice {}: {:.1} writes per journal sync, {:.0} us a sync",
                                slice + 1,
                                writes as f64 / syncs as f64,
                                (c1.2 - c0.2) as f64 / syncs as f64
                            );
                        }
                    }
                    ratios.push(s.rps / b.rps);
                    s_total += s.rps;
                    b_total += b.rps;
                }
                (b, s) => eprintln!("  {w}: wrk failed: {:?} {:?}", b.err(), s.err()),
            }
        }
        if ratios.is_empty() {
            continue;
        }
        ratios.sort_by(f64::total_cmp);
        let median = ratios[ratios.len() / 2];
        println!(
            "  {w}: median {:.0}% of the baseline (strata {:.0}, baseline {:.0} req/s on average)",
            100.0 * median,
            s_total / ratios.len() as f64,
            b_total / ratios.len() as f64
        );
        r.extra.insert(format!("lean.{w}.ratio"), json!(median));
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let (sc, bc) = (mean(&s_cpu), mean(&b_cpu));
        println!(
            "  {w}: server CPU per request {sc:.1} us strata, {bc:.1} us baseline ({:.2}x the baseline's CPU)",
            sc / bc
        );
        r.extra.insert(format!("lean.{w}.cpu_us"), json!(sc));
        r.extra
            .insert(format!("lean.{w}.baseline_cpu_us"), json!(bc));
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&data);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The server's group-commit counters (writes applied, journal syncs, microseconds syncing).
async fn commits(http: &Http) -> Option<(u64, u64, u64)> {
    let v = scale::storage(http).await?;
    let c = v.get("commits")?;
    let n = |k: &str| c.get(k).and_then(|x| x.as_u64());
    Some((n("applied")?, n("journalSyncs")?, n("syncMicros")?))
}

/// One wrk run's figures.
struct Run {
    rps: f64,
    p99: String,
    errors: u64,
}

fn wrk(url: &str, script: &Path, a: &Args) -> Result<Run, String> {
    let out = Command::new("wrk")
        .args(["-t1", "-c", &a.clients.to_string(), "-d"])
        .arg(format!("{}s", a.seconds.max(1.0).round()))
        .args(["--latency", "-s"])
        .arg(script)
        .arg(url.trim_end_matches('/'))
        .output()
        .map_err(|e| format!("wrk: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |prefix: &str| {
        text.lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(prefix).map(|v| v.trim().to_string()))
    };
    let rps = field("Requests/sec:")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("no Requests/sec in wrk's output: {text}"))?;
    Ok(Run {
        rps,
        p99: field("99%").unwrap_or_default(),
        errors: field("Non-2xx or 3xx responses:")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    })
}

/// A Lua script that formats `CYCLE` signed requests of workload `w` once and then sends
/// them round and round.
fn write_script(http: &Http, ds: &Dataset, w: &str, file: &Path) -> Result<(), String> {
    let docs = "/dbs/bench/colls/events/docs";
    let mut lua = String::from("local raw = {\n");
    for n in 0..CYCLE {
        let i = xxhash_rust::xxh3::xxh3_64(&n.to_le_bytes()) % ds.items;
        let pk = ds.pk_header(i);
        let (method, path, mut headers, body) = match w {
            "point-read" => {
                let path = format!("{docs}/{}", Dataset::id(i));
                (
                    "GET",
                    path.clone(),
                    http.signed_headers("GET", &path)?,
                    None,
                )
            }
            _ => (
                "POST",
                docs.to_string(),
                http.signed_headers("POST", docs)?,
                Some(ds.doc(i, n + 1).to_string()),
            ),
        };
        headers.push(("x-ms-documentdb-partitionkey".into(), pk));
        if body.is_some() {
            headers.push(("x-ms-documentdb-is-upsert".into(), "true".into()));
            headers.push(("content-type".into(), "application/json".into()));
        }
        let _ = write!(lua, "  {{\"{method}\", [==[{path}]==], {{");
        for (k, v) in &headers {
            let _ = write!(lua, "[\"{k}\"] = [==[{v}]==], ");
        }
        let _ = match body {
            Some(b) => writeln!(lua, "}}, [==[{b}]==]}},"),
            None => writeln!(lua, "}}, nil}},"),
        };
    }
    lua.push_str(
        "}\nlocal reqs = {}\nlocal i = 0\n\
         init = function(args)\n  for k, r in ipairs(raw) do reqs[k] = wrk.format(r[1], r[2], r[3], r[4]) end\nend\n\
         request = function()\n  i = i % #reqs + 1\n  return reqs[i]\nend\n",
    );
    std::fs::write(file, lua).map_err(|e| format!("{}: {e}", file.display()))
}
