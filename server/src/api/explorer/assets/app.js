// strata Data Explorer: plain JavaScript over the server's own Cosmos REST API. Requests
// carry the explorer's per-process secret (x-strata-explorer-token) instead of a signature;
// the server refuses it from any other origin. Every value from the server is put on the page
// as text (never as HTML).
'use strict';

const state = {
  token: '',
  db: null,
  coll: null,
  def: null, // the container's definition
  tab: 'items',
  keyPath: [], // chosen key values, level by level ({value, defined})
  timer: null,
};

// ---------- small helpers ----------

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(e.dataset, v);
    // Through the CSSOM: the page's content security policy allows no inline style attributes.
    else if (k === 'style') e.style.cssText = v;
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

const $ = (id) => document.getElementById(id);
const enc = encodeURIComponent;
const collPath = () => `/dbs/${enc(state.db)}/colls/${enc(state.coll)}`;

function toast(msg, bad) {
  const t = $('toast');
  t.textContent = msg;
  t.className = bad ? 'toast bad' : 'toast';
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, bad ? 7000 : 2500);
}

// Binary units, as strata's size flags (--partition-split-bytes 64MB) count them.
function fmtBytes(n) {
  if (n >= 2 ** 30) return (n / 2 ** 30).toFixed(2) + ' GB';
  if (n >= 2 ** 20) return (n / 2 ** 20).toFixed(2) + ' MB';
  if (n >= 2 ** 10) return (n / 2 ** 10).toFixed(1) + ' KB';
  return n + ' B';
}

/** An EPK bound shortened for a table (the whole one in the tooltip). */
function shortEpk(e) {
  if (!e) return '""';
  return e.length > 12 ? e.slice(0, 10) + '…' : e;
}

/** The service's message without its trailing activity id (kept in the response headers). */
function cleanMessage(m) {
  return String(m).split(/\r?\nActivityId:/)[0];
}

/** A call to the REST API; throws an Error with the service's message on failure. */
async function api(method, path, opts = {}) {
  const headers = Object.assign({
    'x-strata-explorer-token': state.token,
    'x-ms-version': '2020-07-15',
  }, opts.headers || {});
  let body;
  if (opts.body !== undefined) {
    body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
    if (!headers['content-type']) headers['content-type'] = 'application/json';
  }
  const r = await fetch(path, { method, headers, body, credentials: 'same-origin' });
  const text = await r.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (_) { json = null; }
  if (!r.ok) {
    const e = new Error(cleanMessage((json && json.message) || text || r.statusText));
    e.status = r.status;
    throw e;
  }
  return { status: r.status, json, headers: r.headers };
}

/** A query page: rows, continuation and what the server says about it. */
async function query(sql, params, opts = {}) {
  const headers = {
    'content-type': 'application/query+json',
    'x-ms-documentdb-isquery': 'true',
    'x-ms-documentdb-query-enablecrosspartition': 'true',
    'x-strata-explain': 'true',
    'x-ms-documentdb-populatequerymetrics': 'true',
    'x-ms-max-item-count': String(opts.pageSize || 100),
  };
  if (opts.partitionKey) headers['x-ms-documentdb-partitionkey'] = JSON.stringify(opts.partitionKey);
  if (opts.continuation) headers['x-ms-continuation'] = opts.continuation;
  const parameters = Object.entries(params || {}).map(([name, value]) => ({ name, value }));
  const r = await api('POST', `${collPath()}/docs`, { body: { query: sql, parameters }, headers });
  return {
    rows: (r.json && r.json.Documents) || [],
    continuation: r.headers.get('x-ms-continuation'),
    charge: Number(r.headers.get('x-ms-request-charge') || 0),
    route: r.headers.get('x-strata-query-route') || '',
    plan: unescapePlan(r.headers.get('x-strata-query-plan') || ''),
    metrics: r.headers.get('x-ms-documentdb-query-metrics') || '',
  };
}

/** Every page of a query (for the key tree's counts). */
async function queryAll(sql, params) {
  let rows = [], continuation = null, charge = 0;
  for (let i = 0; i < 200; i++) {
    const p = await query(sql, params, { continuation, pageSize: 1000 });
    rows = rows.concat(p.rows);
    charge += p.charge;
    continuation = p.continuation;
    if (!continuation) break;
  }
  return { rows, charge };
}

function unescapePlan(h) {
  return h.replace(/\\n/g, '\n').replace(/\\u\{([0-9a-f]+)\}/g, (_, x) => String.fromCodePoint(parseInt(x, 16))).replace(/\\\\/g, '\\');
}

/** `c["a"]["b"]` for the path `/a/b`. */
function pathExpr(path) {
  return 'c' + path.split('/').filter(Boolean).map((s) => `[${JSON.stringify(s)}]`).join('');
}

function valueAt(doc, path) {
  let v = doc;
  for (const s of path.split('/').filter(Boolean)) {
    if (v === null || typeof v !== 'object' || !(s in v)) return undefined;
    v = v[s];
  }
  return v;
}

