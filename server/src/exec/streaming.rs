//! Streaming execution: the target ranges scanned in EPK order, rows emitted as they come,
//! the page ending at its row, byte or time budget with a continuation at the last document.
use super::*;

/// Key-ordered execution: scan the target ranges in order, resume after the token position.
/// One streaming page within `budget`; also says whether it stopped because its time ran out
/// (then its continuation resumes the same page).
pub(super) fn run_streaming(
    c: &Container,
    p: &PreparedQuery,
    access: &AccessPath,
    ranges: &[EpkRange],
    budget: Budget,
    token: Option<Continuation>,
) -> Result<(Page, bool), ExecError> {
    let cx = query_ctx(c, p);
    let (consumed, resume) = resume_point(c, token)?;
    let mut index = IndexStats::default();
    // A lookup over several ranges walks the index once for all of them.
    let found = match (&access.lookup, ranges.first(), ranges.last()) {
        (Some(probes), Some(first), Some(last)) if ranges.len() > 1 => {
            let span = EpkRange::new(first.min.clone(), last.max.clone());
            c.entries().lookup(probes, &span, &mut index)?
        }
        _ => None,
    };
    let sliced;
    let ranges = if budget.per_range {
        sliced = c.split_by_partition(ranges);
        &sliced[..]
    } else {
        ranges
    };
    let mut s = Stream::new(p, access, budget, consumed, resume);
    for (i, range) in ranges.iter().enumerate() {
        if s.finished || s.page.continuation.is_some() {
            break;
        }
        let range_end = c.position_before(&range.max);
        let after = match &s.start_key {
            Some(k) if *k >= range_end && range.max.as_str() < "FF" => continue,
            // Scan from just before the token's document so that it is visited again.
            Some(k) => Some(k.just_before()),
            None => None,
        };
        let (found, after) = (found.as_ref(), after.as_ref());
        scan_with(c, access, found, range, after, &mut index, |key, json| {
            s.visit(i, key, json, &cx)
        })?;
        let last = i + 1 == ranges.len();
        if budget.per_range && !last && !s.finished && s.page.continuation.is_none() {
            // The gateway's page ends with the partition: resume at the next one.
            s.page.continuation = Some(s.at(c.position_at_start_of(&range.max).to_hex(), 0));
        }
    }
    if let Some((i, key)) = s.full_at.take() {
        if !any_document_after(c, &ranges[i..], &key)? {
            s.page.continuation = None;
        }
    }
    s.page.index = index;
    Ok((s.page, s.out_of_time))
}

/// The document a streaming page resumes at (its key) and how many of its rows were
/// returned already.
type Resume = Option<(DocPos, u64)>;

/// Where a token resumes a streaming query: the rows consumed so far, and [`Resume`].
fn resume_point(c: &Container, token: Option<Continuation>) -> Result<(u64, Resume), ExecError> {
    match token {
        Some(Continuation {
            consumed,
            pos: Position::Stream { after, skip },
            ..
        }) => Ok((consumed, Some((position_from_hex(c, &after)?, skip)))),
        Some(_) => Err(ExecError::BadToken(String::from(
            "The continuation token does not match this query; run it again without the token.",
        ))),
        None => Ok((0, None)),
    }
}

/// One streaming page in progress: what it returned, where it stands in the result stream,
/// and why it stopped.
struct Stream<'a> {
    p: &'a PreparedQuery,
    access: &'a AccessPath,
    budget: Budget,
    started: Instant,
    /// The token's document and the rows of it already returned.
    resume: Resume,
    /// Resume inclusively at the token's document (then its rows are skipped).
    start_key: Option<DocPos>,
    /// Where OFFSET + LIMIT (or TOP) ends the result stream.
    limit_end: Option<u64>,
    needs_parse: bool,
    /// Rows of the result stream consumed, this page included.
    consumed: u64,
    page: Page,
    bytes_out: usize,
    /// The result stream ended (LIMIT or TOP reached).
    finished: bool,
    out_of_time: bool,
    /// Where a full page stopped on a whole document (then, if no document follows, the
    /// query is over and the page carries no continuation).
    full_at: Option<(usize, DocPos)>,
}

