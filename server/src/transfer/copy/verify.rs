//! The end of a copy: both sides compared, counts per source logical partition and a
//! checksum of every item's content.

use super::super::strip_item;
use super::fill::{get, map, segments, Fill};
use serde_json::Value;
use std::collections::BTreeMap;
use strata_sdk::{ContainerClient, QueryOptions};

/// Source key + id → checksum of the mapped content, for verification.
async fn fingerprint(
    c: &ContainerClient,
    key_paths: &[String],
    fills: Option<&[Fill]>,
) -> Result<BTreeMap<(String, String), u64>, String> {
    use futures::TryStreamExt;
    let opts = QueryOptions {
        max_item_count: Some(1000),
        ..Default::default()
    };
    let mut pages = std::pin::pin!(c.query_items::<Value>("SELECT * FROM c", opts));
    let mut out = BTreeMap::new();
    while let Some(page) = pages.try_next().await.map_err(|e| e.to_string())? {
        for r in page.items {
            let key: Vec<Value> = key_paths
                .iter()
                .map(|p| get(&r, &segments(p)).cloned().unwrap_or(Value::Null))
                .collect();
            let id = r
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let content = match fills {
                Some(f) => map(r, f),
                None => strip_item(r),
            };
            let hash = xxhash_rust::xxh3::xxh3_64(
                strata_query::sql::merge::canonical(&content).as_bytes(),
            );
            out.insert((Value::Array(key).to_string(), id), hash);
        }
    }
    Ok(out)
}

/// What the comparison found.
pub struct Verdict {
    pub ok: bool,
    pub text: String,
}

/// Compares both sides: every source item (mapped as the copy maps it) in the destination
/// with the same content, and nothing more, per source logical partition.
pub async fn compare(
    source: &ContainerClient,
    dest: &ContainerClient,
    source_paths: &[String],
    fills: &[Fill],
) -> Result<Verdict, String> {
    let src = fingerprint(source, source_paths, Some(fills)).await?;
    let dst = fingerprint(dest, source_paths, None).await?;
    let mut per_partition: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for (k, _) in src.keys() {
        per_partition.entry(k).or_default().0 += 1;
    }
    for (k, _) in dst.keys() {
        per_partition.entry(k).or_default().1 += 1;
    }
    let differing = per_partition.values().filter(|(s, d)| s != d).count();
    let changed = src.iter().filter(|(k, h)| dst.get(*k) != Some(*h)).count();
    let sum =
        |m: &BTreeMap<(String, String), u64>| m.values().fold(0u64, |a, h| a.wrapping_add(*h));
    Ok(
        if differing == 0 && changed == 0 && src.len() == dst.len() {
            Verdict {
            ok: true,
            text: format!(
                "verified: {} items in {} source logical partitions, checksum {:016x} on both sides",
                src.len(),
                per_partition.len(),
                sum(&src)
            ),
        }
        } else {
            Verdict {
            ok: false,
            text: format!(
                "VERIFICATION FAILED: source {} items, destination {}; {differing} logical partitions differ in count, {changed} items missing or different",
                src.len(),
                dst.len()
            ),
        }
        },
    )
}
