//! Partition keys: single values, `NULL`, `NONE` (undefined), and hierarchical keys built
//! level by level with [`PartitionKeyBuilder`].

use serde_json::Value;
use std::borrow::Cow;
use std::marker::PhantomData;

/// One level of a partition key.
///
/// ```
/// use strata_sdk::PartitionKeyValue;
/// let v: PartitionKeyValue = "contoso".into();
/// assert_eq!(v, PartitionKeyValue::String("contoso".into()));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum PartitionKeyValue {
    /// A string.
    String(Cow<'static, str>),
    /// A number (every JSON number is a double for partitioning).
    Number(f64),
    /// A boolean.
    Bool(bool),
    /// JSON `null`.
    Null,
    /// The path is absent from the item.
    Undefined,
}

impl PartitionKeyValue {
    pub(crate) fn to_json(&self) -> Value {
        match self {
            PartitionKeyValue::String(s) => Value::String(s.to_string()),
            PartitionKeyValue::Number(n) => strata_query::pk::number_to_json(*n),
            PartitionKeyValue::Bool(b) => Value::Bool(*b),
            PartitionKeyValue::Null => Value::Null,
            PartitionKeyValue::Undefined => Value::Object(Default::default()),
        }
    }
}

macro_rules! from_num {
    ($($t:ty),*) => {$(
        impl From<$t> for PartitionKeyValue {
            fn from(v: $t) -> Self { PartitionKeyValue::Number(v as f64) }
        }
        impl From<$t> for PartitionKey {
            fn from(v: $t) -> Self { PartitionKey::single(PartitionKeyValue::from(v)) }
        }
    )*};
}
from_num!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64, isize, usize);

impl From<&str> for PartitionKeyValue {
    fn from(v: &str) -> Self {
        PartitionKeyValue::String(Cow::Owned(v.to_string()))
    }
}
impl From<String> for PartitionKeyValue {
    fn from(v: String) -> Self {
        PartitionKeyValue::String(Cow::Owned(v))
    }
}
impl From<&String> for PartitionKeyValue {
    fn from(v: &String) -> Self {
        PartitionKeyValue::String(Cow::Owned(v.clone()))
    }
}
impl From<bool> for PartitionKeyValue {
    fn from(v: bool) -> Self {
        PartitionKeyValue::Bool(v)
    }
}

/// A partition key value: one component per partition key path (fewer make a prefix of a
/// hierarchical key, accepted by queries and the change feed).
///
/// ```
/// use strata_sdk::{PartitionKey, PartitionKeyBuilder};
/// let single: PartitionKey = "tenant1".into();
/// let numeric = PartitionKey::from(42);
/// let full = PartitionKeyBuilder::new().add("Microsoft").add("alice").add("s1").build();
/// assert_eq!(full.len(), 3);
/// assert_eq!(PartitionKey::NULL.to_header(), "[null]");
/// assert_eq!(PartitionKey::NONE.to_header(), "[{}]");
/// # let _ = (single, numeric);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionKey(Cow<'static, [PartitionKeyValue]>);

impl PartitionKey {
    /// A key whose single value is JSON `null`.
    pub const NULL: PartitionKey = PartitionKey(Cow::Borrowed(&[PartitionKeyValue::Null]));
    /// The key of items that lack the partition key path (undefined).
    pub const NONE: PartitionKey = PartitionKey(Cow::Borrowed(&[PartitionKeyValue::Undefined]));
    /// No components: addresses everything (the empty prefix).
    pub const EMPTY: PartitionKey = PartitionKey(Cow::Borrowed(&[]));

    fn single(v: PartitionKeyValue) -> Self {
        PartitionKey(Cow::Owned(vec![v]))
    }

    /// A key from its components, in path order.
    ///
    /// ```
    /// # use strata_sdk::{PartitionKey, PartitionKeyValue};
    /// let pk = PartitionKey::from_values(vec!["a".into(), PartitionKeyValue::Number(1.0)]).unwrap();
    /// assert_eq!(pk.to_header(), r#"["a",1]"#);
    /// ```
    pub fn from_values(values: Vec<PartitionKeyValue>) -> Result<Self, crate::Error> {
        if values.len() > 3 {
            return Err(crate::Error::invalid(format!(
                "a partition key has at most 3 levels, not {}",
                values.len()
            )));
        }
        Ok(PartitionKey(Cow::Owned(values)))
    }

