//! Evaluating bound queries over JSON documents.
//!
//! Rows are environments: a linked list of (slot, value) bindings on the stack, so a row that
//! joins `c` with an element of `c.tags` borrows both from the document without copying.
//! Expressions evaluate to [`Val`]: undefined, a borrowed value, or a computed one.

use super::aggregate::Acc;
use super::ast::*;
use super::ctx::{Ctx, GroupView};
use super::error::QueryError;
use super::functions;
use super::limits::SizeBudget;
use super::value::{self, canonical, canonical_opt, compare, equals, order_cmp, Val};
use serde_json::{Map, Value};
use std::cmp::Ordering;
use std::collections::HashMap;

pub type R<T> = Result<T, QueryError>;

/// One binding of a row.
pub struct Env<'a> {
    pub slot: Slot,
    pub value: &'a Value,
    pub parent: Option<&'a Env<'a>>,
}

pub type EnvRef<'a> = Option<&'a Env<'a>>;

fn lookup<'a>(mut env: EnvRef<'a>, slot: Slot) -> Option<&'a Value> {
    while let Some(e) = env {
        if e.slot == slot {
            return Some(e.value);
        }
        env = e.parent;
    }
    None
}

/// Whether to keep iterating rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Stop,
}

fn bool_val<'a>(b: Option<bool>) -> Val<'a> {
    match b {
        Some(b) => Val::Own(Value::Bool(b)),
        None => Val::Undef,
    }
}

fn num_val<'a>(f: f64) -> Val<'a> {
    Val::from_opt(value::number(f))
}

/// JavaScript's ToInt32, which Cosmos's bitwise operators follow.
fn to_i32(f: f64) -> Option<i32> {
    if !f.is_finite() {
        return Some(0);
    }
    let t = f.trunc();
    let m = t.rem_euclid(4_294_967_296.0);
    Some(m as u64 as u32 as i32)
}

pub fn eval<'e>(e: &'e Expr, env: EnvRef<'e>, cx: &Ctx) -> R<Val<'e>> {
    super::limits::deep(|| eval_at_depth(e, env, cx))
}

