//! `--suite fulltext`: full-text search in strata beside the server and the library a user
//! would pick instead, on the same documents in the same run.
//!
//! Data: `--fulltext-items` short documents (8 to 24 words) from a seeded generator with a
//! Zipf vocabulary (30,000 pronounceable pseudo-words, exponent 1.0, as natural text's word
//! frequencies are); queries are 1, 2 and 3 words drawn from the middle of the vocabulary
//! (ranks 20 to 3,000: words that match hundreds to tens of thousands of documents).
//! strata runs as its own process on disk, one container at 40,000 RU/s (seven physical
//! partitions, one per 6,000 RU/s as the service makes them) with
//! a full-text index on `/text` and one without (upserts at 32 clients into each: the index's
//! write cost; the disk difference: its size), then at 32 clients: `FullTextContains` filters
//! (`TOP 10`) and BM25 top 10 (`ORDER BY RANK FullTextScore`) for 1-, 2- and 3-word queries.
//!
//! Anchors (`tests/bench/fulltext_anchors.py`, run with the bench's Python): PostgreSQL 15
//! (Debian's `postgresql-15`: a GIN index over a stored `to_tsvector('english', text)`,
//! `ts_rank` top 10: the server a user would pick instead) and tantivy (PyPI `tantivy`, in
//! process, BM25 top 10: the near-limit), reading the same documents from the file this
//! suite writes.

use crate::client::Http;
use crate::scale::{server_bin, spawn_server};
use crate::{drop_run_dir, mark_loaded, ok, run_dir, runner, temp_dir, Args, Report};
use reqwest::Method;
use serde_json::{json, Value};
use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

const DOCS: &str = "/dbs/bench/colls/text/docs";
/// The container's throughput: seven physical partitions (one per 6,000 RU/s, as the
/// service), a cross-partition query's usual fan-out.
const THROUGHPUT: u32 = 40_000;
const VOCABULARY: usize = 30_000;