    /// Number of components.
    ///
    /// ```
    /// assert_eq!(strata_sdk::PartitionKey::from("x").len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it has no components.
    ///
    /// ```
    /// assert!(strata_sdk::PartitionKey::EMPTY.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The components.
    ///
    /// ```
    /// let pk = strata_sdk::PartitionKey::from("x");
    /// assert_eq!(pk.values().len(), 1);
    /// ```
    pub fn values(&self) -> &[PartitionKeyValue] {
        &self.0
    }

    /// The `x-ms-documentdb-partitionkey` header form (non-ASCII escaped, as the SDKs send).
    ///
    /// ```
    /// assert_eq!(strata_sdk::PartitionKey::from("bü").to_header(), r#"["b\u00fc"]"#);
    /// ```
    pub fn to_header(&self) -> String {
        let v = Value::Array(self.0.iter().map(PartitionKeyValue::to_json).collect());
        strata_query::pk::escape_non_ascii(&v.to_string())
    }

    pub(crate) fn from_query(pk: &strata_query::pk::PartitionKey) -> Self {
        use strata_query::pk::PkComponent as C;
        PartitionKey(Cow::Owned(
            pk.0.iter()
                .map(|c| match c {
                    C::String(s) => PartitionKeyValue::String(Cow::Owned(s.clone())),
                    C::Number(n) => PartitionKeyValue::Number(*n),
                    C::Bool(b) => PartitionKeyValue::Bool(*b),
                    C::Null => PartitionKeyValue::Null,
                    C::Undefined => PartitionKeyValue::Undefined,
                })
                .collect(),
        ))
    }
}

impl From<&str> for PartitionKey {
    fn from(v: &str) -> Self {
        PartitionKey::single(v.into())
    }
}
impl From<String> for PartitionKey {
    fn from(v: String) -> Self {
        PartitionKey::single(v.into())
    }
}
impl From<&String> for PartitionKey {
    fn from(v: &String) -> Self {
        PartitionKey::single(v.into())
    }
}
impl From<bool> for PartitionKey {
    fn from(v: bool) -> Self {
        PartitionKey::single(v.into())
    }
}
impl From<PartitionKeyValue> for PartitionKey {
    fn from(v: PartitionKeyValue) -> Self {
        PartitionKey::single(v)
    }
}

/// Levels added so far to a [`PartitionKeyBuilder`] (type-level, so that a fourth level does
/// not compile).
pub mod levels {
    /// No level yet.
    pub struct Zero;
    /// One level.
    pub struct One;
    /// Two levels.
    pub struct Two;
    /// Three levels: the maximum.
    pub struct Three;
}

/// Builds a hierarchical partition key one level at a time (at most three).
///
/// ```
/// use strata_sdk::PartitionKeyBuilder;
/// let pk = PartitionKeyBuilder::new()
///     .add("Microsoft")
///     .add("alice")
///     .add_none()
///     .build();
/// assert_eq!(pk.to_header(), r#"["Microsoft","alice",{}]"#);
/// ```
///
/// A fourth level does not compile:
///
/// ```compile_fail
/// strata_sdk::PartitionKeyBuilder::new().add("a").add("b").add("c").add("d");
/// ```
pub struct PartitionKeyBuilder<L = levels::Zero> {
    values: Vec<PartitionKeyValue>,
    _level: PhantomData<L>,
}

impl PartitionKeyBuilder<levels::Zero> {
    /// An empty builder.
    ///
    /// ```
    /// let b = strata_sdk::PartitionKeyBuilder::new();
    /// # let _ = b.add("a").build();
    /// ```
    pub fn new() -> Self {
        Self {
            values: Vec::with_capacity(3),
            _level: PhantomData,
        }
    }
}

impl Default for PartitionKeyBuilder<levels::Zero> {
    fn default() -> Self {
        Self::new()
    }
}

/// The level that follows another (implemented for levels below three).
pub trait NextLevel {
    /// The level after adding one more value.
    type Next;
}
impl NextLevel for levels::Zero {
    type Next = levels::One;
}
impl NextLevel for levels::One {
    type Next = levels::Two;
}
impl NextLevel for levels::Two {
    type Next = levels::Three;
}

