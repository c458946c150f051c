//! Queries: text with typed parameters, options, and pages that report how strata routed them.

use crate::client::{Request, Wire};
use crate::{ContainerClient, Error, PartitionKey};
use futures::Stream;
use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use strata_query::protocol::header;

/// A Cosmos SQL query with named parameters.
///
/// ```
/// use strata_sdk::Query;
/// let q = Query::new("SELECT * FROM c WHERE c.TenantId = @t AND c.n > @n")
///     .param("@t", "contoso")
///     .param("@n", 5);
/// assert_eq!(q.text(), "SELECT * FROM c WHERE c.TenantId = @t AND c.n > @n");
/// ```
#[derive(Debug, Clone)]
pub struct Query {
    text: String,
    params: Vec<(String, Value)>,
    error: Option<String>,
}

impl Query {
    /// A query without parameters yet.
    ///
    /// ```
    /// let q = strata_sdk::Query::new("SELECT VALUE COUNT(1) FROM c");
    /// # let _ = q;
    /// ```
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            params: Vec::new(),
            error: None,
        }
    }

    /// Binds `@name` to any serializable value.
    ///
    /// ```
    /// let q = strata_sdk::Query::new("SELECT * FROM c WHERE ARRAY_CONTAINS(@tags, c.tag)").param("@tags", vec!["a", "b"]);
    /// # let _ = q;
    /// ```
    pub fn param(mut self, name: &str, value: impl Serialize) -> Self {
        let name = if name.starts_with('@') {
            name.to_string()
        } else {
            format!("@{name}")
        };
        match serde_json::to_value(value) {
            Ok(v) => self.params.push((name, v)),
            Err(e) => self.error = Some(format!("parameter {name} cannot be serialized: {e}")),
        }
        self
    }

    /// The query text.
    ///
    /// ```
    /// assert_eq!(strata_sdk::Query::new("SELECT 1").text(), "SELECT 1");
    /// ```
    pub fn text(&self) -> &str {
        &self.text
    }

    fn body(&self) -> Result<Value, Error> {
        if let Some(e) = &self.error {
            return Err(Error::invalid(e.clone()));
        }
        Ok(serde_json::json!({
            "query": self.text,
            "parameters": self.params.iter().map(|(n, v)| serde_json::json!({"name": n, "value": v})).collect::<Vec<_>>(),
        }))
    }
}

impl From<&str> for Query {
    fn from(s: &str) -> Self {
        Query::new(s)
    }
}

impl From<String> for Query {
    fn from(s: String) -> Self {
        Query::new(s)
    }
}

/// How a query runs.
///
/// ```
/// use strata_sdk::{PartitionKey, QueryOptions};
/// let opts = QueryOptions { partition_key: Some(PartitionKey::from("tenant1")), max_item_count: Some(50), ..Default::default() };
/// # let _ = opts;
/// ```
#[derive(Debug, Clone, Default)]
pub struct QueryOptions {
    /// Scope: a full key (one logical partition) or a hierarchical prefix.
    pub partition_key: Option<PartitionKey>,
    /// Items per page (the service's default when `None`).
    pub max_item_count: Option<u32>,
    /// Resume from a continuation token of an earlier page.
    pub continuation: Option<String>,
    /// Only items in this feed range (see [`crate::ContainerClient::feed_ranges`]).
    pub feed_range: Option<crate::FeedRange>,
}

/// How strata routed a query page (from the `x-strata-query-route` header); shared with the
/// server, which writes it.
pub use strata_query::protocol::QueryRoute;

/// One page of query results.
///
/// ```no_run
/// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
/// use futures::TryStreamExt;
/// let mut pages = std::pin::pin!(c.query_items::<serde_json::Value>("SELECT * FROM c", Default::default()));
/// if let Some(page) = pages.try_next().await? {
///     println!("{} items; resume with {:?}", page.items.len(), page.continuation);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct QueryPage<T> {
    /// The items of this page.
    pub items: Vec<T>,
    /// Token for the next page (None on the last page).
    pub continuation: Option<String>,
    /// Request units this page cost.
    pub request_charge: f64,
    /// How strata routed it (None against services that do not report it).
    pub route: Option<QueryRoute>,
    /// The request's activity id.
    pub activity_id: Option<String>,
}

struct State {
    container: ContainerClient,
    body: Result<Value, Error>,
    options: QueryOptions,
    next: Option<String>,
    done: bool,
    /// A query merged on the client (see [`crate::pipeline`]): its whole answer, once run.
    merged: Option<Vec<Value>>,
}

/// The next page of a client-merged query from `offset` (running the pipeline the first time).
async fn merged_page<T: DeserializeOwned>(
    st: &mut State,
    body: &Value,
    offset: usize,
) -> Result<QueryPage<T>, Error> {
    let mut charge = 0.0;
    if st.merged.is_none() {
        let (rows, ru) = crate::pipeline::run(
            &st.container,
            body,
            st.options.partition_key.as_ref(),
            st.options.feed_range.as_ref(),
        )
        .await?;
        st.merged = Some(rows);
        charge = ru;
    }
    let rows = st.merged.as_deref().unwrap_or_default();
    let size = st
        .options
        .max_item_count
        .map(|n| n as usize)
        .unwrap_or(100)
        .max(1);
    let end = offset.saturating_add(size).min(rows.len());
    let items = rows
        .get(offset.min(end)..end)
        .unwrap_or_default()
        .iter()
        .map(|d| serde_json::from_value(d.clone()).map_err(Error::serde))
        .collect::<Result<Vec<T>, Error>>()?;
    let continuation =
        (end < rows.len()).then(|| format!("{}{end}", crate::pipeline::TOKEN_PREFIX));
    st.done = continuation.is_none();
    st.next = continuation.clone();
    Ok(QueryPage {
        items,
        continuation,
        request_charge: charge,
        route: None,
        activity_id: None,
    })
}

