//! `GET /_strata/storage`: where the store's bytes go — on disk by key space (items, their
//! index entries, the change feed, …) and the journal, in memory the write buffers, the block
//! cache and the hot-item caches beside the process's resident set; and how group commit
//! went. What an operator reads to size a disk, and what the scale benchmark prints per item.

use crate::api::response::Reply;
use crate::api::App;
use crate::error::CosmosError;
use axum::http::StatusCode;
use serde_json::{json, Map, Value};

pub fn read(app: &App) -> Result<Reply, CosmosError> {
    let usage = app.store.engine().usage();
    let (applied, syncs, sync_micros) = app.store.engine().commit_stats();
    let by_space: Map<String, Value> = usage
        .disk_by_space
        .iter()
        .map(|(name, bytes)| (name.to_string(), json!(bytes)))
        .collect();
    Ok(Reply::json(
        StatusCode::OK,
        &json!({
            "disk": {
                "totalBytes": usage.disk_total,
                "journalBytes": usage.journal,
                "bytesByKeySpace": by_space,
            },
            "memory": {
                "residentBytes": resident_bytes(),
                "writeBufferBytes": usage.write_buffers,
                "blockCacheBytes": usage.block_cache,
                "hotItemBytes": crate::store::container::hot_items_held(),
            },
            // Group commit since the process started: how many writes each journal sync
            // made durable, and what the syncs took.
            "commits": {
                "applied": applied,
                "journalSyncs": syncs,
                "syncMicros": sync_micros,
            },
        }),
    ))
}

/// The process's resident set (Linux: `VmRSS` of `/proc/self/status`); `None` elsewhere.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
