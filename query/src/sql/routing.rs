//! Planning: which partitions a query must visit, and how its results are produced.
//!
//! Routing looks at the WHERE clause after parameters are bound. Equality (`=`) and `IN`
//! conjuncts on the container's partition key paths, combined through AND and OR, give a set
//! of full keys or key prefixes; their EPK ranges are the only ones that can hold matches.
//! A filter that does not pin the first level (say, `UserId` alone) routes everywhere.

use super::ast::*;
use crate::pk::epk::{effective_partition_key, epk_range};
use crate::pk::{EpkRange, PartitionKey, PartitionKeyDefinition, PkComponent};
use serde_json::Value;
use std::fmt;

/// The most keys routing will enumerate before giving up and fanning out.
const MAX_KEYS: usize = 1000;

/// Where a query must look.
#[derive(Debug, Clone, PartialEq)]
pub enum Routing {
    /// Every partition.
    FanOut,
    /// Only these EPK ranges (sorted, possibly overlapping). `full_keys` is true when every
    /// range is a single full key (one logical partition each).
    Keys {
        ranges: Vec<EpkRange>,
        full_keys: bool,
        /// The EPKs of the full keys, for exact matching.
        epks: Vec<String>,
    },
}

impl Routing {
    /// One full key: a single-partition query.
    pub fn is_single(&self) -> bool {
        matches!(self, Routing::Keys { full_keys: true, epks, .. } if epks.len() == 1)
    }
}

impl fmt::Display for Routing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Routing::FanOut => {
                f.write_str("fan-out (no partition key constraint on the first level)")
            }
            Routing::Keys {
                ranges, full_keys, ..
            } => write!(
                f,
                "{} {} ({} EPK range{})",
                ranges.len(),
                if *full_keys {
                    "full key(s)"
                } else {
                    "key prefix(es)"
                },
                ranges.len(),
                if ranges.len() == 1 { "" } else { "s" }
            ),
        }
    }
}

/// Per partition key level: the values a term allows (None = unconstrained).
type Term = Vec<Option<Vec<PkComponent>>>;

/// Derives the routing of a bound query over a container with definition `def`.
pub fn route(q: &Query, def: &PartitionKeyDefinition) -> Routing {
    let Some(from) = &q.from else {
        return Routing::FanOut;
    };
    // Only `FROM c` (the document itself) exposes the partition key paths.
    if !matches!(&from.first.kind, SourceKind::Value(Expr::Slot(DOC_SLOT, _))) {
        return Routing::FanOut;
    }
    let Some(w) = &q.where_ else {
        return Routing::FanOut;
    };
    let levels = def.levels();
    let Some(terms) = terms(w, from.first.slot, def, levels) else {
        return Routing::FanOut;
    };
    let mut ranges = Vec::new();
    let mut epks = Vec::new();
    let mut full_keys = true;
    for t in terms {
        let known = t.iter().take_while(|l| l.is_some()).count();
        if known == 0 {
            return Routing::FanOut;
        }
        // Cross product of the known leading levels.
        let mut prefixes: Vec<Vec<PkComponent>> = vec![Vec::new()];
        for level in t.iter().take(known).flatten() {
            let mut next = Vec::new();
            for p in &prefixes {
                for v in level {
                    let mut q = p.clone();
                    q.push(v.clone());
                    next.push(q);
                }
            }
            if next.len() > MAX_KEYS {
                return Routing::FanOut;
            }
            prefixes = next;
        }
        for p in prefixes {
            let pk = PartitionKey(p);
            if known == levels {
                match effective_partition_key(def, &pk) {
                    Ok(e) => {
                        ranges.push(EpkRange::point(&e));
                        epks.push(e);
                    }
                    Err(_) => return Routing::FanOut,
                }
            } else {
                full_keys = false;
                match epk_range(def, &pk) {
                    Ok(r) => ranges.push(r),
                    Err(_) => return Routing::FanOut,
                }
            }
        }
    }
    ranges.sort();
    ranges.dedup();
    epks.sort();
    epks.dedup();
    Routing::Keys {
        ranges,
        full_keys,
        epks,
    }
}

