//! The diskANN bake-off: strata's Vamana graph (`strata_server::vector::VectorSet`, kind
//! diskANN) against Microsoft's `diskann` crate 0.61.0 (DiskANN3, the library behind the
//! service's own vector index), in process, single-threaded on both sides, at equal recall.
//!
//! Two shards: 25,000 × 768 and 250,000 × 128 float32, from the vector bench's seeded
//! clustered generator (`tests/bench/src/vector.rs`, `generate`: same RNG, same vectors and
//! queries for the same size). For each shard and engine (degree 32, build list 100, 8-bit
//! scalar codes re-ranked with the exact vectors, cosine):
//!
//! 1. build: insert ids `0..n` one at a time, timed (diskann's time includes training its
//!    quantizer and computing its start point);
//! 2. update stream, timed: every id `≡ 3 (mod 10)` gets a new vector from the generator (10%)
//!    and every id `≡ 7 (mod 20)` is deleted (5%), in id order. Ours: `set(key, Some(new))` /
//!    `set(key, None)`, then `link_all` (which also takes the deleted nodes out of the graph).
//!    diskann: `inplace_delete` of the old id, then insert of the new vector under a fresh
//!    id `n + j` (mapped back to the logical id); a delete is an `inplace_delete`;
//! 3. exact top 10 by cosine over the live vectors after the stream;
//! 4. 200 queries, k = 10, search list L swept over [`SWEEP`]: recall@10 and queries/s
//!    (the 200 queries repeated for at least a second per point). diskann's `Quantized`
//!    search walks the graph over codes and re-ranks its whole list (all L) exactly; ours
//!    re-ranks `RERANK` × k = 50 (the service's default), and `ours-rerank-L` is ours again
//!    re-ranking all L, as diskann does;
//! 5. a table per shard and the queries/s of each engine at recall 0.95 and 0.99.
//!
//! Each (shard, engine) runs in a child process of its own, so that the resident-memory
//! growth it prints is that engine's alone (after the build and the stream, over the process
//! with the data generated).
//!
//! Run (2 cores: nothing else should be running), from this directory so that
//! `.cargo/config.toml` builds for the CPU (`-C target-cpu=native`: diskann picks its SIMD
//! kernels at compile time and runs scalar, 3-4× slower, on a baseline x86-64 build):
//!
//! ```text
//! cd tests/bench/diskann-bakeoff
//! cargo run --release                 # both shards, about 3 minutes after the build
//! cargo run --release -- 25k          # one shard (25k or 250k)
//! BAKEOFF_ENGINES=ours BAKEOFF_NO_STREAM=1 cargo run --release -- 1m   # the bench's million
//! BAKEOFF_ROWS_DIR=/tmp/rows cargo run --release -- 250k   # ours with its rows in a file
//! BAKEOFF_OURS_DEGREE=48 BAKEOFF_OURS_L=100 cargo run --release -- 250k   # ours, other R / L
//! ```
//!
//! It is a workspace of its own, excluded from the main one: CI never builds it.

use diskann::graph::config::{Builder, MaxDegree};
use diskann::graph::search::Knn;
use diskann::graph::search_output_buffer::IdDistance;
use diskann::graph::{InplaceDeleteMethod, StartPointStrategy};
use diskann::provider::DefaultContext;
use diskann_providers::index::diskann_async::new_quant_index;
use diskann_providers::model::graph::provider::async_::common::{
    FullPrecision, Quantized, TableBasedDeletes,
};
use diskann_providers::model::graph::provider::async_::inmem::{
    DefaultProviderParameters, SetStartPoints, WithBits,
};
use diskann_quantization::scalar::train::ScalarQuantizationParameters;
use diskann_utils::views::rowmajor::{self, Matrix as _};
use diskann_vector::distance::Metric;
use std::num::NonZeroUsize;
use std::process::Command;
use std::time::{Duration, Instant};
use strata_server::vector::kernels::{dot, normalize};
use strata_server::vector::rows::{Budget, Place};
use strata_server::vector::{Distance, IndexKind, Origin, Params, SearchOpts, VectorSet};

