//! What a query may hold in memory. A query answered from its complete result (DISTINCT,
//! GROUP BY, aggregates, a cross-partition merge of rows) keeps every row or group until it
//! is finished, and a few bytes of query text can make millions of them (three JOINs over a
//! 20-element array make 8,000 rows per document). Each such query gets a budget, charged
//! as rows and groups are kept, and fails with a 400 that says what to change once it is
//! spent; and only a few run at once server-wide, so many clients cannot multiply it.
//!
//! A request's inputs weigh too: a query's parameters are parsed into JSON values several
//! times their size in the request (a number's few bytes of text take a 32-byte slot), and
//! copied as the query is bound and run. Each query [`reserve`]s what its inputs will hold
//! from one server-wide pool before it runs: a request heavier than its query's budget is
//! refused with a 413 that says so, and while the pool is spent later requests wait for it
//! rather than add to it.

use super::ExecError;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::LazyLock;

/// Most bytes of rows and groups one query holds at once, by default: the container limits'
/// (`Limits::query_memory_bytes`), which the store owns.
pub use crate::store::container::DEFAULT_QUERY_MEMORY_BYTES as QUERY_MEMORY_BYTES;

/// Queries that hold their complete result running at once, server-wide (one per core, at
/// least two); more wait. Their work is CPU-bound, so more at once would not finish sooner.
pub fn heavy_queries() -> usize {
    num_cpus::get().max(2)
}

/// Copies of a query's parameters alive while it runs, as measured with a 4 MB parameter:
/// the request's parsed body, the parameter list, the bound plan, and each partition's
/// worker's working copies.
pub const PARAMETER_COPIES: usize = 6;

/// The pool all running requests' inputs are reserved from: several queries' budgets.
pub const REQUEST_POOL_BYTES: usize = 8 * QUERY_MEMORY_BYTES;

/// Reserved in units of this many bytes (the pool's permits).
const UNIT: usize = 1024;

static POOL: LazyLock<tokio::sync::Semaphore> =
    LazyLock::new(|| tokio::sync::Semaphore::new(REQUEST_POOL_BYTES / UNIT));

/// Bytes reserved from the request pool, returned when dropped.
pub struct Reserved(#[allow(dead_code)] Option<tokio::sync::SemaphorePermit<'static>>);

/// Reserves `bytes` for what `what` will hold while it runs, within `limit` (the query's
/// budget): a 413 past it; otherwise it waits until the pool has room.
pub async fn reserve(bytes: usize, limit: usize, what: &str) -> Result<Reserved, ExecError> {
    let limit = limit.min(REQUEST_POOL_BYTES);
    if bytes > limit {
        return Err(ExecError::InputsTooLarge(format!(
            "The {what} would hold about {} MB in memory while it runs, more than the {} MB one query may use (--query-memory-bytes). Send less: fewer or smaller parameter values, or split the request.",
            bytes.div_ceil(1 << 20),
            limit >> 20
        )));
    }
    let units = u32::try_from(bytes.div_ceil(UNIT)).unwrap_or(u32::MAX);
    if units == 0 {
        return Ok(Reserved(None));
    }
    Ok(Reserved(POOL.acquire_many(units).await.ok()))
}

/// Bytes the pool has left (for tests and the memory report).
pub fn pool_available() -> usize {
    POOL.available_permits() * UNIT
}

/// Estimated bytes a held row or group costs beyond its own data (vectors, map slots).
pub const PER_ENTRY: usize = 96;

/// Who waits for a turn: queries of one class share their turns and never take another
/// class's, so a burst of slow searches (rank fusion over large texts, the statistics a
/// `FullTextScore` gathers first) cannot keep an unrelated `COUNT` or `DISTINCT` waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Aggregates, DISTINCT, GROUP BY, cross-partition merges.
    Complete,
    /// A ranked search's statistics and fusion.
    Search,
}

static HEAVY: LazyLock<[tokio::sync::Semaphore; 2]> = LazyLock::new(|| {
    [
        tokio::sync::Semaphore::new(heavy_queries()),
        tokio::sync::Semaphore::new(heavy_queries()),
    ]
});

/// One of the [`heavy_queries`] turns of `class`, held while a query builds its complete
/// result.
pub async fn heavy_turn(class: Class) -> Option<tokio::sync::SemaphorePermit<'static>> {
    HEAVY[class as usize].acquire().await.ok()
}

/// The memory one query has used, shared by its partitions' workers.
#[derive(Debug)]
pub struct Held {
    used: AtomicUsize,
    limit: usize,
}

impl Held {
    pub fn new(limit: usize) -> Self {
        Self {
            used: AtomicUsize::new(0),
            limit,
        }
    }

    /// The budget's bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Returns `bytes` charged earlier (rows dropped before the query ends).
    pub fn release(&self, bytes: usize) {
        let _ = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                Some(u.saturating_sub(bytes))
            });
    }

    /// Charges `bytes`; an error once the query's budget is spent.
    pub fn charge(&self, bytes: usize) -> Result<(), ExecError> {
        let now = self.used.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if now > self.limit {
            return Err(ExecError::Memory(self.limit));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reservations_are_refused_past_the_budget_and_returned_when_dropped() {
        let before = pool_available();
        let e = reserve(65 << 20, 64 << 20, "query's parameters")
            .await
            .err();
        assert!(matches!(e, Some(ExecError::InputsTooLarge(_))));
        let r = reserve(10 << 20, 64 << 20, "query").await.expect("fits");
        assert!(pool_available() <= before - (10 << 20));
        drop(r);
        assert!(pool_available() >= before.min(REQUEST_POOL_BYTES - (10 << 20)));
    }

    #[test]
    fn a_budget_is_spent_by_all_its_charges() {
        let h = Held::new(1000);
        assert!(h.charge(600).is_ok());
        assert!(h.charge(400).is_ok());
        assert!(matches!(h.charge(1), Err(ExecError::Memory(1000))));
    }
}
