//! ORDER BY execution: each partition's best rows after the token position (in index order
//! when the index serves the first sort item), merged k-way across partitions.
use super::*;

/// A candidate row of an ORDER BY query.
pub(super) struct Ranked {
    pub(super) keys: Vec<Option<Value>>,
    pub(super) doc: DocPos,
    pub(super) ord: u64,
    pub(super) value: Bytes,
}

pub(super) fn cmp_ranked(a: &Ranked, b: &Ranked, desc: &[bool]) -> Ordering {
    cmp_keys(&a.keys, &b.keys, desc)
        .then_with(|| a.doc.cmp(&b.doc))
        .then(a.ord.cmp(&b.ord))
}

/// Evaluates every document of `range` and hands each row to `f` with its sort keys and
/// position (document key, row ordinal). Returns the documents and bytes scanned.
pub(super) fn scan_rows(
    c: &Container,
    p: &PreparedQuery,
    access: &Access,
    range: &EpkRange,
    stats: &mut IndexStats,
    mut f: impl FnMut(Ranked) -> Flow,
) -> Result<(u64, u64), ExecError> {
    let cx = query_ctx(c, p);
    let (mut scanned, mut bytes) = (0u64, 0u64);
    scan(c, access, range, None, stats, |key, json| {
        scanned += 1;
        bytes += json.len() as u64;
        let doc = parse_doc(p, &access.computed, json)?;
        let mut ord = 0u64;
        let mut flow = Flow::Continue;
        p.eval_doc(&doc, &cx, &mut |row| {
            ord += 1;
            flow = f(Ranked {
                keys: row.keys,
                doc: key.clone(),
                ord,
                value: match row.value {
                    Some(v) => to_bytes(&v),
                    None => json.clone(),
                },
            });
            Ok(flow)
        })?;
        Ok(flow)
    })?;
    Ok((scanned, bytes))
}

impl Ranked {
    /// About what holding this row costs.
    pub(super) fn held_bytes(&self) -> usize {
        let keys: usize = self
            .keys
            .iter()
            .map(|k| {
                k.as_ref()
                    .map_or(0, |v| sql::limits::size_within(v, usize::MAX).unwrap_or(0))
            })
            .sum();
        self.value.len() + self.doc.held_bytes() + keys + memory::PER_ENTRY
    }
}

/// One partition's part of an ORDER BY page.
#[derive(Default)]
pub(super) struct PartBest {
    pub(super) rows: Vec<Ranked>,
    pub(super) scanned: u64,
    pub(super) bytes: u64,
    /// Rows after the token position this partition has (at least; more than `rows` when it
    /// stopped early).
    pub(super) candidates: u64,
    pub(super) index: IndexStats,
}

/// The best `want` rows of `range` after `last`: read in index order when the index serves
/// the first ORDER BY item (stopping once `want` rows and their ties are in), otherwise from
/// every candidate document. (A vector index serves the whole query at once:
/// [`best_nearest`](super::nearest::best_nearest).)
#[allow(clippy::too_many_arguments)]
pub(super) fn partition_best(
    c: &Container,
    p: &PreparedQuery,
    access: &AccessPath,
    range: &EpkRange,
    last: Option<&Ranked>,
    want: usize,
    desc: &[bool],
    held: &memory::Held,
) -> Result<PartBest, ExecError> {
    let mut index = IndexStats::default();
    if let (Some(order), None) = (&access.order, &access.lookup) {
        let found = best_in_index_order(c, p, order, range, (last, want), desc, &mut index, held)?;
        if let Some(part) = found {
            return Ok(part);
        }
    }
    let mut best: Vec<Ranked> = Vec::new();
    let mut candidates = 0u64;
    let mut over = None;
    // Rows beyond `want` are dropped from time to time: every 2 × want rows, or sooner when
    // they are large (a quarter of the budget), so a small TOP over large documents fits.
    let mut kept = 0usize;
    let (scanned, bytes) = scan_rows(c, p, access, range, &mut index, |r| {
        if let Some(l) = last {
            if cmp_ranked(&r, l, desc) != Ordering::Greater {
                return Flow::Continue;
            }
        }
        candidates += 1;
        let size = r.held_bytes();
        if let Err(e) = held.charge(size) {
            over = Some(e);
            return Flow::Stop;
        }
        kept += size;
        best.push(r);
        if best.len() >= 2 * want.max(64) || (kept > held.limit() / 4 && best.len() > want) {
            keep_best(&mut best, want, desc, held);
            kept = best.iter().map(Ranked::held_bytes).sum();
        }
        Flow::Continue
    })?;
    if let Some(e) = over {
        return Err(e);
    }
    keep_best(&mut best, want, desc, held);
    Ok(PartBest {
        rows: best,
        scanned,
        bytes,
        candidates,
        index,
    })
}

/// Sorts `best` and keeps its first `want` rows, returning the others' bytes to `held`.
pub(super) fn keep_best(best: &mut Vec<Ranked>, want: usize, desc: &[bool], held: &memory::Held) {
    best.sort_by(|a, b| cmp_ranked(a, b, desc));
    let dropped: usize = best.iter().skip(want).map(Ranked::held_bytes).sum();
    best.truncate(want);
    held.release(dropped);
}

