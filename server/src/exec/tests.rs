//! The executor over an in-memory container of four physical partitions: paging with
//! continuations, the k-way ORDER BY merge, aggregates, DISTINCT, OFFSET/LIMIT and bad tokens,
//! without HTTP.

use super::*;
use crate::store::container::Limits;
use crate::store::{Store, StoreConfig};
use serde_json::json;
use strata_query::pk::epk::effective_partition_key;
use strata_query::pk::PartitionKey;

/// 100 items `{"id": "i<n>", "pk": "p<n % 10>", "n": n}` over four physical partitions.
async fn container() -> (Store, Arc<Container>) {
    let (store, c) = crate::store::tests::open_with_container(StoreConfig {
        data_dir: None,
        postgres: None,
        limits: Limits {
            initial_partitions: Some(4),
            ..Limits::default()
        },
    })
    .await;
    assert_eq!(c.partitions().ranges.len(), 4);
    for n in 0..100u64 {
        let pk = format!("p{}", n % 10);
        let key = PartitionKey::from_header(&json!([pk]).to_string()).expect("key");
        let epk = effective_partition_key(&c.pk, &key).expect("epk");
        let doc = match json!({"id": format!("i{n}"), "pk": pk, "n": n}) {
            Value::Object(m) => m,
            _ => unreachable!(),
        };
        let (_, token) = c
            .write(|t| crate::items::ops::put(t, &epk, &format!("i{n}"), doc, None))
            .expect("write");
        c.durable(token).await.expect("durable");
    }
    (store, c)
}

/// The plan of `p` over the whole container, `page` rows at a time (scans allowed where the
/// index excludes a filtered path).
pub(super) fn whole(
    c: &Container,
    p: &Arc<PreparedQuery>,
    page: usize,
    per_range: bool,
) -> Arc<Plan> {
    let scope = strata_query::sql::route_plan::RequestScope::whole();
    let paging = Paging {
        page_size: page,
        per_range,
    };
    let plan = Plan::new(c, Arc::clone(p), route(c, p, &scope), true, paging, None);
    Arc::new(plan.expect("plan"))
}

/// Every page of `sql` over the whole container, `page` rows at a time.
async fn pages(c: &Arc<Container>, sql: &str, page: usize) -> Vec<Vec<Value>> {
    let p = Arc::new(sql::prepare(sql, &[], Some(&c.pk)).expect("prepare"));
    let mut out = Vec::new();
    let mut token = None;
    for _ in 0..1000 {
        let got = run(Arc::clone(c), whole(c, &p, page, false), token)
            .await
            .expect("page");
        out.push(
            got.docs
                .iter()
                .map(|d| serde_json::from_slice(d).expect("json"))
                .collect(),
        );
        token = got.continuation;
        if token.is_none() {
            return out;
        }
    }
    panic!("{sql}: no end after 1000 pages");
}

fn numbers(rows: &[Value]) -> Vec<u64> {
    rows.iter().filter_map(|r| r["n"].as_u64()).collect()
}

#[tokio::test]
async fn streaming_pages_visit_every_document_once() {
    let (_s, c) = container().await;
    let all = pages(&c, "SELECT * FROM c", 7).await;
    assert!(all.len() >= 15, "100 rows in pages of 7");
    assert!(all.iter().all(|p| p.len() <= 7));
    let mut seen = numbers(&all.concat());
    seen.sort_unstable();
    assert_eq!(seen, (0..100).collect::<Vec<_>>());
    // SELECT * returns the stored documents, system properties included.
    assert!(all[0][0]["_etag"].is_string());
}

#[tokio::test]
async fn order_by_merges_partitions_across_pages() {
    let (_s, c) = container().await;
    let all = pages(&c, "SELECT c.n FROM c ORDER BY c.n DESC", 9).await;
    assert_eq!(numbers(&all.concat()), (0..100).rev().collect::<Vec<_>>());
    let window = pages(&c, "SELECT c.n FROM c ORDER BY c.n OFFSET 5 LIMIT 10", 4).await;
    assert_eq!(numbers(&window.concat()), (5..15).collect::<Vec<_>>());
}

