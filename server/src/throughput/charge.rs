//! The request-charge model, fitted to Cosmos DB's published figures: a 1 KB point read costs
//! 1 RU and a 100 KB read about 10 RU; a 1 KB write about 5.7 RU, growing with item size
//! (index maintenance); queries pay a fixed cost plus per document scanned and per KB returned,
//! so a fan-out query that scans everything is visibly dearer than a targeted one.

fn kb(bytes: usize) -> f64 {
    (bytes as f64 / 1024.0).max(1.0)
}

/// Point read of an item of `bytes`.
pub fn read(bytes: usize) -> f64 {
    round(1.0 + (kb(bytes) - 1.0) * 0.0909)
}

/// Create, replace, upsert or delete of an item of `bytes`.
pub fn write(bytes: usize) -> f64 {
    round(5.71 + (kb(bytes) - 1.0) * 0.45)
}

/// A query (page) that scanned `scanned` documents and returned `returned_bytes`.
pub fn query(scanned: u64, returned_bytes: usize, partitions: usize) -> f64 {
    round(
        2.3 + 0.4 * (partitions.saturating_sub(1)) as f64
            + 0.029 * scanned as f64
            + 0.1 * returned_bytes as f64 / 1024.0,
    )
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_shape() {
        assert_eq!(read(1024), 1.0);
        assert!((read(100 * 1024) - 10.0).abs() < 0.1);
        assert!((5.0..=6.0).contains(&write(1024)));
        assert!(write(10 * 1024) > write(1024));
        assert!(query(1000, 1024, 4) > query(10, 1024, 1));
    }
}
