//! Resource properties and responses.

use crate::PartitionKeyDefinition;
use serde::Deserialize;
use serde_json::{Map, Value};

/// A database, as the service describes it.
///
/// ```no_run
/// # async fn f(c: strata_sdk::CosmosClient) -> Result<(), strata_sdk::Error> {
/// let props = c.database("app").read().await?;
/// println!("{} created at {}", props.id, props.ts);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Deserialize)]
pub struct DatabaseProperties {
    /// The database id.
    pub id: String,
    /// Resource id.
    #[serde(rename = "_rid", default)]
    pub rid: String,
    /// Last change, seconds since the epoch.
    #[serde(rename = "_ts", default)]
    pub ts: u64,
    /// Entity tag.
    #[serde(rename = "_etag", default)]
    pub etag: String,
}

/// A container's definition: id, partition key and optional settings.
///
/// ```
/// use strata_sdk::{ContainerProperties, PartitionKeyDefinition};
/// let props = ContainerProperties::new(
///     "events",
///     PartitionKeyDefinition::hierarchical(["/TenantId", "/UserId", "/SessionId"]).unwrap(),
/// )
/// .with_default_ttl(3600);
/// assert_eq!(props.default_ttl, Some(3600));
/// ```
#[derive(Debug, Clone)]
pub struct ContainerProperties {
    /// The container id.
    pub id: String,
    /// How items are partitioned.
    pub partition_key: PartitionKeyDefinition,
    /// Time to live: `None` off, `-1` on without default, `N` seconds.
    pub default_ttl: Option<i64>,
    /// Indexing policy, as JSON (which paths are indexed; the service and strata use it).
    pub indexing_policy: Option<Value>,
    /// Resource id (set on properties read from the service).
    pub rid: Option<String>,
    /// Entity tag (set on properties read from the service).
    pub etag: Option<String>,
    /// Every other user-settable property, as JSON (`uniqueKeyPolicy`, `computedProperties`,
    /// `changeFeedPolicy`, `conflictResolutionPolicy`...): kept on read, sent on create.
    pub other: Map<String, Value>,
}

impl ContainerProperties {
    /// Properties for a new container.
    ///
    /// ```
    /// let p = strata_sdk::ContainerProperties::new("c", strata_sdk::PartitionKeyDefinition::new("/pk"));
    /// assert_eq!(p.id, "c");
    /// ```
    pub fn new(id: impl Into<String>, partition_key: PartitionKeyDefinition) -> Self {
        Self {
            id: id.into(),
            partition_key,
            default_ttl: None,
            indexing_policy: None,
            rid: None,
            etag: None,
            other: Map::new(),
        }
    }

    /// Turns on time to live with a default (seconds, or -1 for no default).
    ///
    /// ```
    /// let p = strata_sdk::ContainerProperties::new("c", strata_sdk::PartitionKeyDefinition::new("/pk")).with_default_ttl(-1);
    /// assert_eq!(p.default_ttl, Some(-1));
    /// ```
    pub fn with_default_ttl(mut self, seconds: i64) -> Self {
        self.default_ttl = Some(seconds);
        self
    }

    /// Makes the new container a global secondary index of container `source` (same
    /// database): a read-only copy of its items that the service keeps in sync, projected by
    /// `definition` (`SELECT c.a, c.b FROM c` or `SELECT * FROM c`) and partitioned by this
    /// container's own key. The definition cannot change after creation.
    ///
    /// ```
    /// use strata_sdk::{ContainerProperties, PartitionKeyDefinition};
    /// let p = ContainerProperties::new("byEmail", PartitionKeyDefinition::new("/email"))
    ///     .with_global_secondary_index("users", "SELECT c.email, c.name FROM c");
    /// let d = p.to_definition();
    /// assert_eq!(d["globalSecondaryIndexDefinition"]["sourceCollectionId"], "users");
    /// ```
    pub fn with_global_secondary_index(
        mut self,
        source: impl Into<String>,
        definition: impl Into<String>,
    ) -> Self {
        self.other.insert(
            "globalSecondaryIndexDefinition".into(),
            serde_json::json!({"sourceCollectionId": source.into(), "definition": definition.into()}),
        );
        self
    }

    /// A global secondary index's build status as the service last reported it
    /// (`Initializing`, `InitialBuildAfterCreate`, `Active`...); `None` for other containers
    /// or properties not read from the service.
    ///
    /// ```
    /// let d = serde_json::json!({"id": "i", "partitionKey": {"paths": ["/e"], "kind": "Hash", "version": 2},
    ///     "globalSecondaryIndexDefinition": {"sourceCollectionId": "s", "definition": "SELECT * FROM c", "status": "Active"}});
    /// let p = strata_sdk::ContainerProperties::from_definition(&d).unwrap();
    /// assert_eq!(p.global_secondary_index_status(), Some("Active"));
    /// ```
    pub fn global_secondary_index_status(&self) -> Option<&str> {
        self.other
            .get("globalSecondaryIndexDefinition")?
            .get("status")?
            .as_str()
    }

