// Resource tokens through the official JavaScript SDK: a tenant-scoped permission on a
// /TenantId/UserId/SessionId container (a prefix of the hierarchical key, strata's
// extension), used through `resourceTokens` and through a `tokenProvider`. Prints "ok".
import { CosmosClient, PermissionMode } from "@azure/cosmos";

const endpoint = process.env.STRATA_ENDPOINT;
const admin = new CosmosClient({ endpoint, key: process.env.STRATA_KEY });

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

async function status(p) {
  try {
    await p;
    return 200;
  } catch (e) {
    return e.code;
  }
}

const { database } = await admin.databases.createIfNotExists({ id: "tokens" });
const { container } = await database.containers.createIfNotExists({
  id: "sessions",
  partitionKey: { paths: ["/TenantId", "/UserId", "/SessionId"], kind: "MultiHash", version: 2 },
});
for (const t of ["contoso", "fabrikam"]) {
  for (const u of ["alice", "bob"]) {
    await container.items.upsert({ id: `${t}-${u}`, TenantId: t, UserId: u, SessionId: "s1" });
  }
}
const { user } = await database.users.upsert({ id: "contoso-app" });
const link = `dbs/${database.id}/colls/${container.id}`;
const { resource: perm } = await user.permissions.upsert({
  id: "contoso",
  permissionMode: PermissionMode.All,
  resource: link,
  resourcePartitionKey: ["contoso"],
});
check(perm._token && perm._token.startsWith("type=resource"), `token: ${perm._token}`);

// resourceTokens.
const byTokens = new CosmosClient({ endpoint, resourceTokens: { [link]: perm._token } });
const c1 = byTokens.database(database.id).container(container.id);
const { resources } = await c1.items.query("SELECT * FROM c").fetchAll();
check(
  JSON.stringify(resources.map((d) => d.id).sort()) === '["contoso-alice","contoso-bob"]',
  `tenant query: ${JSON.stringify(resources.map((d) => d.id))}`,
);
const { resource: bob } = await c1.item("contoso-bob", ["contoso", "bob", "s1"]).read();
check(bob && bob.id === "contoso-bob", "read in scope");
const outside = await c1.item("fabrikam-bob", ["fabrikam", "bob", "s1"]).read().then((r) => r.statusCode, (e) => e.code);
check(outside === 403, `read outside scope: ${outside}`);
const created = await status(c1.items.create({ id: "new", TenantId: "contoso", UserId: "carol", SessionId: "s2" }));
check(created === 200, `create in scope: ${created}`);
const refused = await status(c1.items.create({ id: "new", TenantId: "fabrikam", UserId: "eve", SessionId: "s2" }));
check(refused === 403, `create outside scope: ${refused}`);

// tokenProvider: the application hands out the token per request.
let asked = 0;
const byProvider = new CosmosClient({
  endpoint,
  tokenProvider: async () => {
    asked++;
    return perm._token;
  },
});
const c2 = byProvider.database(database.id).container(container.id);
const { resources: again } = await c2.items.query("SELECT VALUE c.id FROM c").fetchAll();
check(again.length === 3, `provider query: ${JSON.stringify(again)}`);
check(asked > 0, "the token provider was asked");
const deleted = await status(c2.item("contoso-alice", ["contoso", "alice", "s1"]).delete());
check(deleted === 200, `delete in scope: ${deleted}`);
console.log("ok");
