//! Tests of [`super`]: access paths chosen from filters, ORDER BY and policies.
use super::*;
use crate::sql::prepare;
use serde_json::json;

fn access(sql: &str, policy: &IndexingPolicy) -> Result<Access, AccessError> {
    let p = prepare(sql, &[], None).unwrap();
    choose(&p.query, policy, false, &[])
}

fn default() -> IndexingPolicy {
    IndexingPolicy::default()
}

/// A tenant's orders under a route that pins the key: the key's conjunct only repeats what the
/// route narrows the read to, so the other one is the lookup, whichever comes first and even
/// when it is a range.
#[test]
fn a_conjunct_on_the_partition_key_is_the_last_choice() {
    let keys = vec![vec!["tenant".to_string()], vec!["user".to_string()]];
    let chosen = |sql: &str| {
        let p = prepare(sql, &[], None).unwrap();
        let a = choose(&p.query, &default(), false, &keys).unwrap();
        let probes = a.lookup.unwrap();
        assert_eq!(probes.len(), 1, "{sql}");
        print_path(&probes[0].path)
    };
    assert_eq!(
        chosen("SELECT * FROM c WHERE c.tenant = 't' AND c.type = 'order'"),
        "/type"
    );
    assert_eq!(
        chosen("SELECT * FROM c WHERE c.type = 'order' AND c.tenant = 't'"),
        "/type"
    );
    assert_eq!(
        chosen("SELECT * FROM c WHERE c.tenant = 't' AND c.n > 3"),
        "/n"
    );
    // Only the key's paths: a lookup on them is still a lookup (a fan-out or a prefix route
    // uses it; a plan pinned to one logical partition drops it).
    let both = "SELECT * FROM c WHERE c.tenant = 't' AND c.user = 'u'";
    assert_eq!(chosen(both), "/tenant");
    // A nested property named like a key path is another path.
    assert_eq!(
        chosen("SELECT * FROM c WHERE c.tenant = 't' AND c.a.tenant = 'x'"),
        "/a/tenant"
    );
    // Nothing pinned (a route over several keys or every partition): the first of two
    // equalities, and an equality on the key before a range on another path.
    let p = prepare(
        "SELECT * FROM c WHERE c.tenant = 't' AND c.type = 'order'",
        &[],
        None,
    )
    .unwrap();
    let a = choose(&p.query, &default(), false, &[]).unwrap();
    assert_eq!(print_path(&a.lookup.unwrap()[0].path), "/tenant");
    let p = prepare("SELECT * FROM c WHERE c.n > 3 AND c.user = 'u'", &[], None).unwrap();
    let a = choose(&p.query, &default(), false, &[]).unwrap();
    assert_eq!(print_path(&a.lookup.unwrap()[0].path), "/user");
}

#[test]
fn filters_choose_the_most_selective_conjunct() {
    let a = access(
        "SELECT * FROM c WHERE c.n > 3 AND c.status = 'open'",
        &default(),
    )
    .unwrap();
    let probes = a.lookup.unwrap();
    assert_eq!(probes.len(), 1);
    assert_eq!(print_path(&probes[0].path), "/status");
    assert!(!probes[0].exact);
    let a = access("SELECT * FROM c WHERE c.a = 1 OR c.b IN (2, 3)", &default()).unwrap();
    assert_eq!(a.lookup.unwrap().len(), 2);
    let a = access(
        "SELECT * FROM c WHERE c.a = 1 OR LOWER(c.b) = 'x'",
        &default(),
    )
    .unwrap();
    assert!(a.lookup.is_none(), "one side unindexable: scan");
    let a = access(
        "SELECT * FROM c WHERE ARRAY_CONTAINS(c.tags, 'x')",
        &default(),
    )
    .unwrap();
    assert_eq!(print_path(&a.lookup.unwrap()[0].path), "/tags/[]");
    let a = access("SELECT * FROM c WHERE c.items[0].sku = 'x'", &default()).unwrap();
    let p = &a.lookup.unwrap()[0];
    assert_eq!(print_path(&p.path), "/items/[]/sku");
    assert!(!p.exact);
    let a = access(
        "SELECT * FROM c WHERE STARTSWITH(c.name, 'ab', true)",
        &default(),
    )
    .unwrap();
    assert!(
        a.lookup.is_none(),
        "case-insensitive prefixes are not in the index"
    );
}

