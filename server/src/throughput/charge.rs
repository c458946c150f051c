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

/// A query page from the work it did: index entries read, documents loaded (each costs as
/// a 1 KB document at least, larger ones by size) and bytes returned, over `partitions`
/// physical partitions. An index entry costs a fifteenth of a loaded document, so a
/// selective lookup is an order of magnitude cheaper than the scan it replaces.
pub fn query_work(
    index_entries: u64,
    loaded_docs: u64,
    loaded_bytes: u64,
    returned_bytes: usize,
    partitions: usize,
) -> f64 {
    let loaded_kb = (loaded_docs as f64).max(loaded_bytes as f64 / 1024.0);
    round(
        2.3 + 0.4 * (partitions.saturating_sub(1)) as f64
            + 0.002 * index_entries as f64
            + 0.029 * loaded_kb
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
        // Ten documents found through ten index entries cost less than scanning 1,000.
        let lookup = query_work(10, 10, 10 * 1024, 1024, 1);
        let scan = query_work(0, 1000, 1000 * 1024, 1024, 1);
        assert!(lookup * 5.0 < scan, "lookup {lookup} vs scan {scan}");
        assert!(query_work(0, 0, 0, 0, 1) < query_work(10, 0, 0, 0, 1));
    }
}
