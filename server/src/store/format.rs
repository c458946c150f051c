//! The storage format of a data directory, and the migrations that bring an older one up to
//! date when it is opened, before anything else reads it.
//!
//! Format 1 spelled every EPK in hex: a three-level key's 48 bytes as 96 characters, in the
//! item, directory, change-feed, unique-key and partition-size entries of every document.
//! Format 2 spells the EPKs of hash v2 and hierarchical keys in binary ([`KeyCodec`]); other
//! containers keep the hex spelling, and the index already used the binary one.
//!
//! Migrations are crash-safe without a journal of their own: each chunk is one atomic batch
//! that deletes entries in the old spelling and puts them in the new one, an entry's spelling
//! can be told from the entry alone, so a migration that was interrupted simply runs again and
//! skips what it already did; and the format marker is written last, after every chunk in
//! journal order, so a store whose marker survived a crash has every chunk too.

use super::catalog::ContainerRecord;
use super::engine::{Engine, Op, Space};
use super::keys::{self, KeyCodec, FORMAT_VERSION};
use super::{scan_prefix, StoreError};
use std::ops::Bound;

/// Entries rewritten per batch.
const CHUNK: usize = 1024;

/// Brings the store in `engine` to [`FORMAT_VERSION`].
pub fn migrate(engine: &Engine) -> Result<(), StoreError> {
    let version = stored_version(engine)?;
    if version > FORMAT_VERSION {
        return Err(StoreError::Corrupt(format!(
            "the data directory is in storage format {version}, written by a newer strata; this one reads formats up to {FORMAT_VERSION}"
        )));
    }
    build_directory(engine)?;
    if version == FORMAT_VERSION {
        return Ok(());
    }
    let started = std::time::Instant::now();
    let mut moved = 0u64;
    for (_, v) in scan_prefix(engine, Space::Catalog, b"coll/")? {
        let rec: ContainerRecord = serde_json::from_slice(&v)
            .map_err(|e| StoreError::Corrupt(format!("container record: {e}")))?;
        let Ok(pk) = strata_query::pk::PartitionKeyDefinition::from_json(&rec.partition_key) else {
            continue;
        };
        if let KeyCodec::Binary(n) = KeyCodec::of(&pk) {
            // Once, before serving: about 5 s per 200,000 items on a small machine, so say so.
            tracing::info!(
                container = %format!("{}/{}", rec.db, rec.id),
                "migrating to storage format {FORMAT_VERSION} (binary EPKs); this runs once"
            );
            moved += binary_epks(engine, rec.cid, n)?;
        }
    }
    let _ = engine.write(vec![Op::Put(
        Space::Catalog,
        keys::CATALOG_FORMAT.to_vec(),
        FORMAT_VERSION.to_be_bytes().to_vec(),
    )])?;
    if moved > 0 {
        tracing::info!(
            entries = moved,
            ms = started.elapsed().as_millis() as u64,
            "migrated the data directory to storage format {FORMAT_VERSION} (binary EPKs)"
        );
    }
    Ok(())
}

/// The format of the store (1 when it has no marker: stores from before the marker existed).
pub fn stored_version(engine: &Engine) -> Result<u32, StoreError> {
    Ok(engine
        .get(Space::Catalog, keys::CATALOG_FORMAT)?
        .and_then(|v| v[..].try_into().ok().map(u32::from_be_bytes))
        .unwrap_or(1))
}

