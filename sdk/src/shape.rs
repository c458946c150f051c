//! The shape of Azure's official Rust crate, `azure_data_cosmos`, beside strata-sdk's own:
//! `database_client` / `container_client` handles, partition keys from tuples, and queries as
//! a stream of items that turns into pages (`into_pages`). The migration table in the crate
//! docs maps each call.

use crate::{
    ContainerClient, CosmosClient, DatabaseClient, Error, PartitionKey, PartitionKeyValue, Query,
    QueryOptions, QueryPage,
};
use futures::Stream;
use serde::de::DeserializeOwned;
use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

impl CosmosClient {
    /// A handle to a database, as `azure_data_cosmos` names it (same as [`CosmosClient::database`]).
    ///
    /// ```
    /// # let client = strata_sdk::CosmosClient::new("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY).unwrap();
    /// assert_eq!(client.database_client("app").id(), "app");
    /// ```
    pub fn database_client(&self, id: &str) -> DatabaseClient {
        self.database(id)
    }
}

impl DatabaseClient {
    /// A handle to a container, as `azure_data_cosmos` names it (same as
    /// [`DatabaseClient::container`]).
    ///
    /// ```
    /// # let client = strata_sdk::CosmosClient::new("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY).unwrap();
    /// let c = client.database_client("app").container_client("events");
    /// assert_eq!(c.id(), "events");
    /// ```
    pub fn container_client(&self, id: &str) -> ContainerClient {
        self.container(id)
    }
}

impl<A: Into<PartitionKeyValue>, B: Into<PartitionKeyValue>> From<(A, B)> for PartitionKey {
    /// A two-level hierarchical key.
    ///
    /// ```
    /// let pk: strata_sdk::PartitionKey = ("contoso", "alice").into();
    /// assert_eq!(pk.to_header(), r#"["contoso","alice"]"#);
    /// ```
    fn from((a, b): (A, B)) -> Self {
        PartitionKey::from_values(vec![a.into(), b.into()]).unwrap_or(PartitionKey::EMPTY)
    }
}

impl<A: Into<PartitionKeyValue>, B: Into<PartitionKeyValue>, C: Into<PartitionKeyValue>>
    From<(A, B, C)> for PartitionKey
{
    /// A three-level hierarchical key.
    ///
    /// ```
    /// let pk: strata_sdk::PartitionKey = ("contoso", "alice", 7).into();
    /// assert_eq!(pk.to_header(), r#"["contoso","alice",7]"#);
    /// ```
    fn from((a, b, c): (A, B, C)) -> Self {
        PartitionKey::from_values(vec![a.into(), b.into(), c.into()]).unwrap_or(PartitionKey::EMPTY)
    }
}

type Pages<T> = Pin<Box<dyn Stream<Item = Result<QueryPage<T>, Error>> + Send>>;

/// A query's results as a stream of items; [`ItemPager::into_pages`] gives the pages (with
/// their route, charge and continuation) instead.
///
/// ```no_run
/// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
/// use futures::TryStreamExt;
/// let mut items = c.query::<serde_json::Value>("SELECT * FROM c", None);
/// while let Some(item) = items.try_next().await? {
///     println!("{item}");
/// }
/// # Ok(()) }
/// ```
pub struct ItemPager<T> {
    pages: Pages<T>,
    buffered: VecDeque<T>,
}

impl<T> ItemPager<T> {
    /// The pages instead of the items.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// use futures::TryStreamExt;
    /// let mut pages = c.query::<serde_json::Value>("SELECT * FROM c", None).into_pages();
    /// while let Some(page) = pages.try_next().await? {
    ///     println!("{} items, {} RU, next {:?}", page.items.len(), page.request_charge, page.continuation);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn into_pages(self) -> impl Stream<Item = Result<QueryPage<T>, Error>> + Send {
        self.pages
    }
}

impl<T: Unpin> Stream for ItemPager<T> {
    type Item = Result<T, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(item) = this.buffered.pop_front() {
                return Poll::Ready(Some(Ok(item)));
            }
            match this.pages.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(page))) => this.buffered.extend(page.items),
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl ContainerClient {
    /// Runs a query as `azure_data_cosmos` does: a stream of items (and of pages through
    /// [`ItemPager::into_pages`]), options optional. Cross-partition queries the gateway will
    /// not merge are merged here.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// use futures::TryStreamExt;
    /// use strata_sdk::QueryOptions;
    /// let tenant = QueryOptions { partition_key: Some(("contoso", "alice").into()), ..Default::default() };
    /// let ids: Vec<String> = c.query("SELECT VALUE c.id FROM c", Some(tenant)).try_collect().await?;
    /// # let _ = ids; Ok(()) }
    /// ```
    pub fn query<T: DeserializeOwned + Send + 'static>(
        &self,
        query: impl Into<Query>,
        options: Option<QueryOptions>,
    ) -> ItemPager<T> {
        ItemPager {
            pages: Box::pin(self.query_items(query, options.unwrap_or_default())),
            buffered: VecDeque::new(),
        }
    }
}
