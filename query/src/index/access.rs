//! Access paths: how a bound query reads a physical partition, decided from its WHERE and
//! ORDER BY clauses and the container's indexing policy — and the errors the service gives
//! for queries its index cannot serve.
//!
//! The index only ever narrows the candidates: every document it yields is re-checked against
//! the whole WHERE clause, so a probe may return more than matches (a positional array path
//! probed as "any element", a truncated long string) but never less. Only an *exact* probe
//! (one equality or `IN` on a scalar path, nothing else in the filter) may answer `COUNT`
//! without loading documents.

use super::policy::{print_path, IndexingPolicy, Seg};
use super::term::{self, encode, is_exact, string_prefix_bounds, Span};
use crate::sql::ast::*;
use crate::sql::functions::{ArrayFn, Func, SearchFn, SpatialFn, StrFn, TypeFn};
use serde_json::Value;
use std::fmt;

/// One index lookup: the entries of `path` within `spans`.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    pub path: Vec<Seg>,
    pub spans: Vec<Span>,
    /// The entries decide the predicate alone (equality on exact terms of a scalar path).
    pub exact: bool,
    /// The predicate as written, for plans and index metrics: printed only when they are
    /// (printing it on every query was 1.8% of a single-partition query's server CPU).
    pub filter: Expr,
    /// Probes whose documents the candidates must also have (the other words of a full-text
    /// conjunction): the postings intersected, not one word's documents read and filtered.
    pub and: Vec<Probe>,
    /// How selective the predicate is likely to be (lower is better), to choose among
    /// conjuncts: equality 0, IN 1, prefix 2, range 3, defined 4.
    rank: u8,
}

impl Probe {
    /// Whether this probe and those it is intersected with read only paths among `paths`
    /// (each split into property names, as a partition key definition keeps them).
    pub fn on_path_of(&self, paths: &[Vec<String>]) -> bool {
        let on = |p: &Probe| {
            paths.iter().any(|segs| {
                segs.len() == p.path.len()
                    && segs
                        .iter()
                        .zip(&p.path)
                        .all(|(s, seg)| matches!(seg, Seg::Name(n) if n == s))
            })
        };
        on(self) && self.and.iter().all(on)
    }
}

/// The ORDER BY path read in index order.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderPath {
    pub path: Vec<Seg>,
    pub descending: bool,
}

/// How a query reads each physical partition.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Access {
    /// Candidates from the union of these lookups; `None`: every document of the partition.
    pub lookup: Option<Vec<Probe>>,
    /// The first ORDER BY item, when the index can stream it.
    pub order: Option<OrderPath>,
    /// `SELECT VALUE COUNT(1)` answered from index entries or partition sizes alone.
    pub count_only: bool,
    /// `SELECT VALUE MIN(c.p)` / `MAX(c.p)` without a filter: the first (last) value of the
    /// path's entries decides it, so only the documents holding it are read.
    pub extreme: Option<OrderPath>,
    /// Paths the filter reads that the policy does not index (potential indexes).
    pub unindexed: Vec<Vec<Seg>>,
    /// Computed properties the query reads: added to every document it reads.
    pub computed: Vec<crate::sql::computed::ComputedProperty>,
    /// `ORDER BY VectorDistance` over this path with this distance function. Whether a
    /// vector index hands out the candidates is the server's choice (its plan prints it);
    /// without one the ranking is exact, over every candidate document.
    pub ranked: Option<(Vec<Seg>, String)>,
}

