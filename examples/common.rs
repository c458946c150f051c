//! Shared by the examples: where strata is.

/// `STRATA_ENDPOINT`, or the emulator's default address.
pub fn endpoint() -> String {
    std::env::var("STRATA_ENDPOINT").unwrap_or_else(|_| "http://127.0.0.1:8081/".to_string())
}

/// A database name unique to this run, so examples can run repeatedly.
pub fn unique(prefix: &str) -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    format!("{prefix}-{t}")
}