#[tokio::test]
async fn aggregates_group_by_and_distinct_combine_partitions() {
    let (_s, c) = container().await;
    let totals = pages(&c, "SELECT VALUE [COUNT(1), SUM(c.n), MAX(c.n)] FROM c", 10).await;
    assert_eq!(totals.concat(), vec![json!([100, 4950, 99])]);
    let groups = pages(&c, "SELECT c.pk, COUNT(1) AS n FROM c GROUP BY c.pk", 100)
        .await
        .concat();
    assert_eq!(groups.len(), 10);
    assert!(groups.iter().all(|g| g["n"] == json!(10)), "{groups:?}");
    let mut keys: Vec<String> = pages(&c, "SELECT DISTINCT VALUE c.pk FROM c", 3)
        .await
        .concat()
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    keys.sort();
    assert_eq!(keys, (0..10).map(|i| format!("p{i}")).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_token_of_another_query_is_refused() {
    let (_s, c) = container().await;
    let first = Arc::new(sql::prepare("SELECT * FROM c", &[], Some(&c.pk)).expect("prepare"));
    let page = run(Arc::clone(&c), whole(&c, &first, 5, false), None)
        .await
        .expect("page");
    let token = page.continuation.expect("more pages");
    let other = Arc::new(
        sql::prepare("SELECT c.n FROM c ORDER BY c.n", &[], Some(&c.pk)).expect("prepare"),
    );
    let plan = whole(&c, &other, 5, false);
    let err = run(c, plan, Some(token)).await.err().expect("refused");
    assert!(matches!(err, ExecError::BadToken(_)), "{err:?}");
}

/// A page cut short by its time budget resumes exactly where it stopped: this is how a page
/// that outgrows the request's own task continues on the blocking pool.
#[tokio::test]
async fn a_page_out_of_time_resumes_where_it_stopped() {
    let (_s, c) = container().await;
    let p = sql::prepare("SELECT * FROM c WHERE c.n >= 0", &[], Some(&c.pk)).expect("prepare");
    let budget = Budget {
        rows: 1000,
        bytes: MAX_PAGE_BYTES,
        time: Duration::ZERO,
        per_range: false,
    };
    let (mut seen, mut token) = (Vec::new(), None);
    loop {
        let (page, out_of_time) = run_streaming(
            &c,
            &p,
            &access(&c, &p, false).expect("access"),
            &[EpkRange::full()],
            budget,
            token,
        )
        .expect("page");
        // One new document per exhausted budget (the last page finds none left).
        let last = page.continuation.is_none();
        assert_eq!(
            page.docs.len(),
            usize::from(!last),
            "progress on every page"
        );
        seen.extend(page.docs.iter().map(|d| {
            serde_json::from_slice::<Value>(d).expect("json")["n"]
                .as_u64()
                .expect("n")
        }));
        token = page.continuation;
        if token.is_none() {
            assert!(!out_of_time);
            break;
        }
        assert!(out_of_time);
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..100).collect::<Vec<_>>());
}

/// One page of `sql` with its counters.
async fn one_page(c: &Arc<Container>, sql: &str) -> Page {
    let p = Arc::new(sql::prepare(sql, &[], Some(&c.pk)).expect("prepare"));
    run(Arc::clone(c), whole(c, &p, 100, false), None)
        .await
        .expect("page")
}

#[tokio::test]
async fn the_index_reads_only_what_the_query_needs() {
    let (_s, c) = container().await;
    let eq = one_page(&c, "SELECT * FROM c WHERE c.n = 42").await;
    assert_eq!(
        (eq.docs.len(), eq.scanned),
        (1, 1),
        "equality loads its match only"
    );
    let within = one_page(&c, "SELECT VALUE c.n FROM c WHERE c.n >= 95").await;
    assert_eq!((within.docs.len(), within.scanned), (5, 5));
    let count = one_page(&c, "SELECT VALUE COUNT(1) FROM c WHERE c.pk = 'p3'").await;
    assert_eq!(count.docs, vec![Bytes::from("10")]);
    assert_eq!(count.scanned, 0, "an exact count reads no document");
    let all = one_page(&c, "SELECT VALUE COUNT(1) FROM c").await;
    assert_eq!((all.docs, all.scanned), (vec![Bytes::from("100")], 0));
    let top = one_page(&c, "SELECT TOP 3 VALUE c.n FROM c ORDER BY c.n DESC").await;
    assert_eq!(
        top.docs,
        vec![Bytes::from("99"), Bytes::from("98"), Bytes::from("97")]
    );
    assert!(
        top.scanned <= 4 * 3,
        "at most TOP per partition: {}",
        top.scanned
    );
    let scan = one_page(&c, "SELECT * FROM c WHERE CONTAINS(c.id, '42')").await;
    assert_eq!(scan.scanned, 100, "no index for CONTAINS");
}

/// Paged by physical partition (the gateway's paging), a plain query returns the same rows,
/// no page spans two partitions, and the last page carries no continuation.
#[tokio::test]
async fn pages_by_partition_end_at_partition_boundaries() {
    let (_s, c) = container().await;
    let p = Arc::new(sql::prepare("SELECT * FROM c", &[], Some(&c.pk)).expect("prepare"));
    let (mut token, mut pages, mut ids) = (None, 0, Vec::new());
    loop {
        let page = run(Arc::clone(&c), whole(&c, &p, 1000, true), token)
            .await
            .expect("page");
        pages += 1;
        ids.extend(page.docs.iter().map(|d| {
            serde_json::from_slice::<Value>(d).expect("json")["id"]
                .as_str()
                .expect("id")
                .to_string()
        }));
        token = page.continuation;
        if token.is_none() {
            break;
        }
    }
    assert_eq!(pages, 4, "one page per partition");
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 100);
    // A full last page: no continuation when nothing follows it.
    let all = run(Arc::clone(&c), whole(&c, &p, 100, false), None)
        .await
        .expect("page");
    assert_eq!(all.docs.len(), 100);
    assert!(all.continuation.is_none());
}

