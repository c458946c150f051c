//! One candidate key judged, and the candidates ranked: the checks follow the service's
//! guidance for (hierarchical) partition keys in its order — a first level with many
//! values, logical partitions under the size limit now and as the data grows, no hot
//! partition, queries that name the key or a prefix of it — then the items' readiness.

use super::model::{simulate, Settings, SimRange, Tally, PARTITION_MAX_RU};
use super::routes::{replay, Routing};
use super::sample::Shape;
use serde::Serialize;
use serde_json::Value;
use strata_query::pk::PartitionKeyDefinition;
use strata_query::sql::route_plan::Partition;

/// One check of a candidate.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Logicals {
    pub count: u64,
    pub largest_key: Value,
    pub largest_bytes: u64,
    pub median_bytes: u64,
    pub largest_bytes_at_growth: u64,
    pub over_limit: u64,
    pub over_limit_at_growth: u64,
    /// Logical partitions by size: (up to bytes, how many), in powers of four from 1 KB.
    pub histogram: Vec<(u64, u64)>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Physicals {
    pub partitions: usize,
    pub partitions_at_growth: usize,
    /// Bytes per physical partition, in EPK order.
    pub bytes: Vec<u64>,
    /// The largest physical partition over the mean.
    pub skew: f64,
    /// Partitions over the split size that hold one logical partition (cannot split).
    pub unsplittable: usize,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Heat {
    pub window_secs: u64,
    pub recent_writes: u64,
    pub write_ru_per_sec: f64,
    pub busiest_logical_key: Value,
    pub busiest_logical_ru_per_sec: f64,
    /// Write RU/s per physical partition, in EPK order.
    pub physical_ru_per_sec: Vec<f64>,
    /// What one physical partition may serve: its share of the throughput (at most 10,000).
    pub partition_budget: f64,
}

/// Everything measured for one key.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Assessment {
    pub key: Vec<String>,
    pub current: bool,
    pub first_level_values: u64,
    pub logical: Logicals,
    pub physical: Physicals,
    pub heat: Heat,
    pub routing: Routing,
    /// Items lacking a level of the key (`--fill` when copying).
    pub missing: u64,
    /// Per level of the key, the items that lack it.
    pub missing_by_level: Vec<u64>,
    pub checks: Vec<Check>,
}

/// Measures `tally`'s key: the simulated map, heat, the sample's routes, the checks.
pub fn assess(
    tally: &Tally,
    current: &PartitionKeyDefinition,
    shapes: &[Shape],
    s: &Settings,
) -> Assessment {
    let lps = tally.in_epk_order(s.scale);
    let map = simulate(&tally.def, &lps, s);
    let grown: Vec<(String, u64, u64)> = lps
        .iter()
        .map(|(e, b, n)| (e.clone(), (*b as f64 * s.growth) as u64, *n))
        .collect();
    let partitions_at_growth = simulate(&tally.def, &grown, s).len();
    let partitions: Vec<Partition> = map
        .iter()
        .enumerate()
        .map(|(i, r)| Partition {
            id: i as u32,
            range: r.range.clone(),
        })
        .collect();
    let logical = logicals(tally, s);
    let physical = physicals(&map, partitions_at_growth, s);
    let heat = heat(tally, &lps, &map, s);
    let routing = replay(shapes, current, &tally.def, &partitions);
    let mut a = Assessment {
        key: tally.def.paths.clone(),
        current: tally.def.paths == current.paths,
        first_level_values: tally.first_level_values(),
        logical,
        physical,
        heat,
        routing,
        missing: (tally.missing as f64 * s.scale) as u64,
        missing_by_level: tally
            .missing_by_level
            .iter()
            .map(|n| (*n as f64 * s.scale) as u64)
            .collect(),
        checks: Vec::new(),
    };
    a.checks = checks(&a, s);
    a
}

fn logicals(tally: &Tally, s: &Settings) -> Logicals {
    let mut sizes: Vec<(u64, &Value)> = tally
        .logical
        .values()
        .map(|l| ((l.bytes as f64 * s.scale) as u64, &l.key))
        .collect();
    sizes.sort_by_key(|x| x.0);
    let (largest_bytes, largest_key) = sizes
        .last()
        .map(|(b, k)| (*b, (*k).clone()))
        .unwrap_or((0, Value::Null));
    let grow = |b: u64| (b as f64 * s.growth) as u64;
    let mut histogram: Vec<(u64, u64)> = Vec::new();
    for (b, _) in &sizes {
        let mut up = 1024u64;
        while up < *b {
            up = up.saturating_mul(4);
        }
        match histogram.last_mut() {
            Some(last) if last.0 == up => last.1 += 1,
            _ => histogram.push((up, 1)),
        }
    }
    Logicals {
        count: (sizes.len() as f64 * s.scale.max(1.0)) as u64,
        largest_key,
        largest_bytes,
        median_bytes: sizes.get(sizes.len() / 2).map_or(0, |x| x.0),
        largest_bytes_at_growth: grow(largest_bytes),
        over_limit: sizes.iter().filter(|x| x.0 > s.logical_limit).count() as u64,
        over_limit_at_growth: sizes.iter().filter(|x| grow(x.0) > s.logical_limit).count() as u64,
        histogram,
    }
}

