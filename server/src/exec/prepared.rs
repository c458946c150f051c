//! Recently prepared queries. Applications send the same query text again and again with
//! different parameter values, or the very same query page after page; parsing, binding and
//! planning it each time was a twentieth of a single-partition query's CPU. A prepared query
//! depends on the text, the parameter values and the container (its partition key definition
//! and identity), so that is the key.
//!
//! An entry is kept the second time its key is seen (a doorkeeper, as TinyLFU's): a query
//! whose parameter values never repeat — a partition key per request — is prepared and
//! dropped with its request, instead of being copied in and pushing out an entry a thousand
//! misses old (keeping it was 4% of such a query's CPU under `strata-bench --profile`, most
//! of it dropping the cold entry it evicted).
//!
//! When the cache is full, a key seen again is kept only if it was asked for more often
//! lately than the entry it would push out, which otherwise goes to the back of the line
//! (TinyLFU's admission, over a small table of counts halved every [`AGE_EVERY`] queries).
//! Under `strata-bench`'s single-partition queries (about 10,000 keys asked for with a
//! tenant's Zipf skew) with 1,024 kept, first-in-first-out kept a prepared query for 30% of
//! the requests and served 24% from the cache; comparing counts keeps one for 1% and serves
//! 39%. With the 8,192 kept now: 8% and 86% first in first out, 4% and 87% comparing counts
//! (a simulation over the bench's key distribution, with exact counts rather than this
//! table): fewer copies made and dropped, more plans reused.
//!
//! Bounded in bytes, not only in entries: an entry holds its text and parameters more than
//! once (the key compared on a hit, the plan they are bound into, the access path remembered
//! with it: see [`entry_bytes`]), and one query's parameters can be megabytes. An entry
//! heavier than [`MAX_ENTRY_BYTES`] is prepared and not kept — preparing is cheap beside
//! reading that much — and past [`MAX_BYTES`] the oldest entries go.

use super::access_path::AccessMemo;
use super::{ExecError, Paging, Plan};
use crate::store::container::Container;
use dashmap::DashMap;
use serde_json::Value;
use std::collections::VecDeque;
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use strata_query::sql::ast::Query;
use strata_query::sql::route_plan::RoutePlan;
use strata_query::sql::{self, PreparedQuery, QueryError};

/// Entries kept; past it the oldest go. Bounded in bytes too ([`MAX_BYTES`]). With a
/// thousand, 39% of the bench's single-partition queries (10,000 keys) found theirs; with
/// eight thousand, 87% (simulated: see the module's doc).
const CAPACITY: usize = 8192;
/// Bytes all entries may hold together (estimated, see [`entry_bytes`]).
pub const MAX_BYTES: usize = 32 << 20;
/// The heaviest entry kept.
pub const MAX_ENTRY_BYTES: usize = 64 << 10;
/// A prepared plan's own bytes beyond the text and parameters bound into it (its tree,
/// access paths, fingerprint, the remembered [`AccessMemo`]), roughly.
const PLAN_BYTES: usize = 3072;

/// The text and parameters a prepared query was made from (compared on a hit, so a hash
/// collision can never serve another query's plan).
type Source = (String, Vec<(String, Value)>);

type Key = (u32, u128);

/// A prepared query, and the access path its plans were last given ([`AccessMemo`]: kept
/// with the query while the cache keeps it, so a query asked again is neither prepared nor
/// planned again).
pub struct Statement {
    pub prepared: Arc<PreparedQuery>,
    pub access: AccessMemo,
}

impl Statement {
    /// The plan of one page of this query (see [`Plan::new`]), its access path as remembered.
    pub fn plan(
        &self,
        c: &Container,
        routing: RoutePlan,
        enable_scan: bool,
        paging: Paging,
    ) -> Result<Plan, ExecError> {
        let query = Arc::clone(&self.prepared);
        Plan::new(c, query, routing, enable_scan, paging, Some(&self.access))
    }
}

