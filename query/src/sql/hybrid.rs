//! `ORDER BY RANK`: full-text ranking and hybrid search as the service defines them.
//!
//! A ranked query orders by one scoring function (`FullTextScore`, `VectorDistance`) or fuses
//! several with `RRF(score, score, ..., [weights])`. BM25 needs statistics over the whole scope
//! searched (document count, total words, documents per term), so a ranked query runs in
//! three steps, on the server and in the SDKs alike:
//!
//! 1. the **statistics query** ([`statistics_query`]) counts them, per partition, and the
//!    counts add up;
//! 2. each `FullTextScore` becomes `_FullTextScore(path, [terms], documents, words, [hits])`
//!    under those counts ([`with_statistics`]) and each component orders its rows;
//! 3. **fusion** ([`fuse`]): each component's rows ranked (ties share a rank), the reciprocal
//!    ranks summed with the weights, `Σ wᵢ / (60 + rankᵢ)`, highest first.
//!
//! `sdkplan::hybrid_plan` describes the same steps to an SDK (`hybridSearchQueryInfo`): its
//! global statistics query, one component query per scoring function with placeholders for
//! the counts, and the weights, as the gateway's query plan does.

use super::ast::*;
use super::error::QueryError;
use super::fulltext::Statistics;
use super::functions::{Func, SearchFn};
use serde_json::Value;
use std::cmp::Ordering;

type R<T> = Result<T, QueryError>;

/// RRF's rank offset (the `k` of reciprocal rank fusion, 60 as in the service and the SDKs).
pub const RRF_K: f64 = 60.0;

const ONLY_IN_RANK: &str =
    "The FullTextScore function is only allowed in the ORDER BY RANK clause.";
const RANK_NEEDS_SCORES: &str =
    "The ORDER BY RANK clause must be followed by a VectorDistance and/or a FullTextScore function call.";

pub(super) fn is_call(e: &Expr, f: SearchFn) -> bool {
    matches!(e, Expr::Call(Func::Search(g), _) if *g == f)
}

/// The scoring functions of a ranked query and their weights.
#[derive(Debug, Clone, PartialEq)]
pub struct Rank<'q> {
    pub components: Vec<&'q Expr>,
    /// One per component (1 when RRF names none).
    pub weights: Vec<f64>,
    /// Whether RRF fuses the components (even one of them).
    pub fused: bool,
}

impl Rank<'_> {
    /// Whether a component's best rows have its highest values: full-text scores and
    /// similarities (cosine, dot product) rank descending, euclidean distances ascending; a
    /// negative weight reverses its component.
    pub fn descending(&self) -> Vec<bool> {
        self.components
            .iter()
            .zip(&self.weights)
            .map(|(e, w)| natural_descending(e) != (*w < 0.0))
            .collect()
    }
}

fn natural_descending(e: &Expr) -> bool {
    super::vector::distance_of(e).is_none_or(|f| f != "euclidean")
}

/// The ranking of a bound query with `ORDER BY RANK`, or `None` for other queries.
pub fn rank_of(q: &Query) -> Option<Rank<'_>> {
    let Some(OrderBy::Rank(e)) = &q.order_by else {
        return None;
    };
    let Expr::Call(Func::Search(SearchFn::Rrf), args) = e else {
        return Some(Rank {
            components: vec![e],
            weights: vec![1.0],
            fused: false,
        });
    };
    let (components, weights): (Vec<&Expr>, Vec<f64>) = match args.last() {
        Some(Expr::Lit(Value::Array(w))) => (
            args[..args.len() - 1].iter().collect(),
            w.iter().map(|x| x.as_f64().unwrap_or(f64::NAN)).collect(),
        ),
        Some(Expr::Array(w)) => (
            args[..args.len() - 1].iter().collect(),
            w.iter()
                .map(|x| match x {
                    Expr::Lit(v) => v.as_f64().unwrap_or(f64::NAN),
                    _ => f64::NAN,
                })
                .collect(),
        ),
        _ => (args.iter().collect(), vec![1.0; args.len()]),
    };
    Some(Rank {
        components,
        weights,
        fused: true,
    })
}

