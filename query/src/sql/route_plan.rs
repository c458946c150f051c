//! The plan of one query request: which physical partitions it visits and why, and the
//! operators that run over them. A plain value, decided once by [`plan`] from the prepared
//! query, the request's scope and the partition map, so routing can be printed and tested
//! without HTTP (DataFusion's `display_indent` is the model for [`RoutePlan`]'s `Display`).

use super::ast::{OrderBy, Projection};
use super::routing::{Mode, Routing};
use super::PreparedQuery;
use crate::pk::EpkRange;
use std::fmt;

/// How a query reaches its partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// A full partition key: one logical partition.
    Single,
    /// A key prefix, a set of keys, or an explicit range: only overlapping physical partitions.
    Targeted,
    /// Every physical partition.
    FanOut,
}

impl Route {
    pub fn as_str(self) -> &'static str {
        match self {
            Route::Single => "single",
            Route::Targeted => "targeted",
            Route::FanOut => "fanout",
        }
    }
}

/// The part of the key space a request addresses by its headers (partition key, range id or
/// EPK range), before the query's own WHERE narrows it.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestScope {
    /// `None`: the request addresses nothing (an empty intersection).
    pub range: Option<EpkRange>,
    /// Set when a full key was given: only items with exactly this EPK match (a read feed
    /// filters by it; a hierarchical key's EPK is also a prefix of longer ones).
    pub exact_epk: Option<String>,
    pub route: Route,
    /// What in the request set it, for the printed plan (e.g. "partition key header").
    pub source: &'static str,
}

impl RequestScope {
    /// The whole container, as a request without a partition key, range id or EPK range
    /// addresses it.
    pub fn whole() -> RequestScope {
        RequestScope {
            range: Some(EpkRange::full()),
            exact_epk: None,
            route: Route::FanOut,
            source: "no partition key in the request",
        }
    }
}

impl RequestScope {
    /// What a partition key header addresses: one logical partition (a full key) or the
    /// ranges of a hierarchical key's prefix.
    pub fn of_key(
        def: &crate::pk::PartitionKeyDefinition,
        pk: &crate::pk::PartitionKey,
    ) -> Result<RequestScope, crate::pk::PkError> {
        let r = crate::pk::epk::epk_range(def, pk)?;
        Ok(if pk.len() == def.levels() {
            RequestScope {
                exact_epk: Some(r.min.clone()),
                range: Some(r),
                route: Route::Single,
                source: "full partition key header",
            }
        } else {
            RequestScope {
                range: Some(r),
                exact_epk: None,
                route: Route::Targeted,
                source: "partition key prefix header",
            }
        })
    }
}

/// One physical partition of the container: its id and EPK range.
#[derive(Debug, Clone, PartialEq)]
pub struct Partition {
    pub id: u32,
    pub range: EpkRange,
}

/// Where a request goes and what runs there. What it prints beyond its data — why it goes
/// there, the operators above the scans — is formatted only when it is printed
/// ([`RoutePlan::display`]): every query is planned, few plans are read.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutePlan {
    pub route: Route,
    /// Why this route: the request scope and what the WHERE clause pins.
    pub reason: Reason,
    /// The EPK ranges to read, sorted and merged.
    pub ranges: Vec<EpkRange>,
    /// The physical partitions visited, each with the part of its range that is read.
    pub partitions: Vec<Partition>,
    /// How partial results combine.
    pub mode: Mode,
}

