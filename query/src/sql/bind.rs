//! Binding: substitutes parameters, resolves aliases to slots, numbers aggregates, rewrites
//! GROUP BY projections, and enforces Cosmos's rules on where things may appear.

use super::ast::*;
use super::error::QueryError;
use super::functions;
use serde_json::Value;
use std::collections::HashMap;

type R<T> = Result<T, QueryError>;

pub struct Binder<'p> {
    params: &'p HashMap<&'p str, &'p Value>,
    next_slot: Slot,
    /// Whether any expression calls a user-defined function.
    calls_udf: bool,
}

/// Binds a parsed query with its parameters (names without `@`); also says whether it calls
/// user-defined functions.
pub fn bind(mut q: Query, params: &HashMap<&str, &Value>) -> R<(Query, bool)> {
    let mut b = Binder {
        params,
        next_slot: DOC_SLOT + 1,
        calls_udf: false,
    };
    b.query(&mut q, &[], true)?;
    super::hybrid::check(&q)?;
    Ok((q, b.calls_udf))
}

fn semantic<T>(msg: impl Into<String>) -> R<T> {
    Err(QueryError::semantic(msg))
}

impl Binder<'_> {
    fn new_slot(&mut self) -> Slot {
        let s = self.next_slot;
        self.next_slot += 1;
        s
    }

    /// Binds one query level. `outer` is the enclosing scope (for correlated subqueries).
    fn query(&mut self, q: &mut Query, outer: &[(String, Slot)], top_level: bool) -> R<()> {
        let mut scope: Vec<(String, Slot)> = outer.to_vec();
        if let Some(from) = &mut q.from {
            // The first source's expression names the container (top level) or an outer alias.
            let first_scope: Vec<(String, Slot)> = if top_level {
                let root = root_ident(&from.first.kind).unwrap_or_default();
                vec![(root, DOC_SLOT)]
            } else {
                scope.clone()
            };
            self.source(&mut from.first, &first_scope)?;
            if let Some(a) = &from.first.alias {
                scope.push((a.clone(), from.first.slot));
            } else {
                scope.push((String::new(), from.first.slot));
            }
            for j in &mut from.joins {
                self.source(j, &scope)?;
                scope.push((j.alias.clone().unwrap_or_default(), j.slot));
            }
            if matches!(q.select.projection, Projection::Star) && !from.joins.is_empty() {
                return semantic("'SELECT *' is only valid with a single input set: list the properties to return when the query has JOINs.");
            }
        } else if matches!(q.select.projection, Projection::Star) {
            return semantic("'SELECT *' is not valid if FROM clause is omitted.");
        }
        if let Some(t) = &mut q.select.top {
            self.count_operand(t, "TOP")?;
        }
        if let Some(o) = &mut q.offset {
            self.count_operand(o, "OFFSET")?;
        }
        if let Some(l) = &mut q.limit {
            self.count_operand(l, "LIMIT")?;
        }
        if let Some(w) = &mut q.where_ {
            self.expr(w, &scope)?;
            if w.contains_aggregate() {
                return semantic("Aggregates are not allowed in the WHERE clause.");
            }
        }
        for g in &mut q.group_by {
            self.expr(g, &scope)?;
            if g.contains_aggregate() {
                return semantic("Aggregates are not allowed in the GROUP BY clause.");
            }
        }
        match &mut q.select.projection {
            Projection::Star => {}
            Projection::Value(e) => self.expr(e, &scope)?,
            Projection::List(items) => {
                for it in items.iter_mut() {
                    self.expr(&mut it.expr, &scope)?;
                }
                // Fix output names now, before GROUP BY rewriting changes the expressions.
                let names = super::eval::item_names(items);
                for (it, name) in items.iter_mut().zip(names) {
                    it.alias = Some(name);
                }
            }
        }
        self.order_by(q, &scope)?;
        // Number the aggregates of this level.
        let mut aggs = Vec::new();
        let mut number = |e: &mut Expr| number_aggregates(e, &mut aggs);
        match &mut q.select.projection {
            Projection::Value(e) => number(e)?,
            Projection::List(items) => {
                for it in items.iter_mut() {
                    number(&mut it.expr)?;
                }
            }
            Projection::Star => {}
        }
        q.aggregates = aggs;
        let aggregate_query = !q.aggregates.is_empty() || !q.group_by.is_empty();
        if aggregate_query {
            if matches!(q.select.projection, Projection::Star) {
                return semantic(if q.group_by.is_empty() {
                    "'SELECT *' cannot be combined with aggregates."
                } else {
                    "'SELECT *' is not valid with GROUP BY: list the grouped properties and aggregates."
                });
            }
            if !q.group_by.is_empty() && q.order_by.is_some() {
                return semantic("ORDER BY is not supported in queries with GROUP BY.");
            }
            let keys = q.group_by.clone();
            let check = |e: &mut Expr| -> R<()> {
                substitute_group_keys(e, &keys);
                if let Some(bad) = free_reference(e) {
                    return semantic(format!(
                        "Property reference '{bad}' is invalid in the select list because it is not contained in either an aggregate function or the GROUP BY clause."
                    ));
                }
                Ok(())
            };
            match &mut q.select.projection {
                Projection::Value(e) => check(e)?,
                Projection::List(items) => {
                    for it in items.iter_mut() {
                        check(&mut it.expr)?;
                    }
                }
                Projection::Star => {}
            }
        }
        Ok(())
    }

    /// ORDER BY items: bound, no aggregates, each a document path (as the service requires).
    fn order_by(&mut self, q: &mut Query, scope: &[(String, Slot)]) -> R<()> {
        match &mut q.order_by {
            Some(OrderBy::Items(items)) => {
                for it in items.iter_mut() {
                    self.expr(&mut it.expr, scope)?;
                    if it.expr.contains_aggregate() {
                        return semantic("Aggregates are not allowed in the ORDER BY clause.");
                    }
                    if matches!(
                        &it.expr,
                        Expr::Call(
                            super::functions::Func::Search(
                                super::functions::SearchFn::FullTextScoreWith
                            ),
                            _
                        )
                    ) {
                        // A component of a hybrid search as the SDKs run it (see `hybrid`).
                        continue;
                    }
                    if it.expr.is_vector_distance() {
                        // Its direction follows the distance function (see
                        // `super::vector::apply`).
                        if it.direction_given {
                            return semantic(
                                "Specifying a sorting order (ASC or DESC) with VectorDistance function is not supported.",
                            );
                        }
                        continue;
                    }
                    if it.expr.as_path().is_none() {
                        return semantic(format!(
                        "Unsupported ORDER BY clause: the ORDER BY item '{}' could not be mapped to a document path.",
                        it.expr
                    ));
                    }
                }
            }
            Some(OrderBy::Rank(e)) => self.expr(e, scope)?,
            None => {}
        }
        Ok(())
    }

    fn source(&mut self, s: &mut Source, scope: &[(String, Slot)]) -> R<()> {
        match &mut s.kind {
            SourceKind::Value(e) | SourceKind::Iterate(e) => self.expr(e, scope)?,
            SourceKind::Subquery(q) => self.query(q, scope, false)?,
        }
        if let Some(a) = &s.alias {
            if a.is_empty() {
                return semantic("An alias must not be empty.");
            }
        }
        s.slot = self.new_slot();
        Ok(())
    }

    fn count_operand(&mut self, e: &mut Expr, what: &str) -> R<()> {
        if let Expr::Param(p) = e {
            let v = self.param(p)?;
            *e = Expr::Lit(v);
        }
        match e {
            Expr::Lit(Value::Number(n))
                if n.as_f64().is_some_and(|f| f >= 0.0 && f.fract() == 0.0) =>
            {
                Ok(())
            }
            other => semantic(format!(
                "The {what} value {other} is invalid: it must be a non-negative whole number."
            )),
        }
    }

    fn param(&self, name: &str) -> R<Value> {
        self.params.get(name).map(|v| (*v).clone()).ok_or_else(|| {
            QueryError::semantic(format!(
                "The parameter @{name} is used in the query but was not given a value."
            ))
        })
    }

    fn expr(&mut self, e: &mut Expr, scope: &[(String, Slot)]) -> R<()> {
        super::limits::deep(|| self.expr_at_depth(e, scope))
    }

    fn expr_at_depth(&mut self, e: &mut Expr, scope: &[(String, Slot)]) -> R<()> {
        match e {
            Expr::Param(p) => {
                *e = Expr::Lit(self.param(p)?);
            }
            Expr::Ident(name) => {
                let found = scope.iter().rev().find(|(n, _)| n == name);
                match found {
                    Some((_, slot)) => *e = Expr::Slot(*slot, name.clone()),
                    None if name == "NaN" => *e = Expr::Lit(super::value::nonfinite(f64::NAN)),
                    None if name == "Infinity" => {
                        *e = Expr::Lit(super::value::nonfinite(f64::INFINITY))
                    }
                    None => return semantic(format!("Identifier '{name}' could not be resolved.")),
                }
            }
            Expr::Udf(_, args) => {
                self.calls_udf = true;
                for a in args {
                    self.expr(a, scope)?;
                }
            }
            Expr::Call(func, args) => {
                functions::check(*func, args.len())?;
                for a in args {
                    self.expr(a, scope)?;
                }
            }
            Expr::Exists(q) | Expr::ArraySub(q) | Expr::Scalar(q) => self.query(q, scope, false)?,
            Expr::Agg { arg, .. } => {
                self.expr(arg, scope)?;
                if arg.contains_aggregate() {
                    return semantic("Aggregate functions cannot be nested.");
                }
            }
            Expr::Member(b, _) | Expr::Unary(_, b) => self.expr(b, scope)?,
            Expr::Index(a, b) | Expr::Binary(_, a, b) | Expr::Coalesce(a, b) => {
                self.expr(a, scope)?;
                self.expr(b, scope)?;
            }
            Expr::Array(v) => {
                for x in v {
                    self.expr(x, scope)?;
                }
            }
            Expr::Object(v) => {
                for (_, x) in v {
                    self.expr(x, scope)?;
                }
            }
            Expr::Between {
                expr, low, high, ..
            } => {
                self.expr(expr, scope)?;
                self.expr(low, scope)?;
                self.expr(high, scope)?;
            }
            Expr::In { expr, list, .. } => {
                self.expr(expr, scope)?;
                for x in list {
                    self.expr(x, scope)?;
                }
            }
            Expr::Like {
                expr,
                pattern,
                escape,
                ..
            } => {
                self.expr(expr, scope)?;
                self.expr(pattern, scope)?;
                if let Some(x) = escape {
                    self.expr(x, scope)?;
                }
            }
            Expr::Ternary(a, b, c) => {
                self.expr(a, scope)?;
                self.expr(b, scope)?;
                self.expr(c, scope)?;
            }
            Expr::Lit(_) | Expr::Undefined | Expr::Slot(..) | Expr::GroupKey(_) => {}
        }
        Ok(())
    }
}

