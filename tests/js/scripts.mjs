// The official JavaScript SDK's server-side script API against strata: stored procedures
// (create, execute with a hierarchical partition key, rollback on throw), pre/post triggers
// on item writes, and a UDF in a cross-partition query. Prints "ok" when every check passes.
import { CosmosClient, TriggerType, TriggerOperation } from "@azure/cosmos";

const client = new CosmosClient({ endpoint: process.env.STRATA_ENDPOINT, key: process.env.STRATA_KEY });

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

const { database } = await client.databases.createIfNotExists({ id: "scripts" });
const { container } = await database.containers.createIfNotExists({
  id: "sessions",
  partitionKey: { paths: ["/t", "/u"], kind: "MultiHash", version: 2 },
});

// A counter: read-modify-write of one document, atomically.
await container.scripts.storedProcedures.create({
  id: "increment",
  body: function (id, by) {
    var c = getContext().getCollection();
    var link = c.getAltLink() + "/docs/" + id;
    c.readDocument(link, {}, function (err, doc) {
      if (err && err.number !== 404) throw err;
      var next = { id: id, t: "contoso", u: "alice", count: (doc ? doc.count : 0) + by };
      c.upsertDocument(c.getSelfLink(), next, {}, function (err, saved) {
        if (err) throw err;
        getContext().getResponse().setBody(saved.count);
      });
    });
  },
});
const sp = container.scripts.storedProcedure("increment");
const key = ["contoso", "alice"];
let r = await sp.execute(key, ["hits", 2]);
check(r.resource === 2, `first increment: ${JSON.stringify(r.resource)}`);
r = await sp.execute(key, ["hits", 3]);
check(r.resource === 5, `second increment: ${JSON.stringify(r.resource)}`);

// A throw rolls back and reaches the client as an error with the service's status.
await container.scripts.storedProcedures.create({
  id: "half",
  body: "function () { var c = getContext().getCollection(); c.createDocument(c.getSelfLink(), {id: 'half', t: 'contoso', u: 'alice'}); throw new Error('no'); }",
});
let failed = null;
try {
  await container.scripts.storedProcedure("half").execute(key, []);
} catch (e) {
  failed = e;
}
check(failed && failed.code === 400, `throwing sproc: ${failed && failed.code}`);
const half = await container.item("half", key).read();
check(half.statusCode === 404, "the throwing sproc's write was rolled back");

// Triggers.
await container.scripts.triggers.create({
  id: "lower",
  body: "function () { var d = getContext().getRequest().getBody(); d.name = d.name.toLowerCase(); getContext().getRequest().setBody(d); }",
  triggerType: TriggerType.Pre,
  triggerOperation: TriggerOperation.All,
});
const { resource: created } = await container.items.create(
  { id: "p1", t: "contoso", u: "bob", name: "BOB" },
  { preTriggerInclude: ["lower"] },
);
check(created.name === "bob", `pre-trigger: ${created.name}`);

// A UDF across partitions.
await container.scripts.userDefinedFunctions.create({
  id: "initial",
  body: "function (s) { return s ? s.charAt(0).toUpperCase() : undefined; }",
});
const { resources } = await container.items
  .query("SELECT VALUE udf.initial(c.name) FROM c WHERE IS_DEFINED(c.name)")
  .fetchAll();
check(JSON.stringify(resources) === '["B"]', `udf query: ${JSON.stringify(resources)}`);

const { resources: sprocs } = await container.scripts.storedProcedures.readAll().fetchAll();
check(sprocs.length === 2, `sprocs listed: ${sprocs.length}`);
await container.scripts.storedProcedure("half").delete();
console.log("ok");