function keyOf(doc) {
  return state.def.partitionKey.paths.map((p) => {
    const v = valueAt(doc, p);
    return v === undefined ? {} : v;
  });
}

function showKey(v) {
  return v.defined ? JSON.stringify(v.value) : '(undefined)';
}

// ---------- dialogs ----------

function dialog(title, fields, onOk, okText) {
  const d = $('dialog');
  d.replaceChildren();
  const err = el('p', { class: 'error' });
  const form = el('form', {}, el('h2', { text: title }), ...fields, err,
    el('div', { class: 'actions' },
      el('button', { type: 'button', onclick: () => { $('dialog-backdrop').hidden = true; } }, 'Cancel'),
      el('button', { type: 'submit', class: 'primary', 'data-testid': 'dialog-ok' }, okText || 'OK')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    err.textContent = '';
    try {
      await onOk();
      $('dialog-backdrop').hidden = true;
    } catch (e) {
      err.textContent = e.message;
    }
  });
  d.append(form);
  $('dialog-backdrop').hidden = false;
  const first = d.querySelector('input, textarea');
  if (first) first.focus();
}

function field(label, input) {
  return el('div', {}, el('label', { text: label }), input);
}

function newDatabase() {
  const id = el('input', { type: 'text', 'data-testid': 'db-id', placeholder: 'app' });
  const ru = el('input', { type: 'number', placeholder: 'none (each container its own)', min: '400', step: '100' });
  dialog('New database', [field('Database id', id), field('Shared throughput (RU/s, optional)', ru)], async () => {
    const headers = {};
    if (ru.value) headers['x-ms-offer-throughput'] = ru.value;
    await api('POST', '/dbs', { body: { id: id.value.trim() }, headers });
    toast(`Database ${id.value} created`);
    await renderTree();
  }, 'Create');
}

function newContainer(db) {
  const id = el('input', { type: 'text', 'data-testid': 'coll-id', placeholder: 'events' });
  const paths = [1, 2, 3].map((n) => el('input', {
    type: 'text', 'data-testid': `pk-path-${n}`,
    placeholder: n === 1 ? '/TenantId' : n === 2 ? '/UserId (optional: a hierarchical key)' : '/SessionId (optional)',
  }));
  const ru = el('input', { type: 'number', value: '400', min: '400', step: '100' });
  const autoscale = el('input', { type: 'checkbox' });
  const ttl = el('input', { type: 'text', placeholder: 'off (or -1: items choose, or seconds)' });
  const policy = el('textarea', { rows: '5', placeholder: '{"indexingMode": "consistent", "includedPaths": [{"path": "/*"}], "excludedPaths": [{"path": "/\\"_etag\\"/?"}]}' });
  const unique = el('input', { type: 'text', placeholder: 'e.g. /email, /tenant+/username (optional)' });
  dialog(`New container in ${db}`, [
    field('Container id', id),
    field('Partition key paths (one for a plain key; two or three for a hierarchical key)', el('div', { class: 'row' }, paths)),
    field('Throughput (RU/s)', el('div', { class: 'row' }, ru, el('label', {}, autoscale, ' autoscale (max)'))),
    field('Default time to live', ttl),
    field('Indexing policy (JSON, optional)', policy),
    field('Unique keys (comma-separated; + joins paths of one key)', unique),
  ], async () => {
    const ps = paths.map((p) => p.value.trim()).filter(Boolean);
    if (!ps.length) throw new Error('Give at least one partition key path, e.g. /TenantId.');
    const body = {
      id: id.value.trim(),
      partitionKey: ps.length > 1 ? { paths: ps, kind: 'MultiHash', version: 2 } : { paths: ps, kind: 'Hash', version: 2 },
    };
    if (ttl.value.trim()) body.defaultTtl = Number(ttl.value.trim());
    if (policy.value.trim()) {
      try { body.indexingPolicy = JSON.parse(policy.value); } catch (e) { throw new Error('The indexing policy is not JSON: ' + e.message); }
    }
    if (unique.value.trim()) {
      body.uniqueKeyPolicy = { uniqueKeys: unique.value.split(',').map((k) => ({ paths: k.split('+').map((s) => s.trim()) })) };
    }
    const headers = {};
    if (ru.value) {
      if (autoscale.checked) headers['x-ms-cosmos-offer-autopilot-settings'] = JSON.stringify({ maxThroughput: Number(ru.value) });
      else headers['x-ms-offer-throughput'] = ru.value;
    }
    await api('POST', `/dbs/${enc(db)}/colls`, { body, headers });
    toast(`Container ${body.id} created`);
    await renderTree();
    await openContainer(db, body.id);
  }, 'Create');
}

function confirmDelete(what, onYes) {
  dialog(`Delete ${what}?`, [el('p', { text: `This deletes ${what} and everything in it. There is no undo.` })], onYes, 'Delete');
}

// ---------- the tree of databases and containers ----------

