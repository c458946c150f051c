//! What one candidate key makes of a container's items: its logical partitions (from the
//! real EPK hashing), the physical partitions strata would split them into (the splitter's
//! own rules, [`crate::store::split::next_split`] and [`choose_cut`], replayed on a simulated
//! map), and where recent writes land.

use crate::store::catalog::partitions_at_creation;
use crate::store::keys::KeyCodec;
use crate::store::split::{choose_cut, next_split};
use crate::throughput::charge;
use serde::Serialize;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use strata_query::pk::epk::{effective_partition_key, even_boundaries, EPK_MAX};
use strata_query::pk::{EpkRange, PartitionKeyDefinition, PkComponent};

/// The header of a stored version (see `StoredItem::stored_size`).
const ITEM_HEADER: usize = 33;

/// Most RU/s one physical partition serves, as in the service.
pub const PARTITION_MAX_RU: f64 = 10_000.0;

/// What the simulation assumes about the account.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// Provisioned (manual) RU/s of the container: it starts with one physical partition per
    /// 6,000 and splits until it has one per 10,000.
    pub throughput: u64,
    /// Growth factor for the "at N× growth" figures.
    pub growth: f64,
    /// A physical partition splits past this many bytes.
    pub split_bytes: u64,
    /// The most bytes one logical partition may hold.
    pub logical_limit: u64,
    /// The most physical partitions.
    pub max_partitions: u32,
    /// Writes within this many seconds before `now` are recent.
    pub window_secs: u64,
    /// Seconds since the epoch the window ends at.
    pub now: u64,
    /// Each item read stands for this many (1 unless sampled).
    pub scale: f64,
}

/// One logical partition of a candidate key.
#[derive(Debug, Clone, Default)]
pub struct Logical {
    pub key: Value,
    pub bytes: u64,
    pub count: u64,
    pub recent_writes: u64,
    pub recent_ru: f64,
}

/// A candidate key's logical partitions, accumulated item by item.
pub struct Tally {
    pub def: PartitionKeyDefinition,
    pub logical: HashMap<String, Logical>,
    /// Items that lack a level of the key (or have a non-primitive value there).
    pub missing: u64,
    /// Per level, the items that lack it.
    pub missing_by_level: Vec<u64>,
    first_level: HashSet<u64>,
}

impl Tally {
    pub fn new(def: PartitionKeyDefinition) -> Tally {
        Tally {
            missing_by_level: vec![0; def.levels()],
            def,
            logical: HashMap::new(),
            missing: 0,
            first_level: HashSet::new(),
        }
    }

    /// Adds one item whose JSON takes `json_len` bytes, last written at `ts`.
    pub fn add(&mut self, doc: &Value, json_len: usize, ts: u64, s: &Settings) {
        let pk = self.def.extract(doc);
        let mut lacks = false;
        for (i, c) in pk.0.iter().enumerate() {
            if matches!(c, PkComponent::Undefined) {
                self.missing_by_level[i] += 1;
                lacks = true;
            }
        }
        self.missing += u64::from(lacks);
        let Ok(epk) = effective_partition_key(&self.def, &pk) else {
            self.missing += u64::from(!lacks);
            return;
        };
        let id = doc.get("id").and_then(Value::as_str).unwrap_or_default();
        let key_len = KeyCodec::of(&self.def).item_key(0, &epk, id).len();
        let bytes = (json_len + key_len + ITEM_HEADER) as u64;
        if let Some(first) = pk.0.first() {
            self.first_level.insert(xxhash_rust::xxh3::xxh3_64(
                first.to_json().to_string().as_bytes(),
            ));
        }
        let lp = self.logical.entry(epk).or_insert_with(|| Logical {
            key: Value::Array(pk.0.iter().map(PkComponent::to_json).collect()),
            ..Default::default()
        });
        lp.bytes += bytes;
        lp.count += 1;
        if ts + s.window_secs >= s.now {
            lp.recent_writes += 1;
            lp.recent_ru += charge::write(bytes as usize);
        }
    }

    /// Distinct values of the key's first level.
    pub fn first_level_values(&self) -> u64 {
        self.first_level.len() as u64
    }

    /// The logical partitions in EPK order: (EPK, scaled bytes, scaled items).
    pub fn in_epk_order(&self, scale: f64) -> Vec<(String, u64, u64)> {
        let mut v: Vec<(String, u64, u64)> = self
            .logical
            .iter()
            .map(|(e, l)| {
                (
                    e.clone(),
                    (l.bytes as f64 * scale) as u64,
                    (l.count as f64 * scale) as u64,
                )
            })
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }
}

/// A physical partition of a simulated map: its EPK range and the logical partitions in it
/// (`lo..hi` of the EPK-ordered list).
#[derive(Debug, Clone, PartialEq)]
pub struct SimRange {
    pub range: EpkRange,
    pub lo: usize,
    pub hi: usize,
    pub bytes: u64,
    pub count: u64,
}

