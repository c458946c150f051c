"""The hostile probes of issue 47's findings 1 (query inputs): a large array parameter on
`SELECT TOP n c.id FROM c` ten times, then one and eight concurrent VectorDistance queries with
it, printing the server's RSS after each. Run against a built strata, e.g.

    target/pyenv/bin/python tools/probes/query_inputs.py
    STRATA_BIN=/path/to/other/strata PARAM_N=190000 STRATA_ARGS="--query-memory-bytes 536870912" \
        target/pyenv/bin/python tools/probes/query_inputs.py

STRATA_BIN (default target/release/strata) is started with --in-memory on a free port;
PARAM_N is the array's length (450000: a 4.45 MB parameter); STRATA_ARGS adds flags.
Needs azure-cosmos (target/pyenv has it after the tests ran). Linux only (RSS from /proc).
"""
import os
import sys, time, threading
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_common import *
p, url = start(*os.environ.get("STRATA_ARGS", "").split())
c = client(url)
db = c.create_database("d"); co = db.create_container("c", PartitionKey("/pk"))
for i in range(20): co.create_item({"id": str(i), "pk": "a", "v": [0.1, 0.2, 0.3]})
big = [round(0.1 + i * 1e-6, 6) for i in range(int(os.environ.get("PARAM_N", "450000")))]
import json; print("param bytes", len(json.dumps(big)))
print("rss start", rss(p))
for n in range(1, 11):
    try:
        r = list(co.query_items(f"SELECT TOP {n} c.id FROM c", parameters=[{"name": "@big", "value": big}], enable_cross_partition_query=True))
        res = len(r)
    except Exception as e:
        res = str(e)[:120]
    print(n, res, "rss", rss(p), flush=True)
def vq():
    try:
        list(co.query_items("SELECT TOP 5 c.id FROM c ORDER BY VectorDistance(c.v, @q)", parameters=[{"name": "@q", "value": big}], enable_cross_partition_query=True))
    except Exception as e:
        print("vq", str(e)[:150])
vq(); print("after vector query rss", rss(p))
ts = [threading.Thread(target=vq) for _ in range(8)]
peak = [0]
def watch():
    while any(t.is_alive() for t in ts): peak[0] = max(peak[0], rss(p)); time.sleep(0.05)
[t.start() for t in ts]; w = threading.Thread(target=watch); w.start(); [t.join() for t in ts]; w.join()
print("8 vector queries: peak", peak[0], "after", rss(p))
p.kill()
