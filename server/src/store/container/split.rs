//! Splitting physical partitions.
//!
//! A partition whose stored bytes pass the threshold splits in the background. The cut is
//! chosen from the logical-partition size index (one small entry per full key, in EPK order):
//! the logical-partition boundary that divides the bytes most evenly, so a logical partition
//! never spans two physical partitions. Items are keyed by EPK in one ordered key space, so the
//! split itself only replaces one range by two in the partition map (under the container's
//! write lock, for microseconds) and persists the catalog; no data moves.
//!
//! The parent's id is retired: requests naming it get 410/1002; the children list every
//! ancestor in `parents`, so a client with an old routing map drops all replaced ranges.

use super::{decode_lp, read, write, Container, RangeState};
use crate::store::catalog::RangeRecord;
use crate::store::engine::Space;
use crate::store::{Store, StoreError};
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use strata_query::pk::epk::midpoint;
use strata_query::pk::EpkRange;

/// Where to cut a range, and the size of the left side.
#[derive(Debug, Clone, PartialEq)]
pub struct Cut {
    pub at: String,
    pub left_bytes: u64,
    pub left_count: u64,
}

/// Why a split was started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The partition outgrew the split threshold.
    Size,
    /// Throughput was raised past 10,000 RU/s per partition.
    Throughput,
}

/// Sizes of the logical partitions in `range`, in EPK order: (EPK, bytes, items).
pub fn logical_partitions(
    c: &Container,
    range: &EpkRange,
) -> Result<Vec<(String, u64, u64)>, StoreError> {
    let (start, end) = c.key_bounds(range);
    let mut entries = Vec::new();
    let mut cursor = start;
    let mut first = true;
    loop {
        let lower = if first {
            Bound::Included(&cursor[..])
        } else {
            Bound::Excluded(&cursor[..])
        };
        let chunk = c
            .engine
            .scan(Space::Partitions, lower, Bound::Excluded(&end), 4096, false)?;
        if chunk.is_empty() {
            return Ok(entries);
        }
        for (k, v) in &chunk {
            let (b, n) = decode_lp(v);
            let epk = c.codec.epk_hex(&k[4..]).unwrap_or_default();
            entries.push((epk.into_owned(), b, n));
        }
        cursor = chunk.last().map(|(k, _)| k.clone()).unwrap_or_default();
        first = false;
    }
}

/// The logical-partition boundary that divides the bytes most evenly; `None` with fewer than
/// two logical partitions.
pub fn median_cut(entries: &[(String, u64, u64)]) -> Option<Cut> {
    if entries.len() < 2 {
        return None;
    }
    let total: u64 = entries.iter().map(|e| e.1).sum();
    let half = total as f64 / 2.0;
    let mut best: Option<(f64, usize)> = None;
    let mut acc = 0u64;
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            let d = (acc as f64 - half).abs();
            if best.is_none_or(|(bd, _)| d < bd) {
                best = Some((d, i));
            }
        }
        acc += e.1;
    }
    best.map(|(_, i)| cut_at(entries, entries[i].0.clone()))
}

/// Which range splits next, and why (the splitter's rule, which the partition-key advisor
/// replays on simulated maps): the largest range over `threshold` that can split (`sizes`
/// gives each range's bytes and whether it holds more than one logical partition); else,
/// while there are fewer ranges than the throughput `want`s, the largest range.
pub fn next_split(sizes: &[(u64, bool)], threshold: u64, want: usize) -> Option<(usize, Reason)> {
    let mut by_size: Vec<usize> = (0..sizes.len()).collect();
    by_size.sort_by_key(|&i| std::cmp::Reverse(sizes[i].0));
    let over = by_size
        .iter()
        .find(|&&i| sizes[i].0 > threshold && sizes[i].1)
        .map(|&i| (i, Reason::Size));
    over.or_else(|| {
        (sizes.len() < want)
            .then(|| by_size.first().map(|&i| (i, Reason::Throughput)))
            .flatten()
    })
}

/// Where a range with logical partitions `entries` (EPK order) is cut: at the logical
/// partition boundary that halves its bytes; a throughput split of a range with one logical
/// partition or none cuts its EPK range in the middle. `None`: it cannot split.
pub fn choose_cut(
    entries: &[(String, u64, u64)],
    reason: Reason,
    pk: &strata_query::pk::PartitionKeyDefinition,
    range: &EpkRange,
) -> Option<Cut> {
    match (median_cut(entries), reason) {
        (Some(cut), _) => Some(cut),
        (None, Reason::Throughput) => midpoint(pk, range).map(|at| cut_at(entries, at)),
        (None, Reason::Size) => None,
    }
}