async function renderTree() {
  const tree = $('tree');
  const dbs = (await api('GET', '/dbs')).json.Databases || [];
  const items = [];
  for (const d of dbs.sort((a, b) => a.id.localeCompare(b.id))) {
    const colls = (await api('GET', `/dbs/${enc(d.id)}/colls`)).json.DocumentCollections || [];
    const children = colls.sort((a, b) => a.id.localeCompare(b.id)).map((c) => {
      const sel = d.id === state.db && c.id === state.coll;
      return el('li', { class: 'coll' },
        el('div', {
          class: sel ? 'label selected' : 'label', 'data-testid': `coll-${d.id}-${c.id}`,
          onclick: () => openContainer(d.id, c.id),
        }, el('span', { class: 'name', text: c.id }), el('span', { class: 'pk', text: (c.partitionKey.paths || []).join(' › ')
          + (c.globalSecondaryIndexDefinition ? ` · index of ${c.globalSecondaryIndexDefinition.sourceCollectionId}` : '') })));
    });
    items.push(el('li', { class: 'db' },
      el('div', { class: 'label', 'data-testid': `db-${d.id}` }, el('span', { class: 'name', text: d.id }),
        el('button', { class: 'mini', title: 'New container', 'data-testid': `new-coll-${d.id}`, onclick: (e) => { e.stopPropagation(); newContainer(d.id); } }, '+'),
        el('button', { class: 'mini danger', title: 'Delete database', onclick: (e) => {
          e.stopPropagation();
          confirmDelete(`database ${d.id}`, async () => {
            await api('DELETE', `/dbs/${enc(d.id)}`);
            if (state.db === d.id) closeContainer();
            await renderTree();
          });
        } }, '×')),
      el('ul', {}, children)));
  }
  if (!items.length) items.push(el('li', { class: 'muted', text: 'No databases yet.' }));
  tree.replaceChildren(...items);
}

function closeContainer() {
  state.db = state.coll = state.def = null;
  stopTimer();
  $('content').replaceChildren($('welcome') || el('div', { class: 'welcome', text: 'Pick a container.' }));
}

function stopTimer() {
  if (state.timer) clearInterval(state.timer);
  state.timer = null;
}

async function openContainer(db, coll) {
  stopTimer();
  state.db = db;
  state.coll = coll;
  state.keyPath = [];
  const read = await api('GET', collPath());
  state.def = read.json;
  state.gsiLag = read.headers.get('x-strata-gsi-lag') || '';
  await renderTree();
  renderContainer();
}

/** A global secondary index's source, status and lag (nothing for other containers). */
function gsiInfo(def) {
  const g = def.globalSecondaryIndexDefinition;
  if (!g) return '';
  const lag = Object.fromEntries(state.gsiLag.split(';').map((p) => p.split('=')));
  const behind = Number(lag.changes || 0) === 0 ? 'caught up'
    : `${lag.changes} change(s) behind, the oldest ${lag.seconds} s ago`;
  return el('span', { class: 'pk', 'data-testid': 'gsi-info',
    text: `global secondary index of ${g.sourceCollectionId} (${g.definition}) · ${g.status} · ${behind}` });
}

function renderContainer() {
  const def = state.def;
  const tabs = ['items', 'query', 'partitions', 'advise', 'settings'];
  const tabBar = el('div', { class: 'tabs' }, tabs.map((t) => el('button', {
    class: state.tab === t ? 'active' : '', 'data-testid': `tab-${t}`,
    onclick: () => { state.tab = t; renderContainer(); },
  }, t[0].toUpperCase() + t.slice(1))));
  const body = el('div', { id: 'tab-body' });
  $('content').replaceChildren(
    el('div', { class: 'row' },
      el('h1', {}, `${state.db} / ${state.coll}`),
      el('span', { class: 'pk', text: `partition key ${def.partitionKey.paths.join(' › ')}${def.partitionKey.kind === 'MultiHash' ? ' (hierarchical)' : ''}` }),
      gsiInfo(def),
      el('button', { style: 'margin-left:auto', 'data-testid': 'copy-container', onclick: () => copyDialog() }, 'Copy into…'),
      el('button', { class: 'danger', onclick: () => confirmDelete(`container ${state.coll}`, async () => {
        await api('DELETE', collPath());
        closeContainer();
        await renderTree();
      }) }, 'Delete container')),
    tabBar, body);
  stopTimer();
  const render = { items: renderItems, query: renderQuery, partitions: renderPartitions, advise: renderAdvise, settings: renderSettings }[state.tab];
  render(body).catch((e) => body.append(el('p', { class: 'error', text: e.message })));
}

// ---------- copy jobs (run by the server: /_strata/jobs) ----------

