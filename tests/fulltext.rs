//! Full-text search as the service's "Full text search in Azure Cosmos DB for NoSQL" and
//! "Hybrid search" pages define it: `FullTextContains*` answered from the postings of a
//! full-text index (the same rows as evaluating every document), `ORDER BY RANK
//! FullTextScore` in BM25 order over the whole container, `RRF` fusing ranks, and an index
//! added by a policy replace built from the stored documents.

use reqwest::StatusCode;
use serde_json::{json, Value};
use std::collections::HashMap;
use strata_query::sql::fulltext::{analyze, Language};
use strata_server::store::container::Limits;
use strata_tests::{Options, Resp, TestServer};

const DB: &str = "ft";
const WORDS: [&str; 24] = [
    "river", "mountain", "swimmer", "swims", "runner", "running", "the", "a", "of", "blue",
    "green", "ocean", "forest", "bicycle", "bicycles", "city", "night", "light", "stone", "bridge",
    "united", "states", "kingdom", "music",
];

/// A seeded corpus: short texts of skewed word frequencies (earlier words more often).
fn corpus(n: usize) -> Vec<String> {
    let mut x = 0x2545F4914F6CDD1Du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..n)
        .map(|_| {
            let len = 3 + (next() % 12) as usize;
            (0..len)
                .map(|_| {
                    let r = (next() % 1000) as f64 / 1000.0;
                    WORDS[((r * r) * WORDS.len() as f64) as usize]
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

async fn query(s: &TestServer, coll: &str, sql: &str) -> Resp {
    s.post(
        &format!("/dbs/{DB}/colls/{coll}/docs"),
        &[
            ("x-ms-documentdb-isquery", "true"),
            ("content-type", "application/query+json"),
            ("x-ms-documentdb-query-enablecrosspartition", "true"),
            ("x-ms-max-item-count", "1000"),
            ("x-strata-explain", "true"),
        ],
        json!({"query": sql}),
    )
    .await
}

fn ids(r: &Resp) -> Vec<String> {
    r.json["Documents"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|d| d["id"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn plan(r: &Resp) -> String {
    strata_query::protocol::unescape_plan(r.header("x-strata-query-plan").unwrap_or_default())
}

fn props(id: &str, indexed: bool) -> Value {
    json!({"id": id, "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2},
        "fullTextPolicy": {"defaultLanguage": "en-US", "fullTextPaths": [{"path": "/t", "language": "en-US"}]},
        "indexingPolicy": {"fullTextIndexes": if indexed { json!([{"path": "/t"}]) } else { json!([]) }}})
}

async fn load(s: &TestServer, coll: &str, texts: &[String]) {
    for (i, t) in texts.iter().enumerate() {
        let pk = format!("p{}", i % 13);
        let r = s
            .create(
                DB,
                coll,
                &json!([pk]),
                json!({"id": format!("d{i}"), "pk": pk, "t": t}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    }
}

fn four_partitions() -> Options {
    Options {
        limits: Some(Limits {
            initial_partitions: Some(4),
            ..Limits::default()
        }),
        ..Options::default()
    }
}

/// BM25 of every text for `terms` (single words), computed here from the analysed words.
fn bm25(texts: &[String], terms: &[&str]) -> Vec<f64> {
    let docs: Vec<Vec<String>> = texts.iter().map(|t| analyze(t, Language::EnUs)).collect();
    let n = docs.len() as f64;
    let avg = docs.iter().map(Vec::len).sum::<usize>() as f64 / n;
    let stems: Vec<String> = terms
        .iter()
        .map(|t| analyze(t, Language::EnUs).remove(0))
        .collect();
    let df: HashMap<&str, f64> = stems
        .iter()
        .map(|s| {
            (
                s.as_str(),
                docs.iter().filter(|d| d.contains(s)).count() as f64,
            )
        })
        .collect();
    docs.iter()
        .map(|d| {
            stems
                .iter()
                .map(|s| {
                    let tf = d.iter().filter(|w| *w == s).count() as f64;
                    let idf = (1.0 + (n - df[s.as_str()] + 0.5) / (df[s.as_str()] + 0.5)).ln();
                    idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * d.len() as f64 / avg))
                })
                .sum()
        })
        .collect()
}

/// The ids of the `k` best scores (higher first), with their scores.
fn best(scores: &[f64], k: usize) -> Vec<(String, f64)> {
    let mut all: Vec<(String, f64)> = scores
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("d{i}"), *s))
        .collect();
    all.sort_by(|a, b| b.1.total_cmp(&a.1));
    all.truncate(k);
    all
}

#[tokio::test]
async fn full_text_filters_read_postings_and_agree_with_evaluation() {
    let s = TestServer::start_with(four_partitions()).await;
    let texts = corpus(600);
    for (coll, indexed) in [("indexed", true), ("plain", false)] {
        s.setup_with(DB, coll, props(coll, indexed)).await;
        load(&s, coll, &texts).await;
    }
    for filter in [
        "FullTextContains(c.t, 'bicycle')",
        "FullTextContains(c.t, 'blue ocean')",
        "FullTextContainsAll(c.t, 'swimmer', 'night')",
        "FullTextContainsAny(c.t, 'kingdom', 'music', 'Bridges')",
        "FullTextContains(c.t, 'stone') OR FullTextContains(c.t, 'light')",
        "FullTextContains(c.t, 'running') AND c.pk = 'p3'",
    ] {
        let sql = format!("SELECT c.id FROM c WHERE {filter}");
        let a = query(&s, "indexed", &sql).await;
        let b = query(&s, "plain", &sql).await;
        assert_eq!(a.status, StatusCode::OK, "{a:?}");
        let (mut x, mut y) = (ids(&a), ids(&b));
        x.sort();
        y.sort();
        assert!(!x.is_empty(), "{filter} matches something");
        assert_eq!(x, y, "{filter}");
        assert!(
            plan(&a).contains("full-text postings of /t"),
            "{}",
            plan(&a)
        );
        assert!(!plan(&b).contains("postings"), "{}", plan(&b));
    }
    // A stop word alone matches nothing; stemming matches other forms of a word.
    let r = query(
        &s,
        "indexed",
        "SELECT VALUE COUNT(1) FROM c WHERE FullTextContains(c.t, 'the')",
    )
    .await;
    assert_eq!(r.json["Documents"], json!([0]));
    let swim = query(
        &s,
        "indexed",
        "SELECT VALUE COUNT(1) FROM c WHERE FullTextContains(c.t, 'swimming')",
    )
    .await;
    let expected = texts
        .iter()
        .filter(|t| t.split(' ').any(|w| w == "swims"))
        .count();
    assert_eq!(swim.json["Documents"], json!([expected]));
}

#[tokio::test]
async fn order_by_rank_is_bm25_over_the_whole_container_and_rrf_fuses_ranks() {
    let s = TestServer::start_with(four_partitions()).await;
    let texts = corpus(500);
    s.setup_with(DB, "rank", props("rank", true)).await;
    load(&s, "rank", &texts).await;
    s.setup_with(DB, "unranked", props("unranked", false)).await;
    load(&s, "unranked", &texts).await;
    // From the postings (ten documents read) and by evaluation (every document read): the
    // same rows in the same order, with and without a filter.
    for sql in [
        "SELECT TOP 10 c.id FROM c ORDER BY RANK FullTextScore(c.t, 'kingdom', 'music')",
        "SELECT c.id FROM c WHERE c.pk != 'p1' ORDER BY RANK FullTextScore(c.t, 'light') OFFSET 3 LIMIT 7",
        // More rows than documents with the word: the rest at score zero, in document order.
        "SELECT TOP 200 c.id FROM c WHERE c.pk != 'p2' ORDER BY RANK FullTextScore(c.t, 'music')",
    ] {
        let a = query(&s, "rank", sql).await;
        let b = query(&s, "unranked", sql).await;
        assert_eq!(ids(&a), ids(&b), "{sql}");
        let scanned = |r: &Resp| {
            let route = r.header("x-strata-query-route").unwrap_or_default().to_string();
            route.rsplit("scanned=").next().and_then(|n| n.trim().parse::<u64>().ok())
        };
        if sql.starts_with("SELECT TOP 10") {
            assert!(
                scanned(&a).is_some_and(|n| n < 50),
                "{:?}",
                a.header("x-strata-query-route")
            );
        }
        assert_eq!(a.status, StatusCode::OK, "{a:?}");
        assert!(scanned(&a).is_some_and(|n| n < 500), "{sql}: {:?}", a.header("x-strata-query-route"));
        // Without the index: the statistics query reads every document, then the ranking
        // does (both charged, as the service charges the SDK's statistics request).
        assert_eq!(scanned(&b), Some(1000));
    }
    let scores = bm25(&texts, &["kingdom", "music"]);
    let r = query(
        &s,
        "rank",
        "SELECT TOP 10 c.id FROM c ORDER BY RANK FullTextScore(c.t, 'kingdom', 'music')",
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let got = ids(&r);
    let want = best(&scores, 10);
    assert_eq!(got.len(), 10);
    for (i, (id, score)) in want.iter().enumerate() {
        // Equal scores may come in either order; a different score may not.
        let at = &got[i];
        let s_at = scores[at[1..].parse::<usize>().unwrap_or(0)];
        assert!(
            (s_at - score).abs() < 1e-9,
            "rank {i}: {at} ({s_at}) vs {id} ({score})"
        );
    }
    // RRF of two rankings: each document's fused score from its ranks in both, computed here
    // (ties share a rank).
    let a = bm25(&texts, &["bridge"]);
    let b = bm25(&texts, &["forest"]);
    let rank_of = |v: &[f64]| -> Vec<usize> {
        let mut distinct: Vec<f64> = v.to_vec();
        distinct.sort_by(|x, y| y.total_cmp(x));
        distinct.dedup();
        v.iter()
            .map(|x| distinct.iter().position(|d| d == x).unwrap_or(0) + 1)
            .collect()
    };
    let (ra, rb) = (rank_of(&a), rank_of(&b));
    let fused: Vec<f64> = (0..texts.len())
        .map(|i| 2.0 / (60.0 + ra[i] as f64) + 1.0 / (60.0 + rb[i] as f64))
        .collect();
    let r = query(
        &s,
        "rank",
        "SELECT TOP 8 c.id FROM c ORDER BY RANK RRF(FullTextScore(c.t, 'bridge'), FullTextScore(c.t, 'forest'), [2, 1])",
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let got = ids(&r);
    assert_eq!(got.len(), 8);
    for (i, (_, score)) in best(&fused, 8).iter().enumerate() {
        let s_at = fused[got[i][1..].parse::<usize>().unwrap_or(0)];
        assert!(
            (s_at - score).abs() < 1e-12,
            "rank {i}: {} ({s_at}) vs {score}",
            got[i]
        );
    }
    // Scores only rank: projected or filtered on, they are the service's 400.
    let r = query(&s, "rank", "SELECT FullTextScore(c.t, 'x') AS s FROM c").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(
        r.json["message"]
            .as_str()
            .unwrap_or_default()
            .contains("only allowed in the ORDER BY RANK clause"),
        "{r:?}"
    );
}

#[tokio::test]
async fn an_added_full_text_index_is_built_from_the_stored_documents() {
    let s = TestServer::start_with(four_partitions()).await;
    let texts = corpus(300);
    s.setup_with(DB, "grow", props("grow", false)).await;
    load(&s, "grow", &texts).await;
    let sql = "SELECT c.id FROM c WHERE FullTextContains(c.t, 'ocean')";
    let before = query(&s, "grow", sql).await;
    assert!(!plan(&before).contains("postings"));
    let r = s
        .request(
            reqwest::Method::PUT,
            &format!("/dbs/{DB}/colls/grow"),
            &[],
            Some(props("grow", true)),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let mut after = query(&s, "grow", sql).await;
    for _ in 0..200 {
        if plan(&after).contains("postings") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        after = query(&s, "grow", sql).await;
    }
    assert!(
        plan(&after).contains("full-text postings of /t"),
        "{}",
        plan(&after)
    );
    let (mut x, mut y) = (ids(&before), ids(&after));
    x.sort();
    y.sort();
    assert_eq!(x, y);
    // A policy naming an index on a path the full-text policy lacks is the service's 400.
    let mut bad = props("grow", true);
    bad["indexingPolicy"]["fullTextIndexes"] = json!([{"path": "/other"}]);
    let r = s
        .request(
            reqwest::Method::PUT,
            &format!("/dbs/{DB}/colls/grow"),
            &[],
            Some(bad),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{r:?}");
}

/// Postings decoded in memory (`indexes/postings.rs`) follow every write: after queries have
/// read a stem's postings, documents created with it, changed to drop it and deleted are seen
/// by the next query — the same rows as evaluating every document of an unindexed twin, for
/// `FullTextContains`, ranking, over the container and over one logical partition.
#[tokio::test]
async fn decoded_postings_follow_every_write() {
    let s = TestServer::start_with(four_partitions()).await;
    let texts = corpus(300);
    for (coll, indexed) in [("warm", true), ("cold", false)] {
        s.setup_with(DB, coll, props(coll, indexed)).await;
        load(&s, coll, &texts).await;
    }
    let sqls = [
        "SELECT c.id FROM c WHERE FullTextContains(c.t, 'music')",
        "SELECT c.id FROM c WHERE FullTextContainsAll(c.t, 'music', 'kingdom')",
        "SELECT TOP 20 c.id FROM c ORDER BY RANK FullTextScore(c.t, 'music', 'kingdom')",
        "SELECT c.id FROM c WHERE c.pk = 'p3' AND FullTextContains(c.t, 'kingdom')",
        "SELECT TOP 5 c.id FROM c WHERE c.pk = 'p3' ORDER BY RANK FullTextScore(c.t, 'music')",
        // The best found without scoring every posting, and (the filter turning some down)
        // every document after them; a conjunction's first documents in key order.
        "SELECT TOP 10 c.id FROM c WHERE c.pk != 'p3' ORDER BY RANK FullTextScore(c.t, 'music', 'kingdom', 'river')",
        "SELECT TOP 7 c.id FROM c WHERE c.pk != 'p1' ORDER BY RANK FullTextScore(c.t, 'bridge')",
        "SELECT TOP 3 c.id FROM c WHERE FullTextContainsAll(c.t, 'river', 'music', 'stone')",
    ];
    let same = |round: &'static str| {
        let s = &s;
        async move {
            for sql in sqls {
                let (a, b) = (query(s, "warm", sql).await, query(s, "cold", sql).await);
                assert_eq!(a.status, StatusCode::OK, "{a:?}");
                let mut x = ids(&a);
                let mut y = ids(&b);
                if !sql.contains("RANK") {
                    x.sort();
                    y.sort();
                }
                assert_eq!(x, y, "{round}: {sql}");
                assert!(
                    !x.is_empty() || round == "never",
                    "{round}: {sql} found nothing"
                );
            }
        }
    };
    same("before").await;
    same("cached").await;
    let write = |coll: &'static str, id: String, pk: String, t: Option<&'static str>| {
        let s = &s;
        async move {
            let h = json!([pk]).to_string();
            let path = format!("/dbs/{DB}/colls/{coll}/docs");
            let r = match t {
                Some(t) => {
                    s.post(
                        &path,
                        &[
                            ("x-ms-documentdb-partitionkey", &h),
                            ("x-ms-documentdb-is-upsert", "true"),
                        ],
                        json!({"id": id, "pk": pk, "t": t}),
                    )
                    .await
                }
                None => {
                    let doc = format!("{path}/{id}");
                    let h = [("x-ms-documentdb-partitionkey", h.as_str())];
                    s.request(reqwest::Method::DELETE, &doc, &h, None).await
                }
            };
            assert!(r.status.is_success(), "{r:?}");
        }
    };
    let music: Vec<usize> = (0..texts.len())
        .filter(|&i| {
            analyze(&texts[i], Language::EnUs)
                .iter()
                .any(|w| w == "music")
        })
        .take(6)
        .collect();
    for coll in ["warm", "cold"] {
        write(
            coll,
            "new1".into(),
            "p3".into(),
            Some("music of the kingdom"),
        )
        .await;
        write(
            coll,
            "new2".into(),
            "p4".into(),
            Some("kingdom music music"),
        )
        .await;
        // Changed to drop the word, and deleted.
        let (a, b) = (music[0], music[1]);
        write(
            coll,
            format!("d{a}"),
            format!("p{}", a % 13),
            Some("a river"),
        )
        .await;
        write(coll, format!("d{b}"), format!("p{}", b % 13), None).await;
    }
    same("after writes").await;
    // A write that leaves every text as it was keeps the kept word totals; then one that
    // changes a length in one partition: the rankings still agree.
    let (c, d) = (music[2], music[3]);
    let same_text: &'static str = Box::leak(texts[c].clone().into_boxed_str());
    for coll in ["warm", "cold"] {
        write(
            coll,
            format!("d{c}"),
            format!("p{}", c % 13),
            Some(same_text),
        )
        .await;
    }
    same("after a write leaving the texts").await;
    for coll in ["warm", "cold"] {
        let longer = "music kingdom river music stone bridge music";
        write(coll, format!("d{d}"), format!("p{}", d % 13), Some(longer)).await;
    }
    same("after one length changed").await;
}
