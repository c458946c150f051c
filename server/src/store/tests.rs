//! The store across restarts: LSNs, and the item directory of older stores.

use super::*;
use serde_json::json;

/// A store opened with `cfg`, holding database `d` and container `c` keyed by `/pk` (shared
/// by the store's and the executor's tests).
pub(crate) async fn open_with_container(cfg: StoreConfig) -> (Store, Arc<Container>) {
    let s = Store::open(cfg).expect("store");
    s.create_database("d", None).await.expect("database");
    let c = s
        .create_container(
            "d",
            "c",
            PartitionKeyDefinition::hash_v2("/pk"),
            Map::new(),
            None,
        )
        .await
        .expect("container");
    (s, c)
}

/// A fresh data folder for test `label` and a store configuration over it.
fn on_disk(label: &str) -> (std::path::PathBuf, StoreConfig) {
    let dir = std::env::temp_dir().join(format!("strata-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = StoreConfig {
        data_dir: Some(dir.clone()),
        postgres: None,
        limits: Limits::default(),
    };
    (dir, cfg)
}

/// An effective partition key of the length a `/pk` (hash v2) container's documents have.
const EPK: &str = "0A0B0C0D0E0F10111213141516171819";
/// Another, of another logical partition.
const OTHER: &str = "0A0B0C0D0E0F10111213141516171820";

/// A store configuration that keeps everything in memory.
fn in_memory() -> StoreConfig {
    StoreConfig {
        data_dir: None,
        postgres: None,
        limits: Limits::default(),
    }
}

fn doc(id: &str) -> Map<String, Value> {
    match json!({"id": id, "pk": "a"}) {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

/// Change-feed positions are LSNs: they must never repeat after a restart, even when the
/// newest write was a delete (which removes the newest feed entry).
#[tokio::test]
async fn lsn_never_goes_back_across_restarts() {
    let (dir, cfg) = on_disk("lsn");
    let epk = EPK;
    {
        let (s, c) = open_with_container(cfg.clone()).await;
        for id in ["1", "2", "3"] {
            let (_, seq) = c
                .write(|t| crate::items::ops::put(t, epk, id, doc(id), None))
                .unwrap();
            s.engine().durable(seq).await.unwrap();
        }
        let (_, seq) = c
            .write(|t| {
                let prev = t.get_raw(epk, "3")?.expect("exists");
                t.delete(epk, "3", &prev)
            })
            .unwrap();
        s.engine().durable(seq).await.unwrap();
        assert_eq!(c.current_lsn(), 4);
        s.shutdown().unwrap();
    }
    let s = Store::open(cfg.clone()).unwrap();
    let c = s.container("d", "c").unwrap();
    assert_eq!(c.current_lsn(), 4, "the delete's LSN is remembered");
    let (w, _) = c
        .write(|t| crate::items::ops::put(t, epk, "4", doc("4"), None))
        .unwrap();
    assert_eq!(w.item.lsn, 5);
    s.shutdown().unwrap();
    drop((c, s));
    // Without deletes, the newest feed entry alone gives the LSN.
    let s = Store::open(cfg).unwrap();
    assert_eq!(s.container("d", "c").unwrap().current_lsn(), 5);
    s.shutdown().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A store written before the item directory existed gets one at its first start, and
/// scans find every item; replacing an item leaves exactly one directory entry.
#[tokio::test]
async fn an_older_store_gets_its_item_directory() {
    let (dir, cfg) = on_disk("directory");
    let all = strata_query::pk::EpkRange::full();
    {
        let (s, c) = open_with_container(cfg.clone()).await;
        for id in ["1", "2", "3"] {
            let (_, t) = c
                .write(|t| crate::items::ops::put(t, EPK, id, doc(id), None))
                .unwrap();
            s.engine().durable(t).await.unwrap();
        }
        let (_, t) = c
            .write(|t| {
                let prev = t.get_raw(EPK, "2")?;
                crate::items::ops::put(t, EPK, "2", doc("2"), prev.as_ref())
            })
            .unwrap();
        s.engine().durable(t).await.unwrap();
        let entries = s
            .engine()
            .scan(
                Space::Directory,
                Bound::Unbounded,
                Bound::Unbounded,
                100,
                false,
            )
            .unwrap();
        assert_eq!(entries.len(), 3);
        // Make it look like a store from before the directory.
        let mut ops: Vec<Op> = entries
            .into_iter()
            .map(|(k, _)| Op::Delete(Space::Directory, k))
            .collect();
        ops.push(Op::Delete(Space::Catalog, keys::CATALOG_DIRECTORY.to_vec()));
        s.engine().write_durable(ops).await.unwrap();
        let left = s.engine().scan(
            Space::Directory,
            Bound::Unbounded,
            Bound::Unbounded,
            100,
            false,
        );
        assert!(left.unwrap().is_empty());
        s.shutdown().unwrap();
    }
    let s = Store::open(cfg).unwrap();
    let c = s.container("d", "c").unwrap();
    let ids: Vec<String> = c
        .scan_items(&all, None, 100)
        .unwrap()
        .into_iter()
        .map(|(k, _)| k.parts(c.codec).1.to_string())
        .collect();
    assert_eq!(ids, ["1", "2", "3"]);
    // Scans read the items themselves here (nothing was replayed), so the directory is
    // checked where it lies.
    let entries = s.engine().scan(
        Space::Directory,
        Bound::Unbounded,
        Bound::Unbounded,
        100,
        false,
    );
    assert_eq!(entries.unwrap().len(), 3);
    s.shutdown().unwrap();
    drop((c, s));
    let _ = std::fs::remove_dir_all(&dir);
}

/// History is kept while the policy asks for it and purged (with its floor recorded) once
/// it is past the retention — here, once the policy is removed.
#[tokio::test]
async fn history_is_logged_and_purged_past_its_retention() {
    let s = Store::open(StoreConfig {
        data_dir: None,
        postgres: None,
        limits: Limits::default(),
    })
    .unwrap();
    s.create_database("d", None).await.unwrap();
    let mut props = Map::new();
    props.insert("changeFeedPolicy".into(), json!({"retentionDuration": 5}));
    let c = s
        .create_container(
            "d",
            "h",
            PartitionKeyDefinition::hash_v2("/pk"),
            props,
            None,
        )
        .await
        .unwrap();
    let epk = EPK;
    for id in ["1", "2"] {
        let (_, d) = c
            .write(|t| crate::items::ops::put(t, epk, id, doc(id), None))
            .unwrap();
        c.durable(d).await.unwrap();
    }
    let (_, d) = c
        .write(|t| {
            let prev = t.get_raw(epk, "1")?.expect("exists");
            t.delete(epk, "1", &prev)
        })
        .unwrap();
    c.durable(d).await.unwrap();
    let all = strata_query::pk::EpkRange::full();
    let h = c.history(&all, None, 0, c.current_lsn(), 100).unwrap();
    let ops: Vec<_> = h.changes.iter().map(|x| x.op).collect();
    use crate::store::history::Operation::*;
    assert_eq!(ops, [Create, Create, Delete]);
    assert_eq!(c.purge_history().unwrap(), 0, "within the retention");
    let mut props = c.with_meta(|m| m.props.clone());
    props.remove("changeFeedPolicy");
    s.replace_container(&c, props).await.unwrap();
    assert!(!c.keeps_history());
    assert_eq!(c.purge_history().unwrap(), 3);
    assert_eq!(c.history_floor().unwrap(), c.current_lsn());
    let (_, d) = c
        .write(|t| crate::items::ops::put(t, epk, "3", doc("3"), None))
        .unwrap();
    c.durable(d).await.unwrap();
    let h = c.history(&all, None, 0, c.current_lsn(), 100).unwrap();
    assert!(h.changes.is_empty(), "nothing logged without a policy");
}

/// A global secondary index holds its source's history from its creation — across a
/// restart, from the start when its build had not finished, else from its cursor — and the
/// purge never passes a hold; a deleted index lets the history go.
#[tokio::test]
async fn an_index_holds_its_source_history_across_restarts() {
    let (dir, cfg) = on_disk("gsi-hold");
    let put = |c: &Container, id: &str| {
        c.write(|t| crate::items::ops::put(t, EPK, id, doc(id), None))
            .unwrap()
    };
    let index_props = || match json!({"globalSecondaryIndexDefinition":
        {"sourceCollectionId": "c", "definition": "SELECT * FROM c"}})
    {
        Value::Object(m) => m,
        _ => unreachable!(),
    };
    {
        let (s, c) = open_with_container(cfg.clone()).await;
        let (_, d) = put(&c, "before");
        c.durable(d).await.unwrap();
        assert!(!c.keeps_history());
        let pk = PartitionKeyDefinition::hash_v2("/pk");
        let ix = s
            .create_container("d", "ix", pk, index_props(), None)
            .await
            .unwrap();
        assert_eq!(
            c.history_hold(ix.cid),
            Some(1),
            "from the LSN it was created at"
        );
        let (_, d) = put(&c, "after");
        c.durable(d).await.unwrap();
        assert_eq!(
            c.purge_history().unwrap(),
            0,
            "a hold keeps what is after it"
        );
        s.shutdown().unwrap();
    }
    let s = Store::open(cfg.clone()).unwrap();
    let (c, ix) = (
        s.container("d", "c").unwrap(),
        s.container("d", "ix").unwrap(),
    );
    assert_eq!(
        c.history_hold(ix.cid),
        Some(0),
        "an unbuilt index holds everything"
    );
    assert!(
        c.keeps_history(),
        "held before the first write after the restart"
    );
    assert_eq!(ix.gsi_status(), "Initializing");
    let all = strata_query::pk::EpkRange::full();
    let (_, d) = put(&c, "later");
    c.durable(d).await.unwrap();
    let h = c.history(&all, None, 0, c.current_lsn(), 100).unwrap();
    let ids: Vec<_> = h.changes.iter().map(|x| x.id.as_str()).collect();
    assert_eq!(ids, ["after", "later"]);
    // Applied up to "after" (LSN 2): the purge takes that, never "later".
    c.advance_history_hold(ix.cid, 2);
    assert_eq!(c.purge_history().unwrap(), 1);
    assert_eq!(c.history_floor().unwrap(), 2);
    s.delete_container("d", "ix").await.unwrap();
    assert!(!c.keeps_history(), "no index, no policy: no history");
    c.advance_history_hold(ix.cid, 3);
    assert!(
        !c.keeps_history(),
        "a step ending after the delete places no hold"
    );
    assert!(s.delete_container("d", "c").await.is_ok());
    s.shutdown().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The sizes a write finds for its logical partition (kept in memory after the first read)
/// always equal what storage holds: after commits, a transaction that fails, an operation
/// rolled back to its savepoint, and a delete that empties the partition.
#[tokio::test]
async fn logical_partition_sizes_in_memory_match_storage() {
    let (_s, c) = open_with_container(StoreConfig {
        data_dir: None,
        postgres: None,
        limits: Limits::default(),
    })
    .await;
    let stored = |c: &Container| -> (u64, u64) {
        let all = strata_query::pk::EpkRange::full();
        crate::store::split::logical_partitions(c, &all)
            .unwrap()
            .into_iter()
            .find(|(e, _, _)| e == EPK)
            .map_or((0, 0), |(_, b, n)| (b, n))
    };
    let seen = |c: &Container| {
        let mut size = (0, 0);
        let _ = c
            .write(|t| {
                size = t.logical_partition_size(EPK)?;
                Ok::<_, StoreError>(())
            })
            .unwrap();
        size
    };
    for id in ["1", "2"] {
        let _ = c
            .write(|t| crate::items::ops::put(t, EPK, id, doc(id), None))
            .unwrap();
        assert_eq!(seen(&c), stored(&c));
    }
    let before = stored(&c);
    assert_eq!(before.1, 2);
    // A transaction that writes and then fails leaves no trace in the sizes.
    let failed = c.write(|t| {
        crate::items::ops::put(t, EPK, "3", doc("3"), None)?;
        Err::<(), _>(crate::error::CosmosError::bad_request("refused"))
    });
    assert!(failed.is_err());
    assert_eq!(seen(&c), before);
    // An operation undone to its savepoint is not counted; the one after it is.
    let _ = c
        .write(|t| {
            let sp = t.savepoint();
            crate::items::ops::put(t, EPK, "4", doc("4"), None)?;
            t.rollback_to(sp);
            crate::items::ops::put(t, EPK, "5", doc("5"), None)
        })
        .unwrap();
    assert_eq!(stored(&c).1, 3);
    assert_eq!(seen(&c), stored(&c));
    for id in ["1", "2", "5"] {
        let _ = c
            .write(|t| {
                let prev = t.get_raw(EPK, id)?.expect("exists");
                t.delete(EPK, id, &prev)
            })
            .unwrap();
    }
    assert_eq!(stored(&c), (0, 0));
    assert_eq!(seen(&c), (0, 0));
}

/// Each scanned item's id and `n`.
fn ids_and_n(
    c: &Container,
    rows: Vec<(container::DocPos, record::StoredItem)>,
) -> Vec<(String, Value)> {
    rows.into_iter()
        .map(|(k, item)| {
            let doc: Value = serde_json::from_slice(&item.json).unwrap();
            (k.parts(c.codec).1.to_string(), doc["n"].clone())
        })
        .collect()
}

/// Writes item `id` of partition `epk` with `n` (a create or a replace).
fn put_n(c: &Container, epk: &str, id: &str, n: u64) -> crate::store::engine::Durable {
    let mut d = doc(id);
    d.insert("n".into(), json!(n));
    c.write(|t| {
        let prev = t.get_raw(epk, id)?;
        crate::items::ops::put(t, epk, id, d, prev.as_ref())
    })
    .unwrap()
    .1
}

/// A scan reads the items themselves while few of their versions are superseded, walks the
/// directory once many are (an LSM memtable holds every version until flushed), and returns
/// the newest versions either way; a clean stop flushes, so the next start scans directly.
#[tokio::test]
async fn a_scan_walks_the_directory_only_past_many_superseded_versions() {
    let (dir, cfg) = on_disk("superseded");
    let all = strata_query::pk::EpkRange::full();
    let newest = |c: &Container| ids_and_n(c, c.scan_items(&all, None, 100).unwrap());
    let put = |c: &Container, id: &str, n: u64| put_n(c, EPK, id, n);
    {
        let (s, c) = open_with_container(cfg.clone()).await;
        let (lo, hi) = c.key_bounds(&all);
        for id in ["1", "2", "3"] {
            s.engine().durable(put(&c, id, 0)).await.unwrap();
        }
        assert!(c.scans_items(&lo, &hi), "creates supersede nothing");
        for n in 1..=container::settled_limit() {
            s.engine().durable(put(&c, "2", n)).await.unwrap();
        }
        assert!(c.scans_items(&lo, &hi));
        let last = container::settled_limit() + 1;
        s.engine().durable(put(&c, "2", last)).await.unwrap();
        assert!(!c.scans_items(&lo, &hi), "one past the limit");
        let want = vec![
            ("1".to_string(), json!(0)),
            ("2".to_string(), json!(last)),
            ("3".to_string(), json!(0)),
        ];
        assert_eq!(newest(&c), want);
        s.shutdown().unwrap();
        drop((c, s));
        let s = Store::open(cfg.clone()).unwrap();
        let c = s.container("d", "c").unwrap();
        assert!(c.scans_items(&lo, &hi), "a clean stop flushed them");
        assert_eq!(newest(&c), want);
        s.shutdown().unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A query pinned to one logical partition reads it whole from the cache of hot items after
/// the first read, and every write to the partition — a create, an update, a delete — takes
/// it out, so the next read sees the write; a page after a position, or of fewer items,
/// reads the same items either way. Another partition's writes leave it in.
#[tokio::test]
async fn a_logical_partition_is_read_from_the_cache_until_written() {
    let (_s, c) = open_with_container(in_memory()).await;
    let point = strata_query::pk::EpkRange::point(EPK);
    let read = |after: Option<&container::DocPos>, limit: usize| {
        ids_and_n(&c, c.scan_items(&point, after, limit).unwrap())
    };
    // In memory: durable once applied.
    let put = |epk: &str, id: &str, n: u64| {
        let _ = put_n(&c, epk, id, n);
    };
    let row = |id: &str, n: u64| (id.to_string(), json!(n));
    put(EPK, "1", 0);
    put(EPK, "2", 0);
    put(OTHER, "x", 0);
    assert!(!c.partition_is_hot(EPK));
    assert_eq!(read(None, 10), vec![row("1", 0), row("2", 0)]);
    assert!(c.partition_is_hot(EPK), "read whole: kept");
    put(OTHER, "y", 0);
    assert!(c.partition_is_hot(EPK), "another partition's write");
    assert_eq!(read(None, 10), vec![row("1", 0), row("2", 0)]);

    put(EPK, "3", 0);
    assert!(!c.partition_is_hot(EPK), "a create takes it out");
    assert_eq!(read(None, 10), vec![row("1", 0), row("2", 0), row("3", 0)]);
    put(EPK, "2", 5);
    assert!(!c.partition_is_hot(EPK), "an update takes it out");
    // A first page of one item still reads (and keeps) the whole small partition.
    assert_eq!(read(None, 1), vec![row("1", 0)]);
    assert!(c.partition_is_hot(EPK));
    assert_eq!(read(None, 10), vec![row("1", 0), row("2", 5), row("3", 0)]);
    let first = c.scan_items(&point, None, 1).unwrap().remove(0).0;
    assert_eq!(read(Some(&first), 10), vec![row("2", 5), row("3", 0)]);
    assert_eq!(read(Some(&first), 1), vec![row("2", 5)]);

    let (_, token) = c
        .write(|t| {
            let prev = t.get_raw(EPK, "1")?.expect("item 1");
            t.delete(EPK, "1", &prev)
        })
        .unwrap();
    c.durable(token).await.unwrap();
    assert!(!c.partition_is_hot(EPK), "a delete takes it out");
    assert_eq!(read(None, 10), vec![row("2", 5), row("3", 0)]);
    // A partition past the bound is read as the page needs, and not kept.
    for i in 0..container::hot_partition_items() {
        put(EPK, &format!("m{i:03}"), 1);
    }
    assert_eq!(read(None, 1000).len(), 2 + container::hot_partition_items());
    assert!(!c.partition_is_hot(EPK));
    // An EPK spelled otherwise than items' EPKs is read from the store only.
    let lower = EPK.to_lowercase();
    let range = strata_query::pk::EpkRange::point(&lower);
    c.scan_items(&range, None, 10).unwrap();
    assert!(!c.partition_is_hot(&lower));
}

/// Writers and readers of two small partitions at once, on threads: every read that starts
/// after a write returned sees that write or a later one (never a partition the cache kept
/// from before it), and the cache ends up holding the partitions' newest versions.
#[tokio::test]
async fn racing_writes_never_leave_a_stale_partition_in_the_cache() {
    let (_s, c) = open_with_container(in_memory()).await;
    const ROUNDS: u64 = 300;
    let n_of = |c: &Container, epk: &str, id: &str| -> Option<u64> {
        let point = strata_query::pk::EpkRange::point(epk);
        let rows = ids_and_n(c, c.scan_items(&point, None, 100).unwrap());
        let found = rows.into_iter().find(|(i, _)| i == id);
        found.and_then(|(_, n)| n.as_u64())
    };
    std::thread::scope(|scope| {
        for (w, epk) in [(0, EPK), (1, EPK), (2, OTHER)] {
            let c = &c;
            scope.spawn(move || {
                let id = format!("w{w}");
                for n in 1..=ROUNDS {
                    let _ = put_n(c, epk, &id, n);
                    // In memory a write is durable once applied: read your own write.
                    assert_eq!(n_of(c, epk, &id), Some(n), "writer {w} round {n}");
                }
            });
        }
        for _ in 0..2 {
            let c = &c;
            scope.spawn(move || {
                for _ in 0..ROUNDS {
                    for (epk, id) in [(EPK, "w0"), (EPK, "w1"), (OTHER, "w2")] {
                        let _ = n_of(c, epk, id);
                    }
                }
            });
        }
    });
    for (epk, id) in [(EPK, "w0"), (EPK, "w1"), (OTHER, "w2")] {
        assert_eq!(n_of(&c, epk, id), Some(ROUNDS));
        assert!(c.partition_is_hot(epk), "read whole after the last write");
    }
}
