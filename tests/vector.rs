//! Vector indexes answer `ORDER BY VectorDistance` top-k queries: flat exactly, quantizedFlat
//! and diskANN within a recall bound of an exact scan computed here, across four physical
//! partitions, with `WHERE` filters (k rows that pass, not the passing part of k), a writer's
//! own writes visible to its next query, and the index rebuilt from the documents on restart.
//! (The service's "Vector search in Azure Cosmos DB for NoSQL" page defines the kinds.)

use reqwest::StatusCode;
use serde_json::{json, Value};
use strata_server::store::container::Limits;
use strata_tests::{Options, Resp, TestServer};

const DB: &str = "vec";
const DIMS: usize = 16;

/// A seeded generator of clustered vectors (as embeddings are): 20 centres, each vector a
/// centre plus noise.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    fn vectors(&mut self, n: usize) -> Vec<Vec<f64>> {
        let centres: Vec<Vec<f64>> = (0..20)
            .map(|_| (0..DIMS).map(|_| self.next() * 2.0 - 1.0).collect())
            .collect();
        (0..n)
            .map(|i| {
                centres[i % 20]
                    .iter()
                    .map(|c| c + (self.next() - 0.5) * 0.6)
                    .collect()
            })
            .collect()
    }
}

fn cosine(a: &[f64], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f64 = a.iter().map(|x| x * x).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| x * x).sum::<f64>().sqrt();
    dot / (na * nb)
}

/// Every document's index, nearest to `q` first (by cosine, computed here).
fn nearest(q: &[f64], vs: &[Vec<f64>]) -> Vec<(f64, usize)> {
    let mut all: Vec<(f64, usize)> = vs
        .iter()
        .enumerate()
        .map(|(i, v)| (-cosine(q, v), i))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    all
}

