// strata Data Explorer: the Regions view. The account's regions (`strata --regions`), each on
// its own port over one store, with buttons that inject the faults an application's
// failover is tested against (GET/PUT /_strata/regions, POST …/failover): the region down
// (503), refusing writes (403/3), timing out (408 after a hold), added latency, and a manual
// failover of the write region. Uses app.js's helpers (el, api, toast, accountView).
'use strict';

async function renderRegions() {
  const box = await accountView('Regions', 'regions',
    'Each region is served on its own port over the same data. A fault applies to the Cosmos API of its region; these controls always answer.');
  const set = async (name, fault) => {
    await api('PUT', `/_strata/regions/${enc(name)}`, { body: fault });
    toast(fault.kind && fault.kind !== 'none' ? `${name}: ${fault.kind}` : `${name}: fault cleared`);
    await draw();
  };
  async function draw() {
    const v = (await api('GET', '/_strata/regions')).json;
    const rows = v.regions.map((r, i) => {
      const latency = el('input', { type: 'number', min: '0', step: '50', value: String(r.fault.latencyMs || 0), 'data-testid': `region-latency-${i}`, style: 'width:6em' });
      const endpoint = `${location.protocol}//${location.hostname}:${r.port}/`;
      let fault = r.fault.kind;
      if (fault === 'timeout') fault += ` (${r.fault.holdMs} ms)`;
      if (r.fault.latencyMs) fault += `, +${r.fault.latencyMs} ms`;
      return el('tr', { 'data-testid': `region-${i}` },
        el('td', { text: r.name }),
        el('td', { text: endpoint }),
        el('td', { 'data-testid': `region-role-${i}`, text: r.writable ? 'writes and reads' : 'reads' }),
        el('td', { 'data-testid': `region-fault-${i}`, text: fault }),
        el('td', { class: 'row' },
          el('button', { class: 'danger', 'data-testid': `region-down-${i}`, title: 'Answer 503 ServiceUnavailable to every request', onclick: () => set(r.name, { kind: 'unavailable' }) }, 'Fail (503)'),
          el('button', { title: 'Answer 403 WriteForbidden (sub-status 3) to writes', 'data-testid': `region-nowrite-${i}`, onclick: () => set(r.name, { kind: 'write-forbidden' }) }, 'Refuse writes'),
          el('button', { title: 'Hold each request 5 s, then answer 408', 'data-testid': `region-timeout-${i}`, onclick: () => set(r.name, { kind: 'timeout', holdMs: 5000 }) }, 'Time out'),
          latency,
          el('button', { title: 'Add this many milliseconds before every request', 'data-testid': `region-latency-set-${i}`, onclick: () => set(r.name, { kind: r.fault.kind, holdMs: r.fault.holdMs, latencyMs: Number(latency.value) || 0 }) }, 'Set latency'),
          el('button', { 'data-testid': `region-clear-${i}`, onclick: () => set(r.name, {}) }, 'Clear'),
          el('button', {
            class: 'primary', 'data-testid': `region-failover-${i}`, disabled: v.multiWrite || r.writable,
            title: v.multiWrite ? 'Every region of a multi-write account writes' : 'Make this the write region (a manual failover)',
            onclick: async () => {
              await api('POST', `/_strata/regions/${enc(r.name)}/failover`);
              toast(`${r.name} is the write region`);
              await draw();
            },
          }, 'Make write region')));
    });
    box.replaceChildren(
      v.regions.length < 2 ? el('p', { class: 'muted', text: 'One region. Start strata with --regions "West US,East US" to serve several.' }) : '',
      el('table', {},
        el('thead', {}, el('tr', {}, ['region', 'endpoint', 'role', 'fault', ''].map((h) => el('th', { text: h })))),
        el('tbody', {}, rows)),
      v.multiWrite ? el('p', { class: 'muted', text: 'Multi-region writes: every region takes writes.' }) : '');
  }
  await draw();
}
