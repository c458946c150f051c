// Full-text and hybrid search through the official JavaScript SDK: a container with a
// full-text policy and index and a vector embedding over several physical partitions. The
// SDK asks for the query plan, gets hybridSearchQueryInfo, runs the global statistics query
// and the component queries on every range and fuses the ranks itself, as against the
// service. Scores are recomputed here (BM25 over the whole container, RRF over all
// documents) and the SDK's rows must be the best ones, best first. Prints "ok".
import { CosmosClient } from "@azure/cosmos";

const client = new CosmosClient({
  endpoint: process.env.STRATA_ENDPOINT,
  key: process.env.STRATA_KEY,
});

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

const { database } = await client.databases.createIfNotExists({ id: "search" });
const { container } = await database.containers.createIfNotExists({
  id: "docs",
  partitionKey: { paths: ["/pk"], kind: "Hash", version: 2 },
  throughput: 40000,
  fullTextPolicy: { defaultLanguage: "en-US", fullTextPaths: [{ path: "/t", language: "en-US" }] },
  vectorEmbeddingPolicy: {
    vectorEmbeddings: [{ path: "/v", dataType: "float32", dimensions: 2, distanceFunction: "cosine" }],
  },
  indexingPolicy: { fullTextIndexes: [{ path: "/t" }] },
});
const { resources: ranges } = await container.readPartitionKeyRanges().fetchAll();
check(ranges.length > 1, `several partitions: ${ranges.length}`);

// Words the English analysis keeps whole (no stop words; each stem is its own word).
const words = ["river", "stone", "bridge", "light", "forest", "night", "harbor"];
const docs = [];
for (let i = 0; i < 120; i++) {
  const n = 3 + (i % 6);
  const t = [];
  for (let k = 0; k < n; k++) t.push(words[(i * 5 + k * k * 3) % words.length]);
  const a = i * 0.05;
  docs.push({ id: `d${i}`, pk: `p${i % 17}`, t: t.join(" "), v: [Math.cos(a), Math.sin(a)] });
}
for (const d of docs) await container.items.upsert(d);

// BM25 of each document for single-word terms, as the service defines it (k1 1.2, b 0.75).
function bm25(terms) {
  const toks = docs.map((d) => d.t.split(" "));
  const n = docs.length;
  const avg = toks.reduce((s, t) => s + t.length, 0) / n;
  const df = terms.map((w) => toks.filter((t) => t.includes(w)).length);
  return toks.map((t) =>
    terms.reduce((s, w, i) => {
      const tf = t.filter((x) => x === w).length;
      if (tf === 0) return s;
      const idf = Math.log(1 + (n - df[i] + 0.5) / (df[i] + 0.5));
      return s + (idf * tf * 2.2) / (tf + 1.2 * (0.25 + (0.75 * t.length) / avg));
    }, 0));
}

const byId = (scores) => new Map(docs.map((d, i) => [d.id, scores[i]]));
const close = (a, b) => Math.abs(a - b) < 1e-9;

async function rows(sql, parameters = []) {
  const { resources } = await container.items.query({ query: sql, parameters }, { maxItemCount: 5 }).fetchAll();
  return resources;
}

// ORDER BY RANK FullTextScore: the best BM25 scores, best first.
const text = bm25(["bridge", "harbor"]);
const got = await rows("SELECT TOP 8 c.id FROM c ORDER BY RANK FullTextScore(c.t, 'bridge', 'harbor')");
check(got.length === 8, `8 rows: ${JSON.stringify(got)}`);
const best = [...text].sort((a, b) => b - a).slice(0, 8);
const score = byId(text);
got.forEach((r, i) => check(close(score.get(r.id), best[i]), `rank ${i}: ${r.id} ${score.get(r.id)} vs ${best[i]}`));

// RRF of the text score and the vector similarity, weighted: every document ranked (LIMIT
// covers them all, so each component reaches every document on every range).
const q = [0.2, 1.0];
const cos = docs.map((d) => (d.v[0] * q[0] + d.v[1] * q[1]) / Math.hypot(...d.v) / Math.hypot(...q));
const ranks = (s) => {
  const distinct = [...new Set(s)].sort((a, b) => b - a);
  return s.map((x) => distinct.indexOf(x) + 1);
};
const [rt, rv] = [ranks(text), ranks(cos)];
const fused = docs.map((_, i) => 1 / (60 + rt[i]) + 2 / (60 + rv[i]));
const hybrid = await rows(
  "SELECT c.id FROM c ORDER BY RANK RRF(FullTextScore(c.t, 'bridge', 'harbor'), VectorDistance(c.v, @q), [1, 2]) OFFSET 0 LIMIT 120",
  [{ name: "@q", value: q }]);
check(hybrid.length === 120, `120 rows: ${hybrid.length}`);
const want = [...fused].sort((a, b) => b - a);
const f = byId(fused);
hybrid.slice(0, 10).forEach((r, i) => check(close(f.get(r.id), want[i]), `fused rank ${i}: ${r.id} ${f.get(r.id)} vs ${want[i]}`));

// A score outside ORDER BY RANK is the service's 400.
let refused = false;
try {
  await rows("SELECT FullTextScore(c.t, 'bridge') AS s FROM c");
} catch (e) {
  refused = e.code === 400;
}
check(refused, "FullTextScore in a projection is refused");
console.log("ok");
