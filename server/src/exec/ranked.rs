//! `ORDER BY RANK` on the server. BM25 needs statistics over the whole scope searched before
//! any row is scored: over a full-text index [`from_postings`] counts and scores from the
//! index entries alone and reads documents in score order; otherwise [`with_statistics`]
//! gathers them from the plan's provider ([`Bm25Statistics`]: the postings, or the statistics
//! query planned with the query) and rewrites each score under its counts, and the query runs
//! as any ORDER BY (RRF's fusion over all rows is `ordered::fuse`). The SDKs run the same steps
//! per partition when the gateway hands them the plan (`strata_query::sql::hybrid`).

use super::access_path::{plan_counted, Bm25Statistics, PostingsAccess};
use super::complete::run_complete;
use super::top_postings::{self, Scored};
use super::*;
use crate::store::container::indexes::postings::Postings;
use std::collections::HashSet;
use strata_query::index::fulltext::value_at;
use strata_query::sql::fulltext::{Statistics, TermWeight};
use strata_query::sql::hybrid;

/// `plan` with each `FullTextScore` of its ranking scored under statistics gathered, as the
/// plan's provider says, over the partitions (and key range) the query reads; and what
/// gathering them read (an empty page's counts), which the query's page is charged.
pub(super) async fn with_statistics(
    c: &Arc<Container>,
    plan: &Plan,
) -> Result<(Plan, Page), ExecError> {
    let Some(provider) = &plan.access.statistics else {
        return Ok((plan.clone(), Page::empty()));
    };
    let (stats, cost) = statistics(c, provider, &plan.routing.ranges).await?;
    let mut scored = PreparedQuery::clone(&plan.query);
    scored.query = hybrid::with_statistics(&plan.query.query, &stats)?;
    let mut out = plan.clone();
    out.query = Arc::new(scored);
    Ok((out, cost))
}

/// BM25's statistics over `ranges`, one per `FullTextScore` of the ranking: from the postings
/// when the provider has them (and the index is not being rebuilt), else counted.
async fn statistics(
    c: &Arc<Container>,
    provider: &Bm25Statistics,
    ranges: &[EpkRange],
) -> Result<(Vec<Statistics>, Page), ExecError> {
    if let Some(ix) = &provider.postings {
        let (c2, ix, ranges) = (Arc::clone(c), ix.clone(), ranges.to_vec());
        let (counted, index) = tokio::task::spawn_blocking(move || {
            let ranges = c2.split_by_partition(&ranges);
            let mut index = IndexStats::default();
            postings_statistics(&c2, &ix, &ranges, &mut index).map(|s| (s, index))
        })
        .await
        .map_err(|e| ExecError::Worker(e.to_string()))??;
        if let Some(s) = counted {
            let mut cost = Page::empty();
            cost.index = index;
            return Ok((vec![s], cost));
        }
    }
    let (sp, sa) = match &provider.counted_plan {
        Some(planned) => planned.clone(),
        None => plan_counted(c, &provider.counted)?,
    };
    let search = memory::Class::Search;
    let page = run_complete(Arc::clone(c), sp, sa, ranges.to_vec(), 1, None, search).await?;
    let rows = page
        .docs
        .iter()
        .map(|d| serde_json::from_slice(d).map_err(|e| ExecError::Corrupt(e.to_string())))
        .collect::<Result<Vec<Value>, ExecError>>()?;
    let cost = Page {
        docs: Vec::new(),
        ..page
    };
    Ok((hybrid::add_statistics(&rows), cost))
}

/// Postings a ranking may walk on the async runtime's thread: a few hundred microseconds, and
/// about a millisecond if every one of them ties and is sorted.
const QUICK_POSTINGS: usize = 30_000;

/// Documents a ranking may read on the async runtime's thread.
pub(super) const QUICK_READS: u64 = 100;

/// What [`from_postings`] made of a ranking.
pub(super) enum Ranked {
    Page(Page),
    /// It cannot answer exactly as evaluation would: evaluate the query.
    Evaluate,
    /// It read its `reads` documents without filling the page: run it where it may take long.
    Slow,
}