impl Deref for Statement {
    type Target = PreparedQuery;

    fn deref(&self) -> &PreparedQuery {
        &self.prepared
    }
}

pub struct Prepared {
    /// By container id (never reused, so a re-created container misses) and a hash of the
    /// text and parameters; with each entry its estimated bytes.
    map: DashMap<Key, (Source, Arc<Statement>, usize)>,
    /// Keys in the order they were added, the oldest first (evicted first).
    order: Mutex<VecDeque<Key>>,
    /// Estimated bytes of the entries in `map`.
    bytes: AtomicUsize,
    /// Parsed texts by hash, for queries prepared again with other parameters (those too
    /// heavy for `map` above all: a vector search's text repeats, its embedding does not,
    /// and parsing was a fortieth of its CPU).
    texts: DashMap<u64, (String, Arc<Query>)>,
    /// The keys missed lately, one per slot (see the module's doc): a miss whose key its slot
    /// already holds is kept. A stale or colliding slot only decides whether to keep.
    seen: Box<[AtomicU64]>,
    /// How often each key was asked for lately, by slot (colliding keys share one; the count
    /// only decides what to keep), saturating at 15 and halved every [`AGE_EVERY`] queries.
    counts: Box<[AtomicU8]>,
    /// Queries counted since the counts were last halved.
    ticks: AtomicU64,
}

impl Default for Prepared {
    fn default() -> Self {
        Self {
            map: DashMap::default(),
            order: Mutex::default(),
            bytes: AtomicUsize::default(),
            texts: DashMap::default(),
            seen: (0..SEEN).map(|_| AtomicU64::new(0)).collect(),
            counts: (0..COUNTS).map(|_| AtomicU8::new(0)).collect(),
            ticks: AtomicU64::new(0),
        }
    }
}

/// Slots of [`Prepared::seen`] (8 bytes each): a key repeated within about this many misses
/// is kept.
const SEEN: usize = 2 * CAPACITY;

/// Slots of [`Prepared::counts`] (a byte each).
const COUNTS: usize = 4 * CAPACITY;
/// Queries between two halvings of the counts: what was hot long ago fades.
const AGE_EVERY: u64 = 16 * CAPACITY as u64;

/// Parsed texts kept (see [`Prepared::parsed`]).
const TEXTS: usize = 256;
/// The longest text whose parse is kept: with its tree, a few times this each.
const MAX_TEXT_BYTES: usize = 4 << 10;

/// Copies of its parameter values an entry holds: the key's, the plan's bound into it, and
/// in the remembered access path a probe's encoded values and its filter's.
const PARAMETER_COPIES: usize = 4;

/// What an entry for `text` and `params` holds, estimated: the text twice (the key, and
/// parsed into the plan), the parameters [`PARAMETER_COPIES`] times as in-memory JSON
/// values, and the plan's own tree. The walk stops past [`MAX_ENTRY_BYTES`] (`None`: too
/// heavy to keep).
fn entry_bytes(text: &str, params: &[(String, Value)]) -> Option<usize> {
    let mut total = PLAN_BYTES + 2 * text.len();
    for (k, v) in params {
        let room = (MAX_ENTRY_BYTES.checked_sub(total)?) / PARAMETER_COPIES;
        let held = strata_query::sql::limits::held_within(v, room)?;
        total += PARAMETER_COPIES * (k.len() + held);
    }
    (total <= MAX_ENTRY_BYTES).then_some(total)
}

