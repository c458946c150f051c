//! The index never changes an answer: for random documents, indexing policies and filters,
//! every query returns exactly what a full scan returns — with the index as written, across a
//! split, and after the policy is replaced and the index rebuilt.

use super::*;
use crate::store::container::Limits;
use crate::store::{Store, StoreConfig};
use proptest::prelude::*;
use serde_json::{json, Map};
use strata_query::pk::epk::effective_partition_key;
use strata_query::pk::PartitionKey;

fn value() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        Just(Some(Value::Null)),
        any::<bool>().prop_map(|b| Some(json!(b))),
        (0i64..6).prop_map(|n| Some(json!(n))),
        (0i64..6).prop_map(|n| Some(json!(n as f64 + 0.5))),
        prop::sample::select(vec!["", "x", "xy", "y", "é"]).prop_map(|s| Some(json!(s))),
        (0usize..2).prop_map(|n| Some(json!(format!("{}{n}", "L".repeat(300))))),
        prop::collection::vec(0i64..4, 0..3).prop_map(|v| Some(json!(v))),
        (0i64..3).prop_map(|n| Some(json!({"b": n}))),
    ]
}

fn doc() -> impl Strategy<Value = (Option<Value>, Option<Value>, Vec<String>, u8)> {
    (
        value(),
        value(),
        prop::collection::vec(
            prop::sample::select(vec!["r", "g", "b"]).prop_map(String::from),
            0..3,
        ),
        0u8..5,
    )
}

const POLICIES: [&str; 4] = [
    r#"{"includedPaths": [{"path": "/*"}]}"#,
    r#"{"includedPaths": [{"path": "/*"}], "excludedPaths": [{"path": "/a/*"}]}"#,
    r#"{"includedPaths": [{"path": "/a/?"}, {"path": "/tags/*"}], "excludedPaths": [{"path": "/*"}]}"#,
    r#"{"indexingMode": "none"}"#,
];

const FILTERS: [&str; 14] = [
    "c.a = @k",
    "c.a > @k",
    "c.a <= @k",
    "c.a IN (@k, 2, 'x')",
    "c.a BETWEEN 1 AND @k",
    "STARTSWITH(c.a, 'x')",
    "STARTSWITH(c.a, 'LLL')",
    "IS_DEFINED(c.a)",
    "ARRAY_CONTAINS(c.tags, 'g')",
    "c.a.b = @k",
    "c.a[0] = @k",
    "c.a = @k AND c.b > 1",
    "c.a = @k OR c.b = 2",
    "c.b = @k",
];

const SHAPES: [&str; 4] = [
    "SELECT VALUE c.id FROM c WHERE {f}",
    "SELECT VALUE COUNT(1) FROM c WHERE {f}",
    "SELECT TOP 4 c.id, c.b FROM c WHERE {f} ORDER BY c.b DESC",
    "SELECT c.id, c.a FROM c WHERE {f} ORDER BY c.a",
];

/// The whole-container plan of `p` with the access path `a`.
pub(super) fn plan_with(
    c: &Container,
    p: &Arc<PreparedQuery>,
    a: Arc<AccessPath>,
    page: usize,
    per_range: bool,
) -> Arc<Plan> {
    let mut plan = (*super::tests::whole(c, p, page, per_range)).clone();
    plan.access = a;
    Arc::new(plan)
}

/// Every page of `sql`, 3 rows at a time, through `access` (the planned one, or a scan).
async fn answer(c: &Arc<Container>, sql: &str, k: &Value, scan: bool) -> Option<Vec<Value>> {
    let p = Arc::new(sql::prepare(sql, &[("k".into(), k.clone())], Some(&c.pk)).ok()?);
    let planned = access(c, &p, true).ok()?;
    let a = Arc::new(if scan { AccessPath::scan() } else { planned });
    // The indexed run also pages by partition, as under --gateway-compat.
    Some(every_page(c, &p, a, 3, !scan).await.expect("page"))
}

