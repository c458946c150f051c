//! Bulk execution: many independent operations, grouped by the physical partition (partition
//! key range) their keys hash to and sent 100 to a request as non-atomic batches, several
//! requests at once, as the official SDKs' bulk executors do. Each operation succeeds or fails
//! on its own; throttled (429) and re-partitioned (410) operations are retried.

use crate::client::Request;
use crate::{BatchOperationResult, ContainerClient, Error, PartitionKey, PatchOperations};
use futures::StreamExt;
use reqwest::Method;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;
use strata_query::pk::EpkRange;
use strata_query::protocol::header;

/// Operations per request (the service's limit).
const PER_REQUEST: usize = 100;
/// Most rounds of retries for throttled or re-partitioned operations (each waits what the
/// server asked, and all of them at most the client's `RetryOptions::max_total_wait`).
const MAX_ROUNDS: usize = 200;

/// One operation of a bulk execution.
///
/// ```
/// use strata_sdk::BulkOperation;
/// let ops = vec![
///     BulkOperation::upsert(&serde_json::json!({"id": "1", "pk": "a"})).unwrap(),
///     BulkOperation::delete("2", "a"),
/// ];
/// assert_eq!(ops.len(), 2);
/// ```
#[derive(Debug, Clone)]
pub struct BulkOperation {
    body: Value,
    /// The key, when given; else read from the item with the container's definition.
    partition_key: Option<PartitionKey>,
}

impl BulkOperation {
    fn new(kind: &str, id: Option<&str>, item: Option<Value>, pk: Option<PartitionKey>) -> Self {
        let mut body = json!({ "operationType": kind });
        if let Some(id) = id {
            body["id"] = Value::String(id.to_string());
        }
        if let Some(item) = item {
            body["resourceBody"] = item;
        }
        Self {
            body,
            partition_key: pk,
        }
    }

    /// Creates an item (its key read from it).
    ///
    /// ```
    /// let op = strata_sdk::BulkOperation::create(&serde_json::json!({"id": "1", "pk": "a"})).unwrap();
    /// # let _ = op;
    /// ```
    pub fn create(item: &impl Serialize) -> Result<Self, Error> {
        let v = serde_json::to_value(item).map_err(Error::serde)?;
        Ok(Self::new("Create", None, Some(v), None))
    }

    /// Creates or replaces an item (its key read from it).
    ///
    /// ```
    /// let op = strata_sdk::BulkOperation::upsert(&serde_json::json!({"id": "1", "pk": "a"})).unwrap();
    /// # let _ = op;
    /// ```
    pub fn upsert(item: &impl Serialize) -> Result<Self, Error> {
        let v = serde_json::to_value(item).map_err(Error::serde)?;
        Ok(Self::new("Upsert", None, Some(v), None))
    }

    /// Replaces item `id` (its key read from the new version).
    ///
    /// ```
    /// let op = strata_sdk::BulkOperation::replace("1", &serde_json::json!({"id": "1", "pk": "a", "n": 2})).unwrap();
    /// # let _ = op;
    /// ```
    pub fn replace(id: &str, item: &impl Serialize) -> Result<Self, Error> {
        let v = serde_json::to_value(item).map_err(Error::serde)?;
        Ok(Self::new("Replace", Some(id), Some(v), None))
    }

    /// Reads item `id` of partition `pk`.
    ///
    /// ```
    /// let op = strata_sdk::BulkOperation::read("1", "a");
    /// # let _ = op;
    /// ```
    pub fn read(id: &str, pk: impl Into<PartitionKey>) -> Self {
        Self::new("Read", Some(id), None, Some(pk.into()))
    }

    /// Deletes item `id` of partition `pk`.
    ///
    /// ```
    /// let op = strata_sdk::BulkOperation::delete("1", "a");
    /// # let _ = op;
    /// ```
    pub fn delete(id: &str, pk: impl Into<PartitionKey>) -> Self {
        Self::new("Delete", Some(id), None, Some(pk.into()))
    }

    /// Patches item `id` of partition `pk`.
    ///
    /// ```
    /// let op = strata_sdk::BulkOperation::patch("1", "a", strata_sdk::PatchOperations::new().incr("/n", 1)).unwrap();
    /// # let _ = op;
    /// ```
    pub fn patch(
        id: &str,
        pk: impl Into<PartitionKey>,
        ops: PatchOperations,
    ) -> Result<Self, Error> {
        let mut op = Self::new("Patch", Some(id), None, Some(pk.into()));
        op.body["resourceBody"] = ops.to_body()?;
        Ok(op)
    }
}

/// Options of a bulk execution.
///
/// ```
/// let o = strata_sdk::BulkOptions { concurrency: 16 };
/// # let _ = o;
/// ```
#[derive(Debug, Clone)]
pub struct BulkOptions {
    /// Requests in flight at once (default 8).
    pub concurrency: usize,
}

impl Default for BulkOptions {
    fn default() -> Self {
        Self { concurrency: 8 }
    }
}

/// An operation to send: its index in the input, body and EPK.
struct Pending {
    index: usize,
    body: Value,
    epk: String,
}

fn failed(status: u16, message: &str) -> BatchOperationResult {
    BatchOperationResult {
        status,
        etag: None,
        resource: Some(json!({ "message": message })),
        request_charge: 0.0,
    }
}

