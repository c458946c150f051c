//! Runs a workload: N concurrent clients for a duration after a warm-up, with latency
//! percentiles, errors and request units; and paired runs against the baseline.

use futures::future::BoxFuture;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::sync::atomic::AtomicU64;
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
    /// ops/s relative to the baseline measured alongside.
    pub ratio_to_baseline: Option<f64>,
    pub first_error: Option<String>,
}

/// Raw results of one measurement, mergeable across slices.
pub struct Sample {
    hist: Histogram<u64>,
    errors: u64,
    ru: f64,
    secs: f64,
    first_error: Option<String>,
}

impl Sample {
    fn merge(&mut self, other: Sample) {
        let _ = self.hist.add(&other.hist);
        self.errors += other.errors;
        self.ru += other.ru;
        self.secs += other.secs;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }

    fn measured(&self, name: &str, clients: usize) -> Measured {
        Measured {
            workload: name.to_string(),
            clients,
            seconds: self.secs,
            ops: self.hist.len(),
            ops_per_sec: self.hist.len() as f64 / self.secs,
            p50_us: self.hist.value_at_quantile(0.50),
            p99_us: self.hist.value_at_quantile(0.99),
            p999_us: self.hist.value_at_quantile(0.999),
            errors: self.errors,
            ru_per_sec: self.ru / self.secs,
            ratio_to_baseline: None,
            first_error: self.first_error.clone(),
        }
    }
}

/// Measures `op` and `baseline` in alternating one-second slices, `rounds` times, so that both
/// see the same machine: on a shared, noisy host the ratio of the totals is far steadier than
/// two measurements taken one after the other.
pub async fn paired(
    name: &str,
    baseline_name: &str,
    clients: usize,
    warmup: Duration,
    rounds: usize,
    op: Op,
    baseline: Op,
) -> (Measured, Measured) {
    let slice = Duration::from_secs(1);
    // One operation counter per workload across all its slices: workloads such as `create`
    // derive fresh ids from it, so restarting it per slice would repeat ids (409s).
    let (seq_w, seq_b) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut w: Option<Sample> = None;
    let mut b: Option<Sample> = None;
    for r in 0..rounds.max(1) {
        let warm = if r == 0 {
            warmup
        } else {
            Duration::from_millis(100)
        };
        let sb = sample(clients, warm, slice, Arc::clone(&baseline), &seq_b).await;
        let sw = sample(clients, warm, slice, Arc::clone(&op), &seq_w).await;
        match &mut b {
            Some(x) => x.merge(sb),
            None => b = Some(sb),
        }
        match &mut w {
            Some(x) => x.merge(sw),
            None => w = Some(sw),
        }
    }
    let (w, b) = (w.expect("a round ran"), b.expect("a round ran"));
    let mut mw = w.measured(name, clients);
    let mb = b.measured(baseline_name, clients);
    mw.ratio_to_baseline = Some(mw.ops_per_sec / mb.ops_per_sec.max(1e-9));
    (mw, mb)
}

pub async fn run(
    name: &str,
    clients: usize,
    warmup: Duration,
    duration: Duration,
    op: Op,
) -> Measured {
    sample(clients, warmup, duration, op, &Arc::new(AtomicU64::new(0)))
        .await
        .measured(name, clients)
}

async fn sample(
    clients: usize,
    warmup: Duration,
    duration: Duration,
    op: Op,
    seq: &Arc<AtomicU64>,
) -> Sample {
    let start = Instant::now();
    let measure_from = start + warmup;
    let end = measure_from + duration;
    let mut tasks = Vec::with_capacity(clients);
    for _ in 0..clients {
        let op = Arc::clone(&op);
        let seq = Arc::clone(seq);
        tasks.push(tokio::spawn(async move {
            let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram");
            let (mut errors, mut ru, mut first_error) = (0u64, 0.0f64, None);
            loop {
                if Instant::now() >= end {
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
    Sample {
        hist: all,
        errors,
        ru,
        secs: duration.as_secs_f64(),
        first_error,
    }
}
