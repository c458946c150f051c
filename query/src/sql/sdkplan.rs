//! The query plan the official SDKs ask for (`x-ms-cosmos-is-query-plan-request`).
//!
//! It tells the SDK how to merge per-partition results itself: the ORDER BY directions and
//! expressions, TOP/OFFSET/LIMIT, DISTINCT, the aggregates, and a rewritten query whose rows
//! carry what the merge needs (`orderByItems` + `payload`, `[{"item": AGG(...)}]`,
//! `groupByItems` + `payload`). strata executes those rewritten forms like any other query.

use super::ast::*;
use super::functions::SearchFn;
use super::hybrid;
use super::PreparedQuery;
use crate::pk::EpkRange;
use serde_json::{json, Value};

const FILTER: &str = "{documentdb-formattableorderbyquery-filter}";

pub(super) fn alias(q: &Query) -> String {
    q.from
        .as_ref()
        .and_then(|f| f.first.alias.clone())
        .unwrap_or_else(|| "root".into())
}

pub(super) fn from_and_where(q: &Query, order_filter: bool) -> String {
    let mut s = String::new();
    if let Some(from) = &q.from {
        s.push_str(&format!("\nFROM {}", from.first));
        for j in &from.joins {
            s.push_str(&format!(" JOIN {j}"));
        }
    }
    match (&q.where_, order_filter) {
        (Some(w), true) => s.push_str(&format!("\nWHERE ({w}) AND ({FILTER})")),
        (None, true) => s.push_str(&format!("\nWHERE ({FILTER})")),
        (Some(w), false) => s.push_str(&format!("\nWHERE {w}")),
        (None, false) => {}
    }
    s
}

/// An aggregate as the SDK merges it (AVG travels as sum and count).
fn agg_item(e: &Expr) -> String {
    match e {
        Expr::Agg {
            func: AggFunc::Avg,
            arg,
            ..
        } => format!("{{\"sum\": SUM({arg}), \"count\": COUNT({arg})}}"),
        other => other.to_string(),
    }
}

fn collect_aggs(e: &Expr, out: &mut Vec<String>) {
    e.walk(&mut |x| {
        if let Expr::Agg { func, .. } = x {
            out.push(func.plan_name().to_string());
        }
    });
}

/// Builds the `partitionedQueryExecutionInfo` for a prepared query.
pub fn query_plan(p: &PreparedQuery, ranges: &[EpkRange]) -> Value {
    let query_ranges: Vec<Value> = ranges
        .iter()
        .map(|r| json!({"min": r.min, "max": r.max, "isMinInclusive": true, "isMaxInclusive": false}))
        .collect();
    if let Some(plan) = hybrid_plan(p, Value::from(query_ranges.clone())) {
        return plan;
    }
    let q = &p.parsed;
    let a = alias(q);
    let has_value = matches!(q.select.projection, Projection::Value(_));
    let payload = payload(q, &a);
    let mut aggregates = Vec::new();
    match &q.select.projection {
        Projection::Value(e) => collect_aggs(e, &mut aggregates),
        Projection::List(items) => items
            .iter()
            .for_each(|i| collect_aggs(&i.expr, &mut aggregates)),
        Projection::Star => {}
    }
    let (mut order_dirs, mut order_exprs) = (Vec::new(), Vec::new());
    // An aggregate over the whole result is one row: its ORDER BY orders nothing, and a plan
    // that named it would have the SDK merge order-by rows the aggregate query never yields.
    let one_row = !aggregates.is_empty() && q.group_by.is_empty();
    if let (Some(OrderBy::Items(items)), false) = (&q.order_by, one_row) {
        for it in items {
            order_dirs.push(if it.descending {
                "Descending"
            } else {
                "Ascending"
            });
            order_exprs.push(it.expr.to_string());
        }
    }
    let top = q.select.top.as_ref().map(|_| p.limit.unwrap_or(0));
    let limit_clause = match (&q.offset, &q.limit) {
        (Some(_), Some(_)) => Some(p.offset + p.limit.unwrap_or(0)),
        _ => None,
    };
    // Duplicates removed on the client shrink what a partition's first rows yield, so under
    // DISTINCT no TOP is pushed down (the client applies TOP and OFFSET/LIMIT after it).
    let top_prefix = match (top, limit_clause) {
        _ if q.select.distinct => String::new(),
        (Some(t), _) => format!("TOP {t} "),
        (None, Some(n)) => format!("TOP {n} "),
        _ => String::new(),
    };
    let distinct = if q.select.distinct { "DISTINCT " } else { "" };
    // ORDER BY VectorDistance: the SDKs drain every partition's top rows and keep the best
    // (non-streaming), so its rewritten query has no continuation filter to format.
    let non_streaming = matches!(&q.order_by, Some(OrderBy::Items(items))
        if items.iter().any(|i| i.expr.is_vector_distance()));
    let aggregate_query = !aggregates.is_empty() || !q.group_by.is_empty();
    let mut group_aliases = Vec::new();
    let mut alias_to_agg = serde_json::Map::new();
    let rewritten = if aggregate_query {
        grouped_query(q, &a, has_value, &mut group_aliases, &mut alias_to_agg)
    } else if !order_exprs.is_empty() {
        ordered_query(
            q,
            &a,
            &payload,
            &order_exprs,
            distinct,
            &top_prefix,
            non_streaming,
        )
    } else {
        plain_query(q, distinct, &top_prefix)
    };
    let distinct_type = if !q.select.distinct {
        "None"
    } else if order_exprs.is_empty() {
        "Unordered"
    } else {
        "Ordered"
    };
    let group_exprs: Vec<String> = q.group_by.iter().map(|g| g.to_string()).collect();
    json!({
        "partitionedQueryExecutionInfoVersion": 2,
        "queryInfo": {
            "distinctType": distinct_type,
            "top": top,
            "offset": q.offset.as_ref().map(|_| p.offset),
            "limit": q.limit.as_ref().and(p.limit),
            "orderBy": order_dirs,
            "orderByExpressions": order_exprs,
            "groupByExpressions": group_exprs,
            "groupByAliases": group_aliases,
            "aggregates": if q.group_by.is_empty() { aggregates } else { Vec::new() },
            "groupByAliasToAggregateType": alias_to_agg,
            "rewrittenQuery": rewritten,
            "hasSelectValue": has_value,
            "dCountInfo": null,
            "hasNonStreamingOrderBy": non_streaming,
        },
        "queryRanges": query_ranges,
    })
}