    /// The container's definition as the service takes it on create (`id`, `partitionKey`,
    /// `defaultTtl`, `indexingPolicy` and every other property).
    ///
    /// ```
    /// let p = strata_sdk::ContainerProperties::new("c", strata_sdk::PartitionKeyDefinition::new("/pk"));
    /// assert_eq!(p.to_definition()["partitionKey"]["paths"][0], "/pk");
    /// ```
    pub fn to_definition(&self) -> Value {
        self.to_json()
    }

    /// Properties from a definition as the service shows it (system properties kept aside).
    ///
    /// ```
    /// let d = serde_json::json!({"id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}, "uniqueKeyPolicy": {"uniqueKeys": []}});
    /// let p = strata_sdk::ContainerProperties::from_definition(&d).unwrap();
    /// assert!(p.other.contains_key("uniqueKeyPolicy"));
    /// ```
    pub fn from_definition(v: &Value) -> Result<Self, crate::Error> {
        Self::from_json(v)
    }

    pub(crate) fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("id".into(), Value::String(self.id.clone()));
        m.insert("partitionKey".into(), self.partition_key.to_json());
        if let Some(t) = self.default_ttl {
            m.insert("defaultTtl".into(), Value::from(t));
        }
        if let Some(ip) = &self.indexing_policy {
            m.insert("indexingPolicy".into(), ip.clone());
        }
        for (k, v) in &self.other {
            m.entry(k.clone()).or_insert_with(|| v.clone());
        }
        Value::Object(m)
    }

    pub(crate) fn from_json(v: &Value) -> Result<Self, crate::Error> {
        let pk = strata_query::pk::PartitionKeyDefinition::from_json(&v["partitionKey"]).map_err(
            |e| crate::Error::invalid(format!("the container's partitionKey is invalid: {}", e.0)),
        )?;
        Ok(Self {
            id: v["id"].as_str().unwrap_or_default().to_string(),
            partition_key: PartitionKeyDefinition(pk),
            default_ttl: v["defaultTtl"].as_i64(),
            indexing_policy: v.get("indexingPolicy").cloned(),
            rid: v["_rid"].as_str().map(str::to_string),
            etag: v["_etag"].as_str().map(str::to_string),
            other: v
                .as_object()
                .map(|m| {
                    m.iter()
                        .filter(|(k, _)| {
                            !k.starts_with('_')
                                && !matches!(
                                    k.as_str(),
                                    "id" | "partitionKey" | "defaultTtl" | "indexingPolicy"
                                )
                        })
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                })
                .unwrap_or_default(),
        })
    }
}

/// Provisioned throughput.
///
/// ```
/// use strata_sdk::Throughput;
/// let manual = Throughput::Manual(400);
/// let auto = Throughput::Autoscale { max: 4000 };
/// # let _ = (manual, auto);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Throughput {
    /// Fixed RU/s.
    Manual(u32),
    /// Scales between 10% and 100% of `max` RU/s.
    Autoscale {
        /// Maximum RU/s.
        max: u32,
    },
}

/// The result of an item operation.
///
/// ```no_run
/// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
/// let r = c.read_item::<serde_json::Value>("1", "tenant1").await?;
/// println!("{:?} cost {} RU, etag {:?}", r.item, r.request_charge, r.etag);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ItemResponse<T> {
    /// The item (none for deletes and for minimal-response writes).
    pub item: Option<T>,
    /// The item's new entity tag.
    pub etag: Option<String>,
    /// HTTP status (200, 201, 204, 304).
    pub status: u16,
    /// Request units consumed.
    pub request_charge: f64,
    /// Session token for session consistency.
    pub session_token: Option<String>,
    /// The request's activity id.
    pub activity_id: Option<String>,
}

/// One physical partition (partition key range).
///
/// ```no_run
/// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
/// for r in c.read_partition_key_ranges().await? {
///     println!("{} [{}, {}) parents {:?}", r.id, r.min_inclusive, r.max_exclusive, r.parents);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Deserialize)]
pub struct PartitionKeyRange {
    /// Range id.
    pub id: String,
    /// Lowest effective partition key (inclusive).
    #[serde(rename = "minInclusive")]
    pub min_inclusive: String,
    /// Upper bound (exclusive).
    #[serde(rename = "maxExclusive")]
    pub max_exclusive: String,
    /// Ids of every range this one descends from (after splits).
    #[serde(default)]
    pub parents: Vec<String>,
}