const K: usize = 10;
const QUERIES: usize = 200;
/// `R`: most edges per node (both engines allow some slack above it between prunes).
const DEGREE: usize = 32;
/// `L` while building.
const BUILD_L: usize = 100;
/// diskann's pruning slack (its default); ours prunes with its own α (1.0, see graph.rs).
const ALPHA: f32 = 1.2;
/// Search lists measured.
const SWEEP: [usize; 12] = [10, 15, 20, 30, 40, 60, 80, 100, 150, 200, 300, 400];
/// Ours: candidates re-ranked exactly per result wanted.
const RERANK: usize = 5;
/// diskann's in-place delete: replacement edges per in-neighbour and how the candidates
/// are found (a search of list `l_value` for the deleted vector, its visited nodes and
/// top `k_value`).
const DELETE_REPLACE: usize = 3;
const DELETE_METHOD: InplaceDeleteMethod = InplaceDeleteMethod::VisitedAndTopK {
    k_value: 50,
    l_value: BUILD_L,
};
/// Recall levels compared.
const TARGETS: [f64; 2] = [0.95, 0.99];

struct Shape {
    name: &'static str,
    n: usize,
    dims: usize,
}

const SHAPES: [Shape; 3] = [
    Shape {
        name: "25k",
        n: 25_000,
        dims: 768,
    },
    Shape {
        name: "250k",
        n: 250_000,
        dims: 128,
    },
    // The vector bench's million (`--vector-items 1000000 --vector-dims 128`); run by name
    // only (`cargo run --release -- 1m`), with `BAKEOFF_ENGINES=ours` to leave diskann out.
    Shape {
        name: "1m",
        n: 1_000_000,
        dims: 128,
    },
];

const ENGINES: [&str; 2] = ["ours", "diskann"];

// ---------------------------------------------------------------------------------------
// Data
// ---------------------------------------------------------------------------------------

/// The vector bench's generator (`tests/bench/src/vector.rs`, `generate`), kept running past
/// the queries for the update stream's new vectors.
struct Gen {
    s: u64,
    dims: usize,
    centres: Vec<f32>,
}

impl Gen {
    fn new(dims: usize) -> Self {
        let mut g = Gen {
            s: 0x5eed,
            dims,
            centres: Vec::new(),
        };
        g.centres = (0..100 * dims).map(|_| g.noise() * 2.0).collect();
        g
    }

    fn next(&mut self) -> f32 {
        self.s = self
            .s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.s >> 11) as f32 / (1u64 << 53) as f32
    }

    /// Sum of three uniforms: a cheap bell curve.
    fn noise(&mut self) -> f32 {
        (self.next() + self.next() + self.next() - 1.5) * 0.5
    }

    /// A vector near centre `i % 100`.
    fn draw(&mut self, i: usize) -> Vec<f32> {
        let at = (i % 100) * self.dims;
        (0..self.dims)
            .map(|d| self.centres[at + d] + self.noise() * 0.6)
            .collect()
    }
}

enum Op {
    Replace(u32, Vec<f32>),
    Delete(u32),
}

struct Data {
    n: usize,
    dims: usize,
    base: Vec<f32>,
    queries: Vec<f32>,
    stream: Vec<Op>,
    /// Exact top 10 logical ids per query over the live vectors after the stream.
    truth: Vec<Vec<u32>>,
}

impl Data {
    fn row(&self, i: usize) -> &[f32] {
        &self.base[i * self.dims..(i + 1) * self.dims]
    }

    fn query(&self, i: usize) -> &[f32] {
        &self.queries[i * self.dims..(i + 1) * self.dims]
    }
}

