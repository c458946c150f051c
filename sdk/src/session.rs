//! Session consistency: the client keeps, per container, the newest session token of every
//! partition key range it has seen in a response, and sends them back on reads, so a read
//! after a write through the same client sees the write (Cosmos DB's default consistency).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// A container's newest token per partition key range id: (token, LSN).
type RangeTokens = BTreeMap<String, (String, u64)>;

/// Session tokens by container link.
#[derive(Default)]
pub(crate) struct Sessions(Mutex<HashMap<String, RangeTokens>>);

/// The container a request path addresses (`/dbs/{db}/colls/{coll}`), as sent.
pub(crate) fn container_of(path: &str) -> Option<String> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["dbs", db, "colls", coll, ..] => Some(format!("/dbs/{db}/colls/{coll}")),
        _ => None,
    }
}

/// The LSN a `range:version#lsn[#region=lsn...]` token part carries.
fn lsn_of(part: &str) -> Option<u64> {
    part.split('#').nth(1)?.parse().ok()
}

impl Sessions {
    /// Remembers the tokens of a response (`x-ms-session-token`) to a request on `path`.
    pub(crate) fn record(&self, path: &str, header: &str) {
        let Some(coll) = container_of(path) else {
            return;
        };
        let Ok(mut all) = self.0.lock() else { return };
        let ranges = all.entry(coll).or_default();
        for part in header.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (Some((range, _)), Some(lsn)) = (part.split_once(':'), lsn_of(part)) else {
                continue;
            };
            let newer = ranges.get(range).is_none_or(|(_, seen)| lsn > *seen);
            if newer {
                ranges.insert(range.to_string(), (part.to_string(), lsn));
            }
        }
    }

    /// The `x-ms-session-token` to send with a read on `path`: every range's newest token.
    pub(crate) fn header_for(&self, path: &str) -> Option<String> {
        let coll = container_of(path)?;
        let all = self.0.lock().ok()?;
        let ranges = all.get(&coll)?;
        let tokens: Vec<&str> = ranges.values().map(|(t, _)| t.as_str()).collect();
        (!tokens.is_empty()).then(|| tokens.join(","))
    }

    /// Forgets a container's tokens (it was deleted or re-created).
    pub(crate) fn forget(&self, path: &str) {
        if let (Some(coll), Ok(mut all)) = (container_of(path), self.0.lock()) {
            all.remove(&coll);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_token_per_range() {
        let s = Sessions::default();
        assert_eq!(s.header_for("/dbs/d/colls/c/docs"), None);
        s.record("/dbs/d/colls/c/docs/x", "0:-1#5");
        s.record("/dbs/d/colls/c/docs", "0:-1#3,1:-1#9#region1=4");
        assert_eq!(
            s.header_for("/dbs/d/colls/c/docs/y").as_deref(),
            Some("0:-1#5,1:-1#9#region1=4")
        );
        s.record("/dbs/d/colls/c", "0:-1#12");
        assert_eq!(
            s.header_for("/dbs/d/colls/c/docs").as_deref(),
            Some("0:-1#12,1:-1#9#region1=4")
        );
        // Other containers, and paths outside containers, are separate.
        assert_eq!(s.header_for("/dbs/d/colls/other/docs"), None);
        s.record("/dbs/d", "0:-1#99");
        s.record("/dbs/d/colls/c/docs", "garbage,also:bad");
        assert_eq!(
            s.header_for("/dbs/d/colls/c").as_deref(),
            Some("0:-1#12,1:-1#9#region1=4")
        );
        s.forget("/dbs/d/colls/c");
        assert_eq!(s.header_for("/dbs/d/colls/c"), None);
    }
}
