//! One test per kind of access path: the plan prints its access path, and the run follows that
//! same value — taking the facet out of the plan (not out of the container) changes what is
//! read, never the answer. A run that re-derived its access path at run time would read the
//! same either way.

use super::*;
use crate::store::container::Limits;
use crate::store::{Store, StoreConfig};
use serde_json::json;
use strata_query::pk::epk::effective_partition_key;
use strata_query::pk::{PartitionKey, PartitionKeyDefinition};

/// A store in memory with a database `d`.
async fn store_with_database() -> Store {
    let s = Store::open(StoreConfig {
        data_dir: None,
        postgres: None,
        limits: Limits::default(),
    })
    .expect("store");
    s.create_database("d", None).await.expect("database");
    s
}

/// A container indexed every way strata indexes: range, full-text, spatial and a flat vector
/// index, with 60 documents.
async fn indexed() -> (Store, Arc<Container>) {
    let s = store_with_database().await;
    let props = json!({
        "indexingPolicy": {
            "includedPaths": [{"path": "/*"}],
            "spatialIndexes": [{"path": "/loc/*", "types": ["Point"]}],
            "fullTextIndexes": [{"path": "/text"}],
            "vectorIndexes": [{"path": "/v", "type": "flat"}],
        },
        "fullTextPolicy": {"defaultLanguage": "en-US", "fullTextPaths": [{"path": "/text", "language": "en-US"}]},
        "vectorEmbeddingPolicy": {"vectorEmbeddings": [{"path": "/v", "dataType": "float32", "distanceFunction": "euclidean", "dimensions": 2}]},
    });
    let Value::Object(props) = props else {
        unreachable!()
    };
    let c = s
        .create_container(
            "d",
            "c",
            PartitionKeyDefinition::hash_v2("/pk"),
            props,
            None,
        )
        .await
        .expect("container");
    for n in 0..60u64 {
        let pk = format!("p{}", n % 6);
        let key = PartitionKey::from_header(&json!([pk]).to_string()).expect("key");
        let epk = effective_partition_key(&c.pk, &key).expect("epk");
        let text = if n % 10 == 0 {
            "an apple a day"
        } else {
            "pears and plums"
        };
        let doc = json!({"id": format!("i{n}"), "pk": pk, "n": n, "text": text,
            "loc": {"type": "Point", "coordinates": [n as f64 / 10.0, 0.0]},
            "v": [n as f64, 1.0]});
        let Value::Object(doc) = doc else {
            unreachable!()
        };
        let (_, token) = c
            .write(|t| crate::items::ops::put(t, &epk, &format!("i{n}"), doc, None))
            .expect("write");
        c.durable(token).await.expect("durable");
    }
    for _ in 0..500 {
        if c.vector_index("/v").is_some() {
            return (s, c);
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the vector index never became ready")
}

/// Every row of `plan` and the documents it read.
async fn drain(c: &Arc<Container>, plan: Arc<Plan>) -> (Vec<Value>, u64) {
    let (mut rows, mut scanned, mut token) = (Vec::new(), 0, None);
    for _ in 0..100 {
        let page = run(Arc::clone(c), Arc::clone(&plan), token)
            .await
            .expect("page");
        rows.extend(
            page.docs
                .iter()
                .map(|d| serde_json::from_slice::<Value>(d).expect("json")),
        );
        scanned += page.scanned;
        token = page.continuation;
        if token.is_none() {
            return (rows, scanned);
        }
    }
    panic!("never finished")
}

/// Plans `sql`, checks the plan prints `printed`, runs it, and runs it again with `without`
/// applied to its access path: the same rows, and the planned run reads fewer documents.
async fn follows(c: &Arc<Container>, sql: &str, printed: &str, without: impl Fn(&mut AccessPath)) {
    let p = Arc::new(sql::prepare(sql, &[], Some(&c.pk)).expect("prepare"));
    let plan = super::tests::whole(c, &p, 100, false);
    let text = plan.to_string();
    assert!(text.contains(printed), "{sql}: {text}");
    let planned = access(c, &p, true).expect("access");
    let mut other = planned;
    without(&mut other);
    let mut tampered = (*plan).clone();
    tampered.access = Arc::new(other);
    let less = tampered.to_string();
    assert!(
        !less.contains(printed),
        "{sql}: the tampered plan still prints it: {less}"
    );
    let (rows, read) = drain(c, plan).await;
    let (same, read_without) = drain(c, Arc::new(tampered)).await;
    assert_eq!(rows, same, "{sql}");
    assert!(!rows.is_empty(), "{sql}");
    assert!(
        read < read_without,
        "{sql}: read {read} documents with it, {read_without} without"
    );
}

#[tokio::test]
async fn each_access_path_the_plan_prints_is_the_one_that_runs() {
    let (_s, c) = indexed().await;
    follows(
        &c,
        "SELECT VALUE c.id FROM c WHERE c.n = 7",
        "index lookup /n",
        |a| a.index.lookup = None,
    )
    .await;
    follows(
        &c,
        "SELECT TOP 3 VALUE c.id FROM c ORDER BY c.n DESC",
        "order from index /n desc",
        |a| a.index.order = None,
    )
    .await;
    follows(
        &c,
        "SELECT VALUE COUNT(1) FROM c WHERE c.n = 7",
        "count from index",
        |a| {
            a.index.count_only = false;
            a.index.lookup = None;
        },
    )
    .await;
    follows(
        &c,
        "SELECT VALUE MAX(c.n) FROM c",
        "max from index /n",
        |a| a.index.extreme = None,
    )
    .await;
    follows(
        &c,
        "SELECT VALUE c.id FROM c WHERE FullTextContains(c.text, 'apple')",
        "full-text postings of /text",
        |a| a.index.lookup = None,
    )
    .await;
    follows(
        &c,
        r#"SELECT VALUE c.id FROM c WHERE ST_DISTANCE(c.loc, {"type": "Point", "coordinates": [0, 0]}) < 30000"#,
        "spatial index of /loc",
        |a| a.index.lookup = None,
    )
    .await;
    follows(
        &c,
        r#"SELECT TOP 3 VALUE c.id FROM c ORDER BY VectorDistance(c.v, [2, 1], false, {"distanceFunction": "euclidean"})"#,
        "candidates from the flat index on /v",
        |a| a.vector = None,
    )
    .await;
    follows(
        &c,
        "SELECT TOP 3 VALUE c.id FROM c ORDER BY RANK FullTextScore(c.text, 'apple')",
        "ranked by BM25 from the full-text postings of /text",
        |a| a.postings = None,
    )
    .await;
    // No TOP: evaluated in rank order under statistics the plan's provider counts from the
    // postings; without them the statistics query reads every document first.
    follows(
        &c,
        "SELECT VALUE c.id FROM c ORDER BY RANK FullTextScore(c.text, 'apple')",
        "BM25 statistics from the full-text postings of /text",
        |a| {
            if let Some(s) = a.statistics.as_mut() {
                s.postings = None;
            }
        },
    )
    .await;
}

/// A route to one logical partition reads its documents directly when the lookup would only
/// find them again (every probe on the partition key): the same rows, the same documents
/// read, no index entry walked. A probe on another path keeps its lookup.
#[tokio::test]
async fn a_pinned_partition_is_read_without_the_lookup_its_key_implies() {
    let (_s, c) = indexed().await;
    let sql = "SELECT VALUE c.id FROM c WHERE c.pk = 'p1'";
    let p = Arc::new(sql::prepare(sql, &[], Some(&c.pk)).expect("prepare"));
    let plan = super::tests::whole(&c, &p, 4, false);
    let text = plan.to_string();
    assert!(
        text.contains("the pinned logical partition's documents in key order")
            && text.contains(r#"(c.pk = "p1")"#)
            && !text.contains("index lookup /"),
        "{text}"
    );
    // The same query's access path before the plan pins it: the lookup on /pk.
    let lookup = access(&c, &p, true).expect("access");
    let mut with_lookup = (*plan).clone();
    with_lookup.access = Arc::new(lookup);
    assert!(with_lookup.to_string().contains("index lookup /pk"));
    let entries = |plan: Arc<Plan>| {
        let c = Arc::clone(&c);
        async move {
            let page = run(c, plan, None).await.expect("page");
            page.index.entries
        }
    };
    assert_eq!(entries(Arc::clone(&plan)).await, 0);
    assert!(entries(Arc::new(with_lookup.clone())).await > 0);
    // Four rows a page: the continuations of both reads resume alike.
    let (rows, read) = drain(&c, Arc::clone(&plan)).await;
    let (same, read_with) = drain(&c, Arc::new(with_lookup)).await;
    assert_eq!(rows.len(), 10);
    assert_eq!((rows, read), (same, read_with));

    // `SELECT *` of the key's equality alone: the stored documents, none parsed for the
    // filter; the same page as the plan that evaluates it.
    let sql = "SELECT * FROM c WHERE c.pk = 'p1'";
    let p = Arc::new(sql::prepare(sql, &[], Some(&c.pk)).expect("prepare"));
    let plan = super::tests::whole(&c, &p, 100, false);
    assert!(
        plan.to_string()
            .contains("the filter holds for every document of the pinned key"),
        "{plan}"
    );
    let mut evaluated = (*plan).clone();
    let mut path = access(&c, &p, true).expect("access");
    path.pin_partition(&p, &c.pk);
    path.filter_implied = false;
    evaluated.access = Arc::new(path);
    let raw = run(Arc::clone(&c), Arc::clone(&plan), None)
        .await
        .expect("page");
    let parsed = run(Arc::clone(&c), Arc::new(evaluated), None)
        .await
        .expect("page");
    assert_eq!(raw.docs.len(), 10);
    assert_eq!(raw.docs, parsed.docs);
    // Another conjunct, or a projection: evaluated (a number in the key's equality too, in
    // `routing::implied_by_key`'s test).
    for sql in [
        "SELECT * FROM c WHERE c.pk = 'p1' AND c.n = 7",
        "SELECT c.id FROM c WHERE c.pk = 'p1'",
    ] {
        let p = Arc::new(sql::prepare(sql, &[], Some(&c.pk)).expect("prepare"));
        let plan = super::tests::whole(&c, &p, 100, false);
        assert!(!plan.access.filter_implied, "{sql}: {plan}");
    }

    // Another path's probe narrows the partition: its lookup stays.
    let sql = "SELECT VALUE c.id FROM c WHERE c.pk = 'p1' AND c.n = 7";
    let p = Arc::new(sql::prepare(sql, &[], Some(&c.pk)).expect("prepare"));
    let text = super::tests::whole(&c, &p, 4, false).to_string();
    assert!(text.contains("index lookup /n"), "{text}");
    // A route over several partitions keeps it too, even beside a range on another path
    // (the key is the more selective lookup when the route does not pin it).
    for sql in [
        "SELECT VALUE c.id FROM c WHERE c.pk IN ('p1', 'p2')",
        "SELECT VALUE c.id FROM c WHERE c.n > 3 AND c.pk IN ('p1', 'p2')",
    ] {
        let p = Arc::new(sql::prepare(sql, &[], Some(&c.pk)).expect("prepare"));
        let text = super::tests::whole(&c, &p, 4, false).to_string();
        assert!(text.contains("index lookup /pk"), "{sql}: {text}");
    }
    // Pinned, the other conjunct is the lookup whichever comes first.
    let sql = "SELECT VALUE c.id FROM c WHERE c.n > 3 AND c.pk = 'p1'";
    let p = Arc::new(sql::prepare(sql, &[], Some(&c.pk)).expect("prepare"));
    let text = super::tests::whole(&c, &p, 4, false).to_string();
    assert!(text.contains("index lookup /n"), "{text}");
}

/// Under the legacy hash (version 1) two string keys that begin with the same 100 characters
/// share a logical partition: the filter is evaluated, and only the document the query names
/// comes back.
#[tokio::test]
async fn a_legacy_hash_partition_still_evaluates_the_key_filter() {
    use strata_query::pk::PartitionKind;
    let s = store_with_database().await;
    let v1 = PartitionKeyDefinition::new(&["/pk"], PartitionKind::Hash, 1).expect("definition");
    let c = s
        .create_container("d", "v1", v1, Default::default(), None)
        .await
        .expect("container");
    let stem = "a".repeat(100);
    let keys = [format!("{stem}x"), format!("{stem}y")];
    let mut epks = Vec::new();
    for (i, pk) in keys.iter().enumerate() {
        let key = PartitionKey::from_header(&json!([pk]).to_string()).expect("key");
        let epk = effective_partition_key(&c.pk, &key).expect("epk");
        let Value::Object(doc) = json!({"id": format!("i{i}"), "pk": pk}) else {
            unreachable!()
        };
        let (_, token) = c
            .write(|t| crate::items::ops::put(t, &epk, &format!("i{i}"), doc, None))
            .expect("write");
        c.durable(token).await.expect("durable");
        epks.push(epk);
    }
    assert_eq!(epks[0], epks[1], "both keys hash alike under version 1");
    let sql = format!("SELECT * FROM c WHERE c.pk = '{}'", keys[0]);
    let p = Arc::new(sql::prepare(&sql, &[], Some(&c.pk)).expect("prepare"));
    let plan = super::tests::whole(&c, &p, 100, false);
    assert!(!plan.access.filter_implied, "{plan}");
    let (rows, _) = drain(&c, plan).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["id"], "i0");
}

/// A kept query's access path is chosen once while the container's index state holds, and
/// again after the policy changes (so a plan never reads an index by an older policy's
/// choice); a route of another kind, or a ranking (whose vector index readiness is read
/// when it is planned), is chosen anew.
#[tokio::test]
async fn a_remembered_access_path_holds_while_the_index_state_does() {
    use super::access_path::{planned, AccessMemo};
    let (s, c) = indexed().await;
    let sql = "SELECT VALUE c.id FROM c WHERE c.n = 7";
    let p = sql::prepare(sql, &[], Some(&c.pk)).expect("prepare");
    let memo = AccessMemo::default();
    let first = planned(&c, &p, false, true, Some(&memo)).expect("access");
    assert!(first.to_string().contains("index lookup /n"), "{first}");
    let again = planned(&c, &p, false, true, Some(&memo)).expect("access");
    assert!(Arc::ptr_eq(&first, &again), "the same state: remembered");
    let pinned = planned(&c, &p, true, true, Some(&memo)).expect("access");
    assert!(!Arc::ptr_eq(&first, &pinned), "another route: chosen anew");
    let unpinned = planned(&c, &p, false, true, Some(&memo)).expect("access");
    assert!(!Arc::ptr_eq(&first, &unpinned));
    assert!(Arc::ptr_eq(
        &unpinned,
        &planned(&c, &p, false, true, Some(&memo)).expect("access")
    ));

    // /n no longer indexed: the lookup the memo holds would read entries no longer kept.
    let mut props = c.with_meta(|m| m.props.clone());
    let mut policy = props["indexingPolicy"].clone();
    policy["excludedPaths"] = json!([{"path": "/n/?"}]);
    props.insert("indexingPolicy".into(), policy);
    s.replace_container(&c, props).await.expect("replace");
    let after = planned(&c, &p, false, true, Some(&memo)).expect("access");
    assert!(!Arc::ptr_eq(&unpinned, &after), "a new policy: chosen anew");
    assert!(!after.to_string().contains("index lookup /n"), "{after}");

    let sql = "SELECT TOP 3 c.id FROM c ORDER BY VectorDistance(c.v, [1, 1])";
    let p = sql::prepare(sql, &[], Some(&c.pk)).expect("prepare");
    let memo = AccessMemo::default();
    let a = planned(&c, &p, false, true, Some(&memo)).expect("access");
    let b = planned(&c, &p, false, true, Some(&memo)).expect("access");
    assert!(!Arc::ptr_eq(&a, &b), "a ranking is not remembered");
}