/// The routing of `q` under `def` when its request also named a partition key `key` (values
/// of `scope`'s leading paths, as a partition key header gives them for the container's own
/// key): the header's values join the WHERE clause as equalities, so a replay under another
/// key (the partition-key advisor) sees everything that pinned the query.
pub fn route_scoped(
    q: &Query,
    def: &PartitionKeyDefinition,
    scope: &PartitionKeyDefinition,
    key: &[Value],
) -> Routing {
    let Some(from) = &q.from else {
        return route(q, def);
    };
    let alias = from.first.alias.clone().unwrap_or_else(|| "c".into());
    let mut pinned = q.clone();
    for (segs, v) in scope.segments.iter().zip(key) {
        let path = segs
            .iter()
            .fold(Expr::Slot(from.first.slot, alias.clone()), |e, name| {
                Expr::Member(Box::new(e), name.clone())
            });
        let eq = Expr::Binary(BinOp::Eq, Box::new(path), Box::new(Expr::Lit(v.clone())));
        pinned.where_ = Some(match pinned.where_.take() {
            Some(w) => Expr::Binary(BinOp::And, Box::new(w), Box::new(eq)),
            None => eq,
        });
    }
    route(&pinned, def)
}

/// Whether `q`'s WHERE clause holds for every document whose key is the one it pins: it is
/// only equalities of each of the key's paths, once, to a string, boolean or null constant,
/// joined by AND (so the routing is one full key, and a document stored under that key's
/// EPK has those values). Numbers are left out: the key hashes a number as a double, so
/// two integers past 2^53 share an EPK that `=` tells apart. So are keys hashed the legacy
/// way (`Hash` version 1): it hashes a string's first 100 UTF-16 units only, so two strings
/// that begin alike share an EPK.
pub fn implied_by_key(q: &Query, def: &PartitionKeyDefinition) -> bool {
    let (Some(from), Some(w)) = (&q.from, &q.where_) else {
        return false;
    };
    if def.kind == crate::pk::PartitionKind::Hash && def.version < 2 {
        return false;
    }
    if !from.joins.is_empty()
        || !matches!(&from.first.kind, SourceKind::Value(Expr::Slot(DOC_SLOT, _)))
    {
        return false;
    }
    let mut seen = vec![false; def.levels()];
    key_equalities(w, from.first.slot, def, &mut seen) && seen.iter().all(|s| *s)
}

/// Marks in `seen` the key level each equality of the AND tree `e` pins; false when `e` is
/// anything else, a level repeats, or a value is not a string, boolean or null constant.
fn key_equalities(e: &Expr, slot: Slot, def: &PartitionKeyDefinition, seen: &mut [bool]) -> bool {
    match e {
        Expr::Binary(BinOp::And, a, b) => {
            key_equalities(a, slot, def, seen) && key_equalities(b, slot, def, seen)
        }
        Expr::Binary(BinOp::Eq, a, b) => {
            let (level, value) = match (level_of(a, slot, def), level_of(b, slot, def)) {
                (Some(l), None) => (l, b),
                (None, Some(l)) => (l, a),
                _ => return false,
            };
            let constant = matches!(
                value.as_ref(),
                Expr::Lit(Value::String(_) | Value::Bool(_) | Value::Null)
            );
            constant && !std::mem::replace(&mut seen[level], true)
        }
        _ => false,
    }
}

/// Which partition key level (if any) an expression is, for alias `slot`.
fn level_of(e: &Expr, slot: Slot, def: &PartitionKeyDefinition) -> Option<usize> {
    let (s, path) = e.as_path()?;
    if s != slot {
        return None;
    }
    def.segments
        .iter()
        .position(|segs| segs.len() == path.len() && segs.iter().zip(&path).all(|(a, b)| a == b))
}

fn component(e: &Expr) -> Option<PkComponent> {
    match e {
        Expr::Lit(v @ (Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null)) => {
            PkComponent::from_json(v)
        }
        _ => None,
    }
}