/// Checks a bound query's use of the scoring functions as the service does: `FullTextScore`
/// and `RRF` only in `ORDER BY RANK`, which takes only them (and `VectorDistance`), with one
/// weight per component.
pub fn check(q: &Query) -> R<()> {
    let mut misplaced = None;
    let mut too_many_terms = None;
    let mut look = |e: &Expr| {
        e.walk(&mut |x| {
            if let Expr::Call(Func::Search(f), args) = x {
                let n = search_terms(*f, args);
                if n > super::limits::MAX_SEARCH_TERMS {
                    too_many_terms.get_or_insert((Func::Search(*f).name(), n));
                }
            }
            if is_call(x, SearchFn::FullTextScore) {
                misplaced.get_or_insert(ONLY_IN_RANK);
            } else if is_call(x, SearchFn::Rrf) {
                misplaced
                    .get_or_insert("The RRF function is only allowed in the ORDER BY RANK clause.");
            }
        })
    };
    match &q.select.projection {
        Projection::Value(e) => look(e),
        Projection::List(items) => items.iter().for_each(|i| look(&i.expr)),
        Projection::Star => {}
    }
    if let Some(w) = &q.where_ {
        look(w);
    }
    q.group_by.iter().for_each(&mut look);
    if let Some(OrderBy::Items(items)) = &q.order_by {
        items.iter().for_each(|i| look(&i.expr));
    }
    if let Some(OrderBy::Rank(e)) = &q.order_by {
        e.walk(&mut |x| {
            if let Expr::Call(Func::Search(f), args) = x {
                let n = search_terms(*f, args);
                if n > super::limits::MAX_SEARCH_TERMS {
                    too_many_terms.get_or_insert((Func::Search(*f).name(), n));
                }
            }
        });
    }
    if let Some((f, n)) = too_many_terms {
        return Err(QueryError::semantic(format!(
            "The {f} function is given {n} search terms; at most {} are allowed in one call. Search for fewer terms, or split the search.",
            super::limits::MAX_SEARCH_TERMS
        )));
    }
    if let Some(m) = misplaced {
        return Err(QueryError::semantic(m));
    }
    let Some(rank) = rank_of(q) else {
        return Ok(());
    };
    let scoring = |e: &Expr| is_call(e, SearchFn::FullTextScore) || e.is_vector_distance();
    if !rank.components.iter().all(|e| scoring(e)) || (rank.fused && rank.components.len() < 2) {
        return Err(QueryError::semantic(RANK_NEEDS_SCORES));
    }
    if rank.components.len() > super::limits::MAX_RANK_COMPONENTS {
        return Err(QueryError::semantic(format!(
            "The RRF function fuses {} scoring functions; at most {} are allowed.",
            rank.components.len(),
            super::limits::MAX_RANK_COMPONENTS
        )));
    }
    if rank.weights.len() != rank.components.len() || rank.weights.iter().any(|w| w.is_nan()) {
        return Err(QueryError::semantic(format!(
            "The RRF function's weights must be an array of {} numbers, one per scoring function; it has {}.",
            rank.components.len(),
            rank.weights.len()
        )));
    }
    if !q.group_by.is_empty() || q.select.distinct {
        return Err(QueryError::semantic(
            "ORDER BY RANK cannot be combined with GROUP BY or DISTINCT.",
        ));
    }
    Ok(())
}

/// How many search terms a full-text call names (0 for other search functions): its
/// arguments after the path, an array counting its elements.
fn search_terms(f: SearchFn, args: &[Expr]) -> usize {
    if !matches!(
        f,
        SearchFn::FullTextContains
            | SearchFn::FullTextContainsAll
            | SearchFn::FullTextContainsAny
            | SearchFn::FullTextScore
    ) {
        return 0;
    }
    args.iter()
        .skip(1)
        .map(|a| match a {
            Expr::Lit(Value::Array(v)) => v.len(),
            Expr::Array(v) => v.len(),
            _ => 1,
        })
        .sum()
}