/// What a row of the query carries: the document (`*`), the VALUE expression, or an object
/// of the listed items by their names.
pub(super) fn payload(q: &Query, a: &str) -> String {
    match &q.select.projection {
        Projection::Star => a.to_string(),
        Projection::Value(e) => e.to_string(),
        Projection::List(items) => {
            let names = super::eval::item_names(items);
            let fields: Vec<String> = items
                .iter()
                .zip(&names)
                .map(|(it, n)| {
                    format!(
                        "{}: {}",
                        serde_json::to_string(n).unwrap_or_default(),
                        it.expr
                    )
                })
                .collect();
            format!("{{{}}}", fields.join(", "))
        }
    }
}

/// The rewritten query of an aggregate or GROUP BY: each partition's partial aggregates
/// (`{"item": ...}`) under the group keys, for the SDK to combine; notes the groups' aliases
/// and which aggregate each one is.
fn grouped_query(
    q: &Query,
    a: &str,
    has_value: bool,
    group_aliases: &mut Vec<String>,
    alias_to_agg: &mut serde_json::Map<String, Value>,
) -> String {
    if q.group_by.is_empty() && has_value {
        let Projection::Value(e) = &q.select.projection else {
            unreachable!("has_value")
        };
        format!(
            "SELECT VALUE [{{\"item\": {}}}]{}",
            agg_item(e),
            from_and_where(q, false)
        )
    } else {
        let keys: Vec<String> = q
            .group_by
            .iter()
            .map(|g| format!("{{\"item\": {g}}}"))
            .collect();
        let body = match &q.select.projection {
            Projection::List(items) => {
                let names = super::eval::item_names(items);
                let fields: Vec<String> = items
                    .iter()
                    .zip(&names)
                    .map(|(it, n)| {
                        let v = if it.expr.contains_aggregate() {
                            let mut kinds = Vec::new();
                            collect_aggs(&it.expr, &mut kinds);
                            alias_to_agg.insert(n.clone(), json!(kinds.first()));
                            format!("{{\"item\": {}}}", agg_item(&it.expr))
                        } else {
                            alias_to_agg.insert(n.clone(), Value::Null);
                            it.expr.to_string()
                        };
                        group_aliases.push(n.clone());
                        format!("{}: {v}", serde_json::to_string(n).unwrap_or_default())
                    })
                    .collect();
                format!("{{{}}}", fields.join(", "))
            }
            Projection::Value(e) => {
                if e.contains_aggregate() {
                    format!("{{\"item\": {}}}", agg_item(e))
                } else {
                    e.to_string()
                }
            }
            Projection::Star => a.to_string(),
        };
        let mut s = format!(
            "SELECT [{}] AS groupByItems, {body} AS payload{}",
            keys.join(", "),
            from_and_where(q, false)
        );
        if !q.group_by.is_empty() {
            let g: Vec<String> = q.group_by.iter().map(|g| g.to_string()).collect();
            s.push_str(&format!("\nGROUP BY {}", g.join(", ")));
        }
        s
    }
}

