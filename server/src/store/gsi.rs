//! Global secondary indexes in the catalog: the checks when one is created, replaced or
//! deleted (and when its source is), and the source's history holds placed again at start.
//! What an index is and keeps: [`container::gsi`]; the copying: `crate::gsi`.

use super::container::gsi::{self, Definition};
use super::container::Container;
use super::{read, Store, StoreError};
use serde_json::{Map, Value};
use std::sync::Arc;

impl Container {
    /// This container's definition as a global secondary index (`None`: it is not one).
    pub fn gsi_definition(&self) -> Option<Definition> {
        self.with_meta(|m| Definition::of(&m.props).ok().flatten())
    }

    /// Whether this container is a global secondary index (its items are copies that only
    /// the index's sync writes).
    pub fn is_gsi(&self) -> bool {
        self.with_meta(|m| m.props.contains_key(gsi::PROP))
    }
}

impl Store {
    /// Every global secondary index, with its source.
    pub fn gsi_indexes(&self) -> Vec<(Arc<Container>, Arc<Container>, Definition)> {
        let cat = read(&self.inner.catalog);
        let mut out = Vec::new();
        for containers in cat.containers.values() {
            for c in containers.values() {
                let Some(d) = c.gsi_definition() else {
                    continue;
                };
                if let Some(src) = containers.get(&d.source) {
                    out.push((Arc::clone(c), Arc::clone(src), d));
                }
            }
        }
        out
    }

    /// For a container about to be created in database `db` with `props`: its source when it
    /// is a global secondary index, after the service's checks (the source exists in the same
    /// database and is not an index itself; at most five indexes a source). The definition
    /// is kept under its one name, with the source's `_rid`.
    pub(super) fn check_new_gsi(
        &self,
        db: &str,
        props: &mut Map<String, Value>,
    ) -> Result<Option<Arc<Container>>, StoreError> {
        let Some(d) = Definition::of(props)? else {
            return Ok(None);
        };
        let source = self.container(db, &d.source).map_err(|_| {
            StoreError::BadRequest(format!(
                "The source container '{}' of the global secondary index does not exist in database '{db}'.",
                d.source
            ))
        })?;
        if source.gsi_definition().is_some() {
            return Err(StoreError::BadRequest(format!(
                "The source container '{}' is itself a global secondary index; an index's source must be a container of items.",
                d.source
            )));
        }
        let siblings = self
            .gsi_indexes()
            .iter()
            .filter(|(_, s, _)| s.cid == source.cid)
            .count();
        if siblings >= gsi::MAX_PER_SOURCE {
            return Err(StoreError::BadRequest(format!(
                "The container '{}' already has {siblings} global secondary indexes, the most a container may have.",
                d.source
            )));
        }
        props.remove(gsi::PREVIEW_PROP);
        props.insert(
            gsi::PROP.into(),
            serde_json::json!({
                "sourceCollectionId": d.source,
                "definition": d.query,
                "sourceCollectionRid": source.rid,
            }),
        );
        Ok(Some(source))
    }

    /// A replace keeps an index's definition (it cannot change, and a body without it leaves
    /// it as it is) and cannot make a container an index.
    pub(super) fn check_gsi_replace(
        c: &Container,
        props: &mut Map<String, Value>,
    ) -> Result<(), StoreError> {
        let new = Definition::of(props)?;
        let kept = c.with_meta(|m| m.props.get(gsi::PROP).cloned());
        match (c.gsi_definition(), new, kept) {
            (None, None, _) => Ok(()),
            (None, Some(_), _) => Err(StoreError::BadRequest(
                "A container cannot become a global secondary index; create the index as a new container."
                    .into(),
            )),
            (Some(old), new, Some(kept)) => {
                if new.is_some_and(|n| (n.source, n.query) != (old.source, old.query)) {
                    return Err(StoreError::BadRequest(
                        "The source container and definition of a global secondary index cannot change."
                            .into(),
                    ));
                }
                props.remove(gsi::PREVIEW_PROP);
                props.insert(gsi::PROP.into(), kept);
                Ok(())
            }
            (Some(_), _, None) => Ok(()),
        }
    }

    /// A source cannot be deleted before its indexes. For an index, its source: once the
    /// index is deleted, the source's history is let go ([`Container::release_history`]).
    pub(super) fn check_gsi_delete(
        &self,
        c: &Container,
    ) -> Result<Option<Arc<Container>>, StoreError> {
        let indexes: Vec<String> = self
            .gsi_indexes()
            .iter()
            .filter(|(_, s, _)| s.cid == c.cid)
            .map(|(i, _, _)| format!("'{}'", i.id))
            .collect();
        if !indexes.is_empty() {
            return Err(StoreError::BadRequest(format!(
                "The container '{}' is the source of global secondary index(es) {}; delete them first.",
                c.id,
                indexes.join(", ")
            )));
        }
        Ok(c.gsi_definition()
            .and_then(|d| self.container(&c.db, &d.source).ok()))
    }

    /// How far index `index` is behind its source: the source's LSNs (write transactions)
    /// it has not applied, and the age in seconds of the oldest change among them (0 when
    /// caught up). `None` for a container that is not an index.
    pub fn gsi_lag(&self, index: &Container) -> Option<(u64, u64)> {
        let d = index.gsi_definition()?;
        let source = self.container(&index.db, &d.source).ok()?;
        let cursor = index.gsi_cursor().ok()?;
        let upto = source.current_lsn();
        let from = if cursor.built { cursor.lsn } else { 0 };
        let all = strata_query::pk::EpkRange::full();
        let oldest = source.history(&all, None, from, upto, 1).ok()?;
        let age = oldest
            .changes
            .first()
            .map_or(0, |c| super::catalog::now_secs().saturating_sub(c.crts));
        Some((upto.saturating_sub(from), age))
    }

    /// At start, before any write: each source keeps the history its indexes have not
    /// applied (all of it for an index whose build had not finished).
    pub(super) fn restore_gsi_holds(&self) -> Result<(), StoreError> {
        for (index, source, _) in self.gsi_indexes() {
            let cursor = index.gsi_cursor()?;
            let after = if cursor.built { cursor.lsn } else { 0 };
            source.hold_history(index.cid, after);
            index.set_gsi_phase(if cursor.built { 2 } else { 0 });
        }
        Ok(())
    }
}
