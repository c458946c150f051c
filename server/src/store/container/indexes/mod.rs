//! One maintainer per kind of index, as FoundationDB's record layer has an `IndexMaintainer`
//! per index type: each owns its key space or memory structure and is called the same way by
//! every write ([`IndexMaintainer::update`], old version to new, in the write's transaction)
//! and by a rebuild ([`IndexMaintainer::backfill`]). A new kind of index (a global secondary
//! index, say) is one more file here, not one more branch in the write path.
//!
//! * [`range`]: the range/term index of the indexing policy (`Space::Index`);
//! * [`fulltext`]: full-text document lengths (`Space::Index`) and postings (pending in memory
//!   after the commit, folded into segments of their own: [`text_pending`], [`text_segments`]);
//! * [`spatial`]: the cells covering each geometry (`Space::Index`, paths of their own);
//! * [`unique`]: unique keys per logical partition (`Space::Unique`), checked as they change;
//! * [`vector`]: a vector path's in-memory set, changed after the commit.

pub mod entries;
pub mod found;
pub mod fulltext;
pub mod postings;
mod postings_read;
pub mod range;
pub mod spatial;
pub mod text_lengths;
pub mod text_pending;
mod text_recover;
pub mod text_segments;
pub mod unique;
pub mod vector;

use super::vectors::PathIndex;
use super::{read, write, Container, Txn};
use crate::store::engine::Space;
use crate::store::index::{self, IndexState};
use crate::store::StoreError;
use serde_json::Value;
use std::sync::Arc;
use strata_query::index::term::{self, Entry};
use strata_query::index::IndexingPolicy;
use strata_query::members::{self, Changed};

/// The document a maintainer works on: its logical partition, id and item key.
#[derive(Debug, Clone, Copy)]
pub struct DocRef<'a> {
    pub epk: &'a str,
    pub id: &'a str,
    /// The item key (`cid | document`).
    pub key: &'a [u8],
    /// The change-feed position of the version written (or stored, for a rebuild).
    pub at: text_pending::Pos,
    /// The change-feed position of the version replaced or deleted, if any.
    pub was: Option<text_pending::Pos>,
}

/// The kinds of index a container keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexKind {
    Range,
    FullText,
    Spatial,
    Unique,
    Vector,
}

/// A version's stored JSON text as the maintainers see it, parsed into a document the first
/// time one of them asks for one, and then once for all of them. The range index reads its
/// entries from the text itself ([`EntryIndex::stored_entries`]), so a write to a container
/// with no other kind of index parses neither the version it replaces nor the one it writes
/// (which the item layer wrote as text, not as a document).
pub struct Text<'a> {
    json: &'a [u8],
    doc: std::cell::OnceCell<Value>,
}

impl<'a> Text<'a> {
    pub fn new(json: &'a [u8]) -> Self {
        Self {
            json,
            doc: std::cell::OnceCell::new(),
        }
    }

    /// A text whose document is already at hand.
    pub fn parsed(json: &'a [u8], doc: Value) -> Self {
        Self {
            json,
            doc: std::cell::OnceCell::from(doc),
        }
    }

    /// The stored JSON text.
    pub fn json(&self) -> &'a [u8] {
        self.json
    }

    /// The version as a document (parsed on the first call).
    pub fn doc(&self) -> Result<&Value, StoreError> {
        if let Some(d) = self.doc.get() {
            return Ok(d);
        }
        let d = serde_json::from_slice(self.json).map_err(corrupt)?;
        Ok(self.doc.get_or_init(|| d))
    }
}

/// The version a write replaces or deletes: its [`Text`], and when a write replaces it, the
/// top-level properties the write changed, found once for all maintainers ([`Old::changed`]).
pub struct Old<'a> {
    text: Text<'a>,
    /// The text of the version replacing this one, if a write replaces it.
    by: Option<&'a [u8]>,
    changed: std::cell::OnceCell<Option<Vec<Changed<'a>>>>,
}

impl<'a> Old<'a> {
    /// A version a delete removes.
    pub fn new(json: &'a [u8]) -> Self {
        Self {
            text: Text::new(json),
            by: None,
            changed: std::cell::OnceCell::new(),
        }
    }

