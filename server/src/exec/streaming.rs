//! Streaming execution: the target ranges scanned in EPK order, rows emitted as they come,
//! the page ending at its row, byte or time budget with a continuation at the last document.
use super::*;

/// Key-ordered execution: scan the target ranges in order, resume after the token position.
/// One streaming page within `budget`; also says whether it stopped because its time ran out
/// (then its continuation resumes the same page).
pub(super) fn run_streaming(
    c: &Container,
    p: &PreparedQuery,
    access: &Access,
    ranges: &[EpkRange],
    budget: Budget,
    token: Option<Continuation>,
) -> Result<(Page, bool), ExecError> {
    let cx = query_ctx(c, p);
    let (mut consumed, resume) =
        match token {
            Some(Continuation {
                consumed,
                pos: Position::Stream { after, skip },
                ..
            }) => (consumed, Some((key_from_hex(c, &after)?, skip))),
            Some(_) => return Err(ExecError::BadToken(String::from(
                "The continuation token does not match this query; run it again without the token.",
            ))),
            None => (0, None),
        };
    let mut page = Page::empty();
    let mut index = IndexStats::default();
    let mut bytes_out = 0usize;
    let started = Instant::now();
    let limit_end = p.limit.map(|l| p.offset.saturating_add(l));
    let needs_parse = !(p.raw_documents && p.query.where_.is_none());
    let fp = p.fingerprint.clone();
    let mut finished = false;
    let mut out_of_time = false;
    // Resume inclusively at the token's document, skipping the rows already returned from it.
    let start_key = resume.as_ref().map(|(k, _)| k.clone());
    // A lookup over several ranges walks the index once for all of them.
    let found = match (&access.lookup, ranges.first(), ranges.last()) {
        (Some(probes), Some(first), Some(last)) if ranges.len() > 1 => {
            let span = EpkRange::new(first.min.clone(), last.max.clone());
            c.index_candidates(probes, &span, &mut index)?
        }
        _ => None,
    };
    let sliced;
    let ranges = if budget.per_range {
        sliced = per_partition(c, ranges);
        &sliced[..]
    } else {
        ranges
    };
    // Where a full page stopped on a whole document (then, if no document follows, the query
    // is over and the page carries no continuation).
    let mut full_at: Option<(usize, Vec<u8>)> = None;
    for (i, range) in ranges.iter().enumerate() {
        if finished || page.continuation.is_some() {
            break;
        }
        let range_end = keys::epk_bound(c.cid, &range.max);
        let after = match &start_key {
            Some(k) if *k >= range_end && range.max.as_str() < "FF" => continue,
            Some(k) => {
                // Scan from just before the token's document so that it is visited again.
                let mut before = k.clone();
                before.pop();
                Some(before)
            }
            None => None,
        };
        scan_with(
            c,
            access,
            found.as_deref(),
            range,
            after.as_deref(),
            &mut index,
            |key, json| {
                if let Some((rk, _)) = &resume {
                    if key < rk.as_slice() {
                        return Ok(Flow::Continue);
                    }
                }
                // The document a token resumes at was loaded (and counted) by the page before.
                if start_key.as_deref() != Some(key) {
                    page.scanned += 1;
                    page.scanned_bytes += json.len() as u64;
                }
                let skip_rows = match &resume {
                    Some((rk, s)) if key == rk.as_slice() => *s,
                    _ => 0,
                };
                let mut row_no = 0u64;
                let mut stop = false;
                let mut emit = |value: Option<Value>, docs: &mut Vec<Bytes>| -> Flow {
                    row_no += 1;
                    if row_no <= skip_rows {
                        return Flow::Continue;
                    }
                    let idx = consumed;
                    consumed += 1;
                    if limit_end.is_some_and(|e| idx >= e) {
                        finished = true;
                        stop = true;
                        return Flow::Stop;
                    }
                    if idx < p.offset {
                        return Flow::Continue;
                    }
                    let b = match value {
                        Some(v) => to_bytes(&v),
                        None => json.clone(),
                    };
                    bytes_out += b.len();
                    docs.push(b);
                    if limit_end.is_some_and(|e| consumed >= e) {
                        finished = true;
                        stop = true;
                        return Flow::Stop;
                    }
                    if docs.len() >= budget.rows || bytes_out >= budget.bytes {
                        stop = true;
                        return Flow::Stop;
                    }
                    Flow::Continue
                };
                if needs_parse {
                    let doc = parse_doc(p, &access.computed, json)?;
                    p.eval_doc(&doc, &cx, &mut |row| Ok(emit(row.value, &mut page.docs)))?;
                } else {
                    emit(None, &mut page.docs);
                }
                // Where the next page resumes: after this document's first `row_no` rows.
                let resume = || Continuation {
                    fp: fp.clone(),
                    consumed,
                    pos: Position::Stream {
                        after: suffix_hex(key),
                        skip: row_no,
                    },
                };
                if stop {
                    if !finished {
                        page.continuation = Some(resume());
                        if p.raw_documents && access.lookup.is_none() {
                            full_at = Some((i, key.to_vec()));
                        }
                    }
                    return Ok(Flow::Stop);
                }
                // The document a token resumes at was already counted: stopping there again
                // would make no progress.
                let resumed_here = start_key.as_deref() == Some(key);
                if !resumed_here && started.elapsed() > budget.time {
                    // Return what we have; the next page resumes after this document.
                    page.continuation = Some(resume());
                    out_of_time = true;
                    return Ok(Flow::Stop);
                }
                Ok(Flow::Continue)
            },
        )?;
        let last = i + 1 == ranges.len();
        if budget.per_range && !last && !finished && page.continuation.is_none() {
            // The gateway's page ends with the partition: resume at the next one.
            page.continuation = Some(Continuation {
                fp: fp.clone(),
                consumed,
                pos: Position::Stream {
                    after: partition_start_hex(&range.max),
                    skip: 0,
                },
            });
        }
    }
    if let Some((i, key)) = full_at {
        if !any_document_after(c, &ranges[i..], &key)? {
            page.continuation = None;
        }
    }
    page.index = index;
    Ok((page, out_of_time))
}

/// A stream position just before every document of EPK `epk` and after: `epk | 0x00` with
/// an empty id, which no document has.
pub(super) fn partition_start_hex(epk: &str) -> String {
    let mut suffix = epk.as_bytes().to_vec();
    suffix.push(0);
    strata_query::pk::epk::encode_hex(&suffix)
}

/// Whether a live document follows item key `after` in the first of `ranges`, or lies in any
/// later one.
pub(super) fn any_document_after(
    c: &Container,
    ranges: &[EpkRange],
    after: &[u8],
) -> Result<bool, ExecError> {
    for (n, r) in ranges.iter().enumerate() {
        let from = (n == 0).then_some(after);
        if !c.scan_items(r, from, 1)?.is_empty() {
            return Ok(true);
        }
    }
    Ok(false)
}
