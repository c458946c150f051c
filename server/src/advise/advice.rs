//! The advice: every candidate measured on the same items and queries, ranked, and the
//! recommendation with its reasons and the `strata copy` command that migrates to it.

use super::assess::{assess, rank, size, Assessment};
use super::model::{json_len, Settings, Tally};
use super::sample::Shape;
use serde::Serialize;
use serde_json::Value;
use strata_query::pk::{PartitionKeyDefinition, PartitionKind};

/// Candidate keys measured item by item.
pub struct Advisor {
    pub settings: Settings,
    current: PartitionKeyDefinition,
    tallies: Vec<Tally>,
    items: u64,
}

/// The definition `strata copy --partition-key` creates for `paths`: one path is `Hash`
/// version 2, more are `MultiHash`.
pub fn definition(paths: &[String]) -> Result<PartitionKeyDefinition, String> {
    let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
    let kind = if refs.len() == 1 {
        PartitionKind::Hash
    } else {
        PartitionKind::MultiHash
    };
    PartitionKeyDefinition::new(&refs, kind, 2).map_err(|e| e.to_string())
}

/// How many of at most `limit` items range `k` of `ranges` gives: `limit` shared out, the
/// first ranges taking one more when it does not divide.
pub fn share(limit: u64, ranges: usize, k: usize) -> u64 {
    let n = ranges.max(1) as u64;
    limit / n + u64::from((k as u64) < limit % n)
}

/// Parses `/a,/b,/c` into paths (one to three), as `strata copy --partition-key` does.
pub fn parse_key(text: &str) -> Result<Vec<String>, String> {
    let paths = crate::transfer::copy::key_paths(text)?;
    definition(&paths)?;
    Ok(paths)
}

impl Advisor {
    /// The current key first, then each candidate not equal to it.
    pub fn new(
        current: PartitionKeyDefinition,
        candidates: Vec<PartitionKeyDefinition>,
        settings: Settings,
    ) -> Advisor {
        let mut tallies = vec![Tally::new(current.clone())];
        for c in candidates {
            if tallies.iter().all(|t| t.def.paths != c.paths) {
                tallies.push(Tally::new(c));
            }
        }
        Advisor {
            settings,
            current,
            tallies,
            items: 0,
        }
    }

    /// Adds one item, as read (with its system properties).
    pub fn add(&mut self, doc: &Value) {
        let len = json_len(doc);
        let ts = doc.get("_ts").and_then(Value::as_u64).unwrap_or(0);
        for t in &mut self.tallies {
            t.add(doc, len, ts, &self.settings);
        }
        self.items += 1;
    }

    pub fn items(&self) -> u64 {
        self.items
    }

    /// Measures and ranks every key against the query sample.
    pub fn finish(self, shapes: &[Shape], source: Source) -> Advice {
        let mut candidates: Vec<Assessment> = self
            .tallies
            .iter()
            .map(|t| assess(t, &self.current, shapes, &self.settings))
            .collect();
        rank(&mut candidates);
        let recommendation = recommend(&candidates, &source);
        Advice {
            source,
            settings: self.settings,
            items_read: self.items,
            query_shapes: shapes.len(),
            query_executions: shapes.iter().map(|s| s.count).sum(),
            candidates,
            recommendation,
        }
    }
}

/// Where the items came from (for the report and the copy command).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Source {
    pub database: String,
    pub container: String,
    /// The `--from` of the copy command (empty: the local strata).
    pub from: String,
    /// Items in the container, when known; more than `items_read` when sampled.
    pub items_total: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Recommendation {
    pub key: Vec<String>,
    /// Whether the current key is already the best measured.
    pub keep_current: bool,
    pub reasons: Vec<String>,
    /// The command that copies the container into one with the recommended key.
    pub command: Option<String>,
}

/// The advisor's whole answer (`--json` prints it).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Advice {
    pub source: Source,
    pub settings: Settings,
    pub items_read: u64,
    pub query_shapes: usize,
    pub query_executions: f64,
    /// Best first.
    pub candidates: Vec<Assessment>,
    pub recommendation: Recommendation,
}

fn recommend(ranked: &[Assessment], source: &Source) -> Recommendation {
    let Some(best) = ranked.first() else {
        return Recommendation {
            key: Vec::new(),
            keep_current: true,
            reasons: vec!["no key was measured".into()],
            command: None,
        };
    };
    let current = ranked.iter().find(|a| a.current);
    let mut reasons: Vec<String> = Vec::new();
    for c in &best.checks {
        let was = current.and_then(|cur| cur.checks.iter().find(|x| x.name == c.name));
        let mark = match (c.ok, was.map(|w| w.ok)) {
            (true, Some(false)) => "fixes",
            (true, _) => "passes",
            (false, _) => "still fails",
        };
        reasons.push(format!("{mark} \"{}\": {}", c.name, c.detail));
    }
    if let Some(cur) = current.filter(|c| !best.current && c.routing.executions > 0.0) {
        let (a, b) = (cur.routing.request_charge, best.routing.request_charge);
        if a > 0.0 {
            reasons.push(format!(
                "the sampled queries would cost an estimated {:.0} RU instead of {:.0} ({:+.0}%)",
                b,
                a,
                (b - a) / a * 100.0
            ));
        }
    }
    if let Some(cur) = current.filter(|_| !best.current) {
        reasons.push(format!(
            "largest logical partition {} instead of {}",
            size(best.logical.largest_bytes),
            size(cur.logical.largest_bytes)
        ));
    }
    let command = (!best.current).then(|| copy_command(best, source));
    Recommendation {
        key: best.key.clone(),
        keep_current: best.current,
        reasons,
        command,
    }
}

/// `strata copy …` into a new container keyed by `best`.
fn copy_command(best: &Assessment, source: &Source) -> String {
    let suffix: Vec<String> = best
        .key
        .iter()
        .map(|p| p.trim_start_matches('/').replace('/', "-").to_lowercase())
        .collect();
    let mut cmd = String::from("strata copy");
    if source.from.to_ascii_lowercase().contains("accountkey=") {
        // Never print a key: the command reads the connection string from the environment.
        cmd.push_str(" --from \"$COSMOS_CONNECTION_STRING\"");
    } else if !source.from.is_empty() {
        cmd.push_str(&format!(" --from '{}'", source.from.replace('\'', "'\\''")));
    }
    cmd.push_str(&format!(
        " --source {db}/{c} --dest {db}/{c}-by-{} --partition-key {}",
        suffix.join("-"),
        best.key.join(","),
        db = source.database,
        c = source.container,
    ));
    // The user chooses the value; the placeholder is valid as written.
    for (p, n) in best.key.iter().zip(&best.missing_by_level) {
        if *n > 0 {
            cmd.push_str(&format!(" --fill '{p}=\"none\"'"));
        }
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::share;

    #[test]
    fn a_sample_is_shared_out_exactly() {
        assert_eq!(
            (0..3).map(|k| share(50, 3, k)).collect::<Vec<_>>(),
            [17, 17, 16]
        );
        assert_eq!(share(u64::MAX, 4, 0), u64::MAX / 4 + 1);
        assert_eq!(share(5, 0, 0), 5);
    }
}