/// The disjunction of conjunctive terms an expression implies, or None (no constraint).
fn terms(e: &Expr, slot: Slot, def: &PartitionKeyDefinition, levels: usize) -> Option<Vec<Term>> {
    match e {
        Expr::Binary(BinOp::Eq, a, b) => {
            let (level, value) = match (level_of(a, slot, def), level_of(b, slot, def)) {
                (Some(l), _) => (l, component(b)?),
                (None, Some(l)) => (l, component(a)?),
                _ => return None,
            };
            let mut t: Term = vec![None; levels];
            t[level] = Some(vec![value]);
            Some(vec![t])
        }
        Expr::In {
            expr,
            list,
            negated: false,
        } => {
            let level = level_of(expr, slot, def)?;
            let values: Option<Vec<PkComponent>> = list.iter().map(component).collect();
            let mut t: Term = vec![None; levels];
            t[level] = Some(values?);
            Some(vec![t])
        }
        Expr::Binary(BinOp::And, a, b) => {
            match (terms(a, slot, def, levels), terms(b, slot, def, levels)) {
                (None, x) | (x, None) => x,
                (Some(x), Some(y)) => {
                    if x.len() * y.len() > MAX_KEYS {
                        // Either side alone is a valid (looser) constraint.
                        return Some(if x.len() <= y.len() { x } else { y });
                    }
                    let mut out = Vec::new();
                    for p in &x {
                        for q in &y {
                            if let Some(m) = merge(p, q) {
                                out.push(m);
                            }
                        }
                    }
                    Some(out)
                }
            }
        }
        Expr::Binary(BinOp::Or, a, b) => {
            let mut x = terms(a, slot, def, levels)?;
            let y = terms(b, slot, def, levels)?;
            x.extend(y);
            (x.len() <= MAX_KEYS).then_some(x)
        }
        _ => None,
    }
}

/// The conjunction of two terms; None when they contradict (no key satisfies both).
fn merge(a: &Term, b: &Term) -> Option<Term> {
    let mut out = Vec::with_capacity(a.len());
    for (x, y) in a.iter().zip(b) {
        out.push(match (x, y) {
            (None, v) | (v, None) => v.clone(),
            (Some(p), Some(q)) => {
                let both: Vec<PkComponent> = p.iter().filter(|v| q.contains(v)).cloned().collect();
                if both.is_empty() {
                    return None;
                }
                Some(both)
            }
        });
    }
    Some(out)
}

/// How results are produced across partitions and pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// No FROM: one evaluation, independent of documents.
    NoFrom,
    /// Rows in key order, resumable after any row.
    Streaming,
    /// ORDER BY: a k-way merge of sorted partition results, resumable after the last row.
    Ordered,
    /// Aggregates / GROUP BY: partial aggregates per partition, combined.
    Aggregate,
    /// DISTINCT (and anything else needing complete results): computed whole, then paged.
    Materialized,
}

