//! Transactional batches.

use crate::client::{RawResponse, Request};
use crate::{Error, PartitionKey, PatchOperations};
use reqwest::Method;
use serde::Serialize;
use serde_json::{Value, json};
use strata_query::protocol::header;

/// Up to 100 operations on one logical partition, applied all or nothing.
///
/// ```
/// use strata_sdk::{PatchOperations, TransactionalBatch};
/// let b = TransactionalBatch::new("tenant1")
///     .create_item(&serde_json::json!({"id": "a", "pk": "tenant1"}))
///     .upsert_item(&serde_json::json!({"id": "b", "pk": "tenant1"}))
///     .read_item("a")
///     .replace_item("b", &serde_json::json!({"id": "b", "pk": "tenant1", "v": 2}))
///     .patch_item("b", PatchOperations::new().incr("/v", 1))
///     .delete_item("a");
/// assert_eq!(b.len(), 6);
/// ```
#[derive(Debug, Clone)]
pub struct TransactionalBatch {
    pub(crate) partition_key: PartitionKey,
    ops: Vec<Value>,
    error: Option<String>,
}

impl TransactionalBatch {
    /// A batch on the logical partition `pk`.
    ///
    /// ```
    /// let b = strata_sdk::TransactionalBatch::new(strata_sdk::PartitionKeyBuilder::new().add("t").add("u").build());
    /// assert!(b.is_empty());
    /// ```
    pub fn new(pk: impl Into<PartitionKey>) -> Self {
        Self {
            partition_key: pk.into(),
            ops: Vec::new(),
            error: None,
        }
    }

    fn body_op(
        mut self,
        kind: &str,
        id: Option<&str>,
        item: Option<Result<Value, serde_json::Error>>,
    ) -> Self {
        let mut o = json!({"operationType": kind});
        if let Some(id) = id {
            o["id"] = Value::String(id.to_string());
        }
        match item {
            Some(Ok(v)) => o["resourceBody"] = v,
            Some(Err(e)) => self.error = Some(format!("a {kind} item cannot be serialized: {e}")),
            None => {}
        }
        self.ops.push(o);
        self
    }

    /// Creates an item.
    ///
    /// ```
    /// let b = strata_sdk::TransactionalBatch::new("p").create_item(&serde_json::json!({"id": "1", "pk": "p"}));
    /// # let _ = b;
    /// ```
    pub fn create_item(self, item: &impl Serialize) -> Self {
        self.body_op("Create", None, Some(serde_json::to_value(item)))
    }

    /// Creates or replaces an item.
    ///
    /// ```
    /// let b = strata_sdk::TransactionalBatch::new("p").upsert_item(&serde_json::json!({"id": "1", "pk": "p"}));
    /// # let _ = b;
    /// ```
    pub fn upsert_item(self, item: &impl Serialize) -> Self {
        self.body_op("Upsert", None, Some(serde_json::to_value(item)))
    }

    /// Replaces an item.
    ///
    /// ```
    /// let b = strata_sdk::TransactionalBatch::new("p").replace_item("1", &serde_json::json!({"id": "1", "pk": "p"}));
    /// # let _ = b;
    /// ```
    pub fn replace_item(self, id: &str, item: &impl Serialize) -> Self {
        self.body_op("Replace", Some(id), Some(serde_json::to_value(item)))
    }

    /// Reads an item.
    ///
    /// ```
    /// let b = strata_sdk::TransactionalBatch::new("p").read_item("1");
    /// # let _ = b;
    /// ```
    pub fn read_item(self, id: &str) -> Self {
        self.body_op("Read", Some(id), None)
    }

    /// Deletes an item.
    ///
    /// ```
    /// let b = strata_sdk::TransactionalBatch::new("p").delete_item("1");
    /// # let _ = b;
    /// ```
    pub fn delete_item(self, id: &str) -> Self {
        self.body_op("Delete", Some(id), None)
    }

    /// Patches an item.
    ///
    /// ```
    /// let b = strata_sdk::TransactionalBatch::new("p").patch_item("1", strata_sdk::PatchOperations::new().set("/x", 1));
    /// # let _ = b;
    /// ```
    pub fn patch_item(mut self, id: &str, ops: PatchOperations) -> Self {
        match ops.to_body() {
            Ok(b) => self
                .ops
                .push(json!({"operationType": "Patch", "id": id, "resourceBody": b})),
            Err(e) => self.error = Some(e.message().to_string()),
        }
        self
    }