/// Every row of `p` over the whole container through the access path `a`, `page` rows at a
/// time, following the continuations.
pub(super) async fn every_page(
    c: &Arc<Container>,
    p: &Arc<PreparedQuery>,
    a: Arc<AccessPath>,
    page: usize,
    per_range: bool,
) -> Result<Vec<Value>, ExecError> {
    let mut out = Vec::new();
    let mut token = None;
    for _ in 0..500 {
        let got = run(
            Arc::clone(c),
            plan_with(c, p, Arc::clone(&a), page, per_range),
            token,
        )
        .await?;
        out.extend(
            got.docs
                .iter()
                .map(|d| serde_json::from_slice::<Value>(d).expect("json")),
        );
        token = got.continuation;
        if token.is_none() {
            return Ok(out);
        }
    }
    panic!("the query never finished");
}

/// Queries without a filter the index answers on its own (counts, MIN and MAX).
const WHOLE: [&str; 6] = [
    "SELECT VALUE COUNT(1) FROM c",
    "SELECT VALUE MIN(c.a) FROM c",
    "SELECT VALUE MAX(c.a) FROM c",
    "SELECT VALUE MIN(c.b) FROM c",
    "SELECT VALUE MAX(c.b) FROM c",
    "SELECT VALUE MAX(c.a.b) FROM c",
];

async fn check_all(c: &Arc<Container>, filters: &[(usize, i64)]) {
    for sql in WHOLE {
        let k = json!(0);
        assert_eq!(
            answer(c, sql, &k, false).await,
            answer(c, sql, &k, true).await,
            "{sql}"
        );
    }
    for &(f, k) in filters {
        for shape in SHAPES {
            let sql = shape.replace("{f}", FILTERS[f]);
            let k = json!(k);
            let indexed = answer(c, &sql, &k, false).await;
            let scanned = answer(c, &sql, &k, true).await;
            assert_eq!(indexed, scanned, "{sql} with @k = {k}");
        }
    }
}

pub(super) async fn wait_ready(c: &Container) {
    for _ in 0..500 {
        if c.index_state().ready {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the index build never finished");
}

/// An in-memory store with database `d`, whose containers start with two physical
/// partitions and split at 2 KB (the property tests' documents cross that quickly).
/// A store in memory whose containers start with two partitions and split at 2 KB.
pub(super) fn small_config() -> StoreConfig {
    StoreConfig {
        data_dir: None,
        postgres: None,
        limits: Limits {
            initial_partitions: Some(2),
            partition_split_bytes: 2048,
            ..Limits::default()
        },
    }
}

pub(super) async fn small_store() -> Store {
    let store = Store::open(small_config()).expect("store");
    store.create_database("d", None).await.expect("db");
    store
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn indexed_plans_answer_as_full_scans(
        docs in prop::collection::vec(doc(), 10..50),
        policy in 0usize..POLICIES.len(),
        next_policy in 0usize..POLICIES.len(),
        filters in prop::collection::vec((0usize..FILTERS.len(), 0i64..5), 4),
    ) {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async move {
            let store = small_store().await;
            let mut props = Map::new();
            props.insert("indexingPolicy".into(), serde_json::from_str(POLICIES[policy]).expect("policy"));
            let c = store
                .create_container("d", "c", strata_query::pk::PartitionKeyDefinition::hash_v2("/pk"), props, None)
                .await
                .expect("container");
            for (i, (a, b, tags, pk)) in docs.iter().enumerate() {
                let mut d = json!({"id": format!("d{i:02}"), "pk": format!("p{pk}"), "tags": tags});
                if let Some(a) = a { d["a"] = a.clone(); }
                if let Some(b) = b { d["b"] = b.clone(); }
                let key = PartitionKey::from_header(&json!([format!("p{pk}")]).to_string()).expect("key");
                let epk = effective_partition_key(&c.pk, &key).expect("epk");
                let Value::Object(m) = d else { unreachable!() };
                let (_, t) = c.write(|t| crate::items::ops::put(t, &epk, &format!("d{i:02}"), m, None)).expect("write");
                c.durable(t).await.expect("durable");
            }
            check_all(&c, &filters).await;
            // Across a split: partitions are EPK ranges of the same index.
            store.split_once(&c).await.expect("split");
            check_all(&c, &filters).await;
            // After a policy change and the rebuild it starts.
            let mut props = c.with_meta(|m| m.props.clone());
            props.insert("indexingPolicy".into(), serde_json::from_str(POLICIES[next_policy]).expect("policy"));
            store.replace_container(&c, props).await.expect("replace");
            check_all(&c, &filters).await;
            wait_ready(&c).await;
            check_all(&c, &filters).await;
        });
    }
}
