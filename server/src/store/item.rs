//! The stored form of a document: a small fixed header followed by the JSON the API returns.
//!
//! The JSON already carries the system properties (`_rid _self _etag _attachments _ts`), so a
//! point read returns the stored bytes without re-serializing. The header holds what the server
//! needs without parsing JSON: the LSN of the last write (which also determines the etag), the
//! timestamp and item-level TTL for expiry, and the sequence the document's `_rid` came from.

use bytes::Bytes;

const FORMAT: u8 = 1;
const HEADER: usize = 1 + 8 + 8 + 8 + 8;
const NO_TTL: i64 = i64::MIN;

#[derive(Debug, Clone)]
pub struct StoredItem {
    /// LSN of the write that produced this version.
    pub lsn: u64,
    /// `_ts`: seconds since the epoch of the last write.
    pub ts: u64,
    /// The item's own `ttl` property, when it is a number.
    pub ttl: Option<i64>,
    /// The sequence number the document's `_rid` was made from (kept across replaces).
    pub doc_seq: u64,
    /// The document as returned to clients, system properties included.
    pub json: Bytes,
}

impl StoredItem {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(HEADER + self.json.len());
        v.push(FORMAT);
        v.extend_from_slice(&self.lsn.to_be_bytes());
        v.extend_from_slice(&self.ts.to_be_bytes());
        v.extend_from_slice(&self.ttl.unwrap_or(NO_TTL).to_be_bytes());
        v.extend_from_slice(&self.doc_seq.to_be_bytes());
        v.extend_from_slice(&self.json);
        v
    }

    pub fn decode(bytes: Bytes) -> Option<Self> {
        if bytes.len() < HEADER || bytes[0] != FORMAT {
            return None;
        }
        let u = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let ttl = u(17) as i64;
        Some(Self {
            lsn: u(1),
            ts: u(9),
            ttl: (ttl != NO_TTL).then_some(ttl),
            doc_seq: u(25),
            json: bytes.slice(HEADER..),
        })
    }

    /// Bytes this version occupies in storage (key and value), for size accounting.
    pub fn stored_size(&self, key_len: usize) -> u64 {
        (key_len + HEADER + self.json.len()) as u64
    }

    /// Whether the item has expired at `now` (seconds) under the container's `defaultTtl`.
    ///
    /// Cosmos rules: no `defaultTtl` means nothing expires; `-1` means only items with their own
    /// positive `ttl` expire; `N` means items expire N seconds after their last write unless
    /// their own `ttl` says otherwise (`-1` = never).
    pub fn is_expired(&self, default_ttl: Option<i64>, now: u64) -> bool {
        let Some(container) = default_ttl else {
            return false;
        };
        let effective = match self.ttl {
            Some(t) => t,
            None => container,
        };
        effective > 0 && now >= self.ts.saturating_add(effective as u64)
    }

    /// When this item expires (seconds since the epoch), if ever.
    pub fn expires_at(&self, default_ttl: Option<i64>) -> Option<u64> {
        let container = default_ttl?;
        let effective = self.ttl.unwrap_or(container);
        (effective > 0).then(|| self.ts.saturating_add(effective as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_expiry_rules() {
        let it = StoredItem {
            lsn: 7,
            ts: 100,
            ttl: Some(10),
            doc_seq: 3,
            json: Bytes::from_static(b"{\"id\":\"a\"}"),
        };
        let back = StoredItem::decode(Bytes::from(it.encode())).unwrap();
        assert_eq!(
            (back.lsn, back.ts, back.ttl, back.doc_seq),
            (7, 100, Some(10), 3)
        );
        assert_eq!(&back.json[..], b"{\"id\":\"a\"}");
        assert!(
            !back.is_expired(None, 1000),
            "no container TTL: never expires"
        );
        assert!(back.is_expired(Some(-1), 110));
        assert!(!back.is_expired(Some(-1), 109));
        let never = StoredItem {
            ttl: Some(-1),
            ..back.clone()
        };
        assert!(!never.is_expired(Some(5), 10_000));
        let default = StoredItem { ttl: None, ..back };
        assert!(default.is_expired(Some(5), 105));
        assert!(!default.is_expired(Some(-1), 10_000));
        assert!(StoredItem::decode(Bytes::from_static(b"xx")).is_none());
    }
}