fn eval_at_depth<'e>(e: &'e Expr, env: EnvRef<'e>, cx: &Ctx) -> R<Val<'e>> {
    Ok(match e {
        Expr::Lit(v) => Val::Ref(v),
        Expr::Undefined => Val::Undef,
        Expr::Slot(s, _) => lookup(env, *s).map(Val::Ref).unwrap_or(Val::Undef),
        Expr::Member(b, name) => eval(b, env, cx)?.member(name),
        Expr::Index(b, i) => {
            let base = eval(b, env, cx)?;
            let idx = eval(i, env, cx)?;
            match idx.get() {
                Some(iv) => {
                    let iv = iv.clone();
                    base.index(&iv)
                }
                None => Val::Undef,
            }
        }
        Expr::Array(items) => construct_array(items, env, cx)?,
        Expr::Object(props) => construct_object(props, env, cx)?,
        Expr::Unary(op, x) => unary(*op, x, env, cx)?,
        Expr::Binary(op, a, b) => binary(*op, a, b, env, cx)?,
        Expr::Between {
            expr,
            low,
            high,
            negated,
        } => between(expr, low, high, *negated, env, cx)?,
        Expr::In {
            expr,
            list,
            negated,
        } => in_list(expr, list, *negated, env, cx)?,
        Expr::Like {
            expr,
            pattern,
            escape,
            negated,
        } => like_expr(expr, pattern, escape.as_deref(), *negated, env, cx)?,
        Expr::Ternary(c, a, b) => {
            if eval(c, env, cx)?.as_bool() == Some(true) {
                eval(a, env, cx)?
            } else {
                eval(b, env, cx)?
            }
        }
        Expr::Coalesce(a, b) => {
            let v = eval(a, env, cx)?;
            if v.is_undefined() {
                eval(b, env, cx)?
            } else {
                v
            }
        }
        Expr::Call(func, args) => {
            let mut vals = Vec::with_capacity(args.len());
            for a in args {
                vals.push(eval(a, env, cx)?);
            }
            match func {
                functions::Func::Search(f) if f.is_full_text() => {
                    let path = args.first().and_then(Expr::as_path).map(|(_, p)| {
                        let mut s = String::new();
                        for seg in p {
                            s.push('/');
                            s.push_str(seg);
                        }
                        s
                    });
                    functions::call_in(*func, vals, cx, path.as_deref())?
                }
                _ => functions::call(*func, vals, cx)?,
            }
        }
        Expr::Udf(name, args) => {
            let mut vals = Vec::with_capacity(args.len());
            for a in args {
                vals.push(eval(a, env, cx)?.into_owned());
            }
            let Some(udfs) = &cx.udfs else {
                return Err(QueryError::semantic(format!(
                    "The user-defined function 'udf.{name}' cannot be called here: UDFs run in container queries only."
                )));
            };
            Val::from_opt(udfs.call(name, &vals).map_err(QueryError::Script)?)
        }
        Expr::Agg { index, .. } => match &cx.group {
            Some(g) => Val::from_opt(g.aggs.get(*index).cloned().flatten()),
            None => {
                return Err(QueryError::semantic(
                    "An aggregate function was used outside an aggregate query.",
                ))
            }
        },
        Expr::GroupKey(i) => match &cx.group {
            Some(g) => Val::from_opt(g.keys.get(*i).cloned().flatten()),
            None => Val::Undef,
        },
        Expr::Exists(q) => {
            let rows = run_all(q, env, &cx.for_subquery(), Some(1))?;
            Val::Own(Value::Bool(!rows.is_empty()))
        }
        Expr::ArraySub(q) => Val::Own(Value::Array(run_all(q, env, &cx.for_subquery(), None)?)),
        Expr::Scalar(q) => {
            let rows = run_all(q, env, &cx.for_subquery(), Some(1))?;
            Val::from_opt(rows.into_iter().next())
        }
        Expr::Param(p) => {
            return Err(QueryError::semantic(format!(
                "The parameter @{p} was not bound."
            )))
        }
        Expr::Ident(n) => {
            return Err(QueryError::semantic(format!(
                "Identifier '{n}' could not be resolved."
            )))
        }
    })
}

/// An array literal: undefined elements left out, the size bounded.
fn construct_array<'e>(items: &'e [Expr], env: EnvRef<'e>, cx: &Ctx) -> R<Val<'e>> {
    let mut out = Vec::with_capacity(items.len());
    let mut budget = SizeBudget::default();
    for it in items {
        let v = eval(it, env, cx)?;
        if let Some(x) = v.get() {
            budget.add(x)?;
        }
        if let Some(v) = v.into_owned() {
            out.push(v);
        }
    }
    Ok(Val::Own(Value::Array(out)))
}

/// An object literal: undefined properties left out, the size bounded.
fn construct_object<'e>(props: &'e [(String, Expr)], env: EnvRef<'e>, cx: &Ctx) -> R<Val<'e>> {
    let mut m = Map::new();
    let mut budget = SizeBudget::default();
    for (k, it) in props {
        let v = eval(it, env, cx)?;
        if let Some(x) = v.get() {
            budget.add(x)?;
            budget.add_bytes(k.len())?;
        }
        if let Some(v) = v.into_owned() {
            m.insert(k.clone(), v);
        }
    }
    Ok(Val::Own(Value::Object(m)))
}

