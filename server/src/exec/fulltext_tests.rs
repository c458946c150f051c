//! Full-text postings never change an answer: for random corpora written, rewritten and
//! deleted in random orders, every `FullTextContains*` filter and every `ORDER BY RANK` over
//! `FullTextScore` (alone, filtered, paged, fused by `RRF`) returns exactly what the same
//! container without a full-text index returns (every document evaluated, BM25's statistics
//! counted by the statistics query) — with the index as written, across a split, and while an
//! index added by a policy replace is built and after. The evaluator's exact f64 BM25 is the
//! oracle, so a posting the writes left stale, a statistic counted twice (or kept from a write
//! undone to a savepoint), or a ranking that
//! skips a document it should not shows up as a different row or order. Postings are folded
//! into segments (and segments merged) at random points, and the store is reopened on the same
//! storage, so answers from pending postings, from segments, from both, and after a restart's
//! catch-up from the change feed are all compared.

use super::*;
use crate::store::Store;
use proptest::prelude::*;
use serde_json::{json, Map};
use strata_query::pk::epk::effective_partition_key;
use strata_query::pk::PartitionKey;

/// Words in several forms of a stem, stop words and mixed case: the analyser's work is part
/// of what the index and the evaluator must agree on.
const WORDS: [&str; 16] = [
    "river", "rivers", "Swimming", "swims", "swimmer", "the", "a", "blue", "ocean", "Ocean",
    "forest", "light", "lights", "stone", "bridge", "music",
];

/// A text of `words` (indexes into [`WORDS`]); `None` leaves the property out, and a number
/// stands where a text may be expected.
fn text(words: &[usize], kind: u8) -> Option<Value> {
    match kind {
        0 => None,
        1 => Some(json!(7)),
        _ => Some(json!(words
            .iter()
            .map(|&w| WORDS[w % WORDS.len()])
            .collect::<Vec<_>>()
            .join(" "))),
    }
}

/// One write: document `id` in partition `pk` gets a text (or is deleted when `kind` is 9;
/// when 8, a long text is first written and undone to a savepoint, as a failed operation
/// of a batch).
type Write = (u8, u8, Vec<usize>, u8);

fn write() -> impl Strategy<Value = Write> {
    (
        0u8..40,
        0u8..5,
        prop::collection::vec(0usize..WORDS.len(), 0..12),
        prop_oneof![
            1 => Just(0u8),
            1 => Just(1u8),
            12 => Just(2u8),
            2 => Just(9u8),
            2 => Just(8u8),
        ],
    )
}

/// Queries over `/t`, each with its own words.
const QUERIES: [&str; 13] = [
    "SELECT VALUE c.id FROM c WHERE FullTextContains(c.t, @a)",
    "SELECT VALUE c.id FROM c WHERE FullTextContains(c.t, 'blue ocean')",
    "SELECT VALUE c.id FROM c WHERE FullTextContainsAll(c.t, @a, @b)",
    "SELECT VALUE c.id FROM c WHERE FullTextContainsAny(c.t, @a, @b)",
    "SELECT VALUE COUNT(1) FROM c WHERE FullTextContains(c.t, @a) OR c.pk = 'p1'",
    "SELECT TOP 5 c.id FROM c WHERE FullTextContains(c.t, @a) ORDER BY c.id",
    "SELECT TOP 7 c.id FROM c ORDER BY RANK FullTextScore(c.t, @a)",
    "SELECT TOP 7 c.id FROM c ORDER BY RANK FullTextScore(c.t, @a, @b)",
    "SELECT TOP 4 VALUE c.id FROM c ORDER BY RANK FullTextScore(c.t, @b)",
    "SELECT c.id FROM c WHERE c.pk != 'p2' ORDER BY RANK FullTextScore(c.t, @a) OFFSET 2 LIMIT 6",
    "SELECT TOP 30 c.id FROM c ORDER BY RANK FullTextScore(c.t, @b)",
    "SELECT TOP 6 c.id FROM c ORDER BY RANK RRF(FullTextScore(c.t, @a), FullTextScore(c.t, @b))",
    "SELECT TOP 6 c.id FROM c ORDER BY RANK RRF(FullTextScore(c.t, @a), FullTextScore(c.t, @b), [1, 3])",
];

