//! Throughput (offers): how containers and databases declare RU/s.

use super::error::ApiError;
use super::request::Req;
use crate::store::catalog::ThroughputRequest;

/// Reads `x-ms-offer-throughput` (manual) or `x-ms-cosmos-offer-autopilot-settings`
/// (autoscale, `{"maxThroughput": N}`) from a create request.
pub fn throughput_from_headers(req: &Req) -> Result<Option<ThroughputRequest>, ApiError> {
    if let Some(v) = req.header("x-ms-offer-throughput") {
        let n: u64 = v.trim().parse().map_err(|_| {
            ApiError::bad_request(format!(
                "Invalid value '{v}' for x-ms-offer-throughput: it must be a whole number of RU/s."
            ))
        })?;
        validate_manual(n)?;
        return Ok(Some(ThroughputRequest {
            manual: Some(n),
            autoscale_max: None,
        }));
    }
    if let Some(v) = req.header("x-ms-cosmos-offer-autopilot-settings") {
        let parsed: serde_json::Value = serde_json::from_str(v).map_err(|e| {
            ApiError::bad_request(format!(
                "Invalid x-ms-cosmos-offer-autopilot-settings '{v}': {e}. Expected {{\"maxThroughput\": 4000}}."
            ))
        })?;
        let max = parsed
            .get("maxThroughput")
            .and_then(|m| m.as_u64())
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "x-ms-cosmos-offer-autopilot-settings '{v}' has no numeric 'maxThroughput'."
                ))
            })?;
        validate_autoscale(max)?;
        return Ok(Some(ThroughputRequest {
            manual: None,
            autoscale_max: Some(max),
        }));
    }
    Ok(None)
}

pub fn validate_manual(n: u64) -> Result<(), ApiError> {
    if n < 400 {
        return Err(ApiError::bad_request(format!(
            "The offer throughput {n} RU/s is below the minimum of 400 RU/s."
        )));
    }
    if !n.is_multiple_of(100) {
        return Err(ApiError::bad_request(format!(
            "The offer throughput {n} RU/s must be a multiple of 100."
        )));
    }
    if n > 1_000_000 {
        return Err(ApiError::bad_request(format!(
            "The offer throughput {n} RU/s is above the maximum of 1,000,000 RU/s."
        )));
    }
    Ok(())
}

pub fn validate_autoscale(n: u64) -> Result<(), ApiError> {
    if n < 1000 || !n.is_multiple_of(1000) {
        return Err(ApiError::bad_request(format!(
            "The autoscale maximum throughput {n} RU/s must be at least 1000 and a multiple of 1000."
        )));
    }
    Ok(())
}