/// The rewritten query of an ORDER BY: each row with its sort keys (`orderByItems`) and, unless
/// DISTINCT, the document's `_rid` for ties, for the SDK's k-way merge.
fn ordered_query(
    q: &Query,
    a: &str,
    payload: &str,
    order_exprs: &[String],
    distinct: &str,
    top_prefix: &str,
    non_streaming: bool,
) -> String {
    let items: Vec<String> = order_exprs
        .iter()
        .map(|e| format!("{{\"item\": {e}}}"))
        .collect();
    let order: Vec<String> = match &q.order_by {
        Some(OrderBy::Items(items)) => items
            .iter()
            .map(|i| match (i.expr.is_vector_distance(), i.descending) {
                // Its direction follows its distance function and may not be written.
                (true, _) => i.expr.to_string(),
                (false, true) => format!("{} DESC", i.expr),
                (false, false) => format!("{} ASC", i.expr),
            })
            .collect(),
        _ => Vec::new(),
    };
    // A document's _rid would make every row distinct: DISTINCT rows carry none.
    let rid = if q.select.distinct {
        String::new()
    } else {
        format!("{a}._rid, ")
    };
    format!(
        "SELECT {distinct}{top_prefix}{rid}[{}] AS orderByItems, {payload} AS payload{}\nORDER BY {}",
        items.join(", "),
        from_and_where(q, !non_streaming),
        order.join(", ")
    )
}

