//! Durable catalog records (databases, containers, partition key ranges, throughput) and the
//! resource ids, etags and timestamps the Cosmos protocol exposes.

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// Throughput requested when creating a resource: manual RU/s or an autoscale maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThroughputRequest {
    pub manual: Option<u64>,
    pub autoscale_max: Option<u64>,
    /// Autoscale `autoUpgradePolicy.throughputPolicy.incrementPercent` (kept and echoed).
    pub autoscale_increment_percent: u32,
    /// New throughput buckets (`None`: as they are).
    pub buckets: Option<Buckets>,
}

/// Bucket ids run from 1 to this.
pub const BUCKETS: u8 = 5;

/// A container's throughput buckets (see `throughput::class`): each one's cap as a percentage of the container's
/// throughput (0: not capped), and the bucket requests that name none run in (0: none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Buckets {
    pub percent: [u8; BUCKETS as usize],
    pub default: u8,
}

impl Buckets {
    /// Whether no bucket is capped.
    pub fn is_empty(&self) -> bool {
        self.percent.iter().all(|p| *p == 0)
    }

    /// The fraction of the container's throughput bucket `id` may use (`None`: uncapped).
    pub fn cap(&self, id: u8) -> Option<f64> {
        let p = *self.percent.get(usize::from(id).checked_sub(1)?)?;
        (p > 0).then(|| f64::from(p) / 100.0)
    }

    /// The offer's `throughputBuckets` array (400's message on a bad one).
    pub fn parse(v: &Value) -> Result<Self, String> {
        let list = v
            .as_array()
            .ok_or("throughputBuckets must be an array of {id, maxThroughputPercentage}.")?;
        if list.len() > usize::from(BUCKETS) {
            return Err(format!(
                "throughputBuckets has {} entries; a container has at most {BUCKETS} throughput buckets.",
                list.len()
            ));
        }
        let mut out = Buckets::default();
        for b in list {
            let id = b
                .get("id")
                .and_then(Value::as_u64)
                .filter(|id| (1..=u64::from(BUCKETS)).contains(id))
                .ok_or_else(|| {
                    format!(
                        "A throughput bucket's id must be a whole number from 1 to {BUCKETS}: {b}."
                    )
                })? as u8;
            let pct = b
                .get("maxThroughputPercentage")
                .and_then(Value::as_u64)
                .filter(|p| (1..=100).contains(p))
                .ok_or_else(|| {
                    format!("Throughput bucket {id}'s maxThroughputPercentage must be a whole number from 1 to 100.")
                })? as u8;
            let slot = &mut out.percent[usize::from(id - 1)];
            if *slot != 0 {
                return Err(format!("Throughput bucket {id} is listed twice."));
            }
            *slot = pct;
            if b.get("isDefaultBucket").and_then(Value::as_bool) == Some(true) {
                if out.default != 0 {
                    return Err("Only one throughput bucket can be the default bucket.".into());
                }
                out.default = id;
            }
        }
        Ok(out)
    }

    /// As the offer shows it (the array [`Buckets::parse`] reads).
    pub fn to_json(&self) -> Value {
        let list: Vec<Value> = (1..=BUCKETS)
            .filter_map(|id| {
                let pct = self.percent[usize::from(id - 1)];
                (pct > 0).then(|| {
                    let mut b = json!({"id": id, "maxThroughputPercentage": pct});
                    if self.default == id {
                        b["isDefaultBucket"] = json!(true);
                    }
                    b
                })
            })
            .collect();
        Value::Array(list)
    }
}

/// Provisioned throughput of a container or a shared-throughput database.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Throughput {
    /// Manual RU/s (`x-ms-offer-throughput`).
    pub manual: Option<u64>,
    /// Autoscale maximum RU/s (`x-ms-cosmos-offer-autopilot-settings`).
    pub autoscale_max: Option<u64>,
    /// Autoscale `incrementPercent` (absent in records written before it was kept).
    #[serde(default)]
    pub autoscale_increment_percent: u32,
    /// Throughput buckets (none in records written before they were kept).
    #[serde(default)]
    pub buckets: Buckets,
    /// When `buckets` last changed (seconds; 0: never).
    #[serde(default)]
    pub buckets_changed: u64,
    /// Numeric id of the offer resource.
    pub offer_seq: u32,
    pub ts: u64,
    pub etag_seq: u64,
}

impl Throughput {
    /// The RU/s the resource may consume at most.
    pub fn max_ru(&self) -> u64 {
        self.autoscale_max.or(self.manual).unwrap_or(400)
    }

    /// The physical partitions a new container with this throughput starts with.
    pub fn partitions_at_creation(&self) -> u64 {
        partitions_at_creation(self.manual, self.autoscale_max)
    }
}

