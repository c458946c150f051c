"""CRUD on a hierarchical (MultiHash) container through the official Python SDK:
create, point read, conflict, stale-etag replace (412), upsert, delete, read feed, queries."""
from azure.core import MatchConditions
from azure.cosmos import PartitionKey, exceptions

from common import check, client, expect_status, fresh_database

c = client()
db = fresh_database(c, "crud")
try:
    hpk = db.create_container(
        "events",
        partition_key=PartitionKey(path=["/TenantId", "/UserId", "/SessionId"], kind="MultiHash"),
    )
    props = hpk.read()
    check(props["partitionKey"]["kind"] == "MultiHash", props)
    check(props["partitionKey"]["version"] == 2, props)

    docs = []
    for t in range(2):
        for u in range(3):
            for s in range(2):
                d = {"id": f"e{t}{u}{s}", "TenantId": f"t{t}", "UserId": f"u{u}", "SessionId": f"s{s}", "n": t * 100 + u * 10 + s}
                created = hpk.create_item(d)
                check(created["_etag"] and created["_rid"] and created["_ts"], created)
                docs.append(d)

    # Point read with the full key.
    r = hpk.read_item("e121", partition_key=["t1", "u2", "s1"])
    check(r["n"] == 121, r)
    expect_status(lambda: hpk.read_item("e121", partition_key=["t1", "u2", "s0"]), 404)

    # Same id under another key is another item; same id under the same key conflicts.
    hpk.create_item({"id": "e000", "TenantId": "t9", "UserId": "u9", "SessionId": "s9"})
    expect_status(lambda: hpk.create_item({"id": "e000", "TenantId": "t0", "UserId": "u0", "SessionId": "s0"}), 409)

    # Replace with the current etag works; with a stale one it is 412.
    old = hpk.read_item("e000", partition_key=["t0", "u0", "s0"])
    old["n"] = -1
    new = hpk.replace_item("e000", old, etag=old["_etag"], match_condition=MatchConditions.IfNotModified)
    check(new["_etag"] != old["_etag"], "etag changes on replace")
    expect_status(lambda: hpk.replace_item("e000", old, etag=old["_etag"], match_condition=MatchConditions.IfNotModified), 412)

    # Upsert: new then replaced.
    u = hpk.upsert_item({"id": "up", "TenantId": "t0", "UserId": "u0", "SessionId": "s0", "v": 1})
    check(u["v"] == 1, u)
    u = hpk.upsert_item({"id": "up", "TenantId": "t0", "UserId": "u0", "SessionId": "s0", "v": 2})
    check(hpk.read_item("up", partition_key=["t0", "u0", "s0"])["v"] == 2, "upsert replaced")

    # Delete.
    hpk.delete_item("up", partition_key=["t0", "u0", "s0"])
    expect_status(lambda: hpk.read_item("up", partition_key=["t0", "u0", "s0"]), 404)
    expect_status(lambda: hpk.delete_item("up", partition_key=["t0", "u0", "s0"]), 404)

    # Read feed returns everything once.
    ids = sorted(i["id"] for i in hpk.read_all_items())
    check(len(ids) == 13 and len(set(ids)) == 12, ids)

    # Queries: full key, prefix (tenant + user, tenant), cross partition, ORDER BY, aggregate.
    q = list(hpk.query_items("SELECT VALUE c.n FROM c", partition_key=["t1", "u2", "s1"]))
    check(q == [121], q)
    q = sorted(hpk.query_items("SELECT VALUE c.id FROM c", partition_key=["t1", "u2"]))
    check(q == ["e120", "e121"], q)
    q = sorted(hpk.query_items("SELECT VALUE c.id FROM c", partition_key=["t1"]))
    check(q == sorted(f"e1{u}{s}" for u in range(3) for s in range(2)), q)
    q = list(hpk.query_items("SELECT VALUE c.n FROM c WHERE c.n >= 100 ORDER BY c.n DESC", enable_cross_partition_query=True))
    check(q == sorted([d["n"] for d in docs if d["n"] >= 100], reverse=True), q)
    q = list(hpk.query_items("SELECT VALUE COUNT(1) FROM c WHERE c.UserId = 'u1'", enable_cross_partition_query=True))
    check(q == [4], q)
    q = list(hpk.query_items("SELECT VALUE c.id FROM c WHERE c.TenantId = @t AND c.n < @n",
                             parameters=[{"name": "@t", "value": "t0"}, {"name": "@n", "value": 10}],
                             enable_cross_partition_query=True))
    check(sorted(q) == ["e000", "e001"], q)

    # Container listing and deletion.
    check([x["id"] for x in db.list_containers()] == ["events"], "list containers")
    db.delete_container("events")
    expect_status(lambda: hpk.read(), 404)
finally:
    c.delete_database(db)
print("ok")