/// Every page of `sql` with `@a`/`@b` bound, 4 rows at a time, as planned; `None` when it
/// does not prepare or fails (so must the other container's).
async fn answer(
    c: &Arc<Container>,
    sql: &str,
    ab: (&str, &str),
    postings: &mut usize,
) -> Option<Vec<Value>> {
    let params = [("a".into(), json!(ab.0)), ("b".into(), json!(ab.1))];
    let p = Arc::new(sql::prepare(sql, &params, Some(&c.pk)).ok()?);
    let a = Arc::new(access(c, &p, true).ok()?);
    if a.to_string().contains("postings") {
        *postings += 1;
    }
    super::index_tests::every_page(c, &p, a, 4, false)
        .await
        .ok()
}

/// Both containers answer every query alike (`ix` has, or is building, the index), and
/// the plans of `ix` read postings when it has them, those of `plain` never.
async fn check_all([ix, plain]: &[Arc<Container>; 2], words: &[(usize, usize)]) {
    let (mut from_postings, mut never) = (0, 0);
    for &(a, b) in words {
        let ab = (WORDS[a], WORDS[b]);
        for sql in QUERIES {
            let indexed = answer(ix, sql, ab, &mut from_postings).await;
            let evaluated = answer(plain, sql, ab, &mut never).await;
            assert!(evaluated.is_some(), "{sql} with {ab:?} evaluates");
            assert_eq!(indexed, evaluated, "{sql} with @a, @b = {ab:?}");
        }
    }
    assert_eq!(never, 0);
    let indexed = !ix.index_state().policy.full_text.is_empty();
    assert_eq!(
        indexed,
        from_postings > 0,
        "{from_postings} plans read postings"
    );
}

/// The same write to both containers; every `fold_every`-th write of a run, the indexed
/// container folds what is pending.
async fn apply_both(cs: &[Arc<Container>; 2], w: &Write) {
    for c in cs {
        apply(c, w).await;
    }
}

async fn apply_all(cs: &[Arc<Container>; 2], writes: &[Write], fold_every: usize) {
    for (i, w) in writes.iter().enumerate() {
        apply_both(cs, w).await;
        if (i + 1) % fold_every == 0 {
            cs[0].fold_text_now().expect("fold");
        }
    }
}

/// The store opened again on the same storage (what a restart keeps), and its containers.
async fn reopen(store: &Store) -> (Store, [Arc<Container>; 2]) {
    let cfg = super::index_tests::small_config();
    let again = Store::open_on(store.engine().clone(), cfg).expect("reopen");
    let ix = again.container("d", "ix").expect("ix");
    let plain = again.container("d", "plain").expect("plain");
    (again, [ix, plain])
}

async fn apply(c: &Container, (id, pk, words, kind): &Write) {
    let (id, pk) = (format!("d{id:02}"), format!("p{pk}"));
    let key = PartitionKey::from_header(&json!([pk]).to_string()).expect("key");
    let epk = effective_partition_key(&c.pk, &key).expect("epk");
    // An id lives in one partition here: the first write of it chose it.
    let (_, durable) = c
        .write(|t| -> Result<(), crate::error::CosmosError> {
            let found = (0..5).find_map(|p| {
                let k = PartitionKey::from_header(&json!([format!("p{p}")]).to_string()).ok()?;
                let e = effective_partition_key(&c.pk, &k).ok()?;
                t.get_raw(&e, &id).ok().flatten().map(|item| (e, item))
            });
            if *kind == 9 {
                if let Some((e, item)) = found {
                    t.delete(&e, &id, &item)?;
                }
                return Ok(());
            }
            let (epk, prev, pk) = match found {
                Some((e, item)) => {
                    let old: Value = serde_json::from_slice(&item.json).expect("stored json");
                    (e, Some(item), old["pk"].clone())
                }
                None => (epk.clone(), None, json!(pk)),
            };
            let doc = |words: &[usize]| {
                let mut d = json!({"id": id, "pk": pk});
                if let Some(t) = text(words, *kind) {
                    d["t"] = t;
                }
                let Value::Object(m) = d else { unreachable!() };
                m
            };
            if *kind == 8 {
                // A long text written and undone, then the text: the undone write's postings
                // and length must go with it (a total that kept that length ranks
                // differently).
                let long: Vec<usize> = std::iter::repeat_n(words.as_slice(), 20)
                    .flatten()
                    .copied()
                    .collect();
                let sp = t.savepoint();
                crate::items::ops::put(t, &epk, &id, doc(&long), prev.as_ref())?;
                t.rollback_to(sp);
            }
            crate::items::ops::put(t, &epk, &id, doc(words), prev.as_ref()).map(|_| ())
        })
        .expect("write");
    c.durable(durable).await.expect("durable");
}