    /// A version a write replaces with the document whose text is `by`.
    pub fn replaced_by(json: &'a [u8], by: &'a [u8]) -> Self {
        Self {
            by: Some(by),
            ..Self::new(json)
        }
    }

    /// The version's text.
    pub fn text(&self) -> &Text<'a> {
        &self.text
    }

    /// The stored JSON text.
    pub fn json(&self) -> &'a [u8] {
        self.text.json
    }

    /// The version as a document (parsed on the first call).
    pub fn doc(&self) -> Result<&Value, StoreError> {
        self.text.doc()
    }

    /// The top-level properties the replacing version changed, by their text (read on the
    /// first call); `None` for a delete, or when the texts cannot be read property by property
    /// (see [`members`]).
    pub fn changed(&self) -> Option<&[Changed<'a>]> {
        let by = self.by?;
        self.changed
            .get_or_init(|| members::changed(self.text.json, by))
            .as_deref()
    }
}

fn corrupt(e: serde_json::Error) -> StoreError {
    StoreError::Corrupt(format!("a stored document is not valid JSON: {e}"))
}

/// What every kind of index does for the documents it covers.
pub trait IndexMaintainer: Send + Sync {
    fn kind(&self) -> IndexKind;

    /// Moves the index of `doc` from `old` to `new` (either absent for a create or a delete),
    /// in the write's own transaction: the index never disagrees with the documents.
    fn update(
        &self,
        t: &mut Txn<'_>,
        doc: DocRef<'_>,
        old: Option<&Old<'_>>,
        new: Option<&Text<'_>>,
    ) -> Result<(), StoreError>;

    /// Writes the entries of stored document `d` for a rebuild (idempotent: a document a
    /// write already indexed gets the same entries).
    fn backfill(&self, t: &mut Txn<'_>, doc: DocRef<'_>, d: &Value) -> Result<(), StoreError>;

    /// What it indexes, in one line.
    fn explain(&self) -> String;
}

/// The kinds kept as entries in `Space::Index` (range, full-text, spatial) differ only in which
/// entries a document has: each says that, and this moves them for writes and rebuilds.
pub trait EntryIndex: Send + Sync {
    fn kind(&self) -> IndexKind;
    /// The index generation its entries are written under.
    fn gen(&self) -> u16;
    /// The document's entries of this kind, sorted and without duplicates.
    fn entries(&self, d: &Value) -> Vec<Entry>;
    /// The entries of a stored version: by default those of the version parsed.
    fn stored_entries(&self, v: &Text<'_>) -> Result<Vec<Entry>, StoreError> {
        Ok(self.entries(v.doc()?))
    }
    /// The policy whose paths alone decide this kind's entries, if they do: each entry then
    /// lives under one top-level property, and a write diffs only the properties it changed.
    fn by_path(&self) -> Option<&IndexingPolicy> {
        None
    }
    fn explain(&self) -> String;
}

impl<T: EntryIndex> IndexMaintainer for T {
    fn kind(&self) -> IndexKind {
        EntryIndex::kind(self)
    }

    fn update(
        &self,
        t: &mut Txn<'_>,
        doc: DocRef<'_>,
        old: Option<&Old<'_>>,
        new: Option<&Text<'_>>,
    ) -> Result<(), StoreError> {
        // A rewrite whose changed properties are known walks only those.
        let pruned = match (old, new, self.by_path()) {
            (Some(o), Some(_), Some(policy)) => o
                .changed()
                .map(|c| changed_entries(c, policy))
                .transpose()?,
            _ => None,
        };
        let (before, after) = match pruned {
            Some(both) => both,
            None => {
                let entries = |v: Option<&Text<'_>>| match v {
                    Some(v) => self.stored_entries(v),
                    None => Ok(Vec::new()),
                };
                (entries(old.map(Old::text))?, entries(new)?)
            }
        };
        let (removed, added) = index::diff(&before, &after);
        move_entries(t, self.gen(), doc, &removed, &added);
        Ok(())
    }

    fn backfill(&self, t: &mut Txn<'_>, doc: DocRef<'_>, d: &Value) -> Result<(), StoreError> {
        put_entries(t, self.gen(), doc, &self.entries(d));
        Ok(())
    }

    fn explain(&self) -> String {
        EntryIndex::explain(self)
    }
}

