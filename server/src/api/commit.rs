//! The one path every item write takes — point writes, batches, bulk, deletes by partition
//! key: admit its estimated charge (429 before anything changes), run its transaction(s), wait
//! until they are durable, maybe start a split, and settle the charge. Settling is tied to
//! [`Admission`]'s lifetime, so every way out of a write handler — success, a failed
//! transaction, a failed durable wait, an early `?` — settles the same way: the real charge
//! on success, 1 RU otherwise (as the service charges a failed write).

use crate::api::request::Req;
use crate::api::App;
use crate::error::CosmosError;
use crate::store::container::{Container, Txn};
use crate::store::engine::Durable;
use crate::store::StoreError;
use crate::throughput::class::Class;
use std::sync::Arc;
use strata_query::protocol::header;

/// Request units admitted for one request before it runs, settled when dropped: the real
/// charge once known, 1 RU otherwise (as the service charges a failed request). Reads,
/// queries and feeds are admitted for their minimum; writes for their estimate.
pub struct Admission<'a> {
    app: &'a App,
    c: &'a Arc<Container>,
    /// The physical partitions charged (the first is the one a point operation lands in).
    ranges: Vec<u32>,
    /// The logical partition, for a request to one.
    epk: Option<String>,
    estimate: f64,
    charge: Option<f64>,
    /// The request's throughput bucket and priority.
    class: Class,
}

/// The throughput bucket and priority `req` names (400 for a bad one).
pub fn class(req: &Req) -> Result<Class, CosmosError> {
    Class::parse(
        req.header(header::THROUGHPUT_BUCKET),
        req.header(header::PRIORITY_LEVEL),
    )
    .map_err(CosmosError::bad_request)
}

impl<'a> Admission<'a> {
    /// Spends `estimate` on the partition holding `epk`; 429 when it lacks the budget.
    pub fn point(
        app: &'a App,
        (c, req): (&'a Arc<Container>, &Req),
        epk: &str,
        estimate: f64,
    ) -> Result<Self, CosmosError> {
        let class = class(req)?;
        let range = c.range_id_of(epk);
        swap_wait(c, &[range])?;
        app.spend(c, (&[range], Some(epk)), estimate, class)?;
        Ok(Self {
            app,
            c,
            ranges: vec![range],
            epk: Some(epk.to_string()),
            estimate,
            charge: None,
            class,
        })
    }

    /// Spends `estimate` across `ranges` (a request over many logical partitions).
    pub fn ranges(
        app: &'a App,
        (c, req): (&'a Arc<Container>, &Req),
        ranges: Vec<u32>,
        estimate: f64,
    ) -> Result<Self, CosmosError> {
        let class = class(req)?;
        swap_wait(c, &ranges)?;
        app.spend(c, (&ranges, None), estimate, class)?;
        Ok(Self {
            app,
            c,
            ranges,
            epk: None,
            estimate,
            charge: None,
            class,
        })
    }

    /// The physical partition a point operation lands in.
    pub fn range(&self) -> u32 {
        self.ranges.first().copied().unwrap_or_default()
    }

    /// Settles at the real charge of a request that ran.
    pub fn settle(mut self, charge: f64) {
        self.charge = Some(charge);
    }
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        let charge = self.charge.unwrap_or(1.0);
        self.app.record(
            self.c,
            (&self.ranges, self.epk.as_deref()),
            charge - self.estimate,
            self.class,
        );
    }
}

/// One write request in progress: its admission, and the durability of the transactions it
/// ran.
pub struct Commit<'a> {
    admission: Admission<'a>,
    /// The latest transaction's token; `None` until one ran.
    token: Option<Durable>,
}

