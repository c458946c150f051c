// Drives the Data Explorer in headless Chromium as a user would: create a MultiHash container,
// insert and edit items, walk tenant → user → session, run a prefix query and read its route,
// open the partitions view after splits, fail a region and fail over; checks that another origin cannot use the page's
// secret. Prints facts for tests/explorer.rs and "ok"; screenshots go to $SCREENSHOTS.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';

const url = process.env.STRATA_URL; // e.g. http://127.0.0.1:1234/
const shots = process.env.SCREENSHOTS;
mkdirSync(shots, { recursive: true });
const other = url.replace('127.0.0.1', 'localhost'); // the same server, another origin

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu'],
});
const fail = async (msg) => {
  console.log('FAILED: ' + msg);
  await browser.close();
  process.exit(1);
};
try {
  const page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  const shot = (name) => page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
  const byTest = (id) => page.locator(`[data-testid="${id}"]`);

  await page.goto(url);
  await page.waitForURL(/_explorer\/index\.html$/);
  await byTest('tree').waitFor();
  await shot('01-home');

  // A database and a three-level MultiHash container, through the dialogs.
  await byTest('new-database').click();
  await byTest('db-id').fill('app');
  await byTest('dialog-ok').click();
  await byTest('db-app').waitFor();
  await byTest('new-coll-app').click();
  await byTest('coll-id').fill('events');
  await byTest('pk-path-1').fill('/TenantId');
  await byTest('pk-path-2').fill('/UserId');
  await byTest('pk-path-3').fill('/SessionId');
  await byTest('dialog-ok').click();
  await byTest('tab-items').waitFor();
  const def = await page.evaluate(async () => {
    const token = document.querySelector('meta[name="strata-token"]').content;
    const r = await fetch('/dbs/app/colls/events', { headers: { 'x-strata-explorer-token': token } });
    return r.json();
  });
  console.log(`container: ${def.partitionKey.kind} ${def.partitionKey.paths.join(',')}`);

  // One item through the item editor, at the root (the editor pre-fills the key paths).
  await byTest('new-item').click();
  await byTest('item-json').fill(JSON.stringify({ id: 'first', TenantId: 't1', UserId: 'u1', SessionId: 's1', note: 'typed in the explorer' }));
  await byTest('save-item').click();
  await byTest('key-0-t1').waitFor();

  // Many more from the page's own session, enough to split the container's partitions.
  const written = await page.evaluate(async () => {
    const token = document.querySelector('meta[name="strata-token"]').content;
    let n = 0;
    const pad = 'x'.repeat(1500);
    const jobs = [];
    for (let i = 0; i < 360; i++) {
      const doc = { id: `i${i}`, TenantId: `t${i % 3 + 1}`, UserId: `u${i % 4 + 1}`, SessionId: `s${i % 5 + 1}`, n: i, pad };
      jobs.push(fetch('/dbs/app/colls/events/docs', {
        method: 'POST',
        headers: { 'x-strata-explorer-token': token, 'content-type': 'application/json', 'x-ms-documentdb-partitionkey': JSON.stringify([doc.TenantId, doc.UserId, doc.SessionId]) },
        body: JSON.stringify(doc),
      }).then((r) => { if (r.ok) n++; }));
      if (jobs.length === 20) { await Promise.all(jobs.splice(0)); }
    }
    await Promise.all(jobs);
    return n;
  });
  console.log(`items written: ${written + 1}`);

  // Navigate tenant → user → session → items, with counts at each level.
  await byTest('tab-query').click();
  await byTest('tab-items').click();
  await byTest('key-0-t1').click();
  await byTest('level-1').waitFor();
  const users = await byTest('level-1').locator('button').count();
  await byTest('key-1-u1').click();
  await byTest('level-2').waitFor();
  await shot('02-tree-user');
  await byTest('key-2-s1').click();
  await byTest('items').waitFor();
  await byTest('item-first').click();
  await byTest('item-json').waitFor();
  const shown = JSON.parse(await byTest('item-json').inputValue());
  console.log(`navigated: t1 has ${users} users; opened ${shown.id} (${shown.note})`);
  await shot('03-items');

  // Edit with the ETag check.
  shown.note = 'edited in the explorer';
  await byTest('item-json').fill(JSON.stringify(shown));
  await byTest('save-item').click();
  await byTest('item-first').click();
  const edited = JSON.parse(await byTest('item-json').inputValue());
  console.log(`edited: ${edited.note}`);

  // Delete another item of the same session.
  await byTest('item-i0').click();
  await byTest('delete-item').click();
  await byTest('items').waitFor();
  await page.waitForFunction(() => !document.querySelector('[data-testid="item-i0"]'));
  console.log(`deleted: i0 gone, ${await byTest('items').locator('.item').count()} items left in t1/u1/s1`);

  // A prefix query: targeted, with the ranges it visits.
  await byTest('tab-query').click();
  await byTest('query-text').fill("SELECT c.id, c.UserId FROM c WHERE c.TenantId = 't2' ORDER BY c.n");
  // Typing the key scopes the query to it (the scope follows; no fan-out without a word).
  await byTest('query-key').fill('["t2"]');
  if (await byTest('query-scope').inputValue() !== 'key') throw new Error('typing a key left the scope on all partitions');
  await byTest('run-query').click();
  await byTest('query-route').waitFor();
  const route = await byTest('query-route').textContent();
  const ranges = await byTest('query-ranges').textContent();
  const plan = await byTest('query-plan').textContent();
  console.log(`query route: ${route}; ranges: ${ranges}; plan lines: ${plan.split('\n').length}`);
  await shot('04-query');
  // Page on with the continuation: the next 20 rows, in order after the first 20.
  const firstPage = JSON.parse(await byTest('query-json').textContent());
  await byTest('query-next').click();
  await page.waitForFunction(() => document.querySelector('[data-testid="query-meta"]')?.textContent.includes('page 2'));
  const secondPage = JSON.parse(await byTest('query-json').textContent());
  const overlap = secondPage.filter((r) => firstPage.some((f) => f.id === r.id)).length;
  console.log(`paged: ${firstPage.length} then ${secondPage.length}, ${overlap} repeated`);
  await byTest('query-scope').selectOption('all');
  await byTest('query-text').fill('SELECT VALUE COUNT(1) FROM c');
  await byTest('run-query').click();
  await page.waitForFunction(() => document.querySelector('[data-testid="query-route"]')?.textContent === 'fanout');
  console.log(`count query: ${(await byTest('query-json').textContent()).replace(/\s+/g, '')}`);

  // A hybrid search: two full-text scores fused by rank, answered by the server.
  await byTest('query-text').fill("SELECT TOP 3 c.id, c.TenantId, c.UserId FROM c ORDER BY RANK RRF(FullTextScore(c.TenantId, 't2'), FullTextScore(c.UserId, 'u1'))");
  await byTest('run-query').click();
  await page.waitForFunction(() => document.querySelector('[data-testid="query-json"]')?.textContent.includes('"UserId"'));
  const fused = JSON.parse(await byTest('query-json').textContent());
  console.log(`hybrid query: ${fused.map((r) => `${r.TenantId}/${r.UserId}`).join(',')}`);

  // A global secondary index of the container, keyed by user: its source, status and lag.
  await page.evaluate(async () => api('POST', '/dbs/app/colls', { body: {
    id: 'byUser', partitionKey: { paths: ['/UserId'], kind: 'Hash', version: 2 },
    globalSecondaryIndexDefinition: { sourceCollectionId: 'events', definition: 'SELECT c.UserId, c.note FROM c' },
  } }));
  let gsi = '';
  for (let i = 0; i < 100 && !/Active · caught up/.test(gsi); i++) {
    await page.evaluate(async () => openContainer('app', 'byUser'));
    gsi = await byTest('gsi-info').textContent();
    if (!/Active · caught up/.test(gsi)) await page.waitForTimeout(100);
  }
  const tree = await byTest('coll-app-byUser').textContent();
  console.log(`gsi: ${gsi}; tree: ${tree}`);
  await page.evaluate(async () => { await api('DELETE', '/dbs/app/colls/byUser'); await openContainer('app', 'events'); });

  // The partitions view after the splits.
  await byTest('tab-partitions').click();
  await byTest('partition-bar').waitFor();
  await page.waitForTimeout(2500); // one live refresh
  const segs = await byTest('partition-bar').locator('.seg').count();
  const lineage = await byTest('range-table').textContent();
  console.log(`partitions: ${segs}; lineage shown: ${lineage.includes('split from')}`);
  await shot('05-partitions');

  // A server-side copy into a two-level key, started from the container and watched in Jobs.
  await byTest('copy-container').click();
  await byTest('copy-dest').fill('app/by-user');
  await byTest('copy-pk-3').fill('');
  await byTest('dialog-ok').click();
  await byTest('jobs').waitFor();
  await page.waitForFunction(() => {
    const s = document.querySelector('[data-testid^="job-state-"]');
    return s && s.textContent !== 'running';
  }, null, { timeout: 60000 });
  const jobRow = await byTest('jobs').locator('tbody tr').first().textContent();
  console.log(`copy job: ${/succeeded/.test(jobRow) ? 'succeeded' : jobRow}; ${(jobRow.match(/verified: \d+ items/) || ['?'])[0]}`);
  await shot('07-jobs');

  // The Advise tab: the container's three-level key against two candidates, drawn, and the
  // copy into the recommended key started from it.
  await byTest('coll-app-events').click();
  await byTest('tab-advise').click();
  await byTest('advise-key-1').fill('/TenantId');
  await byTest('advise-key-2').fill('/UserId,/SessionId');
  await byTest('advise-run').click();
  await byTest('advise-recommendation').waitFor({ timeout: 60000 });
  const cards = await page.locator('[data-testid^="advise-card-"]').count();
  const checks = await page.locator('[data-testid="advise-card-1"] .checks li').count();
  const segsAdvised = await page.locator('[data-testid="advise-parts-1"] .seg').count();
  const recommended = (await byTest('advise-recommendation').locator('h2').textContent()).trim();
  await shot('08-advise');
  // The copy command reads: its text contrasts with its background (it was grey on grey).
  const contrast = await page.evaluate(() => {
    const pre = document.querySelector('.advice pre');
    if (!pre) return null;
    const lum = (c) => {
      const [r, g, b] = c.match(/\d+/g).slice(0, 3).map((x) => {
        const v = Number(x) / 255;
        return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
      });
      return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const s = getComputedStyle(pre);
    const [a, b] = [lum(s.color), lum(s.backgroundColor)].sort((x, y) => y - x);
    return (a + 0.05) / (b + 0.05);
  });
  if (contrast !== null && contrast < 4.5) throw new Error(`the advice's command is unreadable: contrast ${contrast.toFixed(2)}`);
  let advisedCopy = 'none (keep)';
  if (await byTest('advise-copy').count()) {
    await byTest('advise-copy').click();
    await byTest('jobs').waitFor();
    await page.waitForFunction(() => [...document.querySelectorAll('[data-testid^="job-state-"]')].every((s) => s.textContent !== 'running'), null, { timeout: 60000 });
    advisedCopy = /succeeded[\s\S]*succeeded/.test(await byTest('jobs').textContent()) ? 'succeeded' : await byTest('jobs').textContent();
  }
  console.log(`advise: ${cards} keys, ${checks} checks, ${segsAdvised > 0 ? 'partitions drawn' : 'no partitions'}; ${recommended}; copy ${advisedCopy}`);

  // The Regions view: fail East US, clear it, make it the write region.
  await byTest('regions-link').click();
  await byTest('region-1').waitFor();
  await byTest('region-down-1').click();
  await page.locator('[data-testid="region-fault-1"]', { hasText: 'unavailable' }).waitFor();
  const down = await byTest('region-fault-1').textContent();
  await shot('09-regions');
  await byTest('region-clear-1').click();
  await page.locator('[data-testid="region-fault-1"]', { hasText: 'none' }).waitFor();
  await byTest('region-failover-1').click();
  await page.locator('[data-testid="region-role-1"]', { hasText: 'writes' }).waitFor();
  const roles = [0, 1].map(async (i) => byTest(`region-role-${i}`).textContent());
  console.log(`regions: East US ${down}; then ${await byTest('region-fault-1').textContent()}; after failover West US ${await roles[0]}, East US ${await roles[1]}`);

  // The Access view: a custom role, an assignment of it and one of the built-in reader, then
  // the reader's removed; what the server then holds is read back through the API.
  await byTest('access-link').click();
  await byTest('no-assignments').waitFor();
  await byTest('role-name').fill('Item writer');
  await byTest('role-actions').fill('Microsoft.DocumentDB/databaseAccounts/readMetadata\nMicrosoft.DocumentDB/databaseAccounts/sqlDatabases/containers/items/create');
  await byTest('role-add').click();
  await byTest('role-2').waitFor();
  await byTest('assign-principal').fill('writer-oid');
  await byTest('assign-role').selectOption({ label: 'Item writer' });
  await byTest('assign-scope').fill('/dbs/shop');
  await byTest('assign').click();
  await byTest('assignment-0').waitFor();
  await byTest('assign-principal').fill('reader-oid');
  await byTest('assign-role').selectOption({ label: 'Cosmos DB Built-in Data Reader' });
  await byTest('assign-scope').fill('/');
  await byTest('assign').click();
  await byTest('assignment-1').waitFor();
  await shot('10-access');
  await byTest('assignment-remove-1').click();
  await page.waitForFunction(() => !document.querySelector('[data-testid="assignment-1"]'));
  const held = await page.evaluate(async () => (await api('GET', '/_strata/rbac')).json);
  const a = held.roleAssignments.map((x) => `${x.principalId} ${held.roleDefinitions.find((d) => d.id === x.roleDefinitionId).roleName} at ${x.scope}`);
  console.log(`access: ${held.roleDefinitions.length} roles; ${a.join('; ')}`);

  // Another origin (the same server as http://localhost) can use neither the secret nor the API.
  const token = await page.evaluate(() => document.querySelector('meta[name="strata-token"]').content);
  const page2 = await browser.newPage();
  await page2.goto(other + '_strata/ready');
  const stolen = await page2.evaluate(async ([target, t]) => {
    const out = {};
    try {
      const r = await fetch(target + 'dbs', { headers: { 'x-strata-explorer-token': t } });
      out.api = r.status;
    } catch (e) { out.api = 'blocked'; }
    try {
      const r = await fetch(target + '_explorer/index.html');
      out.page = (await r.text()).includes(t) ? 'read' : r.status;
    } catch (e) { out.page = 'blocked'; }
    return out;
  }, [url, token]);
  console.log(`cross-origin: api ${stolen.api}, page ${stolen.page}`);

  // A server listening beyond loopback: the page asks for the key before anything else.
  if (process.env.STRATA_URL_CLOSED) {
    const p3 = await browser.newPage({ viewport: { width: 1360, height: 700 } });
    p3.on('pageerror', (e) => errors.push(e.message));
    await p3.goto(process.env.STRATA_URL_CLOSED + '_explorer/index.html');
    await p3.locator('#login-key').waitFor();
    const treeHidden = await p3.locator('#app').isHidden();
    await p3.fill('#login-key', 'not-the-key');
    await p3.click('#login-form button');
    await p3.locator('#login-error', { hasText: "not this account's key" }).waitFor();
    await p3.screenshot({ path: `${shots}/06-login.png` });
    await p3.fill('#login-key', process.env.STRATA_KEY);
    await p3.click('#login-form button');
    await p3.locator('[data-testid="tree"] li').first().waitFor();
    console.log(`closed explorer: data hidden before the key ${treeHidden}, wrong key refused, right key opens ${await p3.locator('#app').isVisible()}`);
  }
  if (errors.length) await fail('errors in the page: ' + errors.join(' | '));
  console.log('ok');
} catch (e) {
  await fail(e.stack || String(e));
}
await browser.close();
