//! `ORDER BY VectorDistance` over a vector index. Every partition's candidates come scored
//! from the index's own float32 rows and are merged into one list, closest first, before any
//! document is read; documents are then read in that order and evaluated like any other (so
//! `WHERE` filters, projections and the scores returned are the evaluator's) until the page
//! is settled. A TOP 10 over seven partitions reads about ten documents, not ten per
//! partition. The index and its search are the plan's ([`VectorAccess`]).
//!
//! When the index's row of a document holds the version read and its numbers exactly (see
//! `vector::set::Origin`) and the query sorts by the distance alone, the index's `f64`
//! score is the sort key the evaluator would compute: the document is then read without its
//! vector (unless the query also projects or filters on it). Parsing a 768-number vector was
//! a fifth of a query's CPU, per document read. When the page needs nothing but ids (see
//! `answers_from_keys`), no document is read at all: the key holds the id.

use super::ordered::{cmp_ranked, keep_best, rows_after, PartBest, Ranked};
use super::*;
use crate::store::container::indexes::vector::{Candidate, Known, VectorAccess};
use std::collections::{HashMap, HashSet};
use strata_query::sql::ast::{OrderBy, OrderItem};

/// Distances closer than this (relative) are ties to the index: its float32 rows round the
/// documents' numbers, which the evaluator scores in f64.
fn margin(d: f32) -> f32 {
    1e-5 * d.abs().max(1e-3)
}

/// What [`best_nearest`] made of a page.
pub(super) enum Nearest {
    /// The page's rows; `None` when the index ran out of candidates before the page had
    /// `want` rows: documents without a vector then decide, which only a scan finds.
    Found(Option<PartBest>),
    /// It did not settle within the rounds it was allowed: run it where it may take long.
    Slow,
}

/// Whether a first page of `want` rows may be searched on the async runtime's thread (the
/// hop to the blocking pool and back was 7% of a vector query's CPU): a small search (see
/// [`VectorAccess::is_small`]), no WHERE clause (so the first round of candidates settles the
/// page, barring ties), documents read from the local store, at most 100 of them; it stops
/// after one round if the page is not settled.
pub(super) fn quick(c: &Container, p: &PreparedQuery, vector: &VectorAccess, want: usize) -> bool {
    c.reads_locally()
        && p.query.where_.is_none()
        && want as u64 <= super::ranked::QUICK_READS
        && vector.is_small(want)
}

/// The best `want` rows of `parts` (physical partitions' ranges) after `last`, from the
/// index's candidates (see the module's doc). A filter that rejects candidates makes it ask
/// the ranges that may have more for four times as many, again — up to `rounds` searches in
/// all, then [`Nearest::Slow`].
#[allow(clippy::too_many_arguments)]
pub(super) fn best_nearest(
    c: &Container,
    p: &PreparedQuery,
    vector: &VectorAccess,
    parts: &[EpkRange],
    last: Option<&Ranked>,
    (want, rounds): (usize, usize),
    desc: &[bool],
    held: &memory::Held,
) -> Result<Nearest, ExecError> {
    if want == 0 {
        // TOP 0, or a page whose limit is spent: nothing to read.
        return Ok(Nearest::Found(Some(PartBest::default())));
    }
    let cx = query_ctx(c, p);
    // One more than the page from each partition: if one partition holds the whole page, its
    // extra candidate shows that nothing it has not handed out comes before the page's last.
    let mut need = want.max(1).saturating_add(1);
    // The beam is sized by the page's k, then by what a filter made it ask for.
    let mut k = want;
    // Partitions that follow one another are searched as one range: each graph of the index
    // (one, or one per shard key value the query can match) once, filtered to the range.
    let parts = coalesced(parts);
    let mut open: Vec<&EpkRange> = parts.iter().collect();
    let mut queued: HashSet<DocPos> = HashSet::new();
    let mut distance: HashMap<DocPos, f32> = HashMap::new();
    // Candidates not read yet, closest first.
    let mut pending: Vec<(f32, DocPos, Option<Known>)> = Vec::new();
    // The one ORDER BY item, when the index's scores can stand for the evaluator's.
    let sole = match &p.query.order_by {
        Some(OrderBy::Items(items)) if items.len() == 1 => items.first(),
        _ => None,
    };
    let from_key = answers_from_keys(c, p, sole);
    let mut best: Vec<Ranked> = Vec::new();
    let (mut scanned, mut bytes) = (0u64, 0u64);
    for _ in 0..rounds {
        // Below the frontier every vector of every partition has been handed out: the
        // nearest of the farthest candidates of the partitions that have more.
        let mut frontier = f32::INFINITY;
        let mut still_open = Vec::new();
        for range in open {
            let (docs, exhausted) = vector.candidates(c, range, need, k);
            if !exhausted && docs.len() >= need {
                frontier = frontier.min(docs.last().map_or(f32::INFINITY, |d| d.distance));
                still_open.push(range);
            }
            for Candidate {
                pos,
                distance: d,
                known,
            } in docs
            {
                if queued.insert(pos.clone()) {
                    distance.insert(pos.clone(), d);
                    pending.push((d, pos, known));
                }
            }
        }
        open = still_open;
        pending.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        let mut read = 0;
        loop {
            let next = pending.get(read).map_or(f32::INFINITY, |c| c.0);
            if best.len() >= want {
                best.sort_by(|a, b| cmp_ranked(a, b, desc));
                // Settled when nothing unread can come before the page's last row: the next
                // candidate, and anything a partition has not handed out, is farther (by
                // more than the index's rounding). Ties at the boundary are read too.
                let bound = next.min(frontier);
                let last_d = distance
                    .get(&best[want - 1].doc)
                    .copied()
                    .unwrap_or(f32::INFINITY);
                if bound.is_infinite() || last_d < bound - margin(bound) {
                    pending.drain(..read);
                    let more = !pending.is_empty() || !open.is_empty();
                    let candidates = best.len() as u64 + u64::from(more);
                    keep_best(&mut best, want, desc, held);
                    return Ok(Nearest::Found(Some(PartBest {
                        rows: best,
                        scanned,
                        bytes,
                        candidates,
                        index: IndexStats::default(),
                    })));
                }
            }
            if read >= pending.len() || next > frontier {
                break;
            }
            let (_, pos, known) = &pending[read];
            read += 1;
            let counts = (&mut scanned, &mut bytes);
            let Some((keys, item)) = candidate_row(c, pos, known.as_ref(), sole, from_key, counts)?
            else {
                continue;
            };
            rows_after(
                p,
                &cx,
                (pos, &item),
                keys.as_deref(),
                last,
                desc,
                (&mut best, held),
            )?;
        }
        pending.drain(..read);
        if open.is_empty() && pending.is_empty() {
            // Every vector was handed out and the page is still short.
            return Ok(Nearest::Found(None));
        }
        need = need.saturating_mul(4);
        k = need;
    }
    Ok(Nearest::Slow)
}

