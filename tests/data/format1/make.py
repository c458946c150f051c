"""Writes the format-1 fixture: run against a strata from before storage format 2 (binary EPKs,
2026-11-24; commit b33582a) started on an empty data folder, then copy that folder here as
`store/` and the printed JSON as `expected.json`.

    strata --port 18331 --data-dir /tmp/fx --partition-split-bytes 16KB &
    python make.py http://127.0.0.1:18331 > expected.json

What it writes exercises every key space that names documents: items (created, replaced,
deleted) under a three-level hierarchical key with a unique key and the default index, a hash
v2 key and a hash v1 key (which keeps the hex spelling), over several physical partitions.
"""
import json
import sys

from azure.cosmos import CosmosClient, PartitionKey

KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="
url = sys.argv[1]
client = CosmosClient(url, credential=KEY)
db = client.create_database("fx")

three = db.create_container(
    "three",
    partition_key=PartitionKey(path=["/tenant", "/user", "/session"], kind="MultiHash"),
    unique_key_policy={"uniqueKeys": [{"paths": ["/email"]}]},
)
two = db.create_container("two", partition_key=PartitionKey(path="/pk"))
one = db.create_container("one", partition_key=PartitionKey(path="/pk", version=1))

pad = "x" * 40
for i in range(400):
    three.create_item({
        "id": f"d{i}", "tenant": f"t{i % 7}", "user": f"u{i % 13}", "session": f"s{i % 3}",
        "email": f"e{i}@x", "n": i % 10, "pad": pad,
    })
for i in range(0, 400, 5):  # replace a fifth
    d = three.read_item(f"d{i}", [f"t{i % 7}", f"u{i % 13}", f"s{i % 3}"])
    d["n"] = 100 + i
    three.replace_item(d["id"], d)
for i in range(3, 400, 9):  # delete some
    three.delete_item(f"d{i}", [f"t{i % 7}", f"u{i % 13}", f"s{i % 3}"])
for i in range(150):
    two.upsert_item({"id": f"h{i}", "pk": f"p{i % 17}", "n": i % 10, "pad": pad})
for i in range(60):
    one.upsert_item({"id": f"o{i}", "pk": f"q{i % 5}", "n": i % 10})

out = {}
for name, c in [("three", three), ("two", two), ("one", one)]:
    items = sorted(c.read_all_items(), key=lambda d: d["id"])
    feed = [d["id"] for d in c.query_items_change_feed(start_time="Beginning")]
    n7 = sorted(d["id"] for d in c.query_items(
        "SELECT c.id FROM c WHERE c.n = 7", enable_cross_partition_query=True))
    out[name] = {"items": items, "feed": feed, "n7": n7}
out["three"]["t3"] = sorted(d["id"] for d in three.query_items(
    "SELECT c.id FROM c WHERE c.tenant = 't3' AND c.user = 'u4'", partition_key=["t3", "u4"]))
print(json.dumps(out, indent=1, sort_keys=True))
