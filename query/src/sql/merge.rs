//! The client side of a cross-partition query, as the official SDKs run it against the Cosmos
//! gateway: given the query plan ([`super::sdkplan`]) and every row its rewritten query
//! produced on each partition key range, the final rows — k-way ORDER BY on `orderByItems`,
//! aggregates combined from per-range partials (COUNT, SUM, MIN, MAX, AVG, with `undefined`
//! where the service gives it), GROUP BY groups merged by `groupByItems`, DISTINCT, then
//! OFFSET/LIMIT and TOP.
//!
//! Pure, so the SDK and tests share it, and the ordering and aggregate semantics are the ones
//! the server's own executor uses ([`super::value::order_cmp`], [`super::eval::cmp_keys`]).

use super::eval::cmp_keys;
use super::value::order_cmp;
use serde_json::{Map, Value};
use std::cmp::Ordering;
use std::collections::HashSet;

/// A partial aggregate's final value from the partials of every range (`None`: undefined).
fn combine(kind: &str, partials: &[Option<Value>]) -> Option<Value> {
    match kind {
        "Count" => Some(Value::from(
            partials
                .iter()
                .flatten()
                .filter_map(Value::as_f64)
                .sum::<f64>() as i64,
        )),
        "Sum" => {
            let mut total = 0.0;
            let mut integral = true;
            for p in partials {
                let v = p.as_ref()?;
                let n = v.as_f64()?;
                integral &= v.is_i64() || v.is_u64();
                total += n;
            }
            Some(number(total, integral))
        }
        "Min" | "Max" => {
            let mut best: Option<&Value> = None;
            for v in partials.iter().flatten() {
                let better = match best {
                    None => true,
                    Some(b) => {
                        let o = order_cmp(Some(v), Some(b));
                        if kind == "Min" {
                            o == Ordering::Less
                        } else {
                            o == Ordering::Greater
                        }
                    }
                };
                if better {
                    best = Some(v);
                }
            }
            best.cloned()
        }
        "Average" => {
            let (mut sum, mut count) = (0.0, 0.0);
            for p in partials.iter().flatten() {
                let c = p.get("count").and_then(Value::as_f64).unwrap_or(0.0);
                if c == 0.0 {
                    continue;
                }
                sum += p.get("sum").and_then(Value::as_f64)?;
                count += c;
            }
            (count > 0.0).then(|| number(sum / count, false))
        }
        _ => None,
    }
}

fn number(n: f64, integral: bool) -> Value {
    if integral && n.fract() == 0.0 && n.abs() < 9.0e15 {
        Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n)
            .map(Value::Number)
            .unwrap_or(Value::Null)
    }
}

/// `{"item": v}` → `Some(v)`; `{}` → undefined.
fn item(v: &Value) -> Option<Value> {
    v.get("item").cloned()
}

fn keys_of(row: &Value, field: &str) -> Vec<Option<Value>> {
    row.get(field)
        .and_then(Value::as_array)
        .map(|a| a.iter().map(item).collect())
        .unwrap_or_default()
}

