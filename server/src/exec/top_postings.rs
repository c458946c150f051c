//! BM25's best documents from decoded postings, without scoring every posting.
//!
//! A word's postings can run to tens of thousands; a `TOP 10` needs ten. One word: its
//! postings by impact ([`Impact`]) fall in score along each run of equal term frequency, so
//! the best `k` are among the first `k` of each run and the ties after them. Several words:
//! MaxScore (Turtle and Flood, 1995), document at a time in key order — once the `k`-th best
//! score reaches what a document with only the rarest-scoring words could make, those words'
//! lists stop proposing documents and are only looked into (galloping forward) for documents
//! the others propose. Both answer exactly what scoring every posting and sorting would:
//! the same documents, scores to the bit, ties in key order ([`every`] is the oracle).
//!
//! [`Impact`]: crate::store::container::indexes::postings::Impact

use crate::store::container::indexes::postings::{Head, Postings};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;
use strata_query::sql::fulltext::TermWeight;

/// A document by its posting in the stems' lists — in the first list that has one — and its
/// score: (list, posting, score).
pub type Scored = (u32, u32, f64);

/// Relative slack on score bounds summed in another order than a document's score (float
/// addition rounds differently by order): a bound is trusted only this far above.
const SLACK: f64 = 1e-9;

/// The ranking's order: better score first, equal scores in key order.
pub fn order<'a>(lists: &'a [Arc<Postings>]) -> impl Fn(&Scored, &Scored) -> Ordering + 'a {
    move |x, y| {
        let key = |d: &Scored| lists[d.0 as usize].sort_key(d.1 as usize);
        y.2.total_cmp(&x.2).then_with(|| key(x).cmp(&key(y)))
    }
}

/// Every document with a posting, scored, in no order: the sum of its words' scores in the
/// words' order, as evaluation adds them.
pub fn every(lists: &[Arc<Postings>], weights: &[TermWeight]) -> Vec<Scored> {
    let score = |i: usize, j: u32| {
        let (tf, dl) = lists[i].tf_dl[j as usize];
        weights[i].score(tf, dl)
    };
    if let [one] = lists {
        return (0..one.len() as u32).map(|j| (0, j, score(0, j))).collect();
    }
    // Several words: their lists merged in key order, each document's terms summed.
    let mut at = vec![0usize; lists.len()];
    let head = |i: usize, at: &[usize]| (at[i] < lists[i].len()).then(|| lists[i].sort_key(at[i]));
    let mut scored = Vec::new();
    while let Some((first, key)) = (0..lists.len())
        .filter_map(|i| head(i, &at).map(|k| (i, k)))
        .min_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)))
    {
        let pos = at[first] as u32;
        let mut total = 0.0;
        for i in first..lists.len() {
            if head(i, &at) == Some(key) {
                total += score(i, at[i] as u32);
                at[i] += 1;
            }
        }
        scored.push((first as u32, pos, total));
    }
    scored
}

/// The best `want` documents in [`order`] — exactly the start of [`every`] sorted — or
/// `None` when fewer than `want` documents have a posting.
pub fn best(lists: &[Arc<Postings>], weights: &[TermWeight], want: usize) -> Option<Vec<Scored>> {
    if want == 0 {
        return Some(Vec::new());
    }
    let mut top = match lists {
        [] => return None,
        [one] => best_of_one(one, &weights[0], want)?,
        _ => best_of_many(lists, weights, want)?,
    };
    top.sort_by(order(lists));
    top.truncate(want);
    Some(top)
}

