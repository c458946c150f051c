// strata Data Explorer: the Access view. Data-plane RBAC for Entra ID principals, as the
// service models it (GET/PUT /_strata/rbac): the built-in and custom role definitions, the
// role assignments with their scopes, and forms to add a custom role or an assignment and to
// remove either. The server checks every change whole (an assignment naming a missing role,
// a malformed scope or action is refused with its message). Uses app.js's helpers (el, api,
// toast, accountView).
'use strict';

async function renderAccess() {
  const box = await accountView('Access', 'access',
    'Role assignments for Entra ID principals (type=aad tokens). Without any assignment every principal may use the data plane, as the official emulator; with one, each request needs a role that allows its action at a covering scope (else 403, sub-status 5301).');
  let policy;
  // Sends the custom roles and assignments back whole; the server keeps the built-in roles.
  const save = async (next, said) => {
    const custom = next.roleDefinitions.filter((d) => !builtIn(d));
    policy = (await api('PUT', '/_strata/rbac', { body: { roleDefinitions: custom, roleAssignments: next.roleAssignments } })).json;
    toast(said);
    draw();
  };
  const builtIn = (d) => /^0{8}-0{4}-0{4}-0{4}-0{11}[12]$/.test(d.id);
  const roleName = (id) => (policy.roleDefinitions.find((d) => d.id === id.split('/').pop()) || { roleName: id }).roleName;

  function draw() {
    const roles = policy.roleDefinitions.map((d, i) => el('tr', { 'data-testid': `role-${i}` },
      el('td', { text: d.roleName }),
      el('td', { class: 'mono', text: d.id }),
      el('td', { text: d.permissions.flatMap((p) => p.dataActions.map((a) => a.replace('Microsoft.DocumentDB/databaseAccounts/', ''))).join(', ') }),
      el('td', {}, builtIn(d) ? el('span', { class: 'muted', text: 'built-in' })
        : el('button', { class: 'danger', 'data-testid': `role-remove-${i}`, onclick: () => save({ ...policy, roleDefinitions: policy.roleDefinitions.filter((x) => x !== d) }, `role ${d.roleName} removed`).catch((e) => toast(e.message, true)) }, 'Remove'))));
    const assignments = policy.roleAssignments.map((a, i) => el('tr', { 'data-testid': `assignment-${i}` },
      el('td', { class: 'mono', text: a.principalId }),
      el('td', { text: roleName(a.roleDefinitionId) }),
      el('td', { class: 'mono', text: a.scope }),
      el('td', {}, el('button', { class: 'danger', 'data-testid': `assignment-remove-${i}`, onclick: () => save({ ...policy, roleAssignments: policy.roleAssignments.filter((x) => x !== a) }, `assignment for ${a.principalId} removed`).catch((e) => toast(e.message, true)) }, 'Remove'))));

    const principal = el('input', { placeholder: 'principal or group object id', 'data-testid': 'assign-principal' });
    const role = el('select', { 'data-testid': 'assign-role' }, policy.roleDefinitions.map((d) => el('option', { value: d.id, text: d.roleName })));
    const scope = el('input', { value: '/', title: '/, /dbs/{db} or /dbs/{db}/colls/{container}', 'data-testid': 'assign-scope' });
    const assign = el('form', { class: 'row', 'data-testid': 'assign-form', onsubmit: (ev) => {
      ev.preventDefault();
      const a = { id: crypto.randomUUID(), roleDefinitionId: role.value, principalId: principal.value.trim(), scope: scope.value.trim() || '/' };
      save({ ...policy, roleAssignments: [...policy.roleAssignments, a] }, `${roleName(a.roleDefinitionId)} assigned to ${a.principalId} at ${a.scope}`).catch((e) => toast(e.message, true));
    } }, principal, role, scope, el('button', { class: 'primary', type: 'submit', 'data-testid': 'assign' }, 'Assign'));

    const name = el('input', { placeholder: 'role name', 'data-testid': 'role-name' });
    const actions = el('textarea', { rows: '3', placeholder: 'data actions, one a line, e.g.\nMicrosoft.DocumentDB/databaseAccounts/readMetadata\nMicrosoft.DocumentDB/databaseAccounts/sqlDatabases/containers/items/read', 'data-testid': 'role-actions' });
    const addRole = el('form', { class: 'row', 'data-testid': 'role-form', onsubmit: (ev) => {
      ev.preventDefault();
      const dataActions = actions.value.split(/\s*\n\s*/).map((s) => s.trim()).filter(Boolean);
      const d = { id: crypto.randomUUID(), roleName: name.value.trim(), assignableScopes: ['/'], permissions: [{ dataActions, notDataActions: [] }] };
      save({ ...policy, roleDefinitions: [...policy.roleDefinitions, d] }, `role ${d.roleName} added`).catch((e) => toast(e.message, true));
    } }, name, actions, el('button', { type: 'submit', 'data-testid': 'role-add' }, 'Add role'));

    box.replaceChildren(
      el('h2', { text: 'Role assignments' }),
      assignments.length ? el('table', {},
        el('thead', {}, el('tr', {}, ['principal', 'role', 'scope', ''].map((h) => el('th', { text: h })))),
        el('tbody', {}, assignments))
        : el('p', { class: 'muted', 'data-testid': 'no-assignments', text: 'No assignments: every principal may use the data plane.' }),
      assign,
      el('h2', { text: 'Role definitions' }),
      el('table', {},
        el('thead', {}, el('tr', {}, ['role', 'id', 'data actions', ''].map((h) => el('th', { text: h })))),
        el('tbody', {}, roles)),
      addRole);
  }
  policy = (await api('GET', '/_strata/rbac')).json;
  draw();
}