struct Corpus {
    texts: Vec<String>,
    vocab: Vec<String>,
    /// Query words per query, for 1, 2 and 3 words.
    queries: Vec<Vec<Vec<String>>>,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn generate(n: usize) -> Corpus {
    let mut r = Rng(0x9E37_79B9_7F4A_7C15);
    const SYL: [&str; 16] = [
        "ka", "to", "ri", "ne", "mo", "su", "la", "pe", "di", "bo", "ga", "vu", "ze", "fi", "ju",
        "ha",
    ];
    let mut vocab = Vec::with_capacity(VOCABULARY);
    let mut seen = std::collections::HashSet::new();
    while vocab.len() < VOCABULARY {
        let len = 2 + (r.next() % 3) as usize;
        let w: String = (0..len).map(|_| SYL[(r.next() % 16) as usize]).collect();
        if seen.insert(w.clone()) {
            vocab.push(w);
        }
    }
    // Zipf(1.0) by inverse transform over the cumulative weights.
    let mut cum = Vec::with_capacity(VOCABULARY);
    let mut total = 0.0;
    for k in 1..=VOCABULARY {
        total += 1.0 / k as f64;
        cum.push(total);
    }
    let word = |r: &mut Rng| {
        let x = r.unit() * total;
        let i = cum.partition_point(|c| *c < x).min(VOCABULARY - 1);
        vocab[i].clone()
    };
    let texts = (0..n)
        .map(|_| {
            let len = 8 + (r.next() % 17) as usize;
            (0..len).map(|_| word(&mut r)).collect::<Vec<_>>().join(" ")
        })
        .collect();
    let queries = (1..=3)
        .map(|terms| {
            (0..100)
                .map(|_| {
                    (0..terms)
                        .map(|_| vocab[20 + (r.next() % 2980) as usize].clone())
                        .collect()
                })
                .collect()
        })
        .collect();
    Corpus {
        texts,
        vocab,
        queries,
    }
}

fn headers() -> Vec<(&'static str, &'static str)> {
    vec![
        ("x-ms-documentdb-isquery", "true"),
        ("content-type", "application/query+json"),
        ("x-ms-documentdb-query-enablecrosspartition", "true"),
    ]
}

fn lit(w: &[String]) -> String {
    w.iter()
        .map(|x| format!("'{x}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn contains_sql(w: &[String]) -> String {
    let all = w
        .iter()
        .map(|x| format!("FullTextContains(c.text, '{x}')"))
        .collect::<Vec<_>>()
        .join(" AND ");
    format!("SELECT TOP 10 c.id FROM c WHERE {all}")
}

fn rank_sql(w: &[String]) -> String {
    format!(
        "SELECT TOP 10 c.id FROM c ORDER BY RANK FullTextScore(c.text, {})",
        lit(w)
    )
}

/// Upserts every document with `clients` concurrent writers; returns documents/s.
async fn load(http: &Http, c: &Arc<Corpus>, clients: usize) -> f64 {
    let started = Instant::now();
    let n = c.texts.len();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (http, c, next) = (http.clone(), Arc::clone(c), Arc::clone(&next));
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= n {
                    return;
                }
                let _ = upsert(&http, i, &c.texts[i]).await;
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    n as f64 / started.elapsed().as_secs_f64()
}

/// Upserts document `i` (in partition `t{i % 1000}`) with `text`.
async fn upsert(http: &Http, i: usize, text: &str) -> Result<crate::client::Outcome, String> {
    let pk = format!("t{}", i % 1000);
    let doc = json!({"id": i.to_string(), "pk": pk, "text": text});
    let h = format!("[\"{pk}\"]");
    let headers = [
        ("x-ms-documentdb-partitionkey", h.as_str()),
        ("x-ms-documentdb-is-upsert", "true"),
    ];
    http.json(Method::POST, DOCS, &headers, &doc).await
}

/// Gives stored documents other documents' texts, about 100 a second, until `stop`: each
/// write changes the document's length and stems. Returns the writes per second.
async fn rewrite(http: Http, c: Arc<Corpus>, stop: Arc<std::sync::atomic::AtomicBool>) -> f64 {
    let started = Instant::now();
    let n = c.texts.len().max(1);
    let mut written = 0u64;
    let mut i = 0usize;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        if upsert(&http, i, &c.texts[(i * 7 + 13) % n]).await.is_ok() {
            written += 1;
        }
        i = (i + 1) % n;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    written as f64 / started.elapsed().as_secs_f64()
}

/// What one query load measured.
struct Load {
    qps: f64,
    p50: f64,
    p99: f64,
    /// Server CPU per query (ms), from the process's CPU time over the load.
    cpu_ms: f64,
    /// Documents the server read per query (its route header's `scanned`), over one pass.
    docs: f64,
    /// Requests that failed (a 429 among them: the container's throughput spent), and the
    /// first one's reason.
    errors: u64,
    first_error: Option<String>,
    /// Request units charged per query.
    ru: f64,
    /// The share of the machine's CPU time left idle during the load.
    idle: f64,
}

impl Load {
    /// The rest of a load's line: RU per query, the machine's idle share, and errors if any.
    fn more(&self) -> String {
        let mut s = format!("  {:.1} RU/query  {:.0}% idle", self.ru, self.idle * 100.0);
        if self.errors > 0 {
            let first: String = self
                .first_error
                .iter()
                .flat_map(|e| e.chars())
                .take(120)
                .collect();
            s.push_str(&format!("  {} errors ({first})", self.errors));
        }
        s
    }
}

/// Documents the server read for one query (its route header's `scanned`).
async fn scanned(http: &Http, body: &[u8]) -> u64 {
    let Ok(r) = http
        .send_full(Method::POST, DOCS, &headers(), Some(body.to_vec()))
        .await
    else {
        return 0;
    };
    r.headers
        .get("x-strata-query-route")
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.rsplit("scanned=").next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// One query load, its server CPU and (under `--profile DIR`) a profile of it in
/// `DIR/<name>.txt`.
async fn measure(
    a: &Args,
    http: &Http,
    prof: &crate::profile::Profiled,
    name: &str,
    bodies: Vec<Vec<u8>>,
) -> Load {
    let mut read = 0u64;
    for b in &bodies {
        read += scanned(http, b).await;
    }
    let docs = read as f64 / bodies.len().max(1) as f64;
    let (h, b) = (http.clone(), Arc::new(bodies));
    let op: runner::Op = Arc::new(move |n: u64| {
        let (h, b) = (h.clone(), Arc::clone(&b));
        Box::pin(async move {
            let body = b[n as usize % b.len()].clone();
            ok(
                h.send(Method::POST, DOCS, &headers(), Some(body)).await,
                &[200],
            )
        }) as futures::future::BoxFuture<'static, Result<f64, String>>
    });
    let rec = prof.start_with(name, a.profile.is_some());
    let machine = crate::machine_ticks();
    let m = runner::run(
        name,
        a.clients,
        Duration::from_secs_f64(a.warmup),
        Duration::from_secs_f64(a.seconds),
        op,
    )
    .await;
    let (cpu_us, top) = prof.finish(rec, &m, a.warmup);
    // The cores left idle: a load that leaves them idle waits on something other than CPU.
    let idle = match (machine, crate::machine_ticks()) {
        (Some((b0, i0)), Some((b1, i1))) if b1 + i1 > b0 + i0 => {
            (i1 - i0) as f64 / ((b1 + i1) - (b0 + i0)) as f64
        }
        _ => 0.0,
    };
    if let (Some(top), Some(d)) = (top, &a.profile) {
        let _ = std::fs::write(d.join(format!("{name}.txt")), &top);
    }
    Load {
        qps: m.ops_per_sec,
        p50: m.p50_us as f64 / 1000.0,
        p99: m.p99_us as f64 / 1000.0,
        cpu_ms: cpu_us.unwrap_or(0.0) / 1000.0,
        docs,
        errors: m.errors,
        first_error: m.first_error.clone(),
        ru: m.ru_per_sec / m.ops_per_sec.max(1e-9),
        idle,
    }
}

fn body(sql: String) -> Vec<u8> {
    json!({"query": sql}).to_string().into_bytes()
}

/// One strata process over one container (indexed or not): upserts/s, disk bytes, and the
/// query loads when indexed.
async fn strata_run(a: &Args, c: &Arc<Corpus>, indexed: bool) -> (f64, u64, Vec<Value>) {
    let label = if indexed { "indexed" } else { "plain" };
    let (dir, loaded) = run_dir(a, &format!("fulltext-{label}-{}", c.texts.len()));
    let (mut child, url) = spawn_server(&server_bin(a), &dir);
    let http = Http::new(&url);
    let props = json!({"partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2},
        "fullTextPolicy": {"defaultLanguage": "en-US", "fullTextPaths": [{"path": "/text", "language": "en-US"}]},
        "indexingPolicy": {"indexingMode": "consistent", "includedPaths": [{"path": "/pk/?"}],
            "excludedPaths": [{"path": "/*"}],
            "fullTextIndexes": if indexed { json!([{"path": "/text"}]) } else { json!([]) }}});
    http.setup_with("bench", "text", props, Some(THROUGHPUT))
        .await
        .expect("setup");
    let started = crate::cpu_ticks(child.id());
    let upserts = if loaded {
        println!(
            "  strata ({label}): reusing the documents loaded in {}",
            dir.display()
        );
        0.0
    } else {
        let rate = load(&http, c, a.clients).await;
        // Server CPU per upsert (10 ms clock ticks): the load's figure that does not depend
        // on the load generator sharing the cores.
        if let (Some(t0), Some(t1)) = (started, crate::cpu_ticks(child.id())) {
            println!(
                "  strata ({label}): {rate:.0} upserts/s, {:.3} ms server CPU per upsert",
                (t1 - t0) as f64 * 10.0 / c.texts.len().max(1) as f64
            );
        }
        mark_loaded(a, &dir);
        // The server writes its memtables to tables once writes stop (two of its 5-second
        // looks find them stopped): both folders are measured, and the queries run, on the
        // store as that leaves it, not on journals of writes not yet flushed.
        tokio::time::sleep(Duration::from_secs(11)).await;
        rate
    };
    let mut loads = Vec::new();
    let waited = crate::quiet_for(child.id(), Duration::from_secs(120), 3).await;
    // The folder at rest, once its flushes and compactions settled and the tables they
    // replaced were deleted (the server does that a look or two after compactions stop): the
    // tables (a journal's length depends on when fjall last rotated it, and a compaction cut
    // short by the kill at the end leaves its output beside its input).
    let disk = crate::settled_bytes(&dir.join("fjall").join("keyspaces")).await;
    // With the flushes and compactions the load left (how much of an LSM store's work falls
    // inside the load moves from run to run), the load's whole cost.
    if let (false, Some(t0), Some(t1)) = (loaded, started, crate::cpu_ticks(child.id())) {
        println!(
            "  strata ({label}): {:.3} ms server CPU per upsert with the background work it left",
            (t1 - t0) as f64 * 10.0 / c.texts.len().max(1) as f64
        );
    }
    if indexed {
        // The load's flushes and compactions settle first: their CPU is not the queries'.
        println!(
            "  strata: background work settled in {:.0} s",
            waited.as_secs_f64()
        );
        let prof = crate::profile::Profiled {
            pid: child.id(),
            dir: a.profile.clone().unwrap_or_else(|| dir.clone()),
        };
        for (i, qs) in c.queries.iter().enumerate() {
            let terms = i + 1;
            let contains: Vec<Vec<u8>> = qs.iter().map(|w| body(contains_sql(w))).collect();
            let ranked: Vec<Vec<u8>> = qs.iter().map(|w| body(rank_sql(w))).collect();
            for (kind, bodies) in [("contains", contains), ("bm25", ranked)] {
                let name = format!("fulltext-{kind}-{terms}");
                let l = measure(a, &http, &prof, &name, bodies).await;
                println!(
                    "  strata      {kind:<8} {terms} word(s)  {:>8.0} q/s  p50 {:>7.1} ms  p99 {:>7.1} ms  {:>6.1} documents read  {:.3} ms server CPU per query{}",
                    l.qps, l.p50, l.p99, l.docs, l.cpu_ms, l.more()
                );
                loads.push(json!({"engine": "strata", "kind": kind, "terms": terms, "qps": l.qps,
                    "p50_ms": l.p50, "p99_ms": l.p99, "docs_per_query": l.docs, "cpu_ms_per_query": l.cpu_ms}));
            }
        }
        // BM25 while documents change their texts (and lengths): the statistics and the
        // postings the writes touch must stay current without a recount per write.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = tokio::spawn(rewrite(http.clone(), Arc::clone(c), Arc::clone(&stop)));
        let ranked: Vec<Vec<u8>> = c.queries[0].iter().map(|w| body(rank_sql(w))).collect();
        let l = measure(a, &http, &prof, "fulltext-bm25-1-writes", ranked).await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let rewrites = writer.await.unwrap_or(0.0);
        println!(
            "  strata      bm25 1 word(s) with {rewrites:.0} text rewrites/s  {:>8.0} q/s  p50 {:>7.1} ms  p99 {:>7.1} ms  {:.3} ms server CPU per query{}",
            l.qps, l.p50, l.p99, l.cpu_ms, l.more()
        );
        loads.push(json!({"engine": "strata", "kind": "bm25-with-writes", "terms": 1, "qps": l.qps,
            "p50_ms": l.p50, "p99_ms": l.p99, "cpu_ms_per_query": l.cpu_ms, "rewrites_per_s": rewrites}));
        if let Some(d) = &a.profile {
            println!(
                "  profiles of the query loads: {}/fulltext-*.txt",
                d.display()
            );
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    drop_run_dir(a, &dir);
    (upserts, disk, loads)
}

/// Runs the anchors; one JSON object per measurement.
fn anchors(a: &Args, c: &Corpus, dir: &std::path::Path) -> Vec<Value> {
    let mut f = std::fs::File::create(dir.join("docs.tsv")).expect("corpus file");
    for (i, t) in c.texts.iter().enumerate() {
        let _ = writeln!(f, "{i}\t{t}");
    }
    let queries: Vec<Vec<Vec<String>>> = c.queries.clone();
    let _ = std::fs::write(dir.join("queries.json"), json!(queries).to_string());
    crate::vector::python_anchors(
        "fulltext_anchors.py",
        &[
            dir.to_string_lossy().into_owned(),
            a.clients.to_string(),
            a.seconds.to_string(),
        ],
        "pip install tantivy psycopg2-binary; apt-get install postgresql-15",
    )
}

pub async fn fulltext(a: &Args, r: &mut Report) {
    let n = if a.smoke {
        3_000
    } else {
        a.fulltext_items as usize
    };
    println!("== fulltext: {n} documents of 8-24 words (seeded, Zipf over {VOCABULARY} words), 1-3 word queries, 40,000 RU/s, {} clients", a.clients);
    let c = Arc::new(generate(n));
    let text_bytes: u64 = c.texts.iter().map(|t| t.len() as u64).sum();
    let _ = &c.vocab;
    let (plain_upserts, plain_disk, _) = strata_run(a, &c, false).await;
    let (upserts, disk, mut loads) = strata_run(a, &c, true).await;
    let index_bytes = disk.saturating_sub(plain_disk);
    // Loaded by an earlier run (`--store`): neither the load nor the folders' sizes (grown by
    // the restarts) are this run's.
    let reused = upserts == 0.0 || plain_upserts == 0.0;
    if reused {
        println!(
            "  strata: documents loaded by an earlier run; load rates and index size not measured"
        );
    } else {
        println!("  strata upserts {upserts:.0}/s with the index, {plain_upserts:.0}/s without ({:.2}x); index {:.0} bytes/document ({:.2}x the text's {} bytes/document)",
            upserts / plain_upserts.max(1e-9), index_bytes as f64 / n as f64,
            index_bytes as f64 / text_bytes.max(1) as f64, text_bytes / n as u64);
    }
    let dir = temp_dir("fulltext-anchors");
    let anchors = anchors(a, &c, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    for x in &anchors {
        if x["kind"] == "index" {
            println!(
                "  {:<11} load {:.0} docs/s, index {:.0} bytes/document ({})",
                x["engine"].as_str().unwrap_or("?"),
                x["load_per_s"].as_f64().unwrap_or(0.0),
                x["index_bytes"].as_f64().unwrap_or(0.0) / n as f64,
                x["note"].as_str().unwrap_or("")
            );
        } else {
            println!(
                "  {:<11} {:<8} {} word(s)  {:>8.0} q/s  p50 {:>7.1} ms  p99 {:>7.1} ms",
                x["engine"].as_str().unwrap_or("?"),
                x["kind"].as_str().unwrap_or("?"),
                x["terms"],
                x["qps"].as_f64().unwrap_or(0.0),
                x["p50_ms"].as_f64().unwrap_or(0.0),
                x["p99_ms"].as_f64().unwrap_or(0.0)
            );
        }
    }
    let qps = |engine: &str, kind: &str, terms: u64| -> Option<f64> {
        loads
            .iter()
            .chain(anchors.iter())
            .find(|x| x["engine"] == engine && x["kind"] == kind && x["terms"] == terms)
            .and_then(|x| x["qps"].as_f64())
    };
    for terms in 1..=3u64 {
        if let (Some(s), Some(pg)) = (
            qps("strata", "contains", terms),
            qps("postgresql", "contains", terms),
        ) {
            r.target(
                &format!("FullTextContains TOP 10, {terms} word(s): q/s >= PostgreSQL's"),
                format!("{:.2}x ({s:.0} vs {pg:.0})", s / pg.max(1e-9)),
                s >= pg,
            );
        }
        let Some(s) = qps("strata", "bm25", terms) else {
            continue;
        };
        if let Some(pg) = qps("postgresql", "bm25", terms) {
            r.target(
                &format!("BM25 top 10, {terms} word(s): q/s >= PostgreSQL's"),
                format!("{:.2}x ({s:.0} vs {pg:.0})", s / pg.max(1e-9)),
                s >= pg,
            );
        }
        if let Some(tv) = qps("tantivy", "bm25", terms) {
            r.target(
                &format!("BM25 top 10, {terms} word(s): q/s >= 0.5x tantivy's"),
                format!("{:.2}x ({s:.0} vs {tv:.0})", s / tv.max(1e-9)),
                s >= 0.5 * tv,
            );
        }
    }
    if !reused {
        r.target(
            "upserts with a full-text index >= 0.7x without",
            format!(
                "{:.2}x ({upserts:.0}/s vs {plain_upserts:.0}/s)",
                upserts / plain_upserts.max(1e-9)
            ),
            upserts >= 0.7 * plain_upserts,
        );
    }
    if !reused {
        r.target(
            "full-text index <= 1.5x the indexed text's bytes",
            format!(
                "{:.2}x ({} vs {} bytes)",
                index_bytes as f64 / text_bytes.max(1) as f64,
                index_bytes,
                text_bytes
            ),
            index_bytes * 2 <= text_bytes * 3,
        );
    }
    loads.extend(anchors);
    r.extra.insert(
        "fulltext".into(),
        json!({"documents": n, "text_bytes": text_bytes, "index_bytes": index_bytes,
               "upserts_indexed_per_s": upserts, "upserts_plain_per_s": plain_upserts,
               "loads": loads}),
    );
}