fn generate(shape: &Shape) -> Data {
    let (n, dims) = (shape.n, shape.dims);
    let mut g = Gen::new(dims);
    let base: Vec<f32> = (0..n).flat_map(|i| g.draw(i)).collect();
    let queries: Vec<f32> = (0..QUERIES).flat_map(|i| g.draw(i * 7 + 3)).collect();
    let mut stream = Vec::new();
    // `BAKEOFF_NO_STREAM=1`: no update stream (the built index alone); `BAKEOFF_STREAM=
    // replaces` or `deletes`: that half of it only.
    let streamed = std::env::var_os("BAKEOFF_NO_STREAM").is_none();
    let only = std::env::var("BAKEOFF_STREAM").unwrap_or_default();
    for i in (0..n).filter(|_| streamed) {
        if i % 10 == 3 && only != "deletes" {
            stream.push(Op::Replace(i as u32, g.draw(i)));
        } else if i % 20 == 7 && only != "replaces" {
            stream.push(Op::Delete(i as u32));
        }
    }
    // The live vectors after the stream, as unit vectors in one flat array (one large
    // allocation, given back when freed: the children measure their memory growth after
    // this), with their logical ids.
    let mut live: Vec<Option<&[f32]>> = base.chunks_exact(dims).map(Some).collect();
    for op in &stream {
        match op {
            Op::Replace(id, v) => live[*id as usize] = Some(v),
            Op::Delete(id) => live[*id as usize] = None,
        }
    }
    let ids: Vec<u32> = (0..n as u32)
        .filter(|i| live[*i as usize].is_some())
        .collect();
    let mut rows: Vec<f32> = live
        .iter()
        .flatten()
        .flat_map(|v| v.iter().copied())
        .collect();
    rows.chunks_exact_mut(dims).for_each(normalize);
    drop(live);
    let qs: Vec<Vec<f32>> = queries.chunks_exact(dims).map(unit).collect();
    let truth = std::thread::scope(|sc| {
        let parts: Vec<_> = qs
            .chunks(QUERIES.div_ceil(2))
            .map(|part| {
                let (ids, rows) = (&ids, &rows);
                sc.spawn(move || {
                    part.iter()
                        .map(|q| exact_top(q, ids, rows))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        parts
            .into_iter()
            .flat_map(|h| h.join().expect("ground truth thread"))
            .collect()
    });
    Data {
        n,
        dims,
        base,
        queries,
        stream,
        truth,
    }
}

fn unit(v: &[f32]) -> Vec<f32> {
    let mut u = v.to_vec();
    normalize(&mut u);
    u
}

fn exact_top(q: &[f32], ids: &[u32], rows: &[f32]) -> Vec<u32> {
    let mut d: Vec<(f32, u32)> = rows
        .chunks_exact(q.len())
        .zip(ids)
        .map(|(r, id)| (-dot(q, r), *id))
        .collect();
    d.select_nth_unstable_by(K - 1, |a, b| a.0.total_cmp(&b.0));
    d.truncate(K);
    d.into_iter().map(|x| x.1).collect()
}

// ---------------------------------------------------------------------------------------
// Measurement
// ---------------------------------------------------------------------------------------

/// What one engine measured on one shard.
struct Run {
    build_s: f64,
    stream_s: f64,
    /// Resident memory growth over build and stream, MB.
    rss_mb: f64,
    /// Ours only: `VectorSet::held_bytes`, MB.
    held_mb: Option<f64>,
    /// Per search variant: its name and (L, recall@10, queries/s) points.
    sweeps: Vec<(String, Vec<(usize, f64, f64)>)>,
}

/// Recall@10 and queries/s for each search list of [`SWEEP`]; `pass(l, out)` runs the 200
/// queries and writes each one's logical ids into `out[q]`.
fn sweep(data: &Data, pass: &mut dyn FnMut(usize, &mut [Vec<u32>])) -> Vec<(usize, f64, f64)> {
    let mut out = vec![Vec::new(); QUERIES];
    SWEEP
        .iter()
        .map(|&l| {
            pass(l, &mut out);
            let hits: usize = out
                .iter()
                .zip(&data.truth)
                .map(|(got, want)| want.iter().filter(|w| got.contains(w)).count())
                .sum();
            let recall = hits as f64 / (QUERIES * K) as f64;
            let start = Instant::now();
            let mut passes = 0;
            while start.elapsed() < Duration::from_secs(1) {
                pass(l, &mut out);
                passes += 1;
            }
            let qps = (passes * QUERIES) as f64 / start.elapsed().as_secs_f64();
            (l, recall, qps)
        })
        .collect()
}

/// Resident memory of this process, MB.
fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn key(id: u32) -> [u8; 4] {
    id.to_be_bytes()
}

/// Ours, as `store::container::vectors` drives it: one shard (no shard key), keys the
/// ids big-endian, every key in the searched range.
fn run_ours(data: &Data) -> Run {
    let rss0 = rss_mb();
    // `BAKEOFF_ROWS_DIR=DIR`: the set keeps its linked rows in a file there, as the server
    // does past its rows' memory budget (`strata_server::vector::rows`; here no budget).
    let place = std::env::var_os("BAKEOFF_ROWS_DIR").map(|d| Place {
        dir: d.into(),
        budget: Budget::new(0),
    });
    let params = Params {
        kind: IndexKind::DiskAnn,
        dims: data.dims,
        metric: Distance::Cosine,
        list: std::env::var("BAKEOFF_OURS_L")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(BUILD_L),
        degree: std::env::var("BAKEOFF_OURS_DEGREE")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(DEGREE),
    };
    let mut set = VectorSet::with_rows_in(params, place.as_ref());
    let start = Instant::now();
    for i in 0..data.n {
        set.set(&key(i as u32), Some(data.row(i)), b"", Origin::default());
    }
    set.link_all();
    let build_s = start.elapsed().as_secs_f64();

    let start = Instant::now();
    for op in &data.stream {
        match op {
            Op::Replace(id, v) => set.set(&key(*id), Some(v), b"", Origin::default()),
            Op::Delete(id) => set.set(&key(*id), None, b"", Origin::default()),
        }
    }
    set.link_all();
    let stream_s = start.elapsed().as_secs_f64();
    let rss_mb = rss_mb() - rss0;
    let held_mb = Some(set.held_bytes() as f64 / 1e6);

    // Past every 4-byte key: the whole key space, so the shard is searched unfiltered.
    let (lo, hi): (&[u8], &[u8]) = (&[], &[0xff; 5]);
    // As the service's default (`RERANK` × k re-ranked), and re-ranking the whole beam as
    // diskann does (its `Rerank` post-processor scores all L exactly).
    let mut sweeps = Vec::new();
    for (name, whole_beam) in [("ours", false), ("ours-rerank-L", true)] {
        let points = sweep(data, &mut |l, out| {
            let opts = SearchOpts {
                brute_force: false,
                rerank: if whole_beam { l.div_ceil(K) } else { RERANK },
                list: l,
            };
            for (qi, got) in out.iter_mut().enumerate() {
                let found = set.search(data.query(qi), None, K, (lo, hi), None, opts);
                got.clear();
                got.extend(
                    found
                        .keys
                        .iter()
                        .map(|h| u32::from_be_bytes([h.key[0], h.key[1], h.key[2], h.key[3]])),
                );
            }
        });
        sweeps.push((name.to_string(), points));
    }
    Run {
        build_s,
        stream_s,
        rss_mb,
        held_mb,
        sweeps,
    }
}

/// Panics with `what` and the error (this is a harness).
fn ok<T, E: std::fmt::Debug>(r: Result<T, E>, what: &str) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e:?}"))
}

/// diskann: an in-memory index of full-precision vectors beside 8-bit scalar codes
/// (`new_quant_index` with `WithBits::<8>`), cosine over unit vectors (`CosineNormalized`;
/// the scalar store takes no plain `Cosine`), driven by a current-thread tokio runtime.
fn run_diskann(data: &Data) -> Run {
    let rt = ok(
        tokio::runtime::Builder::new_current_thread().build(),
        "tokio runtime",
    );
    let ctx = &DefaultContext;
    let (n, d) = (data.n, data.dims);
    let replaced = data
        .stream
        .iter()
        .filter(|op| matches!(op, Op::Replace(..)))
        .count();
    // Logical id of each diskann id: a replaced vector gets a fresh id `n + j`.
    let mut logical: Vec<u32> = (0..n as u32).collect();
    let rss0 = rss_mb();

    let start = Instant::now();
    let units: Vec<f32> = data.base.chunks_exact(d).flat_map(unit).collect();
    let view = ok(
        rowmajor::Ref::try_from_data(&units[..], n, d),
        "matrix view",
    );
    let quantizer = ScalarQuantizationParameters::default().train(view);
    let config = ok(
        Builder::new_with(
            DEGREE,
            MaxDegree::default_slack(),
            BUILD_L,
            Metric::CosineNormalized.into(),
            |b| {
                b.alpha(ALPHA);
            },
        )
        .build(),
        "config",
    );
    let params = DefaultProviderParameters {
        max_points: n + replaced,
        frozen_points: NonZeroUsize::MIN,
        dim: d,
        metric: Metric::CosineNormalized,
        prefetch_lookahead: None,
        prefetch_cache_line_level: None,
        max_degree: config.max_degree_u32().get(),
    };
    let index = ok(
        new_quant_index::<f32, _, _>(
            config,
            params,
            WithBits::<8>::new(quantizer),
            TableBasedDeletes,
        ),
        "new_quant_index",
    );
    let medoid = ok(StartPointStrategy::Medoid.compute(view), "medoid");
    let start_point = unit(medoid.row(0));
    ok(
        index
            .provider()
            .set_start_points(std::iter::once(&start_point[..])),
        "start point",
    );
    rt.block_on(async {
        for (i, v) in units.chunks_exact(d).enumerate() {
            ok(
                index.insert(&Quantized, ctx, &(i as u32), v).await,
                "insert",
            );
        }
    });
    drop(units);
    let build_s = start.elapsed().as_secs_f64();

    let start = Instant::now();
    rt.block_on(async {
        let mut fresh = n as u32;
        for op in &data.stream {
            let id = match op {
                Op::Replace(id, _) | Op::Delete(id) => *id,
            };
            ok(
                index
                    .inplace_delete(FullPrecision, ctx, &id, DELETE_REPLACE, DELETE_METHOD)
                    .await,
                "inplace_delete",
            );
            if let Op::Replace(id, v) = op {
                ok(
                    index.insert(&Quantized, ctx, &fresh, &unit(v)[..]).await,
                    "insert",
                );
                logical.push(*id);
                fresh += 1;
            }
        }
    });
    let stream_s = start.elapsed().as_secs_f64();
    let rss_mb = rss_mb() - rss0;

    let points = sweep(data, &mut |l, out| {
        let knn = ok(Knn::new(l, None), "knn");
        let mut ids = [0u32; K];
        let mut distances = [0f32; K];
        rt.block_on(async {
            for (qi, got) in out.iter_mut().enumerate() {
                let q = unit(data.query(qi));
                let mut buf = IdDistance::new(&mut ids, &mut distances);
                let stats = ok(
                    index.search(knn, &Quantized, ctx, &q[..], &mut buf).await,
                    "search",
                );
                got.clear();
                let found = (stats.result_count as usize).min(K);
                got.extend(ids[..found].iter().map(|&i| logical[i as usize]));
            }
        });
    });
    Run {
        build_s,
        stream_s,
        rss_mb,
        held_mb: None,
        sweeps: vec![("diskann".to_string(), points)],
    }
}

// ---------------------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------------------

/// A child: runs one engine on one shard and prints what it measured, a line a fact.
fn child(shape: &Shape, engine: &str) {
    let data = generate(shape);
    let run = match engine {
        "ours" => run_ours(&data),
        _ => run_diskann(&data),
    };
    println!("build {}", run.build_s);
    println!("stream {}", run.stream_s);
    println!("rss {}", run.rss_mb);
    if let Some(h) = run.held_mb {
        println!("held {h}");
    }
    for (name, points) in run.sweeps {
        for (l, r, q) in points {
            println!("point {name} {l} {r} {q}");
        }
    }
}

/// Parses a child's output back into a [`Run`].
fn parse(out: &str) -> Run {
    let mut run = Run {
        build_s: 0.0,
        stream_s: 0.0,
        rss_mb: 0.0,
        held_mb: None,
        sweeps: Vec::new(),
    };
    for line in out.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
        match f.first().copied() {
            Some("build") => run.build_s = num(1),
            Some("stream") => run.stream_s = num(1),
            Some("rss") => run.rss_mb = num(1),
            Some("held") => run.held_mb = Some(num(1)),
            Some("point") => {
                let name = f.get(1).copied().unwrap_or("?");
                if run.sweeps.last().is_none_or(|s| s.0 != name) {
                    run.sweeps.push((name.to_string(), Vec::new()));
                }
                if let Some(s) = run.sweeps.last_mut() {
                    s.1.push((num(2) as usize, num(3), num(4)));
                }
            }
            _ => {}
        }
    }
    run
}

/// Queries/s at recall `t`: the first L reaching it, and linear interpolation between the
/// points either side of it.
fn at_recall(points: &[(usize, f64, f64)], t: f64) -> String {
    let Some(i) = points.iter().position(|p| p.1 >= t) else {
        let best = points.iter().map(|p| p.1).fold(0.0, f64::max);
        return format!("not reached (best {best:.4})");
    };
    let (l, r, q) = points[i];
    let interp = if i == 0 {
        format!("≥ {t} from the smallest L")
    } else {
        let (_, r0, q0) = points[i - 1];
        let qt = q0 + (q - q0) * (t - r0) / (r - r0);
        format!("{qt:.0} q/s interpolated")
    };
    format!("L {l}: recall {r:.4}, {q:.0} q/s ({interp})")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("child") {
        let shape = SHAPES
            .iter()
            .find(|s| Some(s.name) == args.get(1).map(String::as_str))
            .expect("child: shape");
        child(shape, args.get(2).map_or("ours", String::as_str));
        return;
    }
    let exe = ok(std::env::current_exe(), "current exe");
    let shapes: Vec<&Shape> = SHAPES
        .iter()
        .filter(|s| (args.is_empty() && s.name != "1m") || args.iter().any(|a| a == s.name))
        .collect();
    for shape in shapes {
        let (n, dims) = (shape.n, shape.dims);
        println!(
            "== {} × {dims}: {n} vectors, stream replaces {} and deletes {}; {QUERIES} queries, k {K}, cosine",
            n,
            n / 10,
            n / 20
        );
        let mut runs = Vec::new();
        // `BAKEOFF_ENGINES=ours` (or `diskann`): one engine only.
        let only = std::env::var("BAKEOFF_ENGINES").unwrap_or_default();
        for engine in ENGINES
            .into_iter()
            .filter(|e| only.is_empty() || only.split(',').any(|o| o == *e))
        {
            let out = ok(
                Command::new(&exe)
                    .args(["child", shape.name, engine])
                    .stderr(std::process::Stdio::inherit())
                    .output(),
                "child",
            );
            assert!(
                out.status.success(),
                "{engine} on {}: {}",
                shape.name,
                out.status
            );
            runs.push((engine, parse(&String::from_utf8_lossy(&out.stdout))));
        }
        println!("engine    build s  stream s  RSS growth MB  held MB");
        for (engine, r) in &runs {
            let held = r.held_mb.map_or("-".to_string(), |h| format!("{h:.0}"));
            println!(
                "{engine:<8} {:>8.1} {:>9.1} {:>14.0} {held:>8}",
                r.build_s, r.stream_s, r.rss_mb
            );
        }
        let sweeps: Vec<&(String, Vec<(usize, f64, f64)>)> =
            runs.iter().flat_map(|(_, r)| &r.sweeps).collect();
        println!("search           L  recall@10      q/s");
        for (name, points) in &sweeps {
            for (l, recall, qps) in points {
                println!("{name:<14} {l:>4} {recall:>10.4} {qps:>8.0}");
            }
        }
        for t in TARGETS {
            for (name, points) in &sweeps {
                println!("at recall {t}: {name:<14} {}", at_recall(points, t));
            }
        }
        println!();
    }
}