    /// Makes the last operation conditional on the item's etag.
    ///
    /// ```
    /// let b = strata_sdk::TransactionalBatch::new("p").delete_item("1").if_match("\"etag\"");
    /// # let _ = b;
    /// ```
    pub fn if_match(mut self, etag: impl Into<String>) -> Self {
        if let Some(last) = self.ops.last_mut() {
            last["ifMatch"] = Value::String(etag.into());
        }
        self
    }

    /// Number of operations.
    ///
    /// ```
    /// assert_eq!(strata_sdk::TransactionalBatch::new("p").read_item("x").len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch has no operations.
    ///
    /// ```
    /// assert!(strata_sdk::TransactionalBatch::new("p").is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    pub(crate) fn into_parts(self) -> Result<(PartitionKey, Value), Error> {
        if let Some(e) = self.error {
            return Err(Error::invalid(e));
        }
        Ok((self.partition_key, Value::Array(self.ops)))
    }
}

/// The result of one batch operation.
///
/// ```no_run
/// # async fn f(c: strata_sdk::ContainerClient, b: strata_sdk::TransactionalBatch) -> Result<(), strata_sdk::Error> {
/// for r in c.execute_batch(b).await?.results { println!("{} {:?}", r.status, r.etag); }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct BatchOperationResult {
    /// The operation's status (201, 200, 204; on failure the real status or 424).
    pub status: u16,
    /// The item's etag after the operation.
    pub etag: Option<String>,
    /// The item (creates, reads, replaces, patches).
    pub resource: Option<Value>,
    /// Request units of this operation.
    pub request_charge: f64,
}

/// The result of a batch.
///
/// ```no_run
/// # async fn f(c: strata_sdk::ContainerClient, b: strata_sdk::TransactionalBatch) -> Result<(), strata_sdk::Error> {
/// let r = c.execute_batch(b).await?;
/// if !r.is_success() { println!("nothing applied; operation {:?} failed", r.failed_index()); }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct BatchResponse {
    /// 200 when everything applied, 207 when nothing did.
    pub status: u16,
    /// One result per operation, in order.
    pub results: Vec<BatchOperationResult>,
    /// Total request units.
    pub request_charge: f64,
}

impl BatchResponse {
    /// Whether every operation was applied.
    ///
    /// ```
    /// let r = strata_sdk::BatchResponse { status: 200, results: vec![], request_charge: 0.0 };
    /// assert!(r.is_success());
    /// ```
    pub fn is_success(&self) -> bool {
        self.status == 200
    }

    /// The operation that made the batch fail.
    ///
    /// ```
    /// let r = strata_sdk::BatchResponse { status: 200, results: vec![], request_charge: 0.0 };
    /// assert_eq!(r.failed_index(), None);
    /// ```
    pub fn failed_index(&self) -> Option<usize> {
        if self.is_success() {
            return None;
        }
        self.results
            .iter()
            .position(|r| r.status != 424 && r.status >= 400)
    }
}

pub(crate) fn response(r: RawResponse) -> Result<BatchResponse, Error> {
    let v = r.json()?;
    let results = v
        .as_array()
        .map(|a| {
            a.iter()
                .map(|o| BatchOperationResult {
                    status: o["statusCode"].as_u64().unwrap_or(0) as u16,
                    etag: o["eTag"].as_str().map(str::to_string),
                    resource: o.get("resourceBody").cloned(),
                    request_charge: o["requestCharge"].as_f64().unwrap_or(0.0),
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(BatchResponse {
        status: r.status,
        results,
        request_charge: r.charge(),
    })
}

/// Transactional batches on a container.
impl crate::ContainerClient {
    /// Executes a transactional batch: all operations on one logical partition, all or
    /// nothing.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// use strata_sdk::TransactionalBatch;
    /// let batch = TransactionalBatch::new("tenant1")
    ///     .create_item(&serde_json::json!({"id": "a", "pk": "tenant1"}))
    ///     .delete_item("old");
    /// let r = c.execute_batch(batch).await?;
    /// assert!(r.is_success());
    /// # Ok(()) }
    /// ```
    pub async fn execute_batch(
        &self,
        batch: TransactionalBatch,
    ) -> Result<crate::BatchResponse, Error> {
        self.full_key(&batch.partition_key).await?;
        let (pk, body) = batch.into_parts()?;
        let req = Request::new(Method::POST, self.docs())
            .json(&body)
            .header(header::PARTITION_KEY, pk.to_header())
            .header(header::IS_BATCH_REQUEST, "True")
            .header(header::BATCH_ATOMIC, "True");
        let r = self.client.send(req).await?;
        crate::batch::response(r)
    }
}
