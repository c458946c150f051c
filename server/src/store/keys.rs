//! Key layouts in the engine's key spaces.
//!
//! Every data key starts with the container's numeric id (4 bytes, big-endian), which is never
//! reused, so a container is one contiguous key range and a deleted container's data can be
//! purged in the background without ever colliding with a newer container of the same name.
//!
//! Items are keyed `cid | EPK | id`, the EPK spelled as the container's [`KeyCodec`] says: in
//! binary for hash v2 and hierarchical keys, whose EPKs all have one length (48 bytes for three
//! levels rather than 96 hex characters: every key space that names a document is shorter, and
//! so is every comparison in the engine's memtable), and as hex followed by `0x00` for keys
//! whose EPKs vary in length. Either way the byte order of keys is the order of EPKs, then
//! ids: a physical partition `[min, max)` is exactly the keys in `[cid|min, cid|max)`, and
//! splitting one needs no data movement. The same document spelling (the item key without its
//! container prefix, its *suffix*) names the document in the change feed and the index.

use std::borrow::Cow;

/// The storage format this build writes: 2 spells EPKs in binary where [`KeyCodec`] allows
/// (1, the format before it, spelled every EPK in hex; see `super::format`).
pub const FORMAT_VERSION: u32 = 2;

pub fn container_prefix(cid: u32) -> Vec<u8> {
    cid.to_be_bytes().to_vec()
}

/// How a container's keys spell the EPK of a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyCodec {
    /// `EPK (hex) | 0x00`, for keys whose EPKs vary in length (hash v1, containers without a
    /// partition key).
    Hex,
    /// `EPK (binary, this many bytes)`, for hash v2 and MultiHash keys, whose documents' EPKs
    /// all have one length.
    Binary(usize),
}

impl KeyCodec {
    pub fn of(pk: &strata_query::pk::PartitionKeyDefinition) -> Self {
        use strata_query::pk::PartitionKind;
        match (pk.kind, pk.version) {
            _ if pk.system_key => KeyCodec::Hex,
            (PartitionKind::MultiHash, _) | (PartitionKind::Hash, 2) => {
                KeyCodec::Binary(16 * pk.levels())
            }
            _ => KeyCodec::Hex,
        }
    }

    /// Appends `epk` (hex) as a bound in this spelling. In binary, a hex bound of odd length
    /// (a split point may have one) is padded with `0`, which orders the same against every
    /// document EPK (those have even length); a character that is not hex counts as `0`.
    pub fn push_bound(self, out: &mut Vec<u8>, epk: &str) {
        match self {
            KeyCodec::Hex => out.extend_from_slice(epk.as_bytes()),
            KeyCodec::Binary(_) => {
                let b = epk.as_bytes();
                out.reserve(b.len().div_ceil(2));
                for pair in b.chunks(2) {
                    let hi = nibble(pair[0]);
                    let lo = pair.get(1).map_or(0, |&c| nibble(c));
                    out.push(hi << 4 | lo);
                }
            }
        }
    }

    /// Appends the document part of an item key (its suffix): `EPK | id` in this spelling.
    pub fn push_doc(self, out: &mut Vec<u8>, epk: &str, id: &str) {
        self.push_bound(out, epk);
        if self == KeyCodec::Hex {
            out.push(0);
        }
        out.extend_from_slice(id.as_bytes());
    }

    /// `cid | EPK`: where the items of EPK `epk` (and everything after it) begin.
    pub fn epk_bound(self, cid: u32, epk: &str) -> Vec<u8> {
        let mut k = Vec::with_capacity(4 + epk.len());
        k.extend_from_slice(&cid.to_be_bytes());
        self.push_bound(&mut k, epk);
        k
    }

    /// The key of item `id` of EPK `epk`.
    pub fn item_key(self, cid: u32, epk: &str, id: &str) -> Vec<u8> {
        let mut k = Vec::with_capacity(5 + epk.len() + id.len());
        k.extend_from_slice(&cid.to_be_bytes());
        self.push_doc(&mut k, epk, id);
        k
    }

    /// Logical partition size key: `cid | EPK` (the full key's EPK).
    pub fn partition_key(self, cid: u32, epk: &str) -> Vec<u8> {
        self.epk_bound(cid, epk)
    }

    /// Where the unique-key rows of a logical partition begin: `cid | EPK | 0x00` (the zero
    /// also in binary, where it tells this format's rows from the previous one's).
    pub fn unique_prefix(self, cid: u32, epk: &str) -> Vec<u8> {
        let mut k = self.epk_bound(cid, epk);
        k.push(0);
        k
    }

    /// The EPK bytes (as spelled) and id bytes of a document suffix.
    pub fn split_doc(self, suffix: &[u8]) -> Option<(&[u8], &[u8])> {
        match self {
            KeyCodec::Hex => {
                let pos = suffix.iter().position(|&b| b == 0)?;
                Some((&suffix[..pos], &suffix[pos + 1..]))
            }
            KeyCodec::Binary(n) => (suffix.len() >= n).then(|| suffix.split_at(n)),
        }
    }

    /// The EPK (hex) and id of a document suffix.
    pub fn parse_doc(self, suffix: &[u8]) -> Option<(Cow<'_, str>, &str)> {
        let (epk, id) = self.split_doc(suffix)?;
        let id = std::str::from_utf8(id).ok()?;
        Some((self.epk_hex(epk)?, id))
    }