/// Respells the EPKs of container `cid` (whose EPKs are `n` bytes) from hex to binary in every
/// space that names documents by key. Returns how many entries changed.
fn binary_epks(engine: &Engine, cid: u32, n: usize) -> Result<u64, StoreError> {
    let mut moved = 0u64;
    for space in [
        Space::Items,
        Space::Directory,
        Space::Feed,
        Space::Unique,
        Space::Partitions,
    ] {
        moved += rewrite(engine, space, cid, &mut |key, value| {
            let suffix = &key[4..];
            let (new_suffix, new_value) = match space {
                Space::Items | Space::Directory => (keys::format1_doc(suffix, n)?, None),
                Space::Feed => (suffix.to_vec(), Some(keys::format1_doc(value, n)?)),
                Space::Unique => (hex_unique(suffix, n)?, None),
                _ => {
                    // `cid | EPK` -> (bytes, count); every item's size counted its key, which
                    // is now `n + 1` bytes shorter (no hex, no separator).
                    if suffix.len() != 2 * n {
                        return None;
                    }
                    let epk = keys::format1_epk(suffix)?;
                    let (bytes, count) = super::container::decode_lp(value);
                    let bytes = bytes.saturating_sub(count * (n as u64 + 1));
                    (epk, Some(super::container::encode_lp(bytes, count)))
                }
            };
            let mut k = key[..4].to_vec();
            k.extend_from_slice(&new_suffix);
            Some((k, new_value.unwrap_or_else(|| value.to_vec())))
        })?;
    }
    Ok(moved)
}

/// The binary spelling of a unique-key row in the old one (`EPK hex | 0x00 | key | values`):
/// the new one keeps the zero after the EPK, at byte `n`, where the old one has a hex digit.
fn hex_unique(suffix: &[u8], n: usize) -> Option<Vec<u8>> {
    if suffix.get(2 * n) != Some(&0) {
        return None;
    }
    let mut out = keys::format1_epk(&suffix[..2 * n])?;
    out.extend_from_slice(&suffix[2 * n..]);
    Some(out)
}

/// Maps an entry (key, value) to its new spelling, or `None` to leave it.
type Respell<'a> = dyn FnMut(&[u8], &[u8]) -> Option<(Vec<u8>, Vec<u8>)> + 'a;

/// Walks container `cid`'s entries of `space` and replaces each one `f` maps (key, value) to
/// a new (key, value), a chunk per atomic batch. Entries already in the new spelling map to
/// `None` and stay, so running it again after an interruption finishes the job.
fn rewrite(
    engine: &Engine,
    space: Space,
    cid: u32,
    f: &mut Respell<'_>,
) -> Result<u64, StoreError> {
    let lo = keys::container_prefix(cid);
    let hi = keys::container_prefix(cid + 1);
    let mut cursor: Option<Vec<u8>> = None;
    let mut moved = 0u64;
    loop {
        let lower = match &cursor {
            Some(c) => Bound::Excluded(&c[..]),
            None => Bound::Included(&lo[..]),
        };
        let chunk = engine.scan(space, lower, Bound::Excluded(&hi[..]), CHUNK, false)?;
        let Some((last, _)) = chunk.last() else {
            return Ok(moved);
        };
        cursor = Some(last.clone());
        let mut ops = Vec::new();
        for (k, v) in &chunk {
            if let Some((nk, nv)) = f(k, v) {
                if nk != *k {
                    ops.push(Op::Delete(space, k.clone()));
                }
                ops.push(Op::Put(space, nk, nv));
                moved += 1;
            }
        }
        if !ops.is_empty() {
            let _ = engine.write(ops)?;
        }
        if chunk.len() < CHUNK {
            return Ok(moved);
        }
    }
}

