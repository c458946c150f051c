// strata Data Explorer: the Advise tab. Candidate partition keys measured on the container's
// items and sampled queries by the server (POST /_strata/containers/{db}/{c}/advise), drawn
// as pictures: logical partition sizes, physical partitions, write heat and query routes per
// key, the recommendation with its reasons, and a button that copies into the recommended
// key (a server-side copy job). Uses app.js's helpers (el, api, field, toast, fmtBytes).
'use strict';

async function renderAdvise(body) {
  const cur = state.def.partitionKey.paths.join(',');
  const suggestions = [
    state.def.partitionKey.paths.length < 3 ? `${cur},/UserId,/SessionId` : '',
    '/UserId',
    '',
  ];
  const keys = suggestions.map((s, i) => el('input', {
    type: 'text', 'data-testid': `advise-key-${i + 1}`, value: s,
    placeholder: i === 0 ? '/TenantId,/UserId,/SessionId' : 'optional candidate',
  }));
  const ru = el('input', { type: 'number', min: '400', step: '100', placeholder: "the container's", 'data-testid': 'advise-throughput' });
  const growth = el('input', { type: 'number', min: '1', step: '0.5', value: '2', 'data-testid': 'advise-growth' });
  const out = el('div', { 'data-testid': 'advise-out' });
  const run = el('button', { class: 'primary', 'data-testid': 'advise-run', onclick: async () => {
    run.disabled = true;
    out.replaceChildren(el('p', { class: 'muted', text: 'Reading every item and replaying the sampled queries…' }));
    try {
      const ask = { keys: keys.map((k) => k.value.trim()).filter(Boolean), growth: Number(growth.value) || 2 };
      if (ru.value) ask.throughput = Number(ru.value);
      const v = (await api('POST', `/_strata/containers/${enc(state.db)}/${enc(state.coll)}/advise`, { body: ask })).json;
      out.replaceChildren(drawAdvice(v));
    } catch (e) {
      out.replaceChildren(el('p', { class: 'error', text: e.message }));
    } finally { run.disabled = false; }
  } }, 'Advise');
  body.append(
    el('p', { class: 'muted', text: `Measure candidate keys on this container's items and the queries it served, before copying into one. The current key (${cur}) is always measured.` }),
    field('Candidate keys (comma-separated paths, up to three levels)', el('div', { class: 'row' }, keys)),
    el('div', { class: 'row' }, field('Throughput (RU/s)', ru), field('Growth (×)', growth), run),
    out);
}

function drawAdvice(v) {
  const rec = v.recommendation;
  const recBox = el('div', { class: 'advice', 'data-testid': 'advise-recommendation' },
    el('h2', { text: rec.keepCurrent ? `Keep ${rec.key.join(', ')}` : `Recommended: ${rec.key.join(', ')}` }),
    el('ul', {}, rec.reasons.map((r) => el('li', { text: r }))),
    rec.command ? el('pre', { text: rec.command }) : null,
    rec.keepCurrent ? null : el('button', { class: 'primary', 'data-testid': 'advise-copy', onclick: async () => {
      const dest = rec.command.match(/--dest (\S+)/)[1];
      const body = { source: `${state.db}/${state.coll}`, dest, partitionKey: rec.key, fill: [] };
      const job = (await api('POST', '/_strata/jobs', { body })).json;
      toast(`Copy job ${job.id} started`);
      await renderJobs();
    } }, `Copy into ${rec.key.join(', ')}`));
  const read = v.source.itemsTotal && v.source.itemsTotal > v.itemsRead
    ? `${v.itemsRead} of ${v.source.itemsTotal} items read (scaled up)`
    : `${v.itemsRead} items read`;
  return el('div', {},
    el('p', { class: 'muted', text: `${read}; ${v.queryShapes} query shape(s), ${Math.round(v.queryExecutions)} execution(s) sampled; ${v.settings.throughput} RU/s, partitions split past ${fmtBytes(v.settings.splitBytes)}, logical partitions hold ${fmtBytes(v.settings.logicalLimit)}.` }),
    recBox,
    el('div', { class: 'cards' }, v.candidates.map((c, i) => drawCandidate(c, i + 1, v))));
}

function drawCandidate(c, rank, v) {
  const tags = [c.current ? 'current' : '', c.key.join() === v.recommendation.key.join() ? 'recommended' : ''].filter(Boolean);
  const l = c.logical;
  const h = c.heat;
  const r = c.routing;
  // Logical partition sizes: one bar per power-of-four bucket, height by count.
  const most = Math.max(1, ...l.histogram.map((b) => b[1]));
  const hist = el('div', { class: 'hist', title: 'logical partitions by size' }, l.histogram.map(([upTo, n]) => el('div', {
    class: `hbar${upTo > v.settings.logicalLimit ? ' over' : ''}`,
    style: `height:${Math.max(4, (n / most) * 60)}px`,
    title: `${n} logical partition(s) up to ${fmtBytes(upTo)}`,
  })));
  // Physical partitions: width by bytes, colour by write heat against each one's budget.
  const total = c.physical.bytes.reduce((s, b) => s + b, 0) || 1;
  const parts = el('div', { class: 'bar', 'data-testid': `advise-parts-${rank}` }, c.physical.bytes.map((b, j) => el('div', {
    class: 'seg',
    style: `flex:${Math.max(b / total, 0.02)};background:${heat(h.partitionBudget ? h.physicalRuPerSec[j] / h.partitionBudget : 0)}`,
    title: `${fmtBytes(b)}, writes ${h.physicalRuPerSec[j].toFixed(1)} of ${h.partitionBudget.toFixed(0)} RU/s`,
  })));
  const routes = r.executions ? el('div', { class: 'bar routes' },
    [['single', r.single, '#2f7d4f'], ['targeted', r.targeted, '#c9a227'], ['fan-out', r.fanout, '#b42318']]
      .filter(([, share]) => share > 0)
      .map(([name, share, colour]) => el('div', { class: 'seg', style: `flex:${share};background:${colour}`, title: `${name}: ${(share * 100).toFixed(0)}% of executions` }, `${name} ${(share * 100).toFixed(0)}%`)))
    : el('p', { class: 'muted', text: 'No queries sampled yet.' });
  return el('div', { class: 'card', 'data-testid': `advise-card-${rank}` },
    el('h3', { text: `#${rank} ${c.key.join(', ')}${tags.length ? ` (${tags.join(', ')})` : ''}` }),
    el('p', { class: 'muted', text: `${l.count} logical partitions, largest ${fmtBytes(l.largestBytes)} ${JSON.stringify(l.largestKey)}; ${c.physical.partitions} physical (${c.physical.partitionsAtGrowth} at ${v.settings.growth}×)` }),
    el('label', { text: 'Logical partition sizes' }), hist,
    el('label', { text: 'Physical partitions (width: bytes, colour: write heat)' }), parts,
    el('label', { text: `Query routes (est. ${r.requestCharge.toFixed(0)} RU)` }), routes,
    el('ul', { class: 'checks' }, c.checks.map((k) => el('li', { class: k.ok ? 'ok' : 'fail', title: k.detail, text: `${k.ok ? '✓' : '✗'} ${k.name}` }))));
}
