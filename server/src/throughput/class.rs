//! What a request asks of the governor besides its charge: the throughput bucket it runs in
//! and its priority.
//!
//! **Throughput buckets** (<https://learn.microsoft.com/azure/cosmos-db/throughput-buckets>
//! and its FAQ): a container's offer may cap up to five buckets, ids 1 to 5, each at a
//! percentage of the container's throughput (`throughputBuckets: [{id,
//! maxThroughputPercentage, isDefaultBucket}]`, the ARM resource's shape, taken on the offer's
//! `content` here). A request names its bucket with `x-ms-cosmos-throughput-bucket`; past its
//! bucket's share it gets 429 with sub-status 3212. Nothing is reserved: the buckets share the
//! container's budget. A bucket id the offer does not cap is not capped; an id outside 1 to 5
//! is a 400; a request that names none runs in the default bucket, if one is marked, else
//! uncapped. The configuration changes at most once every ten minutes (429 / 3213).
//!
//! **Priority** (<https://learn.microsoft.com/azure/cosmos-db/priority-based-execution>):
//! `x-ms-cosmos-priority-level: Low` (or `High`, the default). No throughput is reserved
//! either: each level may use all of it when the other is idle, and when both run past the
//! budget, Low requests are throttled first — here, a Low request leaves untouched what High
//! requests spent in the last second, so High traffic keeps the share it is using.

pub use crate::store::catalog::{Buckets, BUCKETS};
#[cfg(test)]
use serde_json::json;

/// A request's bucket (as named, before the default applies) and priority.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Class {
    pub bucket: Option<u8>,
    pub low: bool,
}

impl Class {
    /// From the request's `x-ms-cosmos-throughput-bucket` and `x-ms-cosmos-priority-level`
    /// values (400's message on a bad one).
    pub fn parse(bucket: Option<&str>, priority: Option<&str>) -> Result<Self, String> {
        let bucket = match bucket {
            None => None,
            Some(v) => Some(
                v.trim()
                    .parse::<u8>()
                    .ok()
                    .filter(|b| (1..=BUCKETS).contains(b))
                    .ok_or_else(|| {
                        format!("The throughput bucket '{v}' is not valid: bucket ids are 1 to {BUCKETS}.")
                    })?,
            ),
        };
        let low = match priority.map(str::trim) {
            None => false,
            Some(p) if p.eq_ignore_ascii_case("high") => false,
            Some(p) if p.eq_ignore_ascii_case("low") => true,
            Some(p) => {
                return Err(format!(
                    "The priority level '{p}' is not valid: it is High or Low."
                ))
            }
        };
        Ok(Self { bucket, low })
    }

    /// The bucket the request runs in and its cap, given the container's buckets.
    pub fn capped(&self, buckets: &Buckets) -> Option<(u8, f64)> {
        let id = self.bucket.unwrap_or(buckets.default);
        Some((id, buckets.cap(id)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The offer's array round-trips; bad ids, percentages, duplicates and two defaults are
    /// refused; a request's headers name a bucket 1–5 and High or Low.
    #[test]
    fn buckets_and_classes_parse_as_documented() {
        let v = json!([{"id": 1, "maxThroughputPercentage": 50},
                       {"id": 4, "maxThroughputPercentage": 20, "isDefaultBucket": true}]);
        let b = Buckets::parse(&v).expect("valid buckets");
        assert_eq!(
            (b.cap(1), b.cap(2), b.cap(4), b.default),
            (Some(0.5), None, Some(0.2), 4)
        );
        assert_eq!(b.to_json(), v);
        for bad in [
            json!([{"id": 0, "maxThroughputPercentage": 50}]),
            json!([{"id": 6, "maxThroughputPercentage": 50}]),
            json!([{"id": 1, "maxThroughputPercentage": 0}]),
            json!([{"id": 1, "maxThroughputPercentage": 101}]),
            json!([{"id": 1, "maxThroughputPercentage": 5}, {"id": 1, "maxThroughputPercentage": 6}]),
            json!([{"id": 1, "maxThroughputPercentage": 5, "isDefaultBucket": true},
                   {"id": 2, "maxThroughputPercentage": 6, "isDefaultBucket": true}]),
            json!({"id": 1}),
        ] {
            assert!(Buckets::parse(&bad).is_err(), "{bad}");
        }
        assert_eq!(
            Class::parse(Some("3"), Some("Low")),
            Ok(Class {
                bucket: Some(3),
                low: true
            })
        );
        assert_eq!(Class::parse(None, Some("high")), Ok(Class::default()));
        for (bucket, priority) in [
            (Some("0"), None),
            (Some("6"), None),
            (Some("x"), None),
            (None, Some("Urgent")),
        ] {
            assert!(Class::parse(bucket, priority).is_err());
        }
        // No header: the default bucket; an uncapped id: no cap.
        assert_eq!(Class::default().capped(&b), Some((4, 0.2)));
        assert_eq!(
            Class {
                bucket: Some(2),
                low: false
            }
            .capped(&b),
            None
        );
    }
}