/// Why a plan takes its route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The request's scope (named by its source) addresses no partition.
    Nothing(&'static str),
    /// No partition key in the request or the WHERE clause.
    NoKey,
    /// The request's scope alone, named by its source.
    Scope(&'static str),
    /// The WHERE clause pins keys (within the request's scope, named by its source, when the
    /// request names one).
    Where(Option<&'static str>),
}

/// Decides the route of `p` under `scope` over the container's `partitions` (in EPK order).
pub fn plan(p: &PreparedQuery, scope: &RequestScope, partitions: &[Partition]) -> RoutePlan {
    let (ranges, route, reason) = match &scope.range {
        None => (Vec::new(), scope.route, Reason::Nothing(scope.source)),
        Some(addressed) => match &p.routing {
            Routing::FanOut => (
                vec![addressed.clone()],
                scope.route,
                match scope.route {
                    Route::FanOut => Reason::NoKey,
                    _ => Reason::Scope(scope.source),
                },
            ),
            Routing::Keys { ranges, .. } => {
                let inside: Vec<EpkRange> = ranges
                    .iter()
                    .filter_map(|r| r.intersect(addressed))
                    .collect();
                let route = if scope.route == Route::Single || p.routing.is_single() {
                    Route::Single
                } else {
                    Route::Targeted
                };
                let within = (scope.route != Route::FanOut).then_some(scope.source);
                (inside, route, Reason::Where(within))
            }
        },
    };
    let ranges = merge_ranges(ranges);
    let mut visited = Vec::new();
    for r in &ranges {
        for part in partitions {
            if let Some(x) = part.range.intersect(r) {
                visited.push(Partition {
                    id: part.id,
                    range: x,
                });
            }
        }
    }
    RoutePlan {
        route,
        reason,
        ranges,
        partitions: visited,
        mode: p.mode,
    }
}

impl RoutePlan {
    /// Ids of the physical partitions visited, each once, in EPK order.
    pub fn partition_ids(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = Vec::new();
        for part in &self.partitions {
            if !ids.contains(&part.id) {
                ids.push(part.id);
            }
        }
        ids
    }
}

/// One operator above the scans, as the plan runs and prints it (expressions in their SQL
/// text).
#[derive(Debug, Clone, PartialEq)]
pub enum Operator {
    /// OFFSET/LIMIT or TOP over the merged rows: rows skipped, rows kept (`None`: all).
    Limit {
        offset: u64,
        limit: Option<u64>,
    },
    Distinct,
    /// How the partitions' partial results combine.
    Merge(Merge),
    /// The SELECT list (`*`, `VALUE e`, or `e AS a, …`).
    Project(String),
    /// The WHERE condition.
    Filter(String),
    /// One JOIN of the FROM clause.
    Join(String),
}

/// How partial results from several partitions become one answer (the query's [`Mode`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Merge {
    /// ORDER BY: a k-way merge of sorted partition streams by these keys (`e DESC` when
    /// descending).
    KWay(Vec<String>),
    /// GROUP BY: partial groups combined by these keys.
    Groups(Vec<String>),
    /// Aggregates without GROUP BY: partial aggregates combined.
    Aggregates,
    /// No FROM: the SELECT is evaluated once.
    Constant,
    /// DISTINCT and the like: complete results, then paged.
    Complete,
    /// Plain queries: partitions concatenated in EPK order, streaming.
    Concatenate,
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operator::Limit { offset, limit } => match limit {
                Some(l) => write!(f, "Limit: offset={offset} limit={l}"),
                None => write!(f, "Limit: offset={offset} limit=none"),
            },
            Operator::Distinct => f.write_str("Distinct"),
            Operator::Merge(m) => write!(f, "Merge: {m}"),
            Operator::Project(p) => write!(f, "Project: {p}"),
            Operator::Filter(w) => write!(f, "Filter: {w}"),
            Operator::Join(j) => write!(f, "Join: {j}"),
        }
    }
}

impl fmt::Display for Merge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Merge::KWay(keys) => write!(f, "k-way by {}", keys.join(", ")),
            Merge::Groups(keys) => write!(f, "combine partial groups by {}", keys.join(", ")),
            Merge::Aggregates => f.write_str("combine partial aggregates"),
            Merge::Constant => f.write_str("no FROM, evaluated once"),
            Merge::Complete => f.write_str("complete results, then page"),
            Merge::Concatenate => f.write_str("concatenate in EPK order (streaming)"),
        }
    }
}

