//! `read_many`: many items by (id, partition key) in one query per physical partition, as the
//! official SDKs do, instead of one point read each.

use crate::client::Request;
use crate::{ContainerClient, Error, PartitionKey, PartitionKeyValue};
use futures::{StreamExt, TryStreamExt};
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use strata_query::pk::EpkRange;
use strata_query::protocol::header;

/// Items per query (keeps each query well under the service's text and parameter limits).
const CHUNK: usize = 100;
/// Queries in flight at once.
const CONCURRENCY: usize = 8;

/// `c["a"]["b"]` for the path `/a/b`.
fn path_expr(path: &str) -> String {
    let mut e = String::from("c");
    for seg in path.split('/').filter(|s| !s.is_empty()) {
        let seg = seg.trim_matches('"');
        e.push_str(&format!("[{}]", Value::String(seg.to_string())));
    }
    e
}

/// One item's condition, with its parameters.
fn condition(
    paths: &[String],
    n: usize,
    id: &str,
    pk: &PartitionKey,
    params: &mut Vec<Value>,
) -> String {
    let mut parts = vec![format!("c.id = @id{n}")];
    params.push(json!({"name": format!("@id{n}"), "value": id}));
    for (level, (path, v)) in paths.iter().zip(pk.values()).enumerate() {
        let e = path_expr(path);
        match v {
            PartitionKeyValue::Undefined => parts.push(format!("NOT IS_DEFINED({e})")),
            PartitionKeyValue::Null => parts.push(format!("IS_NULL({e})")),
            other => {
                let name = format!("@k{n}_{level}");
                parts.push(format!("{e} = {name}"));
                params.push(json!({"name": name, "value": other.to_json()}));
            }
        }
    }
    format!("({})", parts.join(" AND "))
}

impl ContainerClient {
    /// Reads many items by id and full partition key: one query per physical partition
    /// holding some of them (at most 100 items each, eight at a time), following splits.
    /// Items that do not exist are left out; the rest come back in the order asked.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// use strata_sdk::PartitionKeyBuilder;
    /// let k = |t: &str, u: &str| PartitionKeyBuilder::new().add(t).add(u).add("s1").build();
    /// let items: Vec<serde_json::Value> = c
    ///     .read_many(&[("1".to_string(), k("contoso", "alice")), ("7".to_string(), k("fabrikam", "bob"))])
    ///     .await?;
    /// # let _ = items; Ok(()) }
    /// ```
    pub async fn read_many<T: DeserializeOwned>(
        &self,
        items: &[(String, PartitionKey)],
    ) -> Result<Vec<T>, Error> {
        let mut attempt = 0;
        loop {
            match self.read_many_once(items).await {
                // A range split under us: read the new ranges and go again.
                Err(e) if e.status() == Some(410) && attempt < 3 => attempt += 1,
                other => return other,
            }
        }
    }

    async fn read_many_once<T: DeserializeOwned>(
        &self,
        items: &[(String, PartitionKey)],
    ) -> Result<Vec<T>, Error> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let def = self.partition_key_definition().await?;
        let ranges = self.read_partition_key_ranges().await?;
        // Which physical partition each item lives in.
        let mut by_range: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        let mut epks = Vec::with_capacity(items.len());
        for (i, (_, pk)) in items.iter().enumerate() {
            let qpk = strata_query::pk::PartitionKey::from_header(&pk.to_header())
                .map_err(|e| Error::invalid(e.0))?;
            if qpk.len() != def.paths().len() {
                return Err(Error::invalid(format!(
                    "read_many needs full partition keys: {} has {} of {} levels",
                    pk.to_header(),
                    qpk.len(),
                    def.paths().len()
                )));
            }
            let epk = strata_query::pk::epk::effective_partition_key(&def.0, &qpk)
                .map_err(|e| Error::invalid(e.0))?;
            let range = ranges
                .iter()
                .find(|r| {
                    EpkRange::new(r.min_inclusive.clone(), r.max_exclusive.clone()).contains(&epk)
                })
                .ok_or_else(|| Error::invalid(format!("no partition key range holds {epk}")))?;
            by_range.entry(range.id.clone()).or_default().push(i);
            epks.push(epk);
        }
        let mut queries = Vec::new();
        for (range, idx) in by_range {
            for chunk in idx.chunks(CHUNK) {
                let mut params = Vec::new();
                let conds: Vec<String> = chunk
                    .iter()
                    .enumerate()
                    .map(|(n, &i)| condition(def.paths(), n, &items[i].0, &items[i].1, &mut params))
                    .collect();
                let sql = format!("SELECT * FROM c WHERE {}", conds.join(" OR "));
                queries.push((range.clone(), json!({"query": sql, "parameters": params})));
            }
        }
        let pages: Vec<Vec<Value>> = futures::stream::iter(queries)
            .map(|(range, body)| self.query_range(range, body))
            .buffer_unordered(CONCURRENCY)
            .try_collect()
            .await?;
        // Back in the order asked, by (id, EPK).
        let mut found: HashMap<(String, String), Value> = HashMap::new();
        for doc in pages.into_iter().flatten() {
            let id = doc["id"].as_str().unwrap_or_default().to_string();
            let epk = strata_query::pk::epk::effective_partition_key(&def.0, &def.0.extract(&doc))
                .unwrap_or_default();
            found.insert((id, epk), doc);
        }
        items
            .iter()
            .zip(epks)
            .filter_map(|((id, _), epk)| found.remove(&(id.clone(), epk)))
            .map(|d| serde_json::from_value(d).map_err(Error::serde))
            .collect()
    }

    /// Every row of one query on one physical partition (all pages).
    async fn query_range(&self, range: String, body: Value) -> Result<Vec<Value>, Error> {
        let mut rows = Vec::new();
        let mut continuation: Option<String> = None;
        loop {
            let mut req = Request::new(Method::POST, format!("{}/docs", self.link))
                .json(&body)
                .header(header::IS_QUERY, "true")
                .header(header::CONTENT_TYPE, "application/query+json")
                .header(header::ENABLE_CROSS_PARTITION, "true")
                .header(header::PARTITION_KEY_RANGE_ID, range.clone());
            if let Some(c) = &continuation {
                req = req.header(header::CONTINUATION, c.clone());
            }
            let r = self.client.send(req).await?;
            let v = r.json()?;
            rows.extend(v["Documents"].as_array().cloned().unwrap_or_default());
            continuation = r.header(header::CONTINUATION).map(str::to_string);
            if continuation.is_none() {
                return Ok(rows);
            }
        }
    }
}