/// Whether [`from_postings`] is quick enough to run on the async runtime's thread rather
/// than the blocking pool — the hop there and back cost about a tenth of a ranked query's
/// CPU: every word's list in memory, few postings in all, and every document read a row
/// (no WHERE to turn any down, no `SELECT VALUE` that may be undefined), few of them, from
/// the local store. A run that reads more documents all the same (expired ones), or needs
/// every posting sorted, stops and goes to the pool.
pub(super) fn quick(c: &Container, plan: &Plan) -> bool {
    let (p, a) = (&plan.query, &plan.access);
    let Some(ix) = &a.postings else {
        return false;
    };
    let every_doc_a_row = p.query.where_.is_none()
        && !matches!(
            p.query.select.projection,
            strata_query::sql::ast::Projection::Value(_)
        );
    if !every_doc_a_row || !c.reads_locally() || p.limit.is_none_or(|l| l + p.offset > QUICK_READS)
    {
        return false;
    }
    let entries = c.entries();
    let mut total = 0;
    for stem in &ix.stems {
        match entries.cached_len(&ix.postings, stem) {
            Some(n) => total += n,
            None => return false,
        }
    }
    total <= QUICK_POSTINGS
}

/// `ORDER BY RANK FullTextScore` answered from a full-text index: statistics from the
/// partitions' sizes, length entries and postings; every document with a posting scored from
/// its postings alone (term frequency and length), best first; documents read only in that
/// order, until the page's rows pass the filter, then (if too few had a posting) the rest at
/// score zero in document order, as evaluation orders equal scores. `None` when it cannot
/// answer exactly as evaluation would (a phrase, a continuation, a page too large to cut
/// here) — then the query is evaluated. `reads`: the documents it may read before it gives
/// up with [`Ranked::Slow`] (on the async runtime's thread, see [`quick`]).
pub(super) fn from_postings(
    c: &Arc<Container>,
    plan: &Plan,
    token: &Option<Continuation>,
    reads: u64,
) -> Result<Ranked, ExecError> {
    let (p, a) = (&plan.query, &plan.access);
    if token.is_some() {
        return Ok(Ranked::Evaluate);
    }
    let Some(want) = p.limit.map(|l| (l + p.offset) as usize) else {
        return Ok(Ranked::Evaluate);
    };
    if want > plan.paging.page_size.max(1) + p.offset as usize {
        return Ok(Ranked::Evaluate);
    }
    let Some(ix) = &a.postings else {
        return Ok(Ranked::Evaluate);
    };
    let mut index = IndexStats::default();
    let ranges = c.split_by_partition(&plan.routing.ranges);
    let mut lists = Vec::new();
    let Some(weights) = term_weights(c, ix, &ranges, &mut index, &mut lists)? else {
        return Ok(Ranked::Evaluate);
    };
    let best = top_postings::order(&lists);
    // The best `want` (all a page needs unless the filter turns rows down); else, or when
    // they run out, every document with a posting, best first.
    let (mut ranked, mut complete) = match top_postings::best(&lists, &weights, want) {
        Some(top) => (top, false),
        None => (top_postings::every(&lists, &weights), true),
    };
    // Only the page's share of `every` is sorted up front (the rest if rows are turned down).
    let mut sorted = if complete {
        want.min(ranked.len())
    } else {
        ranked.len()
    };
    if complete {
        if sorted < ranked.len() {
            ranked.select_nth_unstable_by(sorted, &best);
        }
        ranked[..sorted].sort_by(&best);
    }
    let cx = query_ctx(c, p);
    let covered = covered_by_keys(c, plan);
    let mut rows: Vec<Bytes> = Vec::new();
    let (mut scanned, mut scanned_bytes) = (0u64, 0u64);
    let mut at = 0;
    while rows.len() < want {
        if at == ranked.len() && !complete {
            if reads < u64::MAX {
                // Scoring and sorting every posting is the pool's work.
                return Ok(Ranked::Slow);
            }
            // The best ran out before the page filled: every document, sorted, continues
            // after them (they are its first `at`).
            ranked = top_postings::every(&lists, &weights);
            ranked.sort_by(&best);
            (sorted, complete) = (ranked.len(), true);
        }
        if at == ranked.len() {
            break;
        }
        if at == sorted {
            ranked[sorted..].sort_by(&best);
            sorted = ranked.len();
        }
        let (l, j, _) = ranked[at];
        at += 1;
        // Counted as tried, read or not (an expired document reads as none).
        if at as u64 > reads {
            return Ok(Ranked::Slow);
        }
        let pos = lists[l as usize].pos(j as usize);
        if let Some(bytes) = ranked_rows(c, plan, &cx, covered, &pos, &mut rows)? {
            scanned += 1;
            scanned_bytes += bytes;
        }
    }
    if rows.len() < want {
        let key = |d: &Scored| lists[d.0 as usize].key(d.1 as usize);
        let matched: HashSet<&[u8]> = ranked.iter().map(key).collect();
        let mut read = Read {
            rows,
            scanned,
            bytes: scanned_bytes,
        };
        let whole = fill_unranked(c, plan, &cx, &ranges, &matched, reads, &mut read)?;
        if !whole {
            return Ok(Ranked::Slow);
        }
        (rows, scanned, scanned_bytes) = (read.rows, read.scanned, read.bytes);
    }
    if rows.len() < want {
        // Every document is in the result: no page is cut, and evaluation pages it.
        if rows.len() > plan.paging.page_size {
            return Ok(Ranked::Evaluate);
        }
    }
    let docs = rows
        .into_iter()
        .skip(p.offset as usize)
        .take(want.saturating_sub(p.offset as usize))
        .collect();
    Ok(Ranked::Page(Page {
        docs,
        continuation: None,
        scanned,
        scanned_bytes,
        index,
    }))
}