impl Access {
    /// Whether the lookup is exact (a count may use it without documents).
    pub fn exact_lookup(&self) -> bool {
        matches!(&self.lookup, Some(p) if p.len() == 1 && p[0].exact)
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.lookup {
            None => f.write_str("full scan")?,
            Some(probes) => {
                f.write_str("index lookup ")?;
                for (i, p) in probes.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" ∪ ")?;
                    }
                    match (
                        super::fulltext::text_path(&p.path),
                        super::spatial::geometry_path(&p.path),
                    ) {
                        (Some(text), _) => write!(
                            f,
                            "full-text postings of {} [{}]",
                            print_path(text),
                            p.filter
                        )?,
                        (_, Some(geo)) => write!(
                            f,
                            "spatial index of {} ({} cells) [{}]",
                            print_path(geo),
                            p.spans.len(),
                            p.filter
                        )?,
                        _ => write!(f, "{} [{}]", print_path(&p.path), p.filter)?,
                    }
                }
            }
        }
        if let Some(o) = &self.order {
            write!(
                f,
                "; order from index {} {}",
                print_path(&o.path),
                if o.descending { "desc" } else { "asc" }
            )?;
        }
        if let Some((path, func)) = &self.ranked {
            write!(
                f,
                "; ranked by VectorDistance over {} ({func})",
                print_path(path),
            )?;
        }
        if self.count_only {
            f.write_str("; count from index")?;
        }
        if let Some(e) = &self.extreme {
            write!(
                f,
                "; {} from index {}",
                if e.descending { "max" } else { "min" },
                print_path(&e.path)
            )?;
        }
        Ok(())
    }
}

/// Why the service refuses a query over this policy (status 400, sub-status 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessError(pub String);

/// The service's message for ORDER BY over several properties without a composite index.
pub const NO_COMPOSITE: &str =
    "The order by query does not have a corresponding composite index that it can be served from.";
/// The service's message for ORDER BY on a path the policy excludes.
pub const ORDER_EXCLUDED: &str =
    "The index path corresponding to the specified order-by item is excluded.";
/// The service's message for a filter the index cannot serve without the scan header.
pub const SCAN_NEEDED: &str = "An invalid query has been specified with filters against path(s) excluded from indexing. Consider adding allow scan header in the request.";

/// The document alias of a query over the container itself (`FROM c`), if that is its shape.
fn doc_slot(q: &Query) -> Option<Slot> {
    let from = q.from.as_ref()?;
    matches!(&from.first.kind, SourceKind::Value(Expr::Slot(DOC_SLOT, _)))
        .then_some(from.first.slot)
}

