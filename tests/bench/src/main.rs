//! `strata-bench`: load generator and benchmark suites.
//!
//! Every figure is reported next to a baseline measured in the same run with the same client
//! (a minimal axum server with the same routes, no storage, no auth), because these machines
//! are shared and noisy: ratios are meaningful, absolute numbers less so.
//!
//! Suites: `throughput` (every workload vs the baseline), `queries` (parse+plan time, prefix
//! queries on 1 vs 64 partitions, fan-out scan rate), `split` (write latency while partitions
//! split), `scale` (a separate strata process: load rate, point reads at 10k vs N items, RSS,
//! disk, restart time), `indexing` (selective lookups and ORDER BY over 1M items, the write and
//! space cost of the index), `scripts` (a UDF filter vs the same filter in SQL, a stored
//! procedure vs a plain upsert), `bulk` (strata-sdk's execute_bulk vs concurrent durable upserts), `copy`
//! (`strata copy` into a hierarchical key vs the durable upsert rate), `wire` (strata-sdk
//! with Cosmos binary JSON vs JSON text: ops/s and bytes on the wire), `gsi` (a write burst on
//! a source with a global secondary index: upserts/s and the index's lag).
//! `--smoke` runs everything tiny and quickly (CI).

mod baseline;
mod bulk;
mod client;
mod copy;
mod dataset;
mod external;
mod fulltext;
mod gsi;
mod hot;
mod indexing;
mod lean;
mod profile;
mod runner;
mod scale;
mod scripts;
mod steps;
mod vector;
mod wire;
mod workloads;

use clap::Parser;
use client::Http;
use dataset::Dataset;
use reqwest::Method;
use runner::{Measured, Op};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use workloads::{workload, WORKLOADS};

