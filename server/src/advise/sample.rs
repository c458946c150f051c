//! The query sample: per container, the shapes of the queries the server served (literal
//! values taken out, [`strata_query::sql::normalize::shape`]), how often each ran, what it
//! cost and where it went — the workload `strata advise` replays under candidate keys.
//!
//! Bounded: at most [`MAX_SHAPES`] shapes and [`MAX_CONTAINER_BYTES`] per container (a new
//! shape evicts the ones run least), each with up to [`MAX_EXAMPLES`] recent parameter
//! values (once a shape has them all, one new every [`EXAMPLE_EVERY`] runs), so a replay can
//! route real values. Only small values are kept
//! ([`MAX_EXAMPLE_BYTES`] an example): routing needs partition key values, not a megabyte
//! array or a query vector, which are kept as `null`; a shape whose text is longer than
//! [`MAX_SHAPE_TEXT`] even without its literals is not sampled. Kept in memory by default; `--record-queries` also keeps it in the data
//! folder (`queries.json`, rewritten at most every few seconds and at shutdown); `--no-query-
//! sample` turns it off. An SDK that fans a query out sends one request per partition
//! range: each counts as the share of the query it is, so the query counts once.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use strata_query::sql::route_plan::Route;

/// The most shapes kept per container.
pub const MAX_SHAPES: usize = 1000;
/// The most parameter examples kept per shape.
pub const MAX_EXAMPLES: usize = 8;
/// Runs of a shape with all its examples between two new ones.
pub const EXAMPLE_EVERY: u64 = 16;
/// The most bytes of parameter values (as JSON) one example keeps; values past it are `null`.
pub const MAX_EXAMPLE_BYTES: usize = 2048;
/// The longest shape text sampled.
pub const MAX_SHAPE_TEXT: usize = 8192;
/// The most bytes one container's sample holds (texts and examples, estimated).
pub const MAX_CONTAINER_BYTES: usize = 4 << 20;
/// Query texts whose shapes are remembered (each at most [`MAX_SHAPE_TEXT`] bytes, so with
/// their shapes and literals a few MB at most).
const MAX_SHAPED: usize = 256;

/// A query text's shape (literals replaced by parameters) and the literals taken out.
type Shaped = Arc<(String, Vec<(String, Value)>)>;

/// Whether and where queries are recorded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Recording {
    Off,
    /// In memory only (the default).
    #[default]
    Memory,
    /// In memory and in this file.
    File(PathBuf),
}

/// One query shape of a container's sample.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Shape {
    /// The query text with literal values as `@__vN` parameters.
    pub text: String,
    /// Whether the requests named a partition key in their headers (the values are in the
    /// examples): part of the shape's identity, as it scopes the query.
    pub partition_key_header: bool,
    /// Executions (a fanned-out query's requests add up to one).
    pub count: f64,
    /// Request units of every page of every execution.
    pub request_charge: f64,
    /// Physical partitions visited, summed over executions.
    pub partitions: f64,
    /// The route of the last execution: `single`, `targeted` or `fanout`.
    pub route: String,
    /// Recent parameter values (the application's and the literals'), newest last.
    pub examples: Vec<Example>,
    /// Seconds since the epoch of the last execution.
    pub last_seen: u64,
}

/// Values one execution of a shape ran with.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Example {
    /// `{"name": "@p", "value": …}` as the query body gives them.
    pub parameters: Vec<Value>,
    /// The partition key header's value, when one was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_key: Option<Value>,
    /// Some values were too large to keep and stand as `null`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub elided: bool,
}

impl Example {
    /// An example of `params`, keeping values while they fit [`MAX_EXAMPLE_BYTES`].
    fn of<'a>(
        params: impl Iterator<Item = &'a (String, Value)>,
        partition_key: Option<Value>,
    ) -> Self {
        let mut room = MAX_EXAMPLE_BYTES;
        let mut elided = false;
        let mut parameters = Vec::new();
        for (n, v) in params {
            let Some(left) = room.checked_sub(n.len() + 24) else {
                elided = true;
                break;
            };
            room = left;
            let value = match strata_query::sql::limits::size_within(v, room) {
                Some(size) => {
                    room -= size;
                    v.clone()
                }
                None => {
                    elided = true;
                    Value::Null
                }
            };
            parameters.push(serde_json::json!({"name": format!("@{n}"), "value": value}));
        }
        Example {
            parameters,
            partition_key,
            elided,
        }
    }

    /// Bytes the example holds, roughly.
    fn bytes(&self) -> usize {
        self.parameters
            .iter()
            .map(|p| strata_query::sql::limits::size_within(p, usize::MAX).unwrap_or(0) + 64)
            .sum::<usize>()
            + 64
    }
}