/// `NOT`, unary minus and plus, `~`.
fn unary<'e>(op: UnOp, x: &'e Expr, env: EnvRef<'e>, cx: &Ctx) -> R<Val<'e>> {
    let v = eval(x, env, cx)?;
    Ok(match op {
        UnOp::Not => bool_val(v.as_bool().map(|b| !b)),
        UnOp::Neg => match v.get().and_then(value::as_nonfinite) {
            Some(f) => Val::Own(value::nonfinite(-f)),
            None => match v.get().and_then(Value::as_i64).and_then(i64::checked_neg) {
                // Integers stay exact past 2^53 (DateTime ticks are ~6.4e17).
                Some(i) if i != 0 => Val::Own(Value::from(i)),
                _ => v.as_f64().map(|f| num_val(-f)).unwrap_or(Val::Undef),
            },
        },
        UnOp::Plus => match v.as_f64() {
            Some(_) => v,
            None => Val::Undef,
        },
        UnOp::BitNot => v
            .as_f64()
            .and_then(to_i32)
            .map(|i| num_val(!i as f64))
            .unwrap_or(Val::Undef),
    })
}

/// `x [NOT] BETWEEN low AND high`: undefined unless all three compare.
fn between<'e>(
    expr: &'e Expr,
    low: &'e Expr,
    high: &'e Expr,
    negated: bool,
    env: EnvRef<'e>,
    cx: &Ctx,
) -> R<Val<'e>> {
    let v = eval(expr, env, cx)?;
    let lo = eval(low, env, cx)?;
    let hi = eval(high, env, cx)?;
    let r = match (v.get(), lo.get(), hi.get()) {
        (Some(v), Some(lo), Some(hi)) => match (compare(v, lo), compare(v, hi)) {
            (Some(a), Some(b)) => Some(a != Ordering::Less && b != Ordering::Greater),
            _ => None,
        },
        _ => None,
    };
    Ok(bool_val(r.map(|b| b != negated)))
}

/// `x [NOT] IN (...)`.
fn in_list<'e>(
    expr: &'e Expr,
    list: &'e [Expr],
    negated: bool,
    env: EnvRef<'e>,
    cx: &Ctx,
) -> R<Val<'e>> {
    let v = eval(expr, env, cx)?;
    let Some(v) = v.get() else {
        return Ok(Val::Undef);
    };
    let mut found = false;
    for it in list {
        if let Some(x) = eval(it, env, cx)?.get() {
            if equals(v, x) == Some(true) {
                found = true;
                break;
            }
        }
    }
    Ok(bool_val(Some(found != negated)))
}

/// `x [NOT] LIKE pattern [ESCAPE c]`, within the step budget.
fn like_expr<'e>(
    expr: &'e Expr,
    pattern: &'e Expr,
    escape: Option<&'e Expr>,
    negated: bool,
    env: EnvRef<'e>,
    cx: &Ctx,
) -> R<Val<'e>> {
    let v = eval(expr, env, cx)?;
    let p = eval(pattern, env, cx)?;
    let esc = match escape {
        Some(x) => match eval(x, env, cx)?.as_str() {
            Some(s) if s.chars().count() == 1 => s.chars().next(),
            Some(_) => {
                return Err(QueryError::semantic(
                    "The ESCAPE value of LIKE must be a single character.",
                ))
            }
            None => return Ok(Val::Undef),
        },
        None => None,
    };
    Ok(match (v.as_str(), p.as_str()) {
        (Some(s), Some(p)) => match like_within(s, p, esc, MAX_LIKE_STEPS) {
            Some(m) => bool_val(Some(m != negated)),
            None => {
                return Err(QueryError::semantic(format!(
                    "The LIKE pattern is too costly to match against this value (more than {MAX_LIKE_STEPS} steps); use a shorter pattern or STARTSWITH/CONTAINS."
                )))
            }
        },
        _ => Val::Undef,
    })
}