impl<'a> Stream<'a> {
    fn new(
        p: &'a PreparedQuery,
        access: &'a AccessPath,
        budget: Budget,
        consumed: u64,
        resume: Resume,
    ) -> Self {
        Self {
            p,
            access,
            budget,
            started: Instant::now(),
            start_key: resume.as_ref().map(|(k, _)| k.clone()),
            resume,
            limit_end: p.limit.map(|l| p.offset.saturating_add(l)),
            // `SELECT *` with no filter to evaluate: the stored documents as they are.
            needs_parse: !(p.raw_documents && (p.query.where_.is_none() || access.filter_implied)),
            consumed,
            page: Page::empty(),
            bytes_out: 0,
            finished: false,
            out_of_time: false,
            full_at: None,
        }
    }

    /// A continuation at stream position `after`, skipping `skip` rows of that document.
    fn at(&self, after: String, skip: u64) -> Continuation {
        Continuation {
            fp: self.p.fingerprint.clone(),
            consumed: self.consumed,
            pos: Position::Stream { after, skip },
        }
    }

    /// One document of range `i`: its rows emitted, the page stopped (with a continuation)
    /// when full, at its end or out of time.
    fn visit(&mut self, i: usize, key: &DocPos, json: &Bytes, cx: &Ctx) -> Result<Flow, ExecError> {
        if let Some((rk, _)) = &self.resume {
            if key < rk {
                return Ok(Flow::Continue);
            }
        }
        // The document a token resumes at was loaded (and counted) by the page before.
        let resumed_here = self.start_key.as_ref() == Some(key);
        if !resumed_here {
            self.page.scanned += 1;
            self.page.scanned_bytes += json.len() as u64;
        }
        let skip_rows = match &self.resume {
            Some((rk, s)) if key == rk => *s,
            _ => 0,
        };
        let mut rows = (0u64, skip_rows);
        let mut stop = false;
        if self.needs_parse {
            let p = self.p;
            let doc = parse_doc(p, &self.access.computed, json)?;
            p.eval_doc(&doc, cx, &mut |row| {
                Ok(self.emit(row.value, json, &mut rows, &mut stop))
            })?;
        } else {
            self.emit(None, json, &mut rows, &mut stop);
        }
        // Where the next page resumes: after this document's first rows.
        let row_no = rows.0;
        if stop {
            if !self.finished {
                self.page.continuation = Some(self.at(key.to_hex(), row_no));
                if self.p.raw_documents && self.access.lookup.is_none() {
                    self.full_at = Some((i, key.clone()));
                }
            }
            return Ok(Flow::Stop);
        }
        // The document a token resumes at was already counted: stopping there again would
        // make no progress.
        if !resumed_here && self.started.elapsed() > self.budget.time {
            // Return what we have; the next page resumes after this document.
            self.page.continuation = Some(self.at(key.to_hex(), row_no));
            self.out_of_time = true;
            return Ok(Flow::Stop);
        }
        Ok(Flow::Continue)
    }

    /// One row of the document `json` (its value, or the document itself): skipped when a
    /// token already returned it or OFFSET skips it, else added to the page; `rows` counts
    /// the document's rows (and how many to skip), `stop` says the page is done.
    fn emit(
        &mut self,
        value: Option<Value>,
        json: &Bytes,
        rows: &mut (u64, u64),
        stop: &mut bool,
    ) -> Flow {
        rows.0 += 1;
        if rows.0 <= rows.1 {
            return Flow::Continue;
        }
        let idx = self.consumed;
        self.consumed += 1;
        if self.limit_end.is_some_and(|e| idx >= e) {
            self.finished = true;
            *stop = true;
            return Flow::Stop;
        }
        if idx < self.p.offset {
            return Flow::Continue;
        }
        let b = match value {
            Some(v) => to_bytes(&v),
            None => json.clone(),
        };
        self.bytes_out += b.len();
        self.page.docs.push(b);
        if self.limit_end.is_some_and(|e| self.consumed >= e) {
            self.finished = true;
            *stop = true;
            return Flow::Stop;
        }
        if self.page.docs.len() >= self.budget.rows || self.bytes_out >= self.budget.bytes {
            *stop = true;
            return Flow::Stop;
        }
        Flow::Continue
    }
}

/// Whether a live document follows position `after` in the first of `ranges`, or lies in
/// any later one.
pub(super) fn any_document_after(
    c: &Container,
    ranges: &[EpkRange],
    after: &DocPos,
) -> Result<bool, ExecError> {
    for (n, r) in ranges.iter().enumerate() {
        let from = (n == 0).then_some(after);
        if !c.scan_items(r, from, 1)?.is_empty() {
            return Ok(true);
        }
    }
    Ok(false)
}