impl<L: NextLevel> PartitionKeyBuilder<L> {
    /// Adds a value (string, number or bool) as the next level.
    ///
    /// ```
    /// let pk = strata_sdk::PartitionKeyBuilder::new().add("t").add(7).build();
    /// assert_eq!(pk.to_header(), r#"["t",7]"#);
    /// ```
    #[allow(
        clippy::should_implement_trait,
        reason = "`.add(..)` is the documented builder API of the Cosmos SDKs"
    )]
    pub fn add(mut self, v: impl Into<PartitionKeyValue>) -> PartitionKeyBuilder<L::Next> {
        self.values.push(v.into());
        PartitionKeyBuilder {
            values: self.values,
            _level: PhantomData,
        }
    }

    /// Adds JSON `null` as the next level.
    ///
    /// ```
    /// let pk = strata_sdk::PartitionKeyBuilder::new().add("t").add_null().build();
    /// assert_eq!(pk.to_header(), r#"["t",null]"#);
    /// ```
    pub fn add_null(self) -> PartitionKeyBuilder<L::Next> {
        self.add(PartitionKeyValue::Null)
    }

    /// Adds "undefined" (the item lacks this path) as the next level. Containers keyed by
    /// one path accept items without it; a hierarchical key needs every level, so there the
    /// service (and strata) refuse such an item with 400 / 1001 — use [`Self::add_null`]
    /// with an explicit `null` in the item instead.
    ///
    /// ```
    /// let pk = strata_sdk::PartitionKeyBuilder::new().add_none().build();
    /// assert_eq!(pk, strata_sdk::PartitionKey::NONE);
    /// ```
    pub fn add_none(self) -> PartitionKeyBuilder<L::Next> {
        self.add(PartitionKeyValue::Undefined)
    }
}

impl<L> PartitionKeyBuilder<L> {
    /// The finished key.
    ///
    /// ```
    /// let pk = strata_sdk::PartitionKeyBuilder::new().add("t").build();
    /// assert_eq!(pk.len(), 1);
    /// ```
    pub fn build(self) -> PartitionKey {
        PartitionKey(Cow::Owned(self.values))
    }
}

/// A container's partition key definition: one path, or up to three hierarchical paths.
///
/// ```
/// use strata_sdk::PartitionKeyDefinition;
/// let hpk = PartitionKeyDefinition::hierarchical(["/TenantId", "/UserId", "/SessionId"]).unwrap();
/// let plain = PartitionKeyDefinition::new("/pk");
/// assert_eq!(hpk.paths().len(), 3);
/// # let _ = plain;
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionKeyDefinition(pub(crate) strata_query::pk::PartitionKeyDefinition);

impl PartitionKeyDefinition {
    /// One path, hash version 2.
    ///
    /// ```
    /// let d = strata_sdk::PartitionKeyDefinition::new("/customerId");
    /// assert_eq!(d.paths(), ["/customerId"]);
    /// ```
    pub fn new(path: &str) -> Self {
        Self(
            strata_query::pk::PartitionKeyDefinition::new(
                &[path],
                strata_query::pk::PartitionKind::Hash,
                2,
            )
            .unwrap_or_else(|_| strata_query::pk::PartitionKeyDefinition::hash_v2("/id")),
        )
    }

    /// A hierarchical (MultiHash) key with 1 to 3 paths.
    ///
    /// ```
    /// assert!(strata_sdk::PartitionKeyDefinition::hierarchical(["/a", "/b", "/c", "/d"]).is_err());
    /// ```
    pub fn hierarchical<'a>(
        paths: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, crate::Error> {
        let paths: Vec<&str> = paths.into_iter().collect();
        strata_query::pk::PartitionKeyDefinition::multi_hash(&paths)
            .map(Self)
            .map_err(|e| crate::Error::invalid(e.0))
    }

    /// The paths.
    ///
    /// ```
    /// assert_eq!(strata_sdk::PartitionKeyDefinition::new("/p").paths(), ["/p"]);
    /// ```
    pub fn paths(&self) -> &[String] {
        &self.0.paths
    }

    /// The partition key of an item (absent paths are undefined).
    ///
    /// ```
    /// let d = strata_sdk::PartitionKeyDefinition::hierarchical(["/t", "/u"]).unwrap();
    /// let pk = d.key_of(&serde_json::json!({"t": "a", "u": "b"}));
    /// assert_eq!(pk.to_header(), r#"["a","b"]"#);
    /// ```
    pub fn key_of(&self, item: &Value) -> PartitionKey {
        PartitionKey::from_query(&self.0.extract(item))
    }

    /// The definition as a container's `partitionKey` property gives it (paths, kind,
    /// version).
    ///
    /// ```
    /// let d = strata_sdk::PartitionKeyDefinition::hierarchical(["/t", "/u"]).unwrap();
    /// assert_eq!(d.to_json()["kind"], "MultiHash");
    /// ```
    pub fn to_json(&self) -> Value {
        self.0.to_json()
    }
}