async fn query(s: &TestServer, coll: &str, sql: &str, params: Value, explain: bool) -> Resp {
    let mut h = vec![
        ("x-ms-documentdb-isquery", "true"),
        ("content-type", "application/query+json"),
        ("x-ms-documentdb-query-enablecrosspartition", "true"),
        ("x-ms-max-item-count", "1000"),
    ];
    if explain {
        h.push(("x-strata-explain", "true"));
    }
    s.post(
        &format!("/dbs/{DB}/colls/{coll}/docs"),
        &h,
        json!({"query": sql, "parameters": params}),
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

/// Documents a query read (its route header's `scanned`).
fn scanned(r: &Resp) -> u64 {
    r.header("x-strata-query-route")
        .and_then(|s| s.rsplit("scanned=").next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(u64::MAX)
}

fn plan(r: &Resp) -> String {
    strata_query::protocol::unescape_plan(r.header("x-strata-query-plan").unwrap_or_default())
}

fn four_partitions(data_dir: Option<std::path::PathBuf>) -> Options {
    Options {
        data_dir,
        limits: Some(Limits {
            initial_partitions: Some(4),
            // On disk, no memory for rows: every linked row is read from the index's file
            // (`vector::rows`), as an index past the budget reads its oldest.
            vector_rows_memory_bytes: 0,
            ..Limits::default()
        }),
        ..Options::default()
    }
}

async fn make(s: &TestServer, coll: &str, kind: &str) {
    make_with(s, coll, kind, "cosine").await;
}

async fn make_with(s: &TestServer, coll: &str, kind: &str, distance: &str) {
    s.setup_with(
        DB,
        coll,
        json!({"partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2},
            "vectorEmbeddingPolicy": {"vectorEmbeddings": [
                {"path": "/v", "dataType": "float32", "dimensions": DIMS, "distanceFunction": distance}]},
            "indexingPolicy": {"vectorIndexes": [{"path": "/v", "type": kind}]}}),
    )
    .await;
}

async fn load(s: &TestServer, coll: &str, vs: &[Vec<f64>]) {
    load_from(s, coll, vs, 0).await;
}

/// Loads `vs[from..]` as documents `d{i}`.
async fn load_from(s: &TestServer, coll: &str, vs: &[Vec<f64>], from: usize) {
    for (i, v) in vs.iter().enumerate().skip(from) {
        let pk = format!("p{}", i % 50);
        let r = s
            .create(
                DB,
                coll,
                &json!([pk]),
                json!({"id": format!("d{i}"), "pk": pk, "cat": i % 3, "v": v}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    }
}

/// Waits until the plan of `sql` says the index serves it (a build or restart reads the
/// documents on a thread of its own).
async fn until_indexed(s: &TestServer, coll: &str, sql: &str, params: Value) -> String {
    for _ in 0..200 {
        let p = plan(&query(s, coll, sql, params.clone(), true).await);
        if p.contains("candidates from the") {
            return p;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the vector index never became ready for {sql}");
}

/// recall@10 of each kind against an exact scan, with and without a filter.
#[tokio::test]
async fn vector_indexes_find_the_nearest_documents_across_partitions() {
    let s = TestServer::start_with(four_partitions(None)).await;
    let mut g = Gen(7);
    let vs = g.vectors(2400);
    let queries = g.vectors(20);
    for (kind, floor) in [("flat", 1.0), ("quantizedFlat", 0.9), ("diskANN", 0.9)] {
        let coll = kind.to_lowercase();
        make(&s, &coll, kind).await;
        load(&s, &coll, &vs).await;
        let top = "SELECT TOP 10 c.id FROM c ORDER BY VectorDistance(c.v, @q)";
        let filtered =
            "SELECT TOP 10 c.id, c.cat FROM c WHERE c.cat = 1 ORDER BY VectorDistance(c.v, @q)";
        let p = until_indexed(&s, &coll, top, json!([{"name": "@q", "value": queries[0]}])).await;
        assert!(
            p.contains(&format!(
                "candidates from the {kind} index on /v (2400 vectors"
            )),
            "{p}"
        );
        let (mut hits, mut fhits) = (0usize, 0usize);
        let (mut read, mut fread) = (0u64, 0u64);
        let with_pk = "SELECT TOP 10 c.id, c.pk FROM c ORDER BY VectorDistance(c.v, @q)";
        for q in &queries {
            let params = json!([{"name": "@q", "value": q}]);
            let exact = nearest(q, &vs);
            let want = |rows: &mut dyn Iterator<Item = &(f64, usize)>| -> Vec<String> {
                rows.take(10).map(|(_, i)| format!("d{i}")).collect()
            };
            let r = query(&s, &coll, top, params.clone(), false).await;
            assert_eq!(r.status, StatusCode::OK, "{r:?}");
            let got = ids(&r);
            assert_eq!(got.len(), 10, "{r:?}");
            // The same page with a property the key does not hold: read from the documents.
            let r = query(&s, &coll, with_pk, params.clone(), false).await;
            assert_eq!(ids(&r), got, "{r:?}");
            read += scanned(&r);
            hits += want(&mut exact.iter())
                .iter()
                .filter(|i| got.contains(i))
                .count();
            let r = query(&s, &coll, filtered, params, false).await;
            fread += scanned(&r);
            let got = ids(&r);
            assert_eq!(got.len(), 10, "a filter still gives k rows: {r:?}");
            assert!(r.json["Documents"]
                .as_array()
                .is_some_and(|d| d.iter().all(|d| d["cat"] == 1)));
            fhits += want(&mut exact.iter().filter(|(_, i)| i % 3 == 1))
                .iter()
                .filter(|i| got.contains(i))
                .count();
        }
        let (recall, frecall) = (hits as f64 / 200.0, fhits as f64 / 200.0);
        assert!(recall >= floor, "{kind}: recall@10 {recall}");
        assert!(frecall >= floor, "{kind}: filtered recall@10 {frecall}");
        // The four partitions' candidates are merged before any document is read: a TOP 10
        // reads ten documents (a tie at the boundary may add one), not ten per partition;
        // under a filter that one in three passes, about thirty.
        let (read, fread) = (read as f64 / 20.0, fread as f64 / 20.0);
        assert!(read <= 11.0, "{kind}: {read} documents read per query");
        assert!(
            fread <= 45.0,
            "{kind}: {fread} documents read per filtered query"
        );
        // TOP 0 reads nothing and answers nothing.
        let none = "SELECT TOP 0 c.id FROM c ORDER BY VectorDistance(c.v, @q)";
        let r = query(
            &s,
            &coll,
            none,
            json!([{"name": "@q", "value": queries[0]}]),
            false,
        )
        .await;
        assert_eq!(r.status, StatusCode::OK, "{r:?}");
        assert!(ids(&r).is_empty(), "{r:?}");
    }
    // Vectors of float32 numbers, as embeddings are: the index's rows hold them exactly, so
    // a page of ids and distances comes from the candidates' keys and the rows, without a
    // document read — except where documents may expire (one whose TTL passed is not
    // returned, purged or not).
    let f32s: Vec<Vec<f64>> = vs[..300]
        .iter()
        .map(|v| v.iter().map(|x| f64::from(*x as f32)).collect())
        .collect();
    let top = "SELECT TOP 10 c.id FROM c ORDER BY VectorDistance(c.v, @q)";
    let with_pk = "SELECT TOP 10 c.id, c.pk FROM c ORDER BY VectorDistance(c.v, @q)";
    for (coll, ttl, kind) in [("exact", None, "diskANN"), ("expiring", Some(-1), "flat")] {
        s.setup_with(
            DB,
            coll,
            json!({"partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2}, "defaultTtl": ttl,
                "vectorEmbeddingPolicy": {"vectorEmbeddings": [
                    {"path": "/v", "dataType": "float32", "dimensions": DIMS, "distanceFunction": "cosine"}]},
                "indexingPolicy": {"vectorIndexes": [{"path": "/v", "type": kind}]}}),
        )
        .await;
        load(&s, coll, &f32s).await;
        let params = json!([{"name": "@q", "value": queries[0]}]);
        until_indexed(&s, coll, top, params.clone()).await;
        let r = query(&s, coll, top, params.clone(), false).await;
        let from_docs = query(&s, coll, with_pk, params, false).await;
        assert_eq!(ids(&r), ids(&from_docs), "{r:?}");
        assert_eq!(ids(&r).len(), 10, "{r:?}");
        match ttl {
            None => assert_eq!(scanned(&r), 0, "{coll}: {r:?}"),
            Some(_) => assert!(scanned(&r) >= 10, "{coll}: {r:?}"),
        }
        assert!(scanned(&from_docs) >= 10, "{from_docs:?}");
    }
}

/// The index follows splits: a container that splits while it is loaded still finds the
/// nearest documents of each new partition (the parent's shard serves both children until
/// new vectors go to theirs).
#[tokio::test]
async fn the_index_follows_splits() {
    let s = TestServer::start_with(Options {
        limits: Some(Limits {
            initial_partitions: Some(1),
            partition_split_bytes: 96 * 1024,
            ..Limits::default()
        }),
        ..Options::default()
    })
    .await;
    make(&s, "split", "diskANN").await;
    let mut g = Gen(3);
    let vs = g.vectors(2000);
    load(&s, "split", &vs[..1000]).await;
    let top = "SELECT TOP 10 c.id FROM c ORDER BY VectorDistance(c.v, @q)";
    let queries = g.vectors(10);
    until_indexed(
        &s,
        "split",
        top,
        json!([{"name": "@q", "value": queries[0]}]),
    )
    .await;
    load_from(&s, "split", &vs, 1000).await;
    let ranges = s
        .get(&format!("/dbs/{DB}/colls/split/pkranges"), &[])
        .await
        .json["PartitionKeyRanges"]
        .as_array()
        .map_or(0, Vec::len);
    assert!(ranges >= 3, "the container split: {ranges} ranges");
    let mut hits = 0;
    for q in &queries {
        let exact = nearest(q, &vs);
        let r = query(&s, "split", top, json!([{"name": "@q", "value": q}]), false).await;
        let got = ids(&r);
        assert_eq!(got.len(), 10, "{r:?}");
        hits += exact[..10]
            .iter()
            .filter(|(_, i)| got.contains(&format!("d{i}")))
            .count();
    }
    assert!(hits >= 90, "recall@10 after splits: {hits}/100");
}

/// Pages of a query whose documents tie (every vector points the same way: cosine 1 for
/// all, as the Python suite's `test_vector_query_large_data`) hold every document once: ties
/// are ordered by position, which the index's own order does not follow.
#[tokio::test]
async fn tied_distances_page_through_every_document() {
    let s = TestServer::start_with(four_partitions(None)).await;
    make(&s, "ties", "flat").await;
    let vs: Vec<Vec<f64>> = (1..=1200)
        .map(|i| vec![f64::from(i) * 1e-4; DIMS])
        .collect();
    load(&s, "ties", &vs).await;
    let q = vec![1.0; DIMS];
    let sql = "SELECT c.id FROM c ORDER BY VectorDistance(c.v, @q)";
    until_indexed(&s, "ties", sql, json!([{"name": "@q", "value": q}])).await;
    let (rows, pages) = s
        .query_all(
            DB,
            "ties",
            sql,
            json!([{"name": "@q", "value": q}]),
            &[("x-ms-max-item-count", "100")],
        )
        .await;
    let mut got: Vec<String> = rows
        .iter()
        .map(|r| r["id"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(pages.len() > 1, "paged");
    got.sort();
    got.dedup();
    assert_eq!(got.len(), 1200, "every document once");
}

/// A writer's next query sees its write: a new nearest document is found at once, an update
/// moves it, a delete removes it.
#[tokio::test]
async fn a_writers_next_query_sees_its_vector() {
    let s = TestServer::start_with(four_partitions(None)).await;
    make(&s, "rw", "diskANN").await;
    let mut g = Gen(11);
    load(&s, "rw", &g.vectors(1500)).await;
    let q: Vec<f64> = (0..DIMS).map(|i| if i == 3 { 5.0 } else { 0.01 }).collect();
    let sql = "SELECT TOP 1 c.id FROM c ORDER BY VectorDistance(c.v, @q)";
    let params = json!([{"name": "@q", "value": q}]);
    until_indexed(&s, "rw", sql, params.clone()).await;
    let doc = json!({"id": "new", "pk": "x", "cat": 0, "v": q});
    let r = s.create(DB, "rw", &json!(["x"]), doc).await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(
        ids(&query(&s, "rw", sql, params.clone(), false).await),
        ["new"]
    );
    let far: Vec<f64> = q.iter().map(|x| -x).collect();
    let r = s
        .request(
            reqwest::Method::PUT,
            &format!("/dbs/{DB}/colls/rw/docs/new"),
            &[("x-ms-documentdb-partitionkey", r#"["x"]"#)],
            Some(json!({"id": "new", "pk": "x", "cat": 0, "v": far})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_ne!(
        ids(&query(&s, "rw", sql, params.clone(), false).await),
        ["new"]
    );
    let r = s
        .request(
            reqwest::Method::DELETE,
            &format!("/dbs/{DB}/colls/rw/docs/new"),
            &[("x-ms-documentdb-partitionkey", r#"["x"]"#)],
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{r:?}");
    let far_sql = "SELECT TOP 1 c.id FROM c ORDER BY VectorDistance(c.v, @q)";
    let r = query(
        &s,
        "rw",
        far_sql,
        json!([{"name": "@q", "value": far}]),
        false,
    )
    .await;
    assert_ne!(ids(&r), ["new"]);
}

/// The index lives in memory and is rebuilt from the stored documents when the server starts
/// again: the same query gives the same answer, from the index.
#[tokio::test]
async fn the_index_is_rebuilt_from_the_documents_after_a_restart() {
    let dir = std::env::temp_dir().join(format!("strata-vector-restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut g = Gen(5);
    let vs = g.vectors(1200);
    let q = json!([{"name": "@q", "value": g.vectors(1)[0]}]);
    let sql = "SELECT TOP 5 c.id FROM c ORDER BY VectorDistance(c.v, @q)";
    let before = {
        let s = TestServer::start_with(four_partitions(Some(dir.clone()))).await;
        make(&s, "keep", "quantizedFlat").await;
        load(&s, "keep", &vs).await;
        until_indexed(&s, "keep", sql, q.clone()).await;
        let r = query(&s, "keep", sql, q.clone(), false).await;
        s.stop().await;
        ids(&r)
    };
    let s = TestServer::start_with(four_partitions(Some(dir.clone()))).await;
    let p = until_indexed(&s, "keep", sql, q.clone()).await;
    assert!(p.contains("quantizedFlat index on /v (1200 vectors"), "{p}");
    assert_eq!(ids(&query(&s, "keep", sql, q, false).await), before);
    s.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// The snapshot files in `dir`.
fn snapshots(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir.join("vector-snapshots"))
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "vectors"))
                .collect()
        })
        .unwrap_or_default()
}

/// The plan of the first query after a restart: it waits for the index being read back from
/// its snapshot instead of ranking every document.
async fn first_after_restart(s: &TestServer, sql: &str, q: Value) -> String {
    let p = plan(&query(s, "snap", sql, q, true).await);
    assert!(p.contains("candidates from the"), "not from the index: {p}");
    p
}

/// A clean stop writes the diskANN graph beside the data and the next start reads it back
/// (the file is consumed) and answers as before. A snapshot older than the documents — as a
/// `kill -9` after an earlier clean stop leaves — is reconciled with them: deleted documents
/// are gone from the index, replaced vectors are found at their new place, added ones are in.
#[tokio::test]
async fn a_restart_reads_the_index_back_and_reconciles_it_with_the_documents() {
    let dir = std::env::temp_dir().join(format!("strata-vector-snapshot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut g = Gen(11);
    let vs = g.vectors(1200);
    let q = json!([{"name": "@q", "value": g.vectors(1)[0]}]);
    let sql = "SELECT TOP 5 c.id FROM c ORDER BY VectorDistance(c.v, @q)";
    let before = {
        let s = TestServer::start_with(four_partitions(Some(dir.clone()))).await;
        make(&s, "snap", "diskANN").await;
        load(&s, "snap", &vs).await;
        until_indexed(&s, "snap", sql, q.clone()).await;
        let r = query(&s, "snap", sql, q.clone(), false).await;
        s.stop().await;
        ids(&r)
    };
    let files = snapshots(&dir);
    assert_eq!(files.len(), 1, "one snapshot for one index: {files:?}");
    // The index kept its rows in a file of the data folder, unlinked as soon as it was
    // made: the folder is there, and nothing is left in it.
    let rows = std::fs::read_dir(dir.join("vector-rows")).map(|d| d.count());
    assert_eq!(rows.ok(), Some(0), "an empty vector-rows folder");
    let stale = dir.join("stale-copy");
    std::fs::copy(&files[0], &stale).unwrap();
    // Read back: the same answers, the file consumed. Then the documents change.
    let s = TestServer::start_with(four_partitions(Some(dir.clone()))).await;
    let p = first_after_restart(&s, sql, q.clone()).await;
    assert!(p.contains("diskANN index on /v (1200 vectors"), "{p}");
    assert!(
        snapshots(&dir).is_empty(),
        "the snapshot was read and removed"
    );
    assert_eq!(ids(&query(&s, "snap", sql, q.clone(), false).await), before);
    let fresh = g.vectors(150);
    for i in 0..100 {
        let pk = format!("p{}", i % 50);
        let r = s
            .request(
                reqwest::Method::DELETE,
                &format!("/dbs/{DB}/colls/snap/docs/d{i}"),
                &[("x-ms-documentdb-partitionkey", &json!([pk]).to_string())],
                None,
            )
            .await;
        assert_eq!(r.status, StatusCode::NO_CONTENT, "{r:?}");
    }
    for (j, i) in (100..200).enumerate() {
        let pk = format!("p{}", i % 50);
        let r = s
            .request(
                reqwest::Method::PUT,
                &format!("/dbs/{DB}/colls/snap/docs/d{i}"),
                &[("x-ms-documentdb-partitionkey", &json!([pk]).to_string())],
                Some(json!({"id": format!("d{i}"), "pk": pk, "cat": 0, "v": fresh[j]})),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{r:?}");
    }
    // d200 keeps its document but loses its vector.
    let r = s
        .request(
            reqwest::Method::PUT,
            &format!("/dbs/{DB}/colls/snap/docs/d200"),
            &[("x-ms-documentdb-partitionkey", r#"["p0"]"#)],
            Some(json!({"id": "d200", "pk": "p0", "cat": 0})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let mut all = vs.clone();
    all.extend(fresh[100..].iter().cloned());
    load_from(&s, "snap", &all, 1200).await;
    s.stop().await;
    // The stale snapshot in place of the one this stop wrote.
    let files = snapshots(&dir);
    assert_eq!(files.len(), 1);
    std::fs::rename(&stale, &files[0]).unwrap();
    let s = TestServer::start_with(four_partitions(Some(dir.clone()))).await;
    let p = first_after_restart(&s, sql, q.clone()).await;
    // 1,149 live; the snapshot's 201 old slots (100 deleted, 100 replaced, one vector
    // removed) show it was used (a build from the documents alone has none).
    assert!(p.contains("diskANN index on /v (1149 vectors"), "{p}");
    assert!(p.contains("201 replaced or deleted"), "{p}");
    let top1 = "SELECT TOP 1 c.id FROM c ORDER BY VectorDistance(c.v, @q)";
    for i in [0usize, 57, 99, 200] {
        let got = ids(&query(
            &s,
            "snap",
            top1,
            json!([{"name": "@q", "value": vs[i]}]),
            false,
        )
        .await);
        assert_ne!(got, vec![format!("d{i}")], "deleted d{i} is still indexed");
    }
    for (j, i) in [(0usize, 100usize), (42, 142), (99, 199)] {
        let got = ids(&query(
            &s,
            "snap",
            top1,
            json!([{"name": "@q", "value": fresh[j]}]),
            false,
        )
        .await);
        assert_eq!(
            got,
            vec![format!("d{i}")],
            "replaced d{i} at its new vector"
        );
    }
    for i in [1200usize, 1249] {
        let got = ids(&query(
            &s,
            "snap",
            top1,
            json!([{"name": "@q", "value": all[i]}]),
            false,
        )
        .await);
        assert_eq!(got, vec![format!("d{i}")], "added d{i}");
    }
    s.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// One legal but extreme vector (`[1e30, …]`, a float32) among the first thousand — the ones
/// the quantizer is fitted to — must not cost the others their recall, before a restart or
/// after it (which fits the quantizer again from the stored documents).
#[tokio::test]
async fn an_outlier_vector_does_not_ruin_recall_before_or_after_a_restart() {
    let dir = std::env::temp_dir().join(format!("strata-vector-outlier-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut g = Gen(11);
    let mut vs = g.vectors(1500);
    vs[3] = vec![1e30; DIMS];
    let queries = g.vectors(20);
    let sql = "SELECT TOP 10 c.id FROM c ORDER BY VectorDistance(c.v, @q)";
    let kinds = [("qf", "quantizedFlat"), ("ann", "diskANN")];
    {
        let s = TestServer::start_with(four_partitions(Some(dir.clone()))).await;
        for (coll, kind) in kinds {
            make_with(&s, coll, kind, "euclidean").await;
            load(&s, coll, &vs).await;
            let q = json!([{"name": "@q", "value": queries[0]}]);
            until_indexed(&s, coll, sql, q).await;
            let r = euclidean_recall(&s, coll, sql, &vs, &queries).await;
            eprintln!("{kind}: recall@10 {r} with the outlier");
            assert!(r >= 0.95, "{kind}: recall@10 {r} with the outlier");
        }
        s.stop().await;
    }
    let s = TestServer::start_with(four_partitions(Some(dir.clone()))).await;
    for (coll, kind) in kinds {
        until_indexed(&s, coll, sql, json!([{"name": "@q", "value": queries[0]}])).await;
        let r = euclidean_recall(&s, coll, sql, &vs, &queries).await;
        eprintln!("{kind}: recall@10 {r} with the outlier, after a restart");
        assert!(
            r >= 0.95,
            "{kind}: recall@10 {r} with the outlier, after a restart"
        );
    }
    s.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Documents without a vector rank after every scored one, whichever way the distance sorts:
/// a `distanceFunction: euclidean` option on a cosine container (ascending, no index measures
/// it) put them first, since undefined sorts before numbers.
#[tokio::test]
async fn documents_without_a_vector_rank_last_in_either_direction() {
    let s = TestServer::start().await;
    make(&s, "mixed", "flat").await;
    let mut g = Gen(3);
    let vs = g.vectors(6);
    load(&s, "mixed", &vs).await;
    for i in 0..3 {
        let pk = format!("n{i}");
        let r = s
            .create(
                DB,
                "mixed",
                &json!([pk]),
                json!({"id": format!("none{i}"), "pk": pk}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED);
    }
    let params = json!([{"name": "@q", "value": vs[0]}]);
    for options in [
        "",
        ", false, {'distanceFunction': 'euclidean'}",
        ", false, {'distanceFunction': 'dotproduct'}",
    ] {
        let sql = format!("SELECT TOP 9 c.id FROM c ORDER BY VectorDistance(c.v, @q{options})");
        let r = query(&s, "mixed", &sql, params.clone(), false).await;
        assert_eq!(r.status, StatusCode::OK, "{r:?}");
        let got = ids(&r);
        assert_eq!(got.len(), 9, "{sql}: {got:?}");
        assert!(
            got[..6].iter().all(|id| id.starts_with('d')),
            "{sql}: {got:?}"
        );
        if !options.contains("dotproduct") {
            assert_eq!(got[0], "d0", "{sql}: the query's own vector first");
        }
        let top = format!("SELECT TOP 3 c.id FROM c ORDER BY VectorDistance(c.v, @q{options})");
        let got = ids(&query(&s, "mixed", &top, params.clone(), false).await);
        assert!(got.iter().all(|id| id.starts_with('d')), "{top}: {got:?}");
    }
}

/// recall@10 of `sql` (a top 10 by euclidean distance) against an exact scan.
async fn euclidean_recall(
    s: &TestServer,
    coll: &str,
    sql: &str,
    vs: &[Vec<f64>],
    queries: &[Vec<f64>],
) -> f64 {
    let l2 = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f64>();
    let mut hits = 0;
    for q in queries {
        let mut exact: Vec<(f64, usize)> =
            vs.iter().enumerate().map(|(i, v)| (l2(q, v), i)).collect();
        exact.sort_by(|a, b| a.0.total_cmp(&b.0));
        let r = query(s, coll, sql, json!([{"name": "@q", "value": q}]), false).await;
        assert_eq!(r.status, StatusCode::OK, "{r:?}");
        let got = ids(&r);
        hits += exact[..10]
            .iter()
            .filter(|(_, i)| got.contains(&format!("d{i}")))
            .count();
    }
    hits as f64 / (10 * queries.len()) as f64
}

/// A replace that adds a vector index builds it from the documents already stored, and
/// queries use it once built (before, they rank by evaluating documents).
#[tokio::test]
async fn an_added_vector_index_is_built_from_the_stored_documents() {
    let s = TestServer::start_with(four_partitions(None)).await;
    let emb = |p: &str| json!({"path": p, "dataType": "float32", "dimensions": DIMS, "distanceFunction": "cosine"});
    let mut def = json!({"id": "grow", "partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2},
        "vectorEmbeddingPolicy": {"vectorEmbeddings": [emb("/v"), emb("/w")]},
        "indexingPolicy": {"vectorIndexes": [{"path": "/v", "type": "flat"}]}});
    s.setup_with(DB, "grow", def.clone()).await;
    let mut g = Gen(9);
    for (i, v) in g.vectors(300).iter().enumerate() {
        let pk = format!("p{}", i % 7);
        let doc = json!({"id": format!("d{i}"), "pk": pk, "v": v, "w": v});
        assert_eq!(
            s.create(DB, "grow", &json!([pk]), doc).await.status,
            StatusCode::CREATED
        );
    }
    let q = json!([{"name": "@q", "value": g.vectors(1)[0]}]);
    let on_w = "SELECT TOP 5 c.id FROM c ORDER BY VectorDistance(c.w, @q)";
    let on_v = "SELECT TOP 5 c.id FROM c ORDER BY VectorDistance(c.v, @q)";
    let p = plan(&query(&s, "grow", on_w, q.clone(), true).await);
    assert!(p.contains("exact over every candidate"), "{p}");
    let exact = ids(&query(&s, "grow", on_w, q.clone(), false).await);
    def["indexingPolicy"]["vectorIndexes"] =
        json!([{"path": "/v", "type": "flat"}, {"path": "/w", "type": "diskANN"}]);
    let r = s
        .request(
            reqwest::Method::PUT,
            &format!("/dbs/{DB}/colls/grow"),
            &[],
            Some(def),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    let p = until_indexed(&s, "grow", on_w, q.clone()).await;
    assert!(p.contains("diskANN index on /w (300 vectors"), "{p}");
    assert_eq!(ids(&query(&s, "grow", on_w, q.clone(), false).await), exact);
    let p = until_indexed(&s, "grow", on_v, q).await;
    assert!(p.contains("flat index on /v (300 vectors"), "{p}");
}

/// Replacing every vector several times leaves tombstones in the index (a slot is never reused
/// in place); once they are as many as the live vectors (and past a thousand) the index is
/// rebuilt from its live vectors in the background, while it keeps answering, and the
/// nearest documents are still found by their newest vectors.
#[tokio::test]
async fn replaced_vectors_are_consolidated_away() {
    let s = TestServer::start_with(four_partitions(None)).await;
    let coll = "churn";
    make(&s, coll, "diskANN").await;
    let mut g = Gen(11);
    let mut vs = g.vectors(300);
    load(&s, coll, &vs).await;
    let top = "SELECT TOP 10 c.id FROM c ORDER BY VectorDistance(c.v, @q)";
    let q0 = json!([{"name": "@q", "value": vs[0]}]);
    until_indexed(&s, coll, top, q0.clone()).await;
    let replaced = |p: &str| -> u64 {
        p.split(" replaced or deleted")
            .next()
            .filter(|head| head.len() < p.len())
            .and_then(|head| head.rsplit(", ").next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    // Four rounds of new vectors for every document: 1,200 replaced.
    for _ in 0..4 {
        vs = g.vectors(300);
        for (i, v) in vs.iter().enumerate() {
            let pk = format!("p{}", i % 50);
            let h = json!([pk]).to_string();
            let r = s
                .post(
                    &format!("/dbs/{DB}/colls/{coll}/docs"),
                    &[
                        ("x-ms-documentdb-partitionkey", &h),
                        ("x-ms-documentdb-is-upsert", "true"),
                    ],
                    json!({"id": format!("d{i}"), "pk": pk, "cat": i % 3, "v": v}),
                )
                .await;
            assert!(r.status.is_success(), "{r:?}");
        }
    }
    // Consolidation started at 1,000 tombstones; what remains is at most the 200 written
    // while it ran, far from 1,200.
    let mut last = String::new();
    for _ in 0..400 {
        last = until_indexed(&s, coll, top, q0.clone()).await;
        if replaced(&last) < 400 && !last.contains("not yet linked") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(replaced(&last) < 400, "{last}");
    assert!(last.contains("(300 vectors"), "{last}");
    let mut hits = 0usize;
    let queries = g.vectors(10);
    for q in &queries {
        let r = query(&s, coll, top, json!([{"name": "@q", "value": q}]), false).await;
        let got = ids(&r);
        hits += nearest(q, &vs)
            .iter()
            .take(10)
            .filter(|(_, i)| got.contains(&format!("d{i}")))
            .count();
    }
    assert!(
        hits >= 90,
        "recall@10 {} after consolidation",
        hits as f64 / 100.0
    );
}

/// `vectorIndexShardKey` (the service's sharded DiskANN, "Sharded DiskANN: focused vector
/// search"): one graph per value of the shard path. A query whose WHERE clause pins the value
/// searches that value's graph only (the plan says how many), finds that value's nearest and
/// no other's; a query that pins nothing searches every shard; a query over one partition
/// key's documents finds that key's nearest across the shards; a document whose shard value
/// changes moves to the new value's graph.
#[tokio::test]
async fn a_shard_key_gives_each_value_its_own_graph() {
    let s = TestServer::start_with(four_partitions(None)).await;
    let coll = "sharded";
    s.setup_with(
        DB,
        coll,
        json!({"partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2},
            "vectorEmbeddingPolicy": {"vectorEmbeddings": [
                {"path": "/v", "dataType": "float32", "dimensions": DIMS, "distanceFunction": "cosine"}]},
            "indexingPolicy": {"vectorIndexes": [
                {"path": "/v", "type": "diskANN", "vectorIndexShardKey": ["/tenant"]}]}}),
    )
    .await;
    let mut g = Gen(17);
    let vs = g.vectors(1800);
    let tenant = |i: usize| format!("t{}", i % 6);
    for (i, v) in vs.iter().enumerate() {
        let pk = format!("p{}", i % 50);
        let doc = json!({"id": format!("d{i}"), "pk": pk, "tenant": tenant(i), "v": v});
        let r = s.create(DB, coll, &json!([pk]), doc).await;
        assert_eq!(r.status, StatusCode::CREATED, "{r:?}");
    }
    let pinned = "SELECT TOP 10 c.id, c.tenant FROM c WHERE c.tenant = 't2' ORDER BY VectorDistance(c.v, @q)";
    let open = "SELECT TOP 10 c.id FROM c ORDER BY VectorDistance(c.v, @q)";
    let one_key =
        "SELECT TOP 10 c.id, c.pk FROM c WHERE c.pk = 'p7' ORDER BY VectorDistance(c.v, @q)";
    let queries = g.vectors(10);
    let q0 = json!([{"name": "@q", "value": queries[0]}]);
    let p = until_indexed(&s, coll, pinned, q0.clone()).await;
    assert!(p.contains("1 /tenant shard(s)"), "{p}");
    let p = until_indexed(&s, coll, open, q0).await;
    assert!(p.contains("every /tenant shard"), "{p}");
    let (mut hits, mut open_hits, mut key_hits) = (0, 0, 0);
    for q in &queries {
        let params = json!([{"name": "@q", "value": q}]);
        let exact = nearest(q, &vs);
        let best = |keep: &dyn Fn(usize) -> bool| -> Vec<String> {
            exact
                .iter()
                .filter(|(_, i)| keep(*i))
                .take(10)
                .map(|(_, i)| format!("d{i}"))
                .collect()
        };
        let r = query(&s, coll, pinned, params.clone(), false).await;
        let got = ids(&r);
        assert_eq!(got.len(), 10, "{r:?}");
        let tenants = r.json["Documents"].as_array().cloned().unwrap_or_default();
        assert!(tenants.iter().all(|d| d["tenant"] == "t2"), "{r:?}");
        hits += best(&|i| i % 6 == 2)
            .iter()
            .filter(|d| got.contains(d))
            .count();
        let got = ids(&query(&s, coll, open, params.clone(), false).await);
        open_hits += best(&|_| true).iter().filter(|d| got.contains(d)).count();
        let r = query(&s, coll, one_key, params, false).await;
        let got = ids(&r);
        let docs = r.json["Documents"].as_array().cloned().unwrap_or_default();
        assert!(docs.iter().all(|d| d["pk"] == "p7"), "{r:?}");
        key_hits += best(&|i| i % 50 == 7)
            .iter()
            .filter(|d| got.contains(d))
            .count();
    }
    assert!(hits >= 90, "recall@10 within one shard: {hits}/100");
    assert!(
        open_hits >= 90,
        "recall@10 over every shard: {open_hits}/100"
    );
    assert!(
        key_hits >= 90,
        "recall@10 within one partition key: {key_hits}/100"
    );
    // d5 (tenant t5) moves to t2 with the first query's vector: t2's graph has it, t5's not.
    let h = json!(["p5"]).to_string();
    let r = s
        .post(
            &format!("/dbs/{DB}/colls/{coll}/docs"),
            &[
                ("x-ms-documentdb-partitionkey", &h),
                ("x-ms-documentdb-is-upsert", "true"),
            ],
            json!({"id": "d5", "pk": "p5", "tenant": "t2", "v": queries[0]}),
        )
        .await;
    assert!(r.status.is_success(), "{r:?}");
    let params = json!([{"name": "@q", "value": queries[0]}]);
    let got = ids(&query(&s, coll, pinned, params.clone(), false).await);
    assert_eq!(got.first().map(String::as_str), Some("d5"), "{got:?}");
    let t5 = pinned.replace("'t2'", "'t5'");
    let got = ids(&query(&s, coll, &t5, params, false).await);
    assert!(!got.contains(&"d5".to_string()), "{got:?}");
}

/// Where the index's row holds a document's numbers exactly (each one a float32 value, as
/// embeddings written from a `Float32Array` or numpy `float32` are), it sorts by its own `f64`
/// score instead of parsing the document's vector: the rows, their order and the scores
/// returned are those of a container without a vector index, to the bit, for each distance
/// function, through pages, for documents that are not exact, for a zero vector (unscored:
/// last) and after a document is rewritten with numbers that round to the same float32 values
/// (the row stays, the document is no longer exact).
#[tokio::test]
async fn index_scores_are_the_evaluators_to_the_bit() {
    let s = TestServer::start_with(four_partitions(None)).await;
    let mut g = Gen(11);
    let mut vs = g.vectors(300);
    for (i, v) in vs.iter_mut().enumerate() {
        if i % 4 != 0 {
            v.iter_mut().for_each(|x| *x = f64::from(*x as f32));
        }
    }
    vs[5] = vec![0.0; DIMS];
    let queries = g.vectors(4);
    let sqls = [
        "SELECT c.id, VectorDistance(c.v, @q) AS s FROM c ORDER BY VectorDistance(c.v, @q)",
        "SELECT TOP 30 c.id FROM c ORDER BY VectorDistance(c.v, @q)",
        "SELECT TOP 30 c.id, c.cat FROM c WHERE c.cat != 2 ORDER BY VectorDistance(c.v, @q)",
    ];
    let pages = [("x-ms-max-item-count", "7")];
    for distance in ["cosine", "euclidean", "dotproduct"] {
        let (ix, plain) = (format!("exact-{distance}"), format!("plain-{distance}"));
        make_with(&s, &ix, "flat", distance).await;
        s.setup_with(
            DB,
            &plain,
            json!({"partitionKey": {"paths": ["/pk"], "kind": "Hash", "version": 2},
                "vectorEmbeddingPolicy": {"vectorEmbeddings": [
                    {"path": "/v", "dataType": "float32", "dimensions": DIMS, "distanceFunction": distance}]}}),
        )
        .await;
        load(&s, &ix, &vs).await;
        load(&s, &plain, &vs).await;
        let params = json!([{"name": "@q", "value": queries[0]}]);
        let p = until_indexed(&s, &ix, sqls[1], params).await;
        assert!(p.contains("flat index on /v (300 vectors"), "{p}");
        for round in 0..2 {
            for q in &queries {
                let params = json!([{"name": "@q", "value": q}]);
                for sql in sqls {
                    let (got, _) = s.query_all(DB, &ix, sql, params.clone(), &pages).await;
                    let (want, _) = s.query_all(DB, &plain, sql, params.clone(), &pages).await;
                    assert!(!want.is_empty(), "{sql}");
                    assert_eq!(got, want, "{distance}, round {round}: {sql}");
                }
            }
            // Every exact document rewritten with numbers a hair off its float32 values: the
            // same rows to the index, no longer the document's numbers.
            for (i, v) in vs.iter().enumerate().filter(|(i, _)| i % 4 != 0 && *i != 5) {
                let nudged: Vec<f64> = v.iter().map(|x| x * (1.0 + 1e-12)).collect();
                assert!(nudged.iter().zip(v).any(|(a, b)| a != b));
                let pk = format!("p{}", i % 50);
                let doc = json!({"id": format!("d{i}"), "pk": pk, "cat": i % 3, "v": nudged});
                for coll in [&ix, &plain] {
                    let r = s
                        .post(
                            &format!("/dbs/{DB}/colls/{coll}/docs"),
                            &[
                                ("x-ms-documentdb-partitionkey", &json!([pk]).to_string()),
                                ("x-ms-documentdb-is-upsert", "True"),
                            ],
                            doc.clone(),
                        )
                        .await;
                    assert!(r.status.is_success(), "{r:?}");
                }
            }
        }
    }
}
