//! Items in a container: point operations, patch, partition key ranges, throughput. Queries,
//! batches, the change feed and scripts add their methods in their own modules.

use crate::client::{RawResponse, Request, Wire, seg};
use crate::{
    ContainerProperties, CosmosClient, Error, ItemResponse, PartitionKey, PartitionKeyDefinition,
    PartitionKeyRange, PatchOperations, Throughput,
};
use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use strata_query::protocol::header;

/// Conditions and flags for a write.
///
/// ```no_run
/// # async fn f(c: strata_sdk::ContainerClient, item: serde_json::Value) -> Result<(), strata_sdk::Error> {
/// use strata_sdk::ItemOptions;
/// let current = c.read_item::<serde_json::Value>("1", "t1").await?;
/// let opts = ItemOptions { if_match: current.etag, ..ItemOptions::default() };
/// c.replace_item("1", &item, opts).await?; // 412 if someone else changed it
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct ItemOptions {
    /// Only apply if the item's etag still equals this.
    pub if_match: Option<String>,
    /// For upserts: `Some("*")` only creates (412 if the item exists).
    pub if_none_match: Option<String>,
    /// Ask for no body in the response (saves bandwidth).
    pub minimal_response: bool,
    /// Triggers (ids) that run before the write and may change the item.
    pub pre_triggers: Vec<String>,
    /// Triggers (ids) that run after the write, in its transaction.
    pub post_triggers: Vec<String>,
}

impl ItemOptions {
    /// Adds the trigger headers of these options to a write request.
    fn triggers(&self, mut req: Request) -> Request {
        if !self.pre_triggers.is_empty() {
            req = req.header(header::PRE_TRIGGER_INCLUDE, self.pre_triggers.join(","));
        }
        if !self.post_triggers.is_empty() {
            req = req.header(header::POST_TRIGGER_INCLUDE, self.post_triggers.join(","));
        }
        req
    }
}

/// A handle to one container.
///
/// ```no_run
/// # async fn f(client: strata_sdk::CosmosClient) -> Result<(), strata_sdk::Error> {
/// use serde::{Deserialize, Serialize};
/// #[derive(Serialize, Deserialize)]
/// struct Event { id: String, #[serde(rename = "TenantId")] tenant: String, #[serde(rename = "UserId")] user: String, #[serde(rename = "SessionId")] session: String }
/// let events = client.database("app").container("events");
/// let e = Event { id: "1".into(), tenant: "contoso".into(), user: "alice".into(), session: "s1".into() };
/// events.create_item(&e).await?; // the partition key is read from the item
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ContainerClient {
    pub(crate) client: CosmosClient,
    db: String,
    id: String,
    pub(crate) link: String,
}

fn item_response<T: DeserializeOwned>(r: RawResponse) -> Result<ItemResponse<T>, Error> {
    let item = if r.body.is_empty() {
        None
    } else {
        Some(serde_json::from_slice(&r.body).map_err(Error::serde)?)
    };
    Ok(ItemResponse {
        item,
        etag: r.header(header::ETAG).map(str::to_string),
        status: r.status,
        request_charge: r.charge(),
        session_token: r.header(header::SESSION_TOKEN).map(str::to_string),
        activity_id: r.header(header::ACTIVITY_ID).map(str::to_string),
    })
}

impl ContainerClient {
    pub(crate) fn new(client: CosmosClient, db: &str, id: &str) -> Self {
        Self {
            link: format!("/dbs/{}/colls/{}", seg(db), seg(id)),
            client,
            db: db.to_string(),
            id: id.to_string(),
        }
    }

    /// The container id.
    ///
    /// ```
    /// # let c = strata_sdk::CosmosClient::new("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY).unwrap();
    /// assert_eq!(c.database("d").container("events").id(), "events");
    /// ```
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The database id.
    ///
    /// ```
    /// # let c = strata_sdk::CosmosClient::new("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY).unwrap();
    /// assert_eq!(c.database("d").container("events").database_id(), "d");
    /// ```
    pub fn database_id(&self) -> &str {
        &self.db
    }

    pub(crate) fn remember_definition(&self, d: PartitionKeyDefinition) {
        if let Ok(mut m) = self.client.inner.pk_cache.lock() {
            m.insert(self.link.clone(), d);
        }
    }

    /// Reads the container's properties (and caches its partition key definition).
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// let p = c.read().await?;
    /// println!("{:?}", p.partition_key.paths());
    /// # Ok(()) }
    /// ```
    pub async fn read(&self) -> Result<ContainerProperties, Error> {
        let r = self
            .client
            .send(Request::new(Method::GET, self.link.clone()))
            .await?;
        let p = ContainerProperties::from_json(&r.json()?)?;
        self.remember_definition(p.partition_key.clone());
        Ok(p)
    }

