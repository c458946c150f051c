//! What `VectorDistance` measures with, settled when a query is prepared: the distance
//! function a call names, else that of its container's embedding at its path, else cosine —
//! written into the call, so every partition and the SDKs' client-side merge compute alike —
//! and the direction of `ORDER BY VectorDistance(...)`, which follows it.

use super::ast::*;
use serde_json::Value;

/// Gives every `VectorDistance` call of a query the distance function it measures with — its
/// own options' `distanceFunction`, else that of the container's embedding at its path
/// (`defaults`: path and function name, from its vector policy), else
/// cosine — written into its options, so each partition and the SDKs' client-side merge
/// compute alike; and orders `ORDER BY VectorDistance(...)` by similarity as the service does:
/// ascending for euclidean (a distance), descending for cosine and dot product (similarities).
pub fn apply(q: &mut Query, defaults: &[(String, &'static str)]) {
    let fix = |e: &mut Expr| e.walk_mut(&mut |x| inject(x, defaults));
    match &mut q.select.projection {
        Projection::Value(e) => fix(e),
        Projection::List(items) => items.iter_mut().for_each(|i| fix(&mut i.expr)),
        Projection::Star => {}
    }
    if let Some(w) = &mut q.where_ {
        fix(w);
    }
    if let Some(OrderBy::Items(items)) = &mut q.order_by {
        for it in items.iter_mut() {
            fix(&mut it.expr);
            if let Some(f) = distance_of(&it.expr) {
                it.descending = f != "euclidean";
            }
        }
    }
}

/// Whether [`apply`] has anything to change in `q`: a `VectorDistance` call in its projection,
/// filter or sort (a prepared query shares its parse unless it does).
pub fn calls_distance(q: &Query) -> bool {
    let mut found = false;
    let mut check = |e: &Expr| e.walk(&mut |x| found |= x.is_vector_distance());
    match &q.select.projection {
        Projection::Value(e) => check(e),
        Projection::List(items) => items.iter().for_each(|i| check(&i.expr)),
        Projection::Star => {}
    }
    if let Some(w) = &q.where_ {
        check(w);
    }
    if let Some(OrderBy::Items(items)) = &q.order_by {
        items.iter().for_each(|it| check(&it.expr));
    }
    found
}

/// The sort key of ORDER BY item `it` whose value is `key`: a vector search ranks a document
/// with no score (no vector, or one of another length) after every scored one, whichever way
/// it sorts, as rank fusion does. Ascending (euclidean), undefined would sort first: it takes
/// the place of an object, which sorts after every number.
pub fn unscored_last(it: &OrderItem, key: Option<Value>) -> Option<Value> {
    match key {
        None if !it.descending && it.expr.is_vector_distance() => {
            Some(Value::Object(Default::default()))
        }
        k => k,
    }
}

/// The `distanceFunction` a (completed) `VectorDistance` call names.
pub fn distance_of(e: &Expr) -> Option<String> {
    let Expr::Call(_, args) = e else { return None };
    if !e.is_vector_distance() {
        return None;
    }
    match args.get(3)? {
        Expr::Lit(Value::Object(o)) => o
            .get("distanceFunction")
            .and_then(Value::as_str)
            .map(str::to_ascii_lowercase),
        Expr::Object(fields) => fields.iter().find_map(|(k, v)| match v {
            Expr::Lit(Value::String(s)) if k == "distanceFunction" => Some(s.to_ascii_lowercase()),
            _ => None,
        }),
        _ => None,
    }
}

/// What an index needs of `ORDER BY VectorDistance(c.path, [..], bruteForce, {options})`,
/// the query's first sort item, once bound: the path, the query vector (a constant) and
/// the options that steer a search.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorSearch {
    pub path: String,
    pub vector: Vec<f32>,
    /// The vector's numbers as the evaluator reads them (`f64`), for scores that must equal
    /// its own (see [`score_key`]).
    pub exact: Vec<f64>,
    pub distance: String,
    pub brute_force: bool,
    /// `searchListSizeMultiplier` (diskANN's beam per result), when the query gives it (the
    /// service documents a default of 10; the index sizes its own default, see
    /// `VectorAccess::beam` in the server).
    pub list_multiplier: Option<usize>,
    /// `quantizedVectorListMultiplier` (candidates re-ranked per result; default 5).
    pub rerank_multiplier: usize,
}

/// The [`VectorSearch`] of a bound query whose first ORDER BY item is `VectorDistance` over a
/// document path with a constant vector; `None` otherwise (the query ranks by evaluation).
pub fn search_of(q: &Query) -> Option<VectorSearch> {
    let Some(OrderBy::Items(items)) = &q.order_by else {
        return None;
    };
    let first = &items.first()?.expr;
    let Expr::Call(_, args) = first else {
        return None;
    };
    if !first.is_vector_distance() {
        return None;
    }
    let path = doc_path(args.first()?)?;
    let exact = constant_numbers(args.get(1)?)?;
    let vector = exact.iter().map(|x| *x as f32).collect();
    let brute_force = matches!(args.get(2), Some(Expr::Lit(Value::Bool(true))));
    let option = |name: &str| -> Option<usize> {
        let v = match args.get(3)? {
            Expr::Lit(Value::Object(o)) => o.get(name)?.as_f64()?,
            Expr::Object(fields) => fields.iter().find_map(|(k, v)| match v {
                Expr::Lit(Value::Number(n)) if k == name => n.as_f64(),
                _ => None,
            })?,
            _ => return None,
        };
        (v >= 1.0).then_some(v as usize)
    };
    Some(VectorSearch {
        path,
        vector,
        exact,
        distance: distance_of(first).unwrap_or_else(|| "cosine".into()),
        brute_force,
        list_multiplier: option("searchListSizeMultiplier"),
        rerank_multiplier: option("quantizedVectorListMultiplier").unwrap_or(5),
    })
}

/// The numbers of a constant array expression.
fn constant_numbers(e: &Expr) -> Option<Vec<f64>> {
    match e {
        Expr::Lit(Value::Array(a)) => a.iter().map(Value::as_f64).collect(),
        Expr::Array(items) => items
            .iter()
            .map(|i| match i {
                Expr::Lit(v) => v.as_f64(),
                Expr::Unary(UnOp::Neg, x) => match x.as_ref() {
                    Expr::Lit(v) => v.as_f64().map(|x| -x),
                    _ => None,
                },
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// The document path (`/a/b`) an expression such as `c.a["b"]` reads, bound or not.
fn doc_path(e: &Expr) -> Option<String> {
    match e {
        Expr::Ident(_) | Expr::Slot(..) => Some(String::new()),
        Expr::Member(base, name) => Some(format!("{}/{name}", doc_path(base)?)),
        Expr::Index(base, idx) => match idx.as_ref() {
            Expr::Lit(Value::String(name)) => Some(format!("{}/{name}", doc_path(base)?)),
            _ => None,
        },
        _ => None,
    }
}

fn inject(e: &mut Expr, defaults: &[(String, &'static str)]) {
    if !e.is_vector_distance() || distance_of(e).is_some() {
        return;
    }
    let Expr::Call(_, args) = e else { return };
    let path = args.first().and_then(doc_path);
    let f = path
        .and_then(|p| defaults.iter().find(|(d, _)| *d == p))
        .map_or("cosine", |(_, f)| *f);
    if args.len() < 3 {
        args.resize(2, Expr::Lit(Value::Null));
        args.push(Expr::Lit(Value::Bool(false)));
    }
    match args.get_mut(3) {
        None => args.push(Expr::Lit(serde_json::json!({ "distanceFunction": f }))),
        Some(Expr::Lit(Value::Object(o))) => {
            o.insert("distanceFunction".into(), Value::String(f.into()));
        }
        Some(Expr::Object(fields)) => fields.push((
            "distanceFunction".into(),
            Expr::Lit(Value::String(f.into())),
        )),
        // Options of another shape: the evaluator's default (cosine) applies.
        Some(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ORDER BY VectorDistance follows the distance function: the call's own, else the
    /// container's embedding's, else cosine; and the rewritten text says which.
    #[test]
    fn vector_distance_gets_its_function_and_order() {
        let policy = [("/embedding".to_string(), "euclidean")];
        let order = |sql: &str, defaults: &[(String, &'static str)]| {
            let mut q = crate::sql::parser::parse(sql).expect("parse");
            apply(&mut q, defaults);
            let Some(OrderBy::Items(items)) = &q.order_by else {
                panic!("no order")
            };
            (items[0].descending, q.to_string())
        };
        let sql = "SELECT TOP 3 c.id FROM c ORDER BY VectorDistance(c.embedding, [1, 2])";
        let (desc, text) = order(sql, &policy);
        assert!(!desc, "euclidean from the policy orders ascending");
        assert!(
            text.contains(r#"{"distanceFunction":"euclidean"}"#),
            "{text}"
        );
        assert!(!text.contains(" ASC") && !text.contains(" DESC"), "{text}");
        assert!(order(sql, &[]).0, "cosine by default orders descending");
        let own = "SELECT TOP 3 c.id FROM c ORDER BY VectorDistance(c.embedding, [1, 2], false, {'distanceFunction': 'dotproduct'})";
        assert!(order(own, &policy).0, "the call's own function wins");
    }
}