impl ContainerClient {
    /// Runs independent operations in bulk; returns one result per operation, in order. An
    /// operation that fails (409, 404, 412...) does not stop the others; throttled (429) and
    /// re-partitioned (410) ones are retried.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// use strata_sdk::BulkOperation;
    /// let ops = (0..1000)
    ///     .map(|i| BulkOperation::upsert(&serde_json::json!({"id": i.to_string(), "TenantId": "t", "UserId": "u", "SessionId": "s"})))
    ///     .collect::<Result<Vec<_>, _>>()?;
    /// let results = c.execute_bulk(ops, Default::default()).await?;
    /// assert!(results.iter().all(|r| r.status < 300));
    /// # Ok(()) }
    /// ```
    pub async fn execute_bulk(
        &self,
        ops: Vec<BulkOperation>,
        opts: BulkOptions,
    ) -> Result<Vec<BatchOperationResult>, Error> {
        let def = self.partition_key_definition().await?;
        let mut results: Vec<Option<BatchOperationResult>> = vec![None; ops.len()];
        let mut pending = Vec::with_capacity(ops.len());
        for (index, op) in ops.into_iter().enumerate() {
            let pk = match op.partition_key {
                Some(pk) => pk,
                None => def.key_of(op.body.get("resourceBody").unwrap_or(&Value::Null)),
            };
            let qpk = strata_query::pk::PartitionKey::from_header(&pk.to_header())
                .map_err(|e| Error::invalid(e.0))?;
            match strata_query::pk::epk::effective_partition_key(&def.0, &qpk) {
                Ok(epk) => {
                    let mut body = op.body;
                    body["partitionKey"] = Value::String(pk.to_header());
                    pending.push(Pending { index, body, epk });
                }
                Err(e) => results[index] = Some(failed(400, &e.0)),
            }
        }
        let budget = self.client.inner.retry.max_total_wait;
        let mut waited = Duration::ZERO;
        let mut wait = Duration::ZERO;
        for round in 0..MAX_ROUNDS {
            if pending.is_empty() {
                break;
            }
            if round > 0 {
                // What the throttled operations were told to wait, at least a few ms.
                let w = wait.max(Duration::from_millis(5));
                if waited + w > budget {
                    break;
                }
                tokio::time::sleep(w).await;
                waited += w;
            }
            wait = Duration::ZERO;
            let ranges = self.read_partition_key_ranges().await?;
            let mut by_range: BTreeMap<String, Vec<Pending>> = BTreeMap::new();
            for p in pending.drain(..) {
                let range = ranges
                    .iter()
                    .find(|r| {
                        EpkRange::new(r.min_inclusive.clone(), r.max_exclusive.clone())
                            .contains(&p.epk)
                    })
                    .map(|r| r.id.clone())
                    .unwrap_or_default();
                by_range.entry(range).or_default().push(p);
            }
            let mut requests = Vec::new();
            for (range, mut ops) in by_range {
                while !ops.is_empty() {
                    let rest = ops.split_off(ops.len().min(PER_REQUEST));
                    requests.push((range.clone(), std::mem::replace(&mut ops, rest)));
                }
            }
            let mut answered = futures::stream::iter(requests)
                .map(|(range, ops)| async move {
                    let out = self.send_bulk(&range, &ops).await;
                    (ops, out)
                })
                .buffer_unordered(opts.concurrency.max(1));
            while let Some((ops, out)) = answered.next().await {
                match out {
                    Ok(rs) => {
                        for (p, (r, after)) in ops.into_iter().zip(rs) {
                            if matches!(r.status, 429 | 410) && round + 1 < MAX_ROUNDS {
                                wait = wait.max(after);
                                pending.push(p);
                            } else {
                                results[p.index] = Some(r);
                            }
                        }
                    }
                    Err(e) if matches!(e.status(), Some(410) | Some(429)) => {
                        wait = wait.max(e.retry_after().unwrap_or_default());
                        pending.extend(ops);
                    }
                    Err(e) => {
                        for p in ops {
                            results[p.index] =
                                Some(failed(e.status().unwrap_or(0), &e.to_string()));
                        }
                    }
                }
            }
        }
        for p in pending {
            results[p.index] = Some(failed(
                429,
                "still throttled after the client's retry budget",
            ));
        }
        Ok(results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| failed(429, "still throttled after every retry")))
            .collect())
    }

    /// One non-atomic batch to one partition key range: each operation's result and how
    /// long the server asked it to wait (throttled ones).
    async fn send_bulk(
        &self,
        range: &str,
        ops: &[Pending],
    ) -> Result<Vec<(BatchOperationResult, Duration)>, Error> {
        let body = Value::Array(ops.iter().map(|p| p.body.clone()).collect());
        let req = Request::new(Method::POST, format!("{}/docs", self.link))
            .json(&body)
            .header(header::IS_BATCH_REQUEST, "True")
            .header(header::BATCH_ATOMIC, "False")
            .header(header::BATCH_CONTINUE_ON_ERROR, "True")
            .header(header::PARTITION_KEY_RANGE_ID, range.to_string());
        let r = self.client.send(req).await?;
        let waits: Vec<Duration> = r
            .json()?
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|o| {
                        Duration::from_secs_f64(
                            o["retryAfterMilliseconds"].as_f64().unwrap_or(0.0) / 1000.0,
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut results: Vec<(BatchOperationResult, Duration)> = crate::batch::response(r)?
            .results
            .into_iter()
            .zip(waits.into_iter().chain(std::iter::repeat(Duration::ZERO)))
            .collect();
        results.resize_with(ops.len(), || {
            (
                failed(500, "the server answered fewer results than operations"),
                Duration::ZERO,
            )
        });
        Ok(results)
    }
}
