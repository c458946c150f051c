//! Complete-result execution: aggregates combined from per-partition partials, DISTINCT,
//! GROUP BY and everything else collected whole under the query's memory budget, then paged.
use super::ordered::{cmp_ranked, scan_rows, Ranked};
use super::*;

/// Aggregates: partial aggregates per partition in parallel, combined; DISTINCT and
/// everything else needing complete results: collected and finished whole. Pages index into
/// the complete result.
pub(super) async fn run_complete(
    c: Arc<Container>,
    p: Arc<PreparedQuery>,
    access: Arc<AccessPath>,
    ranges: Vec<EpkRange>,
    page_size: usize,
    token: Option<Continuation>,
    class: memory::Class,
) -> Result<Page, ExecError> {
    let start =
        match token {
            Some(Continuation {
                pos: Position::Index { next },
                ..
            }) => next as usize,
            Some(_) => return Err(ExecError::BadToken(String::from(
                "The continuation token does not match this query; run it again without the token.",
            ))),
            None => 0,
        };
    let cx = query_ctx(&c, &p);
    let parts = c.split_by_partition(&ranges);
    // A few complete results are built at once, each within its budget (see `memory`).
    let _turn = match p.mode {
        Mode::NoFrom => None,
        _ => memory::heavy_turn(class).await,
    };
    let held = Arc::new(memory::Held::new(c.limits().query_memory_bytes));
    let (mut scanned, mut scanned_bytes) = (0u64, 0u64);
    let mut index = IndexStats::default();
    let counted = match access.count_only && p.mode == Mode::Aggregate {
        true => count_from_index(&c, &access, &parts, &mut index)?,
        false => None,
    };
    let extreme = match (&access.extreme, p.mode) {
        (Some(e), Mode::Aggregate) => extreme_from_index(&c, &p, e, &parts, &mut index)?,
        _ => None,
    };
    let rows: Vec<Value> = match p.mode {
        Mode::NoFrom => p.run_constant(&cx)?,
        Mode::Aggregate if counted.is_some() => vec![Value::from(counted.unwrap_or(0))],
        Mode::Aggregate if extreme.is_some() => {
            let (groups, n, b) = extreme.unwrap_or_default();
            scanned += n;
            scanned_bytes += b;
            p.finish_groups(groups, &cx)?
        }
        Mode::Aggregate => {
            let (groups, (n, b, i)) = partial_aggregates(&c, &p, &access, parts, &held).await?;
            (scanned, scanned_bytes) = (scanned + n, scanned_bytes + b);
            index.add(&i);
            p.finish_groups(groups, &cx)?
        }
        _ => {
            let (values, (n, b, i)) = all_rows(&c, &p, &access, parts, &held).await?;
            (scanned, scanned_bytes) = (scanned + n, scanned_bytes + b);
            index.add(&i);
            p.finish_rows(values)
        }
    };
    let end = (start + page_size).min(rows.len());
    let docs: Vec<Bytes> = rows
        .get(start.min(rows.len())..end)
        .unwrap_or(&[])
        .iter()
        .map(to_bytes)
        .collect();
    let continuation = (end < rows.len()).then(|| Continuation {
        fp: p.fingerprint.clone(),
        consumed: end as u64,
        pos: Position::Index { next: end as u64 },
    });
    Ok(Page {
        docs,
        continuation,
        scanned,
        scanned_bytes,
        index,
    })
}

/// What the partitions' scans read, summed: documents, their bytes, index entries.
type Scanned = (u64, u64, IndexStats);

/// Hands each partition's part to `take` and sums what the partitions read.
fn summed<T>(parts: Vec<(T, Scanned)>, mut take: impl FnMut(T)) -> Scanned {
    let (mut docs, mut bytes, mut index) = (0, 0, IndexStats::default());
    for (part, (n, b, i)) in parts {
        take(part);
        docs += n;
        bytes += b;
        index.add(&i);
    }
    (docs, bytes, index)
}

/// An aggregate's partial results, one per partition in parallel, merged: groups as they
/// appear are charged to the query's memory budget.
async fn partial_aggregates(
    c: &Arc<Container>,
    p: &Arc<PreparedQuery>,
    access: &Arc<AccessPath>,
    parts: Vec<EpkRange>,
    held: &Arc<memory::Held>,
) -> Result<(Groups, Scanned), ExecError> {
    let (c2, p2, a2) = (Arc::clone(c), Arc::clone(p), Arc::clone(access));
    let held = Arc::clone(held);
    let results = parallel(
        parts,
        Arc::new(
            move |range: EpkRange| -> Result<(Groups, Scanned), ExecError> {
                let cx = query_ctx(&c2, &p2);
                let mut g = Groups::default();
                let (mut n, mut b) = (0u64, 0u64);
                let mut index = IndexStats::default();
                scan(&c2, &a2, &range, None, &mut index, |_, json| {
                    n += 1;
                    b += json.len() as u64;
                    let before = g.map.len();
                    p2.accumulate_doc(&parse_doc(&p2, &a2.computed, json)?, &cx, &mut g)?;
                    // A new group holds its key and its accumulators.
                    let grew = g.map.len() - before;
                    if grew > 0 {
                        held.charge(grew * 2 * memory::PER_ENTRY)?;
                    }
                    Ok(Flow::Continue)
                })?;
                Ok((g, (n, b, index)))
            },
        ),
    )
    .await?;
    let mut all = Groups::default();
    let scanned = summed(results, |g| all.merge(g));
    Ok((all, scanned))
}

