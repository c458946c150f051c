//! Feed ranges: slices of a container's key space (EPK ranges) that fan-out consumers split
//! work by — one per physical partition from [`ContainerClient::feed_ranges`], or the slice of
//! one key or hierarchical prefix from [`ContainerClient::feed_range_for`]. Queries
//! ([`crate::QueryOptions::feed_range`]) and the change feed
//! ([`crate::ChangeFeedOptions::feed_range`]) can be scoped to one.

use crate::{ContainerClient, Error, PartitionKey};
use serde::{Deserialize, Serialize};
use strata_query::pk::EpkRange;
use strata_query::protocol::header;

/// A half-open range of effective partition keys, `[min, max)`. Serializable, so a
/// coordinator can hand ranges to workers.
///
/// ```
/// let r = strata_sdk::FeedRange { min: "".into(), max: "FF".into() };
/// let json = serde_json::to_string(&r).unwrap();
/// assert_eq!(serde_json::from_str::<strata_sdk::FeedRange>(&json).unwrap(), r);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FeedRange {
    /// Lowest EPK (inclusive; `""` is the start of the key space).
    pub min: String,
    /// Upper bound (exclusive; `"FF"` is the end of the key space).
    pub max: String,
}

impl FeedRange {
    /// The request headers that scope a query or change feed request to this range.
    pub(crate) fn headers(&self) -> [(&'static str, String); 2] {
        [
            (header::START_EPK, self.min.clone()),
            (header::END_EPK, self.max.clone()),
        ]
    }

    pub(crate) fn epk(&self) -> EpkRange {
        EpkRange::new(self.min.clone(), self.max.clone())
    }

    /// Whether two ranges share any key.
    ///
    /// ```
    /// use strata_sdk::FeedRange;
    /// let a = FeedRange { min: "".into(), max: "80".into() };
    /// let b = FeedRange { min: "40".into(), max: "FF".into() };
    /// assert!(a.overlaps(&b));
    /// assert!(!a.overlaps(&FeedRange { min: "80".into(), max: "FF".into() }));
    /// ```
    pub fn overlaps(&self, other: &FeedRange) -> bool {
        self.epk().overlaps(&other.epk())
    }
}

impl ContainerClient {
    /// The container's feed ranges: one per physical partition, covering the key space.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// for r in c.feed_ranges().await? { println!("{} .. {}", r.min, r.max); }
    /// # Ok(()) }
    /// ```
    pub async fn feed_ranges(&self) -> Result<Vec<FeedRange>, Error> {
        Ok(self
            .read_partition_key_ranges()
            .await?
            .into_iter()
            .map(|r| FeedRange {
                min: r.min_inclusive,
                max: r.max_exclusive,
            })
            .collect())
    }

    /// The feed range of one partition key, or of a hierarchical key prefix.
    ///
    /// ```no_run
    /// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
    /// use strata_sdk::PartitionKeyBuilder;
    /// let tenant = c.feed_range_for(PartitionKeyBuilder::new().add("contoso").build()).await?;
    /// # let _ = tenant; Ok(()) }
    /// ```
    pub async fn feed_range_for(&self, pk: impl Into<PartitionKey>) -> Result<FeedRange, Error> {
        let def = self.partition_key_definition().await?;
        let pk = strata_query::pk::PartitionKey::from_header(&pk.into().to_header())
            .map_err(|e| Error::invalid(e.0))?;
        let r = strata_query::pk::epk::epk_range(&def.0, &pk).map_err(|e| Error::invalid(e.0))?;
        Ok(FeedRange {
            min: r.min,
            max: r.max,
        })
    }
}
