//! The all-versions-and-deletes change feed: every create, replace and delete of a container
//! whose change feed policy retains history, kept for the retention period.
//!
//! The latest-version feed (see [`crate::store::changes`]) keeps one entry per item and moves it on
//! each write, so intermediate versions and deletes are gone. History is a log beside it, in
//! [`Space::History`] keyed `cid | lsn`, written in the same transaction as the change: the
//! operation, its time (`crts`), the LSN of the version it replaced, the document's EPK and id,
//! and the document (the new version; for a delete, the version deleted, from which the
//! response names the deleted item and its partition key). Positions are LSNs, as in the
//! latest-version feed, so a continuation survives splits. Entries older than the retention are
//! purged by the TTL sweeper; reading from a position they covered is a 400, as the service
//! answers once "the events for intermediary updates and deletes have vanished".

use super::{Container, Txn};
use crate::store::engine::{Op, Space};
use crate::store::record::StoredItem;
use crate::store::{catalog, keys, StoreError};
use bytes::Bytes;
use serde_json::Value;
use std::ops::Bound;
use strata_query::pk::EpkRange;

/// What a history entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Replace,
    Delete,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "create",
            Operation::Replace => "replace",
            Operation::Delete => "delete",
        }
    }
}

/// One change, as stored.
#[derive(Debug, Clone)]
pub struct Change {
    pub lsn: u64,
    /// The change's place within its transaction (changes of one batch share its LSN).
    pub sub: u32,
    pub op: Operation,
    /// Conflict-resolution timestamp: when the change happened (seconds).
    pub crts: u64,
    /// The LSN of the version this change replaced or deleted (0 for a create), and that
    /// version's place within its transaction.
    pub previous_lsn: u64,
    pub previous_sub: u32,
    /// A delete made by TTL expiry rather than by a request.
    pub ttl_expired: bool,
    pub epk: String,
    pub id: String,
    /// The new version, or for a delete the version deleted.
    pub doc: Bytes,
}

impl Change {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(32 + self.epk.len() + self.id.len() + self.doc.len());
        v.push(match self.op {
            Operation::Create => 0,
            Operation::Replace => 1,
            Operation::Delete => 2,
        });
        v.push(u8::from(self.ttl_expired));
        v.extend_from_slice(&self.crts.to_be_bytes());
        v.extend_from_slice(&self.previous_lsn.to_be_bytes());
        v.extend_from_slice(&self.previous_sub.to_be_bytes());
        for s in [&self.epk, &self.id] {
            v.extend_from_slice(&(s.len() as u32).to_be_bytes());
            v.extend_from_slice(s.as_bytes());
        }
        v.extend_from_slice(&self.doc);
        v
    }

    /// Decodes the change stored at history key `key`.
    pub fn decode(key: &[u8], b: &Bytes) -> Option<Self> {
        let (lsn, sub) = keys::parse_change_key(key)?;
        let op = match *b.first()? {
            0 => Operation::Create,
            1 => Operation::Replace,
            2 => Operation::Delete,
            _ => return None,
        };
        let ttl_expired = *b.get(1)? == 1;
        let crts = u64::from_be_bytes(b.get(2..10)?.try_into().ok()?);
        let previous_lsn = u64::from_be_bytes(b.get(10..18)?.try_into().ok()?);
        let previous_sub = u32::from_be_bytes(b.get(18..22)?.try_into().ok()?);
        let mut at = 22;
        let mut text = || -> Option<String> {
            let n = u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?) as usize;
            let s = std::str::from_utf8(b.get(at + 4..at + 4 + n)?)
                .ok()?
                .to_string();
            at += 4 + n;
            Some(s)
        };
        let epk = text()?;
        let id = text()?;
        Some(Self {
            lsn,
            sub,
            op,
            crts,
            previous_lsn,
            previous_sub,
            ttl_expired,
            epk,
            id,
            doc: b.slice(at..),
        })
    }
}

