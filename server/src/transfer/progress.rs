//! Progress where a user waits: on a terminal one line redrawn in place (count, total when
//! known, rate, ETA); otherwise a plain line every few seconds, so logs stay readable.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

pub struct Progress {
    what: &'static str,
    total: Option<u64>,
    done: u64,
    bytes: u64,
    failed: u64,
    started: Instant,
    last: Instant,
    terminal: bool,
}

impl Progress {
    pub fn new(what: &'static str, total: Option<u64>) -> Self {
        let now = Instant::now();
        Self {
            what,
            total,
            done: 0,
            bytes: 0,
            failed: 0,
            started: now,
            last: now,
            terminal: std::io::stderr().is_terminal(),
        }
    }

    pub fn set_total(&mut self, total: u64) {
        self.total = Some(total);
    }

    /// Counts `n` items of `bytes` (and `failed` of them that failed); redraws when due.
    pub fn add(&mut self, n: u64, bytes: u64, failed: u64) {
        self.done += n;
        self.bytes += bytes;
        self.failed += failed;
        let every = if self.terminal {
            Duration::from_millis(200)
        } else {
            Duration::from_secs(5)
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

    fn line(&self) -> String {
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        let rate = self.done as f64 / secs;
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
            ", {:.1} MB, {rate:.0} items/s",
            self.bytes as f64 / 1e6
        ));
        if let Some(t) = self.total {
            if rate > 0.0 && t > self.done {
                s.push_str(&format!(", ETA {:.0} s", (t - self.done) as f64 / rate));
            }
        }
        if self.failed > 0 {
            s.push_str(&format!(", {} failed", self.failed));
        }
        s
    }

    fn draw(&self, last: bool) {
        let mut err = std::io::stderr();
        if self.terminal {
            let _ = write!(err, "\r\x1b[2K{}", self.line());
            if last {
                let _ = writeln!(err);
            }
        } else {
            let _ = writeln!(err, "{}", self.line());
        }
        let _ = err.flush();
    }

    /// The final line, and the summary it stands for.
    pub fn finish(&self) -> String {
        self.draw(true);
        self.line()
    }
}