#[derive(Parser, Debug, Clone)]
#[command(
    name = "strata-bench",
    about = "Benchmarks strata against an in-process HTTP baseline."
)]
struct Args {
    /// all, throughput, queries, split, scale, indexing, scripts, bulk, copy, wire, steps,
    /// lean, vector or fulltext (comma-separated; `all` leaves out lean, which needs `wrk`, and
    /// vector and fulltext, which need Python with their anchors: faiss-cpu and milvus-lite,
    /// tantivy and psycopg2-binary with PostgreSQL 15).
    #[arg(long, default_value = "all")]
    suite: String,
    /// Tiny data and short runs: checks that everything works (CI), not speed.
    #[arg(long)]
    smoke: bool,
    /// Concurrent clients per workload.
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// Measured seconds per workload.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Warm-up seconds per workload.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Items loaded for the throughput and query suites.
    #[arg(long, default_value_t = 20_000)]
    items: u64,
    /// Item size in bytes.
    #[arg(long, default_value_t = 1024)]
    item_size: usize,
    /// Tenants (Zipf-skewed sizes).
    #[arg(long, default_value_t = 100)]
    tenants: usize,
    /// Items for the scale suite.
    #[arg(long, default_value_t = 1_000_000)]
    scale_items: u64,
    /// Items for the indexing suite.
    #[arg(long, default_value_t = 1_000_000)]
    index_items: u64,
    /// Vectors for the vector suite.
    #[arg(long, default_value_t = 100_000)]
    vector_items: u64,
    /// The vector suite's strata runs: `none` (no vector index) and index kinds.
    #[arg(long, default_value = "none,flat,quantizedFlat,diskANN")]
    vector_kinds: String,
    /// Documents for the full-text suite.
    #[arg(long, default_value_t = 1_000_000)]
    fulltext_items: u64,
    /// Dimensions of the vector suite's vectors.
    #[arg(long, default_value_t = 768)]
    vector_dims: usize,
    /// Items the copy suite copies.
    #[arg(long, default_value_t = 1_000_000)]
    copy_items: u64,
    /// Items the bulk suite loads (each way).
    #[arg(long, default_value_t = 200_000)]
    bulk_items: u64,
    /// Items the gsi suite writes (each way).
    #[arg(long, default_value_t = 100_000)]
    gsi_items: u64,
    /// Items for the scripts suite (the UDF filter runs over all of them).
    #[arg(long, default_value_t = 100_000)]
    udf_items: u64,
    /// Split threshold for the split suite.
    #[arg(long, default_value_t = 32 * 1024 * 1024)]
    split_bytes: u64,
    /// Only these workloads (comma-separated) in the throughput suite, or in `--suite lean`
    /// (`point-read`, `upsert`).
    #[arg(long)]
    workloads: Option<String>,
    /// The strata binary for the scale suite (default target/release/strata, else debug).
    #[arg(long)]
    server_bin: Option<PathBuf>,
    /// The SQL corpus for parse timing.
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Run the in-process server without disk (diagnosis: separates durability from CPU cost).
    #[arg(long)]
    in_memory: bool,
    /// Run the workloads against this server instead (strata started separately, the
    /// official emulator, an account): e.g. `https://localhost:8081/`. Creates the database
    /// `bench` there, and deletes it at the end unless `--keep`. Several endpoints of one
    /// account, comma-separated (strata processes over one shared store), take the requests
    /// in turn.
    #[arg(long)]
    endpoint: Option<String>,
    /// The account key for `--endpoint` (default: the emulator's well-known key).
    #[arg(long, env = "STRATA_BENCH_KEY", default_value = strata_sdk::EMULATOR_KEY, hide_default_value = true)]
    key: String,
    /// Keep the `bench` database of `--endpoint` at the end.
    #[arg(long)]
    keep: bool,
    /// Run the throughput workloads against strata started as a separate process and record,
    /// per workload, the server's CPU time per request and (with `perf` installed) a CPU
    /// profile of the server into this folder (see `profile.rs`). With `--suite vector`:
    /// its server CPU per query and a profile of its query phase.
    #[arg(long)]
    profile: Option<PathBuf>,
    /// Keep the vector and fulltext suites' strata data folders under this folder, and
    /// reuse them: a run whose folder there holds its data loaded already (same suite, kind
    /// and size) skips the load and measures the query phase on the stored data again — the
    /// load reports 0/s and the write targets are left out. Minutes instead of the load's.
    #[arg(long)]
    store: Option<PathBuf>,
    /// The vector suite's search options, the object `VectorDistance` takes as its fourth
    /// argument (e.g. `{"searchListSizeMultiplier": 20}`): the service's defaults when absent.
    #[arg(long)]
    vector_search_options: Option<String>,
    /// Where to write the JSON report.
    #[arg(long, default_value = "target/bench/report.json")]
    json: PathBuf,
}

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn mix(x: u64) -> u64 {
    xxhash_rust::xxh3::xxh3_64(&x.to_le_bytes())
}

fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// CPU time (user + system, in clock ticks) a process has used so far.
pub(crate) fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// The machine's CPU time so far (clock ticks over all cores): busy (user, nice, system,
/// interrupts) and idle (idle, I/O wait), from `/proc/stat`.
pub(crate) fn machine_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let f: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let at = |i: usize| f.get(i).copied().unwrap_or(0);
    Some((at(0) + at(1) + at(2) + at(5) + at(6), at(3) + at(4)))
}

/// Waits until the server's background work after a bulk load (memtable flushes,
/// compaction) has settled: less than 5% of a core over a second, at most `limit`.
/// Returns how long that took, so a report shows it rather than hiding it.
async fn quiesce(pid: u32, limit: Duration) -> Duration {
    quiet_for(pid, limit, 1).await
}

/// Like [`quiesce`], but the server must stay quiet `seconds` seconds in a row: an LSM
/// store's compactions start a moment after the flush that calls for them, so one quiet
/// second can fall between the two.
async fn quiet_for(pid: u32, limit: Duration, seconds: u32) -> Duration {
    let t0 = Instant::now();
    let hz = 100.0; // USER_HZ on Linux
    let mut quiet = 0;
    while t0.elapsed() < limit && quiet < seconds {
        let Some(a) = cpu_ticks(pid) else { break };
        tokio::time::sleep(Duration::from_secs(1)).await;
        let Some(b) = cpu_ticks(pid) else { break };
        match ((b - a) as f64 / hz) < 0.05 {
            true => quiet += 1,
            false => quiet = 0,
        }
    }
    t0.elapsed()
}

