//! Bounds on what one query may ask for, so that no query text can exhaust the server's stack,
//! memory or time.
//!
//! Where the service documents a limit ("Azure Cosmos DB service quotas", SQL query limits and
//! per-item limits), strata uses the same number. Where it does not (nesting of expressions,
//! parameters, `IN` lists), strata picks a bound far above what real queries use and says so in
//! the error, so a query that works here also fits the service.

/// Longest query text. Service quota: "Maximum length of SQL query: 512 KB".
pub const MAX_QUERY_BYTES: usize = 512 * 1024;

/// Most `JOIN`s in one query (per `FROM`). Service quota: "Maximum JOINs per query: 10".
pub const MAX_JOINS: usize = 10;

/// Deepest nesting of one expression: parentheses, `NOT`, unary operators, function calls,
/// array and object literals, subqueries, member paths and chains of operators other than
/// `AND`/`OR` each count one level. strata's bound; it matches the service's documented
/// "Maximum level of nesting for embedded objects / arrays: 128".
pub const MAX_DEPTH: usize = 128;

/// Most parameters of one query (strata's bound; the request body limit bounds them anyway).
pub const MAX_PARAMETERS: usize = 10_000;

/// Most values in one `IN (…)` list (strata's bound).
pub const MAX_IN_LIST: usize = 10_000;

/// Most search terms of one full-text function call (`FullTextContains`, `FullTextContainsAll`,
/// `FullTextContainsAny`, `FullTextScore`; an array argument counts its elements). The
/// service documents no bound (its pages give the open-ended `<string_expr1>, ...`); strata's
/// is far above real searches, since each term is matched against every candidate document.
pub const MAX_SEARCH_TERMS: usize = 1_000;

/// Most scoring functions one `RRF` fuses. The service documents no bound ("two or more
/// scores"); strata's is far above real hybrid searches, since each component ranks every
/// candidate document.
pub const MAX_RANK_COMPONENTS: usize = 16;

/// Largest value one expression may build (a string, array or object): the service's
/// documented "Maximum response size: 4 MB", since a larger value could never be returned.
pub const MAX_VALUE_BYTES: usize = 4 * 1024 * 1024;

/// Runs `f`, first moving to a fresh heap-allocated stack segment when less than 256 KB of the
/// current one is left. Every recursive pass over a query tree (parse, bind, plan, print,
/// evaluate) calls this once per level: the depth bound above keeps the total small, and this
/// keeps it off the caller's stack, which may be a 2 MB async worker's (and an unoptimised
/// build spends tens of kilobytes per level).
#[inline]
pub fn deep<T>(f: impl FnOnce() -> T) -> T {
    stacker::maybe_grow(256 * 1024, 2 * 1024 * 1024, f)
}

/// What one value costs in a [`weigh`]: per value by kind, per array element, per object key.
struct Costs {
    /// A string, beside its bytes.
    string: usize,
    /// A number, boolean or null.
    scalar: usize,
    array: usize,
    object: usize,
    element: usize,
    key: usize,
}

/// Adds up `costs` over `v`, or `None` once the total passes `limit`: the walk stops there, so
/// weighing a huge value costs no more than `limit`. Iterative, so a deep value cannot exhaust
/// the stack.
fn weigh(v: &serde_json::Value, limit: usize, costs: &Costs) -> Option<usize> {
    use serde_json::Value;
    let mut total = 0usize;
    let mut todo = vec![v];
    while let Some(v) = todo.pop() {
        total += match v {
            Value::String(s) => costs.string + s.len(),
            Value::Array(a) => {
                todo.extend(a.iter());
                costs.array + costs.element * a.len()
            }
            Value::Object(m) => {
                for (k, x) in m {
                    total += k.len() + costs.key;
                    todo.push(x);
                }
                costs.object
            }
            _ => costs.scalar,
        };
        if total > limit {
            return None;
        }
    }
    Some(total)
}

/// The size of `v` as JSON text, roughly (strings and keys by their bytes, a few bytes per
/// element), or `None` once it passes `limit` (see [`weigh`]).
pub fn size_within(v: &serde_json::Value, limit: usize) -> Option<usize> {
    let text = Costs {
        string: 2,
        scalar: 8,
        array: 2,
        object: 2,
        element: 1,
        key: 4,
    };
    weigh(v, limit, &text)
}

/// The bytes `v` holds in memory as a parsed JSON value, roughly (each value's slot, string
/// and key bytes, a map entry's overhead), or `None` once it passes `limit`. A number takes
/// a 32-byte slot where its text took a few bytes: a parameter's in-memory weight is several
/// times its size in the request, which is what caches and budgets must count.
pub fn held_within(v: &serde_json::Value, limit: usize) -> Option<usize> {
    const SLOT: usize = std::mem::size_of::<serde_json::Value>();
    let held = Costs {
        string: SLOT,
        scalar: SLOT,
        array: SLOT,
        object: SLOT,
        element: 0,
        key: 48,
    };
    weigh(v, limit, &held)
}

/// Adds up the sizes of the values one expression builds, and fails the query before it
/// builds one larger than [`MAX_VALUE_BYTES`].
#[derive(Debug, Default)]
pub struct SizeBudget {
    used: usize,
}

impl SizeBudget {
    /// Counts `v` (a value about to be copied into the result).
    pub fn add(&mut self, v: &serde_json::Value) -> Result<(), super::QueryError> {
        match size_within(v, MAX_VALUE_BYTES - self.used) {
            Some(n) => self.add_bytes(n),
            None => Err(too_large()),
        }
    }

    /// Counts `n` bytes about to be allocated.
    pub fn add_bytes(&mut self, n: usize) -> Result<(), super::QueryError> {
        self.used = self.used.saturating_add(n);
        if self.used > MAX_VALUE_BYTES {
            return Err(too_large());
        }
        Ok(())
    }
}

/// The error for an expression that would build a value larger than [`MAX_VALUE_BYTES`].
pub fn too_large() -> super::QueryError {
    super::QueryError::semantic(format!(
        "The query builds a value larger than {MAX_VALUE_BYTES} bytes (4 MB, the largest response the service returns); strings, arrays and objects built by a query are limited to that size."
    ))
}
