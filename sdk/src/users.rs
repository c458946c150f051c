//! Users and permissions of a database: the resource tokens a client hands to a browser or a
//! device instead of the account key ([`crate::CosmosClient::with_resource_tokens`]).

use crate::client::{Request, seg};
use crate::{CosmosClient, Error, PartitionKey};
use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use strata_query::protocol::header;

/// A user of a database.
///
/// ```
/// let u: strata_sdk::User = serde_json::from_str(r#"{"id": "alice", "_rid": "x", "_etag": "e"}"#).unwrap();
/// assert_eq!(u.id, "alice");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct User {
    /// The user's id.
    pub id: String,
    /// The resource id.
    #[serde(rename = "_rid", default)]
    pub rid: Option<String>,
    /// The version tag.
    #[serde(rename = "_etag", default)]
    pub etag: Option<String>,
}

/// What a permission allows.
///
/// ```
/// assert_eq!(serde_json::to_string(&strata_sdk::PermissionMode::All).unwrap(), "\"all\"");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PermissionMode {
    /// Reads only.
    Read,
    /// Reads and writes.
    All,
}

/// A permission: a mode on a resource (a database, container, item or script link), optionally
/// limited to one partition key or — on strata — a prefix of a hierarchical key. Reading it
/// returns its resource token.
///
/// ```
/// use strata_sdk::{Permission, PermissionMode, PartitionKeyBuilder};
/// let p = Permission::new("tenant", PermissionMode::Read, "dbs/app/colls/sessions")
///     .with_partition_key(PartitionKeyBuilder::new().add("contoso").build());
/// assert_eq!(p.resource_partition_key, Some(serde_json::json!(["contoso"])));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Permission {
    /// The permission's id.
    pub id: String,
    /// Read or All.
    #[serde(rename = "permissionMode")]
    pub permission_mode: PermissionMode,
    /// The resource link (`dbs/{db}/colls/{container}[/docs/{id}]`).
    pub resource: String,
    /// The partition key (or key prefix) the permission is limited to.
    #[serde(
        rename = "resourcePartitionKey",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub resource_partition_key: Option<Value>,
    /// The resource token (set by the server when the permission is read).
    #[serde(rename = "_token", skip_serializing, default)]
    pub token: Option<String>,
    /// The resource id (set by the server).
    #[serde(rename = "_rid", skip_serializing, default)]
    pub rid: Option<String>,
}

impl Permission {
    /// A permission on `resource`.
    ///
    /// ```
    /// let p = strata_sdk::Permission::new("r", strata_sdk::PermissionMode::Read, "dbs/app/colls/c");
    /// assert!(p.resource_partition_key.is_none());
    /// ```
    pub fn new(id: impl Into<String>, mode: PermissionMode, resource: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            permission_mode: mode,
            resource: resource.into(),
            resource_partition_key: None,
            token: None,
            rid: None,
        }
    }

    /// Limits the permission to one partition key, or a prefix of a hierarchical key.
    ///
    /// ```
    /// use strata_sdk::PartitionKeyBuilder;
    /// let p = strata_sdk::Permission::new("r", strata_sdk::PermissionMode::All, "dbs/app/colls/c")
    ///     .with_partition_key(PartitionKeyBuilder::new().add("contoso").add("alice").build());
    /// assert_eq!(p.resource_partition_key, Some(serde_json::json!(["contoso", "alice"])));
    /// ```
    pub fn with_partition_key(mut self, pk: impl Into<PartitionKey>) -> Self {
        self.resource_partition_key = serde_json::from_str(&pk.into().to_header()).ok();
        self
    }
}

impl crate::DatabaseClient {
    fn users_link(&self) -> String {
        format!("/dbs/{}/users", seg(self.id()))
    }

    /// A handle to a user (no request is made).
    ///
    /// ```
    /// # let c = strata_sdk::CosmosClient::new("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY).unwrap();
    /// assert_eq!(c.database("app").user("alice").id(), "alice");
    /// ```
    pub fn user(&self, id: &str) -> UserClient {
        UserClient {
            client: self.client().clone(),
            link: format!("{}/{}", self.users_link(), seg(id)),
            id: id.to_string(),
        }
    }

    /// Creates a user (409 if it exists).
    ///
    /// ```no_run
    /// # async fn f(db: strata_sdk::DatabaseClient) -> Result<(), strata_sdk::Error> {
    /// let alice = db.create_user("alice").await?;
    /// # let _ = alice; Ok(()) }
    /// ```
    pub async fn create_user(&self, id: &str) -> Result<UserClient, Error> {
        self.client()
            .send(
                Request::new(Method::POST, self.users_link())
                    .json(&serde_json::json!({ "id": id })),
            )
            .await?;
        Ok(self.user(id))
    }

    /// Every user of the database.
    ///
    /// ```no_run
    /// # async fn f(db: strata_sdk::DatabaseClient) -> Result<(), strata_sdk::Error> {
    /// for u in db.list_users().await? { println!("{}", u.id); }
    /// # Ok(()) }
    /// ```
    pub async fn list_users(&self) -> Result<Vec<User>, Error> {
        let r = self
            .client()
            .send(Request::new(Method::GET, self.users_link()))
            .await?;
        serde_json::from_value(r.json()?["Users"].clone()).map_err(Error::serde)
    }
}

