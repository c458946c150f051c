//! `--profile DIR`: where a workload's server time goes. strata runs as a separate process
//! (`--server-bin`, else `target/release/strata`) and the throughput workloads drive it over
//! HTTP as with `--endpoint`; for each workload the bench reads the server's CPU time per
//! request from `/proc` and, when `perf` is installed, records a CPU profile of the server
//! alone (`DIR/<workload>.perf.data`) and writes its heaviest functions to
//! `DIR/<workload>.txt`. Build the server with `RUSTFLAGS="-C force-frame-pointers=yes"` for
//! call stacks (`perf report -i DIR/<workload>.perf.data`).
//!
//! CPU per request is the robust figure on a shared machine: unlike requests per second it
//! does not depend on how much CPU the load generator takes from the same cores.

use crate::runner::Measured;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A server process being measured.
pub struct Profiled {
    pub pid: u32,
    pub dir: PathBuf,
}

/// One workload's recording in progress.
pub struct Recording {
    /// The server's CPU ticks when the workload started (`None`: unreadable).
    ticks: Option<u64>,
    perf: Option<Child>,
    data: PathBuf,
}

/// Clock ticks per second of `/proc/<pid>/stat` (USER_HZ, 100 on every Linux this runs on).
const TICKS_PER_SEC: f64 = 100.0;

impl Profiled {
    /// Starts measuring workload `name`.
    pub fn start(&self, name: &str) -> Recording {
        self.start_with(name, true)
    }

    /// Starts measuring workload `name`: CPU time always, a `perf` profile when `record`.
    pub fn start_with(&self, name: &str, record: bool) -> Recording {
        let data = self.dir.join(format!("{name}.perf.data"));
        // perf does not create the folder it writes to.
        if record {
            let _ = std::fs::create_dir_all(&self.dir);
        }
        if !record {
            return Recording {
                ticks: crate::cpu_ticks(self.pid),
                perf: None,
                data,
            };
        }
        let perf = Command::new("perf")
            .args([
                "record",
                "-F",
                "499",
                "-g",
                "-p",
                &self.pid.to_string(),
                "-o",
            ])
            .arg(&data)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
        Recording {
            ticks: crate::cpu_ticks(self.pid),
            perf,
            data,
        }
    }

    /// Stops measuring: the server's CPU per request of `m` (µs; the warm-up's requests,
    /// which the figures leave out, estimated at the measured rate over `warm_secs`; `None`
    /// if the server's CPU time could not be read, e.g. it exited), and the profile's
    /// heaviest functions when `perf` ran.
    pub fn finish(
        &self,
        rec: Recording,
        m: &Measured,
        warm_secs: f64,
    ) -> (Option<f64>, Option<String>) {
        let requests = m.ops as f64 + m.ops_per_sec * warm_secs;
        let cpu_us = match (rec.ticks, crate::cpu_ticks(self.pid)) {
            (Some(t0), Some(t1)) if t1 >= t0 => {
                Some((t1 - t0) as f64 / TICKS_PER_SEC * 1e6 / requests.max(1.0))
            }
            _ => None,
        };
        let top = rec.perf.and_then(|mut p| {
            let _ = Command::new("kill")
                .args(["-INT", &p.id().to_string()])
                .status();
            p.wait().ok()?;
            top_functions(&rec.data)
        });
        (cpu_us, top)
    }
}

/// The 25 functions with the most samples (self time), as `perf report` prints them.
fn top_functions(data: &Path) -> Option<String> {
    let out = Command::new("perf")
        .args([
            "report",
            "--stdio",
            "--no-children",
            "--sort",
            "symbol",
            "-g",
            "none",
            "-i",
        ])
        .arg(data)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<String> = text
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .take(25)
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}