impl Example {
    /// The parameters as `(name without '@', value)`, as queries are prepared with.
    pub fn bindings(&self) -> Vec<(String, Value)> {
        self.parameters
            .iter()
            .filter_map(|p| {
                let name = p.get("name")?.as_str()?.trim_start_matches('@').to_string();
                Some((name, p.get("value").cloned().unwrap_or(Value::Null)))
            })
            .collect()
    }
}

/// One container's sample, as the export (`GET /_strata/containers/{db}/{c}/queries`) and
/// the file give it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerSample {
    #[serde(default)]
    pub database: String,
    #[serde(default)]
    pub container: String,
    /// The container's `_rid`: a container created again under the name starts afresh.
    #[serde(default)]
    pub rid: String,
    pub queries: Vec<Shape>,
}

#[derive(Default)]
struct Kept {
    rid: String,
    shapes: HashMap<(String, bool), Shape>,
    /// Estimated bytes of `shapes` ([`shape_bytes`]).
    bytes: usize,
}

/// Bytes a shape holds, roughly: its text (twice: it is also the key) and its examples.
fn shape_bytes(s: &Shape) -> usize {
    2 * s.text.len() + 256 + s.examples.iter().map(Example::bytes).sum::<usize>()
}

/// One served query request, as [`QuerySample::record`] takes it.
pub struct Served<'a> {
    pub db: &'a str,
    pub coll: &'a str,
    pub rid: &'a str,
    pub text: &'a str,
    pub params: &'a [(String, Value)],
    pub partition_key: Option<Value>,
    pub route: Route,
    /// Physical partitions the whole query visits.
    pub partitions: usize,
    /// The share of the whole query this request is (1 unless an SDK fanned it out by
    /// partition range); 0 for continuation pages.
    pub share: f64,
    pub request_charge: f64,
}

/// The server's query sample: one cheap handle.
#[derive(Clone, Default)]
pub struct QuerySample {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    recording: Recording,
    kept: Mutex<BTreeMap<(String, String), Kept>>,
    dirty: AtomicBool,
    /// Query texts seen lately and their shapes: an application sends the same few texts
    /// over and over, and shaping one (tokenizing it) was 3–4% of a cheap query's CPU.
    shaped: Mutex<HashMap<String, Shaped>>,
}

