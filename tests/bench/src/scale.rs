//! The scale suite: a separate strata process loaded with many items — load rate, point
//! reads at 10k vs N items, RSS, disk, restart time.

use crate::client::Http;
use crate::dataset::Dataset;
use crate::workloads::workload;
use crate::{dir_bytes, load, print_rows, quiesce, rss_kb, runner, temp_dir, Args, Report};
use reqwest::Method;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub fn server_bin(a: &Args) -> PathBuf {
    if let Some(b) = &a.server_bin {
        return b.clone();
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let release = root.join("target/release/strata");
    if release.exists() {
        release
    } else {
        root.join("target/debug/strata")
    }
}

pub fn spawn_server(bin: &Path, dir: &Path) -> (Child, String) {
    let mut child = Command::new(bin)
        .args(["--port", "0", "--log", "warn", "--data-dir"])
        .arg(dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start {}: {e} (build it: cargo build --release -p strata-server)",
                bin.display()
            )
        });
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("banner");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http"))
        .unwrap_or_default()
        .to_string();
    (child, url)
}

/// Upserts the dataset's items over again from 64 clients for `busy`, then kills the server
/// with SIGKILL while they write. Returns the upserts acknowledged.
async fn kill_while_writing(
    child: &mut Child,
    http: &Http,
    ds: &Arc<Dataset>,
    busy: Duration,
) -> u64 {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let stop = Arc::new(AtomicBool::new(false));
    let (next, acked) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let (http, ds, stop) = (http.clone(), Arc::clone(ds), Arc::clone(&stop));
        let (next, acked) = (Arc::clone(&next), Arc::clone(&acked));
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let i = next.fetch_add(1, Ordering::Relaxed) % ds.items;
                let pk = ds.pk_header(i);
                let headers = [
                    ("x-ms-documentdb-partitionkey", pk.as_str()),
                    ("x-ms-documentdb-is-upsert", "true"),
                ];
                let r = http
                    .json(
                        Method::POST,
                        "/dbs/bench/colls/events/docs",
                        &headers,
                        &ds.doc(i, 1),
                    )
                    .await;
                if matches!(r, Ok(ref o) if o.status < 300) {
                    acked.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    tokio::time::sleep(busy).await;
    let _ = child.kill();
    let _ = child.wait();
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    acked.load(Ordering::Relaxed)
}

/// Starts strata on `dir` and polls one item until it is served; returns the process,
/// its address and the seconds from spawn to that first successful read.
async fn restart_until_read(bin: &Path, dir: &Path, ds: &Dataset) -> (Child, String, f64) {
    let t0 = Instant::now();
    let (child, url) = spawn_server(bin, dir);
    let http = Http::new(&url);
    let pk = ds.pk_header(7);
    let path = format!("/dbs/bench/colls/events/docs/{}", Dataset::id(7));
    while t0.elapsed() < Duration::from_secs(60) {
        let headers = [("x-ms-documentdb-partitionkey", pk.as_str())];
        if let Ok(o) = http.send(Method::GET, &path, &headers, None).await {
            if o.status == 200 {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    (child, url, t0.elapsed().as_secs_f64())
}

/// The server's own account of its bytes (`GET /_strata/storage`).
pub(crate) async fn storage(http: &Http) -> Option<Value> {
    let o = http
        .send(Method::GET, "/_strata/storage", &[], None)
        .await
        .ok()?;
    (o.status == 200)
        .then(|| serde_json::from_slice(&o.body).ok())
        .flatten()
}

/// What the resident set holds: write buffers, block cache, hot items, the rest.
fn print_memory(usage: &Value) {
    let m = &usage["memory"];
    let mb = |k: &str| m[k].as_u64().unwrap_or(0) as f64 / 1e6;
    let rss = mb("residentBytes");
    let (buffers, blocks, hot) = (
        mb("writeBufferBytes"),
        mb("blockCacheBytes"),
        mb("hotItemBytes"),
    );
    println!(
        "  memory: resident {rss:.0} MB = write buffers {buffers:.0} + block cache {blocks:.0} + hot items {hot:.0} + the rest {:.0}",
        rss - buffers - blocks - hot
    );
}

/// Bytes per item on disk by key space (after a clean stop and restart: at rest).
fn print_disk(usage: &Value, n: u64, r: &mut Report) {
    let d = &usage["disk"];
    let per = |b: &Value| b.as_u64().unwrap_or(0) as f64 / n as f64;
    let mut parts: Vec<String> = Vec::new();
    if let Some(spaces) = d["bytesByKeySpace"].as_object() {
        for (name, bytes) in spaces {
            let v = per(bytes);
            r.extra
                .insert(format!("scale_disk_bytes_per_item_{name}"), json!(v));
            if v >= 0.5 {
                parts.push(format!("{name} {v:.0}"));
            }
        }
    }
    parts.push(format!("journal {:.0}", per(&d["journalBytes"])));
    println!(
        "  bytes per item at rest by key space: {} (the store's total {:.0})",
        parts.join(", "),
        per(&d["totalBytes"])
    );
}

pub async fn scale(a: &Args, r: &mut Report) {
    let n = if a.smoke { 5_000 } else { a.scale_items };
    let small = if a.smoke { 1_000 } else { 10_000 }.min(n);
    let bin = server_bin(a);
    println!(
        "== scale: {n} items in a separate strata process ({})",
        bin.display()
    );
    // Two servers side by side, one holding `small` items and one `n`, so their point reads
    // can be measured in alternating slices: on a shared machine, two measurements taken
    // minutes apart differ by more than the effect being measured.
    let small_dir = temp_dir("scale-small");
    let (mut small_child, small_url) = spawn_server(&bin, &small_dir);
    let small_http = Http::new(&small_url);
    small_http
        .setup("bench", "events", Dataset::definition(), None)
        .await
        .expect("setup");
    let ds_small = Arc::new(Dataset::new(small, a.item_size, a.tenants));
    load(&small_http, &ds_small, "events", 0, small, 64).await;

    let dir = temp_dir("scale");
    let (mut child, url) = spawn_server(&bin, &dir);
    let http = Http::new(&url);
    http.setup("bench", "events", Dataset::definition(), None)
        .await
        .expect("setup");
    let ds = Arc::new(Dataset::new(n, a.item_size, a.tenants));
    let started = Instant::now();
    let rate = load(&http, &ds, "events", 0, n, 64).await;
    println!(
        "  loaded {n} items in {:.1} s: {rate:.0} items/s",
        started.elapsed().as_secs_f64()
    );
    let settle = Duration::from_secs(if a.smoke { 5 } else { 120 });
    let waited = quiesce(child.id(), settle).await;
    println!(
        "  background work (flushes, compaction) settled after {:.1} s",
        waited.as_secs_f64()
    );
    let read_n = workload("point-read", &http, &ds, "events").expect("op");
    let read_small = workload("point-read", &small_http, &ds_small, "events").expect("op");
    let rounds = a.seconds.min(if a.smoke { 1.0 } else { 10.0 }).ceil() as usize;
    let (at_n, at_small) = runner::paired(
        &format!("point-read @ {n}"),
        &format!("point-read @ {small}"),
        a.clients,
        Duration::from_secs_f64(a.warmup.min(1.0)),
        rounds,
        read_n,
        read_small,
    )
    .await;
    let _ = small_child.kill();
    let _ = small_child.wait();
    let _ = std::fs::remove_dir_all(&small_dir);
    let rss = rss_kb(child.id()) / 1024;
    let disk = dir_bytes(&dir);
    print_rows(&[at_small.clone(), at_n.clone()]);
    println!(
        "  server RSS {rss} MB, disk {:.1} MB ({:.0} bytes/item)",
        disk as f64 / 1e6,
        disk as f64 / n as f64
    );
    if let Some(usage) = storage(&http).await {
        print_memory(&usage);
    }
    // Time restarts to the first served read: after kill -9 (the journal is replayed) and
    // after a clean stop, then after kill -9 under writes (below). The slowest of the three is
    // the figure held to the target.
    let _ = child.kill();
    let _ = child.wait();
    let (child, _, crash) = restart_until_read(&bin, &dir, &ds).await;
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let mut child = child;
    let _ = child.wait();
    // What the data takes at rest: a clean stop flushes the memtables, so the journal no
    // longer holds a second copy of the latest writes (while serving, how much it holds
    // depends on when the last flush ran, which made the figure vary by half).
    let at_rest = dir_bytes(&dir);
    println!(
        "  disk after a clean stop {:.1} MB ({:.0} bytes/item)",
        at_rest as f64 / 1e6,
        at_rest as f64 / n as f64
    );
    let (mut child, url, clean) = restart_until_read(&bin, &dir, &ds).await;
    if let Some(usage) = storage(&Http::new(&url)).await {
        print_disk(&usage, n, r);
    }
    // And after kill -9 in the middle of a write load, the journal holding what the
    // memtables had not flushed yet: the case the idle kill above does not see.
    let busy = Duration::from_secs(if a.smoke { 1 } else { 8 });
    let acked = kill_while_writing(&mut child, &Http::new(&url), &ds, busy).await;
    let (mut child, _, busy_crash) = restart_until_read(&bin, &dir, &ds).await;
    let _ = child.kill();
    let _ = child.wait();
    println!(
        "  restart to first served read: {:.0} ms after kill -9, {:.0} ms after a clean stop, {:.0} ms after kill -9 during writes ({acked} upserts acknowledged in the {} s before)",
        crash * 1000.0,
        clean * 1000.0,
        busy_crash * 1000.0,
        busy.as_secs()
    );
    let restart = crash.max(clean).max(busy_crash);
    r.extra.insert("scale_items".into(), json!(n));
    r.extra
        .insert("scale_load_items_per_sec".into(), json!(rate));
    r.extra.insert("scale_rss_mb".into(), json!(rss));
    r.extra.insert(
        "scale_disk_bytes_per_item".into(),
        json!(disk as f64 / n as f64),
    );
    r.extra.insert(
        "scale_disk_bytes_per_item_at_rest".into(),
        json!(at_rest as f64 / n as f64),
    );
    r.extra
        .insert("scale_restart_ms".into(), json!(restart * 1000.0));
    r.extra
        .insert("scale_restart_after_kill_ms".into(), json!(crash * 1000.0));
    r.extra
        .insert("scale_restart_after_stop_ms".into(), json!(clean * 1000.0));
    r.extra.insert(
        "scale_restart_after_kill_during_writes_ms".into(),
        json!(busy_crash * 1000.0),
    );
    let ratio = at_n.p99_us as f64 / at_small.p99_us.max(1) as f64;
    r.target(
        &format!("restart with {n} items on disk < 1 s"),
        format!("{:.0} ms", restart * 1000.0),
        restart < 1.0,
    );
    r.target(
        &format!("RSS < 300 MB at {n} items"),
        format!("{rss} MB"),
        rss < 300,
    );
    r.target(
        &format!("point-read p99 at {n} within 1.5x of p99 at {small}"),
        format!("{ratio:.2}x ({} vs {} us)", at_n.p99_us, at_small.p99_us),
        ratio <= 1.5,
    );
    r.rows.push(at_small);
    r.rows.push(at_n);
    let _ = std::fs::remove_dir_all(&dir);
}