impl<'a> Commit<'a> {
    /// Admits a write to the logical partition `epk` (see [`Admission::point`]).
    pub fn admit(
        app: &'a App,
        on: (&'a Arc<Container>, &Req),
        epk: &str,
        estimate: f64,
    ) -> Result<Self, CosmosError> {
        refuse_copies(on.0)?;
        Ok(Self {
            admission: Admission::point(app, on, epk, estimate)?,
            token: None,
        })
    }

    /// Admits a write to many logical partitions (see [`Admission::ranges`]).
    pub fn admit_ranges(
        app: &'a App,
        on: (&'a Arc<Container>, &Req),
        ranges: Vec<u32>,
        estimate: f64,
    ) -> Result<Self, CosmosError> {
        refuse_copies(on.0)?;
        Ok(Self {
            admission: Admission::ranges(app, on, ranges, estimate)?,
            token: None,
        })
    }

    /// A commit whose operations are admitted one by one by the caller (bulk): it only
    /// gathers their durability and the split check.
    pub fn per_operation(app: &'a App, c: &'a Arc<Container>) -> Self {
        Self {
            admission: Admission {
                app,
                c,
                ranges: Vec::new(),
                epk: None,
                estimate: 0.0,
                charge: Some(0.0),
                class: Class::default(),
            },
            token: None,
        }
    }

    /// The physical partition a point write lands in.
    pub fn range(&self) -> u32 {
        self.admission.range()
    }

    /// Runs `f` as one atomic transaction; errors of `f` come back as they are and leave
    /// nothing behind. A request may run several (bulk, deletes in bounded chunks).
    pub async fn transact<T, E: From<StoreError>>(
        &mut self,
        f: impl FnOnce(&mut Txn<'_>) -> Result<T, E>,
    ) -> Result<T, E> {
        let _turn = self.admission.c.write_turn().await;
        let (out, token) = self.admission.c.write(f)?;
        self.token = Some(self.token.map_or(token, |t| t.max(token)));
        Ok(out)
    }

    /// [`Commit::transact`] on the blocking pool, for a transaction that waits on a script:
    /// the async runtime's threads never block on JavaScript.
    pub async fn transact_blocking<T: Send + 'static>(
        &mut self,
        f: impl FnOnce(&mut Txn<'_>) -> Result<T, CosmosError> + Send + 'static,
    ) -> Result<T, CosmosError> {
        let c = Arc::clone(self.admission.c);
        // One script queued at a time, then its turn among the writes (see write_turn).
        let _script = self.admission.c.script_turn().await;
        let _turn = self.admission.c.write_turn().await;
        let (out, token) = tokio::task::spawn_blocking(move || c.write(f))
            .await
            .map_err(|e| CosmosError::internal(format!("a script transaction failed: {e}")))??;
        self.token = Some(self.token.map_or(token, |t| t.max(token)));
        Ok(out)
    }

    /// Waits until every transaction this commit ran is durable, then starts a split if a
    /// partition outgrew its threshold.
    pub async fn durable(&mut self) -> Result<(), CosmosError> {
        if let Some(token) = self.token.take() {
            let (app, c) = (self.admission.app, self.admission.c);
            c.durable(token).await?;
            app.after_write(c);
        }
        Ok(())
    }

    /// Settles at the real charge of a write that happened.
    pub fn settle(self, charge: f64) {
        self.admission.settle(charge);
    }
}

/// 410/1007 while one of `ranges` is being replaced by a split or merge asked for through the
/// management API: the SDKs retry once the new ranges are in place.
fn swap_wait(c: &Container, ranges: &[u32]) -> Result<(), CosmosError> {
    match c.swapping_among(ranges) {
        Some(id) => Err(CosmosError::completing_split(format!(
            "The partition key range '{id}' is being split or merged; retry shortly."
        ))),
        None => Ok(()),
    }
}

/// Items of a global secondary index are copies its sync writes (`crate::gsi`); a client's
/// write to one is refused (the service documents these containers as read-only).
pub fn refuse_copies(c: &Container) -> Result<(), CosmosError> {
    if !c.is_gsi() {
        return Ok(());
    }
    Err(CosmosError::bad_request(format!(
        "The container '{}' is a global secondary index: its items are kept in sync with its source container and cannot be written directly; write to the source instead.",
        c.id
    )))
}