/// Every row of the query from every partition in parallel, in ORDER BY order (document
/// order without one), each charged to the query's memory budget; DISTINCT keeps one of rows
/// alike in value and order keys as they come (which one is kept cannot matter), so a small
/// answer over many rows stays small.
async fn all_rows(
    c: &Arc<Container>,
    p: &Arc<PreparedQuery>,
    access: &Arc<AccessPath>,
    parts: Vec<EpkRange>,
    held: &Arc<memory::Held>,
) -> Result<(Vec<Value>, Scanned), ExecError> {
    let (c2, p2, a2) = (Arc::clone(c), Arc::clone(p), Arc::clone(access));
    let distinct = p.query.select.distinct;
    let held = Arc::clone(held);
    let results = parallel(
        parts,
        Arc::new(
            move |range: EpkRange| -> Result<(Vec<Ranked>, Scanned), ExecError> {
                let mut out = Vec::new();
                let mut index = IndexStats::default();
                let mut seen = std::collections::HashSet::new();
                let mut over = None;
                let (n, b) = scan_rows(&c2, &p2, &a2, &range, &mut index, |r| {
                    if distinct {
                        let mut k = r.value.to_vec();
                        for key in &r.keys {
                            k.push(0);
                            k.extend(
                                key.as_ref()
                                    .map(|v| v.to_string())
                                    .unwrap_or_default()
                                    .bytes(),
                            );
                        }
                        let size = k.len();
                        if !seen.insert(k) {
                            return Flow::Continue;
                        }
                        if let Err(e) = held.charge(size) {
                            over = Some(e);
                            return Flow::Stop;
                        }
                    }
                    if let Err(e) = held.charge(r.held_bytes()) {
                        over = Some(e);
                        return Flow::Stop;
                    }
                    out.push(r);
                    Flow::Continue
                })?;
                if let Some(e) = over {
                    return Err(e);
                }
                Ok((out, (n, b, index)))
            },
        ),
    )
    .await?;
    let mut all = Vec::new();
    let scanned = summed(results, |r| all.extend(r));
    let desc = p.order_directions();
    all.sort_by(|a, b| cmp_ranked(a, b, &desc));
    super::ordered::fuse(p, &mut all);
    let values = all
        .into_iter()
        .map(|r| serde_json::from_slice(&r.value).map_err(|e| ExecError::Corrupt(e.to_string())))
        .collect::<Result<Vec<Value>, ExecError>>()?;
    Ok((values, scanned))
}

/// `SELECT VALUE MIN(path)` / `MAX(path)` from the index: per partition, the documents of
/// the first (last) value that are still live, accumulated as a scan would. `None` when the
/// index cannot answer (rebuilding) or an array or object value makes the aggregate
/// undefined — then the documents are read.
pub(super) fn extreme_from_index(
    c: &Container,
    p: &PreparedQuery,
    e: &OrderPath,
    parts: &[EpkRange],
    stats: &mut IndexStats,
) -> Result<Option<(Groups, u64, u64)>, ExecError> {
    use strata_query::index::Span;
    let cx = Ctx::new(now_millis());
    let nodes = Span {
        lo: vec![term::ARRAY],
        hi: vec![term::OBJECT + 1],
    };
    let scalars = Span {
        lo: vec![term::NULL],
        hi: vec![term::ARRAY],
    };
    let (mut groups, mut scanned, mut bytes) = (Groups::default(), 0u64, 0u64);
    for range in parts {
        let mut any_node = false;
        let walked = c
            .entries()
            .walk(&e.path, &nodes, range, false, stats, &mut |_, _| {
                any_node = true;
                false
            })?;
        if walked.is_none() || any_node {
            return Ok(None);
        }
        // The first value's documents; past expired ones to the next value if need be.
        let mut group: Option<Vec<u8>> = None;
        let mut live = false;
        let mut failed: Option<ExecError> = None;
        c.entries().walk(
            &e.path,
            &scalars,
            range,
            e.descending,
            stats,
            &mut |t, key| {
                if group.as_deref().is_some_and(|g| g != t) {
                    if live {
                        return false;
                    }
                    group = None;
                }
                group.get_or_insert_with(|| t.to_vec());
                let outcome = c.load_item(&key).map_err(ExecError::from).and_then(|item| {
                    let Some(item) = item else { return Ok(()) };
                    live = true;
                    scanned += 1;
                    bytes += item.json.len() as u64;
                    let doc = parse_doc(p, &[], &item.json)?;
                    p.accumulate_doc(&doc, &cx, &mut groups)?;
                    Ok(())
                });
                match outcome {
                    Ok(()) => true,
                    Err(err) => {
                        failed = Some(err);
                        false
                    }
                }
            },
        )?;
        if let Some(err) = failed {
            return Err(err);
        }
    }
    Ok(Some((groups, scanned, bytes)))
}

/// `SELECT VALUE COUNT(1)` from index entries (an exact lookup) or logical partition sizes
/// (no filter), without reading a document; `None` when neither can answer (TTL on: expired
/// items not yet purged are still counted there).
pub(super) fn count_from_index(
    c: &Container,
    access: &Access,
    parts: &[EpkRange],
    stats: &mut IndexStats,
) -> Result<Option<u64>, ExecError> {
    if c.default_ttl().is_some() {
        return Ok(None);
    }
    let mut total = 0u64;
    for range in parts {
        let n = match access.lookup.as_deref() {
            None => Some(c.stored_count(range, stats)?),
            Some([probe]) => c.entries().count(probe, range, stats)?,
            Some(_) => None,
        };
        match n {
            Some(n) => total += n,
            None => return Ok(None),
        }
    }
    Ok(Some(total))
}