fn binary<'e>(op: BinOp, a: &'e Expr, b: &'e Expr, env: EnvRef<'e>, cx: &Ctx) -> R<Val<'e>> {
    match op {
        BinOp::And => {
            let x = eval(a, env, cx)?.as_bool();
            if x == Some(false) {
                return Ok(bool_val(Some(false)));
            }
            let y = eval(b, env, cx)?.as_bool();
            return Ok(match (x, y) {
                (_, Some(false)) => bool_val(Some(false)),
                (Some(true), Some(true)) => bool_val(Some(true)),
                _ => Val::Undef,
            });
        }
        BinOp::Or => {
            let x = eval(a, env, cx)?.as_bool();
            if x == Some(true) {
                return Ok(bool_val(Some(true)));
            }
            let y = eval(b, env, cx)?.as_bool();
            return Ok(match (x, y) {
                (_, Some(true)) => bool_val(Some(true)),
                (Some(false), Some(false)) => bool_val(Some(false)),
                _ => Val::Undef,
            });
        }
        _ => {}
    }
    let x = eval(a, env, cx)?;
    let y = eval(b, env, cx)?;
    let (Some(xv), Some(yv)) = (x.get(), y.get()) else {
        return Ok(Val::Undef);
    };
    Ok(match op {
        BinOp::Eq => bool_val(equals(xv, yv)),
        BinOp::Neq => bool_val(equals(xv, yv).map(|b| !b)),
        BinOp::Lt => bool_val(compare(xv, yv).map(|o| o == Ordering::Less)),
        BinOp::Gt => bool_val(compare(xv, yv).map(|o| o == Ordering::Greater)),
        BinOp::Le => bool_val(compare(xv, yv).map(|o| o != Ordering::Greater)),
        BinOp::Ge => bool_val(compare(xv, yv).map(|o| o != Ordering::Less)),
        BinOp::Concat => match (xv, yv) {
            (Value::String(p), Value::String(q)) => {
                SizeBudget::default().add_bytes(p.len() + q.len())?;
                Val::Own(Value::String(format!("{p}{q}")))
            }
            _ => Val::Undef,
        },
        _ => {
            if let Some(r) = super::arith::exact_integer(op, xv, yv) {
                return Ok(Val::Own(Value::from(r)));
            }
            let (Some(p), Some(q)) = (value::as_number(xv), value::as_number(yv)) else {
                return Ok(Val::Undef);
            };
            match op {
                BinOp::Add => num_val(p + q),
                BinOp::Sub => num_val(p - q),
                BinOp::Mul => num_val(p * q),
                BinOp::Div => num_val(p / q),
                BinOp::Mod => num_val(p % q),
                _ => {
                    let (Some(i), Some(j)) = (to_i32(p), to_i32(q)) else {
                        return Ok(Val::Undef);
                    };
                    let sh = (j as u32) & 31;
                    match op {
                        BinOp::BitAnd => num_val((i & j) as f64),
                        BinOp::BitOr => num_val((i | j) as f64),
                        BinOp::BitXor => num_val((i ^ j) as f64),
                        BinOp::Shl => num_val(i.wrapping_shl(sh) as f64),
                        BinOp::Shr => num_val(i.wrapping_shr(sh) as f64),
                        BinOp::ShrZero => num_val((i as u32).wrapping_shr(sh) as f64),
                        _ => Val::Undef,
                    }
                }
            }
        }
    })
}

pub use super::like::{like, like_within, MAX_LIKE_STEPS};

// ---- rows ------------------------------------------------------------------------------------

/// Calls `f` for every row the FROM clause produces under `env` (without WHERE).
pub fn for_each_row<'e>(
    from: &'e From,
    env: EnvRef<'e>,
    cx: &Ctx,
    f: &mut dyn for<'x> FnMut(EnvRef<'x>) -> R<Flow>,
) -> R<Flow> {
    let mut sources: Vec<&'e Source> = Vec::with_capacity(1 + from.joins.len());
    sources.push(&from.first);
    sources.extend(from.joins.iter());
    iterate(&sources, env, cx, f)
}