/// Fills the item directory from the items, once, for a store written before it existed.
/// Each chunk is idempotent and the completion marker is written last, after every chunk in
/// journal order, so an interrupted build simply runs again.
fn build_directory(engine: &Engine) -> Result<(), StoreError> {
    if engine
        .get(Space::Catalog, keys::CATALOG_DIRECTORY)?
        .is_some()
    {
        return Ok(());
    }
    let mut cursor: Option<Vec<u8>> = None;
    let mut built = 0u64;
    loop {
        let lower = match &cursor {
            Some(c) => Bound::Excluded(&c[..]),
            None => Bound::Unbounded,
        };
        let chunk = engine.scan(Space::Items, lower, Bound::Unbounded, 4096, false)?;
        let Some((last, _)) = chunk.last() else { break };
        cursor = Some(last.clone());
        built += chunk.len() as u64;
        let _ = engine.write(
            chunk
                .into_iter()
                .map(|(k, _)| Op::Put(Space::Directory, k, Vec::new()))
                .collect(),
        )?;
    }
    let _ = engine.write(vec![Op::Put(
        Space::Catalog,
        keys::CATALOG_DIRECTORY.to_vec(),
        b"1".to_vec(),
    )])?;
    if built > 0 {
        tracing::info!(items = built, "built the item directory of an older store");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Store, StoreConfig};
    use std::collections::BTreeMap;
    use strata_query::pk::EpkRange;

    /// A migration interrupted half way (one container done, another a few entries in, the
    /// marker not written) finishes at the next start; afterwards no entry is in the old
    /// spelling and every logical partition's recorded size is exactly the sum of its items'
    /// (the migration subtracts what the shorter keys no longer take).
    #[test]
    fn an_interrupted_migration_finishes_with_exact_partition_sizes() {
        let fixture =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/format1/store");
        let dir = std::env::temp_dir().join(format!("strata-format-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let copied = std::process::Command::new("cp")
            .arg("-r")
            .arg(&fixture)
            .arg(&dir)
            .status()
            .expect("cp");
        assert!(copied.success());

        let engine = Engine::open(&dir).expect("engine");
        assert_eq!(stored_version(&engine).expect("version"), 1);
        let mut cids = BTreeMap::new();
        for (_, v) in scan_prefix(&engine, Space::Catalog, b"coll/").expect("catalog") {
            let rec: ContainerRecord = serde_json::from_slice(&v).expect("record");
            cids.insert(rec.id, rec.cid);
        }
        binary_epks(&engine, cids["two"], 16).expect("one container");
        let mut left = 50;
        rewrite(&engine, Space::Items, cids["three"], &mut |k, v| {
            left -= 1;
            (left >= 0)
                .then(|| keys::format1_doc(&k[4..], 48))
                .flatten()
                .map(|s| {
                    let mut nk = k[..4].to_vec();
                    nk.extend_from_slice(&s);
                    (nk, v.to_vec())
                })
        })
        .expect("part of another");
        engine.shutdown().expect("shutdown");
        drop(engine);

        let s = Store::open(StoreConfig {
            data_dir: Some(dir.clone()),
            postgres: None,
            limits: Default::default(),
        })
        .expect("open");
        assert_eq!(stored_version(s.engine()).expect("version"), FORMAT_VERSION);
        for (name, n) in [("three", 48usize), ("two", 16)] {
            let c = s.container("fx", name).expect("container");
            assert_eq!(c.codec, KeyCodec::Binary(n));
            let items = c
                .scan_items(&EpkRange::full(), None, usize::MAX)
                .expect("scan");
            assert!(items.len() > 100, "{name}: {} items", items.len());
            let mut sizes: BTreeMap<String, (u64, u64)> = BTreeMap::new();
            for (pos, item) in &items {
                let (epk, _) = pos.parts(c.codec);
                assert_eq!(epk.len(), 2 * n, "{name}: a key in the old spelling");
                let e = sizes.entry(epk.into_owned()).or_default();
                e.0 += item.stored_size(pos.held_bytes());
                e.1 += 1;
            }
            let recorded: BTreeMap<String, (u64, u64)> =
                crate::store::container::split::logical_partitions(&c, &EpkRange::full())
                    .expect("sizes")
                    .into_iter()
                    .map(|(e, b, n)| (e, (b, n)))
                    .collect();
            assert_eq!(recorded, sizes, "{name}: logical partition sizes");
            for space in [Space::Directory, Space::Unique] {
                let (lo, hi) = (
                    keys::container_prefix(c.cid),
                    keys::container_prefix(c.cid + 1),
                );
                let rows = s
                    .engine()
                    .scan(
                        space,
                        Bound::Included(&lo),
                        Bound::Excluded(&hi),
                        usize::MAX,
                        false,
                    )
                    .expect("scan");
                for (k, _) in rows {
                    assert!(
                        keys::format1_doc(&k[4..], n).is_none(),
                        "{name}: {space:?} entry not migrated"
                    );
                }
            }
        }
        // The hash v1 container keeps the hex spelling.
        let one = s.container("fx", "one").expect("container");
        assert_eq!(one.codec, KeyCodec::Hex);
        assert_eq!(
            one.scan_items(&EpkRange::full(), None, usize::MAX)
                .expect("scan")
                .len(),
            60
        );
        s.shutdown().expect("shutdown");
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