/// The rewritten query of anything else: the query itself, TOP pushed down.
fn plain_query(q: &Query, distinct: &str, top_prefix: &str) -> String {
    let sel = match &q.select.projection {
        Projection::Star => "*".to_string(),
        Projection::Value(e) => format!("VALUE {e}"),
        Projection::List(_) => {
            let Projection::List(items) = &q.select.projection else {
                unreachable!()
            };
            items
                .iter()
                .map(|it| match &it.alias {
                    Some(al) => format!("{} AS {al}", it.expr),
                    None => it.expr.to_string(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    format!(
        "SELECT {distinct}{top_prefix}{sel}{}",
        from_and_where(q, false)
    )
}

const DOCS: &str = "{documentdb-formattablehybridsearchquery-totaldocumentcount}";
fn words_placeholder(i: usize) -> String {
    format!("{{documentdb-formattablehybridsearchquery-totalwordcount-{i}}}")
}
fn hits_placeholder(i: usize) -> String {
    format!("{{documentdb-formattablehybridsearchquery-hitcountsarray-{i}}}")
}

/// The gateway's query plan for a ranked query: `hybridSearchQueryInfo` with the statistics
/// query, one component query per scoring function (rows carrying `_rid`, the component's
/// `orderByItems` and a payload of the projection and every component's score), the weights,
/// `skip` and `take`. Statistics placeholders are numbered by full-text score, in order (the
/// numbering every SDK reads the same way). `None` for queries that do not rank.
pub fn hybrid_plan(p: &PreparedQuery, query_ranges: Value) -> Option<Value> {
    let rank = hybrid::rank_of(&p.query)?;
    let q = &p.parsed;
    let alias = alias(q);
    let mut scores = Vec::new();
    let mut text = 0;
    for e in &rank.components {
        if hybrid::is_call(e, SearchFn::FullTextScore) {
            scores.push(hybrid::scored_call(
                e,
                DOCS,
                &words_placeholder(text),
                &hits_placeholder(text),
            ));
            text += 1;
        } else {
            scores.push(e.to_string());
        }
    }
    let skip = p.offset;
    let take = p.limit;
    let k = take.map(|t| t + skip);
    let top = k.map(|k| format!("TOP {k} ")).unwrap_or_default();
    let payload = payload(q, &alias);
    let filter = from_and_where(q, true);
    let descending = rank.descending();
    let components: Vec<Value> = scores
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let vector = rank.components[i].is_vector_distance();
            // VectorDistance takes no written direction (its function decides it).
            let order = match (vector, descending[i]) {
                (true, _) => s.clone(),
                (false, true) => format!("{s} DESC"),
                (false, false) => format!("{s} ASC"),
            };
            let rewritten = format!(
                "SELECT {top}{alias}._rid, [{{\"item\": {s}}}] AS orderByItems, {{\"payload\": {payload}, \"componentScores\": [{}]}} AS payload{filter}\nORDER BY {order}",
                scores.join(", ")
            );
            json!({
                "distinctType": "None",
                "top": k,
                "offset": null,
                "limit": null,
                "orderBy": [if descending[i] { "Descending" } else { "Ascending" }],
                "orderByExpressions": [s],
                "groupByExpressions": [],
                "groupByAliases": [],
                "aggregates": [],
                "groupByAliasToAggregateType": {},
                "rewrittenQuery": rewritten,
                "hasSelectValue": false,
                "dCountInfo": null,
                "hasNonStreamingOrderBy": true,
            })
        })
        .collect();
    let statistics = hybrid::statistics_query(&p.query);
    let weights: Option<Vec<f64>> = rank.fused.then(|| rank.weights.clone());
    Some(json!({
        "partitionedQueryExecutionInfoVersion": 2,
        "queryInfo": {
            "distinctType": "None",
            "top": null,
            "offset": null,
            "limit": null,
            "orderBy": [],
            "orderByExpressions": [],
            "groupByExpressions": [],
            "groupByAliases": [],
            "aggregates": [],
            "groupByAliasToAggregateType": {},
            "rewrittenQuery": "",
            "hasSelectValue": false,
            "dCountInfo": null,
            "hasNonStreamingOrderBy": false,
        },
        "hybridSearchQueryInfo": {
            "globalStatisticsQuery": statistics.clone().unwrap_or_default(),
            "componentQueryInfos": components,
            "componentWithoutPayloadQueryInfos": [],
            "projectionQueryInfo": null,
            "componentWeights": weights,
            "skip": (skip > 0).then_some(skip),
            "take": take,
            "requiresGlobalStatistics": statistics.is_some(),
        },
        "queryRanges": query_ranges,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::{prepare, Ctx};

    #[test]
    fn order_by_rewrite_runs() {
        let p = prepare("SELECT * FROM c WHERE c.n > 0 ORDER BY c.n DESC", &[], None).unwrap();
        let plan = query_plan(&p, &[EpkRange::full()]);
        let rq = plan["queryInfo"]["rewrittenQuery"].as_str().unwrap();
        assert!(rq.contains("orderByItems") && rq.contains(FILTER), "{rq}");
        assert_eq!(plan["queryInfo"]["orderBy"], json!(["Descending"]));
        let runnable = rq.replace(FILTER, "true");
        let docs = vec![
            json!({"id": "a", "n": 1, "_rid": "r1"}),
            json!({"id": "b", "n": 2, "_rid": "r2"}),
        ];
        let rows = prepare(&runnable, &[], None)
            .unwrap()
            .run_over(&docs, &Ctx::new(0))
            .unwrap();
        assert_eq!(rows[0]["orderByItems"], json!([{"item": 2}]));
        assert_eq!(rows[0]["payload"]["id"], json!("b"));
    }

    #[test]
    fn value_aggregate_rewrite_runs() {
        let p = prepare("SELECT VALUE COUNT(1) FROM c", &[], None).unwrap();
        let plan = query_plan(&p, &[EpkRange::full()]);
        assert_eq!(plan["queryInfo"]["aggregates"], json!(["Count"]));
        assert_eq!(plan["queryInfo"]["hasSelectValue"], json!(true));
        let rq = plan["queryInfo"]["rewrittenQuery"].as_str().unwrap();
        assert_eq!(rq, "SELECT VALUE [{\"item\": COUNT(1)}]\nFROM c");
        let rows = prepare(rq, &[], None)
            .unwrap()
            .run_over(&[json!({}), json!({})], &Ctx::new(0))
            .unwrap();
        assert_eq!(rows, vec![json!([{"item": 2}])]);
        let avg = prepare("SELECT VALUE AVG(c.n) FROM c", &[], None).unwrap();
        let rq = query_plan(&avg, &[])["queryInfo"]["rewrittenQuery"]
            .as_str()
            .unwrap()
            .to_string();
        let rows = prepare(&rq, &[], None)
            .unwrap()
            .run_over(&[json!({"n": 2}), json!({"n": 4})], &Ctx::new(0))
            .unwrap();
        assert_eq!(rows, vec![json!([{"item": {"sum": 6, "count": 2}}])]);
        // ORDER BY over a one-row aggregate orders nothing: the plan is the aggregate's.
        let ordered = prepare("SELECT VALUE AVG(c.n) FROM c ORDER BY c.n", &[], None).unwrap();
        let plan = query_plan(&ordered, &[]);
        assert_eq!(plan["queryInfo"]["orderBy"], json!([]));
        assert_eq!(plan["queryInfo"]["aggregates"], json!(["Average"]));
    }

    #[test]
    fn group_by_rewrite_runs() {
        let p = prepare("SELECT c.g, COUNT(1) AS n FROM c GROUP BY c.g", &[], None).unwrap();
        let plan = query_plan(&p, &[]);
        let rq = plan["queryInfo"]["rewrittenQuery"].as_str().unwrap();
        let rows = prepare(rq, &[], None)
            .unwrap()
            .run_over(&[json!({"g": "x"}), json!({"g": "x"})], &Ctx::new(0))
            .unwrap();
        assert_eq!(
            rows,
            vec![json!({"groupByItems": [{"item": "x"}], "payload": {"g": "x", "n": {"item": 2}}})]
        );
    }
}
