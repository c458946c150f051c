// Vector search through the official JavaScript SDK: a container with a vector embedding
// policy over several physical partitions, and `SELECT TOP k ... ORDER BY VectorDistance(...)`
// across them — the SDK asks for the query plan, runs the rewritten query per range and
// merges the top rows itself (a non-streaming ORDER BY), as against the service. The result
// must equal the exact top k computed here. Prints "ok".
import { CosmosClient } from "@azure/cosmos";

const client = new CosmosClient({
  endpoint: process.env.STRATA_ENDPOINT,
  key: process.env.STRATA_KEY,
});

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

const { database } = await client.databases.createIfNotExists({ id: "vectors" });
const { container } = await database.containers.createIfNotExists({
  id: "docs",
  partitionKey: { paths: ["/pk"], kind: "Hash", version: 2 },
  throughput: 40000,
  vectorEmbeddingPolicy: {
    vectorEmbeddings: [{ path: "/v", dataType: "float32", dimensions: 3, distanceFunction: "cosine" }],
  },
  indexingPolicy: { vectorIndexes: [{ path: "/v", type: "quantizedFlat" }] },
});
const { resources: ranges } = await container.readPartitionKeyRanges().fetchAll();
check(ranges.length > 1, `several partitions: ${ranges.length}`);

// Points on a spiral, so every distance differs.
const docs = [];
for (let i = 0; i < 200; i++) {
  const a = i * 0.37;
  docs.push({ id: `d${i}`, pk: `p${i % 23}`, v: [Math.cos(a), Math.sin(a), (i % 11) / 10 - 0.5] });
}
for (const d of docs) await container.items.upsert(d);

const q = [0.3, 0.9, -0.2];
const norm = (x) => Math.sqrt(x.reduce((s, y) => s + y * y, 0));
const dot = (x, y) => x.reduce((s, v, i) => s + v * y[i], 0);
const cosine = (x) => dot(x, q) / (norm(x) * norm(q));
const euclid = (x) => Math.sqrt(x.reduce((s, v, i) => s + (v - q[i]) ** 2, 0));

async function top(sql) {
  const { resources } = await container.items
    .query({ query: sql, parameters: [{ name: "@q", value: q }] }, { maxItemCount: 4 })
    .fetchAll();
  return resources;
}

// The container's function (cosine): most similar first.
const byCosine = await top("SELECT TOP 7 c.id, VectorDistance(c.v, @q) AS s FROM c ORDER BY VectorDistance(c.v, @q)");
const want = [...docs].sort((a, b) => cosine(b.v) - cosine(a.v)).slice(0, 7).map((d) => d.id);
check(JSON.stringify(byCosine.map((r) => r.id)) === JSON.stringify(want),
  `cosine top 7: ${JSON.stringify(byCosine)} vs ${JSON.stringify(want)}`);
for (let i = 1; i < byCosine.length; i++) check(byCosine[i - 1].s >= byCosine[i].s, "descending scores");

// A function of the call's own: euclidean, nearest first.
const byDistance = await top(
  "SELECT TOP 5 c.id FROM c ORDER BY VectorDistance(c.v, @q, false, {'distanceFunction': 'euclidean'})");
const nearest = [...docs].sort((a, b) => euclid(a.v) - euclid(b.v)).slice(0, 5).map((d) => d.id);
check(JSON.stringify(byDistance.map((r) => r.id)) === JSON.stringify(nearest),
  `euclidean top 5: ${JSON.stringify(byDistance)} vs ${JSON.stringify(nearest)}`);

// ASC/DESC is the service's 400.
let code = 0;
try {
  await top("SELECT TOP 5 c.id FROM c ORDER BY VectorDistance(c.v, @q) DESC");
} catch (e) {
  code = e.code;
}
check(code === 400, `ORDER BY VectorDistance DESC answers 400, not ${code}`);
console.log("ok");
