//! Runs a workload: N concurrent clients for a duration after a warm-up, with latency
//! percentiles, errors and request units.

use futures::future::BoxFuture;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One operation: given a sequence number, performs a request; returns its RU charge.
pub type Op = Arc<dyn Fn(u64) -> BoxFuture<'static, Result<f64, String>> + Send + Sync>;

#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    pub workload: String,
    pub clients: usize,
    pub seconds: f64,
    pub ops: u64,
    pub ops_per_sec: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub errors: u64,
    pub ru_per_sec: f64,
    /// ops/s relative to the baseline (filled in by the report).
    pub ratio_to_baseline: Option<f64>,
    pub first_error: Option<String>,
}

pub async fn run(
    name: &str,
    clients: usize,
    warmup: Duration,
    duration: Duration,
    op: Op,
) -> Measured {
    let start = Instant::now();
    let measure_from = start + warmup;
    let end = measure_from + duration;
    let seq = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = Vec::with_capacity(clients);
    for _ in 0..clients {
        let op = Arc::clone(&op);
        let seq = Arc::clone(&seq);
        tasks.push(tokio::spawn(async move {
            let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram");
            let (mut errors, mut ru, mut first_error) = (0u64, 0.0f64, None);
            loop {
                let now = Instant::now();
                if now >= end {
                    break;
                }
                let n = seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let t0 = Instant::now();
                let res = op(n).await;
                let us = t0.elapsed().as_micros() as u64;
                if t0 >= measure_from && t0 < end {
                    match res {
                        Ok(c) => {
                            let _ = h.record(us.max(1));
                            ru += c;
                        }
                        Err(e) => {
                            errors += 1;
                            first_error.get_or_insert(e);
                        }
                    }
                }
            }
            (h, errors, ru, first_error)
        }));
    }
    let mut all = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram");
    let (mut errors, mut ru, mut first_error) = (0, 0.0, None);
    for t in tasks {
        if let Ok((h, e, r, fe)) = t.await {
            let _ = all.add(&h);
            errors += e;
            ru += r;
            if first_error.is_none() {
                first_error = fe;
            }
        }
    }
    let secs = duration.as_secs_f64();
    Measured {
        workload: name.to_string(),
        clients,
        seconds: secs,
        ops: all.len(),
        ops_per_sec: all.len() as f64 / secs,
        p50_us: all.value_at_quantile(0.50),
        p99_us: all.value_at_quantile(0.99),
        p999_us: all.value_at_quantile(0.999),
        errors,
        ru_per_sec: ru / secs,
        ratio_to_baseline: None,
        first_error,
    }
}
