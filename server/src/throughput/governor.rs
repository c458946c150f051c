//! Provisioned throughput, per physical partition.
//!
//! Each physical partition gets an equal share of its container's RU/s (or of its database's
//! shared RU/s) as a token bucket that refills continuously and holds at most one second of
//! budget. With enforcement on (`--enforce-throughput`, off by default like the official
//! emulator), a request whose charge does not fit gets 429 / sub-status 3200 with
//! `x-ms-retry-after-ms` set to when it would fit, and consumes nothing. Consumption is
//! tracked either way, for the partitions view: RU/s per partition, throttled requests, and
//! the hottest logical partitions.
//!
//! A request's [`Class`] adds two limits inside a partition's budget: its throughput
//! bucket's own token bucket at the bucket's share of the rate (429 / 3212 when spent), and,
//! for a Low-priority request, the RU that High requests spent in the last second, which it
//! leaves in the bucket (see [`crate::throughput::class`]).

use crate::store::container::Container;
use crate::throughput::class::{Buckets, Class, BUCKETS};
use dashmap::DashMap;
use rustc_hash::{FxBuildHasher, FxHashMap};
use std::sync::Mutex;
use std::time::Instant;

/// How many logical partitions each partition remembers consumption for.
const HOT_KEYS: usize = 256;

/// Tokens that refill continuously and hold at most one second of budget.
#[derive(Debug)]
struct Tokens {
    tokens: f64,
    last: Instant,
}

impl Tokens {
    fn new(rate: f64) -> Self {
        Self {
            tokens: rate,
            last: Instant::now(),
        }
    }

    fn refill(&mut self, rate: f64) {
        let now = Instant::now();
        let dt = now.duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + dt * rate).min(rate);
        self.last = now;
    }

    /// Milliseconds until `need` fits (0: it fits now).
    fn wait_ms(&self, need: f64, rate: f64) -> u64 {
        if self.tokens >= need {
            return 0;
        }
        ((((need - self.tokens) / rate) * 1000.0).ceil() as u64).max(1)
    }
}

#[derive(Debug)]
struct Bucket {
    /// The partition's budget.
    budget: Tokens,
    /// The throughput buckets' own tokens, made when a capped bucket is first used.
    groups: [Option<Tokens>; BUCKETS as usize],
    /// RU that High-priority requests consumed in the current one-second window and the last.
    high_ru: f64,
    last_high_ru: f64,
    /// RU consumed in the current one-second window, and in the last complete one.
    window_start: Instant,
    window_ru: f64,
    last_window_ru: f64,
    total_ru: f64,
    throttled: u64,
    /// RU consumed per logical partition (EPK), bounded.
    hot: FxHashMap<String, f64>,
}

impl Bucket {
    fn new(rate: f64) -> Self {
        let now = Instant::now();
        Self {
            budget: Tokens::new(rate),
            groups: Default::default(),
            high_ru: 0.0,
            last_high_ru: 0.0,
            window_start: now,
            window_ru: 0.0,
            last_window_ru: 0.0,
            total_ru: 0.0,
            throttled: 0,
            hot: FxHashMap::default(),
        }
    }

    fn refill(&mut self, rate: f64) {
        self.budget.refill(rate);
        self.roll_window();
    }

    /// Moves the one-second consumption window forward.
    fn roll_window(&mut self) {
        let now = Instant::now();
        let w = now.duration_since(self.window_start).as_secs_f64();
        if w >= 1.0 {
            self.last_window_ru = if w < 2.0 { self.window_ru } else { 0.0 };
            self.last_high_ru = if w < 2.0 { self.high_ru } else { 0.0 };
            self.window_ru = 0.0;
            self.high_ru = 0.0;
            self.window_start = now;
        }
    }

    /// What High requests spent in the last second (this window's and the part of the last
    /// one's still within a second, in proportion): a Low request leaves it in the bucket.
    fn high_reserve(&self) -> f64 {
        let into = self.window_start.elapsed().as_secs_f64().min(1.0);
        (self.high_ru + self.last_high_ru * (1.0 - into)).max(0.0)
    }

