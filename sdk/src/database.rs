//! Databases and their containers.

use crate::client::{Request, seg};
use crate::{
    ContainerClient, ContainerProperties, CosmosClient, DatabaseProperties, Error, Throughput,
};
use reqwest::Method;
use strata_query::protocol::header;

/// A handle to one database.
///
/// ```no_run
/// # async fn f(client: strata_sdk::CosmosClient) -> Result<(), strata_sdk::Error> {
/// use strata_sdk::{ContainerProperties, PartitionKeyDefinition};
/// let db = client.create_database_if_not_exists("app").await?;
/// let events = db
///     .create_container_if_not_exists(ContainerProperties::new(
///         "events",
///         PartitionKeyDefinition::hierarchical(["/TenantId", "/UserId", "/SessionId"])?,
///     ))
///     .await?;
/// # let _ = events; Ok(()) }
/// ```
#[derive(Clone)]
pub struct DatabaseClient {
    client: CosmosClient,
    id: String,
}

impl DatabaseClient {
    pub(crate) fn new(client: CosmosClient, id: &str) -> Self {
        Self {
            client,
            id: id.to_string(),
        }
    }

    pub(crate) fn client(&self) -> &CosmosClient {
        &self.client
    }

    fn link(&self) -> String {
        format!("/dbs/{}", seg(&self.id))
    }

    /// The database id.
    ///
    /// ```
    /// # let c = strata_sdk::CosmosClient::new("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY).unwrap();
    /// assert_eq!(c.database("x").id(), "x");
    /// ```
    pub fn id(&self) -> &str {
        &self.id
    }

    /// A handle to a container (no request is made).
    ///
    /// ```
    /// # let c = strata_sdk::CosmosClient::new("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY).unwrap();
    /// let events = c.database("app").container("events");
    /// assert_eq!(events.id(), "events");
    /// ```
    pub fn container(&self, id: &str) -> ContainerClient {
        ContainerClient::new(self.client.clone(), &self.id, id)
    }

    /// Reads the database's properties.
    ///
    /// ```no_run
    /// # async fn f(db: strata_sdk::DatabaseClient) -> Result<(), strata_sdk::Error> {
    /// let p = db.read().await?;
    /// # let _ = p; Ok(()) }
    /// ```
    pub async fn read(&self) -> Result<DatabaseProperties, Error> {
        let r = self
            .client
            .send(Request::new(Method::GET, self.link()))
            .await?;
        serde_json::from_slice(&r.body).map_err(Error::serde)
    }

    /// Deletes the database and everything in it.
    ///
    /// ```no_run
    /// # async fn f(db: strata_sdk::DatabaseClient) -> Result<(), strata_sdk::Error> {
    /// db.delete().await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete(&self) -> Result<(), Error> {
        self.client
            .send(Request::new(Method::DELETE, self.link()))
            .await
            .map(|_| ())
    }

    /// Creates a container (409 if it exists).
    ///
    /// ```no_run
    /// # async fn f(db: strata_sdk::DatabaseClient) -> Result<(), strata_sdk::Error> {
    /// use strata_sdk::{ContainerProperties, PartitionKeyDefinition};
    /// let c = db.create_container(ContainerProperties::new("orders", PartitionKeyDefinition::new("/customerId"))).await?;
    /// # let _ = c; Ok(()) }
    /// ```
    pub async fn create_container(
        &self,
        props: ContainerProperties,
    ) -> Result<ContainerClient, Error> {
        self.create(props, None).await
    }

    /// Creates a container with provisioned throughput (one physical partition per
    /// 10,000 RU/s).
    ///
    /// ```no_run
    /// # async fn f(db: strata_sdk::DatabaseClient) -> Result<(), strata_sdk::Error> {
    /// use strata_sdk::{ContainerProperties, PartitionKeyDefinition, Throughput};
    /// let c = db
    ///     .create_container_with_throughput(ContainerProperties::new("big", PartitionKeyDefinition::new("/pk")), Throughput::Manual(30_000))
    ///     .await?;
    /// # let _ = c; Ok(()) }
    /// ```
    pub async fn create_container_with_throughput(
        &self,
        props: ContainerProperties,
        throughput: Throughput,
    ) -> Result<ContainerClient, Error> {
        self.create(props, Some(throughput)).await
    }

    async fn create(
        &self,
        props: ContainerProperties,
        t: Option<Throughput>,
    ) -> Result<ContainerClient, Error> {
        let mut req =
            Request::new(Method::POST, format!("{}/colls", self.link())).json(&props.to_json());
        match t {
            Some(Throughput::Manual(n)) => {
                req = req.header(header::OFFER_THROUGHPUT, n.to_string())
            }
            Some(Throughput::Autoscale { max }) => {
                req = req.header(
                    header::OFFER_AUTOPILOT_SETTINGS,
                    format!("{{\"maxThroughput\":{max}}}"),
                )
            }
            None => {}
        }
        self.client.send(req).await?;
        let c = self.container(&props.id);
        c.remember_definition(props.partition_key.clone());
        Ok(c)
    }

    /// Creates a container unless it exists.
    ///
    /// ```no_run
    /// # async fn f(db: strata_sdk::DatabaseClient) -> Result<(), strata_sdk::Error> {
    /// use strata_sdk::{ContainerProperties, PartitionKeyDefinition};
    /// let c = db.create_container_if_not_exists(ContainerProperties::new("c", PartitionKeyDefinition::new("/pk"))).await?;
    /// # let _ = c; Ok(()) }
    /// ```
    pub async fn create_container_if_not_exists(
        &self,
        props: ContainerProperties,
    ) -> Result<ContainerClient, Error> {
        let id = props.id.clone();
        match self.create(props, None).await {
            Err(e) if e.is_conflict() => Ok(self.container(&id)),
            other => other,
        }
    }

    /// Lists the containers of the database.
    ///
    /// ```no_run
    /// # async fn f(db: strata_sdk::DatabaseClient) -> Result<(), strata_sdk::Error> {
    /// for c in db.list_containers().await? { println!("{} {:?}", c.id, c.partition_key.paths()); }
    /// # Ok(()) }
    /// ```
    pub async fn list_containers(&self) -> Result<Vec<ContainerProperties>, Error> {
        let r = self
            .client
            .send(Request::new(Method::GET, format!("{}/colls", self.link())))
            .await?;
        let v = r.json()?;
        v["DocumentCollections"]
            .as_array()
            .map(|a| a.iter().map(ContainerProperties::from_json).collect())
            .unwrap_or_else(|| Ok(Vec::new()))
    }
}

impl std::fmt::Debug for DatabaseClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseClient")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