/// The operators above the scans of `p`'s plan, outermost first.
fn operators(p: &PreparedQuery) -> Vec<Operator> {
    let q = &p.parsed;
    let mut ops = Vec::new();
    if p.offset > 0 || p.limit.is_some() {
        ops.push(Operator::Limit {
            offset: p.offset,
            limit: p.limit,
        });
    }
    if q.select.distinct {
        ops.push(Operator::Distinct);
    }
    ops.push(Operator::Merge(match (p.mode, &q.order_by) {
        (Mode::Ordered, Some(OrderBy::Items(items))) => Merge::KWay(
            items
                .iter()
                .map(|i| format!("{}{}", i.expr, if i.descending { " DESC" } else { "" }))
                .collect(),
        ),
        (Mode::Aggregate, _) if !q.group_by.is_empty() => {
            Merge::Groups(q.group_by.iter().map(|e| e.to_string()).collect())
        }
        (Mode::Aggregate, _) => Merge::Aggregates,
        (Mode::NoFrom, _) => Merge::Constant,
        (Mode::Materialized, _) => Merge::Complete,
        _ => Merge::Concatenate,
    }));
    ops.push(Operator::Project(match &q.select.projection {
        Projection::Star => "*".to_string(),
        Projection::Value(e) => format!("VALUE {e}"),
        Projection::List(items) => items
            .iter()
            .map(|i| match &i.alias {
                Some(a) => format!("{} AS {a}", i.expr),
                None => i.expr.to_string(),
            })
            .collect::<Vec<_>>()
            .join(", "),
    }));
    if let Some(w) = &q.where_ {
        ops.push(Operator::Filter(w.to_string()));
    }
    if let Some(from) = &q.from {
        for j in &from.joins {
            ops.push(Operator::Join(j.to_string()));
        }
    }
    ops
}

impl RoutePlan {
    /// The plan as it prints (`x-strata-query-plan`), for the query `p` it was made from.
    pub fn display<'a>(&'a self, p: &'a PreparedQuery) -> impl fmt::Display + 'a {
        Shown { plan: self, p }
    }
}

/// A [`RoutePlan`] with the query it routes, printable (see [`RoutePlan::display`]).
struct Shown<'a> {
    plan: &'a RoutePlan,
    p: &'a PreparedQuery,
}

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (plan, p) = (self.plan, self.p);
        let ids: Vec<String> = plan.partition_ids().iter().map(u32::to_string).collect();
        write!(f, "Route: {} (", plan.route.as_str())?;
        match plan.reason {
            Reason::Nothing(source) => write!(f, "{source}: addresses no partition")?,
            Reason::NoKey => f.write_str("no partition key in the request or the WHERE clause")?,
            Reason::Scope(source) => f.write_str(source)?,
            Reason::Where(Some(source)) => write!(f, "{source}; WHERE pins {}", p.routing)?,
            Reason::Where(None) => write!(f, "WHERE pins {}", p.routing)?,
        }
        writeln!(f, "); partitions [{}]", ids.join(", "))?;
        let mut depth = 1;
        for op in &operators(p) {
            writeln!(f, "{:indent$}{op}", "", indent = depth * 2)?;
            depth += 1;
        }
        if plan.mode == Mode::NoFrom {
            return Ok(());
        }
        if plan.partitions.is_empty() {
            return writeln!(
                f,
                "{:indent$}Empty: no partition to scan",
                "",
                indent = depth * 2
            );
        }
        for part in &plan.partitions {
            writeln!(
                f,
                "{:indent$}Scan: partition {} [\"{}\", \"{}\")",
                "",
                part.id,
                part.range.min,
                part.range.max,
                indent = depth * 2
            )?;
        }
        Ok(())
    }
}