/// A page's rows so far, and the documents read for them.
struct Read {
    rows: Vec<Bytes>,
    scanned: u64,
    bytes: u64,
}

/// Fewer rows than the page once every document with a posting is read: the rest score
/// zero, or nothing at all where the text is missing or not a string (an undefined score,
/// which sorts after every number, as evaluation orders it), each group in document order
/// (as evaluation orders equal scores). So they are read from the start of `ranges`, leaving
/// out the `matched` ones: zero scores become rows at once, the first undefined ones are kept
/// aside until no zero is left. False when `reads` ran out first.
fn fill_unranked(
    c: &Container,
    plan: &Plan,
    cx: &Ctx,
    ranges: &[EpkRange],
    matched: &HashSet<&[u8]>,
    reads: u64,
    read: &mut Read,
) -> Result<bool, ExecError> {
    let (p, a) = (&plan.query, &plan.access);
    let want = p.limit.map_or(0, |l| (l + p.offset) as usize);
    let mut unscored: Vec<Bytes> = Vec::new();
    let text = a
        .postings
        .as_ref()
        .and_then(|ix| strata_query::index::fulltext::text_path(&ix.postings));
    for r in ranges {
        let mut cursor: Option<DocPos> = None;
        loop {
            let chunk = c.scan_items(r, cursor.as_ref(), 256)?;
            let done = chunk.len() < 256;
            for (pos, item) in &chunk {
                if matched.contains(pos.as_bytes()) {
                    continue;
                }
                if read.scanned >= reads {
                    return Ok(false);
                }
                read.scanned += 1;
                read.bytes += item.json.len() as u64;
                // Parsed with the ORDER BY's properties: the text, whose absence (or a value
                // that is not a string) leaves the score undefined.
                let doc = parse_doc(p, &a.computed, &item.json)?;
                let scored = text
                    .and_then(|t| value_at(&doc, t))
                    .is_some_and(Value::is_string);
                p.rows_in_order(&doc, cx, &mut |row| {
                    let value = row
                        .value
                        .map_or_else(|| item.json.clone(), |v| to_bytes(&v));
                    if scored {
                        read.rows.push(value);
                    } else if read.rows.len() + unscored.len() < want {
                        unscored.push(value);
                    }
                    Ok(Flow::Continue)
                })?;
                if read.rows.len() >= want {
                    return Ok(true);
                }
            }
            match chunk.last() {
                Some((k, _)) if !done => cursor = Some(k.clone()),
                _ => break,
            }
        }
    }
    read.rows.extend(unscored);
    Ok(true)
}

/// Each word's BM25 weight under statistics of `ranges`, with the stems' postings in
/// `lists` (filled here). `None` while the index is rebuilt.
fn term_weights(
    c: &Container,
    ix: &PostingsAccess,
    ranges: &[EpkRange],
    index: &mut IndexStats,
    lists: &mut Vec<Arc<Postings>>,
) -> Result<Option<Vec<TermWeight>>, ExecError> {
    let Some((documents, words)) = sizes(c, ix, ranges, index)? else {
        return Ok(None);
    };
    let entries = c.entries();
    for stem in &ix.stems {
        match entries.postings_in(&ix.postings, stem, ranges, index)? {
            Some(p) => lists.push(p),
            None => return Ok(None),
        }
    }
    let stats = Statistics {
        documents,
        total_words: words,
        hits: lists.iter().map(|p| p.len() as u64).collect(),
    };
    Ok(Some(
        (0..lists.len())
            .map(|i| TermWeight::new(i, &stats))
            .collect(),
    ))
}