/// One word: the first `want` postings of each run, the `want`-th best score among them as
/// the floor, and each run's further postings down to the floor (ties included).
fn best_of_one(list: &Postings, w: &TermWeight, want: usize) -> Option<Vec<Scored>> {
    if list.len() < want {
        return None;
    }
    let score = |j: u32| {
        let (tf, dl) = list.tf_dl[j as usize];
        w.score(tf, dl)
    };
    let impact = list.by_impact();
    let mut found: Vec<Scored> = Vec::new();
    for run in impact.runs() {
        found.extend(run.iter().take(want).map(|&j| (0, j, score(j))));
    }
    let mut scores: Vec<f64> = found.iter().map(|d| d.2).collect();
    let (_, floor, _) = scores.select_nth_unstable_by(want - 1, |a, b| b.total_cmp(a));
    let floor = *floor;
    for run in impact.runs() {
        for &j in run.iter().skip(want) {
            let s = score(j);
            if s < floor {
                break;
            }
            found.push((0, j, s));
        }
    }
    Some(found)
}

/// A document held among the best so far; the heap's top is the worst of them (lowest score,
/// then the latest — documents come in key order, so the latest has the greatest key).
struct Held {
    doc: Scored,
    seq: u64,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Held {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .doc
            .2
            .total_cmp(&self.doc.2)
            .then(self.seq.cmp(&other.seq))
    }
}

/// Into `next`, the lists among `proposing` whose posting at `at` is the next document in
/// key order, found by the keys' numbers: their bytes are compared only when two lists'
/// numbers tie. Empty when those lists are done.
fn next_document(
    lists: &[Arc<Postings>],
    proposing: &[usize],
    at: &[usize],
    next: &mut Vec<usize>,
) {
    next.clear();
    let mut low: Option<Head> = None;
    for &i in proposing {
        if at[i] == lists[i].len() {
            continue;
        }
        let h = lists[i].head(at[i]);
        match low.map(|l| h.cmp(&l)) {
            Some(Ordering::Greater) => {}
            Some(Ordering::Equal) => next.push(i),
            _ => {
                low = Some(h);
                next.clear();
                next.push(i);
            }
        }
    }
    if next.len() > 1 {
        let key_of = |i: &usize| lists[*i].key(at[*i]);
        let least = next.iter().map(key_of).min().unwrap_or_default();
        next.retain(|i| key_of(i) == least);
    }
}

