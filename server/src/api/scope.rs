//! Which part of a container's key space a request addresses.
//!
//! Three independent inputs narrow it, and they combine by intersection:
//! * `x-ms-documentdb-partitionkey`: a full key (one logical partition) or, on a MultiHash
//!   container, a shorter array = a prefix (JS sends prefixes this way);
//! * `x-ms-documentdb-partitionkeyrangeid`: one physical partition (410/1002 once it split);
//! * `x-ms-start-epk` / `x-ms-end-epk`: an EPK sub-range (Python prefix queries, change feed by
//!   partition key, feed ranges).

use crate::api::request::Req;
use crate::error::CosmosError;
use crate::store::container::Container;
use strata_query::pk::{EpkRange, PartitionKey, PkComponent};
use strata_query::protocol::header;

use strata_query::sql::route_plan::{RequestScope, Route};

/// The scope of a feed or query request.
pub fn request_scope(c: &Container, req: &Req) -> Result<RequestScope, CosmosError> {
    scope_of(c, req, req.partition_key()?.as_ref())
}

/// [`request_scope`] with the partition key header parsed already (`pk`).
pub fn scope_of(
    c: &Container,
    req: &Req,
    pk: Option<&PartitionKey>,
) -> Result<RequestScope, CosmosError> {
    let mut scope = RequestScope::whole();
    if let Some(pk) = pk {
        scope = match (c.pk.system_key, pk.is_empty()) {
            (true, true) => {
                RequestScope::of_key(&c.pk, &PartitionKey(vec![PkComponent::Undefined]))?
            }
            (false, true) => {
                return Err(CosmosError::bad_request(format!(
                    "The partition key [] names no value: give at least the first of the container's partition key paths ({}), or no partition key to query every partition.",
                    c.pk.paths.join(", ")
                )))
            }
            _ => RequestScope::of_key(&c.pk, pk)?,
        };
    }
    if let Some(id) = req.header(header::PARTITION_KEY_RANGE_ID) {
        let r = range_by_id(c, id)?;
        scope.range = scope.range.and_then(|s| s.intersect(&r));
        if scope.route == Route::FanOut {
            scope.route = Route::Targeted;
            scope.source = "partition key range id header";
        }
    }
    let start = req.header(header::START_EPK);
    let end = req.header(header::END_EPK);
    if start.is_some() || end.is_some() {
        let r = EpkRange::new(start.unwrap_or(""), end.unwrap_or("FF"));
        for b in [&r.min, &r.max] {
            if !b.bytes().all(|x| x.is_ascii_hexdigit()) {
                return Err(CosmosError::bad_request(format!(
                    "The EPK bound '{b}' in x-ms-start-epk/x-ms-end-epk is not a hex string."
                )));
            }
        }
        let r = EpkRange::new(r.min.to_ascii_uppercase(), r.max.to_ascii_uppercase());
        scope.range = scope.range.and_then(|s| s.intersect(&r));
        if scope.route == Route::FanOut {
            scope.route = Route::Targeted;
            scope.source = "EPK range headers";
        }
    }
    if let Some(limit) = &req.epk_limit {
        scope.range = scope.range.and_then(|s| s.intersect(limit));
        if scope.route == Route::FanOut {
            scope.route = Route::Targeted;
            scope.source = "the resource token's partition key scope";
        }
    }
    Ok(scope)
}

/// The EPK range of a live physical partition; 410/1002 for one that split (or never was).
pub fn range_by_id(c: &Container, id: &str) -> Result<EpkRange, CosmosError> {
    let n = id.trim().parse::<u32>().ok();
    if let Some(swapping) = n.and_then(|n| c.swapping_among(&[n])) {
        return Err(CosmosError::completing_split(format!(
            "The partition key range '{swapping}' is being split or merged; retry shortly."
        )));
    }
    let found = n.and_then(|n| c.range_of_id(n));
    found.ok_or_else(|| {
        CosmosError::gone(format!(
            "The partition key range '{id}' is gone (it was split or never existed); re-read /pkranges and retry."
        ))
    })
}

/// Ids of the physical partitions overlapping `range`, in EPK order.
pub fn ranges_touched(c: &Container, range: &EpkRange) -> Vec<u32> {
    c.ranges_overlapping(range)
}