/// [`partition_best`] from the index: documents in the order of the first ORDER BY path,
/// from the token's value on; once `want` rows are in, the rest of that value's documents
/// (ties, which later keys and positions order) and no more. `None` when the index cannot
/// give the order (see [`EntryReader::in_order`](crate::store::container::indexes::entries::EntryReader::in_order)) or the token sits among documents
/// without the path.
#[allow(clippy::too_many_arguments)]
pub(super) fn best_in_index_order(
    c: &Container,
    p: &PreparedQuery,
    order: &OrderPath,
    range: &EpkRange,
    (last, want): (Option<&Ranked>, usize),
    desc: &[bool],
    index: &mut IndexStats,
    held: &memory::Held,
) -> Result<Option<PartBest>, ExecError> {
    let from = match last.map(|l| l.keys.first()) {
        Some(Some(Some(v))) => Some(term::encode(v)),
        Some(_) => return Ok(None),
        None => None,
    };
    let cx = query_ctx(c, p);
    let mut best: Vec<Ranked> = Vec::new();
    let (mut scanned, mut bytes) = (0u64, 0u64);
    let mut group: Option<Vec<u8>> = None;
    let mut failed: Option<ExecError> = None;
    let finished = c
        .entries()
        .in_order(order, range, from.as_deref(), index, &mut |t, key| {
            if group.as_deref().is_some_and(|g| g != t) {
                return false;
            }
            let item = match c.load_item(&key) {
                Ok(Some(item)) => item,
                Ok(None) => return true,
                Err(e) => {
                    failed = Some(e.into());
                    return false;
                }
            };
            scanned += 1;
            bytes += item.json.len() as u64;
            // Index order is never chosen for queries reading computed properties.
            if let Err(e) = rows_after(
                p,
                &cx,
                (&key, &item.json),
                None,
                last,
                desc,
                (&mut best, held),
            ) {
                failed = Some(e);
                return false;
            }
            if best.len() >= want && group.is_none() {
                group = Some(t.to_vec());
            }
            true
        })?;
    if let Some(e) = failed {
        return Err(e);
    }
    let Some(finished) = finished else {
        return Ok(None);
    };
    // Descending, documents without the path sort last: an exhausted index leaves them out.
    // That matters also when the walk found exactly a page: the page then reads as this
    // partition's last, and the documents without the path would never be paged to.
    if finished
        && order.descending
        && best.len() <= want
        && !c.entries().all_defined(&order.path, range, index)?
    {
        return Ok(None);
    }
    let candidates = best.len() as u64 + u64::from(!finished);
    keep_best(&mut best, want, desc, held);
    Ok(Some(PartBest {
        rows: best,
        scanned,
        bytes,
        candidates,
        index: *index,
    }))
}

/// ORDER BY: each partition keeps its best rows after the token position; merge and page.
pub(super) async fn run_ordered(
    c: Arc<Container>,
    p: Arc<PreparedQuery>,
    access: Arc<AccessPath>,
    ranges: Vec<EpkRange>,
    page_size: usize,
    token: Option<Continuation>,
) -> Result<Page, ExecError> {
    let (consumed, last) =
        match token {
            Some(Continuation {
                consumed,
                pos: Position::Ordered { keys, after, ord },
                ..
            }) => {
                let doc = position_from_hex(&c, &after)?;
                (
                    consumed,
                    Some(Ranked {
                        keys: keys.into_iter().map(KeyValue::into_opt).collect(),
                        doc,
                        ord,
                        value: Bytes::new(),
                    }),
                )
            }
            Some(_) => return Err(ExecError::BadToken(String::from(
                "The continuation token does not match this query; run it again without the token.",
            ))),
            None => (0, None),
        };
    let skip = p.offset.saturating_sub(consumed) as usize;
    let mut want = skip + page_size;
    if let Some(l) = p.limit {
        let remaining = (p.offset + l).saturating_sub(consumed.max(p.offset)) as usize;
        want = want.min(skip + remaining);
    }
    let desc = p.order_directions();
    let last = Arc::new(last);
    let parts = c.split_by_partition(&ranges);
    // The rows each partition keeps are charged to the query's budget: TOP k or OFFSET n
    // with a large k or n keeps that many rows per partition until the merge.
    let held = Arc::new(memory::Held::new(c.limits().query_memory_bytes));
    let (c2, p2, desc2, last2) = (
        Arc::clone(&c),
        Arc::clone(&p),
        desc.clone(),
        Arc::clone(&last),
    );
    if let Some(vector) = access.vector.clone() {
        let (c2, p2, desc2, last2, held2) = (
            Arc::clone(&c),
            Arc::clone(&p),
            desc.clone(),
            Arc::clone(&last),
            Arc::clone(&held),
        );
        let mut nearest = Nearest::Slow;
        if last.is_none() && nearest::quick(&c, &p, &vector, want) {
            nearest = best_nearest(&c, &p, &vector, &parts, None, (want, 1), &desc, &held)?;
        }
        if let Nearest::Slow = nearest {
            let parts2 = parts.clone();
            nearest = tokio::task::spawn_blocking(move || {
                let last = last2.as_ref().as_ref();
                let (want, rounds) = (want, usize::MAX);
                best_nearest(
                    &c2,
                    &p2,
                    &vector,
                    &parts2,
                    last,
                    (want, rounds),
                    &desc2,
                    &held2,
                )
            })
            .await
            .map_err(|e| ExecError::Worker(e.to_string()))??;
        }
        if let Nearest::Found(Some(found)) = nearest {
            return Ok(page_of(&p, consumed, skip, want, &desc, vec![found]));
        }
    }
    let results = parallel(
        parts,
        Arc::new(move |range: EpkRange| {
            partition_best(
                &c2,
                &p2,
                &access,
                &range,
                last2.as_ref().as_ref(),
                want,
                &desc2,
                &held,
            )
        }),
    )
    .await?;
    Ok(page_of(&p, consumed, skip, want, &desc, results))
}