    /// The partition key definition, fetched once and cached.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// let def = c.partition_key_definition().await?;
    /// # let _ = def; Ok(()) }
    /// ```
    pub async fn partition_key_definition(&self) -> Result<PartitionKeyDefinition, Error> {
        if let Some(d) = self
            .client
            .inner
            .pk_cache
            .lock()
            .ok()
            .and_then(|m| m.get(&self.link).cloned())
        {
            return Ok(d);
        }
        Ok(self.read().await?.partition_key)
    }

    /// Replaces the container's settings (the partition key cannot change).
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// let p = c.read().await?.with_default_ttl(86_400);
    /// c.replace(p).await?;
    /// # Ok(()) }
    /// ```
    pub async fn replace(&self, props: ContainerProperties) -> Result<ContainerProperties, Error> {
        let r = self
            .client
            .send(Request::new(Method::PUT, self.link.clone()).json(&props.to_json()))
            .await?;
        ContainerProperties::from_json(&r.json()?)
    }

    /// Deletes the container and its items.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// c.delete().await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete(&self) -> Result<(), Error> {
        self.client
            .send(Request::new(Method::DELETE, self.link.clone()))
            .await
            .map(|_| ())
    }

    pub(crate) fn docs(&self) -> String {
        format!("{}/docs", self.link)
    }

    fn doc(&self, id: &str) -> String {
        format!("{}/docs/{}", self.link, seg(id))
    }

    /// Checks that a key addresses one logical partition (point operations).
    pub(crate) async fn full_key(&self, pk: &PartitionKey) -> Result<(), Error> {
        let def = self.partition_key_definition().await?;
        let levels = def.paths().len();
        if pk.len() != levels && !(def.0.system_key && pk.is_empty()) {
            return Err(Error::invalid(format!(
                "point operations need the full partition key: the container '{}' has {levels} level(s) ({}), the key has {}; a prefix is only valid for queries and the change feed",
                self.id,
                def.paths().join(", "),
                pk.len()
            )));
        }
        Ok(())
    }

    async fn write<T: Serialize + DeserializeOwned>(
        &self,
        method: Method,
        path: String,
        item: &T,
        pk: Option<PartitionKey>,
        opts: ItemOptions,
        upsert: bool,
    ) -> Result<ItemResponse<T>, Error> {
        let body = serde_json::to_value(item).map_err(Error::serde)?;
        let pk = match pk {
            Some(pk) => pk,
            None => self.partition_key_definition().await?.key_of(&body),
        };
        self.full_key(&pk).await?;
        let mut req = Request::new(method, path)
            .json(&body)
            .wire(Wire::Item)
            .header(header::PARTITION_KEY, pk.to_header());
        if upsert {
            req = req.header(header::IS_UPSERT, "True");
        }
        req = opts.triggers(req);
        if let Some(m) = opts.if_match {
            req = req.header(header::IF_MATCH, m);
        }
        if let Some(m) = opts.if_none_match {
            req = req.header(header::IF_NONE_MATCH, m);
        }
        if opts.minimal_response {
            req = req.header(header::PREFER, "return=minimal");
        }
        item_response(self.client.send(req).await?)
    }

    /// Creates an item; its partition key is read from the item using the container's
    /// definition (fetched once and cached).
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// let r = c.create_item(&serde_json::json!({"id": "1", "TenantId": "t1", "UserId": "u1", "SessionId": "s1"})).await?;
    /// assert_eq!(r.status, 201);
    /// # Ok(()) }
    /// ```
    pub async fn create_item<T: Serialize + DeserializeOwned>(
        &self,
        item: &T,
    ) -> Result<ItemResponse<T>, Error> {
        self.write(
            Method::POST,
            self.docs(),
            item,
            None,
            ItemOptions::default(),
            false,
        )
        .await
    }

    /// Creates an item under an explicit partition key.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// use strata_sdk::PartitionKeyBuilder;
    /// let pk = PartitionKeyBuilder::new().add("t1").add("u1").add("s1").build();
    /// c.create_item_with_key(&serde_json::json!({"id": "2", "TenantId": "t1", "UserId": "u1", "SessionId": "s1"}), pk).await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_item_with_key<T: Serialize + DeserializeOwned>(
        &self,
        item: &T,
        pk: impl Into<PartitionKey>,
    ) -> Result<ItemResponse<T>, Error> {
        self.write(
            Method::POST,
            self.docs(),
            item,
            Some(pk.into()),
            ItemOptions::default(),
            false,
        )
        .await
    }

    /// Creates an item with options (pre/post triggers, minimal response); the partition key
    /// is read from the item.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// use strata_sdk::ItemOptions;
    /// let opts = ItemOptions { pre_triggers: vec!["stamp".into()], ..Default::default() };
    /// c.create_item_with_options(&serde_json::json!({"id": "3", "TenantId": "t1", "UserId": "u1", "SessionId": "s1"}), opts).await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_item_with_options<T: Serialize + DeserializeOwned>(
        &self,
        item: &T,
        opts: ItemOptions,
    ) -> Result<ItemResponse<T>, Error> {
        self.write(Method::POST, self.docs(), item, None, opts, false)
            .await
    }

    /// Creates or replaces an item (201 or 200).
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// c.upsert_item(&serde_json::json!({"id": "1", "TenantId": "t1", "UserId": "u1", "SessionId": "s1", "n": 2}), Default::default()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn upsert_item<T: Serialize + DeserializeOwned>(
        &self,
        item: &T,
        opts: ItemOptions,
    ) -> Result<ItemResponse<T>, Error> {
        self.write(Method::POST, self.docs(), item, None, opts, true)
            .await
    }

    /// Replaces an existing item (404 if absent; 412 if `if_match` is stale).
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// c.replace_item("1", &serde_json::json!({"id": "1", "TenantId": "t1", "UserId": "u1", "SessionId": "s1", "n": 3}), Default::default()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn replace_item<T: Serialize + DeserializeOwned>(
        &self,
        id: &str,
        item: &T,
        opts: ItemOptions,
    ) -> Result<ItemResponse<T>, Error> {
        self.write(Method::PUT, self.doc(id), item, None, opts, false)
            .await
    }

    /// Reads an item by id and full partition key.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// use strata_sdk::PartitionKeyBuilder;
    /// let pk = PartitionKeyBuilder::new().add("t1").add("u1").add("s1").build();
    /// let r = c.read_item::<serde_json::Value>("1", pk).await?;
    /// # let _ = r; Ok(()) }
    /// ```
    pub async fn read_item<T: DeserializeOwned>(
        &self,
        id: &str,
        pk: impl Into<PartitionKey>,
    ) -> Result<ItemResponse<T>, Error> {
        let pk = pk.into();
        self.full_key(&pk).await?;
        let req = Request::new(Method::GET, self.doc(id))
            .wire(Wire::Item)
            .header(header::PARTITION_KEY, pk.to_header());
        item_response(self.client.send(req).await?)
    }

    /// Deletes an item.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// c.delete_item("1", "tenant1", Default::default()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete_item(
        &self,
        id: &str,
        pk: impl Into<PartitionKey>,
        opts: ItemOptions,
    ) -> Result<ItemResponse<Value>, Error> {
        let pk = pk.into();
        self.full_key(&pk).await?;
        let mut req = opts.triggers(
            Request::new(Method::DELETE, self.doc(id))
                .header(header::PARTITION_KEY, pk.to_header()),
        );
        if let Some(m) = opts.if_match {
            req = req.header(header::IF_MATCH, m);
        }
        item_response(self.client.send(req).await?)
    }

    /// Applies partial updates to an item atomically.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// use strata_sdk::PatchOperations;
    /// let ops = PatchOperations::new().incr("/visits", 1).add("/tags/-", "vip").condition("FROM c WHERE c.active = true");
    /// let r = c.patch_item::<serde_json::Value>("1", "tenant1", ops, Default::default()).await?;
    /// # let _ = r; Ok(()) }
    /// ```
    pub async fn patch_item<T: DeserializeOwned>(
        &self,
        id: &str,
        pk: impl Into<PartitionKey>,
        ops: PatchOperations,
        opts: ItemOptions,
    ) -> Result<ItemResponse<T>, Error> {
        let pk = pk.into();
        self.full_key(&pk).await?;
        let mut req = opts.triggers(
            Request::new(Method::PATCH, self.doc(id))
                .json(&ops.to_body()?)
                .header(header::PARTITION_KEY, pk.to_header()),
        );
        if let Some(m) = opts.if_match {
            req = req.header(header::IF_MATCH, m);
        }
        item_response(self.client.send(req).await?)
    }

    /// The session token this client would send with a read of this container (every
    /// partition key range's newest), after the writes and reads it has made.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// c.create_item(&serde_json::json!({"id": "1", "TenantId": "t", "UserId": "u", "SessionId": "s"})).await?;
    /// println!("{:?}", c.session_token()); // e.g. Some("0:-1#42")
    /// # Ok(()) }
    /// ```
    pub fn session_token(&self) -> Option<String> {
        self.client.inner.sessions.header_for(&self.link)
    }

    /// The container's physical partitions.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// println!("{} partitions", c.read_partition_key_ranges().await?.len());
    /// # Ok(()) }
    /// ```
    pub async fn read_partition_key_ranges(&self) -> Result<Vec<PartitionKeyRange>, Error> {
        let r = self
            .client
            .send(Request::new(Method::GET, format!("{}/pkranges", self.link)))
            .await?;
        let v = r.json()?;
        serde_json::from_value(v["PartitionKeyRanges"].clone()).map_err(Error::serde)
    }

    /// strata's partitions view (not part of the Cosmos protocol: strata servers only): each
    /// physical partition's EPK range, split lineage, items, bytes, request units and
    /// throttling, its largest and hottest logical partitions, and the warnings a user acts
    /// on (`warnings`: a logical partition near its size limit, a hot range, one key taking
    /// most of the request units). What `strata partitions` and the Data Explorer show.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// let view = c.strata_partitions().await?;
    /// for w in view["warnings"].as_array().into_iter().flatten() {
    ///     println!("{}", w["message"]);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn strata_partitions(&self) -> Result<Value, Error> {
        let r = self
            .client
            .send(Request::new(
                Method::GET,
                format!("{}/partitions", self.strata_path()),
            ))
            .await?;
        r.json()
    }

    /// strata's sample of the queries this container served (`GET
    /// /_strata/containers/{db}/{container}/queries`): each query's shape (literal values as
    /// parameters), executions, request units, route and recent parameter values — the
    /// workload `strata advise` replays under candidate partition keys. strata only.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// let sample = c.strata_queries().await?;
    /// for q in sample["queries"].as_array().into_iter().flatten() {
    ///     println!("{} x{} {} RU {}", q["route"], q["count"], q["requestCharge"], q["text"]);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn strata_queries(&self) -> Result<Value, Error> {
        let r = self
            .client
            .send(Request::new(
                Method::GET,
                format!("{}/queries", self.strata_path()),
            ))
            .await?;
        r.json()
    }

    /// The path of strata's own endpoints for this container.
    fn strata_path(&self) -> String {
        self.link
            .replacen("/dbs/", "/_strata/containers/", 1)
            .replacen("/colls/", "/", 1)
    }

    /// Deletes every item of one logical partition (or hierarchical prefix).
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// use strata_sdk::PartitionKeyBuilder;
    /// c.delete_all_items_by_partition_key(PartitionKeyBuilder::new().add("t1").add("u1").add("s1").build()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete_all_items_by_partition_key(
        &self,
        pk: impl Into<PartitionKey>,
    ) -> Result<(), Error> {
        let pk = pk.into();
        let req = Request::new(
            Method::POST,
            format!("{}/operations/partitionkeydelete", self.link),
        )
        .header(header::PARTITION_KEY, pk.to_header());
        self.client.send(req).await.map(|_| ())
    }

    async fn offer(&self) -> Result<Value, Error> {
        let props = self.read().await?;
        let rid = props.rid.unwrap_or_default();
        let q = serde_json::json!({
            "query": "SELECT * FROM root r WHERE r.offerResourceId = @rid",
            "parameters": [{"name": "@rid", "value": rid}],
        });
        let r = self
            .client
            .send(
                Request::new(Method::POST, "/offers")
                    .json(&q)
                    .header(header::IS_QUERY, "true")
                    .header(header::CONTENT_TYPE, "application/query+json"),
            )
            .await?;
        let v = r.json()?;
        v["Offers"]
            .as_array()
            .and_then(|a| a.first().cloned())
            .ok_or_else(|| {
                Error::invalid(format!(
                    "the container '{}' has no dedicated throughput",
                    self.id
                ))
            })
    }

    /// The container's provisioned throughput.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// println!("{:?}", c.read_throughput().await?);
    /// # Ok(()) }
    /// ```
    pub async fn read_throughput(&self) -> Result<Throughput, Error> {
        let o = self.offer().await?;
        Ok(
            match o["content"]["offerAutopilotSettings"]["maxThroughput"].as_u64() {
                Some(max) => Throughput::Autoscale { max: max as u32 },
                None => {
                    Throughput::Manual(o["content"]["offerThroughput"].as_u64().unwrap_or(0) as u32)
                }
            },
        )
    }

    /// Replaces the provisioned throughput; raising it past 10,000 RU/s per physical
    /// partition splits partitions.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// c.replace_throughput(strata_sdk::Throughput::Manual(11_000)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn replace_throughput(&self, t: Throughput) -> Result<(), Error> {
        let mut o = self.offer().await?;
        match t {
            Throughput::Manual(n) => {
                o["content"]["offerThroughput"] = Value::from(n);
                if let Some(c) = o["content"].as_object_mut() {
                    c.remove("offerAutopilotSettings");
                }
            }
            Throughput::Autoscale { max } => {
                o["content"]["offerAutopilotSettings"] = serde_json::json!({"maxThroughput": max});
            }
        }
        let id = o["_rid"].as_str().unwrap_or_default().to_string();
        self.client
            .send(Request::new(Method::PUT, format!("/offers/{}", seg(&id))).json(&o))
            .await
            .map(|_| ())
    }
}

impl std::fmt::Debug for ContainerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContainerClient")
            .field("database", &self.db)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// The containers of a database.
impl crate::DatabaseClient {
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