    /// An EPK as spelled in a key, as hex.
    pub fn epk_hex(self, epk: &[u8]) -> Option<Cow<'_, str>> {
        match self {
            KeyCodec::Hex => std::str::from_utf8(epk).ok().map(Cow::Borrowed),
            KeyCodec::Binary(_) => Some(Cow::Owned(strata_query::pk::epk::encode_hex(epk))),
        }
    }

    /// Container id, EPK (hex) and id of a full item key.
    pub fn parse_item_key(self, key: &[u8]) -> Option<(u32, Cow<'_, str>, &str)> {
        let cid = u32::from_be_bytes(key.get(..4)?.try_into().ok()?);
        let (epk, id) = self.parse_doc(&key[4..])?;
        Some((cid, epk, id))
    }
}

/// The binary spelling of a document suffix in format 1's (`EPK hex | 0x00 | id`, EPKs of
/// `n` bytes), or `None` when it is not in that spelling. A binary suffix (`EPK | id`) never reads as an old one: that
/// would take all `n` bytes of its EPK and the first `n` of its id to be hex digits and the
/// next byte of its id to be zero.
pub fn format1_doc(suffix: &[u8], n: usize) -> Option<Vec<u8>> {
    if suffix.get(2 * n) != Some(&0) {
        return None;
    }
    let mut out = format1_epk(&suffix[..2 * n])?;
    out.extend_from_slice(&suffix[2 * n + 1..]);
    Some(out)
}

/// Format 1's EPK spelling (uppercase hex digits) as bytes; `None` for anything else.
pub fn format1_epk(hex: &[u8]) -> Option<Vec<u8>> {
    fn digit(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    hex.chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

fn nibble(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'A'..=b'F' => c - b'A' + 10,
        b'a'..=b'f' => c - b'a' + 10,
        _ => 0,
    }
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

/// The (LSN, sub-change) a [`change_key`] names: the inverse of `change_key`.
pub fn parse_change_key(key: &[u8]) -> Option<(u64, u32)> {
    let (_, lsn) = parse_feed_key(key)?;
    let sub = key
        .get(12..16)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u32::from_be_bytes);
    Some((lsn, sub))
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

/// The last document number a container gave out, from before per-partition counts (the
/// floor of [`catalog_doc_count`]s; a new container's is 0).
pub fn catalog_doc_seq(cid: u32) -> Vec<u8> {
    let mut k = b"docseq/".to_vec();
    k.extend_from_slice(&cid.to_be_bytes());
    k
}

/// The last count physical partitions with document-number prefix `prefix` gave out (see
/// `container::doc_numbers`): [`catalog_doc_seq`] followed by the prefix.
pub fn catalog_doc_count(cid: u32, prefix: u16) -> Vec<u8> {
    let mut k = catalog_doc_seq(cid);
    k.extend_from_slice(&prefix.to_be_bytes());
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

/// The storage format of the data directory ([`FORMAT_VERSION`]); absent in format 1.
pub const CATALOG_FORMAT: &[u8] = b"meta/format";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_keys_order_by_epk_then_id_in_either_spelling() {
        let h = KeyCodec::Hex;
        let a = h.item_key(1, "0A", "zz");
        let b = h.item_key(1, "0A11", "a");
        let c = h.item_key(1, "0B", "a");
        assert!(a < b && b < c);
        assert!(h.epk_bound(1, "0A") <= a && a < h.epk_bound(1, "0A1"));
        assert!(b < h.epk_bound(1, "0B") && c >= h.epk_bound(1, "0B"));
        let (cid, epk, id) = h.parse_item_key(&b).unwrap();
        assert_eq!((cid, &*epk, id), (1, "0A11", "a"));
        assert!(h.item_key(1, "FF", "") < h.item_key(2, "", ""));

        // Binary: two-byte EPKs; bounds of any length (odd ones padded) order as in hex.
        let bin = KeyCodec::Binary(2);
        let x = bin.item_key(1, "0A11", "zz");
        let y = bin.item_key(1, "0A12", "a");
        assert!(x < y && x.len() == 4 + 2 + 2);
        let (cid, epk, id) = bin.parse_item_key(&y).unwrap();
        assert_eq!((cid, &*epk, id), (1, "0A12", "a"));
        assert!(bin.epk_bound(1, "0A") <= x && x < bin.epk_bound(1, "0A12"));
        assert!(bin.epk_bound(1, "0A1") <= x && x < bin.epk_bound(1, "0A2"));
        assert!(y < bin.epk_bound(1, "0A13") && y >= bin.epk_bound(1, "0A12"));
        assert_eq!(bin.epk_bound(1, "0a1b"), bin.epk_bound(1, "0A1B"));
        assert!(bin.item_key(1, "FFFF", "") < bin.item_key(2, "", ""));
    }

    #[test]
    fn feed_keys_order_by_lsn() {
        assert!(feed_key(3, 9) < feed_key(3, 10));
        assert_eq!(parse_feed_key(&feed_key(3, 10)), Some((3, 10)));
        assert_eq!(parse_change_key(&change_key(3, 10, 0)), Some((10, 0)));
        assert_eq!(parse_change_key(&change_key(3, 10, 7)), Some((10, 7)));
    }
}
