//! The one path an item write takes: admit its estimated charge (429 before anything
//! changes), run the transaction, wait until it is durable, maybe start a split, and settle
//! the charge. Settling is tied to [`Admission`]'s lifetime, so every way out of a write
//! handler — success, a failed transaction, a failed durable wait, an early `?` — settles
//! the same way: the real charge on success, 1 RU otherwise (as the service charges a failed
//! write).

use super::error::ApiError;
use super::App;
use crate::store::container::{Container, Txn};
use crate::store::StoreError;
use std::sync::Arc;

/// Request units admitted for one write to one logical partition, settled when dropped.
pub struct Admission<'a> {
    app: &'a App,
    c: &'a Container,
    range: u32,
    epk: String,
    estimate: f64,
    charge: Option<f64>,
}

impl<'a> Admission<'a> {
    /// Spends the estimate on the partition holding `epk`; 429 when it lacks the budget.
    pub fn admit(
        app: &'a App,
        c: &'a Container,
        epk: &str,
        estimate: f64,
    ) -> Result<Self, ApiError> {
        let range = c.range_id_of(epk);
        app.spend(c, &[range], Some(epk), estimate)?;
        Ok(Self {
            app,
            c,
            range,
            epk: epk.to_string(),
            estimate,
            charge: None,
        })
    }

    /// The physical partition the write lands in.
    pub fn range(&self) -> u32 {
        self.range
    }

    /// Settles at the real charge of a write that happened.
    pub fn settle(mut self, charge: f64) {
        self.charge = Some(charge);
    }
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        let charge = self.charge.unwrap_or(1.0);
        self.app.record(
            self.c,
            &[self.range],
            Some(&self.epk),
            charge - self.estimate,
        );
    }
}

/// Runs `f` as one transaction, waits until it is durable and starts a split if a partition
/// outgrew its threshold. Errors of `f` come back as they are.
pub async fn persist<T, E>(
    app: &App,
    c: &Arc<Container>,
    f: impl FnOnce(&mut Txn<'_>) -> Result<T, E>,
) -> Result<Result<T, E>, ApiError>
where
    E: From<StoreError>,
{
    let (out, seq) = match c.write(f) {
        Ok(x) => x,
        Err(e) => return Ok(Err(e)),
    };
    c.durable(seq).await?;
    app.after_write(c);
    Ok(Ok(out))
}