    /// The tokens of throughput bucket `id` at `rate` RU/s, refilled.
    fn group(&mut self, id: u8, rate: f64) -> &mut Tokens {
        let slot = &mut self.groups[usize::from(id.clamp(1, BUCKETS) - 1)];
        let g = slot.get_or_insert_with(|| Tokens::new(rate));
        g.refill(rate);
        g
    }

    fn consume(&mut self, ru: f64, epk: Option<&str>, class: Class) {
        self.budget.tokens -= ru;
        self.window_ru += ru;
        self.total_ru += ru;
        // A settled charge below its estimate gives RU back; the reserve only counts spending.
        if !class.low && ru > 0.0 {
            self.high_ru += ru;
        }
        if let Some(e) = epk {
            // A key already tracked costs no allocation.
            match self.hot.get_mut(e) {
                Some(v) => *v += ru,
                None => {
                    self.hot.insert(e.to_string(), ru);
                }
            }
            if self.hot.len() > HOT_KEYS * 2 {
                keep_largest(&mut self.hot, HOT_KEYS);
            }
        }
    }
}

/// Keeps the `n` largest consumers of `hot` (ties broken arbitrarily), in place: the map
/// rebuilt from a drained vector cost 0.5% of a point read's server CPU when many logical
/// partitions are read evenly (every read of a key not kept inserts it, and every `n` such
/// inserts prune).
fn keep_largest(hot: &mut FxHashMap<String, f64>, n: usize) {
    if hot.len() <= n || n == 0 {
        return;
    }
    let mut values: Vec<f64> = hot.values().copied().collect();
    let (_, bar, _) = values.select_nth_unstable_by(n - 1, |a, b| b.total_cmp(a));
    let bar = *bar;
    // Every value above the bar stays, and as many equal to it as fill `n`.
    let above = values.iter().filter(|v| v.total_cmp(&bar).is_gt()).count();
    let mut equal_kept = n - above;
    hot.retain(|_, v| match v.total_cmp(&bar) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Equal if equal_kept > 0 => {
            equal_kept -= 1;
            true
        }
        _ => false,
    });
}

/// The buckets of one container's partitions, by partition key range id.
type Partitions = FxHashMap<u32, Bucket>;

/// Consumption of one physical partition, for reporting.
#[derive(Debug, Clone)]
pub struct Usage {
    pub ru_per_second: f64,
    pub total_ru: f64,
    pub throttled: u64,
    pub budget_per_second: f64,
    /// (EPK, RU) of the hottest logical partitions, highest first.
    pub hottest: Vec<(String, f64)>,
}

/// A request refused because a partition's RU budget is spent (the API answers 429/3200).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct Throttled {
    /// When the budget will cover the request again.
    pub retry_after_ms: u64,
    /// Whether the request's throughput bucket was spent (429 / 3212), not the partition's
    /// budget (429 / 3200).
    pub by_bucket: bool,
    pub message: String,
}

/// What a container may spend: each physical partition's RU/s and its throughput buckets.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub rate: f64,
    pub buckets: Buckets,
}

/// Per container: the buckets of its partitions, behind one lock (never two held).
type Containers = DashMap<u32, Mutex<Partitions>, FxBuildHasher>;

/// How many sets of buckets consumption is tracked in when throughput is not enforced.
const TRACKING_SHARDS: usize = 16;

/// The throughput governor shared by all requests.
pub struct Governor {
    pub enforce: bool,
    /// Sets of buckets. Enforcing, every request spends from the first (a partition has one
    /// budget). Only tracking (the default), each thread records into its own set, and the
    /// partitions view adds them up: a connection thread that waited on a lock the other
    /// held — its holder preempted by the kernel — stalled every connection it serves
    /// (measured: up to 12.8 ms on one lock wait under durable upserts).
    shards: Vec<Containers>,
}

thread_local! {
    /// This thread's set of tracked buckets (see [`Governor::shards`]).
    static SHARD: usize = {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % TRACKING_SHARDS
    };
}

