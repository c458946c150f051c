//! The API's shared state, apart from the router that serves it: the store, keys, options,
//! the throughput governor, prepared queries, copy jobs and the explorer, behind one cheap
//! handle every handler receives.

use crate::api::explorer;
use crate::api::security::auth::Keys;
use crate::error::CosmosError;
use crate::store::container::Container;
use crate::store::Store;
use crate::throughput::class::Class;
use crate::throughput::governor::Budget;
use std::sync::Arc;

/// Behaviour switches of the API.
#[derive(Debug, Clone, Default)]
pub struct ApiOptions {
    /// Whether clients reach us over HTTPS (for the advertised endpoint).
    pub tls: bool,
    /// Answer cross-partition queries that need client-side merging with 400/1004, as the
    /// Cosmos gateway does.
    pub gateway_compat: bool,
    /// Throttle (429) requests beyond each partition's share of the provisioned RU/s.
    pub enforce_throughput: bool,
    /// How long a client may take to send a request body (`None`: no limit).
    pub body_timeout: Option<std::time::Duration>,
}

/// Shared state of the API: one cheap handle.
#[derive(Clone)]
pub struct App {
    inner: Arc<AppInner>,
}

pub struct AppInner {
    pub store: Store,
    pub keys: Keys,
    pub options: ApiOptions,
    pub governor: crate::throughput::governor::Governor,
    /// Signs continuation tokens (kept in the data folder, so tokens outlive a restart).
    pub token_key: strata_query::sql::token::TokenKey,
    /// Queries prepared recently (see [`crate::exec::prepared`]).
    pub prepared: crate::exec::prepared::Prepared,
    /// Master-key signatures verified lately (see [`crate::api::security::verified`]).
    pub verified: crate::api::security::verified::Verified,
    /// Server-side copy jobs.
    pub jobs: crate::transfer::jobs::Jobs,
    /// The Data Explorer and the keyless conventions (certificate, readiness).
    pub explorer: explorer::Explorer,
    /// The queries served, per container, for the partition-key advisor.
    pub queries: crate::advise::sample::QuerySample,
    /// Role definitions and assignments for Entra ID principals.
    pub rbac: crate::api::security::rbac::Rbac,
    /// The account's regions, their ports and injected faults.
    pub regions: crate::regions::Regions,
}

impl std::ops::Deref for App {
    type Target = AppInner;
    fn deref(&self) -> &AppInner {
        &self.inner
    }
}

/// The parts of the API's state that run beside the requests: copy jobs, the explorer, the
/// query sample, the RBAC policy, the regions.
pub struct Services {
    pub jobs: crate::transfer::jobs::Jobs,
    pub explorer: explorer::Explorer,
    pub queries: crate::advise::sample::QuerySample,
    pub rbac: crate::api::security::rbac::Rbac,
    pub regions: crate::regions::Regions,
}

impl App {
    pub fn new(
        store: Store,
        keys: Keys,
        token_key: strata_query::sql::token::TokenKey,
        options: ApiOptions,
        services: Services,
    ) -> Self {
        let Services {
            jobs,
            explorer,
            queries,
            rbac,
            regions,
        } = services;
        Self {
            inner: Arc::new(AppInner {
                store,
                keys,
                token_key,
                jobs,
                explorer,
                queries,
                rbac,
                regions,
                prepared: Default::default(),
                verified: Default::default(),
                governor: crate::throughput::governor::Governor::new(options.enforce_throughput),
                options,
            }),
        }
    }

    /// RU/s budget of each physical partition of `c` (its own throughput, else its database's
    /// shared throughput).
    pub fn partition_rate(&self, c: &Container) -> f64 {
        self.governor.rate(c, self.store.database_throughput(&c.db))
    }

    /// What `c` may spend: each partition's rate and the container's throughput buckets.
    fn budget(&self, c: &Container) -> Budget {
        Budget {
            rate: self.partition_rate(c),
            buckets: c.throughput().map(|t| t.buckets).unwrap_or_default(),
        }
    }

    /// Spends request units on partitions; 429 when throttling is on and they (or the
    /// request's throughput bucket) lack budget.
    pub fn spend(
        &self,
        c: &Container,
        (ranges, epk): (&[u32], Option<&str>),
        ru: f64,
        class: Class,
    ) -> Result<(), CosmosError> {
        Ok(self
            .governor
            .spend(c, || self.budget(c), ranges, epk, ru, class)?)
    }

    /// Records request units already consumed (no admission check).
    pub fn record(
        &self,
        c: &Container,
        (ranges, epk): (&[u32], Option<&str>),
        ru: f64,
        class: Class,
    ) {
        self.governor
            .record(c, || self.budget(c), ranges, epk, ru, class)
    }

    /// The fewest request units a partition of `c` has left (`None`: not enforced; see
    /// [`Governor::available`](crate::throughput::governor::Governor::available)).
    pub fn available(&self, c: &Container) -> Option<f64> {
        self.governor.available(c, || self.budget(c))
    }

    /// Runs after every successful item write: starts a split when a partition outgrew the
    /// threshold.
    pub fn after_write(&self, c: &Arc<Container>) {
        self.store.maybe_split(c);
    }
}