fn iterate<'e>(
    sources: &[&'e Source],
    env: EnvRef<'e>,
    cx: &Ctx,
    f: &mut dyn for<'x> FnMut(EnvRef<'x>) -> R<Flow>,
) -> R<Flow> {
    let Some((s, rest)) = sources.split_first() else {
        cx.count_row()?;
        return f(env);
    };
    match &s.kind {
        SourceKind::Value(e) => match eval(e, env, cx)? {
            Val::Undef => Ok(Flow::Continue),
            Val::Ref(v) => {
                let ne = Env {
                    slot: s.slot,
                    value: v,
                    parent: env,
                };
                iterate(rest, Some(&ne), cx, f)
            }
            Val::Own(v) => {
                let ne = Env {
                    slot: s.slot,
                    value: &v,
                    parent: env,
                };
                iterate(rest, Some(&ne), cx, f)
            }
        },
        SourceKind::Iterate(e) => {
            let v = eval(e, env, cx)?;
            let owned;
            let arr: &[Value] = match &v {
                Val::Ref(Value::Array(a)) => a,
                Val::Own(Value::Array(_)) => {
                    owned = v;
                    match &owned {
                        Val::Own(Value::Array(a)) => a,
                        _ => return Ok(Flow::Continue),
                    }
                }
                _ => return Ok(Flow::Continue),
            };
            for item in arr {
                let ne = Env {
                    slot: s.slot,
                    value: item,
                    parent: env,
                };
                if iterate(rest, Some(&ne), cx, f)? == Flow::Stop {
                    return Ok(Flow::Stop);
                }
            }
            Ok(Flow::Continue)
        }
        SourceKind::Subquery(q) => {
            let rows = run_all(q, env, &cx.for_subquery(), None)?;
            for item in &rows {
                let ne = Env {
                    slot: s.slot,
                    value: item,
                    parent: env,
                };
                if iterate(rest, Some(&ne), cx, f)? == Flow::Stop {
                    return Ok(Flow::Stop);
                }
            }
            Ok(Flow::Continue)
        }
    }
}

/// Whether a row passes the WHERE clause (only `true` passes).
pub fn passes(q: &Query, env: EnvRef<'_>, cx: &Ctx) -> R<bool> {
    match &q.where_ {
        None => Ok(true),
        Some(w) => Ok(eval(w, env, cx)?.as_bool() == Some(true)),
    }
}

/// The name of an unaliased select item: the last property of a path, else `$1`, `$2`, ...
pub fn item_names(items: &[SelectItem]) -> Vec<String> {
    let mut n = 0;
    items
        .iter()
        .map(|it| {
            if let Some(a) = &it.alias {
                return a.clone();
            }
            match &it.expr {
                Expr::Member(_, name) => name.clone(),
                Expr::Slot(_, name) => name.clone(),
                _ => {
                    n += 1;
                    format!("${n}")
                }
            }
        })
        .collect()
}

/// The projected value of a row; `None` when it produces nothing (VALUE of undefined).
pub fn project(q: &Query, env: EnvRef<'_>, cx: &Ctx) -> R<Option<Value>> {
    match &q.select.projection {
        Projection::Star => {
            let slot = q.from.as_ref().map(|f| f.first.slot).unwrap_or(DOC_SLOT);
            Ok(lookup(env, slot).cloned())
        }
        Projection::Value(e) => Ok(eval(e, env, cx)?.into_owned()),
        Projection::List(items) => {
            let names = item_names(items);
            let mut m = Map::new();
            for (it, name) in items.iter().zip(names) {
                if let Some(v) = eval(&it.expr, env, cx)?.into_owned() {
                    m.insert(name, v);
                }
            }
            Ok(Some(Value::Object(m)))
        }
    }
}

