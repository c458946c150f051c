//! `--suite vector`: vector search in strata beside the libraries and servers a user would
//! pick instead, on the same data in the same run.
//!
//! Data: `--vector-items` vectors of `--vector-dims` float32 from a seeded clustered generator
//! (100 centres, Gaussian-like noise: embeddings cluster by topic), queries drawn the same way;
//! the exact top 10 (cosine) of each query is computed here first. strata runs as a separate
//! process on disk, one container at 40,000 RU/s per index kind — seven physical partitions,
//! one per 6,000 RU/s as the service makes them; the run prints the count (plus one
//! without a vector index, for the insert cost): insert throughput at 32 clients while
//! indexing, the time until the index is complete (every vector linked, for diskANN),
//! recall@10, queries/s at 32 clients with p50/p99, documents read and server CPU per query
//! (`--profile DIR` adds a `perf` profile of the query phase), the index's memory against the
//! raw vectors, the process RSS and bytes on disk.
//!
//! Anchors (`tests/bench/vector_anchors.py`, run with the bench's Python): faiss-cpu HNSW in
//! process (M 32, efConstruction 100, efSearch raised until recall@10 ≥ 0.95: the near-limit)
//! and milvus-lite (a local vector database: the peer), both from PyPI, reading the same
//! vectors from files this suite writes.

use crate::client::Http;
use crate::scale::{server_bin, spawn_server};
use crate::{
    dir_bytes, drop_run_dir, mark_loaded, ok, rss_kb, run_dir, runner, temp_dir, Args, Report,
};
use reqwest::Method;
use serde_json::{json, Value};
use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_server::vector::kernels;

const DOCS: &str = "/dbs/bench/colls/vectors/docs";
/// The container's throughput: seven physical partitions (one per 6,000 RU/s, as the
/// service), a cross-partition query's usual fan-out.
const THROUGHPUT: u32 = 40_000;

struct Data {
    dims: usize,
    base: Vec<f32>,
    queries: Vec<f32>,
    /// Exact top 10 ids per query.
    truth: Vec<Vec<u32>>,
}

fn generate(n: usize, dims: usize, nq: usize) -> Data {
    let mut s = 0x5eed_u64;
    let mut next = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f32 / (1u64 << 53) as f32
    };
    // Sum of three uniforms: a cheap bell curve.
    let mut noise = move || (next() + next() + next() - 1.5) * 0.5;
    let centres: Vec<f32> = (0..100 * dims).map(|_| noise() * 2.0).collect();
    let mut draw = |i: usize| -> Vec<f32> {
        let c = &centres[(i % 100) * dims..(i % 100 + 1) * dims];
        c.iter().map(|x| x + noise() * 0.6).collect()
    };
    let base: Vec<f32> = (0..n).flat_map(&mut draw).collect();
    let queries: Vec<f32> = (0..nq).flat_map(|i| draw(i * 7 + 3)).collect();
    let truth = exact_top10(&base, &queries, dims);
    Data {
        dims,
        base,
        queries,
        truth,
    }
}

fn unit(v: &[f32]) -> Vec<f32> {
    let mut u = v.to_vec();
    kernels::normalize(&mut u);
    u
}

