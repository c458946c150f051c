"""The official Python SDK keeps working across partition splits: queries that are halfway
through their pages when partitions split return every matching item exactly once.

The server runs with a tiny split threshold; filler items written between pages force splits.
"""
from azure.cosmos import PartitionKey, ThroughputProperties

from common import check, client, fresh_database

c = client()
db = fresh_database(c, "split")
try:
    cont = db.create_container(
        "ev", partition_key=PartitionKey(path=["/TenantId", "/UserId", "/SessionId"], kind="MultiHash"))

    def ranges():
        return list(cont.client_connection._ReadPartitionKeyRanges(cont.container_link))

    match = {}
    for i in range(120):
        t = "acme" if i % 2 == 0 else f"t{i % 9}"
        d = {"id": f"m{i}", "kind": "match", "TenantId": t, "UserId": f"u{i % 7}", "SessionId": "s", "n": i}
        cont.create_item(d)
        match[d["id"]] = d

    filler_no = [0]

    def force_splits(rounds):
        before = len(ranges())
        for _ in range(rounds):
            i = filler_no[0]
            filler_no[0] += 1
            t = "acme" if i % 2 == 0 else f"f{i % 13}"
            cont.create_item({"id": f"f{i}", "kind": "filler", "TenantId": t, "UserId": f"u{i % 11}",
                              "SessionId": "s", "pad": "x" * 400})
        return before, len(ranges())

    def drain_with_split(pages, check_order=None):
        seen = []
        first = True
        for page in pages:
            seen.extend(list(page))
            if first:
                first = False
                before, after = force_splits(150)
                check(after > before, f"filler writes split partitions ({before} -> {after})")
        return seen

    # 1. A cross-partition query, paged by strata's continuation tokens.
    pages = cont.query_items("SELECT * FROM c WHERE c.kind = 'match'", enable_cross_partition_query=True,
                             max_item_count=10).by_page()
    seen = [d["id"] for d in drain_with_split(pages)]
    check(len(seen) == len(set(seen)), f"no duplicates ({len(seen)} rows, {len(set(seen))} distinct)")
    check(set(seen) == set(match), f"every matching item once: missing {set(match) - set(seen)}")

    # 2. ORDER BY across a split.
    pages = cont.query_items("SELECT c.id, c.n FROM c WHERE c.kind = 'match' ORDER BY c.n DESC",
                             enable_cross_partition_query=True, max_item_count=7).by_page()
    rows = drain_with_split(pages)
    check([r["n"] for r in rows] == sorted((d["n"] for d in match.values()), reverse=True), "ORDER BY intact")

    # 3. A hierarchical prefix query: the SDK reads /pkranges and queries each overlapping
    #    range with EPK headers; after the split it gets 410/1002 and must resume on the children.
    acme = {k for k, d in match.items() if d["TenantId"] == "acme"}
    pages = cont.query_items("SELECT * FROM c WHERE c.kind = 'match'", partition_key=["acme"],
                             max_item_count=5).by_page()
    seen = [d["id"] for d in drain_with_split(pages)]
    check(len(seen) == len(set(seen)), "prefix query: no duplicates")
    check(set(seen) == acme, f"prefix query: missing {acme - set(seen)}, extra {set(seen) - acme}")

    # 4. The read feed after all splits.
    all_ids = [d["id"] for d in cont.read_all_items()]
    check(len(all_ids) == len(set(all_ids)) == len(match) + filler_no[0], "read feed complete")
    print("partitions:", len(ranges()))

    # 5. Throughput through the SDK: replace and read back.
    t = db.create_container("tp", partition_key=PartitionKey(path="/pk"), offer_throughput=400)
    check(t.get_throughput().offer_throughput == 400, "initial throughput")
    t.replace_throughput(11000)
    check(t.get_throughput().offer_throughput == 11000, "replaced throughput")
    a = db.create_container("auto", partition_key=PartitionKey(path="/pk"),
                            offer_throughput=ThroughputProperties(auto_scale_max_throughput=4000))
    check(a.get_throughput().auto_scale_max_throughput == 4000, "autoscale throughput")
finally:
    c.delete_database(db)
print("ok")
