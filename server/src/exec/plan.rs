//! The plan one query page runs: where it goes ([`RoutePlan`]: route, partitions, the
//! operators above the scans and how partial results merge), how each partition is read (the
//! index access path) and how the page is cut. One value, decided before anything is read:
//! it is what `x-strata-query-plan` prints and what [`run`](super::run) executes.

use super::access_path::{planned, AccessMemo};
use super::{AccessPath, ExecError};
use crate::store::container::Container;
use std::fmt;
use std::sync::Arc;
use strata_query::sql::route_plan::{self, Partition, RequestScope, Route, RoutePlan};
use strata_query::sql::PreparedQuery;

/// How a page is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paging {
    /// Most rows in one page (`x-ms-max-item-count`, or the default).
    pub page_size: usize,
    /// End the page at the end of each physical partition, as the Cosmos gateway pages a
    /// plain cross-partition query (`--gateway-compat`).
    pub per_range: bool,
}

/// Everything one page of a query needs (see the module's doc).
#[derive(Debug, Clone)]
pub struct Plan {
    pub query: Arc<PreparedQuery>,
    pub routing: RoutePlan,
    pub access: Arc<AccessPath>,
    pub paging: Paging,
}

/// Where `p` goes in `c` under the request's `scope`: the pure planner over the current
/// partition map.
pub fn route(c: &Container, p: &PreparedQuery, scope: &RequestScope) -> RoutePlan {
    let partitions: Vec<Partition> = c
        .partitions()
        .ranges
        .into_iter()
        .map(|r| Partition {
            id: r.id,
            range: r.range,
        })
        .collect();
    route_plan::plan(p, scope, &partitions)
}

impl Plan {
    /// The plan of `query` routed by `routing`, reading each partition as the container's
    /// current indexing policy allows (`enable_scan` is `x-ms-documentdb-query-enable-scan`),
    /// or the service's refusal when the index cannot serve it. A route to one logical
    /// partition reads it directly where the lookup would only find it again
    /// ([`AccessPath::pin_partition`]). A kept prepared query's `memo` spares choosing the
    /// access path again while the index state it was chosen under holds.
    pub fn new(
        c: &Container,
        query: Arc<PreparedQuery>,
        routing: RoutePlan,
        enable_scan: bool,
        paging: Paging,
        memo: Option<&AccessMemo>,
    ) -> Result<Plan, ExecError> {
        let single = routing.route == Route::Single;
        let access = planned(c, &query, single, enable_scan, memo)?;
        Ok(Plan {
            query,
            routing,
            access,
            paging,
        })
    }

    /// Ids of the physical partitions the plan visits, in EPK order.
    pub fn partition_ids(&self) -> Vec<u32> {
        self.routing.partition_ids()
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.routing.display(&self.query))?;
        writeln!(f, "access: {}", self.access)?;
        write!(f, "paging: up to {} rows", self.paging.page_size)?;
        if self.paging.per_range {
            write!(f, ", one physical partition per page")?;
        }
        Ok(())
    }
}
