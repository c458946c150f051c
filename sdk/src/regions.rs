//! strata's multi-region controls (`strata --regions`): list the regions, inject a fault in
//! one, move the write region. strata only; the official emulator has no regions.

use crate::client::Request;
use crate::{CosmosClient, Error};
use reqwest::Method;
use serde_json::Value;

/// A region's name as a path segment (names have spaces).
fn segment(region: &str) -> String {
    region
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl CosmosClient {
    /// The account's regions (`GET /_strata/regions`): each with its port, whether it takes
    /// writes, and its injected fault.
    ///
    /// ```no_run
    /// # async fn f(client: strata_sdk::CosmosClient) -> Result<(), strata_sdk::Error> {
    /// let r = client.strata_regions().await?;
    /// for region in r["regions"].as_array().into_iter().flatten() {
    ///     println!("{} :{} writable={}", region["name"], region["port"], region["writable"]);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn strata_regions(&self) -> Result<Value, Error> {
        self.send(Request::new(Method::GET, "/_strata/regions"))
            .await?
            .json()
    }

    /// Sets a region's fault (`{"kind": "unavailable" | "write-forbidden" | "timeout" |
    /// "none", "latencyMs": N, "holdMs": N}`; `{}` clears it). Returns the regions.
    ///
    /// ```no_run
    /// # async fn f(client: strata_sdk::CosmosClient) -> Result<(), strata_sdk::Error> {
    /// client.strata_set_region_fault("East US", &serde_json::json!({"kind": "unavailable"})).await?;
    /// client.strata_set_region_fault("East US", &serde_json::json!({})).await?;
    /// # Ok(()) }
    /// ```
    pub async fn strata_set_region_fault(
        &self,
        region: &str,
        fault: &Value,
    ) -> Result<Value, Error> {
        let path = format!("/_strata/regions/{}", segment(region));
        self.send(Request::new(Method::PUT, path).json(fault))
            .await?
            .json()
    }

    /// Makes `region` the write region of a single-write account (a manual failover): the
    /// old write region then refuses writes with 403/3, as the service's read regions do.
    ///
    /// ```no_run
    /// # async fn f(client: strata_sdk::CosmosClient) -> Result<(), strata_sdk::Error> {
    /// client.strata_fail_over("East US").await?;
    /// # Ok(()) }
    /// ```
    pub async fn strata_fail_over(&self, region: &str) -> Result<Value, Error> {
        let path = format!("/_strata/regions/{}/failover", segment(region));
        self.send(Request::new(Method::POST, path)).await?.json()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn region_names_are_path_segments() {
        assert_eq!(super::segment("West US"), "West%20US");
        assert_eq!(super::segment("a/b"), "a%2Fb");
    }
}
