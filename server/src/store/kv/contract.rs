//! The [`Kv`] contract every backend keeps, as a check the backends' tests run (the
//! PostgreSQL backend's from `tests/postgres.rs`, against a throwaway server).

use super::{prefix_end, Kv, KvIter, Op, Space};
use std::ops::Bound;

/// Writes, reads, scans (both directions, every kind of bound) and overwrites; panics on the
/// first broken promise.
pub fn check(kv: &dyn Kv) {
    kv.apply(vec![
        Op::Put(Space::Items, b"a1".to_vec(), b"x".to_vec()),
        Op::Put(Space::Items, b"a2".to_vec(), b"y".to_vec()),
        Op::Put(Space::Items, b"b1".to_vec(), b"z".to_vec()),
        Op::Put(Space::Feed, b"a1".to_vec(), b"f".to_vec()),
    ])
    .unwrap();
    kv.sync().unwrap();
    assert_eq!(kv.get(Space::Items, b"a2").unwrap().unwrap(), &b"y"[..]);
    assert!(kv.get(Space::Feed, b"a2").unwrap().is_none());
    let end = prefix_end(b"a").unwrap();
    let keys = |it: KvIter<'_>| -> Vec<Vec<u8>> { it.map(|r| r.unwrap().0).collect() };
    assert_eq!(
        keys(kv.range(
            Space::Items,
            Bound::Included(b"a"),
            Bound::Excluded(&end),
            false
        )),
        vec![b"a1".to_vec(), b"a2".to_vec()]
    );
    assert_eq!(
        keys(kv.range(Space::Items, Bound::Unbounded, Bound::Unbounded, true)),
        vec![b"b1".to_vec(), b"a2".to_vec(), b"a1".to_vec()]
    );
    assert_eq!(
        keys(kv.range(
            Space::Items,
            Bound::Excluded(b"a1"),
            Bound::Included(b"b1"),
            false
        )),
        vec![b"a2".to_vec(), b"b1".to_vec()]
    );
    // Overwrites and deletes in one batch are atomic and the last one wins.
    kv.apply(vec![
        Op::Put(Space::Items, b"a1".to_vec(), b"x2".to_vec()),
        Op::Delete(Space::Items, b"a2".to_vec()),
    ])
    .unwrap();
    assert_eq!(kv.get(Space::Items, b"a1").unwrap().unwrap(), &b"x2"[..]);
    assert!(kv.get(Space::Items, b"a2").unwrap().is_none());
    assert_eq!(
        keys(kv.range(Space::Items, Bound::Unbounded, Bound::Unbounded, false)).len(),
        2
    );
    // Many keys, in unsigned byte order (0x80 after 0x7F, 0x00 inside a key): scans page
    // through them whole, forwards and backwards (backends that fetch in chunks).
    let mut many: Vec<Vec<u8>> = (0..1300u32)
        .map(|i| vec![0xC0, (i >> 8) as u8, i as u8, 0x00])
        .collect();
    many.push(vec![0xC0, 0xFF, 0xFF]);
    kv.apply(
        many.iter()
            .map(|k| Op::Put(Space::Index, k.clone(), Vec::new()))
            .collect(),
    )
    .unwrap();
    many.sort();
    let prefix = [0xC0u8];
    let end = prefix_end(&prefix).unwrap();
    let forward = keys(kv.range(
        Space::Index,
        Bound::Included(&prefix),
        Bound::Excluded(&end),
        false,
    ));
    assert_eq!(forward, many);
    let mut backward = keys(kv.range(Space::Index, Bound::Unbounded, Bound::Unbounded, true));
    backward.reverse();
    assert_eq!(backward, many);
    let from = vec![0xC0, 0x02, 0x00];
    let tail = keys(kv.range(
        Space::Index,
        Bound::Excluded(&from),
        Bound::Unbounded,
        false,
    ));
    assert_eq!(tail.len(), many.iter().filter(|k| **k > from).count());
}