function copyDialog() {
  const dest = el('input', { type: 'text', 'data-testid': 'copy-dest', value: `${state.db}/${state.coll}-copy` });
  const paths = [1, 2, 3].map((n) => el('input', {
    type: 'text', 'data-testid': `copy-pk-${n}`,
    value: state.def.partitionKey.paths[n - 1] || '',
    placeholder: n === 1 ? '/TenantId' : 'optional level',
  }));
  const fill = el('input', { type: 'text', 'data-testid': 'copy-fill', placeholder: '/SessionId=/id (comma-separated, optional)' });
  const follow = el('input', { type: 'checkbox' });
  dialog(`Copy ${state.db}/${state.coll}`, [
    el('p', { class: 'muted', text: 'The server copies the items online — a snapshot, then every change made meanwhile — into a new or existing container, e.g. one with a deeper hierarchical key. The job survives a restart.' }),
    field('Destination (DB/CONTAINER; created when missing)', dest),
    field('Partition key of a new destination', el('div', { class: 'row' }, paths)),
    field('Fill key properties old items lack', fill),
    el('label', {}, follow, ' keep following changes after catching up'),
  ], async () => {
    const body = {
      source: `${state.db}/${state.coll}`,
      dest: dest.value.trim(),
      partitionKey: paths.map((p) => p.value.trim()).filter(Boolean),
      fill: fill.value.split(',').map((f) => f.trim()).filter(Boolean),
      follow: follow.checked,
    };
    const job = (await api('POST', '/_strata/jobs', { body })).json;
    toast(`Copy job ${job.id} started`);
    await renderJobs();
  }, 'Start copy');
}

/** Opens a view of the account (no container selected): its title, an optional line of
 * explanation, and the box (data-testid `testid`) the view draws into, which it returns. */
async function accountView(title, testid, intro) {
  stopTimer();
  state.db = state.coll = state.def = null;
  await renderTree();
  const box = el('div', { 'data-testid': testid });
  $('content').replaceChildren(el('h1', { text: title }),
    intro ? el('p', { class: 'muted', text: intro }) : '', box);
  return box;
}

async function renderJobs() {
  const box = await accountView('Copy jobs', 'jobs');
  async function draw() {
    const jobs = (await api('GET', '/_strata/jobs')).json.Jobs || [];
    if (!jobs.length) {
      box.replaceChildren(el('p', { class: 'muted', text: 'No copy jobs. Start one with "Copy into…" on a container.' }));
      return;
    }
    box.replaceChildren(el('table', {},
      el('thead', {}, el('tr', {}, ['job', 'source → destination', 'state', 'progress', ''].map((h) => el('th', { text: h })))),
      el('tbody', {}, jobs.map((j) => el('tr', { 'data-testid': `job-${j.id}` },
        el('td', { text: j.id }),
        el('td', { text: `${j.source} → ${j.dest}${j.partitionKey ? ' (' + j.partitionKey.join(', ') + ')' : ''}` }),
        el('td', { 'data-testid': `job-state-${j.id}`, text: j.state }),
        el('td', { text: j.summary || j.error || (j.progress && j.progress.line) || '' }),
        el('td', {}, el('button', { class: 'danger', onclick: async () => {
          await api('DELETE', `/_strata/jobs/${enc(j.id)}`);
          await draw();
        } }, j.state === 'running' ? 'Stop' : 'Remove')))))));
  }
  await draw();
  state.timer = setInterval(() => {
    if (document.visibilityState === 'visible') draw().catch(() => {});
  }, 1000);
}

// ---------- items: the key tree, level by level ----------

function keyFilter() {
  const paths = state.def.partitionKey.paths;
  const where = [], params = {};
  state.keyPath.forEach((k, i) => {
    if (k.defined) {
      where.push(`${pathExpr(paths[i])} = @k${i}`);
      params[`@k${i}`] = k.value;
    } else {
      where.push(`NOT IS_DEFINED(${pathExpr(paths[i])})`);
    }
  });
  return { where: where.length ? ' WHERE ' + where.join(' AND ') : '', params };
}

