//! Databases: reading and deleting one, and an account's databases (`CosmosClient::database`,
//! `create_database`...). A database's containers are in `container.rs`.

use crate::client::{Request, seg};
use crate::{CosmosClient, DatabaseProperties, Error};
use reqwest::Method;

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
    pub(crate) client: CosmosClient,
    pub(crate) id: String,
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

    pub(crate) fn link(&self) -> String {
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
}

impl std::fmt::Debug for DatabaseClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseClient")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// The databases of an account.
impl CosmosClient {
    /// A handle to a database (no request is made).
    ///
    /// ```
    /// # let client = strata_sdk::CosmosClient::new("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY).unwrap();
    /// let db = client.database("app");
    /// assert_eq!(db.id(), "app");
    /// ```
    pub fn database(&self, id: &str) -> DatabaseClient {
        DatabaseClient::new(self.clone(), id)
    }

    /// Creates a database (409 if it exists).
    ///
    /// ```no_run
    /// # async fn f(client: strata_sdk::CosmosClient) -> Result<(), strata_sdk::Error> {
    /// let db = client.create_database("app").await?;
    /// # let _ = db; Ok(()) }
    /// ```
    pub async fn create_database(&self, id: &str) -> Result<DatabaseClient, Error> {
        self.send(Request::new(Method::POST, "/dbs").json(&serde_json::json!({ "id": id })))
            .await?;
        Ok(self.database(id))
    }

    /// Creates a database unless it exists.
    ///
    /// ```no_run
    /// # async fn f(client: strata_sdk::CosmosClient) -> Result<(), strata_sdk::Error> {
    /// let db = client.create_database_if_not_exists("app").await?;
    /// # let _ = db; Ok(()) }
    /// ```
    pub async fn create_database_if_not_exists(&self, id: &str) -> Result<DatabaseClient, Error> {
        match self.create_database(id).await {
            Err(e) if e.is_conflict() => Ok(self.database(id)),
            other => other,
        }
    }

    /// Lists the databases of the account.
    ///
    /// ```no_run
    /// # async fn f(client: strata_sdk::CosmosClient) -> Result<(), strata_sdk::Error> {
    /// for db in client.list_databases().await? { println!("{}", db.id); }
    /// # Ok(()) }
    /// ```
    pub async fn list_databases(&self) -> Result<Vec<DatabaseProperties>, Error> {
        let r = self.send(Request::new(Method::GET, "/dbs")).await?;
        let v = r.json()?;
        serde_json::from_value(v["Databases"].clone()).map_err(Error::serde)
    }
}