/// Minutes of history a container keeps: its `changeFeedPolicy.retentionDuration`, else the
/// server's default (`--change-feed-retention`). `None`: no history.
pub fn retention_minutes(
    props: &serde_json::Map<String, Value>,
    default: Option<u64>,
) -> Option<u64> {
    let policy = props
        .get("changeFeedPolicy")
        .and_then(|p| p.get("retentionDuration"))
        .and_then(Value::as_u64);
    policy.or(default).filter(|m| *m > 0)
}

/// Validates `changeFeedPolicy` (400 with the reason).
pub fn validate(props: &serde_json::Map<String, Value>) -> Result<(), StoreError> {
    let Some(p) = props.get("changeFeedPolicy") else {
        return Ok(());
    };
    let bad = || {
        StoreError::BadRequest(
            "'changeFeedPolicy.retentionDuration' must be a whole number of minutes between 0 and 10080 (7 days)."
                .into(),
        )
    };
    match p.get("retentionDuration") {
        None | Some(Value::Null) => Ok(()),
        Some(v) => match v.as_u64() {
            Some(m) if m <= 10_080 => Ok(()),
            _ => Err(bad()),
        },
    }
}

/// A page of history.
pub struct HistoryPage {
    pub changes: Vec<Change>,
    pub last: Option<u64>,
    pub exhausted: bool,
}

impl Container {
    /// Whether this container keeps history (all-versions-and-deletes feed).
    /// A source of global secondary indexes keeps it while they need it (see [`super::gsi`]).
    pub fn keeps_history(&self) -> bool {
        self.with_meta(|m| retention_minutes(&m.props, self.limits.change_feed_retention))
            .is_some()
            || self.history_hold_floor().is_some()
    }

    /// The highest LSN whose history was purged (0 if none was).
    pub fn history_floor(&self) -> Result<u64, StoreError> {
        Ok(self
            .engine
            .get(Space::Catalog, &keys::catalog_history_floor(self.cid))?
            .and_then(|v| v[..].try_into().ok().map(u64::from_be_bytes))
            .unwrap_or(0))
    }

    /// Up to `limit` changes of `range` (only EPK `exact`, when given) with LSN in
    /// `(after, upto]`, in LSN order.
    pub fn history(
        &self,
        range: &EpkRange,
        exact: Option<&str>,
        after: u64,
        upto: u64,
        limit: usize,
    ) -> Result<HistoryPage, StoreError> {
        let mut out = HistoryPage {
            changes: Vec::new(),
            last: None,
            exhausted: true,
        };
        if range.is_empty() || after >= upto {
            return Ok(out);
        }
        let (last, exhausted) =
            self.walk_log(Space::History, after, upto, limit, &mut |lsn, k, v| {
                let change = Change::decode(k, v).ok_or_else(|| {
                    StoreError::Corrupt(format!("change feed history entry {lsn} is unreadable"))
                })?;
                if !range.contains(&change.epk) || exact.is_some_and(|e| e != change.epk) {
                    return Ok(false);
                }
                out.changes.push(change);
                Ok(true)
            })?;
        out.last = last;
        out.exhausted = exhausted;
        Ok(out)
    }

