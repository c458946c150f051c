//! The evaluation context shared by expressions, system functions and subqueries: the query's
//! clock, the current group under GROUP BY, and the per-document row budget. Its own module so
//! that `eval` and `functions` both depend on it instead of on each other.

use super::error::QueryError;
use super::fulltext::Language;
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;

type R<T> = Result<T, QueryError>;

/// Evaluation context: the current group (under GROUP BY / aggregates), the query's clock, and
/// the rows produced from the current document so far.
#[derive(Clone, Default)]
pub struct Ctx {
    /// Milliseconds since the epoch, fixed for the whole query (the `...Static` functions).
    pub now_millis: i64,
    pub group: Option<GroupView>,
    /// Rows the FROM clauses (JOINs, subqueries) produced from the current document; shared
    /// with subqueries, reset per document, bounded by [`MAX_ROWS_PER_DOCUMENT`].
    rows: Arc<AtomicU64>,
    /// Runs the container's user-defined functions (`udf.name(...)`); `None` where a query
    /// has none to call (the pure core knows no JavaScript: the server supplies this).
    pub udfs: Option<Arc<dyn Udfs>>,
    /// The languages of the container's full-text paths (`fullTextPolicy`); `None`: en-US.
    pub text: Option<Arc<TextLanguages>>,
}

/// The container's full-text languages: one per listed path, and the default for the rest.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TextLanguages {
    pub default: Language,
    pub paths: Vec<(String, Language)>,
}

/// Calls user-defined functions by name. Arguments and the result are JSON values, `None`
/// standing for `undefined`; an `Err` is the function's failure, as the client should read it.
pub trait Udfs: Send + Sync {
    fn call(&self, name: &str, args: &[Option<Value>]) -> Result<Option<Value>, String>;
}

/// Most rows the JOINs and subqueries of one query may produce from one document. A 2 MB
/// document cannot hold an array of more than about a million elements, so one JOIN never
/// reaches it; JOINs of a large array with itself would otherwise run for hours.
pub const MAX_ROWS_PER_DOCUMENT: u64 = 1_000_000;

#[derive(Clone, Default)]
pub struct GroupView {
    pub keys: Vec<Option<Value>>,
    pub aggs: Vec<Option<Value>>,
}

impl Ctx {
    pub fn new(now_millis: i64) -> Self {
        Self {
            now_millis,
            ..Self::default()
        }
    }

    /// This context with `udfs` answering `udf.name(...)` calls.
    pub fn with_udfs(mut self, udfs: Option<Arc<dyn Udfs>>) -> Self {
        self.udfs = udfs;
        self
    }

    pub(crate) fn for_subquery(&self) -> Ctx {
        Ctx {
            now_millis: self.now_millis,
            group: None,
            rows: Arc::clone(&self.rows),
            udfs: self.udfs.clone(),
            text: self.text.clone(),
        }
    }

    /// The context for evaluating one group's projection (aggregates and group keys).
    pub(crate) fn for_group(&self, view: GroupView) -> Ctx {
        Ctx {
            now_millis: self.now_millis,
            group: Some(view),
            rows: Arc::clone(&self.rows),
            udfs: self.udfs.clone(),
            text: self.text.clone(),
        }
    }

    /// This context with the container's full-text languages.
    pub fn with_text(mut self, text: Option<Arc<TextLanguages>>) -> Self {
        self.text = text;
        self
    }

    /// The language text at `path` (`/a/b`) is analysed in.
    pub fn text_language(&self, path: Option<&str>) -> Language {
        let Some(t) = &self.text else {
            return Language::default();
        };
        path.and_then(|p| t.paths.iter().find(|(q, _)| q == p))
            .map(|(_, l)| *l)
            .unwrap_or(t.default)
    }

    /// Starts the row budget of a new document.
    pub fn start_document(&self) {
        self.rows.store(0, AtomicOrdering::Relaxed);
        super::fulltext::forget_document();
    }

    /// Counts one row; an error past [`MAX_ROWS_PER_DOCUMENT`].
    pub(crate) fn count_row(&self) -> R<()> {
        if self.rows.fetch_add(1, AtomicOrdering::Relaxed) >= MAX_ROWS_PER_DOCUMENT {
            return Err(QueryError::semantic(format!(
                "The query's JOINs and subqueries produce more than {MAX_ROWS_PER_DOCUMENT} rows from one document; narrow them (for example filter inside the subquery, or JOIN fewer arrays)."
            )));
        }
        Ok(())
    }
}
