//! Cosmos SQL: parse, bind, plan and evaluate.
//!
//! [`prepare`] turns query text and parameters into a [`PreparedQuery`]: the bound query, its
//! [`Routing`] (which partitions can hold matches) and its [`Mode`] (how partial results from
//! several partitions combine). The server scans partitions and feeds documents to
//! [`PreparedQuery::eval_doc`] or [`PreparedQuery::accumulate_doc`]; this crate does no I/O.

pub mod advice;
pub mod aggregate;
pub mod arith;
pub mod ast;
pub mod bind;
pub mod computed;
pub mod ctx;
pub mod datetime;
pub mod distance;
pub mod error;
pub mod eval;
pub mod fields;
pub mod fulltext;
pub mod functions;
pub mod hybrid;
pub mod lexer;
pub mod like;
pub mod limits;
pub mod merge;
pub mod normalize;
pub mod parser;
pub mod route_plan;
pub mod routing;
pub mod sdkplan;
pub mod spatial;
pub mod token;
pub mod value;
pub mod vector;

pub use ast::Query;
pub use ctx::Ctx;
pub use error::QueryError;
pub use eval::{Flow, Groups};
pub use routing::{Mode, Routing};

use crate::pk::PartitionKeyDefinition;
use ast::{Expr, Projection, SourceKind, DOC_SLOT};
use eval::{Env, R};
use serde_json::Value;
use std::collections::HashMap;

/// A query ready to run.
#[derive(Debug, Clone)]
pub struct PreparedQuery {
    /// The query as written (parameters unbound), for rewriting into SDK query plans: shared
    /// with a server's kept parse of the text (a copy cloned out of it per query, and dropped
    /// after, showed as 2.5% of a single-partition query's profile).
    pub parsed: std::sync::Arc<Query>,
    /// The bound query that is evaluated.
    pub query: Query,
    pub mode: Mode,
    pub routing: Routing,
    /// Identifies query text + parameters (continuation tokens carry it).
    pub fingerprint: String,
    /// `SELECT * FROM c` without joins: rows are the stored documents themselves.
    pub raw_documents: bool,
    /// OFFSET (0 when absent).
    pub offset: u64,
    /// The smaller of TOP and LIMIT, if any.
    pub limit: Option<u64>,
    /// The top-level document properties evaluation reads, when that is all it reads (see
    /// [`fields`]); `None`: the whole document.
    pub fields: Option<Vec<String>>,
    /// [`PreparedQuery::fields`] without the ORDER BY's: what [`PreparedQuery::rows_in_order`]
    /// reads.
    pub row_fields: Option<Vec<String>>,
    /// Whether evaluation calls user-defined functions (JavaScript, run off the async
    /// runtime, with the container's UDFs in its [`Ctx`]).
    pub calls_udf: bool,
}

/// One output row of a document.
#[derive(Debug, Clone)]
pub struct Row {
    /// The projected value; `None` means the document itself (see `raw_documents`).
    pub value: Option<Value>,
    /// ORDER BY keys.
    pub keys: Vec<Option<Value>>,
}

/// Parses, binds and plans `sql`. Parameter names are given without `@`. Without a partition
/// key definition (catalog queries) the routing is always fan-out.
pub fn prepare(
    sql: &str,
    params: &[(String, Value)],
    pk: Option<&PartitionKeyDefinition>,
) -> Result<PreparedQuery, QueryError> {
    prepare_in(sql, params, pk, &[])
}