impl QuerySample {
    /// A sample recording as `recording` says; with a file, what it holds is loaded.
    pub fn open(recording: Recording) -> Result<QuerySample, String> {
        let mut kept = BTreeMap::new();
        if let Recording::File(path) = &recording {
            match std::fs::read(path) {
                Ok(bytes) => {
                    let all: Vec<ContainerSample> = serde_json::from_slice(&bytes)
                        .map_err(|e| format!("{} is not a query sample: {e}", path.display()))?;
                    for s in all {
                        let shapes: HashMap<_, _> = s
                            .queries
                            .into_iter()
                            .map(|q| ((q.text.clone(), q.partition_key_header), q))
                            .collect();
                        let bytes = shapes.values().map(shape_bytes).sum();
                        kept.insert(
                            (s.database, s.container),
                            Kept {
                                rid: s.rid,
                                shapes,
                                bytes,
                            },
                        );
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
            }
        }
        Ok(QuerySample {
            inner: Arc::new(Inner {
                recording,
                kept: Mutex::new(kept),
                dirty: AtomicBool::new(false),
                shaped: Mutex::new(HashMap::new()),
            }),
        })
    }

    pub fn enabled(&self) -> bool {
        self.inner.recording != Recording::Off
    }

    /// `text`'s shape and literals, from the texts seen lately or worked out now.
    fn shape_of(&self, text: &str) -> Shaped {
        let remembered = text.len() <= MAX_SHAPE_TEXT;
        if remembered {
            if let Some(known) = crate::store::container::lock(&self.inner.shaped).get(text) {
                return Arc::clone(known);
            }
        }
        let shaped = Arc::new(
            strata_query::sql::normalize::shape(text)
                .unwrap_or_else(|| (text.to_string(), Vec::new())),
        );
        if !remembered {
            return shaped;
        }
        let mut seen = crate::store::container::lock(&self.inner.shaped);
        if seen.len() >= MAX_SHAPED {
            // Forgotten all at once: what is sent again is shaped again.
            seen.clear();
        }
        seen.insert(text.to_string(), Arc::clone(&shaped));
        shaped
    }

    /// Adds one served request to its container's sample.
    pub fn record(&self, s: Served<'_>) {
        if !self.enabled() {
            return;
        }
        let shaped = self.shape_of(s.text);
        let (text, literals) = (shaped.0.clone(), &shaped.1);
        if text.len() > MAX_SHAPE_TEXT {
            return;
        }
        let now = now_secs();
        let mut all = crate::store::container::lock(&self.inner.kept);
        let kept = all
            .entry((s.db.to_string(), s.coll.to_string()))
            .or_default();
        if kept.rid != s.rid {
            *kept = Kept {
                rid: s.rid.to_string(),
                ..Kept::default()
            };
        }
        let key = (text, s.partition_key.is_some());
        let new = !kept.shapes.contains_key(&key);
        if new {
            if s.share == 0.0 {
                // A later page of a query first seen before a restart or an eviction.
                return;
            }
            if kept.shapes.len() >= MAX_SHAPES {
                kept.evict_least_run(None);
            }
        }
        let shape = kept.shapes.entry(key.clone()).or_insert_with(|| Shape {
            text: key.0.clone(),
            partition_key_header: key.1,
            count: 0.0,
            request_charge: 0.0,
            partitions: 0.0,
            route: String::new(),
            examples: Vec::new(),
            last_seen: now,
        });
        // What the shape's bytes change by: its text when new, an example added or dropped
        // (weighing every kept example on every run was half of recording one).
        let (mut grown, mut shrunk) = (if new { shape_bytes(shape) } else { 0 }, 0);
        shape.request_charge += s.request_charge;
        shape.last_seen = now;
        if s.share > 0.0 {
            shape.count += s.share;
            shape.partitions += s.share * s.partitions as f64;
            if shape.route != s.route.as_str() {
                shape.route = s.route.as_str().to_string();
            }
            // A shape with its examples takes a new one every `EXAMPLE_EVERY`th run: making one
            // weighs and copies every parameter, a twentieth of a short query's CPU.
            let due = shape.examples.len() < MAX_EXAMPLES
                || (shape.count as u64).is_multiple_of(EXAMPLE_EVERY);
            let example =
                due.then(|| Example::of(s.params.iter().chain(literals.iter()), s.partition_key));
            if let Some(example) = example.filter(|e| !shape.examples.contains(e)) {
                if shape.examples.len() >= MAX_EXAMPLES {
                    shrunk += shape.examples.remove(0).bytes();
                }
                grown += example.bytes();
                shape.examples.push(example);
            }
        }
        kept.bytes = (kept.bytes + grown).saturating_sub(shrunk);
        while kept.bytes > MAX_CONTAINER_BYTES && kept.shapes.len() > 1 {
            kept.evict_least_run(Some(&key));
        }
        self.inner.dirty.store(true, Ordering::Release);
    }

    /// A container's sample, the most expensive shapes first.
    pub fn export(&self, db: &str, coll: &str, rid: &str) -> ContainerSample {
        let all = crate::store::container::lock(&self.inner.kept);
        let mut queries: Vec<Shape> = all
            .get(&(db.to_string(), coll.to_string()))
            .filter(|k| k.rid == rid)
            .map(|k| k.shapes.values().cloned().collect())
            .unwrap_or_default();
        queries.sort_by(|a, b| {
            b.request_charge
                .total_cmp(&a.request_charge)
                .then_with(|| a.text.cmp(&b.text))
        });
        ContainerSample {
            database: db.to_string(),
            container: coll.to_string(),
            rid: rid.to_string(),
            queries,
        }
    }

    /// Forgets a container's sample.
    pub fn clear(&self, db: &str, coll: &str) {
        crate::store::container::lock(&self.inner.kept).remove(&(db.to_string(), coll.to_string()));
        self.inner.dirty.store(true, Ordering::Release);
    }

    /// Writes the sample to its file if it changed (whole, then renamed over the old one).
    pub fn flush(&self) -> Result<(), String> {
        let Recording::File(path) = &self.inner.recording else {
            return Ok(());
        };
        if !self.inner.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let all: Vec<ContainerSample> = {
            let kept = crate::store::container::lock(&self.inner.kept);
            kept.iter()
                .map(|((db, coll), k)| ContainerSample {
                    database: db.clone(),
                    container: coll.clone(),
                    rid: k.rid.clone(),
                    queries: k.shapes.values().cloned().collect(),
                })
                .collect()
        };
        let bytes = serde_json::to_vec(&all).map_err(|e| e.to_string())?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, bytes)
            .and_then(|_| std::fs::rename(&tmp, path))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// Flushes every few seconds until the server stops.
    pub fn spawn_flusher(&self) {
        if !matches!(self.inner.recording, Recording::File(_)) {
            return;
        }
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
                let Some(inner) = weak.upgrade() else { return };
                let sample = QuerySample { inner };
                if let Err(e) = tokio::task::spawn_blocking(move || sample.flush())
                    .await
                    .unwrap_or_else(|e| Err(e.to_string()))
                {
                    tracing::warn!(error = %e, "query sample not saved");
                }
            }
        });
    }
}

