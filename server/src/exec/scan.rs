//! Reading a partition for a query: the documents the access path yields (index candidates
//! or every document) in key order, parsed as far as the query reads them, and the key
//! positions continuations carry.
use super::*;
use crate::store::container::indexes::found::Found;

/// Every live document in `range` the access path yields (after `after`), in key order,
/// passed to `f` with its key and bytes: the lookup's candidates when the index serves it,
/// otherwise every document.
pub(super) fn scan(
    c: &Container,
    access: &Access,
    range: &EpkRange,
    after: Option<&DocPos>,
    stats: &mut IndexStats,
    f: impl FnMut(&DocPos, &Bytes) -> Result<Flow, ExecError>,
) -> Result<(), ExecError> {
    scan_with(c, access, None, range, after, stats, f)
}

/// [`scan`], with the lookup's candidates already found for a span of ranges (`found`: one
/// index walk for all the ranges of a page instead of one per range).
pub(super) fn scan_with(
    c: &Container,
    access: &Access,
    found: Option<&Found>,
    range: &EpkRange,
    after: Option<&DocPos>,
    stats: &mut IndexStats,
    mut f: impl FnMut(&DocPos, &Bytes) -> Result<Flow, ExecError>,
) -> Result<(), ExecError> {
    let own;
    let found = match (found, &access.lookup) {
        (Some(all), _) => Some(all),
        (None, Some(probes)) => {
            own = c.entries().lookup(probes, range, stats)?;
            own.as_ref()
        }
        (None, None) => None,
    };
    if let Some(keys) = found {
        // The candidates inside `range`, after `after`.
        let lo = c.position_before(&range.min);
        let mut from = keys.partition_point(|k| k < lo.as_bytes());
        let to = if range.max.as_str() >= "FF" {
            keys.len()
        } else {
            let hi = c.position_before(&range.max);
            keys.partition_point(|k| k < hi.as_bytes())
        };
        if let Some(a) = after {
            from = from.max(keys.partition_point(|k| k <= a.as_bytes()));
        }
        let mut loaded = 0;
        while from < to {
            let n = c.load_batch(loaded).min(to - from);
            let batch = keys.positions(from, from + n);
            loaded += n;
            from += n;
            for (k, item) in batch.iter().zip(c.load_items(&batch)?) {
                let Some(item) = item else {
                    continue;
                };
                if f(k, &item.json)? == Flow::Stop {
                    return Ok(());
                }
            }
        }
        return Ok(());
    }
    let mut cursor: Option<DocPos> = after.cloned();
    loop {
        let chunk = c.scan_items(range, cursor.as_ref(), 256)?;
        let done = chunk.len() < 256;
        for (k, item) in &chunk {
            if f(k, &item.json)? == Flow::Stop {
                return Ok(());
            }
        }
        match chunk.last() {
            Some((k, _)) if !done => cursor = Some(k.clone()),
            _ => return Ok(()),
        }
    }
}

/// Parses a stored document as far as `p` reads it, with the `computed` properties it reads
/// added (then the whole document is parsed: their expressions may read any property).
pub(super) fn parse_doc(
    p: &PreparedQuery,
    computed: &[ComputedProperty],
    bytes: &[u8],
) -> Result<Value, ExecError> {
    parse_with(computed, bytes, |b| p.load_doc(b))
}

/// [`parse_doc`] for [`PreparedQuery::rows_in_order`]: the ORDER BY's properties left out.
pub(super) fn parse_row_doc(
    p: &PreparedQuery,
    computed: &[ComputedProperty],
    bytes: &[u8],
) -> Result<Value, ExecError> {
    parse_with(computed, bytes, |b| p.load_row_doc(b))
}

fn parse_with(
    computed: &[ComputedProperty],
    bytes: &[u8],
    load: impl Fn(&[u8]) -> serde_json::Result<Value>,
) -> Result<Value, ExecError> {
    let corrupt = |e: serde_json::Error| {
        ExecError::Corrupt(format!("a stored document is not valid JSON: {e}"))
    };
    if computed.is_empty() {
        return load(bytes).map_err(corrupt);
    }
    let mut doc: Value = serde_json::from_slice(bytes).map_err(corrupt)?;
    strata_query::sql::computed::augment(&mut doc, computed, &Ctx::new(now_millis()));
    Ok(doc)
}

pub fn to_bytes(v: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(v).unwrap_or_default())
}

/// The document position a continuation token names.
pub(super) fn position_from_hex(c: &Container, hex: &str) -> Result<DocPos, ExecError> {
    c.doc_pos(hex).ok_or_else(|| {
        ExecError::BadToken(String::from(
            "The continuation token is invalid (bad position); run the query again without it.",
        ))
    })
}

/// `ranges` with those that follow one another joined into one: an index whose entries are
/// ordered by term (a stem's postings) or searched per shard (a vector index) is read once
/// for the run, not once per partition.
pub(super) fn coalesced(ranges: &[EpkRange]) -> Vec<EpkRange> {
    let contiguous = ranges.windows(2).all(|w| w[0].max == w[1].min);
    match (ranges.first(), ranges.last()) {
        (Some(a), Some(b)) if contiguous => vec![EpkRange::new(a.min.clone(), b.max.clone())],
        _ => ranges.to_vec(),
    }
}