/// A handle to one user: its permissions and their tokens.
///
/// ```no_run
/// # async fn f(db: strata_sdk::DatabaseClient) -> Result<(), strata_sdk::Error> {
/// use strata_sdk::{Permission, PermissionMode};
/// let alice = db.create_user("alice").await?;
/// let p = alice.create_permission(&Permission::new("read", PermissionMode::Read, "dbs/app/colls/c")).await?;
/// println!("give the client {}", p.token.unwrap_or_default());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct UserClient {
    client: CosmosClient,
    link: String,
    id: String,
}

impl UserClient {
    /// The user id.
    ///
    /// ```
    /// # let c = strata_sdk::CosmosClient::new("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY).unwrap();
    /// assert_eq!(c.database("d").user("bob").id(), "bob");
    /// ```
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Reads the user.
    ///
    /// ```no_run
    /// # async fn f(u: strata_sdk::UserClient) -> Result<(), strata_sdk::Error> {
    /// println!("{:?}", u.read().await?.rid);
    /// # Ok(()) }
    /// ```
    pub async fn read(&self) -> Result<User, Error> {
        let r = self
            .client
            .send(Request::new(Method::GET, self.link.clone()))
            .await?;
        serde_json::from_slice(&r.body).map_err(Error::serde)
    }

    /// Deletes the user and its permissions (their tokens stop working).
    ///
    /// ```no_run
    /// # async fn f(u: strata_sdk::UserClient) -> Result<(), strata_sdk::Error> {
    /// u.delete().await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete(&self) -> Result<(), Error> {
        self.client
            .send(Request::new(Method::DELETE, self.link.clone()))
            .await
            .map(|_| ())
    }

    fn perms(&self) -> String {
        format!("{}/permissions", self.link)
    }

    async fn put(&self, p: &Permission, upsert: bool) -> Result<Permission, Error> {
        let body = serde_json::to_value(p).map_err(Error::serde)?;
        let mut req = Request::new(Method::POST, self.perms()).json(&body);
        if upsert {
            req = req.header(header::IS_UPSERT, "True");
        }
        let r = self.client.send(req).await?;
        serde_json::from_slice(&r.body).map_err(Error::serde)
    }

    /// Creates a permission; the answer carries its token.
    ///
    /// ```no_run
    /// # async fn f(u: strata_sdk::UserClient) -> Result<(), strata_sdk::Error> {
    /// use strata_sdk::{Permission, PermissionMode};
    /// let p = u.create_permission(&Permission::new("all", PermissionMode::All, "dbs/app/colls/c")).await?;
    /// assert!(p.token.is_some());
    /// # Ok(()) }
    /// ```
    pub async fn create_permission(&self, p: &Permission) -> Result<Permission, Error> {
        self.put(p, false).await
    }

    /// Creates or replaces a permission (a replaced permission's old tokens stop working).
    ///
    /// ```no_run
    /// # async fn f(u: strata_sdk::UserClient) -> Result<(), strata_sdk::Error> {
    /// use strata_sdk::{Permission, PermissionMode};
    /// u.upsert_permission(&Permission::new("all", PermissionMode::Read, "dbs/app/colls/c")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn upsert_permission(&self, p: &Permission) -> Result<Permission, Error> {
        self.put(p, true).await
    }

    /// Reads a permission with a fresh token valid for `valid_for` (default one hour, at most
    /// five).
    ///
    /// ```no_run
    /// # async fn f(u: strata_sdk::UserClient) -> Result<(), strata_sdk::Error> {
    /// let p = u.read_permission("all", Some(std::time::Duration::from_secs(600))).await?;
    /// # let _ = p; Ok(()) }
    /// ```
    pub async fn read_permission(
        &self,
        id: &str,
        valid_for: Option<std::time::Duration>,
    ) -> Result<Permission, Error> {
        let mut req = Request::new(Method::GET, format!("{}/{}", self.perms(), seg(id)));
        if let Some(d) = valid_for {
            req = req.header(header::EXPIRY_SECONDS, d.as_secs().to_string());
        }
        let r = self.client.send(req).await?;
        serde_json::from_slice(&r.body).map_err(Error::serde)
    }

    /// Every permission of the user, each with a token.
    ///
    /// ```no_run
    /// # async fn f(u: strata_sdk::UserClient) -> Result<(), strata_sdk::Error> {
    /// for p in u.list_permissions().await? { println!("{} on {}", p.id, p.resource); }
    /// # Ok(()) }
    /// ```
    pub async fn list_permissions(&self) -> Result<Vec<Permission>, Error> {
        let r = self
            .client
            .send(Request::new(Method::GET, self.perms()))
            .await?;
        serde_json::from_value(r.json()?["Permissions"].clone()).map_err(Error::serde)
    }

    /// Deletes a permission (its tokens stop working).
    ///
    /// ```no_run
    /// # async fn f(u: strata_sdk::UserClient) -> Result<(), strata_sdk::Error> {
    /// u.delete_permission("all").await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete_permission(&self, id: &str) -> Result<(), Error> {
        self.client
            .send(Request::new(
                Method::DELETE,
                format!("{}/{}", self.perms(), seg(id)),
            ))
            .await
            .map(|_| ())
    }
}
