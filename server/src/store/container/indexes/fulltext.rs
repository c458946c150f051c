//! Full-text postings: per indexed path, one entry per stem of a document's text (carrying the
//! term frequency and document length BM25 scores with) and one for its length, under
//! synthetic paths of their own beside the range index (see
//! `strata_query::index::fulltext`). `FullTextContains*` and `ORDER BY RANK FullTextScore` read
//! them.

use super::{move_entries, put_entries, sorted, DocRef, IndexKind, IndexMaintainer, Txn};
use crate::store::StoreError;
use serde_json::Value;
use strata_query::index::policy::Seg;
use strata_query::sql::fulltext::Language;

pub struct FullTextIndex {
    paths: Vec<(Vec<Seg>, Language)>,
    gen: u16,
}

impl FullTextIndex {
    pub fn new(paths: Vec<(Vec<Seg>, Language)>, gen: u16) -> Self {
        Self { paths, gen }
    }

    fn entries(&self, d: Option<&Value>) -> Vec<strata_query::index::term::Entry> {
        d.map(|d| sorted(strata_query::index::fulltext::entries(d, &self.paths)))
            .unwrap_or_default()
    }
}

impl IndexMaintainer for FullTextIndex {
    fn kind(&self) -> IndexKind {
        IndexKind::FullText
    }

    fn update(
        &self,
        t: &mut Txn<'_>,
        doc: DocRef<'_>,
        old: Option<&Value>,
        new: Option<&Value>,
    ) -> Result<(), StoreError> {
        move_entries(t, self.gen, doc, &self.entries(old), &self.entries(new));
        Ok(())
    }

    fn backfill(&self, t: &mut Txn<'_>, doc: DocRef<'_>, d: &Value) -> Result<(), StoreError> {
        put_entries(t, self.gen, doc, &self.entries(Some(d)));
        Ok(())
    }

    fn explain(&self) -> String {
        format!(
            "full-text postings on {} path(s), generation {}",
            self.paths.len(),
            self.gen
        )
    }
}
