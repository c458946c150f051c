//! The secondary index and unique keys of a container, stored beside its documents.
//!
//! Index entries live in [`Space::Index`](super::engine::Space::Index) keyed `cid | generation | path id | term | document`
//! with empty values, the document spelled as in its item key (`EPK (binary) | id` for hash v2
//! and hierarchical keys, `EPK (hex) | 0x00 | id` otherwise: see [`KeyCodec`]). The term
//! (see `strata_query::index::term`) orders entries by value, and the EPK after it orders the
//! entries of one value by document position — so an equality lookup reads the entries of one
//! physical partition as one contiguous run, and a split needs no index movement at all: a
//! partition is an EPK range, filtered on read. The generation changes when the policy does;
//! entries of an older generation are ignored and purged.
//!
//! Unique keys live in [`Space::Unique`](super::engine::Space::Unique) keyed `cid | EPK | 0x00 | key number | values` with
//! the owning id as value: one logical partition's unique values are one key prefix, checked
//! and changed in the same transaction as the document.

use super::engine::prefix_end;
use super::keys::{self, KeyCodec};
use serde_json::Value;
use std::borrow::Cow;
use strata_query::index::policy::{parse_pattern, Seg};
use strata_query::index::term::{self, Entry};
use strata_query::index::{IndexingPolicy, Span};

/// The 8 key bytes of a document path's id.
pub fn path_id_of(segs: &[Seg]) -> [u8; 8] {
    term::path_id(segs).to_be_bytes()
}

/// `cid | gen | path id`: where one path's entries begin.
pub fn path_prefix(cid: u32, gen: u16, pid: &[u8; 8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(14 + 64);
    k.extend_from_slice(&cid.to_be_bytes());
    k.extend_from_slice(&gen.to_be_bytes());
    k.extend_from_slice(pid);
    k
}

/// The index key of one entry of the document at item key suffix `doc` (the document as the
/// container's [`KeyCodec`] spells it in every key space).
pub fn entry_key(cid: u32, gen: u16, e: &Entry, doc: &[u8]) -> Vec<u8> {
    let mut k = path_prefix(cid, gen, &e.0.to_be_bytes());
    k.reserve(e.1.len() + doc.len());
    k.extend_from_slice(&e.1);
    k.extend_from_slice(doc);
    k
}

/// Splits an index key (after its 14-byte path prefix) into term and document suffix.
pub fn split_entry(rest: &[u8]) -> Option<(&[u8], &[u8])> {
    let n = term::term_len(rest)?;
    Some((&rest[..n], &rest[n..]))
}

/// The item key of an index entry's document part, and its EPK (hex).
pub fn item_key_of(cid: u32, codec: KeyCodec, doc: &[u8]) -> Option<(Vec<u8>, Cow<'_, str>)> {
    let (epk, _) = codec.split_doc(doc)?;
    let epk = codec.epk_hex(epk)?;
    let mut k = Vec::with_capacity(4 + doc.len());
    k.extend_from_slice(&cid.to_be_bytes());
    k.extend_from_slice(doc);
    Some((k, epk))
}

/// Key bounds of a span of one path, restricted to documents with EPK in `[min, max)` when
/// the span is a single term (the common equality case reads exactly one partition's run).
pub fn span_bounds(prefix: &[u8], span: &Span) -> (Vec<u8>, Vec<u8>) {
    let mut lo = prefix.to_vec();
    lo.extend_from_slice(&span.lo);
    let mut hi = prefix.to_vec();
    hi.extend_from_slice(&span.hi);
    (lo, hi)
}

/// The bounds of every entry of a container (all generations).
pub fn container_bounds(cid: u32) -> (Vec<u8>, Vec<u8>) {
    let p = keys::container_prefix(cid);
    let end = prefix_end(&p).unwrap_or_default();
    (p, end)
}

/// Differences between two sorted entry lists: (removed, added).
pub fn diff<'a>(old: &'a [Entry], new: &'a [Entry]) -> (Vec<&'a Entry>, Vec<&'a Entry>) {
    let (mut i, mut j) = (0, 0);
    let (mut removed, mut added) = (Vec::new(), Vec::new());
    while i < old.len() || j < new.len() {
        match (old.get(i), new.get(j)) {
            (Some(a), Some(b)) if a == b => {
                i += 1;
                j += 1;
            }
            (Some(a), Some(b)) if a < b => {
                removed.push(a);
                i += 1;
            }
            (Some(_), Some(b)) => {
                added.push(b);
                j += 1;
            }
            (Some(a), None) => {
                removed.push(a);
                i += 1;
            }
            (None, Some(b)) => {
                added.push(b);
                j += 1;
            }
            (None, None) => break,
        }
    }
    (removed, added)
}