pub(crate) fn pages<T: DeserializeOwned + Send + 'static>(
    container: ContainerClient,
    query: Query,
    options: QueryOptions,
) -> impl Stream<Item = Result<QueryPage<T>, Error>> + Send + 'static {
    let state = State {
        container,
        body: query.body(),
        next: options.continuation.clone(),
        options,
        done: false,
        merged: None,
    };
    futures::stream::try_unfold(state, |mut st| async move {
        if st.done {
            return Ok(None);
        }
        let body = match &st.body {
            Ok(b) => b.clone(),
            Err(e) => return Err(Error::invalid(e.message().to_string())),
        };
        if let Some(offset) = st
            .next
            .as_deref()
            .and_then(|t| t.strip_prefix(crate::pipeline::TOKEN_PREFIX))
        {
            let offset = offset.parse::<usize>().map_err(|_| {
                Error::invalid("the continuation token is not one this client issued")
            })?;
            let page = merged_page(&mut st, &body, offset).await?;
            return Ok(Some((page, st)));
        }
        let mut req = Request::new(Method::POST, format!("{}/docs", st.container.link))
            .json(&body)
            .wire(Wire::Query)
            .header(header::CONTENT_TYPE, "application/query+json")
            .header(header::IS_QUERY, "true")
            .header(header::ENABLE_CROSS_PARTITION, "true");
        if let Some(pk) = &st.options.partition_key {
            req = req.header(header::PARTITION_KEY, pk.to_header());
        }
        if let Some(n) = st.options.max_item_count {
            req = req.header(header::MAX_ITEM_COUNT, n.to_string());
        }
        if let Some(r) = &st.options.feed_range {
            for (k, v) in r.headers() {
                req = req.header(k, v);
            }
        }
        if let Some(c) = &st.next {
            req = req.header(header::CONTINUATION, c.clone());
        }
        let r = match st.container.client.send(req).await {
            // The gateway will not merge this query across partitions: merge it here.
            Err(e) if e.status() == Some(400) && e.sub_status() == Some(1004) => {
                let page = merged_page(&mut st, &body, 0).await?;
                return Ok(Some((page, st)));
            }
            other => other?,
        };
        let v = r.json()?;
        let docs = v["Documents"].as_array().cloned().unwrap_or_default();
        let items = docs
            .into_iter()
            .map(|d| serde_json::from_value(d).map_err(Error::serde))
            .collect::<Result<Vec<T>, Error>>()?;
        let continuation = r.header(header::CONTINUATION).map(str::to_string);
        st.done = continuation.is_none();
        st.next = continuation.clone();
        let page = QueryPage {
            items,
            continuation,
            request_charge: r.charge(),
            route: r.header(header::QUERY_ROUTE).and_then(QueryRoute::parse),
            activity_id: r.header(header::ACTIVITY_ID).map(str::to_string),
        };
        Ok(Some((page, st)))
    })
}

/// Queries on a container (the paging and merging above live in this module).
impl crate::ContainerClient {
    /// Runs a query; returns a stream of pages. With `partition_key` set (a full key or a
    /// hierarchical prefix) the query is scoped to it; otherwise it runs across partitions.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// use futures::TryStreamExt;
    /// use strata_sdk::{PartitionKeyBuilder, Query, QueryOptions};
    /// let q = Query::new("SELECT * FROM c WHERE c.n > @n").param("@n", 10);
    /// let opts = QueryOptions { partition_key: Some(PartitionKeyBuilder::new().add("t1").build()), ..Default::default() };
    /// let mut pages = std::pin::pin!(c.query_items::<serde_json::Value>(q, opts));
    /// while let Some(page) = pages.try_next().await? {
    ///     println!("{} items, route {:?}, {} RU", page.items.len(), page.route, page.request_charge);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn query_items<T: DeserializeOwned + Send + 'static>(
        &self,
        query: impl Into<Query>,
        options: QueryOptions,
    ) -> impl Stream<Item = Result<QueryPage<T>, Error>> + Send + 'static {
        crate::query::pages(self.clone(), query.into(), options)
    }

    /// Runs a query to the end and collects every item.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// let ids: Vec<String> = c.query_all("SELECT VALUE c.id FROM c", Default::default()).await?;
    /// # let _ = ids; Ok(()) }
    /// ```
    pub async fn query_all<T: DeserializeOwned + Send + 'static>(
        &self,
        query: impl Into<Query>,
        options: QueryOptions,
    ) -> Result<Vec<T>, Error> {
        use futures::TryStreamExt;
        let pages: Vec<QueryPage<T>> = self.query_items(query, options).try_collect().await?;
        Ok(pages.into_iter().flat_map(|p| p.items).collect())
    }
}
