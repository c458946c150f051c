"""Transactional batch, patch, optimistic concurrency, TTL, delete-by-partition-key and the
change feed, through the official Python SDK."""
import time

from azure.core import MatchConditions
from azure.cosmos import PartitionKey, exceptions

from common import check, client, expect_status, fresh_database

c = client()
db = fresh_database(c, "mods")
try:
    ev = db.create_container(
        "ev", partition_key=PartitionKey(path=["/TenantId", "/UserId", "/SessionId"], kind="MultiHash"))
    pk = ["t9", "u9", "s9"]

    def item(i, **kw):
        return {"id": i, "TenantId": "t9", "UserId": "u9", "SessionId": "s9", **kw}

    # --- Transactional batch: all operations succeed.
    ev.create_item(item("b2", v=0))
    ops = [
        ("create", (item("b1", v=1),)),
        ("upsert", (item("b3", v=3),)),
        ("read", ("b1",)),
        ("replace", ("b2", item("b2", v=20))),
        ("patch", ("b2", [{"op": "incr", "path": "/v", "value": 1}])),
        ("delete", ("b1",)),
    ]
    res = ev.execute_item_batch(ops, partition_key=pk)
    codes = [r["statusCode"] for r in res]
    check(codes == [201, 201, 200, 200, 200, 204], codes)
    check(ev.read_item("b2", partition_key=pk)["v"] == 21, "batch replace + patch applied")
    expect_status(lambda: ev.read_item("b1", partition_key=pk), 404)

    # --- A failing batch changes nothing: 207 with the real status and 424 for the others.
    try:
        ev.execute_item_batch([("create", (item("b4"),)), ("create", (item("b3"),))], partition_key=pk)
        check(False, "the batch should fail")
    except exceptions.CosmosBatchOperationError as e:
        check(e.error_index == 1, f"failing index {e.error_index}")
        codes = [r["statusCode"] for r in e.operation_responses]
        check(codes == [424, 409], codes)
    expect_status(lambda: ev.read_item("b4", partition_key=pk), 404)

    # --- Patch: both body shapes are exercised by the SDK's ops; conditions; protected paths.
    ev.create_item(item("p", n=1, tags=["a"], nested={"x": 1}))
    p = ev.patch_item("p", partition_key=pk, patch_operations=[
        {"op": "incr", "path": "/n", "value": 5},
        {"op": "add", "path": "/tags/-", "value": "b"},
        {"op": "set", "path": "/nested/y", "value": 2},
        {"op": "replace", "path": "/nested/x", "value": 10},
        {"op": "remove", "path": "/tags/0"},
        {"op": "move", "from": "/nested/y", "path": "/moved"},
    ])
    check(p["n"] == 6 and p["tags"] == ["b"] and p["nested"] == {"x": 10} and p["moved"] == 2, p)
    p2 = ev.patch_item("p", partition_key=pk, filter_predicate="from c where c.n > 5",
                       patch_operations=[{"op": "set", "path": "/ok", "value": True}])
    check(p2["ok"] is True, p2)
    expect_status(lambda: ev.patch_item("p", partition_key=pk, filter_predicate="from c where c.n > 100",
                                        patch_operations=[{"op": "set", "path": "/no", "value": 1}]), 412)
    expect_status(lambda: ev.patch_item("p", partition_key=pk, patch_operations=[{"op": "set", "path": "/id", "value": "x"}]), 400)
    expect_status(lambda: ev.patch_item("p", partition_key=pk, patch_operations=[{"op": "set", "path": "/TenantId", "value": "x"}]), 400)
    expect_status(lambda: ev.patch_item("p", partition_key=pk, patch_operations=[{"op": "replace", "path": "/missing", "value": 1}]), 400)
    stale = p2["_etag"]
    ev.patch_item("p", partition_key=pk, patch_operations=[{"op": "incr", "path": "/n", "value": 1}])
    expect_status(lambda: ev.patch_item("p", partition_key=pk, etag=stale, match_condition=MatchConditions.IfNotModified,
                                        patch_operations=[{"op": "incr", "path": "/n", "value": 1}]), 412)
    expect_status(lambda: ev.delete_item("p", partition_key=pk, etag=stale, match_condition=MatchConditions.IfNotModified), 412)

    # --- Change feed: from the beginning, by partition key, by prefix, from now, continuation.
    feed = ev.query_items_change_feed(start_time="Beginning")
    ids = [d["id"] for d in feed]
    check(sorted(ids) == sorted(["b2", "b3", "p"]), ids)
    check(all("_lsn" in d for d in ev.query_items_change_feed(start_time="Beginning")), "_lsn present")
    other = ["t1", "u1", "s1"]
    ev.create_item({"id": "o1", "TenantId": "t1", "UserId": "u1", "SessionId": "s1"})
    by_pk = [d["id"] for d in ev.query_items_change_feed(partition_key=other, start_time="Beginning")]
    check(by_pk == ["o1"], by_pk)
    by_prefix = sorted(d["id"] for d in ev.query_items_change_feed(partition_key=["t9"], start_time="Beginning"))
    check(by_prefix == ["b2", "b3", "p"], by_prefix)
    it = ev.query_items_change_feed(start_time="Now")
    check(list(it) == [], "nothing new yet")
    token = ev.client_connection.last_response_headers["etag"]
    ev.upsert_item(item("b3", v=33))
    ev.create_item(item("new"))
    after = [d["id"] for d in ev.query_items_change_feed(continuation=None, start_time="Now")]
    check(after == [], "Now starts after the present")
    pages = ev.query_items_change_feed(start_time="Beginning").by_page()
    first = list(next(pages))
    cont = pages.continuation_token
    ev.upsert_item(item("b2", v=99))
    rest = [d["id"] for d in ev.query_items_change_feed(continuation=cont)]
    check("b2" in rest, f"the updated item appears again after the continuation: {rest}")
    latest = {d["id"]: d for d in ev.query_items_change_feed(start_time="Beginning")}
    check(latest["b3"]["v"] == 33 and latest["b2"]["v"] == 99, "each item once, latest version")

    # --- TTL: container default, item override, and expiry invisibility.
    ttl = db.create_container("ttl", partition_key=PartitionKey(path="/pk"), default_ttl=1)
    ttl.create_item({"id": "short", "pk": "a"})
    ttl.create_item({"id": "forever", "pk": "a", "ttl": -1})
    ttl.create_item({"id": "longer", "pk": "a", "ttl": 30})
    time.sleep(2.2)
    expect_status(lambda: ttl.read_item("short", partition_key="a"), 404)
    left = sorted(d["id"] for d in ttl.read_all_items())
    check(left == ["forever", "longer"], left)
    q = sorted(ttl.query_items("SELECT VALUE c.id FROM c", partition_key="a"))
    check(q == ["forever", "longer"], q)
    # TTL off (no defaultTtl): item ttl is ignored.
    off = db.create_container("off", partition_key=PartitionKey(path="/pk"))
    off.create_item({"id": "x", "pk": "a", "ttl": 1})
    time.sleep(1.5)
    check(off.read_item("x", partition_key="a")["id"] == "x", "no container TTL: nothing expires")

    # --- Delete all items of one logical partition.
    for i in range(30):
        ev.create_item({"id": f"bulk{i}", "TenantId": "gone", "UserId": "u", "SessionId": "s"})
    ev.delete_all_items_by_partition_key(["gone", "u", "s"])
    left = list(ev.query_items("SELECT * FROM c", partition_key=["gone", "u", "s"]))
    check(left == [], f"{len(left)} items left")
    check(ev.read_item("b2", partition_key=pk)["v"] == 99, "other partitions untouched")
finally:
    c.delete_database(db)
print("ok")
