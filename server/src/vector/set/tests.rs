//! The set's tests: shards, ranges, updates, and rows in a file.

use super::*;

fn key(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

/// Writing a key's vector again unchanged leaves no tombstone and nothing to relink; a
/// changed vector replaces it.
#[test]
fn an_unchanged_vector_is_not_replaced() {
    let mut set = VectorSet::new(Params {
        kind: IndexKind::DiskAnn,
        dims: 3,
        metric: Distance::Cosine,
        list: 10,
        degree: 4,
    });
    let shard: &[u8] = b"";
    set.set(&key(1), Some(&[1.0, 2.0, 3.0]), shard, Origin::default());
    set.link_all();
    set.set(&key(1), Some(&[1.0, 2.0, 3.0]), shard, Origin::default());
    assert_eq!((set.len(), set.dead(), set.unlinked()), (1, 0, 0));
    set.set(&key(1), Some(&[3.0, 2.0, 1.0]), shard, Origin::default());
    assert_eq!((set.len(), set.dead(), set.unlinked()), (1, 1, 1));
    // The same vector under another shard key value moves to that value's shard.
    set.set(&key(1), Some(&[3.0, 2.0, 1.0]), b"other", Origin::default());
    assert_eq!((set.len(), set.dead()), (1, 2));
    set.set(&key(1), None, shard, Origin::default());
    assert_eq!((set.len(), set.dead()), (0, 3));
}

/// A set whose rows are in a file answers every search as the same set in memory does
/// (the same graph, the same rows), holds less memory, and reads back from its snapshot
/// into a file again.
#[test]
fn rows_in_a_file_answer_as_rows_in_memory() {
    let dims = 16;
    let mut rnd = uniform(7);
    let rows: Vec<Vec<f32>> = (0..4000)
        .map(|_| (0..dims).map(|_| rnd()).collect())
        .collect();
    let params = Params {
        kind: IndexKind::DiskAnn,
        dims,
        metric: Distance::Cosine,
        list: 40,
        degree: 16,
    };
    let dir = std::env::temp_dir().join(format!("strata-set-rows-{}", std::process::id()));
    // No memory for rows: every linked row goes to the file.
    let place = Place {
        dir: dir.clone(),
        budget: super::super::rows::Budget::new(0),
    };
    let mut held = VectorSet::new(params);
    let mut filed = VectorSet::with_rows_in(params, Some(&place));
    for set in [&mut held, &mut filed] {
        for (i, r) in rows.iter().enumerate() {
            set.set(&key(i as u32), Some(r), b"", Origin::default());
        }
        // A replaced vector and a deleted one.
        set.set(&key(3), Some(&rows[9]), b"", Origin::default());
        set.set(&key(4), None, b"", Origin::default());
        set.link_all();
    }
    assert!(filed.rows.spilled());
    assert!(filed.held_bytes() + rows.len() * dims * 4 / 2 < held.held_bytes());
    let mut w = crate::vector::codec::Writer::new(Vec::new());
    filed.write(&mut w).unwrap();
    let buf = w.finish().unwrap();
    let len = buf.len() as u64;
    let mut r = crate::vector::codec::Reader::new(&buf[..], len);
    let read = VectorSet::read(&mut r, params, Some(&place)).unwrap();
    assert!(read.rows.spilled());
    let opts = SearchOpts {
        brute_force: false,
        rerank: 5,
        list: 40,
    };
    let all = (&key(0)[..], &key(u32::MAX)[..]);
    let q64: Vec<f64> = rows[100].iter().map(|x| f64::from(*x)).collect();
    let brute = SearchOpts {
        brute_force: true,
        ..opts
    };
    for (q, opts) in [&rows[0], &rows[100], &rows[3999], &rows[9]]
        .into_iter()
        .flat_map(|q| [(q, opts), (q, brute)])
    {
        let answer = |set: &VectorSet| {
            let found = set.search(q, Some(&q64), 10, all, None, opts);
            let hits: Vec<_> = found
                .keys
                .iter()
                .map(|h| (h.key.clone(), h.distance, h.score))
                .collect();
            hits
        };
        let want = answer(&held);
        assert_eq!(want.len(), 10);
        assert_eq!(answer(&filed), want);
        assert_eq!(answer(&read), want);
    }
    drop((filed, read));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A diskANN set over two shard key values answers a search over every shard or one,
/// for the whole key space or part of it (some physical partitions), with keys of that
/// shard and range only, near the exact answer; an updated vector moves and a removed one
/// is gone.
#[test]
fn shards_answer_for_their_values_and_ranges() {
    let dims = 8;
    let mut rnd = uniform(1);
    let rows: Vec<Vec<f32>> = (0..3000)
        .map(|_| (0..dims).map(|_| rnd()).collect())
        .collect();
    let mut set = VectorSet::new(Params {
        kind: IndexKind::DiskAnn,
        dims,
        metric: Distance::Euclidean,
        list: 50,
        degree: 16,
    });
    let value = |i: u32| {
        if i.is_multiple_of(2) {
            b"even".to_vec()
        } else {
            b"odd".to_vec()
        }
    };
    for (i, r) in rows.iter().enumerate() {
        set.set(&key(i as u32), Some(r), &value(i as u32), Origin::default());
    }
    set.link_all();
    assert_eq!(set.unlinked(), 0);
    let opts = SearchOpts {
        brute_force: false,
        rerank: 5,
        list: 40,
    };
    let (even, odd) = (vec![value(0)], vec![value(1)]);
    let mut hits = 0;
    type Search<'a> = (u32, u32, Option<&'a [Vec<u8>]>);
    let searches: [Search; 4] = [
        (0, 3000, None),
        (0, 750, None),
        (1500, 3000, Some(&even)),
        (200, 2600, Some(&odd)),
    ];
    for (qi, (lo, hi, only)) in searches.iter().enumerate() {
        let q = &rows[qi * 97];
        let found = set.search(q, None, 10, (&key(*lo), &key(*hi)), *only, opts);
        let got: Vec<u32> = found
            .keys
            .iter()
            .map(|h| u32::from_be_bytes([h.key[0], h.key[1], h.key[2], h.key[3]]))
            .collect();
        let allowed = |i: u32| i >= *lo && i < *hi && only.is_none_or(|o| o[0] == value(i));
        assert!(
            got.iter().all(|i| allowed(*i)),
            "{got:?} outside {lo}..{hi}"
        );
        let mut exact: Vec<(f32, u32)> = (*lo..*hi)
            .filter(|i| allowed(*i))
            .map(|i| (super::super::kernels::l2sq(q, &rows[i as usize]), i))
            .collect();
        exact.sort_by(|x, y| x.0.total_cmp(&y.0));
        hits += exact[..10].iter().filter(|e| got.contains(&e.1)).count();
    }
    assert!(hits >= 36, "recall@10 over 4 searches: {hits}/40");
    // An update moves the vector, a removal takes it out.
    let far = vec![9.0; dims];
    let (a, end) = (key(0), key(3000));
    set.set(&key(5), Some(&far), &value(5), Origin::default());
    let found = set.search(&far, None, 1, (&a, &end), None, opts);
    assert_eq!(&found.keys[0].key[..], &key(5));
    let found = set.search(&far, None, 1, (&a, &end), Some(&even), opts);
    assert_ne!(&found.keys[0].key[..], &key(5), "key 5 is odd");
    set.set(&key(5), None, &value(5), Origin::default());
    let found = set.search(&far, None, 1, (&a, &end), None, opts);
    assert_ne!(&found.keys[0].key[..], &key(5));
    assert_eq!(set.len(), 2999);
}

/// The quantizer's sample reaches every cluster of vectors written one per cluster in turn
/// (row % 100), where equal steps over a million rows reached 2 of them.
#[test]
fn the_training_sample_does_not_alias_a_repeating_order() {
    for rows in [1_000_000usize, 256_000, 100_000, 20_001] {
        let picks = sample_rows(rows, TRAIN_SAMPLE);
        assert!(picks.windows(2).all(|w| w[0] < w[1]) && picks.iter().all(|p| *p < rows));
        assert!(
            picks.len() >= TRAIN_SAMPLE * 8 / 10,
            "{rows}: {}",
            picks.len()
        );
        let clusters: std::collections::HashSet<usize> = picks.iter().map(|p| p % 100).collect();
        assert_eq!(clusters.len(), 100, "{rows}");
    }
    assert_eq!(sample_rows(5, TRAIN_SAMPLE), vec![0, 1, 2, 3, 4]);
}
