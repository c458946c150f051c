//! A document's full-text lengths, kept in its directory entry ([`Space::Directory`]), and the
//! word totals BM25 averages, counted from them.
//!
//! Every document already has a directory entry (its item key, written when it is created);
//! its value holds, per full-text path with text, the document's length in words, under the
//! index generation that wrote it. An index entry of its own per length (under
//! `/\0fulltext-length/<path>`, as strata kept them before) cost a key in the write's batch —
//! an ordered-index insert, its flush and compactions: a load without it measured 0.092 ms of
//! server CPU per upsert against 0.096–0.098 in three loads with it (`strata-bench --suite
//! fulltext`, 1M documents; single loads of either spread about ±10%). A create writes the
//! directory entry anyway, and an update rewrites it only when a length changes, where the
//! entry took a delete and a put. A count walks the directory, ordered by EPK as the items are, so a
//! range's total is one range scan.
//!
//! The value: the generation (u16, big-endian), then per path its lengths path id
//! (u64, big-endian) and the length (varint). Empty: no lengths (a container without a
//! full-text index, or a document with no text at any path).

use crate::store::container::lookup::IndexStats;
use crate::store::container::Container;
use crate::store::engine::{prefix_end, Op, Space};
use crate::store::index::{path_prefix, split_entry};
use crate::store::keys;
use crate::store::StoreError;
use std::time::Instant;
use strata_query::pk::EpkRange;

/// The directory value of a document with `lengths` ((lengths path id, words), any order)
/// under generation `gen`.
pub fn encode(gen: u16, lengths: &[(u64, u64)]) -> Vec<u8> {
    if lengths.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(2 + lengths.len() * 11);
    out.extend_from_slice(&gen.to_be_bytes());
    for (path, words) in lengths {
        out.extend_from_slice(&path.to_be_bytes());
        let mut v = *words;
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    out
}

/// The (generation, lengths) a directory value holds; `None` when it is unreadable.
pub fn decode(value: &[u8]) -> Option<(u16, Vec<(u64, u64)>)> {
    if value.is_empty() {
        return Some((0, Vec::new()));
    }
    let gen = u16::from_be_bytes(value.get(..2)?.try_into().ok()?);
    let mut out = Vec::new();
    let mut at = 2;
    while at < value.len() {
        let path = u64::from_be_bytes(value.get(at..at + 8)?.try_into().ok()?);
        at += 8;
        let mut words = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *value.get(at)?;
            at += 1;
            words |= u64::from(b & 0x7F) << shift;
            if b < 0x80 {
                break;
            }
        }
        out.push((path, words));
    }
    Some((gen, out))
}

/// The words under lengths path `path` a directory value holds for generation `gen`.
fn words_of(value: &[u8], gen: u16, path: u64) -> Result<u64, StoreError> {
    let (g, lengths) = decode(value).ok_or_else(|| {
        StoreError::Corrupt("an item's directory entry has unreadable full-text lengths".into())
    })?;
    Ok(match g == gen {
        true => lengths.iter().find(|l| l.0 == path).map_or(0, |l| l.1),
        false => 0,
    })
}

/// Directory entries a count or a move reads at once.
const CHUNK: usize = 4096;

impl Container {
    /// The total words under lengths path `path` (generation `gen`) of the documents in
    /// `range`: one walk of the range's directory entries.
    pub(in crate::store) fn count_words(
        &self,
        gen: u16,
        path: u64,
        range: &EpkRange,
        stats: &mut IndexStats,
    ) -> Result<u64, StoreError> {
        let started = Instant::now();
        let (start, end) = self.key_bounds(range);
        let mut words = 0u64;
        self.engine
            .scan_each(Space::Directory, (&start, &end), CHUNK, &mut |_, v| {
                stats.entries += 1;
                words += words_of(v, gen, path)?;
                Ok::<_, StoreError>(())
            })?;
        stats.lookup_time += started.elapsed();
        Ok(words)
    }

    /// Moves the lengths a strata before this layout kept as index entries of their own
    /// (under `lengths_id`, generation `gen`) into the documents' directory entries, and
    /// deletes the entries: once per path, at the first start that finds them.
    pub(super) fn move_length_entries(&self, gen: u16, lengths_id: u64) -> Result<(), StoreError> {
        let prefix = path_prefix(self.cid, gen, &lengths_id.to_be_bytes());
        let Some(end) = prefix_end(&prefix) else {
            return Ok(());
        };
        let mut moved = 0u64;
        let mut ops = Vec::new();
        // Not awaited: the entries' deletes below come later in the same log, so a crash
        // that keeps them keeps these too, and one that loses them moves again.
        let mut flush = |ops: &mut Vec<Op>| -> Result<(), StoreError> {
            moved += ops.len() as u64;
            let _ = self.engine.write(std::mem::take(ops))?;
            Ok(())
        };
        self.engine
            .scan_each(Space::Index, (&prefix, &end), CHUNK, &mut |k, _| {
                let unreadable =
                    || StoreError::Corrupt("a full-text length entry is unreadable".into());
                let (term, doc) = split_entry(&k[prefix.len()..]).ok_or_else(unreadable)?;
                let words =
                    strata_query::index::fulltext::parse_length(term).ok_or_else(unreadable)?;
                let mut key = keys::container_prefix(self.cid);
                key.extend_from_slice(doc);
                // A document deleted since has no directory entry, and gets none.
                let Some(value) = self.engine.get(Space::Directory, &key)? else {
                    return Ok(());
                };
                let (g, mut lengths) = decode(&value).ok_or_else(unreadable)?;
                if g != gen {
                    lengths.clear();
                }
                lengths.retain(|l| l.0 != lengths_id);
                lengths.push((lengths_id, words));
                ops.push(Op::Put(Space::Directory, key, encode(gen, &lengths)));
                match ops.len() >= CHUNK {
                    true => flush(&mut ops),
                    false => Ok(()),
                }
            })?;
        flush(&mut ops)?;
        self.engine.delete_range(Space::Index, &prefix, &end)?;
        if moved > 0 {
            tracing::info!(container = %self.id, documents = moved, "moved full-text lengths into the item directory (once)");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_read_back_per_path_and_generation() {
        let v = encode(7, &[(1, 3), (u64::MAX, 300), (42, 0)]);
        assert_eq!(
            decode(&v),
            Some((7, vec![(1, 3), (u64::MAX, 300), (42, 0)]))
        );
        assert_eq!(words_of(&v, 7, u64::MAX).ok(), Some(300));
        assert_eq!(words_of(&v, 7, 5).ok(), Some(0));
        // Another generation's lengths count for nothing.
        assert_eq!(words_of(&v, 8, 1).ok(), Some(0));
        assert_eq!(encode(7, &[]), Vec::<u8>::new());
        assert_eq!(words_of(&[], 7, 1).ok(), Some(0));
        // A value cut short is an error, not a zero.
        assert!(words_of(&v[..v.len() - 1], 7, 1).is_err());
        assert!(decode(&v[..5]).is_none());
    }
}