impl Governor {
    pub fn new(enforce: bool) -> Self {
        let shards = if enforce { 1 } else { TRACKING_SHARDS };
        Self {
            enforce,
            shards: (0..shards)
                .map(|_| DashMap::with_hasher(FxBuildHasher))
                .collect(),
        }
    }

    /// RU/s budget of one physical partition of `c`.
    pub fn rate(&self, c: &Container, shared_db_ru: Option<u64>) -> f64 {
        let ru = c
            .throughput()
            .map(|t| t.max_ru())
            .or(shared_db_ru)
            .unwrap_or(400);
        ru as f64 / c.physical_partitions().max(1) as f64
    }

    /// Runs `f` on the buckets of container `cid`'s partitions in set `shard`, under their
    /// lock.
    fn with_container<R>(&self, shard: usize, cid: u32, f: impl FnOnce(&mut Partitions) -> R) -> R {
        let buckets = &self.shards[shard % self.shards.len()];
        // A shared lookup first: `entry` takes the shard's write lock on every request.
        let cell = match buckets.get(&cid) {
            Some(cell) => cell,
            None => buckets.entry(cid).or_default().downgrade(),
        };
        let mut map = cell.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut map)
    }

    /// Spends `ru` on the given partitions (split evenly), or refuses with 429 when enforcing
    /// and any of them lacks the budget — the partition's (3200; for a Low-priority request,
    /// what High requests leave), or the request's throughput bucket's (3212) — and then
    /// nothing is spent. `budget` is only asked for when enforcing (tracking alone does not
    /// need it).
    #[allow(clippy::too_many_arguments)]
    pub fn spend(
        &self,
        c: &Container,
        budget: impl FnOnce() -> Budget,
        ranges: &[u32],
        epk: Option<&str>,
        ru: f64,
        class: Class,
    ) -> Result<(), Throttled> {
        if ranges.is_empty() || ru <= 0.0 {
            return Ok(());
        }
        if !self.enforce {
            self.track(c, ranges, epk, ru, class);
            return Ok(());
        }
        let Budget { rate, buckets } = budget();
        let capped = class.capped(&buckets);
        let share = ru / ranges.len() as f64;
        self.with_container(0, c.cid, |map| {
            let (mut wait_ms, mut bucket_wait_ms) = (0u64, 0u64);
            for r in ranges {
                let b = map.entry(*r).or_insert_with(|| Bucket::new(rate));
                b.refill(rate);
                // A charge above one second of budget is admitted once the bucket is full.
                let need = share.min(rate);
                let reserve = if class.low { b.high_reserve() } else { 0.0 };
                wait_ms = wait_ms.max(b.budget.wait_ms(need + reserve.min(rate - need), rate));
                if let Some((id, f)) = capped {
                    let g = b.group(id, rate * f);
                    bucket_wait_ms = bucket_wait_ms.max(g.wait_ms(share.min(rate * f), rate * f));
                }
            }
            if wait_ms > 0 || bucket_wait_ms > 0 {
                for r in ranges {
                    if let Some(b) = map.get_mut(r) {
                        b.throttled += 1;
                    }
                }
                return Err(match capped {
                    Some((id, f)) if bucket_wait_ms > 0 => Throttled {
                        retry_after_ms: bucket_wait_ms.max(wait_ms),
                        by_bucket: true,
                        message: format!(
                            "Request rate is large: throughput bucket {id} of '{}' may use {:.0}% of its throughput ({:.0} RU/s a partition) and has spent it; this request needs {ru:.2} RU. Retry after {} ms.",
                            c.id,
                            f * 100.0,
                            rate * f,
                            bucket_wait_ms.max(wait_ms)
                        ),
                    },
                    _ => Throttled {
                        retry_after_ms: wait_ms,
                        by_bucket: false,
                        message: format!(
                            "Request rate is large: this request needs {ru:.2} RU but partition(s) {ranges:?} of '{}' have {rate:.0} RU/s each and the budget is spent{}. Retry after {wait_ms} ms, raise the throughput, or spread the load over more partition key values.",
                            c.id,
                            if class.low { " (a Low-priority request leaves what High-priority requests use)" } else { "" }
                        ),
                    },
                });
            }
            for r in ranges {
                if let Some(b) = map.get_mut(r) {
                    b.consume(share, epk, class);
                    if let Some((id, f)) = capped {
                        b.group(id, rate * f).tokens -= share;
                    }
                }
            }
            Ok(())
        })
    }

    /// The fewest request units any partition of `c` has left now (its budget refilled; a
    /// partition nothing was spent on has a full second of budget), or `None` when throughput
    /// is not enforced. Background work that spends a container's budget (a global secondary
    /// index's copies) sizes its next step by it and waits while it is below zero.
    pub fn available(&self, c: &Container, budget: impl FnOnce() -> Budget) -> Option<f64> {
        if !self.enforce {
            return None;
        }
        let rate = budget().rate;
        self.with_container(0, c.cid, |map| {
            let least = map
                .values_mut()
                .map(|b| {
                    b.refill(rate);
                    b.budget.tokens
                })
                .fold(rate, f64::min);
            Some(least)
        })
    }

    /// Consumption tracking only (no budget): windows, totals, hot keys.
    fn track(&self, c: &Container, ranges: &[u32], epk: Option<&str>, ru: f64, class: Class) {
        self.track_cid(c.cid, ranges, epk, ru, class)
    }

    fn track_cid(&self, cid: u32, ranges: &[u32], epk: Option<&str>, ru: f64, class: Class) {
        let share = ru / ranges.len() as f64;
        let shard = SHARD.with(|s| *s);
        self.with_container(shard, cid, |map| {
            for r in ranges {
                let b = map.entry(*r).or_insert_with(|| Bucket::new(0.0));
                b.roll_window();
                b.consume(share, epk, class);
            }
        })
    }

    /// Records consumption without checking (the difference between an estimate and the
    /// actual charge of a write that already ran).
    pub fn record(
        &self,
        c: &Container,
        budget: impl FnOnce() -> Budget,
        ranges: &[u32],
        epk: Option<&str>,
        ru: f64,
        class: Class,
    ) {
        if ranges.is_empty() || ru == 0.0 {
            return;
        }
        if !self.enforce {
            self.track(c, ranges, epk, ru, class);
            return;
        }
        let Budget { rate, buckets } = budget();
        let capped = class.capped(&buckets);
        let share = ru / ranges.len() as f64;
        self.with_container(0, c.cid, |map| {
            for r in ranges {
                let b = map.entry(*r).or_insert_with(|| Bucket::new(rate));
                b.refill(rate);
                b.consume(share, epk, class);
                if let Some((id, f)) = capped {
                    b.group(id, rate * f).tokens -= share;
                }
            }
        })
    }

    /// Consumption of one partition: the sum over the sets consumption is tracked in.
    pub fn usage(&self, c: &Container, rate: f64, range: u32) -> Usage {
        self.usage_of(c.cid, rate, range)
    }

    fn usage_of(&self, cid: u32, rate: f64, range: u32) -> Usage {
        let mut usage = Usage {
            ru_per_second: 0.0,
            total_ru: 0.0,
            throttled: 0,
            budget_per_second: rate,
            hottest: Vec::new(),
        };
        let mut hot: FxHashMap<String, f64> = FxHashMap::default();
        for buckets in &self.shards {
            let Some(cell) = buckets.get(&cid) else {
                continue;
            };
            let mut map = cell.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(b) = map.get_mut(&range) {
                b.refill(rate);
                usage.ru_per_second += b.last_window_ru.max(b.window_ru);
                usage.total_ru += b.total_ru;
                usage.throttled += b.throttled;
                for (k, v) in &b.hot {
                    *hot.entry(k.clone()).or_default() += *v;
                }
            }
        }
        let mut hottest: Vec<(String, f64)> = hot.into_iter().collect();
        hottest.sort_by(|a, b| b.1.total_cmp(&a.1));
        hottest.truncate(5);
        usage.hottest = hottest;
        usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_refills_and_caps() {
        let mut b = Bucket::new(100.0);
        b.consume(150.0, Some("a"), Class::default());
        assert!(b.budget.tokens < 0.0);
        std::thread::sleep(std::time::Duration::from_millis(20));
        b.refill(100.0);
        assert!(
            b.budget.tokens > -50.0 && b.budget.tokens < 0.0,
            "{}",
            b.budget.tokens
        );
        b.budget.tokens = 1000.0;
        b.refill(100.0);
        assert_eq!(b.budget.tokens, 100.0, "at most one second of budget");
        assert_eq!(b.hot.get("a"), Some(&150.0));
    }

    #[test]
    fn pruning_keeps_exactly_the_largest_consumers() {
        let mut hot: FxHashMap<String, f64> = FxHashMap::default();
        for i in 0..40 {
            // 0..9 consumed 100 each, the rest their index (a tie at the bar below).
            hot.insert(format!("k{i}"), if i < 10 { 100.0 } else { f64::from(i) });
        }
        keep_largest(&mut hot, 12);
        assert_eq!(hot.len(), 12);
        for i in 0..10 {
            assert_eq!(hot.get(&format!("k{i}")), Some(&100.0));
        }
        assert!(hot.contains_key("k39") && hot.contains_key("k38"));
        for v in [3.0, 3.0, 3.0, 2.0] {
            hot.insert(format!("t{}", hot.len()), v);
        }
        // Ties at the bar: only as many as fill the count stay.
        keep_largest(&mut hot, 13);
        assert_eq!(hot.len(), 13);
        assert_eq!(hot.values().filter(|v| **v == 3.0).count(), 1);
        keep_largest(&mut hot, 20);
        assert_eq!(hot.len(), 13, "fewer than the count are all kept");
    }

    #[test]
    fn tracking_from_many_threads_adds_up_in_the_partitions_view() {
        let g = Governor::new(false);
        let threads: Vec<_> = (0..TRACKING_SHARDS + 3)
            .map(|t| {
                let g = &g;
                move || {
                    for _ in 0..100 {
                        g.track_cid(
                            7,
                            &[0, 1],
                            Some(if t == 0 { "hot" } else { "cold" }),
                            2.0,
                            Class::default(),
                        );
                    }
                    g.track_cid(7, &[1], Some("other"), 0.5, Class::default());
                }
            })
            .collect();
        std::thread::scope(|scope| {
            for t in threads {
                scope.spawn(t);
            }
        });
        let n = (TRACKING_SHARDS + 3) as f64;
        assert!(
            g.shards.iter().filter(|s| s.get(&7).is_some()).count() > 1,
            "threads track in sets of their own"
        );
        let u0 = g.usage_of(7, 100.0, 0);
        assert_eq!(u0.total_ru, n * 100.0);
        assert_eq!(u0.ru_per_second, n * 100.0);
        let u1 = g.usage_of(7, 100.0, 1);
        assert_eq!(u1.total_ru, n * 100.0 + n * 0.5);
        assert_eq!(
            u1.hottest
                .iter()
                .map(|(k, v)| (k.as_str(), *v))
                .collect::<Vec<_>>(),
            [
                ("cold", (n - 1.0) * 100.0),
                ("hot", 100.0),
                ("other", n * 0.5)
            ]
        );
        assert_eq!(g.usage_of(8, 100.0, 0).total_ru, 0.0, "another container");
    }

    #[test]
    fn a_bucket_read_by_many_keys_keeps_its_hottest() {
        let mut b = Bucket::new(100.0);
        for round in 0..5 {
            for k in 0..1000 {
                b.consume(1.0, Some(&format!("cold{k}")), Class::default());
                if k % 10 == 0 {
                    b.consume(5.0, Some("hot"), Class::default());
                }
            }
            assert!(b.hot.len() <= HOT_KEYS * 2, "round {round}");
        }
        assert_eq!(b.hot.get("hot"), Some(&2500.0));
    }
}
