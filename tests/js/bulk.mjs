// The official JavaScript SDK's bulk executor against strata: every operation type over a
// three-level hierarchical key, 250 operations per call, while partitions split underneath
// (the test server splits at a few hundred KB). Prints "ok" when every check passes.
import { CosmosClient, BulkOperationType } from "@azure/cosmos";

const endpoint = process.env.STRATA_ENDPOINT;
const key = process.env.STRATA_KEY;
const client = new CosmosClient({ endpoint, key });

function check(cond, what) {
  if (!cond) {
    throw new Error(`check failed: ${what}`);
  }
}

const { database } = await client.databases.createIfNotExists({ id: "bulk" });
const { container } = await database.containers.createIfNotExists({
  id: "sessions",
  partitionKey: { paths: ["/t", "/u", "/s"], kind: "MultiHash", version: 2 },
});

const N = 250;
const keyOf = (i) => [`t${i % 5}`, `u${i % 7}`, `s${i % 3}`];
const doc = (i, v) => {
  const [t, u, s] = keyOf(i);
  return { id: `i${i}`, t, u, s, n: i, v, pad: "x".repeat(1500) };
};
const statuses = (results) => results.map((r) => r.response?.statusCode ?? r.error?.code);

async function bulk(ops, want, what) {
  const results = await container.items.executeBulkOperations(ops);
  check(results.length === ops.length, `${what}: one result per operation`);
  const got = statuses(results);
  const bad = got.filter((s) => s !== want);
  check(bad.length === 0, `${what}: every status ${want}, got ${JSON.stringify(bad.slice(0, 5))}`);
  return results;
}

const create = [];
for (let i = 0; i < N; i++) {
  create.push({ operationType: BulkOperationType.Create, partitionKey: keyOf(i), resourceBody: doc(i, 0) });
}
await bulk(create, 201, "create");

const upsert = [];
for (let i = 0; i < N; i++) {
  upsert.push({ operationType: BulkOperationType.Upsert, partitionKey: keyOf(i), resourceBody: doc(i, 1) });
}
await bulk(upsert, 200, "upsert");

const read = [];
for (let i = 0; i < N; i++) {
  read.push({ operationType: BulkOperationType.Read, partitionKey: keyOf(i), id: `i${i}` });
}
const reads = await bulk(read, 200, "read");
check(reads.every((r) => r.response.resourceBody.v === 1), "reads see the upserts");

const replace = [];
for (let i = 0; i < N; i++) {
  replace.push({ operationType: BulkOperationType.Replace, partitionKey: keyOf(i), id: `i${i}`, resourceBody: doc(i, 2) });
}
await bulk(replace, 200, "replace");

const patch = [];
for (let i = 0; i < N; i++) {
  patch.push({
    operationType: BulkOperationType.Patch,
    partitionKey: keyOf(i),
    id: `i${i}`,
    resourceBody: { operations: [{ op: "incr", path: "/v", value: 10 }] },
  });
}
const patched = await bulk(patch, 200, "patch");
check(patched.every((r) => r.response.resourceBody.v === 12), "patches applied once");

const del = [];
for (let i = 0; i < N; i += 2) {
  del.push({ operationType: BulkOperationType.Delete, partitionKey: keyOf(i), id: `i${i}` });
}
await bulk(del, 204, "delete");

const { resources } = await container.items
  .query("SELECT VALUE COUNT(1) FROM c")
  .fetchAll();
check(resources[0] === N / 2, `count after deletes is ${resources[0]}`);

// A create of an id that exists fails alone; the others still run.
const mixed = [
  { operationType: BulkOperationType.Create, partitionKey: keyOf(1), resourceBody: doc(1, 0) },
  { operationType: BulkOperationType.Create, partitionKey: keyOf(0), resourceBody: doc(0, 0) },
];
const res = await container.items.executeBulkOperations(mixed);
const got = statuses(res);
check(got[0] === 409 && got[1] === 201, `conflict alone: ${JSON.stringify(got)}`);

const { resources: ranges } = await container.readPartitionKeyRanges().fetchAll();
console.log(`partition key ranges: ${ranges.length}`);
console.log("ok");
