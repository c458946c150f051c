"""The hostile probes of issue 47's findings 3 and 4 (search operators): FullTextContainsAny
with 1,000 / 4,000 / 10,000 terms, RRF with 2 / 16 / 50 FullTextScore components beside one
1.9 MB text, and four 16-component fusions at once while a COUNT runs on another container;
prints each latency and the server's RSS. Run against a built strata, e.g.

    target/pyenv/bin/python tools/probes/search_operators.py
    STRATA_BIN=/path/to/other/strata target/pyenv/bin/python tools/probes/search_operators.py

STRATA_BIN defaults to target/release/strata (started --in-memory on a free port).
Needs azure-cosmos (target/pyenv has it after the tests ran). Linux only (RSS from /proc).
"""
import os
import sys, time, threading, random
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_common import *
p, url = start()
c = client(url)
db = c.create_database("d")
co = db.create_container("t", PartitionKey("/pk"),
    full_text_policy={"defaultLanguage": "en-US", "fullTextPaths": [{"path": "/text", "language": "en-US"}]},
    indexing_policy={"indexingMode": "consistent", "includedPaths": [{"path": "/*"}], "excludedPaths": [{"path": "/\"_etag\"/?"}], "fullTextIndexes": [{"path": "/text"}]})
other = db.create_container("o", PartitionKey("/pk"))
for i in range(50): other.create_item({"id": str(i), "pk": "a"})
words = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed", "do"] + [f"w{i}" for i in range(500)]
rnd = random.Random(1)
for i in range(300):
    co.create_item({"id": str(i), "pk": f"p{i%10}", "text": " ".join(rnd.choice(words) for _ in range(60))})
big = " ".join(rnd.choice(words) for _ in range(300000))[:1_900_000]
co.create_item({"id": "big", "pk": "p0", "text": big})
print("rss loaded", rss(p), flush=True)
def q(sql, params=None):
    t = time.time()
    try:
        r = list(co.query_items(sql, parameters=params or [], enable_cross_partition_query=True))
        out = len(r)
    except Exception as e:
        out = "ERR " + str(e).split("\n")[0][:160]
    return out, time.time() - t
for n in (1000, 4000, 10000):
    terms = ", ".join(f"'t{i}'" for i in range(n - 1)) + ", 'lorem'"
    out, dt = q(f"SELECT TOP 10 c.id FROM c WHERE FullTextContainsAny(c.text, {terms})")
    print(f"ContainsAny {n} terms: {out} {dt:.2f}s rss {rss(p)}", flush=True)
for k in (2, 16, 50):
    comps = ", ".join("FullTextScore(c.text, 'lorem')" for _ in range(k))
    out, dt = q(f"SELECT TOP 10 c.id FROM c ORDER BY RANK RRF({comps})")
    print(f"RRF {k} components: {out} {dt:.2f}s rss {rss(p)}", flush=True)
comps = ", ".join(f"FullTextScore(c.text, 'w{i}')" for i in range(16))
rrf = f"SELECT TOP 10 c.id FROM c ORDER BY RANK RRF({comps})"
res = []
ts = [threading.Thread(target=lambda: res.append(q(rrf))) for _ in range(4)]
[t.start() for t in ts]; time.sleep(0.3)
t0 = time.time(); n = list(other.query_items("SELECT VALUE COUNT(1) FROM c", enable_cross_partition_query=True)); cnt = time.time() - t0
[t.join() for t in ts]
print(f"4 RRF(16) at once: {[f'{r[1]:.2f}s' for r in res]}; COUNT on another container meanwhile {cnt:.3f}s -> {n}", flush=True)
print("rss end", rss(p))
p.kill()
