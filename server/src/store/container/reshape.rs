//! Splits and merges asked for by range id — the management API of the SDK test emulator
//! (`crate::manage`) — beside the automatic splits of [`super::split`].
//!
//! A topology change is seen in two steps, as the service's own are: while *swapping*, the
//! ranges being replaced answer 410 with sub-status 1007 (CompletingSplit: the SDKs wait and
//! retry), and then the partition map replaces them at once. Items are keyed by EPK, so no
//! data moves either way; a merge only replaces two adjacent ranges by one whose `parents`
//! name both, so a client with an old routing map drops them.

use super::split::{cut_at, logical_partitions, median_cut, Cut};
use super::{read, write, Container, RangeState};
use crate::store::catalog::RangeRecord;
use crate::store::{Store, StoreError};
use std::sync::Arc;
use strata_query::pk::epk::midpoint;

/// Where a split asked for by name cuts its range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CutAt {
    /// The middle of the range's EPK span.
    Midpoint,
    /// A given EPK (hex), strictly inside the range.
    Epk(String),
    /// The logical-partition boundary that halves the range's stored bytes.
    Storage,
}

impl Container {
    /// The live range `id`, or 404 naming the container's ranges.
    fn live_range(&self, id: u32) -> Result<strata_query::pk::EpkRange, StoreError> {
        let map = read(&self.map);
        map.by_id(id).map(RangeState::epk_range).ok_or_else(|| {
            let ids: Vec<String> = map.ranges.iter().map(|r| r.rec.id.to_string()).collect();
            StoreError::NotFound(format!(
                "container {}/{} has no partition {id}; its partitions are {}",
                self.db,
                self.id,
                ids.join(", ")
            ))
        })
    }

    /// Where range `id` would be cut by `at` (checked now; the range may change before the
    /// split is applied, which then fails rather than cut elsewhere).
    pub fn plan_cut(&self, id: u32, at: &CutAt) -> Result<Cut, StoreError> {
        let range = self.live_range(id)?;
        let entries = logical_partitions(self, &range)?;
        let cut = match at {
            CutAt::Midpoint => midpoint(&self.pk, &range).map(|m| cut_at(&entries, m)),
            CutAt::Epk(epk) => {
                let epk = epk.to_ascii_uppercase();
                (range.contains(&epk) && epk != range.min).then(|| cut_at(&entries, epk))
            }
            CutAt::Storage => median_cut(&entries),
        };
        cut.ok_or_else(|| {
            StoreError::BadRequest(match at {
                CutAt::Midpoint => format!("partition {id} spans too few EPKs to cut in two"),
                CutAt::Epk(e) => format!(
                    "the EPK {e} does not lie strictly inside partition {id} [{}, {})",
                    range.min, range.max
                ),
                CutAt::Storage => format!(
                    "partition {id} holds fewer than two logical partitions: there is no boundary to split its storage at"
                ),
            })
        })
    }

    /// Checks that ranges `a` and `b` exist and are adjacent (in either order).
    pub fn check_merge(&self, a: u32, b: u32) -> Result<(), StoreError> {
        let (ra, rb) = (self.live_range(a)?, self.live_range(b)?);
        if a == b || (ra.max != rb.min && rb.max != ra.min) {
            return Err(StoreError::BadRequest(format!(
                "partitions {a} and {b} are not adjacent: only neighbouring ranges merge"
            )));
        }
        Ok(())
    }

    /// Marks ranges `ids` as being swapped (requests for them answer 410/1007), or clears
    /// them.
    pub fn set_swapping(&self, ids: &[u32], on: bool) {
        let mut map = write(&self.map);
        map.swapping.retain(|s| !ids.contains(s));
        if on {
            map.swapping.extend_from_slice(ids);
        }
    }

    /// The first of `ids` being swapped, if any.
    pub fn swapping_among(&self, ids: &[u32]) -> Option<u32> {
        let map = read(&self.map);
        ids.iter().copied().find(|id| map.swapping.contains(id))
    }

    /// Replaces adjacent ranges `a` and `b` by one. Returns its id, or `None` if either is
    /// gone or they are no longer neighbours.
    pub fn apply_merge(&self, a: u32, b: u32) -> Option<u32> {
        self.with_writes_paused(|| {
            let mut map = write(&self.map);
            let ia = map.ranges.iter().position(|r| r.rec.id == a)?;
            let ib = map.ranges.iter().position(|r| r.rec.id == b)?;
            let (lo, hi) = (ia.min(ib), ia.max(ib));
            if hi != lo + 1 {
                return None;
            }
            let (left, right) = (&map.ranges[lo], &map.ranges[hi]);
            let mut parents = left.rec.parents.clone();
            for p in right.rec.parents.iter() {
                if !parents.contains(p) {
                    parents.push(p.clone());
                }
            }
            parents.extend([left.rec.id.to_string(), right.rec.id.to_string()]);
            let id = map.next_range_id;
            let mut merged = RangeState::new(
                RangeRecord {
                    id,
                    min: left.rec.min.clone(),
                    max: right.rec.max.clone(),
                    parents,
                    created_lsn: self.current_lsn(),
                },
                left.lsn.max(right.lsn),
            );
            merged.bytes = left.bytes + right.bytes;
            merged.count = left.count + right.count;
            map.ranges.splice(lo..=hi, [merged]);
            map.next_range_id += 1;
            map.generation += 1;
            map.retired.insert(a, vec![id]);
            map.retired.insert(b, vec![id]);
            Some(id)
        })
    }
}

impl Store {
    /// Splits range `id` of `c` at `cut` and keeps the new map. Returns the children's ids.
    pub async fn split_range(
        &self,
        c: &Arc<Container>,
        id: u32,
        cut: &Cut,
    ) -> Result<(u32, u32), StoreError> {
        let children = c.apply_split(id, cut).ok_or_else(|| {
            StoreError::Conflict(format!(
                "partition {id} changed before the split was applied (it is gone, or the cut {} no longer lies inside it)",
                cut.at
            ))
        })?;
        self.persist_container(c).await?;
        tracing::info!(container = %format!("{}/{}", c.db, c.id), parent = id,
            children = %format!("{},{}", children.0, children.1), at = %cut.at, "split physical partition on request");
        Ok(children)
    }

    /// Merges adjacent ranges `a` and `b` of `c` and keeps the new map. Returns the merged
    /// range's id.
    pub async fn merge_ranges(
        &self,
        c: &Arc<Container>,
        a: u32,
        b: u32,
    ) -> Result<u32, StoreError> {
        let into = c.apply_merge(a, b).ok_or_else(|| {
            StoreError::Conflict(format!(
                "partitions {a} and {b} changed before the merge was applied (one is gone, or they are no longer neighbours)"
            ))
        })?;
        self.persist_container(c).await?;
        tracing::info!(container = %format!("{}/{}", c.db, c.id), merged = %format!("{a},{b}"),
            into, "merged physical partitions on request");
        Ok(into)
    }
}