impl Prepared {
    /// The prepared form of `text` with `params` on the container `cid` (resource id `rid`)
    /// with partition key definition `pk` and the distance functions of its vector embeddings (`vectors`, asked only on a miss by a query that calls `VectorDistance`): from the cache, or
    /// prepared now (its continuation fingerprint bound to the container).
    pub fn get(
        &self,
        cid: u32,
        rid: &str,
        pk: &strata_query::pk::PartitionKeyDefinition,
        vectors: impl FnOnce() -> Vec<(String, &'static str)>,
        text: &str,
        params: &[(String, Value)],
    ) -> Result<Arc<Statement>, QueryError> {
        let Some(cost) = entry_bytes(text, params) else {
            // Too heavy to keep (a vector search's embedding, say): the text's parse may
            // still be kept, and hashing the parameters for a key would be wasted.
            return self.prepare(rid, pk, vectors, text, params);
        };
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        h.update(text.as_bytes());
        for (k, v) in params {
            h.update(b"\x01");
            h.update(k.as_bytes());
            h.update(b"=");
            strata_query::sql::value::hash_into(&mut h, v);
        }
        let key = (cid, h.digest128());
        let count = self.count(key);
        if let Some(e) = self.map.get(&key) {
            let ((t, p), q, _) = e.value();
            if t == text && p.as_slice() == params {
                return Ok(Arc::clone(q));
            }
        }
        let p = self.prepare(rid, pk, vectors, text, params)?;
        if !self.seen_before(key) || !self.admit(count) {
            return Ok(p);
        }
        self.keep(
            key,
            (text.to_string(), params.to_vec()),
            Arc::clone(&p),
            cost,
        );
        Ok(p)
    }

    /// Whether `key` missed lately too (then it is worth keeping); remembers it either way.
    fn seen_before(&self, key: Key) -> bool {
        let h = key.1 ^ u128::from(key.0);
        let slot = (h as usize) % SEEN;
        // Never 0, the empty slot's value.
        let tag = ((h >> 64) as u64) | 1;
        self.seen[slot].swap(tag, Ordering::Relaxed) == tag
    }

    /// Counts one more query of `key`, and answers how many there were lately.
    fn count(&self, key: Key) -> u8 {
        if self.ticks.fetch_add(1, Ordering::Relaxed) % AGE_EVERY == AGE_EVERY - 1 {
            for c in self.counts.iter() {
                c.store(c.load(Ordering::Relaxed) / 2, Ordering::Relaxed);
            }
        }
        let slot = &self.counts[Self::count_slot(key)];
        let old = slot
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                Some(c.saturating_add(1).min(15))
            })
            .unwrap_or(15);
        old.saturating_add(1).min(15)
    }

    /// The slot of [`Prepared::counts`] that counts `key`.
    fn count_slot(key: Key) -> usize {
        ((key.1 as usize) ^ (key.0 as usize)) % COUNTS
    }

    /// Whether a key asked for `count` times lately (and seen before) is kept: always while
    /// the cache has room; when it is full, only if asked for more often than the oldest
    /// entry, which it then pushes out — else that entry goes to the back of the line.
    fn admit(&self, count: u8) -> bool {
        let mut order = crate::store::container::lock(&self.order);
        if order.len() < CAPACITY && self.bytes.load(Ordering::Relaxed) < MAX_BYTES {
            return true;
        }
        let Some(&oldest) = order.front() else {
            return true;
        };
        if count > self.counts[Self::count_slot(oldest)].load(Ordering::Relaxed) {
            return true;
        }
        order.rotate_left(1);
        false
    }

    /// `text` prepared with `params`, its parse taken from (or added to) the kept texts.
    fn prepare(
        &self,
        rid: &str,
        pk: &strata_query::pk::PartitionKeyDefinition,
        vectors: impl FnOnce() -> Vec<(String, &'static str)>,
        text: &str,
        params: &[(String, Value)],
    ) -> Result<Arc<Statement>, QueryError> {
        let parsed = self.parsed(text)?;
        // The container's vector policy is read from its properties: only for a query that
        // uses it (0.4% of a single-partition query's server CPU otherwise).
        let vectors = match sql::vector::calls_distance(&parsed) {
            true => vectors(),
            false => Vec::new(),
        };
        let mut p = sql::prepare_parsed(text, parsed, params, Some(pk), &vectors)?;
        // A token resumes this query on this container only.
        p.fingerprint = format!("{rid}:{}", p.fingerprint);
        Ok(Arc::new(Statement {
            prepared: Arc::new(p),
            access: AccessMemo::default(),
        }))
    }

    /// The parse of `text`: kept for texts up to [`MAX_TEXT_BYTES`], at most [`TEXTS`] of
    /// them (past that an arbitrary one goes: a parse is cheap to redo). Texts that do not
    /// parse are not kept.
    fn parsed(&self, text: &str) -> Result<Arc<Query>, QueryError> {
        if text.len() > MAX_TEXT_BYTES {
            return sql::parser::parse(text).map(Arc::new);
        }
        let key = xxhash_rust::xxh3::xxh3_64(text.as_bytes());
        if let Some(e) = self.texts.get(&key) {
            if e.0 == text {
                return Ok(Arc::clone(&e.1));
            }
        }
        let parsed = Arc::new(sql::parser::parse(text)?);
        if self.texts.len() >= TEXTS {
            let any = self.texts.iter().next().map(|e| *e.key());
            if let Some(k) = any {
                self.texts.remove(&k);
            }
        }
        self.texts
            .insert(key, (text.to_string(), Arc::clone(&parsed)));
        Ok(parsed)
    }

    /// Adds an entry, then evicts the oldest ones until the cache is within its bounds.
    fn keep(&self, key: Key, source: Source, p: Arc<Statement>, cost: usize) {
        let mut order = crate::store::container::lock(&self.order);
        if let Some((_, _, old)) = self.map.insert(key, (source, p, cost)) {
            self.bytes.fetch_sub(old, Ordering::Relaxed);
        } else {
            order.push_back(key);
        }
        self.bytes.fetch_add(cost, Ordering::Relaxed);
        while self.bytes.load(Ordering::Relaxed) > MAX_BYTES || order.len() > CAPACITY {
            let Some(oldest) = order.pop_front() else {
                break;
            };
            if let Some((_, (_, _, gone))) = self.map.remove(&oldest) {
                self.bytes.fetch_sub(gone, Ordering::Relaxed);
            }
        }
    }

    /// Estimated bytes the entries hold (for the memory report and tests).
    pub fn held_bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use strata_query::pk::PartitionKeyDefinition;

    #[test]
    fn same_query_same_plan_other_values_or_containers_not() {
        let cache = Prepared::default();
        let pk = PartitionKeyDefinition::hash_v2("/pk");
        let params = vec![("p".to_string(), json!("a"))];
        let sql = "SELECT * FROM c WHERE c.pk = @p";
        let get = || {
            cache
                .get(1, "r1", &pk, Default::default, sql, &params)
                .unwrap()
        };
        // Seen once: prepared, not kept; seen again: kept; then served from the cache.
        let (first, a, b) = (get(), get(), get());
        assert!(!Arc::ptr_eq(&first, &a));
        assert!(Arc::ptr_eq(&a, &b));
        let other = vec![("p".to_string(), json!("b"))];
        let c = cache
            .get(1, "r1", &pk, Default::default, sql, &other)
            .unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        assert_ne!(a.fingerprint, c.fingerprint);
        let d = cache
            .get(2, "r2", &pk, Default::default, sql, &params)
            .unwrap();
        assert!(d.fingerprint.starts_with("r2:"));
        assert!(cache
            .get(1, "r1", &pk, Default::default, "SELECT FROM", &[])
            .is_err());
    }

    /// `SELECT * FROM c WHERE c.pk = @p` with `@p` = `v`, from `cache`.
    fn by_key(cache: &Prepared, v: &str) -> Arc<Statement> {
        let pk = PartitionKeyDefinition::hash_v2("/pk");
        let params = vec![("p".to_string(), json!(v))];
        let sql = "SELECT * FROM c WHERE c.pk = @p";
        cache
            .get(1, "r1", &pk, Default::default, sql, &params)
            .unwrap()
    }

    /// Queries whose parameter values never repeat are prepared and not kept: they neither
    /// fill the cache nor push out an entry that repeats.
    #[test]
    fn values_seen_once_are_not_kept() {
        let cache = Prepared::default();
        let get = |v: &str| by_key(&cache, v);
        get("hot");
        let hot = get("hot");
        for i in 0..10_000 {
            get(&format!("key-{i}"));
        }
        assert_eq!(cache.map.len(), 1);
        assert!(Arc::ptr_eq(&hot, &get("hot")), "the repeated entry stays");
        assert_eq!(cache.texts.len(), 1, "the text's parse is kept");
    }

    /// A query with megabytes of parameters is prepared but not kept, and many distinct
    /// queries never hold more than the cache's bytes.
    #[test]
    fn the_cache_is_bounded_in_bytes() {
        let cache = Prepared::default();
        let pk = PartitionKeyDefinition::hash_v2("/pk");
        let sql = "SELECT TOP 1 c.id FROM c";
        let big = vec![("big".to_string(), json!(vec![0.5; 100_000]))];
        let a = cache
            .get(1, "r1", &pk, Default::default, sql, &big)
            .unwrap();
        let b = cache
            .get(1, "r1", &pk, Default::default, sql, &big)
            .unwrap();
        assert!(!Arc::ptr_eq(&a, &b), "too heavy to keep");
        assert_eq!(cache.held_bytes(), 0);
        assert_eq!(cache.texts.len(), 1, "its text's parse is kept");
        assert_eq!(a.fingerprint, b.fingerprint);
        // Entries just under the per-entry bound, far more than fit (each asked twice: kept).
        let mid = |i: usize| vec![("p".to_string(), json!([i, "x".repeat(12_000)]))];
        for i in 0..2_000 {
            for _ in 0..2 {
                cache
                    .get(1, "r1", &pk, Default::default, sql, &mid(i))
                    .unwrap();
            }
            assert!(cache.held_bytes() <= MAX_BYTES);
        }
        assert!(cache.held_bytes() > MAX_BYTES / 2);
        assert!(cache.map.len() < 1024, "{}", cache.map.len());
        for i in 0..2 * TEXTS {
            let text = format!("SELECT TOP {i} c.id FROM c");
            cache
                .get(1, "r1", &pk, Default::default, &text, &[])
                .unwrap();
        }
        assert!(cache.texts.len() <= TEXTS, "{}", cache.texts.len());
        // A query asked for more often than the oldest entries gets in, and stays.
        let get = || {
            cache
                .get(1, "r1", &pk, Default::default, sql, &mid(1999))
                .unwrap()
        };
        let (recent, again) = (get(), get());
        assert!(Arc::ptr_eq(&recent, &again), "asked for more often: kept");
        assert!(cache.held_bytes() <= MAX_BYTES);
    }

    /// When the cache is full, a query asked for no more often than the oldest entry is not
    /// kept (and the oldest moves to the back of the line); asked for more often, it is.
    #[test]
    fn a_full_cache_keeps_what_is_asked_for_more_often() {
        let cache = Prepared::default();
        let get = |v: &str| by_key(&cache, v);
        for i in 0..CAPACITY {
            get(&format!("old-{i}"));
            get(&format!("old-{i}"));
        }
        assert_eq!(cache.map.len(), CAPACITY);
        let (a, b) = (get("new"), get("new"));
        assert!(
            !Arc::ptr_eq(&a, &b),
            "asked for as often as the oldest: not kept"
        );
        let (c, d) = (get("new"), get("new"));
        assert!(Arc::ptr_eq(&c, &d), "asked for more often: kept");
        assert_eq!(cache.map.len(), CAPACITY);
        let first = get("old-0");
        assert!(
            Arc::ptr_eq(&first, &get("old-0")),
            "the oldest was passed over, not pushed out"
        );
    }
}