/// The documents of `ranges` and their total words under `ix`'s path. `None` while the index
/// is rebuilt.
fn sizes(
    c: &Container,
    ix: &PostingsAccess,
    ranges: &[EpkRange],
    index: &mut IndexStats,
) -> Result<Option<(u64, u64)>, ExecError> {
    let (mut documents, mut words) = (0u64, 0u64);
    let entries = c.entries();
    for r in ranges {
        // A whole physical partition: its live count, kept in memory; a part of one (a
        // logical partition, a feed range): its logical partitions' sizes.
        documents += match c.count_of_partition(r) {
            Some(n) => n,
            None => c.stored_count(r, index)?,
        };
        let Some(w) = entries.total_words(&ix.lengths, r, index)? else {
            return Ok(None);
        };
        words += w;
    }
    Ok(Some((documents, words)))
}

/// BM25's statistics over `ranges` from `ix`'s index alone: sizes, and each stem's postings
/// counted. `None` while the index is rebuilt.
fn postings_statistics(
    c: &Container,
    ix: &PostingsAccess,
    ranges: &[EpkRange],
    index: &mut IndexStats,
) -> Result<Option<Statistics>, ExecError> {
    let Some((documents, total_words)) = sizes(c, ix, ranges, index)? else {
        return Ok(None);
    };
    let entries = c.entries();
    let mut hits = Vec::with_capacity(ix.stems.len());
    for stem in &ix.stems {
        match entries.postings_in(&ix.postings, stem, ranges, index)? {
            Some(p) => hits.push(p.len() as u64),
            None => return Ok(None),
        }
    }
    Ok(Some(Statistics {
        documents,
        total_words,
        hits,
    }))
}

/// Whether a ranking's rows come from its documents' keys alone, no document read: the
/// query reads nothing of a document but its `id` (which its key holds: `SELECT TOP 10 c.id
/// ... ORDER BY RANK`, a search's usual first step, as tantivy returns document addresses
/// without loading them), nothing computed is added to documents, and no document can have
/// expired (the container has no time to live; else its `_ts` must be read). A posting is
/// live by construction: the held lists are patched by every write as it commits.
fn covered_by_keys(c: &Container, plan: &Plan) -> bool {
    plan.query.rows_read_only_id() && plan.access.computed.is_empty() && c.default_ttl().is_none()
}

/// The rows of the ranked document at `pos`: from its key when the ranking is
/// [`covered_by_keys`], else read (none if it is gone or expired). The bytes read, if it was.
fn ranked_rows(
    c: &Container,
    plan: &Plan,
    cx: &Ctx,
    covered: bool,
    pos: &DocPos,
    rows: &mut Vec<Bytes>,
) -> Result<Option<u64>, ExecError> {
    if covered {
        if let Some(id) = c.id_at(pos) {
            rows_of_id(&plan.query, cx, id, rows)?;
            return Ok(None);
        }
    }
    let Some(item) = c.load_item(pos)? else {
        return Ok(None);
    };
    rows_of(&plan.query, &plan.access, cx, &item.json, rows)?;
    Ok(Some(item.json.len() as u64))
}

/// [`rows_of`] for a document of which the query reads only the `id`: its rows, from the id.
fn rows_of_id(
    p: &PreparedQuery,
    cx: &Ctx,
    id: &str,
    rows: &mut Vec<Bytes>,
) -> Result<(), ExecError> {
    let mut doc = serde_json::Map::new();
    doc.insert("id".to_string(), Value::String(id.to_string()));
    let doc = Value::Object(doc);
    p.rows_in_order(&doc, cx, &mut |row| {
        rows.push(to_bytes(row.value.as_ref().unwrap_or(&doc)));
        Ok(Flow::Continue)
    })?;
    Ok(())
}

/// Evaluates one stored document, ranked already, into the page's rows: its projection, or
/// the document itself for `SELECT *` (no ORDER BY keys: the ranking has placed it).
fn rows_of(
    p: &PreparedQuery,
    a: &Access,
    cx: &Ctx,
    json: &Bytes,
    rows: &mut Vec<Bytes>,
) -> Result<(), ExecError> {
    let doc = parse_row_doc(p, &a.computed, json)?;
    p.rows_in_order(&doc, cx, &mut |row| {
        rows.push(match row.value {
            Some(v) => to_bytes(&v),
            None => json.clone(),
        });
        Ok(Flow::Continue)
    })?;
    Ok(())
}