/// The bytes under `p` once they stop changing: the same in six looks two seconds apart (at
/// most 90 s).
async fn settled_bytes(p: &Path) -> u64 {
    let t0 = Instant::now();
    let (mut last, mut same) = (dir_bytes(p), 0);
    while same < 6 && t0.elapsed() < Duration::from_secs(90) {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = dir_bytes(p);
        same = if now == last { same + 1 } else { 0 };
        last = now;
    }
    last
}

fn dir_bytes(p: &Path) -> u64 {
    let mut total = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let path = e.path();
            if path.is_dir() {
                total += dir_bytes(&path);
            } else if let Ok(m) = e.metadata() {
                total += m.len();
            }
        }
    }
    total
}

fn temp_dir(label: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("strata-bench-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).expect("temp dir");
    p
}

/// A strata data folder for one suite run: a fresh temporary one, or under `--store` the
/// folder `label` names there, and whether that one holds the run's data already.
fn run_dir(a: &Args, label: &str) -> (PathBuf, bool) {
    let Some(store) = &a.store else {
        return (temp_dir(label), false);
    };
    let dir = store.join(label);
    let loaded = dir.join(LOADED).exists();
    if !loaded {
        let _ = std::fs::remove_dir_all(&dir);
    }
    std::fs::create_dir_all(&dir).expect("store dir");
    (dir, loaded)
}

/// Marks a `--store` folder as loaded (see [`run_dir`]).
fn mark_loaded(a: &Args, dir: &Path) {
    if a.store.is_some() {
        let _ = std::fs::write(dir.join(LOADED), b"loaded\n");
    }
}

/// Removes a run's folder unless `--store` keeps it.
fn drop_run_dir(a: &Args, dir: &Path) {
    if a.store.is_none() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The marker of a loaded `--store` folder.
const LOADED: &str = "strata-bench-loaded";

/// Starts strata inside this process (disk-backed unless `dir` is None).
async fn in_process(
    dir: Option<PathBuf>,
    split_bytes: Option<u64>,
) -> (strata_server::Running, Http) {
    let mut limits = strata_server::store::container::Limits::default();
    if let Some(b) = split_bytes {
        limits.partition_split_bytes = b;
    }
    let running = strata_server::start(strata_server::ServerConfig {
        port: 0,
        store: strata_server::store::StoreConfig {
            data_dir: dir,
            postgres: None,
            limits,
        },
        ..Default::default()
    })
    .await
    .expect("strata starts");
    let http = Http::new(&running.url());
    (running, http)
}

/// Loads items `from..to` with `concurrency` concurrent upserts; returns items/s.
async fn load(
    http: &Http,
    ds: &Arc<Dataset>,
    coll: &str,
    from: u64,
    to: u64,
    concurrency: usize,
) -> f64 {
    let started = Instant::now();
    let next = Arc::new(std::sync::atomic::AtomicU64::new(from));
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (http, ds, next, coll) = (
            http.clone(),
            Arc::clone(ds),
            Arc::clone(&next),
            coll.to_string(),
        );
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= to {
                    return;
                }
                let pk = ds.pk_header(i);
                for _ in 0..20 {
                    let r = http
                        .json(
                            Method::POST,
                            &format!("/dbs/bench/colls/{coll}/docs"),
                            &[
                                ("x-ms-documentdb-partitionkey", &pk),
                                ("x-ms-documentdb-is-upsert", "true"),
                            ],
                            &ds.doc(i, 0),
                        )
                        .await;
                    if matches!(r, Ok(ref o) if o.status < 300) {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    (to - from) as f64 / started.elapsed().as_secs_f64()
}

fn ok(o: Result<client::Outcome, String>, want: &[u16]) -> Result<f64, String> {
    let o = o?;
    if want.contains(&o.status) {
        Ok(o.charge)
    } else {
        Err(format!(
            "status {}: {}",
            o.status,
            String::from_utf8_lossy(&o.body[..o.body.len().min(200)])
        ))
    }
}

struct Report {
    rows: Vec<Measured>,
    extra: serde_json::Map<String, Value>,
    targets: Vec<(String, String, bool)>,
    /// What a suite could not measure, and why: a smoke run fails on any.
    failed: Vec<String>,
}

impl Report {
    fn target(&mut self, name: &str, value: String, met: bool) {
        println!(
            "  target {:<58} {:<28} {}",
            name,
            value,
            if met { "MET" } else { "MISSED" }
        );
        self.targets.push((name.to_string(), value, met));
    }
}

/// The baseline's point read and write, for workloads to be compared with.
fn baseline_ops(base: &Http, ds: &Arc<Dataset>) -> (Op, Op) {
    let get: Op = {
        let (b, ds) = (base.clone(), Arc::clone(ds));
        Arc::new(move |n: u64| {
            let (b, ds) = (b.clone(), Arc::clone(&ds));
            Box::pin(async move {
                let i = mix(n) % ds.items;
                ok(
                    b.send(
                        Method::GET,
                        &format!("/dbs/bench/colls/events/docs/{}", Dataset::id(i)),
                        &[("x-ms-documentdb-partitionkey", &ds.pk_header(i))],
                        None,
                    )
                    .await,
                    &[200],
                )
            })
        })
    };
    let post: Op = {
        let (b, ds) = (base.clone(), Arc::clone(ds));
        Arc::new(move |n: u64| {
            let (b, ds) = (b.clone(), Arc::clone(&ds));
            Box::pin(async move {
                let i = mix(n) % ds.items;
                ok(
                    b.json(
                        Method::POST,
                        "/dbs/bench/colls/events/docs",
                        &[("x-ms-documentdb-partitionkey", &ds.pk_header(i))],
                        &ds.doc(i, n),
                    )
                    .await,
                    &[200],
                )
            })
        })
    };
    (get, post)
}

/// Runs workload `w` in slices alternating with the baseline it compares with (GET for point
/// reads, POST for the rest).
async fn paired_with_baseline(
    a: &Args,
    w: &str,
    op: Op,
    get: &Op,
    post: &Op,
) -> (Measured, Measured) {
    let (basis, bname) = if w == "point-read" {
        (get, "baseline-get")
    } else {
        (post, "baseline-post")
    };
    runner::paired(
        w,
        &format!("  ({bname}, paired)"),
        a.clients,
        Duration::from_secs_f64(a.warmup),
        (a.seconds.round() as usize).max(1),
        op,
        Arc::clone(basis),
    )
    .await
}

async fn throughput(a: &Args, r: &mut Report) {
    let warm = Duration::from_secs_f64(a.warmup);
    let dur = Duration::from_secs_f64(a.seconds);
    println!(
        "== throughput: {} clients, {} s per workload after {} s warm-up, {} items of {} B",
        a.clients, a.seconds, a.warmup, a.items, a.item_size
    );
    let ds = Arc::new(Dataset::new(a.items, a.item_size, a.tenants));
    let base = Http::new(&baseline::start(a.item_size).await);
    let (get, post) = baseline_ops(&base, &ds);
    let bget = runner::run("baseline-get", a.clients, warm, dur, Arc::clone(&get)).await;
    let bpost = runner::run("baseline-post", a.clients, warm, dur, Arc::clone(&post)).await;
    let rounds = (a.seconds.round() as usize).max(1);
    let dir = temp_dir("throughput");
    let (running, http) = in_process((!a.in_memory).then(|| dir.clone()), None).await;
    http.setup("bench", "events", Dataset::definition(), None)
        .await
        .expect("setup");
    let rate = load(&http, &ds, "events", 0, a.items, 64).await;
    println!(
        "  loaded {} items at {rate:.0} items/s (durable upserts, 64 concurrent)",
        a.items
    );
    r.extra
        .insert("throughput_load_items_per_sec".into(), json!(rate));
    let selected: Vec<&str> = match &a.workloads {
        Some(w) => w.split(',').map(str::trim).collect(),
        None => WORKLOADS.to_vec(),
    };
    let mut rows = vec![bget.clone(), bpost.clone()];
    for w in &selected {
        if hot::selected(&[w]) != (false, false) {
            continue;
        }
        let Some(op) = workload(w, &http, &ds, "events") else {
            eprintln!("unknown workload {w}");
            continue;
        };
        let store = running
            .store()
            .expect("the bench's own server serves its store");
        let before = store.engine().commit_stats();
        let (m, paired_base) = paired_with_baseline(a, w, op, &get, &post).await;
        let after = store.engine().commit_stats();
        let (writes, syncs, micros) = (after.0 - before.0, after.1 - before.1, after.2 - before.2);
        if syncs > 0 {
            println!(
                "  {w}: {writes} writes in {syncs} journal syncs ({:.1} writes per sync, {:.0} us per sync)",
                writes as f64 / syncs as f64,
                micros as f64 / syncs as f64
            );
        }
        rows.push(m);
        rows.push(paired_base);
    }
    let hot = hot::selected(&selected);
    if hot != (false, false) {
        let updates = if a.smoke { 2_000 } else { 100_000 };
        hot::run(
            r,
            &mut rows,
            &http,
            &base,
            hot,
            a.clients,
            warm,
            rounds,
            a.item_size,
            updates,
        )
        .await;
    }
    let disk = dir_bytes(&dir);
    println!(
        "  process RSS {} MB, {:.0} bytes on disk per item",
        rss_kb(std::process::id()) / 1024,
        disk as f64 / a.items.max(1) as f64
    );
    r.extra.insert(
        "throughput_disk_bytes_per_item".into(),
        json!(disk as f64 / a.items.max(1) as f64),
    );
    print_rows(&rows);
    let find = |n: &str| rows.iter().find(|m| m.workload == n).cloned();
    if let Some(m) = find("point-read") {
        let ratio = m.ratio_to_baseline.unwrap_or(0.0);
        r.target(
            "point-read throughput >= 80% of baseline GET",
            format!("{:.0}%", ratio * 100.0),
            ratio >= 0.8,
        );
    }
    if let Some(m) = find("upsert") {
        let ratio = m.ratio_to_baseline.unwrap_or(0.0);
        r.target(
            "durable upsert >= 45% of baseline POST",
            format!("{:.0}%", ratio * 100.0),
            ratio >= 0.45,
        );
    }
    r.rows.extend(rows);
    let _ = running.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

fn print_rows(rows: &[Measured]) {
    println!(
        "  {:<24} {:>7} {:>10} {:>9} {:>9} {:>9} {:>7} {:>9} {:>9}",
        "workload", "clients", "ops/s", "p50 us", "p99 us", "p99.9 us", "errors", "RU/s", "vs base"
    );
    for m in rows {
        println!(
            "  {:<24} {:>7} {:>10.0} {:>9} {:>9} {:>9} {:>7} {:>9.0} {:>9}",
            m.workload,
            m.clients,
            m.ops_per_sec,
            m.p50_us,
            m.p99_us,
            m.p999_us,
            m.errors,
            m.ru_per_sec,
            m.ratio_to_baseline
                .map(|r| format!("{:.0}%", r * 100.0))
                .unwrap_or_else(|| "-".into())
        );
        if let Some(e) = &m.first_error {
            println!("    first error: {e}");
        }
    }
}

async fn queries(a: &Args, r: &mut Report) {
    println!("== queries");
    // Parse + plan time over the corpus.
    let corpus = a
        .corpus
        .clone()
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../data/sql-corpus"));
    let mut texts = Vec::new();
    for f in ["docs.txt", "samples.txt"] {
        if let Ok(t) = std::fs::read_to_string(corpus.join(f)) {
            let mut cur = String::new();
            for line in t.lines() {
                if line.starts_with("### ") {
                    if !cur.trim().is_empty() {
                        texts.push(std::mem::take(&mut cur));
                    }
                } else {
                    cur.push_str(line);
                    cur.push('\n');
                }
            }
            if !cur.trim().is_empty() {
                texts.push(cur);
            }
        }
    }
    if texts.is_empty() {
        texts.push("SELECT * FROM c WHERE c.TenantId = @t AND c.n > 5 ORDER BY c.n".into());
    }
    let reps = if a.smoke { 5 } else { 200 };
    let def = strata_query::pk::PartitionKeyDefinition::multi_hash(&[
        "/TenantId",
        "/UserId",
        "/SessionId",
    ])
    .expect("def");
    let (mut parse_ns, mut plan_ns, mut planned) = (0u128, 0u128, 0usize);
    for t in &texts {
        let params: Vec<(String, Value)> = t
            .split('@')
            .skip(1)
            .filter_map(|s| {
                let name: String = s
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                (!name.is_empty()).then(|| (name, json!(1)))
            })
            .collect();
        let t0 = Instant::now();
        for _ in 0..reps {
            let _ = strata_query::sql::parser::parse(t);
        }
        parse_ns += t0.elapsed().as_nanos() / reps as u128;
        if strata_query::sql::prepare(t, &params, Some(&def)).is_ok() {
            let t0 = Instant::now();
            for _ in 0..reps {
                let _ = strata_query::sql::prepare(t, &params, Some(&def));
            }
            plan_ns += t0.elapsed().as_nanos() / reps as u128;
            planned += 1;
        }
    }
    let parse_us = parse_ns as f64 / texts.len() as f64 / 1000.0;
    let plan_us = plan_ns as f64 / planned.max(1) as f64 / 1000.0;
    println!("  corpus: {} queries, parse {parse_us:.1} us/query; parse+bind+plan {plan_us:.1} us/query ({planned} plannable)", texts.len());
    r.extra.insert("parse_us_per_query".into(), json!(parse_us));
    r.extra
        .insert("parse_plan_us_per_query".into(), json!(plan_us));

    // The same data in a 1-partition and a 64-partition container.
    let items = if a.smoke { 2_000 } else { a.items };
    let ds = Arc::new(Dataset::new(items, a.item_size, a.tenants));
    let dir = temp_dir("queries");
    let (running, http) = in_process(Some(dir.clone()), None).await;
    http.setup("bench", "p1", Dataset::definition(), Some(400))
        .await
        .expect("setup p1");
    http.setup("bench", "p64", Dataset::definition(), Some(640_000))
        .await
        .expect("setup p64");
    load(&http, &ds, "p1", 0, items, 64).await;
    load(&http, &ds, "p64", 0, items, 64).await;
    let warm = Duration::from_secs_f64(a.warmup);
    let dur = Duration::from_secs_f64(a.seconds.min(if a.smoke { 1.0 } else { 5.0 }));
    let mut rows = Vec::new();
    for (coll, label) in [("p1", "1 partition"), ("p64", "64 partitions")] {
        let one = runner::run(
            &format!("prefix-query, {label}, 1 client"),
            1,
            warm,
            dur,
            workload("prefix-query", &http, &ds, coll).expect("op"),
        )
        .await;
        rows.push(one);
    }
    let single = runner::run(
        "single-partition-query, 1 client",
        1,
        warm,
        dur,
        workload("single-partition-query", &http, &ds, "p64").expect("op"),
    )
    .await;
    rows.push(single);
    print_rows(&rows);
    let (p1, p64) = (rows[0].p50_us as f64, rows[1].p50_us as f64);
    let ratio = p64 / p1.max(1.0);
    r.extra
        .insert("prefix_p50_us_1_partition".into(), json!(p1));
    r.extra
        .insert("prefix_p50_us_64_partitions".into(), json!(p64));
    r.target(
        "prefix query on 64 partitions within 20% of 1 partition (p50)",
        format!("{:.2}x ({p64:.0} vs {p1:.0} us)", ratio),
        ratio <= 1.2,
    );
    // Fan-out scan rate: a filter that matches nothing makes every partition scan everything.
    let reps = if a.smoke { 1 } else { 5 };
    let t0 = Instant::now();
    let mut scanned = 0u64;
    for _ in 0..reps {
        http.query_all(
            "bench",
            "p64",
            "SELECT VALUE COUNT(1) FROM c WHERE c.pad = 'no such value'",
            json!([]),
            &[],
        )
        .await
        .expect("fan-out");
        scanned += items;
    }
    let rate = scanned as f64 / t0.elapsed().as_secs_f64();
    let cores = num_cpus::get();
    println!("  fan-out scan: {rate:.0} documents/s over 64 partitions = {:.0} documents/s per core ({cores} cores)", rate / cores as f64);
    r.extra.insert(
        "fanout_docs_per_sec_per_core".into(),
        json!(rate / cores as f64),
    );
    r.rows.extend(rows);
    let _ = running.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

async fn split(a: &Args, r: &mut Report) {
    let threshold = if a.smoke { 256 * 1024 } else { a.split_bytes };
    let secs = if a.smoke { 3.0 } else { 40.0 };
    println!(
        "== split: writes while partitions split (threshold {} KB, {secs} s)",
        threshold / 1024
    );
    let dir = temp_dir("split");
    let (running, http) = in_process(Some(dir.clone()), Some(threshold)).await;
    http.setup("bench", "s", Dataset::definition(), None)
        .await
        .expect("setup");
    let ds = Arc::new(Dataset::new(u64::MAX / 4, a.item_size, a.tenants));
    let t_start = Instant::now();
    let end = t_start + Duration::from_secs_f64(secs);
    let samples = Arc::new(std::sync::Mutex::new(Vec::<(f64, u64, bool)>::new()));
    let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (http, ds, samples, counter) = (
            http.clone(),
            Arc::clone(&ds),
            Arc::clone(&samples),
            Arc::clone(&counter),
        );
        tasks.push(tokio::spawn(async move {
            while Instant::now() < end {
                let i = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let t0 = Instant::now();
                let res = http
                    .json(
                        Method::POST,
                        "/dbs/bench/colls/s/docs",
                        &[("x-ms-documentdb-partitionkey", &ds.pk_header(i))],
                        &ds.doc(i, 0),
                    )
                    .await;
                let ok = matches!(res, Ok(ref o) if o.status == 201);
                samples.lock().unwrap_or_else(|p| p.into_inner()).push((
                    t0.duration_since(t_start).as_secs_f64(),
                    t0.elapsed().as_micros() as u64,
                    ok,
                ));
            }
        }));
    }
    let mut splits = Vec::new();
    let mut last = 1;
    while Instant::now() < end {
        if let Ok(o) = http
            .send(Method::GET, "/dbs/bench/colls/s/pkranges", &[], None)
            .await
        {
            let n = serde_json::from_slice::<Value>(&o.body)
                .ok()
                .and_then(|v| v["_count"].as_u64())
                .unwrap_or(last);
            if n != last {
                splits.push(t_start.elapsed().as_secs_f64());
                last = n;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for t in tasks {
        let _ = t.await;
    }
    let samples = samples.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let in_window = |t: f64| splits.iter().any(|s| t >= s - 0.3 && t <= s + 0.1);
    let pct = |mut v: Vec<u64>, q: f64| -> u64 {
        if v.is_empty() {
            return 0;
        }
        v.sort_unstable();
        v[((v.len() as f64 * q) as usize).min(v.len() - 1)]
    };
    let during: Vec<u64> = samples
        .iter()
        .filter(|s| in_window(s.0))
        .map(|s| s.1)
        .collect();
    let steady: Vec<u64> = samples
        .iter()
        .filter(|s| !in_window(s.0) && s.0 > 0.5)
        .map(|s| s.1)
        .collect();
    let errors = samples.iter().filter(|s| !s.2).count();
    let (p99_d, p99_s) = (pct(during.clone(), 0.99), pct(steady.clone(), 0.99));
    println!(
        "  {} writes, {} partitions after {} splits; p50/p99 steady {}/{} us, during splits {}/{} us ({} samples); {} failed",
        samples.len(), last, splits.len(), pct(steady.clone(), 0.5), p99_s, pct(during.clone(), 0.5), p99_d, during.len(), errors
    );
    r.extra.insert("split_count".into(), json!(splits.len()));
    r.extra.insert("split_p99_us_steady".into(), json!(p99_s));
    r.extra.insert("split_p99_us_during".into(), json!(p99_d));
    r.extra.insert("split_failed_writes".into(), json!(errors));
    if !splits.is_empty() {
        let ratio = p99_d as f64 / p99_s.max(1) as f64;
        r.target(
            "p99 write latency during splits <= 2x steady state",
            format!("{ratio:.2}x"),
            ratio <= 2.0,
        );
    }
    r.target(
        "no request fails because of a split",
        format!("{errors} failed"),
        errors == 0,
    );
    let _ = running.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    let mut a = Args::parse();
    if a.smoke {
        a.seconds = 1.0;
        a.warmup = 0.2;
        a.items = 500;
        a.clients = a.clients.min(8);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut report = Report {
        rows: Vec::new(),
        extra: serde_json::Map::new(),
        targets: Vec::new(),
        failed: Vec::new(),
    };
    // --profile: the server as a process of its own, driven like an external endpoint; the
    // vector and fulltext suites run their own server processes and profile their query
    // phases themselves.
    let mut profiled = None;
    let mut server = None;
    let own_server = a
        .suite
        .split(',')
        .any(|s| matches!(s.trim(), "vector" | "fulltext"));
    if let (Some(dir), None, false) = (a.profile.clone(), &a.endpoint, own_server) {
        let _ = std::fs::create_dir_all(&dir);
        let data = temp_dir("profile");
        let (child, url) = scale::spawn_server(&scale::server_bin(&a), &data);
        profiled = Some(profile::Profiled {
            pid: child.id(),
            dir,
        });
        server = Some((child, data));
        a.endpoint = Some(url);
    }
    let suites: Vec<String> = if a.endpoint.is_some() {
        // The other suites start their own servers (in process, or as a process to measure).
        vec!["external".into()]
    } else if a.suite == "all" {
        vec![
            "throughput".into(),
            "queries".into(),
            "split".into(),
            "scale".into(),
            "indexing".into(),
            "scripts".into(),
            "bulk".into(),
            "gsi".into(),
            "copy".into(),
            "wire".into(),
            "steps".into(),
        ]
    } else {
        a.suite.split(',').map(|s| s.trim().to_string()).collect()
    };
    println!(
        "strata-bench: {} cores, {} suite(s){}",
        num_cpus::get(),
        suites.join(", "),
        if a.smoke {
            " (smoke: checks that it works, not speed)"
        } else {
            ""
        }
    );
    rt.block_on(async {
        for s in &suites {
            match s.as_str() {
                "throughput" => throughput(&a, &mut report).await,
                "queries" => queries(&a, &mut report).await,
                "split" => split(&a, &mut report).await,
                "scale" => scale::scale(&a, &mut report).await,
                "indexing" => indexing::indexing(&a, &mut report).await,
                "scripts" => scripts::scripts(&a, &mut report).await,
                "bulk" => bulk::bulk(&a, &mut report).await,
                "gsi" => gsi::gsi(&a, &mut report).await,
                "copy" => copy::copy_suite(&a, &mut report).await,
                "wire" => wire::wire(&a, &mut report).await,
                "lean" => lean::lean(&a, &mut report).await,
                "steps" => steps::steps(a.smoke, &mut report),
                "vector" => vector::vector(&a, &mut report).await,
                "fulltext" => fulltext::fulltext(&a, &mut report).await,
                "external" => external::external(&a, &mut report, profiled.as_ref()).await,
                other => eprintln!("unknown suite {other}"),
            }
        }
    });
    if let Some((mut child, data)) = server {
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(data);
    }
    let errors: u64 = report.rows.iter().map(|m| m.errors).sum();
    let json = json!({
        "machine": {"cores": num_cpus::get()},
        "args": format!("{a:?}"),
        "workloads": report.rows,
        "metrics": report.extra,
        "targets": report.targets.iter().map(|(n, v, m)| json!({"target": n, "value": v, "met": m})).collect::<Vec<_>>(),
    });
    if let Some(dir) = a.json.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(
        &a.json,
        serde_json::to_vec_pretty(&json).unwrap_or_default(),
    );
    println!("report written to {}", a.json.display());
    if a.smoke && errors > 0 {
        eprintln!("smoke run: {errors} requests failed");
        std::process::exit(1);
    }
    if a.smoke && !report.failed.is_empty() {
        eprintln!("smoke run: {}", report.failed.join("; "));
        std::process::exit(1);
    }
}
