//! Partial updates.

use crate::Error;
use serde::Serialize;
use serde_json::{Value, json};

/// Patch operations (at most 10 per request), applied in order and atomically.
///
/// ```
/// use strata_sdk::PatchOperations;
/// let ops = PatchOperations::new()
///     .set("/status", "shipped")
///     .incr("/version", 1)
///     .add("/tags/-", "priority")
///     .remove("/draft")
///     .replace("/owner", "bob")
///     .move_path("/old", "/new")
///     .condition("FROM c WHERE c.status = 'paid'");
/// assert_eq!(ops.len(), 6);
/// ```
#[derive(Debug, Clone, Default)]
pub struct PatchOperations {
    ops: Vec<Value>,
    condition: Option<String>,
    error: Option<String>,
}

impl PatchOperations {
    /// No operations yet.
    ///
    /// ```
    /// assert!(strata_sdk::PatchOperations::new().is_empty());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    fn push(
        mut self,
        op: &str,
        path: &str,
        value: Option<Result<Value, serde_json::Error>>,
    ) -> Self {
        let mut o = json!({"op": op, "path": path});
        match value {
            Some(Ok(v)) => o["value"] = v,
            Some(Err(e)) => {
                self.error = Some(format!(
                    "the value for {op} {path} cannot be serialized: {e}"
                ))
            }
            None => {}
        }
        self.ops.push(o);
        self
    }

    /// Adds a property, or inserts into an array (`/tags/-` appends).
    ///
    /// ```
    /// let ops = strata_sdk::PatchOperations::new().add("/tags/0", "first");
    /// # let _ = ops;
    /// ```
    pub fn add(self, path: &str, value: impl Serialize) -> Self {
        self.push("add", path, Some(serde_json::to_value(value)))
    }

    /// Sets a property (creating it) or an array element.
    ///
    /// ```
    /// let ops = strata_sdk::PatchOperations::new().set("/address/city", "Oslo");
    /// # let _ = ops;
    /// ```
    pub fn set(self, path: &str, value: impl Serialize) -> Self {
        self.push("set", path, Some(serde_json::to_value(value)))
    }

    /// Replaces an existing value (400 if the path does not exist).
    ///
    /// ```
    /// let ops = strata_sdk::PatchOperations::new().replace("/price", 9.5);
    /// # let _ = ops;
    /// ```
    pub fn replace(self, path: &str, value: impl Serialize) -> Self {
        self.push("replace", path, Some(serde_json::to_value(value)))
    }

    /// Removes a value (400 if the path does not exist).
    ///
    /// ```
    /// let ops = strata_sdk::PatchOperations::new().remove("/temp");
    /// # let _ = ops;
    /// ```
    pub fn remove(self, path: &str) -> Self {
        self.push("remove", path, None)
    }

    /// Adds a number to a numeric value (creating it when absent).
    ///
    /// ```
    /// let ops = strata_sdk::PatchOperations::new().incr("/stock", -3);
    /// # let _ = ops;
    /// ```
    pub fn incr(self, path: &str, by: impl Serialize) -> Self {
        self.push("incr", path, Some(serde_json::to_value(by)))
    }

    /// Moves a value from one path to another.
    ///
    /// ```
    /// let ops = strata_sdk::PatchOperations::new().move_path("/draftTitle", "/title");
    /// # let _ = ops;
    /// ```
    pub fn move_path(mut self, from: &str, path: &str) -> Self {
        self.ops
            .push(json!({"op": "move", "from": from, "path": path}));
        self
    }

    /// Only apply when the item matches this filter (`FROM c WHERE ...`); 412 otherwise.
    ///
    /// ```
    /// let ops = strata_sdk::PatchOperations::new().set("/x", 1).condition("FROM c WHERE c.x = 0");
    /// # let _ = ops;
    /// ```
    pub fn condition(mut self, filter: impl Into<String>) -> Self {
        self.condition = Some(filter.into());
        self
    }

    /// Number of operations.
    ///
    /// ```
    /// assert_eq!(strata_sdk::PatchOperations::new().remove("/a").len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether there are no operations.
    ///
    /// ```
    /// assert!(strata_sdk::PatchOperations::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    pub(crate) fn to_body(&self) -> Result<Value, Error> {
        if let Some(e) = &self.error {
            return Err(Error::invalid(e.clone()));
        }
        let mut b = json!({"operations": self.ops});
        if let Some(c) = &self.condition {
            b["condition"] = Value::String(c.clone());
        }
        Ok(b)
    }
}
