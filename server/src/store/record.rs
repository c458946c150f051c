//! The stored form of a document: a small fixed header followed by the JSON the API returns.
//!
//! The JSON already carries the system properties (`_rid _self _etag _attachments _ts`), so a
//! point read returns the stored bytes without re-serializing. The header holds what the server
//! needs without parsing JSON: the LSN of the last write (which also determines the etag), the
//! timestamp and item-level TTL for expiry, and the sequence the document's `_rid` came from.

use bytes::Bytes;

/// Format 1: a single change of its transaction; format 2 adds the change's place within a
/// transaction of several (its LSN is the transaction's).
const FORMAT: u8 = 1;
const FORMAT_SUB: u8 = 2;
const HEADER: usize = 1 + 8 + 8 + 8 + 8;
const NO_TTL: i64 = i64::MIN;

#[derive(Debug, Clone)]
pub struct StoredItem {
    /// LSN of the write that produced this version.
    pub lsn: u64,
    /// The write's place within its transaction (0 for the first or only one).
    pub sub: u32,
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
    fn header_len(&self) -> usize {
        HEADER + if self.sub > 0 { 4 } else { 0 }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.header_len() + self.json.len());
        v.push(if self.sub > 0 { FORMAT_SUB } else { FORMAT });
        v.extend_from_slice(&self.lsn.to_be_bytes());
        v.extend_from_slice(&self.ts.to_be_bytes());
        v.extend_from_slice(&self.ttl.unwrap_or(NO_TTL).to_be_bytes());
        v.extend_from_slice(&self.doc_seq.to_be_bytes());
        if self.sub > 0 {
            v.extend_from_slice(&self.sub.to_be_bytes());
        }
        v.extend_from_slice(&self.json);
        v
    }

    pub fn decode(bytes: Bytes) -> Option<Self> {
        let header = match bytes.first() {
            Some(&FORMAT) => HEADER,
            Some(&FORMAT_SUB) => HEADER + 4,
            _ => return None,
        };
        if bytes.len() < header {
            return None;
        }
        let u = |at: usize| u64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let ttl = u(17) as i64;
        let sub = if header > HEADER {
            u32::from_be_bytes(bytes[HEADER..HEADER + 4].try_into().expect("4 bytes"))
        } else {
            0
        };
        Some(Self {
            lsn: u(1),
            sub,
            ts: u(9),
            ttl: (ttl != NO_TTL).then_some(ttl),
            doc_seq: u(25),
            json: bytes.slice(header..),
        })
    }

    /// The etag of this version (container `cid`).
    pub fn etag(&self, cid: u32) -> String {
        super::catalog::change_etag(cid, self.lsn, self.sub)
    }

    /// Its change-feed key (container `cid`).
    pub fn feed_key(&self, cid: u32) -> Vec<u8> {
        super::keys::change_key(cid, self.lsn, self.sub)
    }

    /// Bytes this version occupies in storage (key and value), for size accounting.
    pub fn stored_size(&self, key_len: usize) -> u64 {
        (key_len + self.header_len() + self.json.len()) as u64
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
            sub: 0,
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
        // The second change of a transaction keeps its place (format 2).
        let second = StoredItem { sub: 3, ..it };
        let back = StoredItem::decode(Bytes::from(second.encode())).unwrap();
        assert_eq!(
            (back.lsn, back.sub, &back.json[..]),
            (7, 3, &b"{\"id\":\"a\"}"[..])
        );
        assert_eq!(back.stored_size(10), second.stored_size(10));
        assert_ne!(
            back.etag(1),
            StoredItem {
                sub: 0,
                ..back.clone()
            }
            .etag(1)
        );
    }
}