#[test]
fn counts_are_index_only_when_the_probe_is_exact() {
    let p = default();
    assert!(
        access("SELECT VALUE COUNT(1) FROM c", &p)
            .unwrap()
            .count_only
    );
    assert!(
        access("SELECT VALUE COUNT(1) FROM c WHERE c.a = 'x'", &p)
            .unwrap()
            .count_only
    );
    assert!(
        access("SELECT VALUE COUNT(1) FROM c WHERE c.a IN (1, 2)", &p)
            .unwrap()
            .count_only
    );
    assert!(
        !access("SELECT VALUE COUNT(1) FROM c WHERE c.a > 1", &p)
            .unwrap()
            .count_only
    );
    assert!(
        !access("SELECT VALUE COUNT(1) FROM c WHERE c.a = 1 AND c.b = 2", &p)
            .unwrap()
            .count_only
    );
    assert!(
        !access("SELECT VALUE COUNT(c.a) FROM c", &p)
            .unwrap()
            .count_only
    );
    assert!(
        !access("SELECT COUNT(1) AS n FROM c", &p)
            .unwrap()
            .count_only
    );
    assert!(
        !access("SELECT VALUE COUNT(1) FROM c JOIN t IN c.tags", &p)
            .unwrap()
            .count_only
    );
    let max = access("SELECT VALUE MAX(c.n) FROM c", &p).unwrap().extreme;
    assert!(max.is_some_and(|m| m.descending));
    let filtered = access("SELECT VALUE MIN(c.n) FROM c WHERE c.a = 1", &p).unwrap();
    assert!(filtered.extreme.is_none());
    let named = access("SELECT MIN(c.n) AS m FROM c", &p).unwrap();
    assert!(named.extreme.is_none());
}

/// The service's answers, as reported by its users: "The order by query does not have a
/// corresponding composite index that it can be served from." (Substatus 0; e.g.
/// imranmomin/Hangfire.AzureCosmosDb#51) and "The index path corresponding to the specified
/// order-by item is excluded." (hcengineering/huly-selfhost#29).
#[test]
fn order_by_needs_the_index_the_service_needs() {
    let p = default();
    assert_eq!(
        access("SELECT * FROM c ORDER BY c.a, c.b", &p)
            .unwrap_err()
            .0,
        NO_COMPOSITE
    );
    let with = IndexingPolicy::from_json(&json!({
        "includedPaths": [{"path": "/*"}],
        "excludedPaths": [{"path": "/secret/?"}],
        "compositeIndexes": [[{"path": "/a"}, {"path": "/b", "order": "descending"}]]
    }))
    .unwrap();
    assert!(access("SELECT * FROM c ORDER BY c.a, c.b DESC", &with).is_ok());
    assert!(access("SELECT * FROM c ORDER BY c.a DESC, c.b ASC", &with).is_ok());
    assert_eq!(
        access("SELECT * FROM c ORDER BY c.b DESC, c.a", &with)
            .unwrap_err()
            .0,
        NO_COMPOSITE
    );
    assert_eq!(
        access("SELECT * FROM c ORDER BY c.secret", &with)
            .unwrap_err()
            .0,
        ORDER_EXCLUDED
    );
    let a = access("SELECT * FROM c ORDER BY c.a DESC", &with).unwrap();
    assert_eq!(
        a.order,
        Some(OrderPath {
            path: vec![Seg::Name("a".into())],
            descending: true
        })
    );
}

#[test]
fn a_container_without_index_needs_the_scan_header() {
    let none = IndexingPolicy::from_json(&json!({"indexingMode": "none"})).unwrap();
    let p = prepare("SELECT * FROM c WHERE c.a = 1", &[], None).unwrap();
    assert_eq!(
        choose(&p.query, &none, false, &[]).unwrap_err().0,
        SCAN_NEEDED
    );
    assert!(choose(&p.query, &none, true, &[]).unwrap().lookup.is_none());
    let all = prepare("SELECT * FROM c", &[], None).unwrap();
    assert!(choose(&all.query, &none, false, &[]).is_ok());
}

#[test]
fn excluded_paths_are_not_probed_and_are_reported() {
    let p = IndexingPolicy::from_json(&json!({
        "includedPaths": [{"path": "/*"}],
        "excludedPaths": [{"path": "/blob/*"}]
    }))
    .unwrap();
    let a = access("SELECT * FROM c WHERE c.blob.x = 1", &p).unwrap();
    assert!(a.lookup.is_none());
    assert_eq!(
        a.unindexed,
        vec![vec![Seg::Name("blob".into()), Seg::Name("x".into())]]
    );
}