/// The final rows of a query whose plan is `plan` (the `partitionedQueryExecutionInfo` or its
/// `queryInfo`), from the rows of its rewritten query on each range, in range order.
pub fn merge(plan: &Value, per_range: Vec<Vec<Value>>) -> Result<Vec<Value>, String> {
    let info = plan.get("queryInfo").unwrap_or(plan);
    let strs = |k: &str| -> Vec<String> {
        info.get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let aggregates = strs("aggregates");
    let order = strs("orderBy");
    let group_by = strs("groupByExpressions");
    let by_alias = info
        .get("groupByAliasToAggregateType")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let aliases = strs("groupByAliases");
    let select_value = info.get("hasSelectValue").and_then(Value::as_bool) == Some(true);
    let rewritten = info
        .get("rewrittenQuery")
        .and_then(Value::as_str)
        .unwrap_or("");
    let grouped = !group_by.is_empty() || rewritten.contains("AS groupByItems");

    let mut rows: Vec<Value> = if grouped {
        let value_kind = aggregates
            .first()
            .cloned()
            .or_else(|| value_aggregate_kind(rewritten));
        merge_groups(
            per_range,
            &aliases,
            &by_alias,
            select_value,
            value_kind.as_deref(),
        )
    } else if !aggregates.is_empty() {
        // `SELECT VALUE AGG(...)`: one `[{"item": partial}]` per range.
        let kind = aggregates.first().map(String::as_str).unwrap_or("");
        let partials: Vec<Option<Value>> = per_range
            .iter()
            .flatten()
            .map(|r| r.as_array().and_then(|a| a.first()).and_then(item))
            .collect();
        combine(kind, &partials).into_iter().collect()
    } else if !order.is_empty() {
        let desc: Vec<bool> = order.iter().map(|d| d == "Descending").collect();
        let mut all: Vec<(Vec<Option<Value>>, Value)> = per_range
            .into_iter()
            .flatten()
            .map(|r| (keys_of(&r, "orderByItems"), r))
            .collect();
        // Stable: ties keep range order, then each range's own order.
        all.sort_by(|a, b| cmp_keys(&a.0, &b.0, &desc));
        all.into_iter()
            .filter_map(|(_, r)| r.get("payload").cloned())
            .collect()
    } else {
        per_range.into_iter().flatten().collect()
    };
    if info
        .get("distinctType")
        .and_then(Value::as_str)
        .is_some_and(|d| d != "None")
    {
        let mut seen = HashSet::new();
        rows.retain(|r| seen.insert(canonical(r)));
    }
    let offset = info.get("offset").and_then(Value::as_u64).unwrap_or(0) as usize;
    let mut rows: Vec<Value> = rows.into_iter().skip(offset).collect();
    for cap in [info.get("limit"), info.get("top")].into_iter().flatten() {
        if let Some(n) = cap.as_u64() {
            rows.truncate(n as usize);
        }
    }
    Ok(rows)
}

/// A value's text with object keys sorted and numbers in one spelling, so equal values have
/// equal text (DISTINCT here; content checksums of copies).
pub fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", Value::String((*k).clone()), canonical(&m[*k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        Value::Number(n) => n.as_f64().map(|f| f.to_string()).unwrap_or_default(),
        other => other.to_string(),
    }
}

/// The aggregate of a `SELECT VALUE AGG(...) ... GROUP BY` query, read from its rewritten
/// payload (`{"item": COUNT(...)}`, AVG as `{"item": {"sum": ..., "count": ...}}`): the plan
/// names aggregates per alias, and a VALUE projection has none.
fn value_aggregate_kind(rewritten: &str) -> Option<String> {
    let payload = &rewritten[rewritten.find("AS groupByItems,")?..];
    let at = payload.find("{\"item\": ")? + "{\"item\": ".len();
    let rest = payload[at..].trim_start();
    if rest.starts_with("{\"sum\"") {
        return Some("Average".into());
    }
    let name: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect::<String>()
        .to_ascii_uppercase();
    match name.as_str() {
        "COUNT" => Some("Count".into()),
        "SUM" => Some("Sum".into()),
        "MIN" => Some("Min".into()),
        "MAX" => Some("Max".into()),
        _ => None,
    }
}

