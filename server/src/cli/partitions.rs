//! `strata partitions DB/CONTAINER`: the explorer's partitions view for a terminal — each
//! physical partition's EPK range, lineage, items, bytes and request units as a bar, the
//! largest and hottest logical partitions, and the warnings (from the server's
//! `/_strata/containers/{db}/{container}/partitions`).

use serde_json::Value;
use std::fmt::Write as _;

/// Show a container's physical partitions.
#[derive(clap::Args, Debug, Clone)]
pub struct PartitionsArgs {
    /// The container, DB/CONTAINER.
    pub target: String,
    /// The server: a connection string, or an endpoint URL with the emulator key. Default:
    /// the strata on this machine (STRATA_PORT or PORT, STRATA_TLS or PROTOCOL).
    #[arg(long, env = "STRATA_ENDPOINT")]
    pub endpoint: Option<String>,
    /// Redraw every this many seconds until interrupted.
    #[arg(long, value_name = "SECONDS")]
    pub watch: Option<u64>,
    /// Print the view as JSON instead.
    #[arg(long)]
    pub json: bool,
}

/// Binary units, as the size flags count them (`--partition-split-bytes 64MB`).
fn bytes(n: f64) -> String {
    const K: f64 = 1024.0;
    match n {
        n if n >= K * K * K => format!("{:.2} GB", n / (K * K * K)),
        n if n >= K * K => format!("{:.2} MB", n / (K * K)),
        n if n >= K => format!("{:.1} KB", n / K),
        n => format!("{n:.0} B"),
    }
}

/// The view as text: one line per partition with a bar of its share of the bytes.
pub fn render(v: &Value) -> String {
    let num = |v: &Value| v.as_f64().unwrap_or(0.0);
    let parts = v["partitions"].as_array().cloned().unwrap_or_default();
    let total: f64 = parts.iter().map(|p| num(&p["bytes"])).sum::<f64>().max(1.0);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}/{}  key {}  {} physical partition(s), generation {}",
        v["database"].as_str().unwrap_or_default(),
        v["container"].as_str().unwrap_or_default(),
        v["partitionKey"]["paths"],
        parts.len(),
        v["generation"]
    );
    let _ = writeln!(
        out,
        "{:<6} {:<22} {:>9} {:>10} {:>14} {:>9}  {:<20} lineage",
        "range", "EPK min", "items", "bytes", "RU/s used/max", "throttled", "share of bytes"
    );
    for p in &parts {
        let ru = &p["requestUnits"];
        let share = num(&p["bytes"]) / total;
        let bar = "#".repeat((share * 20.0).round() as usize);
        let min = p["minInclusive"].as_str().unwrap_or_default();
        let min = if min.is_empty() { "\"\"" } else { min };
        let min: String = min.chars().take(20).collect();
        let parents: Vec<String> = p["parents"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| {
                x.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| x.to_string())
            })
            .collect();
        let _ = writeln!(
            out,
            "{:<6} {:<22} {:>9} {:>10} {:>14} {:>9}  {:<20} {}",
            p["id"].as_str().unwrap_or_default(),
            min,
            num(&p["itemCount"]),
            bytes(num(&p["bytes"])),
            format!(
                "{:.1}/{:.0}",
                num(&ru["consumedPerSecond"]),
                num(&ru["budgetPerSecond"])
            ),
            num(&ru["throttledRequests"]),
            bar,
            if parents.is_empty() {
                "original".to_string()
            } else {
                format!("split from {}", parents.join(" -> "))
            }
        );
    }
    let mut largest: Vec<(Value, f64, f64)> = parts
        .iter()
        .flat_map(|p| {
            p["largestLogicalPartitions"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|lp| {
            (
                lp["partitionKey"].clone(),
                num(&lp["bytes"]),
                num(&lp["itemCount"]),
            )
        })
        .collect();
    largest.sort_by(|a, b| b.1.total_cmp(&a.1));
    if !largest.is_empty() {
        let _ = writeln!(out, "largest logical partitions:");
        for (k, b, n) in largest.iter().take(5) {
            let _ = writeln!(out, "  {k:<40} {:>10} {n:>9} items", bytes(*b));
        }
    }
    let mut hot: Vec<(Value, f64)> = crate::api::admin::inspect::hottest_logical_partitions(&parts)
        .into_iter()
        .map(|lp| (lp["partitionKey"].clone(), num(&lp["requestUnits"])))
        .collect();
    hot.sort_by(|a, b| b.1.total_cmp(&a.1));
    if !hot.is_empty() {
        let _ = writeln!(out, "hottest logical partitions:");
        for (k, ru) in hot.iter().take(5) {
            let _ = writeln!(out, "  {k:<40} {ru:>10.1} RU");
        }
    }
    let warnings = v["warnings"].as_array().cloned().unwrap_or_default();
    if warnings.is_empty() {
        let _ = writeln!(out, "no warnings");
    }
    for w in warnings {
        let _ = writeln!(
            out,
            "WARNING: {}",
            w["message"].as_str().unwrap_or_default()
        );
    }
    out
}

/// Prints the view (again every `--watch` seconds).
pub async fn show(a: PartitionsArgs) -> Result<String, String> {
    let (db, coll) = a
        .target
        .split_once('/')
        .ok_or_else(|| format!("the container must be DB/CONTAINER, not '{}'", a.target))?;
    let (_, client) = crate::transfer::connect_checked(a.endpoint.as_deref()).await?;
    let c = client.database(db).container(coll);
    loop {
        let v = c.strata_partitions().await.map_err(|e| e.to_string())?;
        let text = if a.json {
            serde_json::to_string_pretty(&v).unwrap_or_default()
        } else {
            render(&v)
        };
        match a.watch {
            None => return Ok(text.trim_end().to_string()),
            Some(s) => {
                println!("{text}");
                tokio::time::sleep(std::time::Duration::from_secs(s.max(1))).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_view_reads_as_a_table_with_lineage_and_warnings() {
        let v = json!({
            "database": "app", "container": "events", "partitionKey": {"paths": ["/t", "/u"]}, "generation": 2,
            "partitions": [
                {"id": "1", "minInclusive": "", "maxExclusive": "7F", "parents": ["0"], "itemCount": 10, "bytes": 3000,
                 "largestLogicalPartitions": [{"partitionKey": ["a", "b"], "bytes": 2000, "itemCount": 6}],
                 "requestUnits": {"consumedPerSecond": 5.0, "budgetPerSecond": 200.0, "throttledRequests": 0,
                                  "hottestLogicalPartitions": [{"partitionKey": ["a", "b"], "requestUnits": 40.0}]}},
                {"id": "2", "minInclusive": "7F", "maxExclusive": "FF", "parents": ["0"], "itemCount": 3, "bytes": 1000,
                 "largestLogicalPartitions": [], "requestUnits": {"consumedPerSecond": 0.0, "budgetPerSecond": 200.0, "throttledRequests": 2}}
            ],
            "warnings": [{"level": "warning", "kind": "throttling", "message": "partition 2 throttled 2 requests (429)"}]
        });
        let text = render(&v);
        assert!(text.contains("2 physical partition(s)"), "{text}");
        assert!(text.contains("split from 0"), "{text}");
        assert!(
            text.contains("###############"),
            "three quarters of the bytes: {text}"
        );
        assert!(text.contains("[\"a\",\"b\"]"), "{text}");
        assert!(text.contains("WARNING: partition 2 throttled"), "{text}");
    }
}