async function renderItems(body) {
  const paths = state.def.partitionKey.paths;
  const level = state.keyPath.length;
  const crumbs = el('div', { class: 'crumbs', 'data-testid': 'crumbs' },
    el('button', { onclick: () => { state.keyPath = []; renderContainer(); } }, 'all'),
    state.keyPath.map((k, i) => [
      el('span', { class: 'muted', text: '›' }),
      el('button', { 'data-testid': `crumb-${i}`, onclick: () => { state.keyPath = state.keyPath.slice(0, i + 1); renderContainer(); } },
        `${paths[i].split('/').pop()} = ${showKey(k)}`),
    ]),
    el('button', { class: 'primary', style: 'margin-left:auto', 'data-testid': 'new-item', onclick: () => editItem(null) }, 'New item'));
  body.append(crumbs);
  const { where, params } = keyFilter();
  if (level < paths.length) {
    const expr = pathExpr(paths[level]);
    const r = await queryAll(`SELECT ${expr} AS k, COUNT(1) AS n FROM c${where} GROUP BY ${expr}`, params);
    const keys = r.rows.map((row) => ({ value: row.k, defined: 'k' in row, n: row.n }))
      .sort((a, b) => (b.n - a.n) || JSON.stringify(a.value).localeCompare(JSON.stringify(b.value)));
    const total = keys.reduce((s, k) => s + k.n, 0);
    body.append(
      el('h2', {}, `${paths[level].split('/').pop()} `, el('span', { class: 'muted', text: `(level ${level + 1} of ${paths.length}: ${keys.length} values, ${total} items, ${r.charge.toFixed(2)} RU)` })),
      keys.length ? el('div', { class: 'keys', 'data-testid': `level-${level}` }, keys.slice(0, 500).map((k) => el('button', {
        'data-testid': `key-${level}-${k.defined ? String(k.value) : 'undefined'}`,
        onclick: () => { state.keyPath = state.keyPath.concat([{ value: k.value, defined: k.defined }]); renderContainer(); },
      }, el('span', { text: showKey(k) }), el('span', { class: 'count', text: String(k.n) }))))
        : el('p', { class: 'muted', text: 'No items here yet.' }));
    return;
  }
  // A whole key chosen: the items of that logical partition.
  const list = el('div', { class: 'list', 'data-testid': 'items' });
  const panel = el('div', { id: 'item-panel' }, el('p', { class: 'muted', text: 'Pick an item.' }));
  body.append(el('div', { class: 'split' }, list, panel));
  let continuation = null;
  const more = el('button', { onclick: () => load() }, 'Load more');
  async function load() {
    const p = await query(`SELECT * FROM c${where}`, params, { continuation, pageSize: 100 });
    continuation = p.continuation;
    for (const doc of p.rows) {
      list.append(el('div', { class: 'item', 'data-testid': `item-${doc.id}`, onclick: (ev) => {
        list.querySelectorAll('.item').forEach((x) => x.classList.remove('selected'));
        ev.currentTarget.classList.add('selected');
        editItem(doc);
      } }, doc.id));
    }
    if (continuation) list.append(more); else more.remove();
  }
  await load();
}

function editItem(doc) {
  const panel = $('item-panel') || $('tab-body');
  const text = el('textarea', { rows: '18', 'data-testid': 'item-json' });
  const isNew = !doc;
  const shown = Object.assign({}, doc || {});
  if (isNew) {
    shown.id = '';
    state.def.partitionKey.paths.forEach((p, i) => {
      const k = state.keyPath[i];
      const segs = p.split('/').filter(Boolean);
      let o = shown;
      segs.slice(0, -1).forEach((s) => { o = o[s] = o[s] || {}; });
      o[segs[segs.length - 1]] = k && k.defined ? k.value : '';
    });
  }
  text.value = JSON.stringify(shown, null, 2);
  const status = el('p', { class: 'muted' });
  const save = el('button', { class: 'primary', 'data-testid': 'save-item', onclick: async () => {
    try {
      const body = JSON.parse(text.value);
      const headers = { 'x-ms-documentdb-partitionkey': JSON.stringify(keyOf(body)) };
      if (isNew) {
        await api('POST', `${collPath()}/docs`, { body, headers });
        toast(`Created ${body.id}`);
      } else {
        // The ETag check: a concurrent change is refused (412), not overwritten.
        headers['if-match'] = doc._etag;
        await api('PUT', `${collPath()}/docs/${enc(doc.id)}`, { body, headers });
        toast(`Saved ${body.id}`);
      }
      renderContainer();
    } catch (e) {
      status.className = 'error';
      status.textContent = e.status === 412 ? 'Someone changed this item since you opened it (ETag mismatch): reload it.' : e.message;
    }
  } }, isNew ? 'Create' : 'Save');
  const del = !isNew && el('button', { class: 'danger', 'data-testid': 'delete-item', onclick: async () => {
    try {
      await api('DELETE', `${collPath()}/docs/${enc(doc.id)}`, { headers: { 'x-ms-documentdb-partitionkey': JSON.stringify(keyOf(doc)), 'if-match': doc._etag } });
      toast(`Deleted ${doc.id}`);
      renderContainer();
    } catch (e) {
      status.className = 'error';
      status.textContent = e.message;
    }
  } }, 'Delete');
  panel.replaceChildren(el('h2', { text: isNew ? 'New item' : doc.id }), text, el('div', { class: 'row' }, save, del), status);
}

// ---------- query ----------

