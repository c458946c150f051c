//! Master-key signatures verified lately, so the same signed request is not verified twice.
//!
//! A master-key signature covers the verb, the resource and the date to the second, never the
//! body: every client holding the key signs a read of one item in one second identically, and
//! a hot item is read many times a second. Verifying meant percent-decoding the header, an
//! HMAC-SHA256 and parsing the date — 5% of a point read's server CPU under
//! `strata-bench --suite lean`. A hit costs a hash and a comparison of the same bytes.
//!
//! Only successful verifications are kept, each under the exact bytes it was made from (verb,
//! resource type, link and spelling, both dates, the raw header) and compared in full on a
//! hit: a hash collision can never pass another request. The date is checked against the
//! clock on every hit as on every miss, so a kept entry grants nothing a replay of the same
//! request would not have been granted anyway. Bounded: twice [`SLOTS`] entries of at most
//! [`MAX_KEY_BYTES`] each (a longer request is verified every time); a new entry takes the
//! place of its slot's entry used longest ago.

use std::sync::Mutex;
use std::time::SystemTime;
use strata_query::protocol::AuthScope;

/// Entries kept: slots of two, the one used last first.
const SLOTS: usize = 2048;
/// The longest request (its verb, scope, dates and header together) kept.
const MAX_KEY_BYTES: usize = 512;

/// What a request's master-key signature is checked from, spelled as one byte string: each
/// part length-prefixed, so no two requests spell the same bytes.
pub struct SignedParts {
    bytes: [u8; MAX_KEY_BYTES],
    len: usize,
}

impl SignedParts {
    /// The parts of a request, or `None` when they are too long to keep.
    pub fn of(
        verb: &str,
        scope: &AuthScope,
        x_ms_date: &str,
        date: &str,
        authorization: &str,
    ) -> Option<Self> {
        let mut parts = SignedParts {
            bytes: [0; MAX_KEY_BYTES],
            len: 0,
        };
        parts.push(&[scope.signed_as as u8])?;
        for p in [
            verb,
            &scope.resource_type,
            &scope.resource_link,
            x_ms_date,
            date,
            authorization,
        ] {
            parts.push(&(p.len() as u32).to_le_bytes())?;
            parts.push(p.as_bytes())?;
        }
        Some(parts)
    }

    fn push(&mut self, b: &[u8]) -> Option<()> {
        let end = self.len.checked_add(b.len())?;
        self.bytes.get_mut(self.len..end)?.copy_from_slice(b);
        self.len = end;
        Some(())
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// One verified request: its parts, whether the read-only key signed it, and its date.
struct Entry {
    parts: Box<[u8]>,
    read_only: bool,
    when: SystemTime,
}

/// Two entries of one slot: the one kept or used last first.
type Pair = [Option<Entry>; 2];

/// The kept verifications (see the module's doc).
pub struct Verified {
    slots: Box<[Mutex<Pair>]>,
}

impl Default for Verified {
    fn default() -> Self {
        Self {
            slots: (0..SLOTS).map(|_| Mutex::new([None, None])).collect(),
        }
    }
}

impl Verified {
    fn index(parts: &SignedParts) -> usize {
        xxhash_rust::xxh3::xxh3_64(parts.as_bytes()) as usize % SLOTS
    }

    fn slot(&self, parts: &SignedParts) -> std::sync::MutexGuard<'_, Pair> {
        self.slots[Self::index(parts)]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// How the very same request verified before: whether the read-only key signed it, and
    /// its date. `None` when it was not verified lately.
    pub fn get(&self, parts: &SignedParts) -> Option<(bool, SystemTime)> {
        let mut pair = self.slot(parts);
        let at = pair
            .iter()
            .position(|e| e.as_ref().is_some_and(|e| &*e.parts == parts.as_bytes()))?;
        pair.swap(0, at);
        pair[0].as_ref().map(|e| (e.read_only, e.when))
    }

    /// Keeps a verification that succeeded, in place of the one of its slot used longest ago.
    pub fn keep(&self, parts: &SignedParts, read_only: bool, when: SystemTime) {
        let entry = Entry {
            parts: parts.as_bytes().into(),
            read_only,
            when,
        };
        let mut pair = self.slot(parts);
        pair[1] = Some(entry);
        pair.swap(0, 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_very_same_request_hits() {
        let v = Verified::default();
        let s = AuthScope::new("docs", "dbs/d/colls/c/docs/a");
        let date = "Sun, 29 Nov 2026 10:00:00 GMT";
        let parts = |verb: &str, s: &AuthScope, auth: &str| {
            SignedParts::of(verb, s, date, "", auth).expect("short")
        };
        let when = SystemTime::now();
        v.keep(&parts("GET", &s, "type=master&ver=1.0&sig=x"), false, when);
        assert_eq!(
            v.get(&parts("GET", &s, "type=master&ver=1.0&sig=x")),
            Some((false, when))
        );
        // Any other part misses: the signature, the verb, the link, a part's boundary.
        assert!(v
            .get(&parts("GET", &s, "type=master&ver=1.0&sig=y"))
            .is_none());
        assert!(v
            .get(&parts("PUT", &s, "type=master&ver=1.0&sig=x"))
            .is_none());
        let other = AuthScope::new("docs", "dbs/d/colls/c/docs/b");
        assert!(v
            .get(&parts("GET", &other, "type=master&ver=1.0&sig=x"))
            .is_none());
        let shifted = AuthScope::new("doc", "sdbs/d/colls/c/docs/a");
        assert!(v
            .get(&parts("GET", &shifted, "type=master&ver=1.0&sig=x"))
            .is_none());
        // Two requests of one slot are both kept; a third takes the place of the one used
        // longest ago.
        let same_slot = |n: u8| {
            let first = Verified::index(&parts("GET", &s, "a"));
            (0..=u32::MAX)
                .map(|i| format!("type=master&ver=1.0&sig={n}-{i}"))
                .find(|a| Verified::index(&parts("GET", &s, a)) == first)
                .expect("a key of that slot")
        };
        let (a, b, c) = ("a".to_string(), same_slot(1), same_slot(2));
        v.keep(&parts("GET", &s, &a), false, when);
        v.keep(&parts("GET", &s, &b), true, when);
        assert_eq!(v.get(&parts("GET", &s, &a)), Some((false, when)));
        assert_eq!(v.get(&parts("GET", &s, &b)), Some((true, when)));
        v.keep(&parts("GET", &s, &c), false, when);
        assert!(v.get(&parts("GET", &s, &a)).is_none());
        assert!(v.get(&parts("GET", &s, &b)).is_some());
        assert!(v.get(&parts("GET", &s, &c)).is_some());
        // Too long to keep.
        let long = "x".repeat(MAX_KEY_BYTES);
        assert!(SignedParts::of("GET", &s, date, "", &long).is_none());
    }
}