/// The physical partitions the service creates a container with: one per 6,000 RU/s of
/// manual throughput (30,000 RU/s make 5, 12,000 make 2: the official Python suite's
/// `THROUGHPUT_FOR_5_PARTITIONS` and `THROUGHPUT_FOR_2_PARTITIONS`), one per 10,000 RU/s of
/// an autoscale maximum; one without either. Scaling up later splits only as far as 10,000
/// RU/s a partition needs (`Container::partitions_for_throughput`), so a container created
/// large keeps room to grow without a split, as in the service.
pub fn partitions_at_creation(manual: Option<u64>, autoscale_max: Option<u64>) -> u64 {
    match (autoscale_max, manual) {
        (Some(max), _) => max.div_ceil(10_000),
        (None, Some(ru)) => ru.div_ceil(6_000),
        (None, None) => 1,
    }
    .max(1)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DatabaseRecord {
    pub id: String,
    pub seq: u32,
    pub ts: u64,
    pub etag_seq: u64,
    #[serde(default)]
    pub throughput: Option<Throughput>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RangeRecord {
    pub id: u32,
    pub min: String,
    pub max: String,
    #[serde(default)]
    pub parents: Vec<String>,
    /// The LSN at which this range was created (children continue their parent's sequence).
    #[serde(default)]
    pub created_lsn: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContainerRecord {
    pub cid: u32,
    pub db: String,
    pub db_seq: u32,
    pub id: String,
    /// The `partitionKey` definition as echoed to clients.
    pub partition_key: Value,
    /// Every other user-settable property (indexingPolicy, defaultTtl, uniqueKeyPolicy, ...).
    pub props: Map<String, Value>,
    pub ts: u64,
    pub etag_seq: u64,
    #[serde(default)]
    pub throughput: Option<Throughput>,
    pub ranges: Vec<RangeRecord>,
    pub next_range_id: u32,
    /// Bumped on every change of `ranges`; the `/pkranges` etag.
    pub ranges_generation: u64,
    /// The index generation writers maintain (bumped when the indexing policy changes);
    /// absent in records written before strata indexed, whose index is built at start.
    #[serde(default)]
    pub index_gen: Option<u16>,
    /// True while the entries of `index_gen` are being built for existing documents.
    #[serde(default)]
    pub index_building: bool,
}

/// Counters that must never repeat across restarts.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Counters {
    pub next_db_seq: u32,
    pub next_cid: u32,
    pub next_offer_seq: u32,
    pub next_etag_seq: u64,
}

/// Cosmos resource ids are base64 of a byte layout (database 4 bytes, collection 8, document
/// 16); like the service we replace `/` with `-` so ids are path-safe.
pub fn rid(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD
        .encode(bytes)
        .replace('/', "-")
}

pub fn decode_rid(s: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(s.replace('-', "/"))
        .ok()
}

pub fn db_rid_bytes(db_seq: u32) -> [u8; 4] {
    // Keep the first byte non-zero so ids do not all start with "AAAA".
    let mut b = (db_seq | 0x0100_0000).to_le_bytes();
    b[3] = b[3].wrapping_add(0x40);
    b
}

pub fn db_rid(db_seq: u32) -> String {
    rid(&db_rid_bytes(db_seq))
}

pub fn coll_rid_bytes(db_seq: u32, cid: u32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&db_rid_bytes(db_seq));
    b[4..].copy_from_slice(&(cid | 0x8000_0000).to_be_bytes());
    b
}

pub fn coll_rid(db_seq: u32, cid: u32) -> String {
    rid(&coll_rid_bytes(db_seq, cid))
}

pub fn doc_rid(db_seq: u32, cid: u32, doc_seq: u64) -> String {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&coll_rid_bytes(db_seq, cid));
    b[8..].copy_from_slice(&doc_seq.to_le_bytes());
    rid(&b)
}

/// The document sequence a document rid carries, if `doc_rid` is a document rid of the
/// container with rid `coll_rid`.
pub fn doc_seq_of(coll_rid: &str, doc_rid: &str) -> Option<u64> {
    let b = decode_rid(doc_rid)?;
    let c = decode_rid(coll_rid)?;
    if b.len() != 16 || c.len() != 8 || b[..8] != c[..] {
        return None;
    }
    Some(u64::from_le_bytes(b[8..].try_into().ok()?))
}

pub fn pkrange_rid(db_seq: u32, cid: u32, range_id: u32) -> String {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&coll_rid_bytes(db_seq, cid));
    b[8..12].copy_from_slice(&range_id.to_le_bytes());
    b[15] = 0x50;
    rid(&b)
}

/// Offers have short ids (the service uses four characters).
pub fn offer_rid(seq: u32) -> String {
    const ALPHA: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut n = seq as usize;
    let mut s = String::new();
    for _ in 0..4 {
        s.push(ALPHA[n % ALPHA.len()] as char);
        n /= ALPHA.len();
    }
    s
}

/// An etag in the service's GUID-like shape, unique per (resource space, sequence).
pub fn etag(space: u32, seq: u64) -> String {
    change_etag(space, seq, 0)
}