/// The page the partitions' best rows make: merged, cut at `want`, the first `skip` left out,
/// and a continuation after its last row when there are more.
fn page_of(
    p: &PreparedQuery,
    consumed: u64,
    skip: usize,
    want: usize,
    desc: &[bool],
    results: Vec<PartBest>,
) -> Page {
    let mut all = Vec::new();
    let (mut scanned, mut scanned_bytes, mut candidates) = (0, 0, 0);
    let mut index = IndexStats::default();
    for part in results {
        all.extend(part.rows);
        scanned += part.scanned;
        scanned_bytes += part.bytes;
        candidates += part.candidates;
        index.add(&part.index);
    }
    all.sort_by(|a, b| cmp_ranked(a, b, desc));
    all.truncate(want);
    let taken = all.len() as u64;
    let new_consumed = consumed + taken;
    let limit_reached = p.limit.is_some_and(|l| new_consumed >= p.offset + l);
    let more = candidates > taken && !limit_reached;
    let continuation = match all.last() {
        Some(r) if more => Some(Continuation {
            fp: p.fingerprint.clone(),
            consumed: new_consumed,
            pos: Position::Ordered {
                keys: r.keys.iter().map(KeyValue::from_opt).collect(),
                after: r.doc.to_hex(),
                ord: r.ord,
            },
        }),
        _ => None,
    };
    let docs = all.into_iter().skip(skip).map(|r| r.value).collect();
    Page {
        docs,
        continuation,
        scanned,
        scanned_bytes,
        index,
    }
}

/// Evaluates the stored document `json` at `pos` and adds its rows that sort after `last`
/// to `best`. With `known` sort keys (an index's, equal to the evaluator's), the document is
/// read without the properties only the ORDER BY reads, and its rows take those keys.
#[allow(clippy::too_many_arguments)]
pub(super) fn rows_after(
    p: &PreparedQuery,
    cx: &Ctx,
    (pos, json): (&DocPos, &Bytes),
    known: Option<&[Option<Value>]>,
    last: Option<&Ranked>,
    desc: &[bool],
    (best, held): (&mut Vec<Ranked>, &memory::Held),
) -> Result<(), ExecError> {
    let doc = match known {
        Some(_) => parse_row_doc(p, &[], json)?,
        None => parse_doc(p, &[], json)?,
    };
    let mut ord = 0u64;
    let mut over = None;
    let mut sink = |row: sql::Row| {
        ord += 1;
        let r = Ranked {
            keys: known.map_or(row.keys, <[_]>::to_vec),
            doc: pos.clone(),
            ord,
            value: match row.value {
                Some(v) => to_bytes(&v),
                None => json.clone(),
            },
        };
        if last.is_none_or(|l| cmp_ranked(&r, l, desc) == Ordering::Greater) {
            if let Err(e) = held.charge(r.held_bytes()) {
                over = Some(e);
                return Ok(Flow::Stop);
            }
            best.push(r);
        }
        Ok(Flow::Continue)
    };
    match known {
        Some(_) => p.rows_in_order(&doc, cx, &mut sink)?,
        None => p.eval_doc(&doc, cx, &mut sink)?,
    };
    over.map_or(Ok(()), Err)
}

/// Orders `rows` of a query ranked by `RRF` (their keys are the components' scores): in
/// document order first, which breaks ties as the SDKs break them by `_rid`, then fused.
pub(super) fn fuse(p: &PreparedQuery, rows: &mut Vec<Ranked>) {
    let Some(rank) = sql::hybrid::rank_of(&p.query).filter(|r| r.fused) else {
        return;
    };
    rows.sort_by(|a, b| a.doc.cmp(&b.doc).then(a.ord.cmp(&b.ord)));
    let keys: Vec<Vec<Option<Value>>> = rows.iter().map(|r| r.keys.clone()).collect();
    let order = sql::hybrid::fuse(&keys, &rank.descending(), &rank.weights);
    let mut slots: Vec<Option<Ranked>> = rows.drain(..).map(Some).collect();
    rows.extend(order.into_iter().filter_map(|i| slots[i].take()));
}