/// The most unique keys a container may define (the service's limit).
const MAX_UNIQUE_KEYS: usize = 10;

/// A container's `uniqueKeyPolicy`: each unique key is a list of paths.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UniqueKeys(pub Vec<Vec<Vec<Seg>>>);

impl UniqueKeys {
    /// Parses and validates `uniqueKeyPolicy` (absent: none).
    pub fn from_props(props: &serde_json::Map<String, Value>) -> Result<Self, String> {
        let Some(p) = props.get("uniqueKeyPolicy") else {
            return Ok(Self::default());
        };
        let keys = match p.get("uniqueKeys") {
            None | Some(Value::Null) => return Ok(Self::default()),
            Some(Value::Array(k)) => k,
            Some(_) => return Err("'uniqueKeyPolicy.uniqueKeys' must be an array.".into()),
        };
        // The service's limit; it also keeps a key's number within the one byte its rows use.
        if keys.len() > MAX_UNIQUE_KEYS {
            return Err(format!(
                "A container may define at most {MAX_UNIQUE_KEYS} unique keys; {} were given.",
                keys.len()
            ));
        }
        let mut out = Vec::new();
        for k in keys {
            let paths = k.get("paths").and_then(Value::as_array).ok_or_else(|| {
                "Every unique key needs a 'paths' array of property paths.".to_string()
            })?;
            if paths.is_empty() || paths.len() > 16 {
                return Err("A unique key must have between 1 and 16 paths.".to_string());
            }
            let mut segs = Vec::new();
            for p in paths {
                let s = p
                    .as_str()
                    .ok_or_else(|| "Unique key paths must be strings.".to_string())?;
                // A unique key path names one property: parse it as the `?` path it means.
                let pat = parse_pattern(&format!("{s}/?")).map_err(|e| e.0)?;
                if pat.segs.contains(&Seg::Elements) {
                    return Err(format!(
                        "The unique key path '{s}' is invalid: unique keys cannot use array elements."
                    ));
                }
                segs.push(pat.segs);
            }
            out.push(segs);
        }
        Ok(Self(out))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The unique-key rows of a document: one key per unique key of the policy. A missing
    /// property counts as null, as in the service (two documents that both lack it conflict).
    pub fn rows(&self, cid: u32, codec: KeyCodec, epk: &str, doc: &Value) -> Vec<Vec<u8>> {
        self.0
            .iter()
            .enumerate()
            .map(|(n, paths)| {
                let mut k = codec.unique_prefix(cid, epk);
                k.push(n as u8);
                for p in paths {
                    let v = strata_query::index::fulltext::value_at(doc, p).unwrap_or(&Value::Null);
                    encode_full(v, &mut k);
                }
                k
            })
            .collect()
    }
}

/// An untruncated, unambiguous encoding of a value for unique keys (long values by hash).
fn encode_full(v: &Value, out: &mut Vec<u8>) {
    let mut one = Vec::new();
    match v {
        Value::String(s) => {
            one.push(term::STRING);
            for &b in s.as_bytes() {
                one.push(b);
                if b == 0 {
                    one.push(0xFF);
                }
            }
            one.extend_from_slice(&[0, 1]);
        }
        Value::Array(_) | Value::Object(_) => {
            one.push(0x08);
            let canon = strata_query::sql::value::canonical(v);
            one.extend_from_slice(canon.as_bytes());
            one.extend_from_slice(&[0, 1]);
        }
        scalar => term::encode_into(scalar, &mut one),
    }
    if one.len() > 512 {
        out.push(0x09);
        out.extend_from_slice(&xxhash_rust::xxh3::xxh3_128(&one).to_be_bytes());
    } else {
        out.extend_from_slice(&one);
    }
}

/// Validates a container's `indexingPolicy`, `uniqueKeyPolicy` and vector policy (400 with the
/// reason).
pub fn validate(props: &serde_json::Map<String, Value>) -> Result<(), super::StoreError> {
    if let Some(p) = props.get("indexingPolicy") {
        IndexingPolicy::from_json(p).map_err(|e| super::StoreError::BadRequest(e.0))?;
    }
    UniqueKeys::from_props(props).map_err(super::StoreError::BadRequest)?;
    strata_query::index::vector::VectorPolicy::from_props(props)
        .map_err(super::StoreError::BadRequest)?;
    strata_query::index::fulltext::FullTextPolicy::from_props(props)
        .map_err(super::StoreError::BadRequest)?;
    Ok(())
}

/// The indexing policy a container's properties define, with the paths its full-text
/// policy indexes (and their languages).
pub fn policy_of(props: &serde_json::Map<String, Value>) -> Result<IndexingPolicy, String> {
    let mut policy = props
        .get("indexingPolicy")
        .map(IndexingPolicy::from_json)
        .transpose()
        .map_err(|e| e.0)?
        .unwrap_or_default();
    policy.full_text = strata_query::index::fulltext::FullTextPolicy::from_props(props)?.indexed();
    Ok(policy)
}

/// The policy-dependent state of a container's index.
#[derive(Debug, Clone)]
pub struct IndexState {
    pub policy: std::sync::Arc<IndexingPolicy>,
    pub unique: std::sync::Arc<UniqueKeys>,
    /// The generation writers maintain.
    pub gen: u16,
    /// Whether every document has its entries of `gen` (false while a rebuild runs: queries
    /// then scan).
    pub ready: bool,
}

impl IndexState {
    /// The state a container record describes. A stored policy that no longer parses (written
    /// before policies were validated) indexes everything, as the default policy does.
    pub fn of(rec: &super::catalog::ContainerRecord) -> Self {
        let policy = policy_of(&rec.props).unwrap_or_default();
        let unique = UniqueKeys::from_props(&rec.props).unwrap_or_default();
        Self {
            policy: std::sync::Arc::new(policy),
            unique: std::sync::Arc::new(unique),
            gen: rec.index_gen.unwrap_or(0),
            ready: rec.index_gen.is_some() && !rec.index_building,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn diff_finds_removed_and_added_entries() {
        let e = |p: u64, t: u8| (p, vec![t]);
        let old = vec![e(1, 1), e(2, 2), e(3, 3)];
        let new = vec![e(1, 1), e(2, 3), e(4, 1)];
        let (r, a) = diff(&old, &new);
        assert_eq!(r, vec![&e(2, 2), &e(3, 3)]);
        assert_eq!(a, vec![&e(2, 3), &e(4, 1)]);
    }

    #[test]
    fn unique_rows_are_scoped_to_the_logical_partition() {
        let props = json!({"uniqueKeyPolicy": {"uniqueKeys": [{"paths": ["/email"]}, {"paths": ["/first", "/last"]}]}});
        let u = UniqueKeys::from_props(props.as_object().unwrap()).unwrap();
        let h = KeyCodec::Hex;
        let a = u.rows(1, h, "0A", &json!({"email": "x@y", "first": "A"}));
        let b = u.rows(1, h, "0B", &json!({"email": "x@y", "first": "A"}));
        let c = u.rows(
            1,
            h,
            "0A",
            &json!({"email": "x@y", "first": "A", "last": null}),
        );
        assert_eq!(a.len(), 2);
        assert_ne!(a[0], b[0], "other partition");
        assert_eq!(a, c, "missing counts as null");
        let bad = json!({"uniqueKeyPolicy": {"uniqueKeys": [{"paths": ["email"]}]}});
        assert!(UniqueKeys::from_props(bad.as_object().unwrap()).is_err());
        let many: Vec<_> = (0..11)
            .map(|i| json!({"paths": [format!("/p{i}")]}))
            .collect();
        let many = json!({"uniqueKeyPolicy": {"uniqueKeys": many}});
        assert!(UniqueKeys::from_props(many.as_object().unwrap()).is_err());
    }
}