impl Kept {
    /// Forgets the shape run least (the oldest among equals), other than `keep`.
    fn evict_least_run(&mut self, keep: Option<&(String, bool)>) {
        let least = self
            .shapes
            .iter()
            .filter(|(k, _)| Some(*k) != keep)
            .min_by(|a, b| {
                a.1.count
                    .total_cmp(&b.1.count)
                    .then(a.1.last_seen.cmp(&b.1.last_seen))
            })
            .map(|(k, _)| k.clone());
        if let Some(gone) = least.and_then(|k| self.shapes.remove(&k)) {
            self.bytes = self.bytes.saturating_sub(shape_bytes(&gone));
        }
    }
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served<'a>(text: &'a str, share: f64, ru: f64) -> Served<'a> {
        Served {
            db: "db",
            coll: "c",
            rid: "r1",
            text,
            params: &[],
            partition_key: None,
            route: Route::FanOut,
            partitions: 4,
            share,
            request_charge: ru,
        }
    }

    /// The container's byte count, kept as examples come and go rather than weighed again on
    /// every run, is always what its shapes weigh.
    #[test]
    fn the_byte_count_follows_examples_in_and_out() {
        let s = QuerySample::open(Recording::Memory).unwrap();
        let weighed = |s: &QuerySample| {
            let all = crate::store::container::lock(&s.inner.kept);
            let kept = &all[&("db".to_string(), "c".to_string())];
            (
                kept.bytes,
                kept.shapes.values().map(shape_bytes).sum::<usize>(),
            )
        };
        let runs = (MAX_EXAMPLES as u64 + 3) * EXAMPLE_EVERY;
        for i in 0..runs {
            // Values of growing size, so an example dropped weighs less than one added.
            let params = [("p".to_string(), Value::from("x".repeat(i as usize % 50)))];
            for text in [
                "SELECT * FROM c WHERE c.a = @p",
                "SELECT * FROM c WHERE c.b = @p",
            ] {
                s.record(Served {
                    params: &params,
                    ..served(text, 1.0, 1.0)
                });
            }
            let (kept, sum) = weighed(&s);
            assert_eq!(kept, sum, "after run {i}");
        }
        let all = crate::store::container::lock(&s.inner.kept);
        let kept = &all[&("db".to_string(), "c".to_string())];
        assert!(kept
            .shapes
            .values()
            .all(|q| q.examples.len() == MAX_EXAMPLES));
    }

    /// A shape takes every new example until it has `MAX_EXAMPLES`, then one every
    /// `EXAMPLE_EVERY` runs, the oldest leaving.
    #[test]
    fn a_full_shape_takes_a_new_example_every_few_runs() {
        let s = QuerySample::open(Recording::Memory).unwrap();
        let newest = |s: &QuerySample| {
            let q = s.export("db", "c", "r1").queries.remove(0);
            let last = q.examples.last().map(|e| e.bindings()[0].1.clone());
            (q.examples.len(), last)
        };
        for run in 1..=EXAMPLE_EVERY {
            s.record(served(
                &format!("SELECT * FROM c WHERE c.t = {run}"),
                1.0,
                1.0,
            ));
            let (n, last) = newest(&s);
            let expect = if run as usize <= MAX_EXAMPLES || run == EXAMPLE_EVERY {
                run
            } else {
                MAX_EXAMPLES as u64
            };
            assert_eq!(last, Some(Value::from(expect)), "run {run}");
            assert_eq!(n, MAX_EXAMPLES.min(run as usize));
        }
    }

    #[test]
    fn shapes_aggregate_and_fanned_out_requests_count_once() {
        let s = QuerySample::open(Recording::Memory).unwrap();
        s.record(served("SELECT * FROM c WHERE c.t = 'a'", 0.25, 3.0));
        s.record(served("select * from c where c.t = 'b'", 0.75, 3.0));
        s.record(served("SELECT * FROM c WHERE c.t = 'b'", 0.0, 1.0));
        let e = s.export("db", "c", "r1");
        assert_eq!(e.queries.len(), 1);
        let q = &e.queries[0];
        assert_eq!(q.text, "SELECT * FROM c WHERE c.t = @__v1");
        assert_eq!((q.count, q.request_charge, q.partitions), (1.0, 7.0, 4.0));
        assert_eq!(q.examples.len(), 2);
        assert_eq!(
            q.examples[1].bindings(),
            vec![("__v1".into(), Value::from("b"))]
        );
        // Another container `_rid` under the same name starts afresh.
        assert!(s.export("db", "c", "r2").queries.is_empty());
    }

    /// A text sent again is shaped from memory, to the same shape and literals; the memory
    /// of texts stays bounded.
    #[test]
    fn texts_sent_again_are_shaped_from_memory() {
        let s = QuerySample::open(Recording::Memory).unwrap();
        let text = "SELECT * FROM c WHERE c.t = 'a' AND c.n > 3";
        let first = s.shape_of(text);
        assert_eq!(*first, strata_query::sql::normalize::shape(text).unwrap());
        assert!(Arc::ptr_eq(&first, &s.shape_of(text)), "remembered");
        for i in 0..MAX_SHAPED * 2 {
            s.shape_of(&format!("SELECT * FROM c WHERE c.n = {i}"));
        }
        assert!(crate::store::container::lock(&s.inner.shaped).len() <= MAX_SHAPED);
        let long = format!(
            "SELECT * FROM c WHERE c.t = '{}'",
            "x".repeat(MAX_SHAPE_TEXT)
        );
        assert_eq!(s.shape_of(&long).0, "SELECT * FROM c WHERE c.t = @__v1");
        let kept = crate::store::container::lock(&s.inner.shaped);
        assert!(!kept.contains_key(&long), "too long to keep");
    }

    #[test]
    fn bounded_and_persisted() {
        let dir = std::env::temp_dir().join(format!("strata-sample-{}", std::process::id()));
        // A run that failed may have left its file under a process id used again.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("queries.json");
        let s = QuerySample::open(Recording::File(file.clone())).unwrap();
        // p7 runs twice before the sample overflows, so it is never the least run (among
        // shapes run once, the oldest by the second goes first: a second boundary during the
        // loop would make p7 one of the oldest).
        for i in 0..MAX_SHAPES + 5 {
            s.record(served(&format!("SELECT c.p{i} FROM c"), 1.0, 1.0));
            if i == 7 {
                s.record(served("SELECT c.p7 FROM c", 1.0, 1.0));
            }
        }
        assert_eq!(s.export("db", "c", "r1").queries.len(), MAX_SHAPES);
        s.flush().unwrap();
        let again = QuerySample::open(Recording::File(file)).unwrap();
        let e = again.export("db", "c", "r1");
        assert_eq!(e.queries.len(), MAX_SHAPES);
        assert!(e
            .queries
            .iter()
            .any(|q| q.text == "SELECT c.p7 FROM c" && q.count == 2.0));
        // Large values are not kept; a container's sample stays within its bytes.
        let big = [("q".to_string(), Value::from(vec![0.5; 100_000]))];
        let pk = [("t".to_string(), Value::from("tenant-1"))];
        for i in 0..800 {
            let text = format!(
                "SELECT c.id FROM c WHERE c.t = @t AND c.x{i} = @q {}",
                "OR c.y = c.z ".repeat(400)
            );
            let params: Vec<_> = pk.iter().chain(big.iter()).cloned().collect();
            s.record(Served {
                params: &params,
                ..served(&text, 1.0, 1.0)
            });
        }
        let e = s.export("db", "c", "r1");
        let held: usize = e.queries.iter().map(shape_bytes).sum();
        assert!(held <= MAX_CONTAINER_BYTES, "{held}");
        let newest = e
            .queries
            .iter()
            .find(|q| q.text.contains("c.x799 "))
            .expect("the newest shape is kept");
        let ex = &newest.examples[0];
        assert!(ex.elided);
        assert_eq!(
            ex.bindings(),
            vec![
                ("t".to_string(), Value::from("tenant-1")),
                ("q".to_string(), Value::Null)
            ]
        );
        // A shape text over the bound is not sampled at all.
        s.record(served(
            &format!(
                "SELECT c.id FROM c WHERE {}",
                "c.a = c.b OR ".repeat(1000) + "true"
            ),
            1.0,
            1.0,
        ));
        assert!(!s
            .export("db", "c", "r1")
            .queries
            .iter()
            .any(|q| q.text.len() > MAX_SHAPE_TEXT));
        let off = QuerySample::open(Recording::Off).unwrap();
        off.record(served("SELECT 1", 1.0, 1.0));
        assert!(off.export("db", "c", "r1").queries.is_empty());
        let _ = std::fs::remove_dir_all(dir);
    }
}
