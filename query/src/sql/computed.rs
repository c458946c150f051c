//! Computed properties: a container's `computedProperties`, each a name and a query
//! `SELECT VALUE <expression> FROM <alias>` whose value a query can read as if the document
//! had that property (filter, project, order by), without it being stored.
//!
//! Validation follows the service's documented constraints: at most 20 per container; a name
//! that is not empty, not a system property and unique; a query of exactly the shape
//! `SELECT VALUE <scalar expression> FROM <alias>` — no WHERE, GROUP BY, ORDER BY, TOP,
//! DISTINCT, OFFSET/LIMIT, JOIN or aggregate. The service answers a malformed definition with
//! "One of the specified inputs is invalid", which the official SDK's tests look for.

use super::ast::{Expr, Projection, SourceKind};
use super::{prepare, Ctx, PreparedQuery};
use serde_json::Value;

/// The most computed properties a container may define.
pub const MAX_COMPUTED: usize = 20;

/// One computed property, its query prepared.
#[derive(Debug, Clone)]
pub struct ComputedProperty {
    pub name: String,
    pub query: String,
    prepared: PreparedQuery,
}

impl PartialEq for ComputedProperty {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.query == other.query
    }
}

fn invalid(why: impl std::fmt::Display) -> String {
    format!("One of the specified inputs is invalid: computedProperties {why}")
}

/// Parses and validates a container's `computedProperties` (absent: none).
pub fn parse(v: Option<&Value>) -> Result<Vec<ComputedProperty>, String> {
    let list = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(_) => {
            return Err(invalid(
                "must be an array of {\"name\", \"query\"} objects.",
            ))
        }
    };
    if list.len() > MAX_COMPUTED {
        return Err(invalid(format!(
            "may define at most {MAX_COMPUTED} properties; {} were given.",
            list.len()
        )));
    }
    let mut out: Vec<ComputedProperty> = Vec::new();
    for item in list {
        let (Some(name), Some(query)) = (
            item.get("name").and_then(Value::as_str),
            item.get("query").and_then(Value::as_str),
        ) else {
            return Err(invalid(
                "entries need a string 'name' and a string 'query'.",
            ));
        };
        if name.is_empty()
            || name == "id"
            || crate::protocol::SYSTEM_PROPERTIES.contains(&name)
            || name.contains(['/', '\\', '"', '\''])
        {
            return Err(invalid(format!(
                "name '{name}' is not allowed: it must be non-empty, without quotes or slashes, and not a system property."
            )));
        }
        if out.iter().any(|c| c.name == name) {
            return Err(invalid(format!("name '{name}' is defined twice.")));
        }
        let prepared = prepare(query, &[], None)
            .map_err(|e| invalid(format!("'{name}': the query does not parse: {e}")))?;
        let q = &prepared.query;
        let plain = q.where_.is_none()
            && q.group_by.is_empty()
            && q.order_by.is_none()
            && q.offset.is_none()
            && q.limit.is_none()
            && q.select.top.is_none()
            && !q.select.distinct
            && q.aggregates.is_empty()
            && matches!(q.select.projection, Projection::Value(_))
            && q.from.as_ref().is_some_and(|f| {
                f.joins.is_empty() && matches!(f.first.kind, SourceKind::Value(Expr::Slot(..)))
            });
        if !plain {
            return Err(invalid(format!(
                "'{name}': the query must be 'SELECT VALUE <expression> FROM <alias>' without WHERE, GROUP BY, ORDER BY, TOP, DISTINCT, OFFSET, JOIN or aggregates."
            )));
        }
        out.push(ComputedProperty {
            name: name.to_string(),
            query: query.to_string(),
            prepared,
        });
    }
    Ok(out)
}

/// The computed properties `query_text` may read (their names appear in it).
pub fn referenced<'a>(all: &'a [ComputedProperty], query_text: &str) -> Vec<&'a ComputedProperty> {
    all.iter()
        .filter(|c| query_text.contains(c.name.as_str()))
        .collect()
}

/// Adds the value of every property of `computed` to `doc` (an undefined value adds
/// nothing), as the query engine reads it.
pub fn augment(doc: &mut Value, computed: &[ComputedProperty], cx: &Ctx) {
    let mut values = Vec::with_capacity(computed.len());
    for c in computed {
        if let Ok(rows) = c.prepared.run_over(std::slice::from_ref(doc), cx) {
            if let Some(v) = rows.into_iter().next() {
                values.push((c.name.clone(), v));
            }
        }
    }
    if let Value::Object(m) = doc {
        for (k, v) in values {
            m.insert(k, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn definitions_are_validated_as_the_service_does() {
        let ok = json!([{"name": "cp_lower", "query": "SELECT VALUE LOWER(c.g) FROM c"},
                        {"name": "cp_pow", "query": "SELECT VALUE POWER(c.v, 2) FROM c"}]);
        assert_eq!(parse(Some(&ok)).unwrap().len(), 2);
        for bad in [
            json!({"name": "x", "query": "SELECT VALUE 1 FROM c"}),
            json!([{"name": "id", "query": "SELECT VALUE 1 FROM c"}]),
            json!([{"name": "a", "query": "SELECT VALUE c.x FROM c WHERE c.y = 1"}]),
            json!([{"name": "a", "query": "SELECT c.x FROM c"}]),
            json!([{"name": "a", "query": "SELECT VALUE COUNT(1) FROM c"}]),
            json!([{"name": "a", "query": "SELECT VALUE t FROM c JOIN t IN c.tags"}]),
            json!([{"name": "a", "query": "SELECT VALUE 1 FROM c"}, {"name": "a", "query": "SELECT VALUE 2 FROM c"}]),
            json!([{"name": "a"}]),
        ] {
            let e = parse(Some(&bad)).unwrap_err();
            assert!(
                e.starts_with("One of the specified inputs is invalid"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn values_are_computed_from_the_document() {
        let cps = parse(Some(&json!([
            {"name": "cp_lower", "query": "SELECT VALUE LOWER(c.g) FROM c"},
            {"name": "cp_missing", "query": "SELECT VALUE c.nothing FROM c"}
        ])))
        .unwrap();
        let mut doc = json!({"g": "GroUp1"});
        augment(&mut doc, &cps, &Ctx::new(0));
        assert_eq!(doc, json!({"g": "GroUp1", "cp_lower": "group1"}));
        assert_eq!(
            referenced(&cps, "SELECT * FROM c WHERE c.cp_lower = 'x'").len(),
            1
        );
    }
}