/// [`prepare`] for a container with a vector policy: each `VectorDistance` measures with the
/// distance function of its path's embedding (`vectors`: path and function name) unless it
/// names one (see [`vector::apply`]).
pub fn prepare_in(
    sql: &str,
    params: &[(String, Value)],
    pk: Option<&PartitionKeyDefinition>,
    vectors: &[(String, &'static str)],
) -> Result<PreparedQuery, QueryError> {
    prepare_parsed(sql, parser::parse(sql)?.into(), params, pk, vectors)
}

/// [`prepare_in`] of a query already parsed from `sql` (by [`parser::parse`]): a server that
/// keeps parsed texts skips the parse when only the parameters change, as they do from one
/// vector search to the next.
pub fn prepare_parsed(
    sql: &str,
    mut parsed: std::sync::Arc<Query>,
    params: &[(String, Value)],
    pk: Option<&PartitionKeyDefinition>,
    vectors: &[(String, &'static str)],
) -> Result<PreparedQuery, QueryError> {
    if vector::calls_distance(&parsed) {
        vector::apply(std::sync::Arc::make_mut(&mut parsed), vectors);
    }
    let map: HashMap<&str, &Value> = params.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let (query, calls_udf) = bind::bind(Query::clone(&parsed), &map)?;
    let mode = Mode::of(&query);
    let routing = match pk {
        Some(def) => routing::route(&query, def),
        None => Routing::FanOut,
    };
    // Parameters hashed by their structure, numbers by their bits: formatting a vector
    // query's hundreds of numbers as text was a twentieth of the query's CPU.
    let mut fp = xxhash_rust::xxh3::Xxh3::new();
    fp.update(sql.as_bytes());
    let mut sorted: Vec<&(String, Value)> = params.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    for (k, v) in sorted {
        fp.update(b"\x01");
        fp.update(k.as_bytes());
        fp.update(b"=");
        value::hash_into(&mut fp, v);
    }
    let fingerprint = format!("{:016x}", fp.digest());
    let raw_documents = matches!(query.select.projection, Projection::Star)
        && query.from.as_ref().is_some_and(|f| {
            f.joins.is_empty() && matches!(f.first.kind, SourceKind::Value(Expr::Slot(DOC_SLOT, _)))
        });
    let offset = query.offset.as_ref().map(eval::lit_usize).unwrap_or(0) as u64;
    let mut limit = query.limit.as_ref().map(|e| eval::lit_usize(e) as u64);
    if let Some(t) = &query.select.top {
        let t = eval::lit_usize(t) as u64;
        limit = Some(limit.map_or(t, |l| l.min(t)));
    }
    let fields = fields::root_fields(&query, raw_documents, true);
    // The two differ only by the ORDER BY's properties.
    let row_fields = match query.order_by {
        None => fields.clone(),
        Some(_) => fields::root_fields(&query, raw_documents, false),
    };
    Ok(PreparedQuery {
        parsed,
        query,
        mode,
        routing,
        fingerprint,
        raw_documents,
        offset,
        limit,
        fields,
        row_fields,
        calls_udf,
    })
}

/// Parameters as the SDKs send them: `[{"name": "@x", "value": ...}]`.
pub fn parse_parameters(v: Option<Value>) -> Result<Vec<(String, Value)>, QueryError> {
    let Some(v) = v else { return Ok(Vec::new()) };
    let arr =
        match v {
            Value::Array(a) => a,
            Value::Null => return Ok(Vec::new()),
            _ => return Err(QueryError::semantic(
                "The query 'parameters' must be an array of {\"name\": \"@p\", \"value\": ...}.",
            )),
        };
    if arr.len() > limits::MAX_PARAMETERS {
        return Err(QueryError::semantic(format!(
            "The query has {} parameters; at most {} are allowed.",
            arr.len(),
            limits::MAX_PARAMETERS
        )));
    }
    let mut out = Vec::with_capacity(arr.len());
    for mut p in arr {
        let name = p.get("name").and_then(Value::as_str).ok_or_else(|| {
            QueryError::semantic("Every query parameter needs a string 'name' such as \"@p\".")
        })?;
        let name = parameter_name(name)?;
        match p.get_mut("value").map(Value::take) {
            Some(v) => out.push((name, v)),
            None => {
                return Err(QueryError::semantic(format!(
                    "The query parameter @{name} has no 'value'."
                )))
            }
        }
    }
    Ok(out)
}

/// A parameter's name as queries bind it: without its `@`, which it must have.
pub fn parameter_name(name: &str) -> Result<String, QueryError> {
    match name.strip_prefix('@') {
        Some(n) => Ok(n.to_string()),
        None => Err(QueryError::semantic(format!(
            "The query parameter name '{name}' must start with '@'."
        ))),
    }
}

impl PreparedQuery {
    /// Parses a stored document for evaluation: only the properties the query reads.
    pub fn load_doc(&self, json: &[u8]) -> serde_json::Result<Value> {
        match &self.fields {
            Some(f) => fields::parse_fields(json, f),
            None => serde_json::from_slice(json),
        }
    }

    /// Evaluates one document: calls `sink` with every row it contributes.
    pub fn eval_doc(&self, doc: &Value, cx: &Ctx, sink: &mut dyn FnMut(Row) -> R<Flow>) -> R<Flow> {
        self.eval_rows(doc, cx, true, sink)
    }

    /// Whether [`PreparedQuery::rows_in_order`] reads nothing of a document but its `id`
    /// (`SELECT c.id`, `SELECT VALUE c.id`, a constant): its rows can be made from the id
    /// alone, as [`PreparedQuery::load_row_doc`] would parse the stored document.
    pub fn rows_read_only_id(&self) -> bool {
        !self.raw_documents
            && self
                .row_fields
                .as_ref()
                .is_some_and(|f| f.iter().all(|name| name == "id"))
    }

    /// Parses a stored document for [`PreparedQuery::rows_in_order`]: the properties it reads.
    pub fn load_row_doc(&self, json: &[u8]) -> serde_json::Result<Value> {
        match &self.row_fields {
            Some(f) => fields::parse_fields(json, f),
            None => serde_json::from_slice(json),
        }
    }

    /// [`PreparedQuery::eval_doc`] for a document whose place in the ORDER BY an index has
    /// decided already (a BM25 ranking from postings): its rows carry no keys, as working
    /// them out (a `FullTextScore` tokenizes the whole text) would be thrown away.
    pub fn rows_in_order(
        &self,
        doc: &Value,
        cx: &Ctx,
        sink: &mut dyn FnMut(Row) -> R<Flow>,
    ) -> R<Flow> {
        self.eval_rows(doc, cx, false, sink)
    }

    fn eval_rows(
        &self,
        doc: &Value,
        cx: &Ctx,
        with_keys: bool,
        sink: &mut dyn FnMut(Row) -> R<Flow>,
    ) -> R<Flow> {
        let q = &self.query;
        let Some(from) = &q.from else {
            return Ok(Flow::Continue);
        };
        cx.start_document();
        let root = Env {
            slot: DOC_SLOT,
            value: doc,
            parent: None,
        };
        let raw = self.raw_documents;
        eval::for_each_row(from, Some(&root), cx, &mut |row| {
            if !eval::passes(q, row, cx)? {
                return Ok(Flow::Continue);
            }
            let keys = if with_keys {
                eval::order_keys(q, row, cx)?
            } else {
                Vec::new()
            };
            if raw {
                return sink(Row { value: None, keys });
            }
            match eval::project(q, row, cx)? {
                Some(v) => sink(Row {
                    value: Some(v),
                    keys,
                }),
                None => Ok(Flow::Continue),
            }
        })
    }

    /// Whether a document matches the WHERE clause at all (patch conditions).
    pub fn matches(&self, doc: &Value, cx: &Ctx) -> R<bool> {
        let mut any = false;
        self.eval_doc(doc, cx, &mut |_| {
            any = true;
            Ok(Flow::Stop)
        })?;
        Ok(any)
    }

    /// Adds one document's rows to the partial aggregates.
    pub fn accumulate_doc(&self, doc: &Value, cx: &Ctx, groups: &mut Groups) -> R<()> {
        let q = &self.query;
        let Some(from) = &q.from else { return Ok(()) };
        cx.start_document();
        let root = Env {
            slot: DOC_SLOT,
            value: doc,
            parent: None,
        };
        eval::for_each_row(from, Some(&root), cx, &mut |row| {
            if eval::passes(q, row, cx)? {
                groups.add(q, row, cx)?;
            }
            Ok(Flow::Continue)
        })?;
        Ok(())
    }

    /// Final rows of an aggregate query from merged partials (TOP/OFFSET applied).
    pub fn finish_groups(&self, groups: Groups, cx: &Ctx) -> R<Vec<Value>> {
        let rows = groups.finish(&self.query, cx)?;
        Ok(eval::finish_rows(&self.query, rows))
    }

    /// The result of a query without FROM.
    pub fn run_constant(&self, cx: &Ctx) -> R<Vec<Value>> {
        eval::run_all(&self.query, None, cx, None)
    }

    /// DISTINCT/OFFSET/LIMIT/TOP over complete, ordered rows.
    pub fn finish_rows(&self, rows: Vec<Value>) -> Vec<Value> {
        eval::finish_rows(&self.query, rows)
    }

    /// Sort directions of the ORDER BY keys (true = descending).
    pub fn order_directions(&self) -> Vec<bool> {
        eval::order_directions(&self.query)
    }

    /// Runs the query over in-memory documents (catalog queries: databases, containers, offers).
    pub fn run_over(&self, docs: &[Value], cx: &Ctx) -> R<Vec<Value>> {
        match self.mode {
            Mode::NoFrom => return self.run_constant(cx),
            Mode::Aggregate => {
                let mut g = Groups::default();
                for d in docs {
                    self.accumulate_doc(d, cx, &mut g)?;
                }
                return self.finish_groups(g, cx);
            }
            _ => {}
        }
        let mut rows: Vec<(Vec<Option<Value>>, usize, Value)> = Vec::new();
        for (i, d) in docs.iter().enumerate() {
            self.eval_doc(d, cx, &mut |r| {
                rows.push((r.keys, i, r.value.unwrap_or_else(|| d.clone())));
                Ok(Flow::Continue)
            })?;
        }
        if self.query.order_by.is_some() {
            let desc = self.order_directions();
            rows.sort_by(|a, b| eval::cmp_keys(&a.0, &b.0, &desc).then(a.1.cmp(&b.1)));
        }
        Ok(self.finish_rows(rows.into_iter().map(|r| r.2).collect()))
    }
}

/// Compiles a patch condition (`FROM c WHERE ...`, or a bare `WHERE ...`/expression).
pub fn prepare_condition(text: &str) -> Result<PreparedQuery, QueryError> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    let sql = if lower.starts_with("select") {
        t.to_string()
    } else if lower.starts_with("from") {
        format!("SELECT VALUE 1 {t}")
    } else if lower.starts_with("where") {
        format!("SELECT VALUE 1 FROM c {t}")
    } else {
        format!("SELECT VALUE 1 FROM c WHERE {t}")
    };
    prepare(&sql, &[], None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(sql: &str, docs: &[Value]) -> Vec<Value> {
        let p = prepare(sql, &[], None).unwrap();
        p.run_over(docs, &Ctx::new(0)).unwrap()
    }

    #[test]
    fn integers_stay_exact_past_two_to_the_53() {
        let doc = [json!({"id": "1", "t": 17955216001234567_i64})];
        let one = |sql: &str| run(sql, &doc).into_iter().next().unwrap_or(Value::Null);
        assert_eq!(
            one("SELECT VALUE 9007199254740993 FROM c"),
            json!(9007199254740993_i64)
        );
        assert_eq!(
            one("SELECT VALUE 9007199254740993 + 2 FROM c"),
            json!(9007199254740995_i64)
        );
        assert_eq!(
            one("SELECT VALUE -9007199254740993 * 3 FROM c"),
            json!(-27021597764222979_i64)
        );
        assert_eq!(
            one("SELECT VALUE 9007199254740993 = 9007199254740992 FROM c"),
            json!(false)
        );
        assert_eq!(one("SELECT VALUE c.t % 10 FROM c"), json!(7));
        // DateTime ticks (~1.8e16 today) round-trip exactly.
        assert_eq!(
            one("SELECT VALUE DateTimeToTicks('2026-11-24T12:00:00.1234567Z') FROM c"),
            json!(17955216001234567_i64)
        );
        assert_eq!(
            one("SELECT VALUE TicksToDateTime(c.t + 1) FROM c"),
            json!("2026-11-24T12:00:00.1234568Z")
        );
        assert_eq!(
            one("SELECT VALUE TicksToDateTime(DateTimeToTicks('2026-11-24T12:00:00.1234567Z')) FROM c"),
            json!("2026-11-24T12:00:00.1234567Z")
        );
        // Past 64 bits, doubles as before.
        assert_eq!(
            one("SELECT VALUE 9223372036854775807 + 1 FROM c"),
            json!(9223372036854775808.0)
        );
    }

    #[test]
    fn end_to_end_over_documents() {
        let docs = vec![
            json!({"id": "1", "n": 3, "tags": ["a", "b"], "g": "x"}),
            json!({"id": "2", "n": 1, "tags": ["b"], "g": "y"}),
            json!({"id": "3", "tags": [], "g": "x"}),
        ];
        assert_eq!(
            run("SELECT VALUE c.id FROM c WHERE c.n > 1", &docs),
            vec![json!("1")]
        );
        assert_eq!(
            run("SELECT VALUE c.id FROM c ORDER BY c.n", &docs),
            vec![json!("3"), json!("2"), json!("1")]
        );
        assert_eq!(
            run(
                "SELECT c.id, t FROM c JOIN t IN c.tags WHERE t = 'b'",
                &docs
            ),
            vec![json!({"id": "1", "t": "b"}), json!({"id": "2", "t": "b"})]
        );
        assert_eq!(run("SELECT VALUE COUNT(1) FROM c", &docs), vec![json!(3)]);
        assert_eq!(
            run("SELECT c.g, COUNT(1) AS n FROM c GROUP BY c.g", &docs),
            vec![json!({"g": "x", "n": 2}), json!({"g": "y", "n": 1})]
        );
        assert_eq!(run("SELECT VALUE AVG(c.n) FROM c", &docs), vec![json!(2)]);
        assert_eq!(
            run("SELECT DISTINCT VALUE c.g FROM c", &docs),
            vec![json!("x"), json!("y")]
        );
        assert_eq!(
            run("SELECT TOP 1 VALUE c.id FROM c", &docs),
            vec![json!("1")]
        );
        assert_eq!(
            run(
                "SELECT VALUE c.id FROM c ORDER BY c.id DESC OFFSET 1 LIMIT 1",
                &docs
            ),
            vec![json!("2")]
        );
        assert_eq!(
            run("SELECT c.id, ARRAY_LENGTH(c.tags) AS n FROM c WHERE EXISTS(SELECT VALUE t FROM t IN c.tags WHERE t = 'a')", &docs),
            vec![json!({"id": "1", "n": 2})]
        );
        assert_eq!(run("SELECT VALUE 1 + 2", &docs), vec![json!(3)]);
        assert_eq!(
            run("SELECT * FROM c WHERE c.id = '3'", &docs),
            vec![docs[2].clone()]
        );
    }

    #[test]
    fn semantic_errors() {
        for bad in [
            "SELECT x.id FROM c",
            "SELECT * FROM c JOIN t IN c.tags",
            "SELECT c.id, COUNT(1) FROM c",
            "SELECT * FROM c WHERE COUNT(1) > 1",
            "SELECT NOSUCH(1)",
            "SELECT * FROM c WHERE c.x = @missing",
            "SELECT TOP -1 * FROM c",
            "SELECT * FROM c ORDER BY c.a + 1",
        ] {
            assert!(prepare(bad, &[], None).is_err(), "{bad}");
        }
    }
}
