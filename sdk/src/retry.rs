//! Retries with exponential backoff and jitter.
//!
//! After failed attempt `x` (1, 2, ...) the client waits `min(z_min + y, z_max)` where
//! `y = rand(0.8·z, 1.2·z) × (2^x − 1)` and `z` is the base delay, unless the service said how
//! long to wait (`x-ms-retry-after-ms` on 429), which is honoured. Retries stop after
//! `max_retries` or once the total wait would pass `max_total_wait`.

use std::time::Duration;

/// How the client retries throttled, unavailable and timed-out requests.
///
/// ```
/// use std::time::Duration;
/// use strata_sdk::RetryOptions;
/// let r = RetryOptions { max_retries: 3, base_delay: Duration::from_millis(50), ..RetryOptions::default() };
/// assert!(r.backoff(1, 1.0) <= Duration::from_millis(60));
/// ```
#[derive(Debug, Clone)]
pub struct RetryOptions {
    /// Most retries of one request (9, like the official SDKs).
    pub max_retries: u32,
    /// Most time spent waiting between attempts of one request (30 s).
    pub max_total_wait: Duration,
    /// `z`: the base delay of the exponential backoff.
    pub base_delay: Duration,
    /// `z_min`: added to every computed delay.
    pub min_delay: Duration,
    /// `z_max`: no single wait is longer.
    pub max_delay: Duration,
}

impl Default for RetryOptions {
    fn default() -> Self {
        Self {
            max_retries: 9,
            max_total_wait: Duration::from_secs(30),
            base_delay: Duration::from_millis(100),
            min_delay: Duration::ZERO,
            max_delay: Duration::from_secs(5),
        }
    }
}

impl RetryOptions {
    /// No retries at all.
    ///
    /// ```
    /// assert_eq!(strata_sdk::RetryOptions::none().max_retries, 0);
    /// ```
    pub fn none() -> Self {
        Self {
            max_retries: 0,
            ..Self::default()
        }
    }

    /// The wait after failed attempt `attempt` (1-based), for a jitter factor in
    /// `[0.8, 1.2]`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let r = strata_sdk::RetryOptions::default();
    /// assert_eq!(r.backoff(1, 1.0), Duration::from_millis(100));
    /// assert_eq!(r.backoff(2, 1.0), Duration::from_millis(300));
    /// assert_eq!(r.backoff(20, 1.2), Duration::from_secs(5));
    /// ```
    pub fn backoff(&self, attempt: u32, jitter: f64) -> Duration {
        let z = self.base_delay.as_secs_f64();
        let factor = (2f64.powi(attempt.min(30) as i32) - 1.0).max(0.0);
        let y = z * jitter.clamp(0.8, 1.2) * factor;
        let wait = self.min_delay.as_secs_f64() + y;
        Duration::from_secs_f64(wait.min(self.max_delay.as_secs_f64()))
    }

    /// The wait after `attempt` with a random jitter.
    pub(crate) fn jittered(&self, attempt: u32) -> Duration {
        let j: f64 = rand::random_range(0.8..=1.2);
        self.backoff(attempt, j)
    }
}