/// A cut at `at`, with the exact size of what lies below it.
pub fn cut_at(entries: &[(String, u64, u64)], at: String) -> Cut {
    let below = entries.iter().filter(|e| e.0 < at);
    let (left_bytes, left_count) = below.fold((0, 0), |(b, n), e| (b + e.1, n + e.2));
    Cut {
        at,
        left_bytes,
        left_count,
    }
}

impl Container {
    /// Replaces range `id` by two children cut at `cut`. Returns the children's ids, or None
    /// if the range is gone or the cut no longer lies strictly inside it.
    pub fn apply_split(&self, id: u32, cut: &Cut) -> Option<(u32, u32)> {
        self.with_writes_paused(|| {
            let mut map = write(&self.map);
            let idx = map.ranges.iter().position(|r| r.rec.id == id)?;
            let parent = &map.ranges[idx];
            let pr = parent.epk_range();
            if !pr.contains(&cut.at) || cut.at == pr.min {
                return None;
            }
            let lsn = self.current_lsn();
            let (l, r) = (map.next_range_id, map.next_range_id + 1);
            let mut parents = parent.rec.parents.clone();
            parents.push(parent.rec.id.to_string());
            let mut left = RangeState::new(
                RangeRecord {
                    id: l,
                    min: pr.min.clone(),
                    max: cut.at.clone(),
                    parents: parents.clone(),
                    created_lsn: lsn,
                },
                parent.lsn,
            );
            let mut right = RangeState::new(
                RangeRecord {
                    id: r,
                    min: cut.at.clone(),
                    max: pr.max.clone(),
                    parents,
                    created_lsn: lsn,
                },
                parent.lsn,
            );
            left.bytes = cut.left_bytes.min(parent.bytes);
            left.count = cut.left_count.min(parent.count);
            right.bytes = parent.bytes - left.bytes;
            right.count = parent.count - left.count;
            map.ranges.splice(idx..=idx, [left, right]);
            map.splitting.retain(|s| *s != id);
            map.next_range_id += 2;
            map.generation += 1;
            map.retired.insert(id, vec![l, r]);
            Some((l, r))
        })
    }

    /// Announces range `id`'s coming split (`on`) or withdraws it: the partition key range
    /// feed reports the range as splitting, under a new etag so that clients polling the feed
    /// see the change.
    fn announce_split(&self, id: u32, on: bool) {
        let mut map = write(&self.map);
        if map.splitting.contains(&id) == on {
            return;
        }
        map.splitting.retain(|s| *s != id);
        if on {
            map.splitting.push(id);
        }
        map.generation += 1;
    }

    /// The number of physical partitions the provisioned throughput calls for (one per
    /// 10,000 RU/s), within `--max-partitions`.
    pub fn partitions_for_throughput(&self) -> usize {
        let want = read(&self.meta)
            .throughput
            .as_ref()
            .map(|t| t.max_ru().div_ceil(10_000).max(1))
            .unwrap_or(1);
        want.min(u64::from(self.limits.max_partitions.max(1))) as usize
    }

    /// Whether splits are still needed (size or throughput) and possible.
    pub fn needs_split(&self) -> bool {
        let threshold = self.limits.partition_split_bytes;
        let map = read(&self.map);
        if map.ranges.len() >= self.limits.max_partitions as usize {
            return false;
        }
        let throughput_stuck =
            self.throughput_split_stuck_at.load(Ordering::Relaxed) == map.generation;
        (map.ranges.len() < self.partitions_for_throughput() && !throughput_stuck)
            || map
                .ranges
                .iter()
                .any(|r| r.bytes > threshold && !r.unsplittable())
    }
}

impl RangeState {
    /// A range holding a single logical partition cannot split. We note its item count when
    /// we find that out, so it is not rescanned on every write until its content changes.
    pub fn unsplittable(&self) -> bool {
        let at = self.unsplittable_at.load(Ordering::Relaxed);
        at != u64::MAX && at == self.count
    }
}