/// The entries of `policy` under the properties in `changed`, in the old version and in the
/// new one (both from their text), each sorted and without duplicates: where two versions'
/// entries differ, since every other property's text, and so its entries, are the same in
/// both.
fn changed_entries(
    changed: &[Changed<'_>],
    policy: &IndexingPolicy,
) -> Result<(Vec<Entry>, Vec<Entry>), StoreError> {
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for c in changed {
        if let Some(text) = c.old {
            term::member_entries_of_json(&c.name, text, policy, &mut before).map_err(corrupt)?;
        }
        if let Some(text) = c.new {
            term::member_entries_of_json(&c.name, text, policy, &mut after).map_err(corrupt)?;
        }
    }
    Ok((sorted(before), sorted(after)))
}

/// Every maintainer of a container at one index state: what writes and rebuilds call.
#[derive(Clone, Default)]
pub struct Maintainers(Arc<Vec<Box<dyn IndexMaintainer>>>);

impl Maintainers {
    /// The maintainers `state` and the container's vector paths call for.
    pub fn of(state: &IndexState, vectors: &[Arc<PathIndex>]) -> Self {
        let mut all: Vec<Box<dyn IndexMaintainer>> = Vec::new();
        let policy = &state.policy;
        if !policy.is_none() {
            all.push(Box::new(range::RangeIndex::new(
                Arc::clone(policy),
                state.gen,
            )));
            if !policy.full_text.is_empty() {
                all.push(Box::new(fulltext::FullTextIndex::new(
                    policy.full_text.clone(),
                    state.gen,
                )));
            }
            if !policy.spatial.is_empty() {
                let paths = policy.spatial.iter().map(|p| p.segs.clone()).collect();
                all.push(Box::new(spatial::SpatialIndex::new(paths, state.gen)));
            }
        }
        if !state.unique.is_empty() {
            all.push(Box::new(unique::UniqueIndex::new(Arc::clone(
                &state.unique,
            ))));
        }
        for path in vectors {
            all.push(Box::new(vector::VectorIndex::new(Arc::clone(path))));
        }
        Self(Arc::new(all))
    }

    /// Whether any of them reads a written version as a document rather than as its text
    /// (every kind but the range index): the item layer then hands its document over with
    /// the text, and nothing parses the text again.
    pub fn read_documents(&self) -> bool {
        self.iter().any(|m| m.kind() != IndexKind::Range)
    }

    pub fn iter(&self) -> impl Iterator<Item = &dyn IndexMaintainer> {
        self.0.iter().map(|m| m.as_ref())
    }

    /// One line per maintainer.
    pub fn explain(&self) -> Vec<String> {
        self.iter().map(|m| m.explain()).collect()
    }
}

impl Container {
    /// The index's current policy, unique keys and generation.
    pub fn index_state(&self) -> IndexState {
        read(&self.index).clone()
    }

    /// Replaces the index state (while writes are paused: see [`Container::with_writes_paused`]).
    pub fn set_index_state(&self, state: IndexState) {
        *write(&self.index) = state;
    }

    /// The maintainers a write calls now: the index state's and one per vector path.
    pub fn maintainers(&self) -> Maintainers {
        Maintainers::of(&self.index_state(), &self.vectors.paths())
    }
}

/// The entries of one kind in `Space::Index` that a write removes and adds.
fn move_entries(t: &mut Txn<'_>, gen: u16, doc: DocRef<'_>, removed: &[&Entry], added: &[&Entry]) {
    let cid = t.c.cid;
    for e in removed {
        t.tx.delete(Space::Index, index::entry_key(cid, gen, e, &doc.key[4..]));
    }
    for e in added {
        t.tx.put(
            Space::Index,
            index::entry_key(cid, gen, e, &doc.key[4..]),
            Vec::new(),
        );
    }
}

/// A stored document's entries of one kind, for a rebuild.
fn put_entries(t: &mut Txn<'_>, gen: u16, doc: DocRef<'_>, entries: &[Entry]) {
    let cid = t.c.cid;
    for e in entries {
        t.put_raw(
            Space::Index,
            index::entry_key(cid, gen, e, &doc.key[4..]),
            Vec::new(),
        );
    }
}

/// `entries` sorted and without duplicates, as [`index::diff`] takes them.
fn sorted(mut entries: Vec<Entry>) -> Vec<Entry> {
    entries.sort_unstable();
    entries.dedup();
    entries
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::index::UniqueKeys;
    use strata_query::index::IndexingPolicy;

    fn kinds(m: &Maintainers) -> Vec<IndexKind> {
        m.iter().map(|m| m.kind()).collect()
    }

    #[test]
    fn a_write_diffs_only_the_properties_it_changed_to_the_same_effect() {
        use serde_json::json;
        let docs = [
            json!({"id": "1", "a": {"b": 2, "c": [1, "x"]}, "n": 1, "_ts": 5, "_etag": "\"1\""}),
            json!({"id": "1", "a": {"b": 2, "c": [1, "y"]}, "n": 1.0, "_ts": 6, "_etag": "\"2\""}),
            json!({"id": "1", "n": 1, "new": [{"k": null}], "_ts": 6, "_etag": "\"3\""}),
            json!({"id": "1", "a~/[": {"b": 2}, "n": "1", "_etag": "\"3\""}),
            json!({"id": "1"}),
        ];
        let policies = [
            IndexingPolicy::default(),
            IndexingPolicy::from_json(&json!({
                "includedPaths": [{"path": "/a/*"}, {"path": "/new/[]/?"}],
                "excludedPaths": [{"path": "/*"}],
            }))
            .unwrap(),
            IndexingPolicy::from_json(&json!({"indexingMode": "none"})).unwrap(),
        ];
        for p in &policies {
            for old in &docs {
                for new in &docs {
                    let (o, n) = (old.to_string(), new.to_string());
                    let version = Old::replaced_by(o.as_bytes(), n.as_bytes());
                    let changed = version.changed().expect("both are objects");
                    let (before, after) = changed_entries(changed, p).unwrap();
                    let whole = (term::entries(old, p), term::entries(new, p));
                    assert_eq!(
                        index::diff(&before, &after),
                        index::diff(&whole.0, &whole.1),
                        "{old} -> {new}"
                    );
                }
            }
        }
        // A delete reads no change set.
        assert!(Old::new(b"{}").changed().is_none());
    }

    #[test]
    fn each_kind_of_index_the_policy_names_gets_its_maintainer() {
        let props = serde_json::json!({
            "indexingPolicy": {
                "includedPaths": [{"path": "/*"}],
                "spatialIndexes": [{"path": "/loc/*", "types": ["Point"]}],
                "fullTextIndexes": [{"path": "/text"}],
            },
            "fullTextPolicy": {"defaultLanguage": "en-US", "fullTextPaths": [{"path": "/text", "language": "en-US"}]},
            "uniqueKeyPolicy": {"uniqueKeys": [{"paths": ["/email"]}]},
        });
        let props = props.as_object().unwrap();
        let state = IndexState {
            policy: Arc::new(crate::store::index::policy_of(props).unwrap()),
            unique: Arc::new(UniqueKeys::from_props(props).unwrap()),
            gen: 3,
            ready: true,
        };
        let all = Maintainers::of(&state, &[]);
        use IndexKind::*;
        assert_eq!(kinds(&all), vec![Range, FullText, Spatial, Unique]);
        assert!(
            all.explain()[0].contains("generation 3"),
            "{:?}",
            all.explain()
        );
        // No indexing: no entries of any kind, unique keys still kept.
        let none = IndexState {
            policy: Arc::new(IndexingPolicy {
                mode: strata_query::index::policy::Mode::None,
                ..Default::default()
            }),
            ..state
        };
        assert_eq!(kinds(&Maintainers::of(&none, &[])), vec![Unique]);
    }
}