/// ORDER BY key values of a row (RANK scores sort descending).
pub fn order_keys(q: &Query, env: EnvRef<'_>, cx: &Ctx) -> R<Vec<Option<Value>>> {
    match &q.order_by {
        None => Ok(Vec::new()),
        Some(OrderBy::Items(items)) => items
            .iter()
            .map(|it| {
                Ok(super::vector::unscored_last(
                    it,
                    eval(&it.expr, env, cx)?.into_owned(),
                ))
            })
            .collect(),
        Some(OrderBy::Rank(_)) => match super::hybrid::rank_of(q) {
            // RRF: each component's score (fused over all rows by the executor).
            Some(r) => r
                .components
                .iter()
                .map(|e| Ok(eval(e, env, cx)?.into_owned()))
                .collect(),
            None => Ok(Vec::new()),
        },
    }
}

/// Direction of each ORDER BY key (true = descending).
pub fn order_directions(q: &Query) -> Vec<bool> {
    match &q.order_by {
        None => Vec::new(),
        Some(OrderBy::Items(items)) => items.iter().map(|i| i.descending).collect(),
        Some(OrderBy::Rank(_)) => super::hybrid::rank_of(q)
            .map(|r| r.descending())
            .unwrap_or_default(),
    }
}

/// Compares two ORDER BY key tuples.
pub fn cmp_keys(a: &[Option<Value>], b: &[Option<Value>], desc: &[bool]) -> Ordering {
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let o = order_cmp(x.as_ref(), y.as_ref());
        let o = if desc.get(i).copied().unwrap_or(false) {
            o.reverse()
        } else {
            o
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

// ---- groups -------------------------------------------------------------------------------

/// One group: its key values and aggregate partials.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub keys: Vec<Option<Value>>,
    pub accs: Vec<Acc>,
}

/// Groups of an aggregate query, by canonical key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Groups {
    pub map: HashMap<String, Group>,
}

impl Groups {
    /// Adds one row.
    pub fn add(&mut self, q: &Query, env: EnvRef<'_>, cx: &Ctx) -> R<()> {
        let mut keys = Vec::with_capacity(q.group_by.len());
        for g in &q.group_by {
            keys.push(eval(g, env, cx)?.into_owned());
        }
        let id = keys
            .iter()
            .map(|k| canonical_opt(k.as_ref()))
            .collect::<Vec<_>>()
            .join("\u{1}");
        let group = self.map.entry(id).or_insert_with(|| Group {
            keys,
            accs: q.aggregates.iter().map(|(f, _)| Acc::new(*f)).collect(),
        });
        for (i, (f, arg)) in q.aggregates.iter().enumerate() {
            let v = eval(arg, env, cx)?;
            group.accs[i].add(*f, v.get());
        }
        Ok(())
    }

    pub fn merge(&mut self, other: Groups) {
        for (id, g) in other.map {
            match self.map.get_mut(&id) {
                Some(mine) => {
                    for (a, b) in mine.accs.iter_mut().zip(&g.accs) {
                        a.merge(b);
                    }
                }
                None => {
                    self.map.insert(id, g);
                }
            }
        }
    }

    /// Final rows, groups ordered by key for a stable result. Without GROUP BY an aggregate
    /// query has exactly one group, even over no rows.
    pub fn finish(mut self, q: &Query, cx: &Ctx) -> R<Vec<Value>> {
        if q.group_by.is_empty() && self.map.is_empty() {
            self.map.insert(
                String::new(),
                Group {
                    keys: Vec::new(),
                    accs: q.aggregates.iter().map(|(f, _)| Acc::new(*f)).collect(),
                },
            );
        }
        let mut groups: Vec<Group> = self.map.into_values().collect();
        groups.sort_by(|a, b| cmp_keys(&a.keys, &b.keys, &[]));
        let mut out = Vec::with_capacity(groups.len());
        for g in groups {
            let gcx = cx.for_group(GroupView {
                aggs: g.accs.iter().map(Acc::result).collect(),
                keys: g.keys,
            });
            if let Some(v) = project(q, None, &gcx)? {
                out.push(v);
            }
        }
        Ok(out)
    }
}

pub fn is_aggregate(q: &Query) -> bool {
    !q.aggregates.is_empty() || !q.group_by.is_empty()
}

