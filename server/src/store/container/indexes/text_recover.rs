//! Running folds, and bringing the pending postings back after a restart: the documents
//! written after a path's mark are read again from the change feed, so a posting that was
//! only in memory when the process stopped (or was killed) is back before the first query.

use super::text_pending::{Gate, NewPostings, PathKey, PathText, TextChange, TextPending, FOLD_AT};
use super::text_segments::{decode_meta, meta_key, Folder};
use crate::store::container::Container;
use crate::store::engine::{prefix_end, Space};
use crate::store::index::{path_id_of, path_prefix};
use crate::store::StoreError;
use std::sync::Arc;
use std::time::Duration;
use strata_query::index::fulltext::{lengths_path, postings, postings_path, segments_path};
use strata_query::index::term;

impl Container {
    /// What a fold of this container's postings needs.
    fn folder(&self) -> Folder {
        Folder {
            engine: self.engine.clone(),
            cid: self.cid,
            text: Arc::clone(&self.text),
            gen: self.index_state().gen,
        }
    }

    /// Hands a committed transaction's full-text changes to the pending batch (under `gate`,
    /// held across the commit) and starts a fold when one is due.
    pub(in crate::store) fn take_text(
        &self,
        gate: Option<Gate<'_>>,
        changes: Vec<TextChange>,
        last_lsn: u64,
        committed: bool,
    ) {
        if let Some(gate) = gate {
            if TextPending::apply(gate, changes, last_lsn, committed) {
                self.spawn_text_fold();
            }
        }
    }

    /// Folds the pending postings on a thread of its own, unless a fold runs already.
    fn spawn_text_fold(&self) {
        if !self.text.claim() {
            return;
        }
        let folder = self.folder();
        let id = self.id.clone();
        let spawned = std::thread::Builder::new()
            .name("strata-text-fold".into())
            .spawn(move || {
                if let Err(e) = folder.fold_all() {
                    tracing::warn!(container = %id, error = %e, "folding full-text postings failed; kept pending");
                }
                folder.text.release();
            });
        if spawned.is_err() {
            self.text.release();
        }
    }

    /// Folds every pending posting now (waiting for a fold under way): an index build ends
    /// with it, so a build the next start does not repeat leaves nothing only in memory.
    pub fn fold_text_now(&self) -> Result<(), StoreError> {
        while !self.text.claim() {
            std::thread::sleep(Duration::from_millis(5));
        }
        let done = self.folder().fold_all();
        self.text.release();
        done
    }

    /// Postings pending in memory (for tests and the bench's report).
    pub fn text_pending(&self) -> usize {
        self.text.pending()
    }

    /// Reads each full-text path's segment list and re-reads the postings of every document
    /// written after its mark (see the module's doc). A path with no record is new — or was
    /// written by a strata that kept a posting entry per stem: those entries are deleted and
    /// every document is read (folding as it goes).
    pub fn catch_up_text(&self) -> Result<(), StoreError> {
        let state = self.index_state();
        let paths = &state.policy.full_text;
        if state.policy.is_none() || paths.is_empty() {
            return Ok(());
        }
        let keys: Vec<PathKey> = paths
            .iter()
            .map(|(segs, _)| (state.gen, path_id_of(&segments_path(segs))))
            .collect();
        let mut from = u64::MAX;
        for ((segs, _), key) in paths.iter().zip(&keys) {
            self.move_length_entries(state.gen, term::path_id(&lengths_path(segs)))?;
            let meta = match self.engine.get(Space::Index, &meta_key(self.cid, *key))? {
                Some(b) => decode_meta(&b).ok_or_else(|| {
                    StoreError::Corrupt("a full-text segment record is unreadable".into())
                })?,
                None => {
                    let old = path_prefix(self.cid, state.gen, &path_id_of(&postings_path(segs)));
                    let end = prefix_end(&old).unwrap_or_default();
                    self.engine.delete_range(Space::Index, &old, &end)?;
                    Default::default()
                }
            };
            from = from.min(meta.mark);
            let mut g = self.text.lock();
            g.paths.insert(
                *key,
                PathText {
                    mark: meta.mark,
                    next_seq: meta.next_seq,
                    segments: meta.segments,
                    ..Default::default()
                },
            );
        }
        let folder = self.folder();
        if !state.ready {
            // The build starts over and adds every document (see `reindex`).
            self.text.start_at(self.log.current());
            return Ok(());
        }
        let marks: Vec<u64> = {
            let g = self.text.lock();
            keys.iter()
                .map(|k| g.paths.get(k).map_or(0, |p| p.mark))
                .collect()
        };
        let mut last = from;
        let mut read = 0usize;
        self.walk_log(
            Space::Feed,
            from,
            u64::MAX,
            usize::MAX,
            &mut |lsn, k, suffix| {
                // A fold only between transactions: its mark covers whole ones.
                if lsn != last && self.text.pending() >= FOLD_AT {
                    self.text.start_at(last);
                    folder.fold_all()?;
                }
                last = lsn;
                let Some(pos) = crate::store::keys::parse_change_key(k) else {
                    return Ok(false);
                };
                let Some(item) = self.feed_item(suffix)? else {
                    return Ok(false);
                };
                let Ok(doc) = serde_json::from_slice::<serde_json::Value>(&item.json) else {
                    return Ok(false);
                };
                read += 1;
                let mut changes = Vec::new();
                for p in postings(&doc, paths) {
                    if lsn <= marks[p.path] {
                        continue;
                    }
                    changes.push(TextChange {
                        path: keys[p.path],
                        was: None,
                        now: Some(NewPostings {
                            pos,
                            length: p.length,
                            stems: p.stems,
                        }),
                    });
                }
                TextPending::apply(self.text.gate(), changes, 0, true);
                Ok(true)
            },
        )?;
        self.text.start_at(self.log.current());
        if read > 0 {
            tracing::info!(container = %self.id, documents = read, "full-text postings caught up from the change feed");
        }
        Ok(())
    }
}