impl Mode {
    pub fn of(q: &Query) -> Mode {
        if q.from.is_none() {
            Mode::NoFrom
        } else if super::eval::is_aggregate(q) {
            Mode::Aggregate
        } else if q.select.distinct || super::hybrid::rank_of(q).is_some_and(|r| r.fused) {
            // RRF ranks every row of every component before it orders any.
            Mode::Materialized
        } else if q.order_by.is_some() {
            Mode::Ordered
        } else {
            Mode::Streaming
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::NoFrom => "constant",
            Mode::Streaming => "streaming",
            Mode::Ordered => "ordered merge",
            Mode::Aggregate => "aggregate",
            Mode::Materialized => "materialized",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::prepare;

    fn def3() -> PartitionKeyDefinition {
        PartitionKeyDefinition::multi_hash(&["/TenantId", "/UserId", "/SessionId"]).unwrap()
    }

    fn routing(sql: &str) -> Routing {
        prepare(sql, &[], Some(&def3())).unwrap().routing
    }

    /// Only a WHERE clause of one constant equality per key path, joined by AND, holds for
    /// every document of the key it pins.
    #[test]
    fn a_filter_of_the_key_equalities_alone_is_implied_by_the_key() {
        let implied = |sql: &str, params: &[(String, Value)]| {
            let p = prepare(sql, params, Some(&def3())).unwrap();
            implied_by_key(&p.query, &def3())
        };
        let three = "c.TenantId = 't' AND c.UserId = 'u' AND c.SessionId = 's'";
        assert!(implied(&format!("SELECT * FROM c WHERE {three}"), &[]));
        assert!(implied(
            "SELECT * FROM c WHERE 's' = c.SessionId AND (c.UserId = null AND c['TenantId'] = true)",
            &[]
        ));
        let bound = [
            ("t".to_string(), Value::from("t")),
            ("u".to_string(), Value::from("u")),
            ("s".to_string(), Value::from("s")),
        ];
        assert!(implied(
            "SELECT * FROM c WHERE c.TenantId = @t AND c.UserId = @u AND c.SessionId = @s",
            &bound
        ));
        let not = [
            // A level missing: a prefix, not one key.
            "SELECT * FROM c WHERE c.TenantId = 't' AND c.UserId = 'u'",
            // Anything else in the filter.
            &format!("SELECT * FROM c WHERE {three} AND c.n = 1"),
            &format!("SELECT * FROM c WHERE {three} OR c.TenantId = 'x'"),
            "SELECT * FROM c WHERE c.TenantId IN ('t') AND c.UserId = 'u' AND c.SessionId = 's'",
            // A level twice (one value contradicts the other).
            &format!("SELECT * FROM c WHERE {three} AND c.TenantId = 'x'"),
            // A number: integers past 2^53 share a key's hash that `=` tells apart.
            "SELECT * FROM c WHERE c.TenantId = 1 AND c.UserId = 'u' AND c.SessionId = 's'",
            // Not a constant.
            "SELECT * FROM c WHERE c.TenantId = c.UserId AND c.UserId = 'u' AND c.SessionId = 's'",
            // Not the document itself.
            &format!("SELECT c.id FROM c JOIN t IN c.tags WHERE {three}"),
            "SELECT * FROM c",
        ];
        for sql in not {
            assert!(!implied(sql, &[]), "{sql}");
        }
        // A legacy hash (version 1) keys strings by their first 100 UTF-16 units: never
        // implied; version 2 of one path is.
        let sql = "SELECT * FROM c WHERE c.pk = 'a'";
        let v1 = PartitionKeyDefinition::new(&["/pk"], crate::pk::PartitionKind::Hash, 1).unwrap();
        let p = prepare(sql, &[], Some(&v1)).unwrap();
        assert!(p.routing.is_single());
        assert!(!implied_by_key(&p.query, &v1));
        let v2 = PartitionKeyDefinition::hash_v2("/pk");
        let p = prepare(sql, &[], Some(&v2)).unwrap();
        assert!(implied_by_key(&p.query, &v2));
    }

    #[test]
    fn a_header_key_joins_the_where_clause_under_another_key() {
        let p = prepare(
            "SELECT * FROM r WHERE r.UserId = 'u' AND r.SessionId = 's'",
            &[],
            Some(&def3()),
        )
        .unwrap();
        assert_eq!(p.routing, Routing::FanOut);
        let tenant = PartitionKeyDefinition::hash_v2("/TenantId");
        let r = route_scoped(&p.query, &def3(), &tenant, &[serde_json::json!("t")]);
        assert!(r.is_single(), "{r}");
        let none = route_scoped(&p.query, &def3(), &tenant, &[]);
        assert_eq!(none, Routing::FanOut);
    }

    #[test]
    fn the_five_documented_routes() {
        let full = routing(
            "SELECT * FROM c WHERE c.TenantId = 'a' AND c.UserId = 'b' AND c.SessionId = 'c'",
        );
        assert!(full.is_single());
        let two = routing("SELECT * FROM c WHERE c.TenantId = 'a' AND c.UserId = 'b'");
        assert!(
            matches!(two, Routing::Keys { full_keys: false, ref ranges, .. } if ranges.len() == 1 && ranges[0].min.len() == 64)
        );
        let one = routing("SELECT * FROM c WHERE c.TenantId = 'a'");
        assert!(
            matches!(one, Routing::Keys { full_keys: false, ref ranges, .. } if ranges[0].min.len() == 32)
        );
        assert_eq!(
            routing("SELECT * FROM c WHERE c.UserId = 'b'"),
            Routing::FanOut
        );
        assert_eq!(
            routing("SELECT * FROM c WHERE c.SessionId = 'c'"),
            Routing::FanOut
        );
    }

    #[test]
    fn in_and_or_give_key_sets() {
        let r = routing("SELECT * FROM c WHERE c.TenantId IN ('a', 'b') AND c.x > 1");
        assert!(matches!(r, Routing::Keys { ref ranges, .. } if ranges.len() == 2));
        let r = routing("SELECT * FROM c WHERE c.TenantId = 'a' OR c.TenantId = 'b'");
        assert!(matches!(r, Routing::Keys { ref ranges, .. } if ranges.len() == 2));
        assert_eq!(
            routing("SELECT * FROM c WHERE c.TenantId = 'a' OR c.x = 1"),
            Routing::FanOut
        );
        // Contradiction: no key can match.
        let r = routing("SELECT * FROM c WHERE c.TenantId = 'a' AND c.TenantId = 'b'");
        assert!(matches!(r, Routing::Keys { ref ranges, .. } if ranges.is_empty()));
        let r = prepare(
            "SELECT * FROM r WHERE r.TenantId = @t",
            &[("t".into(), Value::from("x"))],
            Some(&def3()),
        )
        .unwrap()
        .routing;
        assert!(matches!(r, Routing::Keys { .. }));
    }
}
