//! Shared by the examples: where strata is.

/// `STRATA_ENDPOINT`, or the strata on this machine at the port its variables give
/// (`STRATA_PORT`, `PORT`; default 8081), as strata's own subcommands find it.
pub fn endpoint() -> String {
    strata_sdk::local_endpoint()
}

/// A database name unique to this run, so examples can run repeatedly.
pub fn unique(prefix: &str) -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    format!("{prefix}-{t}")
}
