"""How many bits a scalar-quantized code needs on the vector bench's data, asked of faiss.

A graph search waits on memory for each code it reads, so halving the code (8 bits a
dimension to 4) would halve that wait; this measures what it costs in recall before any of
it is built in strata. Data in the manner of the vector bench's generator
(tests/bench/src/vector.rs: 100 centres, each coordinate a sum of three uniforms; numpy's
generator, so not the same numbers): 100,000 × 768, 200 queries, cosine. faiss HNSW over
8-, 4- and 6-bit scalar codes (M 16, efConstruction 100, efSearch 100), five times the
results re-ranked with the exact vectors (IndexRefineFlat), one search thread. Prints
recall@10 and queries/s for each.

    python -m pip install faiss-cpu==1.15.1 numpy
    python tests/bench/faiss_scalar_bits.py
"""
import time

import faiss
import numpy as np

rng = np.random.default_rng(1)
n, d, nq = 100_000, 768, 200


def noise(shape):
    return (rng.random(shape) + rng.random(shape) + rng.random(shape) - 1.5) * 0.5


centres = (noise((100, d)) * 2).astype("float32")
xs = (centres[np.arange(n) % 100] + noise((n, d)) * 0.6).astype("float32")
qs = (centres[rng.integers(0, 100, nq)] + noise((nq, d)) * 0.6).astype("float32")
faiss.normalize_L2(xs)
faiss.normalize_L2(qs)
exact = faiss.IndexFlatIP(d)
exact.add(xs)
_, truth = exact.search(qs, 10)
for name, qt in [("8-bit", faiss.ScalarQuantizer.QT_8bit),
                 ("4-bit", faiss.ScalarQuantizer.QT_4bit),
                 ("6-bit", faiss.ScalarQuantizer.QT_6bit)]:
    index = faiss.IndexHNSWSQ(d, qt, 16, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = 100
    refined = faiss.IndexRefineFlat(index)
    refined.k_factor = 5
    refined.train(xs)
    start = time.time()
    refined.add(xs)
    built = time.time() - start
    index.hnsw.efSearch = 100
    faiss.omp_set_num_threads(1)
    start = time.time()
    _, found = refined.search(qs, 10)
    took = time.time() - start
    recall = np.mean([len(set(found[i]) & set(truth[i])) / 10 for i in range(nq)])
    print(f"{name}: build {built:.1f} s, recall@10 {recall:.3f}, {nq / took:.0f} q/s (one thread)",
          flush=True)