/// Several words: MaxScore (see the module's doc).
fn best_of_many(
    lists: &[Arc<Postings>],
    weights: &[TermWeight],
    want: usize,
) -> Option<Vec<Scored>> {
    let n = lists.len();
    let score = |i: usize, j: u32| {
        let (tf, dl) = lists[i].tf_dl[j as usize];
        weights[i].score(tf, dl)
    };
    // Each word's best score: the best of its runs' first postings.
    let bound: Vec<f64> = (0..n)
        .map(|i| {
            let runs = lists[i].by_impact().runs();
            runs.map(|r| score(i, r[0])).fold(0.0, f64::max)
        })
        .collect();
    // Words by bound, lowest first; `upto[e]` bounds a document that has only `by[..e]`.
    let mut by: Vec<usize> = (0..n).collect();
    by.sort_by(|&a, &b| bound[a].total_cmp(&bound[b]));
    let mut upto = vec![0.0f64; n + 1];
    for e in 0..n {
        upto[e + 1] = upto[e] + bound[by[e]];
    }
    let upto: Vec<f64> = upto.into_iter().map(|b| b * (1.0 + SLACK)).collect();
    let mut at = vec![0usize; n];
    let mut hits: Vec<Option<(u32, f64)>> = vec![None; n];
    let mut heap: BinaryHeap<Held> = BinaryHeap::with_capacity(want + 1);
    let (mut seq, mut floor) = (0u64, f64::NEG_INFINITY);
    // Words `by[..e]` no longer propose documents.
    let mut e = 0;
    // The lists that hold the next document in key order.
    let mut next: Vec<usize> = Vec::with_capacity(n);
    loop {
        next_document(lists, &by[e..], &at, &mut next);
        let Some(&lead) = next.first() else {
            break;
        };
        let key = lists[lead].sort_key(at[lead]);
        let mut partial = 0.0;
        for &i in &by[e..] {
            hits[i] = None;
        }
        for &i in &next {
            let j = at[i] as u32;
            let s = score(i, j);
            hits[i] = Some((j, s));
            partial += s;
            at[i] += 1;
        }
        let full = heap.len() >= want;
        if full && partial * (1.0 + SLACK) + upto[e] <= floor {
            // Even with every other word it would not pass the worst held (nor tie it
            // before: it comes later in key order).
            continue;
        }
        for &i in &by[..e] {
            hits[i] = None;
            at[i] = lists[i].seek(at[i], lists[i].len(), key);
            if at[i] < lists[i].len() && lists[i].sort_key(at[i]) == key {
                let j = at[i] as u32;
                hits[i] = Some((j, score(i, j)));
                at[i] += 1;
            }
        }
        let mut total = 0.0;
        let mut first = None;
        for (i, hit) in hits.iter().enumerate() {
            if let Some((j, s)) = hit {
                total += s;
                first.get_or_insert((i as u32, *j));
            }
        }
        let Some((list, posting)) = first else {
            continue;
        };
        if full && total <= floor {
            continue;
        }
        seq += 1;
        heap.push(Held {
            doc: (list, posting, total),
            seq,
        });
        if heap.len() > want {
            heap.pop();
        }
        if heap.len() >= want {
            floor = heap.peek().map_or(floor, |h| h.doc.2);
            while e < n && upto[e + 1] <= floor {
                e += 1;
            }
        }
    }
    if heap.len() < want {
        return None;
    }
    Some(heap.into_iter().map(|h| h.doc).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::container::indexes::postings::Gathered;
    use proptest::prelude::*;
    use strata_query::sql::fulltext::Statistics;

    /// A word's postings: documents of a pool of `docs` with a term frequency and a length
    /// (few distinct values, so scores tie often), in the order entries have them.
    fn list(picks: &[(u16, u8, u8)]) -> Postings {
        let mut seen = std::collections::BTreeMap::new();
        for &(d, tf, dl) in picks {
            seen.insert(
                format!("doc-{d:04}"),
                (u32::from(tf % 4), 5 + u32::from(dl % 6)),
            );
        }
        // As the index orders them: by the term's text (frequency, length), then key.
        let mut entries: Vec<(String, (u32, u32))> = seen.into_iter().collect();
        entries.sort_by_key(|(k, (tf, dl))| (tf.to_string(), dl.to_string(), k.clone()));
        let mut p = Gathered::default();
        for (k, tf_dl) in entries {
            p.push(k.as_bytes(), tf_dl);
        }
        p.finish()
    }

    proptest! {
        /// The best `want` are what scoring every posting and sorting gives: the same
        /// documents in the same order, scores to the bit.
        #[test]
        fn the_best_are_the_start_of_every_posting_sorted(
            words in prop::collection::vec(prop::collection::vec((0u16..300, any::<u8>(), any::<u8>()), 0..200), 1..4),
            want in prop_oneof![Just(1usize), Just(3), Just(10), Just(50), Just(400)],
        ) {
            let lists: Vec<Arc<Postings>> = words.iter().map(|w| Arc::new(list(w))).collect();
            let stats = Statistics {
                documents: 400,
                total_words: 400 * 7,
                hits: lists.iter().map(|p| p.len() as u64).collect(),
            };
            let weights: Vec<TermWeight> = (0..lists.len()).map(|i| TermWeight::new(i, &stats)).collect();
            let mut all = every(&lists, &weights);
            all.sort_by(order(&lists));
            let show = |d: &[Scored]| -> Vec<(Vec<u8>, u64)> {
                d.iter().map(|s| (lists[s.0 as usize].key(s.1 as usize).to_vec(), s.2.to_bits())).collect()
            };
            match best(&lists, &weights, want) {
                Some(top) => prop_assert_eq!(show(&top), show(&all[..want])),
                None => prop_assert!(all.len() < want, "{} documents, want {}", all.len(), want),
            }
        }
    }
}
