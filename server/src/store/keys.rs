//! Key layouts in the engine's key spaces.
//!
//! Every data key starts with the container's numeric id (4 bytes, big-endian), which is never
//! reused, so a container is one contiguous key range and a deleted container's data can be
//! purged in the background without ever colliding with a newer container of the same name.
//!
//! Items are keyed `cid | EPK | 0x00 | id`. EPKs are uppercase hex, all bytes above 0x00, so the
//! byte order of keys is the string order of EPKs, then ids: a physical partition `[min, max)`
//! is exactly the keys in `[cid|min, cid|max)`, and splitting one needs no data movement.

pub fn container_prefix(cid: u32) -> Vec<u8> {
    cid.to_be_bytes().to_vec()
}

pub fn item_key(cid: u32, epk: &str, id: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + epk.len() + 1 + id.len());
    k.extend_from_slice(&cid.to_be_bytes());
    k.extend_from_slice(epk.as_bytes());
    k.push(0);
    k.extend_from_slice(id.as_bytes());
    k
}

/// The key at which the items of EPK `epk` (and everything after it) begin.
pub fn epk_bound(cid: u32, epk: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + epk.len());
    k.extend_from_slice(&cid.to_be_bytes());
    k.extend_from_slice(epk.as_bytes());
    k
}

/// Splits an item key (without its container prefix) into EPK and id.
pub fn split_item_suffix(suffix: &[u8]) -> Option<(&str, &str)> {
    let pos = suffix.iter().position(|&b| b == 0)?;
    let epk = std::str::from_utf8(&suffix[..pos]).ok()?;
    let id = std::str::from_utf8(&suffix[pos + 1..]).ok()?;
    Some((epk, id))
}

/// Splits a full item key into container id, EPK and id.
pub fn parse_item_key(key: &[u8]) -> Option<(u32, &str, &str)> {
    if key.len() < 5 {
        return None;
    }
    let cid = u32::from_be_bytes(key[..4].try_into().ok()?);
    let (epk, id) = split_item_suffix(&key[4..])?;
    Some((cid, epk, id))
}

/// Change feed index key: `cid | lsn`, so a scan yields modifications in LSN order.
pub fn feed_key(cid: u32, lsn: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(16);
    k.extend_from_slice(&cid.to_be_bytes());
    k.extend_from_slice(&lsn.to_be_bytes());
    k
}

/// The key of the `sub`-th change of the transaction at `lsn`: [`feed_key`] for the first,
/// then `cid | lsn | sub`, which sorts after it and before the next LSN.
pub fn change_key(cid: u32, lsn: u64, sub: u32) -> Vec<u8> {
    let mut k = feed_key(cid, lsn);
    if sub > 0 {
        k.extend_from_slice(&sub.to_be_bytes());
    }
    k
}

/// Container id and LSN of a [`feed_key`] or [`change_key`].
pub fn parse_feed_key(key: &[u8]) -> Option<(u32, u64)> {
    if key.len() != 12 && key.len() != 16 {
        return None;
    }
    Some((
        u32::from_be_bytes(key[..4].try_into().ok()?),
        u64::from_be_bytes(key[4..12].try_into().ok()?),
    ))
}

/// Logical partition size key: `cid | EPK` (the full key's EPK).
pub fn partition_key(cid: u32, epk: &str) -> Vec<u8> {
    epk_bound(cid, epk)
}

/// Catalog keys.
pub fn catalog_database(id: &str) -> Vec<u8> {
    format!("db/{id}").into_bytes()
}
pub fn catalog_container(cid: u32) -> Vec<u8> {
    let mut k = b"coll/".to_vec();
    k.extend_from_slice(&cid.to_be_bytes());
    k
}
pub fn catalog_lsn(cid: u32) -> Vec<u8> {
    let mut k = b"lsn/".to_vec();
    k.extend_from_slice(&cid.to_be_bytes());
    k
}
pub fn catalog_purge(cid: u32) -> Vec<u8> {
    let mut k = b"purge/".to_vec();
    k.extend_from_slice(&cid.to_be_bytes());
    k
}
pub const CATALOG_COUNTERS: &[u8] = b"meta/counters";

/// The last document number a container gave out.
pub fn catalog_doc_seq(cid: u32) -> Vec<u8> {
    let mut k = b"docseq/".to_vec();
    k.extend_from_slice(&cid.to_be_bytes());
    k
}

/// The highest LSN whose all-versions history was purged.
pub fn catalog_history_floor(cid: u32) -> Vec<u8> {
    let mut k = b"histfloor/".to_vec();
    k.extend_from_slice(&cid.to_be_bytes());
    k
}

/// Present once the item directory ([`super::kv::Space::Directory`]) holds every item: stores
/// written before it existed build it at their first start.
pub const CATALOG_DIRECTORY: &[u8] = b"meta/directory";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_keys_order_by_epk_then_id() {
        let a = item_key(1, "0A", "zz");
        let b = item_key(1, "0A11", "a");
        let c = item_key(1, "0B", "a");
        assert!(a < b && b < c);
        assert!(epk_bound(1, "0A") <= a && a < epk_bound(1, "0A1"));
        assert!(b < epk_bound(1, "0B") && c >= epk_bound(1, "0B"));
        assert_eq!(parse_item_key(&b), Some((1, "0A11", "a")));
        assert!(item_key(1, "FF", "") < item_key(2, "", ""));
    }

    #[test]
    fn feed_keys_order_by_lsn() {
        assert!(feed_key(3, 9) < feed_key(3, 10));
        assert_eq!(parse_feed_key(&feed_key(3, 10)), Some((3, 10)));
    }
}