/// Sorts ranges and joins overlapping or touching ones.
pub fn merge_ranges(mut v: Vec<EpkRange>) -> Vec<EpkRange> {
    v.retain(|r| !r.is_empty());
    v.sort();
    let mut out: Vec<EpkRange> = Vec::with_capacity(v.len());
    for r in v {
        if let Some(last) = out.last_mut() {
            if r.min <= last.max {
                if r.max > last.max {
                    last.max = r.max;
                }
                continue;
            }
        }
        out.push(r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pk::epk::{epk_range, even_boundaries};
    use crate::pk::{PartitionKey, PartitionKeyDefinition};
    use crate::sql::prepare;

    fn def() -> PartitionKeyDefinition {
        PartitionKeyDefinition::multi_hash(&["/TenantId", "/UserId", "/SessionId"]).unwrap()
    }

    /// Eight partitions with even EPK boundaries, ids 0..8.
    fn partitions(def: &PartitionKeyDefinition) -> Vec<Partition> {
        let bounds = even_boundaries(def, 8);
        let mut lo = String::new();
        let mut out = Vec::new();
        for (id, hi) in bounds.into_iter().chain(["FF".to_string()]).enumerate() {
            out.push(Partition {
                id: id as u32,
                range: EpkRange::new(lo.clone(), hi.clone()),
            });
            lo = hi;
        }
        out
    }

    fn whole() -> RequestScope {
        RequestScope::whole()
    }

    fn plan_of(sql: &str, scope: &RequestScope) -> RoutePlan {
        let d = def();
        let p = prepare(sql, &[], Some(&d)).unwrap();
        plan(&p, scope, &partitions(&d))
    }

    /// The plan of `sql` as it prints.
    fn printed(sql: &str, scope: &RequestScope) -> String {
        let d = def();
        let p = prepare(sql, &[], Some(&d)).unwrap();
        let routed = plan(&p, scope, &partitions(&d));
        let text = routed.display(&p).to_string();
        text
    }

    #[test]
    fn routes_single_targeted_and_fan_out() {
        let single = plan_of(
            "SELECT * FROM c WHERE c.TenantId = 't' AND c.UserId = 'u' AND c.SessionId = 's'",
            &whole(),
        );
        assert_eq!(single.route, Route::Single);
        assert_eq!(single.partition_ids().len(), 1);
        let prefix = plan_of("SELECT * FROM c WHERE c.TenantId = 't'", &whole());
        assert_eq!(prefix.route, Route::Targeted);
        assert!(prefix.partition_ids().len() < 8);
        let all = plan_of("SELECT * FROM c WHERE c.UserId = 'u'", &whole());
        assert_eq!(all.route, Route::FanOut);
        assert_eq!(all.partition_ids(), (0..8).collect::<Vec<u32>>());
    }

    #[test]
    fn the_request_scope_narrows_and_is_named() {
        let d = def();
        let prefix = PartitionKey::from_header("[\"t\"]").unwrap();
        let scope = RequestScope {
            range: Some(epk_range(&d, &prefix).unwrap()),
            exact_epk: None,
            route: Route::Targeted,
            source: "partition key header (prefix)",
        };
        let p = plan_of(
            "SELECT VALUE c.id FROM c ORDER BY c.ts DESC OFFSET 1 LIMIT 2",
            &scope,
        );
        assert_eq!(p.route, Route::Targeted);
        let text = printed(
            "SELECT VALUE c.id FROM c ORDER BY c.ts DESC OFFSET 1 LIMIT 2",
            &scope,
        );
        assert!(
            text.starts_with("Route: targeted (partition key header (prefix)); partitions ["),
            "{text}"
        );
        for op in [
            "  Limit: offset=1 limit=2",
            "    Merge: k-way by c.ts DESC",
            "      Project: VALUE c.id",
            "        Scan: partition ",
        ] {
            assert!(text.contains(op), "missing {op:?} in\n{text}");
        }
        // A range outside the WHERE's keys: nothing to scan.
        let other = plan_of("SELECT * FROM c WHERE c.TenantId = 'z'", &scope);
        assert!(other.partitions.is_empty());
        let other = printed("SELECT * FROM c WHERE c.TenantId = 'z'", &scope);
        assert!(other.contains("Empty: no partition to scan"));
        assert!(
            other.starts_with("Route: targeted (partition key header (prefix); WHERE pins "),
            "{other}"
        );
    }

    #[test]
    fn prints_an_indented_operator_tree() {
        let text = printed(
            "SELECT c.TenantId, COUNT(1) AS n FROM c WHERE c.n > 1 GROUP BY c.TenantId",
            &whole(),
        );
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0]
                .starts_with("Route: fanout (no partition key in the request or the WHERE clause)"),
            "{text}"
        );
        assert_eq!(lines[1], "  Merge: combine partial groups by c.TenantId");
        assert_eq!(lines[2], "    Project: c.TenantId, COUNT(1) AS n");
        assert_eq!(lines[3], "      Filter: (c.n > 1)");
        assert_eq!(lines.len(), 4 + 8, "{text}");
    }

    #[test]
    fn merges_touching_ranges() {
        let m = merge_ranges(vec![
            EpkRange::new("20", "30"),
            EpkRange::new("00", "10"),
            EpkRange::new("10", "15"),
            EpkRange::new("25", "40"),
        ]);
        assert_eq!(
            m,
            vec![EpkRange::new("00", "15"), EpkRange::new("20", "40")]
        );
    }
}