/// Whether a page's rows can be made from the candidates' keys without reading their
/// documents: the query sorts by the distance alone, has no WHERE clause, reads no property
/// but `id` (which the key holds) and returns no whole document, and nothing in the container
/// expires (an expired document not yet purged would need its `ttl` read). The index's row of
/// a document is updated in the commit of each write, so its distance is the current
/// version's whenever the row holds the numbers exactly ([`Known`]); a TOP 10 then reads no
/// document — reading them was about a sixth of such a query's CPU (the key lookup, the skip over
/// the vector's text).
fn answers_from_keys(c: &Container, p: &PreparedQuery, sole: Option<&OrderItem>) -> bool {
    sole.is_some()
        && p.query.where_.is_none()
        && !p.raw_documents
        && p.row_fields
            .as_ref()
            .is_some_and(|f| f.iter().all(|n| n == "id"))
        && c.default_ttl().is_none()
}

/// A row's ORDER BY keys.
type SortKeys = Vec<Option<Value>>;

/// What evaluating the candidate at `pos` needs — its sort keys when the index knows them,
/// and its JSON —: made from its key ([`answers_from_keys`]) when `from_key`, else its document
/// read (`None`: gone), counted in `read` (documents, bytes).
fn candidate_row(
    c: &Container,
    pos: &DocPos,
    known: Option<&Known>,
    sole: Option<&OrderItem>,
    from_key: bool,
    read: (&mut u64, &mut u64),
) -> Result<Option<(Option<SortKeys>, Bytes)>, ExecError> {
    if let (true, Some(it), Some(k)) = (from_key, sole, known) {
        let keys = vec![sql::vector::unscored_last(it, k.key.clone())];
        return Ok(Some((
            Some(keys),
            to_bytes(&serde_json::json!({"id": c.doc_id(pos)})),
        )));
    }
    let Some(item) = c.load_item(pos)? else {
        return Ok(None);
    };
    *read.0 += 1;
    *read.1 += item.json.len() as u64;
    Ok(Some((known_keys(sole, known, &item), item.json)))
}

/// The sort keys of `item` from the index (see the module's doc): when the query sorts by
/// the distance alone and the index's row is of this version, exactly.
fn known_keys(
    sole: Option<&OrderItem>,
    known: Option<&Known>,
    item: &crate::store::record::StoredItem,
) -> Option<Vec<Option<Value>>> {
    let (it, k) = (sole?, known?);
    (k.lsn == item.lsn && k.sub == item.sub)
        .then(|| vec![sql::vector::unscored_last(it, k.key.clone())])
}