/// The container name in a top-level FROM source (`products` in `FROM products p`).
fn root_ident(k: &SourceKind) -> Option<String> {
    let mut e = match k {
        SourceKind::Value(e) | SourceKind::Iterate(e) => e,
        SourceKind::Subquery(_) => return None,
    };
    loop {
        match e {
            Expr::Ident(n) => return Some(n.clone()),
            Expr::Member(b, _) | Expr::Index(b, _) => e = b,
            _ => return None,
        }
    }
}

fn number_aggregates(e: &mut Expr, aggs: &mut Vec<(AggFunc, Expr)>) -> R<()> {
    match e {
        Expr::Agg { func, arg, index } => {
            *index = aggs.len();
            aggs.push((*func, (**arg).clone()));
            Ok(())
        }
        Expr::Member(b, _) | Expr::Unary(_, b) => number_aggregates(b, aggs),
        Expr::Index(a, b) | Expr::Binary(_, a, b) | Expr::Coalesce(a, b) => {
            number_aggregates(a, aggs)?;
            number_aggregates(b, aggs)
        }
        Expr::Array(v) | Expr::Call(_, v) => {
            v.iter_mut().try_for_each(|x| number_aggregates(x, aggs))
        }
        Expr::Object(v) => v
            .iter_mut()
            .try_for_each(|(_, x)| number_aggregates(x, aggs)),
        Expr::Ternary(a, b, c) => {
            number_aggregates(a, aggs)?;
            number_aggregates(b, aggs)?;
            number_aggregates(c, aggs)
        }
        Expr::Between {
            expr, low, high, ..
        } => {
            number_aggregates(expr, aggs)?;
            number_aggregates(low, aggs)?;
            number_aggregates(high, aggs)
        }
        Expr::In { expr, list, .. } => {
            number_aggregates(expr, aggs)?;
            list.iter_mut().try_for_each(|x| number_aggregates(x, aggs))
        }
        Expr::Like {
            expr,
            pattern,
            escape,
            ..
        } => {
            number_aggregates(expr, aggs)?;
            number_aggregates(pattern, aggs)?;
            if let Some(x) = escape {
                number_aggregates(x, aggs)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Replaces every sub-expression equal to a GROUP BY expression with a reference to that key.
fn substitute_group_keys(e: &mut Expr, keys: &[Expr]) {
    if let Some(i) = keys.iter().position(|k| k == e) {
        *e = Expr::GroupKey(i);
        return;
    }
    match e {
        Expr::Agg { .. } => {}
        Expr::Member(b, _) | Expr::Unary(_, b) => substitute_group_keys(b, keys),
        Expr::Index(a, b) | Expr::Binary(_, a, b) | Expr::Coalesce(a, b) => {
            substitute_group_keys(a, keys);
            substitute_group_keys(b, keys);
        }
        Expr::Array(v) | Expr::Call(_, v) => {
            v.iter_mut().for_each(|x| substitute_group_keys(x, keys))
        }
        Expr::Object(v) => v
            .iter_mut()
            .for_each(|(_, x)| substitute_group_keys(x, keys)),
        Expr::Ternary(a, b, c) => {
            substitute_group_keys(a, keys);
            substitute_group_keys(b, keys);
            substitute_group_keys(c, keys);
        }
        Expr::Between {
            expr, low, high, ..
        } => {
            substitute_group_keys(expr, keys);
            substitute_group_keys(low, keys);
            substitute_group_keys(high, keys);
        }
        Expr::In { expr, list, .. } => {
            substitute_group_keys(expr, keys);
            list.iter_mut().for_each(|x| substitute_group_keys(x, keys));
        }
        Expr::Like {
            expr,
            pattern,
            escape,
            ..
        } => {
            substitute_group_keys(expr, keys);
            substitute_group_keys(pattern, keys);
            if let Some(x) = escape {
                substitute_group_keys(x, keys);
            }
        }
        _ => {}
    }
}

/// A row reference outside any aggregate (invalid in an aggregate query's projection).
fn free_reference(e: &Expr) -> Option<String> {
    match e {
        Expr::Slot(_, name) => Some(name.clone()),
        Expr::Agg { .. } | Expr::GroupKey(_) => None,
        Expr::Exists(_) | Expr::ArraySub(_) | Expr::Scalar(_) => None,
        Expr::Member(b, n) => free_reference(b).map(|r| format!("{r}.{n}")),
        Expr::Unary(_, b) => free_reference(b),
        Expr::Index(a, b) | Expr::Binary(_, a, b) | Expr::Coalesce(a, b) => {
            free_reference(a).or_else(|| free_reference(b))
        }
        Expr::Array(v) | Expr::Call(_, v) => v.iter().find_map(free_reference),
        Expr::Object(v) => v.iter().find_map(|(_, x)| free_reference(x)),
        Expr::Ternary(a, b, c) => free_reference(a)
            .or_else(|| free_reference(b))
            .or_else(|| free_reference(c)),
        Expr::Between {
            expr, low, high, ..
        } => free_reference(expr)
            .or_else(|| free_reference(low))
            .or_else(|| free_reference(high)),
        Expr::In { expr, list, .. } => {
            free_reference(expr).or_else(|| list.iter().find_map(free_reference))
        }
        Expr::Like {
            expr,
            pattern,
            escape,
            ..
        } => free_reference(expr)
            .or_else(|| free_reference(pattern))
            .or_else(|| escape.as_deref().and_then(free_reference)),
        _ => None,
    }
}