/// The etag of the `sub`-th change of the transaction at LSN `seq` (items written together
/// in one batch share its LSN, not an etag).
pub fn change_etag(space: u32, seq: u64, sub: u32) -> String {
    // Digit by digit rather than `format!`: every read and write answers with one.
    fn hex(out: &mut String, v: u64, digits: u32) {
        for i in (0..digits).rev() {
            out.push(char::from(
                b"0123456789abcdef"[((v >> (4 * i)) & 15) as usize],
            ));
        }
    }
    let mut e = String::with_capacity(38);
    e.push('"');
    hex(&mut e, u64::from(space), 8);
    for (v, digits) in [
        (u64::from(sub >> 16), 4),
        (u64::from(sub & 0xffff), 4),
        ((seq >> 48) & 0xffff, 4),
        (seq & 0xffff_ffff_ffff, 12),
    ] {
        e.push('-');
        hex(&mut e, v, digits);
    }
    e.push('"');
    e
}

pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

pub fn now_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The defaults the service fills into a new container.
pub fn default_container_props(props: &mut Map<String, Value>) {
    props.entry("indexingPolicy").or_insert_with(|| {
        json!({"indexingMode": "consistent", "automatic": true,
               "includedPaths": [{"path": "/*"}], "excludedPaths": [{"path": "/\"_etag\"/?"}]})
    });
    if let Some(Value::Object(ip)) = props.get_mut("indexingPolicy") {
        ip.entry("indexingMode")
            .or_insert_with(|| json!("consistent"));
        ip.entry("automatic").or_insert(Value::Bool(true));
        let mode = ip
            .get("indexingMode")
            .and_then(Value::as_str)
            .map(str::to_ascii_lowercase);
        // A container that indexes nothing has no paths: the service leaves both lists empty.
        if mode.as_deref() == Some("none") {
            ip.entry("includedPaths").or_insert_with(|| json!([]));
            ip.entry("excludedPaths").or_insert_with(|| json!([]));
            return finish_container_props(props);
        }
        // The service indexes a consistent container automatically whatever the body says
        // (clients whose models default the flag to false send `"automatic": false`).
        if mode.as_deref() == Some("consistent") {
            ip.insert("automatic".into(), Value::Bool(true));
        }
        ip.entry("includedPaths")
            .or_insert_with(|| json!([{"path": "/*"}]));
        ip.entry("excludedPaths")
            .or_insert_with(|| json!([{"path": "/\"_etag\"/?"}]));
        // As the service does: legacy per-path `indexes` are dropped (every path gets range
        // indexes), and `_etag` is always excluded.
        if let Some(Value::Array(paths)) = ip.get_mut("includedPaths") {
            for p in paths.iter_mut().filter_map(Value::as_object_mut) {
                p.remove("indexes");
            }
        }
        if let Some(Value::Array(paths)) = ip.get_mut("excludedPaths") {
            let etag = json!({"path": "/\"_etag\"/?"});
            if !paths.iter().any(|p| p.get("path") == etag.get("path")) {
                paths.push(etag);
            }
        }
    }
    finish_container_props(props);
}

/// The defaults beside the indexing policy.
fn finish_container_props(props: &mut Map<String, Value>) {
    props.entry("conflictResolutionPolicy").or_insert_with(|| {
        json!({"mode": "LastWriterWins", "conflictResolutionPath": "/_ts", "conflictResolutionProcedure": ""})
    });
    props
        .entry("geospatialConfig")
        .or_insert_with(|| json!({"type": "Geography"}));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_have_the_guid_shape_field_by_field() {
        for (space, seq, sub) in [
            (0, 0, 0),
            (7, 1, 0),
            (u32::MAX, u64::MAX, u32::MAX),
            (42, 0x1234_5678_9abc_def0, 0x0001_0002),
        ] {
            let expected = format!(
                "\"{:08x}-{:04x}-{:04x}-{:04x}-{:012x}\"",
                space,
                (sub >> 16) & 0xffff,
                sub & 0xffff,
                (seq >> 48) & 0xffff,
                seq & 0xffff_ffff_ffff
            );
            assert_eq!(change_etag(space, seq, sub), expected);
        }
    }

    #[test]
    fn rids_are_path_safe_and_nested() {
        for seq in 0..300 {
            let d = db_rid(seq);
            let c = coll_rid(seq, seq * 7);
            let doc = doc_rid(seq, seq * 7, u64::from(seq) * 1_000_003);
            assert!(!d.contains('/') && !c.contains('/') && !doc.contains('/'));
            assert_eq!(&decode_rid(&c).unwrap()[..4], &decode_rid(&d).unwrap()[..]);
            assert_eq!(
                &decode_rid(&doc).unwrap()[..8],
                &decode_rid(&c).unwrap()[..]
            );
        }
        let c = coll_rid(3, 9);
        assert_eq!(doc_seq_of(&c, &doc_rid(3, 9, 77)), Some(77));
        assert_eq!(doc_seq_of(&coll_rid(3, 10), &doc_rid(3, 9, 77)), None);
        assert_eq!(doc_seq_of(&c, "not-a-rid"), None);
        assert_ne!(offer_rid(1), offer_rid(2));
        assert_eq!(etag(1, 2), "\"00000001-0000-0000-0000-000000000002\"");
    }
}