/// The physical partitions strata would have for logical partitions `lps` (EPK order): the
/// ranges a new container with `throughput` starts with, split as the splitter would until
/// nothing is over `split_bytes` or can split.
///
/// Splits happen as data arrives, each at the median of what is there then; the simulation
/// cuts at the median of all of it, which is where a map grown by items arriving in no
/// particular order ends (an application's writes, or a copy of a container with one
/// physical partition). A copy of several physical partitions fills their key ranges at
/// different paces; its map can end with more partitions (at most about twice as many).
pub fn simulate(
    def: &PartitionKeyDefinition,
    lps: &[(String, u64, u64)],
    s: &Settings,
) -> Vec<SimRange> {
    let most = s.max_partitions.max(1) as usize;
    let want = (s.throughput.div_ceil(10_000).max(1) as usize).min(most);
    let created = (partitions_at_creation(Some(s.throughput), None) as usize).min(most);
    let mut bounds: Vec<String> = vec![String::new()];
    bounds.extend(even_boundaries(def, created));
    bounds.push(EPK_MAX.to_string());
    let mut ranges: Vec<SimRange> = bounds
        .windows(2)
        .map(|w| range_over(lps, EpkRange::new(w[0].clone(), w[1].clone())))
        .collect();
    while ranges.len() < most {
        let sizes: Vec<(u64, bool)> = ranges.iter().map(|r| (r.bytes, r.hi - r.lo >= 2)).collect();
        let Some((i, reason)) = next_split(&sizes, s.split_bytes, want) else {
            break;
        };
        let r = &ranges[i];
        let Some(cut) = choose_cut(&lps[r.lo..r.hi], reason, def, &r.range) else {
            break;
        };
        let left = range_over(lps, EpkRange::new(r.range.min.clone(), cut.at.clone()));
        let right = range_over(lps, EpkRange::new(cut.at, r.range.max.clone()));
        ranges.splice(i..=i, [left, right]);
    }
    ranges
}

fn range_over(lps: &[(String, u64, u64)], range: EpkRange) -> SimRange {
    let lo = lps.partition_point(|e| e.0 < range.min);
    let hi = if range.max == EPK_MAX {
        lps.len()
    } else {
        lps.partition_point(|e| e.0 < range.max)
    };
    let (bytes, count) = lps[lo..hi]
        .iter()
        .fold((0, 0), |(b, n), e| (b + e.1, n + e.2));
    SimRange {
        range,
        lo,
        hi,
        bytes,
        count,
    }
}

/// The bytes of an item's JSON as stored: system properties included, the change feed's
/// `_lsn` not.
pub fn json_len(doc: &Value) -> usize {
    match doc {
        Value::Object(m) if m.contains_key("_lsn") => {
            let mut m = m.clone();
            m.remove("_lsn");
            serde_json::to_vec(&m).map_or(0, |v| v.len())
        }
        _ => serde_json::to_vec(doc).map_or(0, |v| v.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(split: u64, throughput: u64) -> Settings {
        Settings {
            throughput,
            growth: 1.0,
            split_bytes: split,
            logical_limit: u64::MAX,
            max_partitions: 1000,
            window_secs: 60,
            now: 1000,
            scale: 1.0,
        }
    }

    #[test]
    fn splits_until_nothing_is_over_the_threshold() {
        let def = PartitionKeyDefinition::hash_v2("/k");
        let mut t = Tally::new(def.clone());
        let s = settings(10_000, 400);
        for i in 0..400 {
            t.add(
                &serde_json::json!({"id": i.to_string(), "k": i % 50}),
                40,
                990,
                &s,
            );
        }
        let lps = t.in_epk_order(1.0);
        assert_eq!(lps.len(), 50);
        let map = simulate(&def, &lps, &s);
        // 40,000 bytes over 10,000-byte partitions: split in halves to 4 or more.
        assert!(map.len() >= 4, "{}", map.len());
        assert!(map.iter().all(|r| r.bytes <= 10_000));
        assert_eq!(map.iter().map(|r| r.count).sum::<u64>(), 400);
        assert_eq!(map[0].range.min, "");
        assert_eq!(map.last().map(|r| r.range.max.as_str()), Some(EPK_MAX));
        // Throughput alone: created with one partition per 6,000 RU/s, as the service.
        assert_eq!(simulate(&def, &lps, &settings(u64::MAX, 40_000)).len(), 7);
        // One logical partition cannot split.
        let one = vec![("AA".to_string(), 50_000, 10)];
        assert_eq!(simulate(&def, &one, &s).len(), 1);
    }

    #[test]
    fn missing_levels_and_recent_writes() {
        let def = PartitionKeyDefinition::multi_hash(&["/t", "/u"]).unwrap();
        let mut t = Tally::new(def);
        let s = settings(u64::MAX, 400);
        t.add(
            &serde_json::json!({"id": "1", "t": "a", "u": "x"}),
            900,
            995,
            &s,
        );
        t.add(&serde_json::json!({"id": "2", "t": "a"}), 900, 100, &s);
        assert_eq!(t.missing, 1);
        assert_eq!(t.first_level_values(), 1);
        let recent: u64 = t.logical.values().map(|l| l.recent_writes).sum();
        assert_eq!(recent, 1);
    }
}
