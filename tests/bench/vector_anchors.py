"""Anchors of `strata-bench --suite vector`, on the vectors the suite wrote:

    python vector_anchors.py DIR DIMS CLIENTS SECONDS

DIR holds base.f32, queries.f32 (little-endian float32) and truth.u32 (the exact top 10 of
each query). Prints one JSON line per anchor: name, insert (vectors/s), build (s), recall
(recall@10), qps and p50/p99 at CLIENTS threads each sending one query at a time, rss_mb.

* faiss-cpu HNSW (M 32, efConstruction 100), in process: the near-limit. efSearch rises from
  16 until recall@10 >= 0.95; queries then run one per call from CLIENTS threads with one
  OpenMP thread each (faiss releases the GIL while it searches).
* milvus-lite (pymilvus MilvusClient over a local file): the local vector database a user
  would pick instead. Its index is the one milvus-lite builds (it offers FLAT and IVF_FLAT;
  the default is used), cosine metric.
"""
import json, os, resource, sys, threading, time
import numpy as np

d, dims, clients, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
base = np.fromfile(os.path.join(d, "base.f32"), dtype="<f4").reshape(-1, dims)
queries = np.fromfile(os.path.join(d, "queries.f32"), dtype="<f4").reshape(-1, dims)
truth = np.fromfile(os.path.join(d, "truth.u32"), dtype="<u4").reshape(-1, 10)


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0


def recall(found):
    return sum(len(set(f) & set(t.tolist())) for f, t in zip(found, truth)) / (10 * len(truth))


def load_test(search):
    """Queries/s and latency percentiles with `clients` threads, one query per call."""
    lat, stop, lock = [], time.time() + seconds, threading.Lock()
    counter = [0]

    def worker(k):
        mine, i = [], k
        while time.time() < stop:
            t0 = time.perf_counter()
            search(queries[i % len(queries)])
            mine.append(time.perf_counter() - t0)
            i += clients
        with lock:
            lat.extend(mine)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
    t0 = time.time()
    [t.start() for t in ts]
    [t.join() for t in ts]
    el = time.time() - t0
    lat.sort()
    pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else 0
    return len(lat) / el, pct(0.5), pct(0.99)


def faiss_anchor():
    import faiss
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    xb = base.copy(); faiss.normalize_L2(xb)
    xq = queries.copy(); faiss.normalize_L2(xq)
    index = faiss.IndexHNSWFlat(dims, 32, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = 100
    t0 = time.time(); index.add(xb); build = time.time() - t0
    ef = 16
    while True:
        index.hnsw.efSearch = ef
        _, ids = index.search(xq, 10)
        r = recall(ids.tolist())
        if r >= 0.95 or ef >= 1024:
            break
        ef *= 2
    faiss.omp_set_num_threads(1)
    qps, p50, p99 = load_test(lambda q: index.search(q.reshape(1, -1), 10))
    return {"name": "faiss-cpu HNSW", "insert": len(xb) / build, "build": build, "recall": r,
            "qps": qps, "p50_ms": p50, "p99_ms": p99, "rss_mb": rss_mb(),
            "note": f"M 32, efConstruction 100, efSearch {ef}, faiss {faiss.__version__}"}


def milvus_anchor():
    from pymilvus import MilvusClient
    path = os.path.join(d, "milvus.db")
    client = MilvusClient(path)
    client.create_collection("v", dimension=dims, metric_type="COSINE", auto_id=False)
    t0 = time.time()
    step = 1000
    for s in range(0, len(base), step):
        rows = [{"id": int(i), "vector": base[i].tolist()} for i in range(s, min(s + step, len(base)))]
        client.insert("v", rows)
    build = time.time() - t0
    found = [[h["id"] for h in res] for res in
             (client.search("v", data=[q.tolist()], limit=10)[0] for q in queries)]
    r = recall(found)
    qps, p50, p99 = load_test(lambda q: client.search("v", data=[q.tolist()], limit=10))
    import pymilvus
    desc = client.describe_index("v", client.list_indexes("v")[0]) if client.list_indexes("v") else {}
    return {"name": "milvus-lite", "insert": len(base) / build, "build": build, "recall": r,
            "qps": qps, "p50_ms": p50, "p99_ms": p99, "rss_mb": rss_mb(),
            "note": f"index {desc.get('index_type', '?')}, pymilvus {pymilvus.__version__}"}


# milvus-lite searches by scanning, one query at a time: past half a million vectors its
# recall pass alone (200 queries) runs for tens of minutes, so it is measured at 100,000.
anchors = (faiss_anchor, milvus_anchor) if len(base) <= 500_000 else (faiss_anchor,)
if len(base) > 500_000:
    print("milvus_anchor: skipped above 500,000 vectors (measured at 100,000)", file=sys.stderr)
for anchor in anchors:
    try:
        print(json.dumps(anchor()), flush=True)
    except Exception as e:  # one anchor missing must not hide the other
        print(f"{anchor.__name__}: {e!r}", file=sys.stderr)