/// GROUP BY (or an aggregate over a non-VALUE projection, one group): rows
/// `{"groupByItems": [...], "payload": ...}` merged by key, aggregates combined per alias.
fn merge_groups(
    per_range: Vec<Vec<Value>>,
    aliases: &[String],
    by_alias: &Map<String, Value>,
    select_value: bool,
    value_kind: Option<&str>,
) -> Vec<Value> {
    let mut order: Vec<String> = Vec::new();
    let mut groups: std::collections::HashMap<String, Vec<Value>> = Default::default();
    for r in per_range.into_iter().flatten() {
        let key = canonical(r.get("groupByItems").unwrap_or(&Value::Null));
        let payload = r.get("payload").cloned().unwrap_or(Value::Null);
        if !groups.contains_key(&key) {
            order.push(key.clone());
        }
        groups.entry(key).or_default().push(payload);
    }
    let mut out = Vec::new();
    for key in order {
        let payloads = groups.remove(&key).unwrap_or_default();
        if select_value {
            // `SELECT VALUE AGG(...) ... GROUP BY`: payload `{"item": partial}`; or a plain
            // value, the same in every partial.
            let first = payloads.first().cloned().unwrap_or(Value::Null);
            let partial =
                first.get("item").is_some() || first.as_object().is_some_and(|m| m.is_empty());
            match (partial, value_kind) {
                (true, Some(kind)) => {
                    let partials: Vec<Option<Value>> = payloads.iter().map(item).collect();
                    out.extend(combine(kind, &partials));
                }
                _ => out.push(first),
            }
            continue;
        }
        let mut m = Map::new();
        for alias in aliases {
            let kind = by_alias.get(alias).and_then(Value::as_str);
            match kind {
                Some(kind) => {
                    let partials: Vec<Option<Value>> = payloads
                        .iter()
                        .map(|p| p.get(alias).and_then(item))
                        .collect();
                    if let Some(v) = combine(kind, &partials) {
                        m.insert(alias.clone(), v);
                    }
                }
                None => {
                    if let Some(v) = payloads.iter().find_map(|p| p.get(alias)) {
                        m.insert(alias.clone(), v.clone());
                    }
                }
            }
        }
        out.push(Value::Object(m));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pk::EpkRange;
    use crate::sql::{prepare, sdkplan, Ctx};
    use serde_json::json;

    /// Runs `sql` the client's way over `parts` (documents per range) and the server's way over
    /// all documents; the answers must be the same.
    fn both_ways(sql: &str, parts: &[Vec<Value>]) -> (Vec<Value>, Vec<Value>) {
        let p = prepare(sql, &[], None).unwrap();
        let plan = sdkplan::query_plan(&p, &[EpkRange::full()]);
        let rq = plan["queryInfo"]["rewrittenQuery"]
            .as_str()
            .unwrap()
            .replace("{documentdb-formattableorderbyquery-filter}", "true");
        let rewritten = prepare(&rq, &[], None).unwrap();
        let per_range: Vec<Vec<Value>> = parts
            .iter()
            .map(|docs| rewritten.run_over(docs, &Ctx::new(0)).unwrap())
            .collect();
        let client = merge(&plan, per_range).unwrap();
        let all: Vec<Value> = parts.iter().flatten().cloned().collect();
        let server = p.run_over(&all, &Ctx::new(0)).unwrap();
        (client, server)
    }

    fn sorted(mut v: Vec<Value>) -> Vec<String> {
        let mut s: Vec<String> = v.drain(..).map(|x| canonical(&x)).collect();
        s.sort();
        s
    }

    #[test]
    fn client_merge_matches_the_server() {
        let parts: Vec<Vec<Value>> = (0..3)
            .map(|r| {
                (0..12)
                    .map(|i| {
                        let n = r * 12 + i;
                        let mut d = json!({"id": format!("d{n}"), "_rid": format!("r{n}"),
                                           "n": n, "g": n % 4, "s": format!("s{}", n % 5)});
                        if n % 9 == 0 {
                            d["n"] = json!("text");
                        }
                        if n % 11 == 0 {
                            d.as_object_mut().unwrap().remove("g");
                        }
                        d
                    })
                    .collect()
            })
            .collect();
        for (sql, ordered) in [
            ("SELECT * FROM c ORDER BY c.n DESC", true),
            ("SELECT c.id, c.n FROM c ORDER BY c.s, c.n DESC", true),
            ("SELECT TOP 5 c.id FROM c ORDER BY c.id", true),
            ("SELECT c.id FROM c ORDER BY c.n OFFSET 3 LIMIT 7", true),
            ("SELECT VALUE COUNT(1) FROM c", true),
            ("SELECT VALUE SUM(c.g) FROM c", true),
            ("SELECT VALUE SUM(c.n) FROM c", true),
            ("SELECT VALUE MIN(c.n) FROM c", true),
            ("SELECT VALUE MAX(c.s) FROM c", true),
            ("SELECT VALUE AVG(c.g) FROM c", true),
            ("SELECT VALUE AVG(c.missing) FROM c", true),
            ("SELECT COUNT(1) AS n, MAX(c.g) AS hi FROM c", true),
            (
                "SELECT c.g, COUNT(1) AS n, AVG(c.n) AS a FROM c GROUP BY c.g",
                false,
            ),
            ("SELECT VALUE COUNT(1) FROM c GROUP BY c.s", false),
            ("SELECT DISTINCT c.g FROM c", false),
            ("SELECT DISTINCT VALUE c.s FROM c ORDER BY c.s", true),
            ("SELECT VALUE c.s FROM c", false),
        ] {
            let (client, server) = both_ways(sql, &parts);
            if ordered {
                assert_eq!(client, server, "{sql}");
            } else {
                assert_eq!(sorted(client), sorted(server), "{sql}");
            }
        }
    }
}