fn physicals(map: &[SimRange], partitions_at_growth: usize, s: &Settings) -> Physicals {
    let bytes: Vec<u64> = map.iter().map(|r| r.bytes).collect();
    let mean = bytes.iter().sum::<u64>() as f64 / bytes.len().max(1) as f64;
    let max = bytes.iter().copied().max().unwrap_or(0) as f64;
    Physicals {
        partitions: map.len(),
        partitions_at_growth,
        skew: if mean > 0.0 { max / mean } else { 1.0 },
        unsplittable: map
            .iter()
            .filter(|r| r.bytes > s.split_bytes && r.hi - r.lo < 2)
            .count(),
        bytes,
    }
}

fn heat(tally: &Tally, lps: &[(String, u64, u64)], map: &[SimRange], s: &Settings) -> Heat {
    let window = s.window_secs.max(1) as f64;
    let rate = |ru: f64| ru * s.scale / window;
    let busiest = tally
        .logical
        .values()
        .max_by(|a, b| a.recent_ru.total_cmp(&b.recent_ru));
    let physical_ru_per_sec: Vec<f64> = map
        .iter()
        .map(|r| {
            lps[r.lo..r.hi]
                .iter()
                .filter_map(|(e, _, _)| tally.logical.get(e))
                .map(|l| rate(l.recent_ru))
                .sum()
        })
        .collect();
    Heat {
        window_secs: s.window_secs,
        recent_writes: (tally.logical.values().map(|l| l.recent_writes).sum::<u64>() as f64
            * s.scale) as u64,
        write_ru_per_sec: physical_ru_per_sec.iter().sum(),
        busiest_logical_key: busiest.map_or(Value::Null, |l| l.key.clone()),
        busiest_logical_ru_per_sec: busiest.map_or(0.0, |l| rate(l.recent_ru)),
        physical_ru_per_sec,
        partition_budget: (s.throughput as f64 / map.len().max(1) as f64).min(PARTITION_MAX_RU),
    }
}

/// Binary units for messages.
pub fn size(n: u64) -> String {
    const K: f64 = 1024.0;
    let n = n as f64;
    match n {
        n if n >= K * K * K => format!("{:.2} GB", n / (K * K * K)),
        n if n >= K * K => format!("{:.1} MB", n / (K * K)),
        n if n >= K => format!("{:.1} KB", n / K),
        n => format!("{n:.0} B"),
    }
}

fn checks(a: &Assessment, s: &Settings) -> Vec<Check> {
    let (l, p, h, r) = (&a.logical, &a.physical, &a.heat, &a.routing);
    let busiest_physical = h.physical_ru_per_sec.iter().copied().fold(0.0, f64::max);
    let growth = s.growth;
    vec![
        Check {
            name: "first level has many values",
            // An empty container has nothing to spread yet.
            ok: l.count == 0 || a.first_level_values as usize >= p.partitions_at_growth,
            detail: format!(
                "{} distinct values of {} for {} physical partition(s) at {growth}× growth",
                a.first_level_values, a.key[0], p.partitions_at_growth
            ),
        },
        Check {
            name: "logical partitions under the limit",
            ok: l.over_limit == 0,
            detail: format!(
                "largest {} {} of {} allowed; {} over",
                l.largest_key,
                size(l.largest_bytes),
                size(s.logical_limit),
                l.over_limit
            ),
        },
        Check {
            name: "room to grow",
            ok: l.over_limit_at_growth == 0,
            detail: format!(
                "at {growth}× growth the largest holds {}; {} over the limit",
                size(l.largest_bytes_at_growth),
                l.over_limit_at_growth
            ),
        },
        Check {
            name: "no hot partition",
            ok: h.busiest_logical_ru_per_sec <= h.partition_budget
                && busiest_physical <= h.partition_budget,
            detail: format!(
                "busiest logical partition {} writes {:.1} RU/s, busiest physical {:.1} RU/s, each physical partition gets {:.0} RU/s (last {} s)",
                h.busiest_logical_key,
                h.busiest_logical_ru_per_sec,
                busiest_physical,
                h.partition_budget,
                h.window_secs
            ),
        },
        Check {
            name: "queries name the key",
            ok: r.executions == 0.0 || r.fanout_ru <= 0.5,
            detail: if r.executions == 0.0 {
                "no queries sampled".into()
            } else {
                format!(
                    "{:.0}% single-partition, {:.0}% targeted, {:.0}% fan-out by executions; fan-out is {:.0}% of an estimated {:.0} RU",
                    r.single * 100.0,
                    r.targeted * 100.0,
                    r.fanout * 100.0,
                    r.fanout_ru * 100.0,
                    r.request_charge
                )
            },
        },
        Check {
            name: "items have every level",
            ok: a.missing == 0,
            detail: format!("{} item(s) lack a level and need --fill when copied", a.missing),
        },
    ]
}

/// The ranking key of an assessment (smaller is better): failed checks in the guidance's
/// order of weight (limit now, room to grow, heat, cardinality), then the sample's estimated
/// request units, storage skew, items to fill, and fewer levels.
pub fn rank_key(a: &Assessment) -> Vec<f64> {
    let failed = |name: &str| f64::from(u8::from(a.checks.iter().any(|c| c.name == name && !c.ok)));
    vec![
        failed("logical partitions under the limit"),
        failed("room to grow"),
        failed("no hot partition"),
        failed("first level has many values"),
        (a.routing.request_charge * 100.0).round(),
        (a.physical.skew * 10.0).round(),
        a.missing as f64,
        a.key.len() as f64,
    ]
}

/// Sorts assessments best first.
pub fn rank(list: &mut [Assessment]) {
    list.sort_by(|a, b| {
        rank_key(a)
            .iter()
            .zip(rank_key(b).iter())
            .map(|(x, y)| x.total_cmp(y))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
}