async function renderQuery(body) {
  const paths = state.def.partitionKey.paths;
  const sql = el('textarea', { rows: '5', 'data-testid': 'query-text' });
  sql.value = state.lastQuery || 'SELECT * FROM c';
  const params = el('textarea', { rows: '2', placeholder: '{"@tenant": "t1"} (optional)', 'data-testid': 'query-params' });
  params.value = state.lastParams || '';
  const scope = el('select', { 'data-testid': 'query-scope' },
    el('option', { value: 'all' }, 'all partitions'),
    el('option', { value: 'key' }, paths.length > 1 ? 'partition key or prefix' : 'partition key'));
  const key = el('input', { type: 'text', placeholder: paths.length > 1 ? '["t1"] or ["t1", "u1"]' : '["t1"]', 'data-testid': 'query-key' });
  // A key typed is a key meant: the scope follows it (a key left under "all partitions" used to
  // run the query over every partition without a word).
  key.addEventListener('input', () => { scope.value = key.value.trim() ? 'key' : 'all'; });
  const size = el('input', { type: 'number', value: '20', min: '1', max: '1000', style: 'width:6rem' });
  const asTable = el('input', { type: 'checkbox' });
  const out = el('div', { 'data-testid': 'query-out' });
  let continuation = null, page = 0;
  const next = el('button', { hidden: true, 'data-testid': 'query-next', onclick: () => run(false) }, 'Next page');
  async function run(fresh) {
    if (fresh) { continuation = null; page = 0; }
    state.lastQuery = sql.value;
    state.lastParams = params.value;
    try {
      const p = params.value.trim() ? JSON.parse(params.value) : {};
      const opts = { continuation, pageSize: Number(size.value) || 20 };
      if (scope.value === 'key') {
        if (!key.value.trim()) throw new Error('Type the partition key (or a prefix of it) to scope the query to, e.g. ["t1"].');
        opts.partitionKey = JSON.parse(key.value);
      }
      const r = await query(sql.value, p, opts);
      page += 1;
      continuation = r.continuation;
      next.hidden = !continuation;
      showResult(out, r, page, asTable.checked);
    } catch (e) {
      out.replaceChildren(el('p', { class: 'error', 'data-testid': 'query-error', text: e.message }));
    }
  }
  body.append(
    field('Query', sql),
    field('Parameters (JSON object)', params),
    el('div', { class: 'row' }, field('Scope', scope), field('Key', key), field('Page size', size),
      el('label', {}, asTable, ' results as a table')),
    el('div', { class: 'row', style: 'margin-top:.5rem' },
      el('button', { class: 'primary', 'data-testid': 'run-query', onclick: () => run(true) }, 'Run'), next),
    out);
}

// The route header names the ranges by id ("0,2"): say how many, then which.
function rangesText(ids) {
  const list = (ids || '').split(',').filter(Boolean);
  if (!list.length) return '';
  return `${list.length} (id${list.length > 1 ? 's' : ''} ${list.join(', ')})`;
}

function showResult(out, r, page, asTable) {
  const [route, ...rest] = r.route.split(';').map((s) => s.trim());
  const kv = Object.fromEntries(rest.map((s) => s.split('=')));
  const metrics = Object.fromEntries(r.metrics.split(';').filter(Boolean).map((s) => s.split('=')));
  const meta = el('dl', { class: 'meta', 'data-testid': 'query-meta' },
    el('dt', { text: 'route' }), el('dd', {}, el('span', { class: `route ${route}`, 'data-testid': 'query-route', text: route || '?' })),
    el('dt', { text: 'partition ranges visited' }), el('dd', { 'data-testid': 'query-ranges', text: rangesText(kv.ranges) }),
    el('dt', { text: 'documents scanned' }), el('dd', { text: kv.scanned || metrics.retrievedDocumentCount || '' }),
    el('dt', { text: 'returned' }), el('dd', { text: `${r.rows.length} (page ${page}${r.continuation ? ', more follow' : ''})` }),
    el('dt', { text: 'request charge' }), el('dd', { text: `${r.charge} RU` }),
    el('dt', { text: 'index lookups' }), el('dd', { text: metrics.indexLookupTimeInMs ? `${metrics.indexLookupTimeInMs} ms` : '' }));
  const result = asTable ? table(r.rows) : el('pre', { 'data-testid': 'query-json', text: JSON.stringify(r.rows, null, 2) });
  out.replaceChildren(el('h2', { text: 'Result' }), meta, result,
    el('h2', { text: 'Plan' }), el('pre', { 'data-testid': 'query-plan', text: r.plan || '(no plan)' }));
}

function table(rows) {
  const cols = [];
  for (const r of rows) {
    if (r && typeof r === 'object' && !Array.isArray(r)) {
      for (const k of Object.keys(r)) if (!cols.includes(k)) cols.push(k);
    }
  }
  if (!cols.length) return el('pre', { text: JSON.stringify(rows, null, 2) });
  const cell = (v) => (v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v));
  return el('table', { 'data-testid': 'query-table' },
    el('thead', {}, el('tr', {}, cols.map((c) => el('th', { text: c })))),
    el('tbody', {}, rows.map((r) => el('tr', {}, cols.map((c) => el('td', { text: cell(r[c]) }))))));
}

// ---------- partitions ----------

function heat(ratio) {
  // Green when idle through amber to red at the partition's whole budget.
  const r = Math.max(0, Math.min(1, ratio));
  const hue = 140 - 140 * r;
  return `hsl(${hue}, 62%, ${42 - 6 * r}%)`;
}