/// The document path of `e` for alias `slot`: member names, `[]` for a numeric index.
/// The second value is false when a numeric index was widened to `[]` (any element).
fn doc_path(e: &Expr, slot: Slot) -> Option<(Vec<Seg>, bool)> {
    match e {
        Expr::Slot(s, _) if *s == slot => Some((Vec::new(), true)),
        Expr::Member(base, name) => {
            let (mut p, exact) = doc_path(base, slot)?;
            p.push(Seg::Name(name.clone()));
            Some((p, exact))
        }
        Expr::Index(base, idx) => {
            let (mut p, exact) = doc_path(base, slot)?;
            match idx.as_ref() {
                Expr::Lit(Value::String(name)) => {
                    p.push(Seg::Name(name.clone()));
                    Some((p, exact))
                }
                Expr::Lit(Value::Number(_)) => {
                    p.push(Seg::Elements);
                    Some((p, false))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// Plans how `q` reads a partition under `policy`, or says why the service would refuse it.
/// `enable_scan` is the request's `x-ms-documentdb-query-enable-scan`; `keys` are the
/// partition key paths the query's route pins (each split into property names; all of them
/// for a route to one logical partition, else none): of two conjuncts, one on another path is
/// the better lookup, since the route already narrows the read by the key.
pub fn choose(
    q: &Query,
    policy: &IndexingPolicy,
    enable_scan: bool,
    keys: &[Vec<String>],
) -> Result<Access, AccessError> {
    let mut access = Access::default();
    let slot = doc_slot(q);
    check_order_by(q, policy, slot)?;
    if let (Some(OrderBy::Items(items)), Some(slot)) = (&q.order_by, slot) {
        let first = items.first().map(|i| &i.expr);
        if let Some(Expr::Call(_, args)) = first.filter(|e| e.is_vector_distance()) {
            if let Some((path, _)) = args.first().and_then(|a| doc_path(a, slot)) {
                let func = first
                    .and_then(crate::sql::vector::distance_of)
                    .unwrap_or_else(|| "cosine".into());
                access.ranked = Some((path, func));
            }
        }
    }
    if policy.is_none() {
        if q.where_.is_some() && !enable_scan {
            return Err(AccessError(SCAN_NEEDED.into()));
        }
        return Ok(access);
    }
    let Some(slot) = slot else {
        return Ok(access);
    };
    if let Some(w) = &q.where_ {
        access.lookup = probes(w, (slot, policy, keys), &mut access.unindexed);
    }
    if let Some(OrderBy::Items(items)) = &q.order_by {
        if let Some((path, true)) = items.first().and_then(|i| doc_path(&i.expr, slot)) {
            if policy.indexes(&path, true) && !path.contains(&Seg::Elements) {
                access.order = Some(OrderPath {
                    path,
                    descending: items[0].descending,
                });
            }
        }
    }
    access.extreme = extreme(q, slot, policy);
    access.count_only = is_count_one(q)
        && q.from.as_ref().is_some_and(|f| f.joins.is_empty())
        && (q.where_.is_none() || access.exact_lookup());
    Ok(access)
}

/// `SELECT VALUE COUNT(<constant>)` with nothing else.
fn is_count_one(q: &Query) -> bool {
    q.group_by.is_empty()
        && !q.select.distinct
        && q.select.top.is_none()
        && q.offset.is_none()
        && q.order_by.is_none()
        && q.aggregates.len() == 1
        && matches!(&q.aggregates[0], (AggFunc::Count, Expr::Lit(_)))
        && matches!(&q.select.projection, Projection::Value(Expr::Agg { .. }))
}

/// `SELECT VALUE MIN(path)` or `MAX(path)` over the whole container, on a path whose values
/// and nodes are all indexed (an array or object value makes the aggregate undefined, and the
/// node markers reveal one).
fn extreme(q: &Query, slot: Slot, policy: &IndexingPolicy) -> Option<OrderPath> {
    let plain = q.group_by.is_empty()
        && q.where_.is_none()
        && !q.select.distinct
        && q.select.top.is_none()
        && q.offset.is_none()
        && q.order_by.is_none()
        && q.from.as_ref().is_some_and(|f| f.joins.is_empty())
        && q.aggregates.len() == 1
        && matches!(&q.select.projection, Projection::Value(Expr::Agg { .. }));
    if !plain {
        return None;
    }
    let (descending, arg) = match &q.aggregates[0] {
        (AggFunc::Min, e) => (false, e),
        (AggFunc::Max, e) => (true, e),
        _ => return None,
    };
    let (path, true) = doc_path(arg, slot)? else {
        return None;
    };
    let covered = !path.is_empty()
        && !path.contains(&Seg::Elements)
        && policy.indexes(&path, true)
        && policy.indexes(&path, false);
    covered.then_some(OrderPath { path, descending })
}

/// ORDER BY over several properties needs a composite index; over one, an included path.
fn check_order_by(
    q: &Query,
    policy: &IndexingPolicy,
    slot: Option<Slot>,
) -> Result<(), AccessError> {
    let Some(OrderBy::Items(items)) = &q.order_by else {
        return Ok(());
    };
    let Some(slot) = slot else {
        return Ok(());
    };
    let paths: Option<Vec<(Vec<Seg>, bool)>> = items
        .iter()
        .map(|i| doc_path(&i.expr, slot).map(|(p, _)| (p, i.descending)))
        .collect();
    let Some(paths) = paths else {
        return Ok(());
    };
    if policy.is_none() {
        return Err(AccessError(ORDER_EXCLUDED.into()));
    }
    if paths.len() > 1 {
        if policy.composite_for(&paths).is_none() {
            return Err(AccessError(NO_COMPOSITE.into()));
        }
        return Ok(());
    }
    // A root-level ORDER BY (`ORDER BY c`) has no path to check.
    if let Some((p, _)) = paths.first() {
        if !p.is_empty() && !policy.indexes(p, true) {
            return Err(AccessError(ORDER_EXCLUDED.into()));
        }
    }
    Ok(())
}

/// Candidate lookups for a filter: the best conjunct of an AND, the union of an OR's sides.
fn probes(
    e: &Expr,
    on: (Slot, &IndexingPolicy, &[Vec<String>]),
    unindexed: &mut Vec<Vec<Seg>>,
) -> Option<Vec<Probe>> {
    let (slot, policy, keys) = on;
    match e {
        Expr::Binary(BinOp::And, a, b) => {
            let x = probes(a, on, unindexed);
            let y = probes(b, on, unindexed);
            let mut chosen = match (x, y) {
                (None, v) | (v, None) => v,
                // Two words of one text: the documents in both posting lists.
                (Some(mut x), Some(y))
                    if x.len() == 1 && y.len() == 1 && is_postings(&x[0]) && is_postings(&y[0]) =>
                {
                    let other = y.into_iter().next();
                    x[0].and.extend(other);
                    x[0].filter = e.clone();
                    Some(x)
                }
                (Some(x), Some(y)) => Some(if cost(&y, keys) < cost(&x, keys) {
                    y
                } else {
                    x
                }),
            }?;
            // A conjunct alone no longer decides the whole filter.
            for p in &mut chosen {
                p.exact = false;
            }
            Some(chosen)
        }
        Expr::Binary(BinOp::Or, a, b) => {
            let mut x = probes(a, on, unindexed)?;
            let y = probes(b, on, unindexed)?;
            x.extend(y);
            for p in &mut x {
                p.exact = false;
            }
            Some(x)
        }
        Expr::Call(Func::Search(f), args) if f.is_full_text() => {
            full_text_probes(*f, args, slot, policy, e)
        }
        _ => spatial_probe(e, slot, policy)
            .or_else(|| leaf_probe(e, slot, policy, unindexed))
            .map(|p| vec![p]),
    }
}

/// Whether a probe reads full-text postings.
fn is_postings(p: &Probe) -> bool {
    super::fulltext::text_path(&p.path).is_some()
}

/// `FullTextContains*` over a path with a full-text index: the postings of its terms (the
/// first stem of each phrase; evaluation checks the whole phrase). `Any` is the union of its
/// terms' postings, the others one term's.
fn full_text_probes(
    f: SearchFn,
    args: &[Expr],
    slot: Slot,
    policy: &IndexingPolicy,
    e: &Expr,
) -> Option<Vec<Probe>> {
    use super::fulltext::{postings_path, stem_span};
    if !matches!(
        f,
        SearchFn::FullTextContains | SearchFn::FullTextContainsAll | SearchFn::FullTextContainsAny
    ) {
        return None;
    }
    let (path, _) = doc_path(args.first()?, slot)?;
    let lang = policy.full_text.iter().find(|(p, _)| *p == path)?.1;
    let mut stems = Vec::new();
    for a in &args[1..] {
        let Some(Value::String(t)) = literal(a) else {
            return None;
        };
        // A phrase of stop words only matches nothing, which no probe can say: evaluate.
        stems.push(crate::sql::fulltext::analyze(t, lang).into_iter().next()?);
    }
    let probe = |spans: Vec<Span>| Probe {
        path: postings_path(&path),
        spans,
        exact: false,
        filter: e.clone(),
        and: Vec::new(),
        rank: 0,
    };
    if f == SearchFn::FullTextContainsAny {
        // Any word: one lookup over every distinct stem's postings (one probe per word
        // repeated the whole predicate's text per word: 10,000 words made 10,000 copies).
        let mut spans: Vec<Span> = stems.iter().map(|s| stem_span(s)).collect();
        spans.sort_by(|a, b| a.lo.cmp(&b.lo));
        spans.dedup();
        return Some(vec![probe(spans)]);
    }
    stems.sort();
    stems.dedup();
    let mut probes: Vec<Probe> = stems.iter().map(|s| probe(vec![stem_span(s)])).collect();
    if !probes.is_empty() {
        // Every word: the first word's postings intersected with the others'.
        let rest = probes.split_off(1);
        probes[0].and = rest;
    }
    Some(probes)
}

/// A constant: a literal, or an object or array built of constants (a GeoJSON literal in a
/// query is written as an object).
fn constant(e: &Expr) -> Option<Value> {
    match e {
        Expr::Lit(v) => Some(v.clone()),
        Expr::Object(fields) => fields
            .iter()
            .map(|(k, v)| Some((k.clone(), constant(v)?)))
            .collect::<Option<serde_json::Map<_, _>>>()
            .map(Value::Object),
        Expr::Array(items) => items
            .iter()
            .map(constant)
            .collect::<Option<Vec<_>>>()
            .map(Value::Array),
        _ => None,
    }
}

/// A filter a spatial index narrows: `ST_DISTANCE(path, g) < r` (or `<=`, either side, either
/// argument order), `ST_WITHIN(path, g)`, `ST_INTERSECTS(path, g)` (either order), over a path
/// of the policy's `spatialIndexes` and a constant geometry `g`: the cells of
/// [`super::spatial::spans`].
fn spatial_probe(e: &Expr, slot: Slot, policy: &IndexingPolicy) -> Option<Probe> {
    if policy.spatial.is_empty() {
        return None;
    }
    let geo_and_path = |args: &[Expr], either: bool| -> Option<(Vec<Seg>, Value)> {
        match (args.first().and_then(|a| doc_path(a, slot)), args.get(1)) {
            (Some((p, _)), Some(g)) => Some((p, constant(g)?)),
            _ if either => Some((doc_path(args.get(1)?, slot)?.0, constant(args.first()?)?)),
            _ => None,
        }
    };
    let (path, geometry, within_m) = match e {
        Expr::Binary(op @ (BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge), a, b) => {
            let (call, r) = match (op, &**a, &**b) {
                (BinOp::Lt | BinOp::Le, call, r) | (BinOp::Gt | BinOp::Ge, r, call) => (call, r),
                _ => return None,
            };
            let Expr::Call(Func::Spatial(SpatialFn::StDistance), args) = call else {
                return None;
            };
            let r = literal(r)?.as_f64()?;
            let (p, g) = geo_and_path(args, true)?;
            (p, g, r.max(0.0) * 1.01)
        }
        Expr::Call(Func::Spatial(SpatialFn::StWithin), args) => {
            let (p, g) = geo_and_path(args, false)?;
            (p, g, 0.0)
        }
        Expr::Call(Func::Spatial(SpatialFn::StIntersects), args) => {
            let (p, g) = geo_and_path(args, true)?;
            (p, g, 0.0)
        }
        _ => return None,
    };
    if !policy.spatial.iter().any(|s| s.segs == path) {
        return None;
    }
    Some(Probe {
        spans: super::spatial::spans(&geometry, within_m)?,
        path: super::spatial::cells_path(&path),
        exact: false,
        filter: e.clone(),
        and: Vec::new(),
        rank: 1,
    })
}

/// What a conjunct's lookups cost, lowest best: lookups on pinned key paths only come last
/// (the route narrows the read by them already, so they add nothing), then the least
/// selective predicate's rank, then the number of lookups.
fn cost(p: &[Probe], keys: &[Vec<String>]) -> (bool, u8, usize) {
    let on_keys = p.iter().all(|p| p.on_path_of(keys));
    (
        on_keys,
        p.iter().map(|p| p.rank).max().unwrap_or(0),
        p.len(),
    )
}

fn literal(e: &Expr) -> Option<&Value> {
    match e {
        Expr::Lit(v) => Some(v),
        _ => None,
    }
}

/// The spans of one type's terms: all numbers, all strings, both booleans, null.
fn type_span(v: &Value) -> Option<Span> {
    let (lo, hi) = match v {
        Value::Null => (term::NULL, term::NULL + 1),
        Value::Bool(_) => (term::FALSE, term::TRUE + 1),
        Value::Number(_) => (term::NUMBER, term::NUMBER + 1),
        Value::String(_) => (term::STRING, term::STRING + 1),
        _ => return None,
    };
    Some(Span {
        lo: vec![lo],
        hi: vec![hi],
    })
}

/// A comparison `path op v` as a span (inclusive of `v`, so the re-check decides the edge).
fn compare_span(op: BinOp, v: &Value) -> Option<Span> {
    let all = type_span(v)?;
    let t = encode(v);
    let mut t_end = t.clone();
    t_end.push(0xFF);
    Some(match op {
        BinOp::Gt | BinOp::Ge => Span { lo: t, hi: all.hi },
        BinOp::Lt | BinOp::Le => Span {
            lo: all.lo,
            hi: t_end,
        },
        _ => return None,
    })
}

fn flip(op: BinOp) -> BinOp {
    match op {
        BinOp::Gt => BinOp::Lt,
        BinOp::Ge => BinOp::Le,
        BinOp::Lt => BinOp::Gt,
        BinOp::Le => BinOp::Ge,
        o => o,
    }
}

fn leaf_probe(
    e: &Expr,
    slot: Slot,
    policy: &IndexingPolicy,
    unindexed: &mut Vec<Vec<Seg>>,
) -> Option<Probe> {
    // (path, whole path exact, spans, exact, rank, whether nodes must be indexed too)
    let (path, path_exact, spans, exact, rank, nodes) = match e {
        Expr::Binary(op @ (BinOp::Eq | BinOp::Gt | BinOp::Ge | BinOp::Lt | BinOp::Le), a, b) => {
            let (p, v, op) = match (doc_path(a, slot), literal(b), doc_path(b, slot), literal(a)) {
                (Some(p), Some(v), _, _) => (p, v, *op),
                (_, _, Some(p), Some(v)) => (p, v, flip(*op)),
                _ => return None,
            };
            if op == BinOp::Eq {
                let ex = is_exact(v);
                (p.0, p.1, vec![Span::point(encode(v))], ex, 0, !ex)
            } else {
                (p.0, p.1, vec![compare_span(op, v)?], false, 3, false)
            }
        }
        Expr::Between {
            expr,
            low,
            high,
            negated: false,
        } => {
            let p = doc_path(expr, slot)?;
            let (lo, hi) = (literal(low)?, literal(high)?);
            let a = compare_span(BinOp::Ge, lo)?;
            let b = compare_span(BinOp::Le, hi)?;
            if a.lo > b.hi {
                return None;
            }
            (p.0, p.1, vec![Span { lo: a.lo, hi: b.hi }], false, 3, false)
        }
        Expr::In {
            expr,
            list,
            negated: false,
        } => {
            let p = doc_path(expr, slot)?;
            let values: Option<Vec<&Value>> = list.iter().map(literal).collect();
            let values = values?;
            let ex = values.iter().all(|v| is_exact(v));
            let mut spans: Vec<Span> = values.iter().map(|v| Span::point(encode(v))).collect();
            spans.sort_by(|a, b| a.lo.cmp(&b.lo));
            spans.dedup();
            (p.0, p.1, spans, ex, 1, !ex)
        }
        Expr::Call(Func::Str(StrFn::StartsWith), args) => {
            if args.len() == 3 && literal(&args[2]) != Some(&Value::Bool(false)) {
                return None;
            }
            let p = doc_path(&args[0], slot)?;
            let Some(Value::String(prefix)) = literal(&args[1]) else {
                return None;
            };
            let (lo, hi) = string_prefix_bounds(prefix);
            (p.0, p.1, vec![Span { lo, hi }], false, 2, false)
        }
        Expr::Call(Func::Type(TypeFn::IsDefined), args) => {
            let p = doc_path(args.first()?, slot)?;
            let all = Span {
                lo: vec![0x00],
                hi: vec![0xFF],
            };
            (p.0, p.1, vec![all], false, 4, true)
        }
        Expr::Call(Func::Array(ArrayFn::ArrayContains), args) => {
            if args.len() == 3 && literal(&args[2]) != Some(&Value::Bool(false)) {
                return None;
            }
            let (mut p, _) = doc_path(&args[0], slot)?;
            let v = literal(&args[1])?;
            if !matches!(
                v,
                Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_)
            ) {
                return None;
            }
            p.push(Seg::Elements);
            (p, false, vec![Span::point(encode(v))], false, 0, false)
        }
        _ => return None,
    };
    if path.is_empty() {
        return None;
    }
    if !policy.indexes(&path, true) || (nodes && !policy.indexes(&path, false)) {
        if !unindexed.contains(&path) {
            unindexed.push(path);
        }
        return None;
    }
    Some(Probe {
        exact: exact && path_exact && !path.contains(&Seg::Elements),
        path,
        spans,
        filter: e.clone(),
        and: Vec::new(),
        rank,
    })
}

#[cfg(test)]
#[path = "access_tests.rs"]
mod tests;