fn exact_top10(base: &[f32], queries: &[f32], dims: usize) -> Vec<Vec<u32>> {
    let rows: Vec<Vec<f32>> = base.chunks_exact(dims).map(unit).collect();
    let qs: Vec<&[f32]> = queries.chunks_exact(dims).collect();
    let half = qs.len().div_ceil(2);
    std::thread::scope(|sc| {
        let parts: Vec<_> = qs
            .chunks(half.max(1))
            .map(|part| {
                let rows = &rows;
                sc.spawn(move || {
                    part.iter()
                        .map(|q| {
                            let q = unit(q);
                            let mut d: Vec<(f32, u32)> = rows
                                .iter()
                                .enumerate()
                                .map(|(i, r)| (-kernels::dot(&q, r), i as u32))
                                .collect();
                            d.select_nth_unstable_by(9, |a, b| a.0.total_cmp(&b.0));
                            d.truncate(10);
                            d.sort_by(|a, b| a.0.total_cmp(&b.0));
                            d.into_iter().map(|x| x.1).collect::<Vec<u32>>()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        parts
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

fn query_body(q: &[f32], options: Option<&str>) -> Vec<u8> {
    let distance = match options {
        Some(o) => format!("VectorDistance(c.v, @q, false, {o})"),
        None => "VectorDistance(c.v, @q)".to_string(),
    };
    json!({"query": format!("SELECT TOP 10 c.id FROM c ORDER BY {distance}"),
           "parameters": [{"name": "@q", "value": q}]})
    .to_string()
    .into_bytes()
}

fn query_headers(explain: bool) -> Vec<(&'static str, &'static str)> {
    let mut h = vec![
        ("x-ms-documentdb-isquery", "true"),
        ("content-type", "application/query+json"),
        ("x-ms-documentdb-query-enablecrosspartition", "true"),
    ];
    if explain {
        h.push(("x-strata-explain", "true"));
    }
    h
}

/// Loads every vector with `clients` concurrent creates; returns items/s.
async fn load(http: &Http, d: &Arc<Data>, clients: usize) -> f64 {
    let started = Instant::now();
    let n = d.base.len() / d.dims;
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (http, d, next) = (http.clone(), Arc::clone(d), Arc::clone(&next));
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= n {
                    return;
                }
                let pk = format!("t{}", i % 1000);
                let v = &d.base[i * d.dims..(i + 1) * d.dims];
                let doc = json!({"id": i.to_string(), "pk": pk, "v": v});
                let h = format!("[\"{pk}\"]");
                let _ = http
                    .json(
                        Method::POST,
                        DOCS,
                        &[("x-ms-documentdb-partitionkey", &h)],
                        &doc,
                    )
                    .await;
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    n as f64 / started.elapsed().as_secs_f64()
}

async fn plan(http: &Http, body: &[u8]) -> String {
    match http
        .send_full(
            Method::POST,
            DOCS,
            &query_headers(true),
            Some(body.to_vec()),
        )
        .await
    {
        Ok(r) => strata_query::protocol::unescape_plan(
            r.headers
                .get("x-strata-query-plan")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default(),
        ),
        Err(_) => String::new(),
    }
}

/// The ids a query returns, and the documents it read (the route header's `scanned`).
async fn ids(http: &Http, body: &[u8]) -> (Vec<u32>, u64) {
    let Ok(r) = http
        .send_full(
            Method::POST,
            DOCS,
            &query_headers(false),
            Some(body.to_vec()),
        )
        .await
    else {
        return (Vec::new(), 0);
    };
    let scanned = r
        .headers
        .get("x-strata-query-route")
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.rsplit("scanned=").next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    let ids = serde_json::from_slice::<Value>(&r.body)
        .ok()
        .and_then(|v| v["Documents"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|d| d["id"].as_str().and_then(|s| s.parse().ok()))
        .collect();
    (ids, scanned)
}

/// Physical partitions of the bench's container.
async fn partitions(http: &Http) -> usize {
    match http
        .send_full(Method::GET, "/dbs/bench/colls/vectors/pkranges", &[], None)
        .await
    {
        Ok(r) => serde_json::from_slice::<Value>(&r.body)
            .ok()
            .and_then(|v| v["PartitionKeyRanges"].as_array().map(Vec::len))
            .unwrap_or(0),
        Err(_) => 0,
    }
}

fn recall(found: &[Vec<u32>], truth: &[Vec<u32>]) -> f64 {
    let hits: usize = found
        .iter()
        .zip(truth)
        .map(|(f, t)| t.iter().filter(|i| f.contains(i)).count())
        .sum();
    hits as f64 / (10 * truth.len()).max(1) as f64
}

/// One strata run: (kind, insert/s, build s, recall, qps, p50 ms, p99 ms, index MB, rss MB, disk MB).
#[derive(Debug, Clone, Default)]
struct Run {
    kind: String,
    insert: f64,
    build: f64,
    recall: f64,
    qps: f64,
    p50: f64,
    p99: f64,
    index_mb: f64,
    rss_mb: f64,
    disk_mb: f64,
    /// Physical partitions when queried.
    partitions: usize,
    /// Documents a query read (the route header's `scanned`), averaged over the recall pass.
    docs_per_query: f64,
    /// Server CPU (user + system) per query in the throughput phase, in ms: the figure that
    /// does not depend on the load generator.
    cpu_ms_per_query: f64,
}

async fn strata_run(a: &Args, d: &Arc<Data>, kind: Option<&str>) -> Run {
    let label = kind.unwrap_or("none");
    let (dir, loaded) = run_dir(
        a,
        &format!("vector-{label}-{}x{}", d.base.len() / d.dims.max(1), d.dims),
    );
    let started = Instant::now();
    let (mut child, url) = spawn_server(&server_bin(a), &dir);
    let http = Http::new(&url);
    let mut props = json!({"partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2},
        "vectorEmbeddingPolicy": {"vectorEmbeddings": [{"path": "/v", "dataType": "float32",
            "dimensions": d.dims, "distanceFunction": "cosine"}]},
        "indexingPolicy": {"indexingMode": "consistent", "includedPaths": [{"path": "/pk/?"}],
            "excludedPaths": [{"path": "/*"}]}});
    if let Some(k) = kind {
        props["indexingPolicy"]["vectorIndexes"] = json!([{"path": "/v", "type": k}]);
    }
    http.setup_with("bench", "vectors", props, Some(THROUGHPUT))
        .await
        .expect("setup");
    let t0 = Instant::now();
    let insert = if loaded {
        println!(
            "  strata {label}: reusing the vectors loaded in {}",
            dir.display()
        );
        0.0
    } else {
        let rate = load(&http, d, a.clients).await;
        mark_loaded(a, &dir);
        rate
    };
    let mut run = Run {
        kind: label.to_string(),
        insert,
        ..Run::default()
    };
    let bodies: Arc<Vec<Vec<u8>>> = Arc::new(
        d.queries
            .chunks_exact(d.dims)
            .map(|q| query_body(q, a.vector_search_options.as_deref()))
            .collect(),
    );
    if kind.is_some() {
        loop {
            let p = plan(&http, &bodies[0]).await;
            if p.contains("candidates from the") && !p.contains("not yet linked") {
                run.index_mb = p
                    .split(" vectors, ")
                    .nth(1)
                    .and_then(|s| s.split(' ').next())
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0.0);
                break;
            }
            if t0.elapsed() > Duration::from_secs(1800) {
                println!("  {label}: index not complete after 30 min: {p}");
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        run.build = t0.elapsed().as_secs_f64();
        if loaded {
            // A restart on the loaded store: the index from the snapshot a clean stop of the
            // last run wrote, reconciled with the documents (else rebuilt from them).
            println!(
                "  {label}: restart to the first indexed query {:.2} s (from starting the process)",
                started.elapsed().as_secs_f64()
            );
        }
        let mut found = Vec::new();
        let mut read = 0u64;
        for b in bodies.iter() {
            let (ids, scanned) = ids(&http, b).await;
            found.push(ids);
            read += scanned;
        }
        run.recall = recall(&found, &d.truth);
        run.docs_per_query = read as f64 / bodies.len().max(1) as f64;
        run.partitions = partitions(&http).await;
        // The load's flushes and compactions settle first: their CPU is not the queries'.
        let waited = crate::quiesce(child.id(), Duration::from_secs(120)).await;
        println!(
            "  {label}: background work settled in {:.0} s",
            waited.as_secs_f64()
        );
        // Server CPU per query, and a profile of the query phase under `--profile DIR`.
        let prof = crate::profile::Profiled {
            pid: child.id(),
            dir: a.profile.clone().unwrap_or_else(|| dir.clone()),
        };
        let rec = prof.start_with(&format!("vector-{label}"), a.profile.is_some());
        let (h, b) = (http.clone(), Arc::clone(&bodies));
        let op: runner::Op = Arc::new(move |n: u64| {
            let (h, b) = (h.clone(), Arc::clone(&b));
            Box::pin(async move {
                let body = b[n as usize % b.len()].clone();
                ok(
                    h.send(Method::POST, DOCS, &query_headers(false), Some(body))
                        .await,
                    &[200],
                )
            }) as futures::future::BoxFuture<'static, Result<f64, String>>
        });
        let m = runner::run(
            &format!("vector-{label}"),
            a.clients,
            Duration::from_secs_f64(a.warmup),
            Duration::from_secs_f64(a.seconds),
            op,
        )
        .await;
        run.qps = m.ops_per_sec;
        let (cpu_us, top) = prof.finish(rec, &m, a.warmup);
        run.cpu_ms_per_query = cpu_us.unwrap_or(0.0) / 1000.0;
        if let (Some(top), Some(d)) = (top, &a.profile) {
            let file = d.join(format!("vector-{label}.txt"));
            let _ = std::fs::write(&file, &top);
            println!("  profile of the query phase: {}", file.display());
        }
        run.p50 = m.p50_us as f64 / 1000.0;
        run.p99 = m.p99_us as f64 / 1000.0;
    }
    run.rss_mb = rss_kb(child.id()) as f64 / 1024.0;
    if a.store.is_some() {
        // A clean stop, so the next run on this store restarts from the index's snapshot.
        let stopping = Instant::now();
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let _ = child.wait();
        println!(
            "  {label}: clean stop {:.2} s (writes the index snapshot)",
            stopping.elapsed().as_secs_f64()
        );
    } else {
        let _ = child.kill();
        let _ = child.wait();
    }
    run.disk_mb = dir_bytes(&dir) as f64 / 1048576.0;
    drop_run_dir(a, &dir);
    run
}

fn write_f32(path: &std::path::Path, v: &[f32]) {
    let mut f = std::fs::File::create(path).expect("vector file");
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    f.write_all(&bytes).expect("write vectors");
}

/// Runs the Python anchors; one JSON object per anchor.
fn anchors(a: &Args, d: &Data, dir: &std::path::Path) -> Vec<Value> {
    write_f32(&dir.join("base.f32"), &d.base);
    write_f32(&dir.join("queries.f32"), &d.queries);
    let truth: Vec<u8> = d
        .truth
        .iter()
        .flatten()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let _ = std::fs::write(dir.join("truth.u32"), truth);
    python_anchors(
        "vector_anchors.py",
        &[
            dir.to_string_lossy().into_owned(),
            d.dims.to_string(),
            a.clients.to_string(),
            a.seconds.to_string(),
        ],
        "pip install faiss-cpu milvus-lite pymilvus numpy",
    )
}

/// Runs one of the bench's Python anchor scripts with the bench's Python
/// (`STRATA_BENCH_PYTHON`, else `target/pyenv`); one JSON object per line it prints. `hint`
/// says what to install when the Python is missing.
pub(crate) fn python_anchors(script: &str, args: &[String], hint: &str) -> Vec<Value> {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let python = std::env::var("STRATA_BENCH_PYTHON").unwrap_or_else(|_| {
        root.join("../../target/pyenv/bin/python")
            .to_string_lossy()
            .into_owned()
    });
    let out = std::process::Command::new(&python)
        .arg(root.join(script))
        .args(args)
        .output();
    match out {
        Ok(o) => {
            if !o.status.success() {
                println!(
                    "  anchors failed: {}",
                    String::from_utf8_lossy(&o.stderr)
                        .lines()
                        .last()
                        .unwrap_or_default()
                );
            }
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect()
        }
        Err(e) => {
            println!("  anchors skipped: {python}: {e} ({hint})");
            Vec::new()
        }
    }
}

pub async fn vector(a: &Args, r: &mut Report) {
    let (n, dims, nq) = if a.smoke {
        (2_000, 64, 20)
    } else {
        (a.vector_items as usize, a.vector_dims, 200)
    };
    println!("== vector: {n} vectors of {dims} float32 (seeded, 100 clusters), {nq} queries, cosine, top 10, 40,000 RU/s, {} clients", a.clients);
    let t = Instant::now();
    let d = Arc::new(generate(n, dims, nq));
    println!(
        "  exact top 10 of each query computed in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let raw_mb = (n * dims * 4) as f64 / 1048576.0;
    let mut runs = Vec::new();
    // A flat index takes at most 505 dimensions (the service's limit).
    let kinds: Vec<Option<&str>> = a
        .vector_kinds
        .split(',')
        .map(str::trim)
        .filter(|k| *k != "flat" || dims <= 505)
        .map(|k| (k != "none").then_some(k))
        .collect();
    for k in kinds {
        let run = strata_run(a, &d, k).await;
        println!("  strata {:<14} insert {:>7.0}/s  complete {:>6.1} s  recall@10 {:.3}  {:>7.0} q/s  p50 {:>6.1} ms  p99 {:>6.1} ms  index {:>5.0} MB ({:.2}x raw)  rss {:>5.0} MB  disk {:>5.0} MB",
            run.kind, run.insert, run.build, run.recall, run.qps, run.p50, run.p99, run.index_mb, run.index_mb / raw_mb, run.rss_mb, run.disk_mb);
        if run.kind != "none" {
            println!("  strata {:<14} {} physical partitions  {:.1} documents read per query  {:.2} ms server CPU per query",
                run.kind, run.partitions, run.docs_per_query, run.cpu_ms_per_query);
        }
        runs.push(run);
    }
    let dir = temp_dir("vector-anchors");
    let anchors = anchors(a, &d, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    for x in &anchors {
        println!("  {:<22} insert {:>7.0}/s  build {:>6.1} s  recall@10 {:.3}  {:>7.0} q/s  p50 {:>6.1} ms  p99 {:>6.1} ms  rss {:>5.0} MB  ({})",
            x["name"].as_str().unwrap_or("?"), x["insert"].as_f64().unwrap_or(0.0), x["build"].as_f64().unwrap_or(0.0),
            x["recall"].as_f64().unwrap_or(0.0), x["qps"].as_f64().unwrap_or(0.0), x["p50_ms"].as_f64().unwrap_or(0.0),
            x["p99_ms"].as_f64().unwrap_or(0.0), x["rss_mb"].as_f64().unwrap_or(0.0), x["note"].as_str().unwrap_or(""));
    }
    let get = |k: &str| runs.iter().find(|r| r.kind == k).cloned();
    let anchor_qps = |name: &str| {
        anchors
            .iter()
            .find(|x| x["name"].as_str().is_some_and(|n| n.starts_with(name)))
            .and_then(|x| x["qps"].as_f64())
    };
    // Targets for the runs this invocation made (`--vector-kinds`).
    if let Some(disk) = get("diskANN") {
        r.target(
            "diskANN recall@10 >= 0.95",
            format!("{:.3}", disk.recall),
            disk.recall >= 0.95,
        );
        if let Some(m) = anchor_qps("milvus-lite") {
            r.target(
                "diskANN q/s >= milvus-lite's",
                format!("{:.0} vs {m:.0}", disk.qps),
                disk.qps >= m,
            );
        }
        if let Some(f) = anchor_qps("faiss") {
            r.target(
                "diskANN q/s >= 0.5x faiss HNSW's",
                format!("{:.2}x ({:.0} vs {f:.0})", disk.qps / f, disk.qps),
                disk.qps >= 0.5 * f,
            );
        }
        r.target(
            "diskANN index memory <= 1.5x raw vectors",
            format!(
                "{:.2}x ({:.0} MB vs {raw_mb:.0} MB)",
                disk.index_mb / raw_mb,
                disk.index_mb
            ),
            disk.index_mb <= 1.5 * raw_mb,
        );
        // Not when either was loaded by an earlier run (`--store`).
        if let Some(none) = get("none").filter(|n| n.insert > 0.0 && disk.insert > 0.0) {
            r.target(
                "inserts with diskANN >= 0.5x without",
                format!(
                    "{:.2}x ({:.0}/s vs {:.0}/s)",
                    disk.insert / none.insert.max(1e-9),
                    disk.insert,
                    none.insert
                ),
                disk.insert >= 0.5 * none.insert,
            );
        }
    }
    if let Some(quant) = get("quantizedFlat") {
        r.target(
            "quantizedFlat recall@10 >= 0.90",
            format!("{:.3}", quant.recall),
            quant.recall >= 0.90,
        );
    }
    r.extra.insert(
        "vector".into(),
        json!({"items": n, "dims": dims, "queries": nq, "raw_mb": raw_mb,
               "strata": runs.iter().map(|x| json!({"kind": x.kind, "insert_per_s": x.insert, "complete_s": x.build,
                    "recall10": x.recall, "qps": x.qps, "p50_ms": x.p50, "p99_ms": x.p99, "index_mb": x.index_mb,
                    "rss_mb": x.rss_mb, "disk_mb": x.disk_mb, "partitions": x.partitions, "docs_per_query": x.docs_per_query, "cpu_ms_per_query": x.cpu_ms_per_query})).collect::<Vec<_>>(),
               "anchors": anchors}),
    );
}