    /// Deletes history older than the retention (or all of it, once history is off), in
    /// bounded chunks; records how far it purged. Returns the entries removed.
    pub fn purge_history(&self) -> Result<u64, StoreError> {
        let retention =
            self.with_meta(|m| retention_minutes(&m.props, self.limits.change_feed_retention));
        let cutoff = match retention {
            Some(min) => catalog::now_secs().saturating_sub(min * 60),
            None => u64::MAX,
        };
        // Never past what a global secondary index has yet to apply.
        let held = self.history_hold_floor().unwrap_or(u64::MAX);
        let start = keys::feed_key(self.cid, 0);
        let end = keys::feed_key(self.cid, u64::MAX);
        // Most ticks find the oldest entry still retained: look at it alone first.
        let oldest = self.engine.scan(
            Space::History,
            Bound::Included(&start[..]),
            Bound::Included(&end[..]),
            1,
            false,
        )?;
        let old_enough = oldest.first().is_some_and(|(_, v)| {
            v.get(2..10)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_be_bytes)
                .is_some_and(|crts| crts < cutoff)
        });
        if !old_enough {
            return Ok(0);
        }
        let chunk = self.engine.scan(
            Space::History,
            Bound::Included(&start[..]),
            Bound::Included(&end[..]),
            2048,
            false,
        )?;
        let mut ops = Vec::new();
        let mut floor = None;
        for (k, v) in &chunk {
            let Some((_, lsn)) = keys::parse_feed_key(k) else {
                continue;
            };
            let crts = v
                .get(2..10)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_be_bytes)
                .unwrap_or(0);
            if crts >= cutoff || lsn > held {
                break;
            }
            ops.push(Op::Delete(Space::History, k.clone()));
            floor = Some(lsn);
        }
        let n = ops.len() as u64;
        if let Some(f) = floor {
            ops.push(Op::Put(
                Space::Catalog,
                keys::catalog_history_floor(self.cid),
                f.to_be_bytes().to_vec(),
            ));
            // Not awaited: a purge the disk lost is redone at the next sweep.
            let _ = self.engine.write(ops)?;
        }
        Ok(n)
    }
}

impl Txn<'_> {
    /// Logs a change for the all-versions-and-deletes feed, in this transaction.
    pub(super) fn log_change(
        &mut self,
        op: Operation,
        (lsn, sub): (u64, u32),
        previous: Option<&StoredItem>,
        epk: &str,
        id: &str,
        doc: Bytes,
    ) {
        let change = Change {
            lsn,
            sub,
            op,
            crts: self.now,
            previous_lsn: previous.map_or(0, |p| p.lsn),
            previous_sub: previous.map_or(0, |p| p.sub),
            ttl_expired: self.expiring && op == Operation::Delete,
            epk: epk.to_string(),
            id: id.to_string(),
            doc,
        };
        self.tx.put(
            Space::History,
            keys::change_key(self.c.cid, lsn, sub),
            change.encode(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_round_trip() {
        let c = Change {
            lsn: 9,
            sub: 2,
            op: Operation::Delete,
            crts: 1_700_000_000,
            previous_lsn: 4,
            previous_sub: 1,
            ttl_expired: true,
            epk: "0A1B".into(),
            id: "doc/1".into(),
            doc: Bytes::from_static(br#"{"id":"doc/1"}"#),
        };
        let key = keys::change_key(7, 9, 2);
        let d = Change::decode(&key, &Bytes::from(c.encode())).unwrap();
        assert_eq!(
            (
                d.lsn,
                d.sub,
                d.op,
                d.crts,
                d.previous_lsn,
                d.previous_sub,
                d.ttl_expired
            ),
            (9, 2, Operation::Delete, c.crts, 4, 1, true)
        );
        assert_eq!((d.epk.as_str(), d.id.as_str()), ("0A1B", "doc/1"));
        assert_eq!(d.doc, c.doc);
    }

    #[test]
    fn retention_comes_from_the_policy_or_the_server_default() {
        let with = serde_json::json!({"changeFeedPolicy": {"retentionDuration": 10}});
        let with = with.as_object().unwrap();
        assert_eq!(retention_minutes(with, None), Some(10));
        assert_eq!(
            retention_minutes(&serde_json::Map::new(), Some(60)),
            Some(60)
        );
        assert_eq!(retention_minutes(&serde_json::Map::new(), None), None);
        let off = serde_json::json!({"changeFeedPolicy": {"retentionDuration": 0}});
        assert_eq!(retention_minutes(off.as_object().unwrap(), Some(60)), None);
        let bad = serde_json::json!({"changeFeedPolicy": {"retentionDuration": -1}});
        assert!(validate(bad.as_object().unwrap()).is_err());
    }
}
