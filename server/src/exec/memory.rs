//! What a query may hold in memory. A query answered from its complete result (DISTINCT,
//! GROUP BY, aggregates, a cross-partition merge of rows) keeps every row or group until it
//! is finished, and a few bytes of query text can make millions of them (three JOINs over a
//! 20-element array make 8,000 rows per document). Each such query gets a budget, charged
//! as rows and groups are kept, and fails with a 400 that says what to change once it is
//! spent; and only a few run at once server-wide, so many clients cannot multiply it.

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

/// Estimated bytes a held row or group costs beyond its own data (vectors, map slots).
pub const PER_ENTRY: usize = 96;

static HEAVY: LazyLock<tokio::sync::Semaphore> =
    LazyLock::new(|| tokio::sync::Semaphore::new(heavy_queries()));

/// One of the [`heavy_queries`] turns, held while a query builds its complete result.
pub async fn heavy_turn() -> Option<tokio::sync::SemaphorePermit<'static>> {
    HEAVY.acquire().await.ok()
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

    #[test]
    fn a_budget_is_spent_by_all_its_charges() {
        let h = Held::new(1000);
        assert!(h.charge(600).is_ok());
        assert!(h.charge(400).is_ok());
        assert!(matches!(h.charge(1), Err(ExecError::Memory(1000))));
    }
}
