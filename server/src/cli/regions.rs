//! `strata regions`: the regions of a strata serving `--regions`, and the faults and
//! failovers a test injects into them (the explorer's Regions view does the same).

use serde_json::{json, Value};

#[derive(clap::Args, Debug)]
pub struct RegionsArgs {
    /// The server (an endpoint URL or a connection string); any of its regions' ports.
    #[arg(long, env = "STRATA_ENDPOINT")]
    endpoint: Option<String>,
    /// The region to change; without it, the regions are listed.
    region: Option<String>,
    /// The region's fault: `unavailable` (503 to everything), `write-forbidden` (403/3 to
    /// writes), `timeout` (held --hold-ms, then 408), `none`.
    #[arg(long, value_parser = ["none", "unavailable", "write-forbidden", "timeout"], requires = "region")]
    fault: Option<String>,
    /// Milliseconds added before every request the region serves.
    #[arg(long, requires = "region")]
    latency_ms: Option<u64>,
    /// How long a `timeout` fault holds each request (default 5000).
    #[arg(long, requires = "region")]
    hold_ms: Option<u64>,
    /// Make the region the write region (a manual failover of a single-write account).
    #[arg(long, requires = "region", conflicts_with_all = ["fault", "latency_ms", "hold_ms"])]
    failover: bool,
}

pub async fn regions(a: RegionsArgs) -> Result<String, String> {
    let (endpoint, client) = crate::transfer::connect_checked(a.endpoint.as_deref()).await?;
    let view = match &a.region {
        None => client.strata_regions().await,
        Some(r) if a.failover => client.strata_fail_over(r).await,
        Some(r) => {
            let mut fault = json!({ "kind": a.fault.as_deref().unwrap_or("none") });
            if let Some(ms) = a.latency_ms {
                fault["latencyMs"] = json!(ms);
            }
            if let Some(ms) = a.hold_ms {
                fault["holdMs"] = json!(ms);
            }
            client.strata_set_region_fault(r, &fault).await
        }
    }
    .map_err(|e| format!("{endpoint}: {e}"))?;
    Ok(render(&view))
}

/// One line per region: name, port, role, fault.
fn render(view: &Value) -> String {
    let regions = view["regions"].as_array().cloned().unwrap_or_default();
    let width = regions
        .iter()
        .filter_map(|r| r["name"].as_str().map(str::len))
        .max()
        .unwrap_or(0);
    let mut out: Vec<String> = regions
        .iter()
        .map(|r| {
            let f = &r["fault"];
            let mut fault = f["kind"].as_str().unwrap_or("none").to_string();
            if fault == "timeout" {
                fault += &format!(" after {} ms", f["holdMs"]);
            }
            if f["latencyMs"].as_u64().unwrap_or(0) > 0 {
                fault += &format!(", +{} ms latency", f["latencyMs"]);
            }
            format!(
                "{:width$}  :{:<5}  {:6}  fault: {fault}",
                r["name"].as_str().unwrap_or_default(),
                r["port"].as_u64().unwrap_or(0),
                if r["writable"].as_bool() == Some(true) {
                    "writes"
                } else {
                    "reads"
                },
            )
        })
        .collect();
    if view["multiWrite"].as_bool() == Some(true) {
        out.push("(multi-region writes)".into());
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    #[test]
    fn regions_render_one_line_each() {
        let v = serde_json::json!({"multiWrite": false, "regions": [
            {"name": "West US", "port": 8081, "writable": true, "fault": {"kind": "none", "latencyMs": 0, "holdMs": 5000}},
            {"name": "East US", "port": 8082, "writable": false, "fault": {"kind": "timeout", "latencyMs": 20, "holdMs": 100}},
        ]});
        let s = super::render(&v);
        assert!(s.contains("West US  :8081   writes  fault: none"), "{s}");
        assert!(
            s.contains("fault: timeout after 100 ms, +20 ms latency"),
            "{s}"
        );
    }
}