fn props(indexed: bool) -> Map<String, Value> {
    let mut props = Map::new();
    props.insert(
        "fullTextPolicy".into(),
        json!({"defaultLanguage": "en-US", "fullTextPaths": [{"path": "/t", "language": "en-US"}]}),
    );
    let indexes = if indexed {
        json!([{"path": "/t"}])
    } else {
        json!([])
    };
    props.insert(
        "indexingPolicy".into(),
        json!({"includedPaths": [{"path": "/*"}], "fullTextIndexes": indexes}),
    );
    props
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn full_text_postings_answer_as_evaluation(
        first in prop::collection::vec(write(), 10..60),
        then in prop::collection::vec(write(), 0..30),
        indexed_from_start in any::<bool>(),
        words in prop::collection::vec((0usize..WORDS.len(), 0usize..WORDS.len()), 3),
        fold_every in 1usize..12,
    ) {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async move {
            let store = super::index_tests::small_store().await;
            let mut cs = Vec::new();
            for (name, indexed) in [("ix", indexed_from_start), ("plain", false)] {
                let pk = strata_query::pk::PartitionKeyDefinition::hash_v2("/pk");
                cs.push(store.create_container("d", name, pk, props(indexed), None).await.expect("container"));
            }
            let Ok(cs): Result<[Arc<Container>; 2], _> = cs.try_into() else { unreachable!() };
            apply_all(&cs, &first, fold_every).await;
            check_all(&cs, &words).await;
            // Rewrites and deletes after the postings were read (and decoded) once.
            apply_all(&cs, &then, fold_every).await;
            check_all(&cs, &words).await;
            // What was pending is read again from the change feed.
            let (store, cs) = reopen(&store).await;
            check_all(&cs, &words).await;
            for c in &cs {
                store.split_once(c).await.expect("split");
            }
            check_all(&cs, &words).await;
            if !indexed_from_start {
                // The index added by a policy replace: answers while it is built, and after.
                let ix = &cs[0];
                let mut p = ix.with_meta(|m| m.props.clone());
                p.insert("indexingPolicy".into(), props(true)["indexingPolicy"].clone());
                store.replace_container(ix, p).await.expect("replace");
                check_all(&cs, &words).await;
                super::index_tests::wait_ready(ix).await;
                let back: Vec<Write> = then.iter().rev().cloned().collect();
                apply_all(&cs, &back, fold_every).await;
                check_all(&cs, &words).await;
                let (_, cs) = reopen(&store).await;
                check_all(&cs, &words).await;
            }
        });
    }
}

/// A ranking whose rows are ids is answered from the postings' document keys without reading
/// a document; one that projects anything else, or over a container whose documents can
/// expire, reads each row's document.
#[tokio::test]
async fn a_ranking_of_ids_reads_no_document() {
    let store = super::index_tests::small_store().await;
    let mut with_ttl = props(true);
    with_ttl.insert("defaultTtl".into(), json!(3600));
    for (name, props) in [("ix", props(true)), ("ttl", with_ttl)] {
        let pk = strata_query::pk::PartitionKeyDefinition::hash_v2("/pk");
        let c = store.create_container("d", name, pk, props, None).await;
        let c = c.expect("container");
        for i in 0u8..20 {
            apply(&c, &(i, i % 3, vec![0, 7, (i % 5) as usize], 2)).await;
        }
        // Warm: the first query reads the postings into memory.
        for (sql, reads) in [
            (
                "SELECT TOP 3 c.id FROM c ORDER BY RANK FullTextScore(c.t, 'blue')",
                0,
            ),
            (
                "SELECT TOP 3 c.id FROM c ORDER BY RANK FullTextScore(c.t, 'blue')",
                0,
            ),
            (
                "SELECT TOP 3 VALUE c.id FROM c ORDER BY RANK FullTextScore(c.t, 'blue')",
                0,
            ),
            (
                "SELECT TOP 3 c.id, c.pk FROM c ORDER BY RANK FullTextScore(c.t, 'blue')",
                3,
            ),
        ] {
            let p = Arc::new(sql::prepare(sql, &[], Some(&c.pk)).expect("prepare"));
            let a = Arc::new(access(&c, &p, true).expect("access"));
            assert!(a.to_string().contains("postings"), "{a}");
            let plan = super::index_tests::plan_with(&c, &p, a, 10, false);
            let page = run(Arc::clone(&c), plan, None).await.expect("page");
            let reads = if name == "ttl" { 3 } else { reads };
            assert_eq!(page.scanned, reads, "{name}: {sql}");
            assert_eq!(page.docs.len(), 3, "{sql}");
            for d in &page.docs {
                let v: Value = serde_json::from_slice(d).expect("row");
                let id = v.get("id").unwrap_or(&v);
                assert!(id.as_str().is_some_and(|s| s.starts_with('d')), "{v}");
            }
        }
    }
}