// ---- whole (sub)queries ------------------------------------------------------------------

/// Runs a query completely under `env` (subqueries, and queries without FROM). `cap` stops
/// early once that many rows exist (when the query's shape allows it).
pub fn run_all(q: &Query, env: EnvRef<'_>, cx: &Ctx, cap: Option<usize>) -> R<Vec<Value>> {
    let aggregate = is_aggregate(q);
    let mut groups = Groups::default();
    let mut rows: Vec<(Vec<Option<Value>>, Value)> = Vec::new();
    // A subquery's rows become one value (ARRAY(...)), bounded like any built value.
    let mut budget = SizeBudget::default();
    let early_cap = if q.order_by.is_none() && !q.select.distinct && !aggregate {
        let skip = q.offset.as_ref().map(lit_usize).unwrap_or(0);
        let mut lim = cap.unwrap_or(usize::MAX);
        if let Some(t) = &q.select.top {
            lim = lim.min(lit_usize(t));
        }
        if let Some(l) = &q.limit {
            lim = lim.min(lit_usize(l));
        }
        Some(skip.saturating_add(lim))
    } else {
        None
    };
    let mut visit = |row: EnvRef<'_>| -> R<Flow> {
        if !passes(q, row, cx)? {
            return Ok(Flow::Continue);
        }
        if aggregate {
            groups.add(q, row, cx)?;
            return Ok(Flow::Continue);
        }
        if let Some(v) = project(q, row, cx)? {
            budget.add(&v)?;
            rows.push((order_keys(q, row, cx)?, v));
        }
        Ok(match early_cap {
            Some(c) if rows.len() >= c => Flow::Stop,
            _ => Flow::Continue,
        })
    };
    match &q.from {
        Some(from) => {
            for_each_row(from, env, cx, &mut visit)?;
        }
        None => {
            visit(env)?;
        }
    }
    let values = if aggregate {
        groups.finish(q, cx)?
    } else {
        if q.order_by.is_some() {
            let desc = order_directions(q);
            rows.sort_by(|a, b| cmp_keys(&a.0, &b.0, &desc));
        }
        rows.into_iter().map(|(_, v)| v).collect()
    };
    Ok(finish_rows(q, values))
}

/// DISTINCT, OFFSET/LIMIT and TOP over complete, ordered results.
pub fn finish_rows(q: &Query, mut values: Vec<Value>) -> Vec<Value> {
    if q.select.distinct {
        let mut seen = std::collections::HashSet::new();
        values.retain(|v| seen.insert(canonical(v)));
    }
    let skip = q.offset.as_ref().map(lit_usize).unwrap_or(0);
    let mut take = usize::MAX;
    if let Some(l) = &q.limit {
        take = lit_usize(l);
    }
    if let Some(t) = &q.select.top {
        take = take.min(lit_usize(t));
    }
    values.into_iter().skip(skip).take(take).collect()
}

/// The value of a bound TOP/OFFSET/LIMIT literal.
pub fn lit_usize(e: &Expr) -> usize {
    match e {
        Expr::Lit(Value::Number(n)) => n.as_f64().map(|f| f as usize).unwrap_or(0),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_patterns() {
        assert!(like("screwdriver", "%driver%", None));
        assert!(like("winter coat", "%coat", Some('^')));
        assert!(like("20% off", "%20^%%", Some('^')));
        assert!(!like("20 off", "%20^%%", Some('^')));
        assert!(like("gear", "ge%", None));
        assert!(like("abc", "a_c", None));
        assert!(like("b", "[a-c]", None));
        assert!(!like("d", "[a-c]", None));
        assert!(like("d", "[^a-c]", None));
        assert!(like("", "%", None));
        assert!(!like("abc", "ab", None));
    }

    #[test]
    fn int32_semantics() {
        assert_eq!(to_i32(4294967295.0), Some(-1));
        assert_eq!(to_i32(-1.5), Some(-1));
    }
}
