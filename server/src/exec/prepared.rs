//! Recently prepared queries. Applications send the same query text again and again with
//! different parameter values, or the very same query page after page; parsing, binding and
//! planning it each time was a twentieth of a single-partition query's CPU. A prepared query
//! depends on the text, the parameter values and the container (its partition key definition
//! and identity), so that is the key.

use dashmap::DashMap;
use serde_json::Value;
use std::sync::Arc;
use strata_query::sql::{self, PreparedQuery, QueryError};

/// Entries kept; past it the cache starts over (queries are cheap to prepare again).
const CAPACITY: usize = 1024;

/// The text and parameters a prepared query was made from (compared on a hit, so a hash
/// collision can never serve another query's plan).
type Source = (String, Vec<(String, Value)>);

#[derive(Default)]
pub struct Prepared {
    /// By container id (never reused, so a re-created container misses) and a hash of the
    /// text and parameters.
    map: DashMap<(u32, u128), (Source, Arc<PreparedQuery>)>,
}

/// Feeds serialised JSON straight into the hash, without building a string per value.
struct HashWriter<'a>(&'a mut xxhash_rust::xxh3::Xxh3);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Prepared {
    /// The prepared form of `text` with `params` on the container `cid` (resource id `rid`)
    /// with partition key definition `pk` and the distance functions of its vector embeddings (`vectors`, asked only on a miss): from the cache, or
    /// prepared now (its continuation fingerprint bound to the container).
    pub fn get(
        &self,
        cid: u32,
        rid: &str,
        pk: &strata_query::pk::PartitionKeyDefinition,
        vectors: impl FnOnce() -> Vec<(String, &'static str)>,
        text: &str,
        params: &[(String, Value)],
    ) -> Result<Arc<PreparedQuery>, QueryError> {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        h.update(text.as_bytes());
        for (k, v) in params {
            h.update(b"\x01");
            h.update(k.as_bytes());
            h.update(b"=");
            // Writing into a hash cannot fail; a value that could not serialise would only
            // hash shorter, and a hit still compares the parameters in full.
            let _ = serde_json::to_writer(HashWriter(&mut h), v);
        }
        let key = (cid, h.digest128());
        if let Some(e) = self.map.get(&key) {
            let ((t, p), q) = e.value();
            if t == text && p.as_slice() == params {
                return Ok(Arc::clone(q));
            }
        }
        let mut p = sql::prepare_in(text, params, Some(pk), &vectors())?;
        // A token resumes this query on this container only.
        p.fingerprint = format!("{rid}:{}", p.fingerprint);
        let p = Arc::new(p);
        if self.map.len() >= CAPACITY {
            self.map.clear();
        }
        self.map
            .insert(key, ((text.to_string(), params.to_vec()), Arc::clone(&p)));
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use strata_query::pk::PartitionKeyDefinition;

    #[test]
    fn same_query_same_plan_other_values_or_containers_not() {
        let cache = Prepared::default();
        let pk = PartitionKeyDefinition::hash_v2("/pk");
        let params = vec![("p".to_string(), json!("a"))];
        let sql = "SELECT * FROM c WHERE c.pk = @p";
        let a = cache
            .get(1, "r1", &pk, Default::default, sql, &params)
            .unwrap();
        let b = cache
            .get(1, "r1", &pk, Default::default, sql, &params)
            .unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let other = vec![("p".to_string(), json!("b"))];
        let c = cache
            .get(1, "r1", &pk, Default::default, sql, &other)
            .unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        assert_ne!(a.fingerprint, c.fingerprint);
        let d = cache
            .get(2, "r2", &pk, Default::default, sql, &params)
            .unwrap();
        assert!(d.fingerprint.starts_with("r2:"));
        assert!(cache
            .get(1, "r1", &pk, Default::default, "SELECT FROM", &[])
            .is_err());
    }
}
