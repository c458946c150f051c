//! Any bytes as an x-ms-documentdb-partitionkey header.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = strata_query::pk::PartitionKey::from_header(text);
    }
});