impl Store {
    /// Starts the background splitter for `c` if it needs one and none is running.
    pub fn maybe_split(&self, c: &Arc<Container>) {
        if !c.needs_split() || c.splitting.swap(true, Ordering::AcqRel) {
            return;
        }
        let store = self.clone();
        let c = Arc::clone(c);
        tokio::spawn(async move {
            // Each round splits once or gives up, and no container has more than
            // max_partitions ranges: a round count past that means no progress.
            let mut rounds = 0u32;
            loop {
                rounds += 1;
                if rounds > 2 * c.limits.max_partitions.max(1) {
                    tracing::warn!(container = %c.id, "splitting stopped: no progress after {rounds} rounds");
                    break;
                }
                match store.split_once(&c).await {
                    Ok(true) => tokio::task::yield_now().await,
                    Ok(false) => break,
                    Err(e) => {
                        tracing::error!(container = %c.id, error = %e, "split failed");
                        break;
                    }
                }
            }
            c.splitting.store(false, Ordering::Release);
            // Writes that arrived while we finished may need another round.
            if c.needs_split() && !c.deleted.load(Ordering::Acquire) {
                store.maybe_split(&c);
            }
        });
    }

    /// Performs one split if any is needed. Returns whether it split.
    pub async fn split_once(&self, c: &Arc<Container>) -> Result<bool, StoreError> {
        if c.deleted.load(Ordering::Acquire) {
            return Ok(false);
        }
        if !c.needs_split() {
            return Ok(false);
        }
        let threshold = c.limits.partition_split_bytes;
        let want = c.partitions_for_throughput();
        let (candidate, generation) = {
            let map = read(&c.map);
            let sizes: Vec<(u64, bool)> = map
                .ranges
                .iter()
                .map(|r| (r.bytes, !r.unsplittable()))
                .collect();
            let candidate = next_split(&sizes, threshold, want).map(|(i, reason)| {
                let r = &map.ranges[i];
                (r.rec.id, r.epk_range(), r.bytes, reason)
            });
            (candidate, map.generation)
        };
        // A throughput split that finds no place to cut would be tried again and again (on
        // every write, and in this loop): remember the map it failed on and stop quietly.
        let stuck = || {
            let generation = generation.max(read(&c.map).generation);
            c.throughput_split_stuck_at
                .store(generation, Ordering::Relaxed);
            tracing::debug!(container = %c.id, "no range can split further for throughput");
            Ok(false)
        };
        let Some((id, range, bytes, reason)) = candidate else {
            return Ok(false);
        };
        let started = Instant::now();
        let c2 = Arc::clone(c);
        let r2 = range.clone();
        let entries = tokio::task::spawn_blocking(move || logical_partitions(&c2, &r2))
            .await
            .map_err(|e| StoreError::Corrupt(format!("split worker failed: {e}")))??;
        let cut = match choose_cut(&entries, reason, &c.pk, &range) {
            Some(cut) => cut,
            None if reason == Reason::Throughput => return stuck(),
            None => {
                let map = read(&c.map);
                if let Some(r) = map.by_id(id) {
                    r.unsplittable_at.store(r.count, Ordering::Relaxed);
                    tracing::warn!(container = %c.id, range = id, bytes = r.bytes,
                        "partition exceeds the split threshold but holds a single logical partition; it cannot split");
                }
                return Ok(true);
            }
        };
        // A scale-up's split is announced first: the range reports "splitting" in the
        // partition key range feed for the notice, as the service's ranges do while their
        // split is under way (the Python SDK merges that status into its routing map), and
        // keeps serving until the split replaces it.
        if reason == Reason::Throughput && !c.limits.split_notice.is_zero() {
            c.announce_split(id, true);
            tokio::time::sleep(c.limits.split_notice).await;
            if c.deleted.load(Ordering::Acquire) {
                return Ok(false);
            }
        }
        let Some((l, r)) = c.apply_split(id, &cut) else {
            c.announce_split(id, false);
            if reason == Reason::Throughput {
                return stuck();
            }
            return Ok(true);
        };
        self.persist_container(c).await?;
        tracing::info!(
            container = %format!("{}/{}", c.db, c.id),
            parent = id,
            children = %format!("{l},{r}"),
            bytes,
            left_bytes = cut.left_bytes,
            right_bytes = bytes.saturating_sub(cut.left_bytes),
            reason = ?reason,
            micros = started.elapsed().as_micros() as u64,
            "split physical partition"
        );
        Ok(true)
    }
}