/// The search terms of a `FullTextScore` call (its arguments after the path, strings or
/// arrays of strings), flattened.
pub fn terms(args: &[Expr]) -> Vec<String> {
    fn add(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Array(a) => a.iter().for_each(|x| add(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for a in args.iter().skip(1) {
        match a {
            Expr::Lit(v) => add(v, &mut out),
            Expr::Array(items) => items.iter().for_each(|i| {
                if let Expr::Lit(v) = i {
                    add(v, &mut out)
                }
            }),
            _ => {}
        }
    }
    out
}

fn str_lit(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// The `FullTextScore` calls of a ranked (bound) query, in component order.
fn text_scores<'q>(rank: &Rank<'q>) -> Vec<&'q Expr> {
    rank.components
        .iter()
        .copied()
        .filter(|e| is_call(e, SearchFn::FullTextScore))
        .collect()
}

/// Whether the ranked query scores text, and so needs statistics first.
pub fn needs_statistics(q: &Query) -> bool {
    rank_of(q).is_some_and(|r| !text_scores(&r).is_empty())
}

/// The query that counts, over the partitions it runs on, what BM25 needs for each
/// `FullTextScore` of `q` (bound): `{documentCount, fullTextStatistics: [{totalWordCount,
/// hitCounts: [...]}]}`. Its per-partition answers add up (see [`add_statistics`]).
pub fn statistics_query(q: &Query) -> Option<String> {
    let rank = rank_of(q)?;
    let scores = text_scores(&rank);
    if scores.is_empty() {
        return None;
    }
    let alias = q
        .from
        .as_ref()
        .and_then(|f| f.first.alias.clone())
        .unwrap_or_else(|| "root".into());
    let mut parts = Vec::new();
    for e in scores {
        let Expr::Call(_, args) = e else { continue };
        let path = &args[0];
        let hits: Vec<String> = terms(args)
            .iter()
            .map(|t| format!("COUNTIF(FullTextContains({path}, {}))", str_lit(t)))
            .collect();
        parts.push(format!(
            "{{\"totalWordCount\": SUM(_FullTextWordCount({path})), \"hitCounts\": [{}]}}",
            hits.join(", ")
        ));
    }
    let from = q.from.as_ref().map(|f| f.first.to_string())?;
    let _ = alias;
    Some(format!(
        "SELECT COUNT(1) AS documentCount, [{}] AS fullTextStatistics FROM {from}",
        parts.join(", ")
    ))
}

/// Statistics of several partitions (answers of [`statistics_query`]) added up; one entry per
/// `FullTextScore`.
pub fn add_statistics(rows: &[Value]) -> Vec<Statistics> {
    let mut out: Vec<Statistics> = Vec::new();
    for r in rows {
        let docs = r.get("documentCount").and_then(Value::as_u64).unwrap_or(0);
        let Some(Value::Array(per)) = r.get("fullTextStatistics") else {
            continue;
        };
        for (i, s) in per.iter().enumerate() {
            if out.len() <= i {
                out.push(Statistics {
                    documents: 0,
                    total_words: 0,
                    hits: Vec::new(),
                });
            }
            let o = &mut out[i];
            o.total_words += s
                .get("totalWordCount")
                .and_then(Value::as_f64)
                .unwrap_or(0.0) as u64;
            if let Some(Value::Array(h)) = s.get("hitCounts") {
                o.hits.resize(o.hits.len().max(h.len()), 0);
                for (j, x) in h.iter().enumerate() {
                    o.hits[j] += x.as_f64().unwrap_or(0.0) as u64;
                }
            }
        }
        for o in out.iter_mut() {
            o.documents += docs;
        }
    }
    out
}

/// `_FullTextScore(path, [terms], documents, words, [hits])` for a `FullTextScore` call, with
/// the statistics given as text (numbers, or the SDK's placeholders).
pub(super) fn scored_call(e: &Expr, documents: &str, words: &str, hits: &str) -> String {
    let Expr::Call(_, args) = e else {
        return e.to_string();
    };
    let t: Vec<String> = terms(args).iter().map(|t| str_lit(t)).collect();
    format!(
        "_FullTextScore({}, [{}], {documents}, {words}, {hits})",
        args[0],
        t.join(", ")
    )
}

/// `q` (bound) with each `FullTextScore` of its ranking scored under `stats` (one per call,
/// in order).
pub fn with_statistics(q: &Query, stats: &[Statistics]) -> R<Query> {
    let mut out = q.clone();
    let mut i = 0;
    let mut failed = None;
    if let Some(OrderBy::Rank(e)) = &mut out.order_by {
        e.walk_mut(&mut |x| {
            if !is_call(x, SearchFn::FullTextScore) {
                return;
            }
            let Some(s) = stats.get(i) else {
                failed = Some(i);
                return;
            };
            i += 1;
            let hits: Vec<String> = s.hits.iter().map(u64::to_string).collect();
            let text = scored_call(
                x,
                &s.documents.to_string(),
                &s.total_words.to_string(),
                &format!("[{}]", hits.join(",")),
            );
            match super::parser::parse_expr(&text) {
                Ok(mut parsed) => {
                    // The path keeps its bound alias.
                    if let (Expr::Call(_, new_args), Expr::Call(_, old)) = (&mut parsed, &*x) {
                        new_args[0] = old[0].clone();
                    }
                    *x = parsed;
                }
                Err(_) => failed = Some(i),
            }
        });
    }
    match failed {
        Some(_) => Err(QueryError::semantic(
            "The full-text statistics of the query could not be gathered.",
        )),
        None => Ok(out),
    }
}

/// A component query of the gateway's plan (`hybridSearchQueryInfo`) with its statistics
/// placeholders filled (numbered by full-text score, as every SDK reads them) and the
/// ORDER BY continuation filter opened.
pub fn format_component(query: &str, stats: &[Statistics]) -> String {
    let mut q = query.replace("{documentdb-formattableorderbyquery-filter}", "true");
    let docs = stats.first().map(|s| s.documents).unwrap_or(0);
    q = q.replace(
        "{documentdb-formattablehybridsearchquery-totaldocumentcount}",
        &docs.to_string(),
    );
    for (i, s) in stats.iter().enumerate() {
        let hits: Vec<String> = s.hits.iter().map(u64::to_string).collect();
        q = q
            .replace(
                &format!("{{documentdb-formattablehybridsearchquery-totalwordcount-{i}}}"),
                &s.total_words.to_string(),
            )
            .replace(
                &format!("{{documentdb-formattablehybridsearchquery-hitcountsarray-{i}}}"),
                &format!("[{}]", hits.join(",")),
            );
    }
    q
}

/// The order of rows after fusion: `scores[row][component]` (undefined sorts last), rows
/// given in document order (the tie-break, as the SDKs break ties by `_rid`). Each
/// component's rows are ranked, equal scores sharing a rank, and rows ordered by
/// `Σ weight / (60 + rank)`, highest first. Returns row indices.
pub fn fuse(scores: &[Vec<Option<Value>>], descending: &[bool], weights: &[f64]) -> Vec<usize> {
    let n = scores.len();
    let mut fused = vec![0.0f64; n];
    for (c, (&desc, &w)) in descending.iter().zip(weights).enumerate() {
        let key = |i: usize| {
            scores[i]
                .get(c)
                .and_then(|v| v.as_ref())
                .and_then(Value::as_f64)
        };
        let mut order: Vec<usize> = (0..n).collect();
        // Stable: rows of equal score keep document order.
        order.sort_by(|&a, &b| {
            let (x, y) = (key(a), key(b));
            match (x, y) {
                (Some(x), Some(y)) => {
                    let o = x.partial_cmp(&y).unwrap_or(Ordering::Equal);
                    if desc {
                        o.reverse()
                    } else {
                        o
                    }
                }
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => Ordering::Equal,
            }
        });
        let mut rank = 0u64;
        let mut last: Option<Option<f64>> = None;
        for &i in &order {
            let k = key(i);
            if last != Some(k) {
                rank += 1;
                last = Some(k);
            }
            fused[i] += w / (RRF_K + rank as f64);
        }
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| fused[b].partial_cmp(&fused[a]).unwrap_or(Ordering::Equal));
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bound(sql: &str) -> Query {
        crate::sql::prepare(sql, &[], None).expect("prepare").query
    }

    #[test]
    fn scores_are_allowed_only_in_order_by_rank() {
        let err = |sql: &str| {
            crate::sql::prepare(sql, &[], None)
                .err()
                .map(|e| e.to_string())
        };
        let only = "FullTextScore function is only allowed in the ORDER BY RANK clause";
        for sql in [
            "SELECT FullTextScore(c.t, 'a') FROM c",
            "SELECT c.id FROM c WHERE FullTextScore(c.t, 'a') > 0",
            "SELECT VALUE {\"s\": FullTextScore(c.t, 'a')} FROM c ORDER BY RANK FullTextScore(c.t, 'a')",
        ] {
            assert!(err(sql).is_some_and(|e| e.contains(only)), "{sql}: {:?}", err(sql));
        }
        assert!(err("SELECT TOP 1 c.id FROM c ORDER BY RANK c.id")
            .is_some_and(|e| e.contains("must be followed by a VectorDistance")));
        assert!(
            err("SELECT TOP 1 c.id FROM c ORDER BY RANK RRF(FullTextScore(c.t, 'a'))")
                .is_some_and(|e| e.contains("must be followed by a VectorDistance"))
        );
        let weights = "SELECT TOP 1 c.id FROM c ORDER BY RANK RRF(FullTextScore(c.t, 'a'), FullTextScore(c.u, 'b'), [1])";
        assert!(err(weights).is_some_and(|e| e.contains("one per scoring function")));
        assert!(err("SELECT TOP 1 c.id FROM c ORDER BY RANK FullTextScore(c.t, 'a') DESC")
            .is_some_and(|e| e.contains("Specifying a sort order (ASC or DESC) in the ORDER BY RANK clause is not allowed.")));
        assert_eq!(err("SELECT TOP 2 c.id FROM c ORDER BY RANK RRF(FullTextScore(c.t, 'a'), VectorDistance(c.v, [1, 2]), [2, -1])"), None);
    }

    #[test]
    fn statistics_query_counts_words_and_hits_per_score() {
        let q = bound("SELECT TOP 3 c.id FROM c WHERE c.x = 1 ORDER BY RANK RRF(FullTextScore(c.title, 'John'), VectorDistance(c.v, [1, 2]), FullTextScore(c.text, 'United States', 'war'))");
        let s = statistics_query(&q).expect("needs statistics");
        assert_eq!(
            s,
            "SELECT COUNT(1) AS documentCount, [{\"totalWordCount\": SUM(_FullTextWordCount(c.title)), \"hitCounts\": [COUNTIF(FullTextContains(c.title, \"John\"))]}, {\"totalWordCount\": SUM(_FullTextWordCount(c.text)), \"hitCounts\": [COUNTIF(FullTextContains(c.text, \"United States\")), COUNTIF(FullTextContains(c.text, \"war\"))]}] AS fullTextStatistics FROM c"
        );
        let stats = add_statistics(&[
            json!({"documentCount": 2, "fullTextStatistics": [{"totalWordCount": 10, "hitCounts": [1]}, {"totalWordCount": 7, "hitCounts": [0, 2]}]}),
            json!({"documentCount": 3, "fullTextStatistics": [{"totalWordCount": 5, "hitCounts": [2]}, {"totalWordCount": 1, "hitCounts": [1, 0]}]}),
        ]);
        assert_eq!(
            stats[0],
            Statistics {
                documents: 5,
                total_words: 15,
                hits: vec![3]
            }
        );
        assert_eq!(
            stats[1],
            Statistics {
                documents: 5,
                total_words: 8,
                hits: vec![1, 2]
            }
        );
        let scored = with_statistics(&q, &stats).expect("rewrite");
        let text = scored.order_by.as_ref().map(|o| match o {
            OrderBy::Rank(e) => e.to_string(),
            _ => String::new(),
        });
        assert_eq!(
            text.as_deref(),
            Some("RRF(_FULLTEXTSCORE(c.title, [\"John\"], 5, 15, [3]), VECTORDISTANCE(c.v, [1, 2]), _FULLTEXTSCORE(c.text, [\"United States\", \"war\"], 5, 8, [1, 2]))")
        );
        assert!(!needs_statistics(&bound(
            "SELECT TOP 1 c.id FROM c ORDER BY c.id"
        )));
    }

    #[test]
    fn fusion_ranks_ties_together_and_weighs_components() {
        // The SDKs' own worked example: dense ranks, weights 1 and 2.
        let s = |a: f64, b: f64| vec![Some(json!(a)), Some(json!(b))];
        let rows = vec![s(0.9, 0.2), s(0.8, 0.4), s(0.8, 0.1), s(0.5, 0.3)];
        assert_eq!(fuse(&rows, &[true, false], &[1.0, 2.0]), vec![2, 0, 3, 1]);
        // Equal fused scores keep document order; undefined scores rank last.
        let rows = vec![vec![None], vec![Some(json!(1.0))], vec![Some(json!(1.0))]];
        assert_eq!(fuse(&rows, &[true], &[1.0]), vec![1, 2, 0]);
        // Weights [10, 10] order as [1, 1]; a negative weight reverses its component.
        let rows = vec![s(3.0, 1.0), s(2.0, 3.0), s(1.0, 2.0)];
        assert_eq!(
            fuse(&rows, &[true, true], &[1.0, 1.0]),
            fuse(&rows, &[true, true], &[10.0, 10.0])
        );
        let q = bound("SELECT TOP 2 c.id FROM c ORDER BY RANK RRF(FullTextScore(c.t, 'a'), VectorDistance(c.v, [1, 2], false, {'distanceFunction': 'euclidean'}), [-1, 1])");
        let r = rank_of(&q).expect("ranked");
        assert_eq!(r.descending(), vec![false, false]);
        assert_eq!(r.weights, vec![-1.0, 1.0]);
    }
}