/// Descending, documents without the ORDER BY path come last, and the index has no entry for
/// them. A partition whose index walk fills exactly one page must still page on to them
/// (found by the index proptest: the page read as the partition's last, and no other
/// partition matched to keep the query going).
#[tokio::test]
async fn descending_pages_reach_documents_without_the_path() {
    let (_s, c) = container().await;
    for (id, m) in [("x1", 1), ("x2", 2)] {
        let key = PartitionKey::from_header(&json!(["p0"]).to_string()).expect("key");
        let epk = effective_partition_key(&c.pk, &key).expect("epk");
        let doc = match json!({"id": id, "pk": "p0", "m": m}) {
            Value::Object(m) => m,
            _ => unreachable!(),
        };
        let (_, token) = c
            .write(|t| crate::items::ops::put(t, &epk, id, doc, None))
            .expect("write");
        c.durable(token).await.expect("durable");
    }
    let p = Arc::new(
        sql::prepare(
            "SELECT VALUE c.id FROM c WHERE CONTAINS(c.pk, '0') ORDER BY c.m DESC",
            &[],
            Some(&c.pk),
        )
        .expect("prepare"),
    );
    for by_partition in [true, false] {
        let (mut token, mut ids) = (None, Vec::new());
        for _ in 0..1000 {
            let page = run(Arc::clone(&c), whole(&c, &p, 2, by_partition), token)
                .await
                .expect("page");
            ids.extend(
                page.docs
                    .iter()
                    .map(|d| serde_json::from_slice::<String>(d).expect("id")),
            );
            token = page.continuation;
            if token.is_none() {
                break;
            }
        }
        assert_eq!(ids[..2], ["x2", "x1"], "by partition: {by_partition}");
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 12, "by partition: {by_partition}");
    }
}

/// The plan is one value: what it prints is what runs — its route, its ranges, its paging.
#[tokio::test]
async fn the_executor_runs_the_plan_it_prints() {
    let (_s, c) = container().await;
    let sql = "SELECT VALUE c.n FROM c WHERE c.pk = 'p3'";
    let p = Arc::new(sql::prepare(sql, &[], Some(&c.pk)).expect("prepare"));
    let plan = whole(&c, &p, 4, true);
    let text = plan.to_string();
    assert!(text.starts_with("Route: single"), "{text}");
    assert_eq!(plan.partition_ids().len(), 1, "{text}");
    assert!(text.contains("\naccess: "), "{text}");
    assert!(
        text.ends_with("paging: up to 4 rows, one physical partition per page"),
        "{text}"
    );
    let (mut token, mut got) = (None, Vec::new());
    loop {
        let page = run(Arc::clone(&c), Arc::clone(&plan), token)
            .await
            .expect("page");
        assert!(page.docs.len() <= 4);
        got.extend(
            page.docs
                .iter()
                .map(|d| String::from_utf8_lossy(d).to_string()),
        );
        token = page.continuation;
        if token.is_none() {
            break;
        }
    }
    // In id order within the logical partition ("i13" < "i3").
    let mut want: Vec<String> = (0..100)
        .filter(|n| n % 10 == 3)
        .map(|n| n.to_string())
        .collect();
    want.sort_by_key(|n| format!("i{n}"));
    assert_eq!(got, want);
    // A plan whose routing reads no range reads nothing, whatever the query says.
    let mut nowhere = (*plan).clone();
    nowhere.routing.ranges.clear();
    let page = run(c, Arc::new(nowhere), None).await.expect("page");
    assert!(page.docs.is_empty());
}
