//! Progress where a user waits: on a terminal one line redrawn in place (count, total when
//! known, rate, ETA, lag while following); otherwise a plain line every few seconds, so logs
//! stay readable. A server-side job keeps the same numbers quietly and shows them as JSON
//! ([`Progress::snapshot`]), so the command line and the job API report alike.

use serde_json::{json, Value};
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Where the progress goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Output {
    /// Redrawn in place on stderr.
    Terminal,
    /// A line on stderr every few seconds.
    Lines,
    /// Nowhere: read through [`Progress::snapshot`].
    Quiet,
}

#[derive(Debug)]
pub struct Progress {
    what: &'static str,
    phase: &'static str,
    total: Option<u64>,
    done: u64,
    deleted: u64,
    bytes: u64,
    failed: u64,
    /// Changes of the source not yet copied (while following), when known.
    lag: Option<u64>,
    started: Instant,
    started_at: u64,
    last: Instant,
    output: Output,
    /// Set when the copy's job is deleted: its workers write nothing more.
    stopped: bool,
}

impl Progress {
    /// Progress drawn on stderr (in place on a terminal, lines otherwise).
    pub fn new(what: &'static str, total: Option<u64>) -> Self {
        let output = if std::io::stderr().is_terminal() {
            Output::Terminal
        } else {
            Output::Lines
        };
        Self::with_output(what, total, output)
    }

    /// Progress kept for [`Self::snapshot`] only (a server-side job).
    pub fn quiet(what: &'static str) -> Self {
        Self::with_output(what, None, Output::Quiet)
    }

    fn with_output(what: &'static str, total: Option<u64>, output: Output) -> Self {
        let now = Instant::now();
        Self {
            what,
            phase: "starting",
            total,
            done: 0,
            deleted: 0,
            bytes: 0,
            failed: 0,
            lag: None,
            started: now,
            started_at: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            last: now,
            output,
            stopped: false,
        }
    }

    /// Stops the copy reporting here: its workers check before each write, so nothing read
    /// after this call is written (aborting its task alone takes effect only at its workers'
    /// next await, and a write they already sent completes).
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    pub fn set_total(&mut self, total: u64) {
        self.total = Some(total);
    }

    /// What the work is doing now (`copying`, `following`, `verifying`, ...).
    pub fn set_phase(&mut self, phase: &'static str) {
        self.phase = phase;
        self.redraw_if_due();
    }

    pub fn phase(&self) -> &'static str {
        self.phase
    }

    /// Changes of the source not yet copied.
    pub fn set_lag(&mut self, lag: u64) {
        self.lag = Some(lag);
        self.redraw_if_due();
    }

    /// Counts `n` items of `bytes` (and `failed` of them that failed); redraws when due.
    pub fn add(&mut self, n: u64, bytes: u64, failed: u64) {
        self.done += n;
        self.bytes += bytes;
        self.failed += failed;
        self.redraw_if_due();
    }

    /// Counts deletes carried over to the destination.
    pub fn add_deleted(&mut self, n: u64) {
        self.deleted += n;
        self.redraw_if_due();
    }

    fn redraw_if_due(&mut self) {
        let every = match self.output {
            Output::Terminal => Duration::from_millis(200),
            Output::Lines => Duration::from_secs(5),
            Output::Quiet => return,
        };
        if self.last.elapsed() >= every {
            self.last = Instant::now();
            self.draw(false);
        }
    }

    pub fn done(&self) -> u64 {
        self.done
    }

    pub fn failed(&self) -> u64 {
        self.failed
    }

    fn rate(&self) -> f64 {
        self.done as f64 / self.started.elapsed().as_secs_f64().max(1e-3)
    }

    fn eta(&self) -> Option<f64> {
        let (t, rate) = (self.total?, self.rate());
        (rate > 0.0 && t > self.done).then(|| (t - self.done) as f64 / rate)
    }

    fn line(&self) -> String {
        let mut s = match self.total {
            Some(t) if t > 0 => format!(
                "{} {}/{} ({:.0}%)",
                self.what,
                self.done,
                t,
                100.0 * self.done as f64 / t as f64
            ),
            _ => format!("{} {}", self.what, self.done),
        };
        s.push_str(&format!(
            ", {:.1} MB, {:.0} items/s",
            self.bytes as f64 / 1e6,
            self.rate()
        ));
        if let Some(eta) = self.eta() {
            s.push_str(&format!(", ETA {eta:.0} s"));
        }
        if self.deleted > 0 {
            s.push_str(&format!(", {} deleted", self.deleted));
        }
        if self.failed > 0 {
            s.push_str(&format!(", {} failed", self.failed));
        }
        if self.phase == "following" {
            match self.lag {
                Some(0) => s.push_str("; following, caught up"),
                Some(n) => s.push_str(&format!("; following, {n} changes behind")),
                None => s.push_str("; following"),
            }
        }
        s
    }

    fn draw(&self, last: bool) {
        let mut err = std::io::stderr();
        match self.output {
            Output::Terminal => {
                let _ = write!(err, "\r\x1b[2K{}", self.line());
                if last {
                    let _ = writeln!(err);
                }
            }
            Output::Lines => {
                let _ = writeln!(err, "{}", self.line());
            }
            Output::Quiet => return,
        }
        let _ = err.flush();
    }

    /// The numbers as JSON (the job API's `progress`).
    pub fn snapshot(&self) -> Value {
        json!({
            "phase": self.phase,
            "items": self.done,
            "deleted": self.deleted,
            "bytes": self.bytes,
            "failed": self.failed,
            "total": self.total,
            "itemsPerSecond": (self.rate() * 10.0).round() / 10.0,
            "etaSeconds": self.eta().map(|e| e.round()),
            "lag": self.lag,
            "startedAt": self.started_at,
            "line": self.line(),
        })
    }

    /// The final line, and the summary it stands for.
    pub fn finish(&self) -> String {
        self.draw(true);
        self.line()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_show_counts_deletes_and_lag() {
        let mut p = Progress::quiet("copied");
        p.set_total(10);
        p.add(4, 4000, 0);
        p.add_deleted(2);
        p.set_phase("following");
        p.set_lag(7);
        let line = p.finish();
        assert!(line.starts_with("copied 4/10 (40%), 0.0 MB"), "{line}");
        assert!(line.contains("2 deleted") && line.ends_with("following, 7 changes behind"));
        let s = p.snapshot();
        assert_eq!((s["items"].as_u64(), s["lag"].as_u64()), (Some(4), Some(7)));
        assert_eq!(s["phase"], "following");
        p.set_lag(0);
        assert!(p.finish().ends_with("following, caught up"));
    }
}