async function renderPartitions(body) {
  const box = el('div', { 'data-testid': 'partitions' });
  const auto = el('input', { type: 'checkbox', checked: true });
  body.append(el('div', { class: 'row' }, el('label', {}, auto, ' refresh every 2 s')), box);
  async function draw() {
    const v = (await api('GET', `/_strata/containers/${enc(state.db)}/${enc(state.coll)}/partitions`)).json;
    const parts = v.partitions || [];
    const totalBytes = parts.reduce((s, p) => s + p.bytes, 0) || 1;
    const bar = el('div', { class: 'bar', 'data-testid': 'partition-bar' }, parts.map((p) => {
      const ru = p.requestUnits || {};
      const ratio = ru.budgetPerSecond ? ru.consumedPerSecond / ru.budgetPerSecond : 0;
      const throttled = ru.throttledRequests > 0;
      return el('div', {
        class: 'seg', 'data-testid': `range-${p.id}`,
        style: `flex:${Math.max(p.bytes / totalBytes, 0.04)};background:${throttled ? '#b42318' : heat(ratio)}`,
        title: `range ${p.id}: ${p.minInclusive || '""'} … ${p.maxExclusive}\n${p.itemCount} items, ${fmtBytes(p.bytes)}\n${(ru.consumedPerSecond || 0).toFixed(1)} of ${(ru.budgetPerSecond || 0).toFixed(0)} RU/s${throttled ? `, ${ru.throttledRequests} throttled` : ''}`,
      }, p.id);
    }));
    const legend = el('div', { class: 'legend' }, el('span', { text: '"" (EPK min)' }), el('span', { text: 'width: bytes · colour: RU/s of budget (red: throttling)' }), el('span', { text: 'FF (EPK max)' }));
    const warnings = v.warnings || [];
    const warn = warnings.length
      ? el('ul', { class: 'warnings', 'data-testid': 'warnings' }, warnings.map((w) => el('li', { text: w.message })))
      : el('p', { class: 'ok', 'data-testid': 'warnings', text: 'No warnings: no logical partition near its limit, no hot range.' });
    const rows = parts.map((p) => {
      const ru = p.requestUnits || {};
      return el('tr', {},
        el('td', { text: p.id }),
        el('td', { title: `${p.minInclusive || '""'} … ${p.maxExclusive}` }, el('code', { text: `${shortEpk(p.minInclusive)} … ${shortEpk(p.maxExclusive)}` })),
        el('td', { text: (p.parents || []).length ? `split from ${p.parents.join(' → ')}` : 'original' }),
        el('td', { class: 'num', text: String(p.itemCount) }),
        el('td', { class: 'num', text: fmtBytes(p.bytes) }),
        el('td', { class: 'num', text: `${(ru.consumedPerSecond || 0).toFixed(1)} / ${(ru.budgetPerSecond || 0).toFixed(0)}` }),
        el('td', { class: 'num', text: String(ru.throttledRequests || 0) }),
        el('td', { class: 'num', text: `${p.requests.reads} / ${p.requests.writes} / ${p.requests.queries}` }));
    });
    const lps = parts.flatMap((p) => (p.largestLogicalPartitions || []).map((lp) => ({ ...lp, range: p.id })))
      .sort((a, b) => b.bytes - a.bytes).slice(0, 10);
    const hot = parts.flatMap((p) => ((p.requestUnits || {}).hottestLogicalPartitions || []).map((lp) => ({ ...lp, range: p.id })))
      .sort((a, b) => b.requestUnits - a.requestUnits).slice(0, 10);
    box.replaceChildren(
      el('p', { class: 'muted', text: `${parts.length} physical partition${parts.length === 1 ? '' : 's'}, generation ${v.generation}; a partition splits past ${fmtBytes(v.splitThresholdBytes)}, a logical partition may hold ${fmtBytes(v.logicalPartitionLimitBytes)}.` }),
      bar, legend, warn,
      el('h2', { text: 'Physical partitions' }),
      el('table', { 'data-testid': 'range-table' },
        el('thead', {}, el('tr', {}, ['range', 'EPK range', 'lineage', 'items', 'bytes', 'RU/s (used / budget)', 'throttled', 'reads / writes / queries'].map((h) => el('th', { text: h })))),
        el('tbody', {}, rows)),
      el('h2', { text: 'Largest logical partitions' }),
      el('table', {}, el('thead', {}, el('tr', {}, ['key', 'range', 'items', 'bytes'].map((h) => el('th', { text: h })))),
        el('tbody', {}, lps.map((lp) => el('tr', {}, el('td', { text: JSON.stringify(lp.partitionKey) }), el('td', { text: lp.range }),
          el('td', { class: 'num', text: String(lp.itemCount) }), el('td', { class: 'num', text: fmtBytes(lp.bytes) }))))),
      el('h2', { text: 'Hottest logical partitions' }),
      hot.length ? el('table', {}, el('thead', {}, el('tr', {}, ['key', 'range', 'request units'].map((h) => el('th', { text: h })))),
        el('tbody', {}, hot.map((lp) => el('tr', {}, el('td', { text: JSON.stringify(lp.partitionKey) }), el('td', { text: lp.range }),
          el('td', { class: 'num', text: lp.requestUnits.toFixed(1) })))))
        : el('p', { class: 'muted', text: 'No request units recorded yet.' }));
  }
  await draw();
  state.timer = setInterval(() => {
    if (auto.checked && document.visibilityState === 'visible') draw().catch(() => {});
  }, 2000);
}