/// A store written when each document length was an index entry of its own (under
/// `/\0fulltext-length/<path>`): its first start moves the lengths into the directory entries
/// and deletes the entries, and ranked answers stay those of evaluation.
#[tokio::test]
async fn lengths_kept_as_entries_move_into_the_directory() {
    use crate::store::container::indexes::text_lengths;
    use crate::store::engine::{prefix_end, Op, Space};
    use crate::store::index::{entry_key, path_prefix};
    use std::ops::Bound;
    use strata_query::index::{fulltext::lengths_path, policy::Seg, term};

    let store = super::index_tests::small_store().await;
    let mut cs = Vec::new();
    for (name, indexed) in [("ix", true), ("plain", false)] {
        let pk = strata_query::pk::PartitionKeyDefinition::hash_v2("/pk");
        let c = store
            .create_container("d", name, pk, props(indexed), None)
            .await;
        cs.push(c.expect("container"));
    }
    let Ok(cs): Result<[Arc<Container>; 2], _> = cs.try_into() else {
        unreachable!()
    };
    let writes: Vec<Write> = (0u8..30)
        .map(|i| {
            (
                i,
                i % 5,
                (0..(i as usize % 9)).map(|w| w * 7 + i as usize).collect(),
                2,
            )
        })
        .collect();
    apply_all(&cs, &writes, 7).await;
    let words = [(0, 7), (3, 12), (4, 15)];
    check_all(&cs, &words).await;

    // The layout before: lengths as index entries, directory values empty.
    let (ix, engine) = (&cs[0], store.engine());
    let gen = ix.index_state().gen;
    let id = term::path_id(&lengths_path(&[Seg::Name("t".into())]));
    let start = crate::store::keys::container_prefix(ix.cid);
    let end = prefix_end(&start).expect("end");
    let directory = |e: &crate::store::engine::Engine| {
        e.scan(
            Space::Directory,
            Bound::Included(&start),
            Bound::Excluded(&end),
            usize::MAX,
            false,
        )
        .expect("directory")
    };
    let dir = directory(engine);
    let mut ops = Vec::new();
    let mut with_text = 0;
    for (k, v) in &dir {
        let (g, lengths) = text_lengths::decode(v).expect("lengths");
        for (path, n) in lengths {
            assert_eq!((g, path), (gen, id));
            let e = (path, term::encode(&json!(n)));
            ops.push(Op::Put(
                Space::Index,
                entry_key(ix.cid, gen, &e, &k[4..]),
                Vec::new(),
            ));
            with_text += 1;
        }
        ops.push(Op::Put(Space::Directory, k.clone(), Vec::new()));
    }
    assert!(with_text > 10, "{with_text} documents with text");
    let _ = engine.write(ops).expect("write");

    let (store, cs) = reopen(&store).await;
    check_all(&cs, &words).await;
    let legacy = path_prefix(cs[0].cid, gen, &id.to_be_bytes());
    let left = engine
        .scan(
            Space::Index,
            Bound::Included(&legacy),
            Bound::Excluded(&prefix_end(&legacy).expect("end")),
            10,
            false,
        )
        .expect("index");
    assert!(left.is_empty(), "{} length entries left", left.len());
    assert_eq!(directory(store.engine()), dir);
}