// ---------- settings ----------

async function renderSettings(body) {
  const def = state.def;
  const shown = Object.fromEntries(Object.entries(def).filter(([k]) => !k.startsWith('_')));
  const text = el('textarea', { rows: '20', 'data-testid': 'settings-json' });
  text.value = JSON.stringify(shown, null, 2);
  const status = el('p', { class: 'muted', text: 'The partition key cannot change; the indexing policy, TTL and other properties can (a policy change rebuilds the index).' });
  let offer = null;
  let dbOffer = null;
  try {
    const offers = (await api('GET', '/offers')).json.Offers || [];
    offer = offers.find((o) => o.offerResourceId === def._rid) || null;
    if (!offer) {
      const db = (await api('GET', `/dbs/${enc(state.db)}`)).json;
      dbOffer = offers.find((o) => o.offerResourceId === db._rid) || null;
    }
  } catch (_) { offer = null; }
  const ruOf = (o) => o.content.offerThroughput || (o.content.offerAutopilotSettings || {}).maxThroughput || 0;
  // Said the way the Partitions view counts it: each range's budget is a share of this.
  const shared = dbOffer
    ? `Throughput: ${ruOf(dbOffer)} RU/s shared by the database ${state.db} (change it on the database); the Partitions view shows each range's share.`
    : "Throughput: none provisioned for this container or its database. The Partitions view budgets 400 RU/s, the service's minimum, shared by the ranges.";
  const ru = el('input', { type: 'number', min: '400', step: '100', value: offer ? String(offer.content.offerThroughput || '') : '' });
  body.append(
    field('Container definition', text),
    el('div', { class: 'row' },
      el('button', { class: 'primary', onclick: async () => {
        try {
          const v = JSON.parse(text.value);
          state.def = (await api('PUT', collPath(), { body: v })).json;
          toast('Container replaced');
        } catch (e) { status.className = 'error'; status.textContent = e.message; }
      } }, 'Replace container')),
    offer ? el('div', {}, field('Throughput (RU/s)', ru), el('button', { onclick: async () => {
      try {
        const o = Object.assign({}, offer, { content: Object.assign({}, offer.content, { offerThroughput: Number(ru.value) }) });
        await api('PUT', `/offers/${enc(offer._rid || offer.id)}`, { body: o });
        toast('Throughput changed');
      } catch (e) { status.className = 'error'; status.textContent = e.message; }
    } }, 'Set throughput')) : el('p', { class: 'muted', 'data-testid': 'throughput-note', text: shared }),
    status);
}

// ---------- start ----------

async function start() {
  $('endpoint').textContent = location.origin + '/';
  $('app').hidden = false;
  $('login').hidden = true;
  $('new-db').addEventListener('click', newDatabase);
  $('jobs').addEventListener('click', () => renderJobs().catch((e) => toast(e.message, true)));
  $('regions').addEventListener('click', () => renderRegions().catch((e) => toast(e.message, true)));
  $('access').addEventListener('click', () => renderAccess().catch((e) => toast(e.message, true)));
  $('refresh').addEventListener('click', () => renderTree().then(() => state.coll && openContainer(state.db, state.coll)));
  await renderTree();
}

function login() {
  $('login').hidden = false;
  if (document.querySelector('meta[name="strata-auth"]').content === 'entra') {
    $('login-key-note').hidden = true;
    $('login-entra-note').hidden = false;
    $('login-key').placeholder = 'Entra ID token';
  }
  $('login-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      const r = await fetch('/_explorer/session', {
        method: 'POST', headers: { 'content-type': 'application/json' },
        // A JWT (three dot-separated parts) signs in as its principal; anything else is a key.
        body: JSON.stringify($('login-key').value.trim().split('.').length === 3
          ? { token: $('login-key').value.trim() } : { key: $('login-key').value }),
      });
      const v = await r.json();
      if (!r.ok) throw new Error(cleanMessage(v.message || r.statusText));
      state.token = v.token;
      sessionStorage.setItem('strata-explorer-token', v.token);
      await start();
    } catch (e) {
      $('login-error').textContent = e.message;
    }
  });
}

document.addEventListener('DOMContentLoaded', () => {
  state.token = document.querySelector('meta[name="strata-token"]').content
    || sessionStorage.getItem('strata-explorer-token') || '';
  if (!state.token) { login(); return; }
  start().catch((e) => {
    if (e.status === 401) { sessionStorage.removeItem('strata-explorer-token'); state.token = ''; login(); }
    else toast(e.message, true);
  });
});
