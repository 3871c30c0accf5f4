// Sluice admin page: vanilla JS, no build step. Every value from the gateway is put into the
// page as text (never as HTML): tool descriptions and stderr come from upstreams.
'use strict';

const $ = (s, r = document) => r.querySelector(s);
const $$ = (s, r = document) => Array.from(r.querySelectorAll(s));

function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}
const badge = (text, cls) => h('span', { class: 'badge ' + (cls || text) }, text);

// --- token and API -------------------------------------------------------------------------
let token = sessionStorage.getItem('sluice-token') || '';
const hashToken = new URLSearchParams(location.hash.slice(1)).get('token');
if (hashToken) {
  token = hashToken;
  sessionStorage.setItem('sluice-token', token);
  history.replaceState(null, '', location.pathname);
}

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error) || ('HTTP ' + status));
    this.status = status;
    this.body = body;
  }
  text() {
    const lines = [this.message];
    for (const e of (this.body && this.body.errors) || []) lines.push('• ' + (e.text || e.message));
    return lines.join('\n');
  }
}

async function api(path, body) {
  const opts = { headers: { Authorization: 'Bearer ' + token } };
  if (body !== undefined) {
    opts.method = 'POST';
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(path, opts);
  let data = null;
  try { data = await r.json(); } catch (_) { /* not JSON */ }
  if (r.status === 401) { showLogin('The token was refused.'); throw new ApiError(401, data); }
  if (!r.ok) throw new ApiError(r.status, data);
  return data;
}

// Run a management action; show its error inline in `where`, refresh with `then`.
async function act(where, body, path, then) {
  const box = $(where);
  box.textContent = '';
  try {
    await api(path, body);
    if (then) await then();
  } catch (e) {
    box.textContent = e.text ? e.text() : String(e);
  }
}

function showLogin(msg) {
  $('#app').hidden = true;
  $('#login').hidden = false;
  $('#login-error').textContent = msg || '';
}

$('#login-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  token = $('#login-token').value.trim();
  sessionStorage.setItem('sluice-token', token);
  boot();
});

// --- navigation ----------------------------------------------------------------------------
const pages = { overview: loadOverview, tools: loadTools, hooks: loadHooks, upstreams: loadUpstreams, connections: loadConnections, traffic: () => {}, logs: loadLogs };
let current = 'overview';
function show(page) {
  current = page;
  for (const b of $$('#nav button')) b.classList.toggle('active', b.dataset.page === page);
  for (const s of $$('.page')) s.hidden = s.id !== 'page-' + page;
  pages[page]();
}
for (const b of $$('#nav button')) b.addEventListener('click', () => show(b.dataset.page));

// --- overview ------------------------------------------------------------------------------
function spark(svg, values) {
  const max = Math.max(1, ...values);
  const pts = values.map((v, i) => `${(i * 120 / (values.length - 1)).toFixed(1)},${(29 - v * 27 / max).toFixed(1)}`);
  svg.replaceChildren(document.createElementNS('http://www.w3.org/2000/svg', 'polyline'));
  svg.firstChild.setAttribute('points', pts.join(' '));
}
const fmtMs = (v) => v === null || v === undefined ? '–' : (v < 10 ? v.toFixed(2) : v.toFixed(0)) + ' ms';

async function loadOverview() {
  const o = await api('/api/overview');
  $('#version').textContent = 'v' + o.version;
  $('#ov-sessions').textContent = o.sessions;
  $('#ov-tools').textContent = o.tools_listed;
  const t = o.traffic;
  $('#ov-rate').textContent = t.calls_per_second.toFixed(2);
  $('#ov-errors').textContent = (t.error_rate * 100).toFixed(1) + ' %';
  $('#ov-latency').textContent = fmtMs(t.p50_ms) + ' / ' + fmtMs(t.p99_ms);
  $('#ov-total').textContent = t.calls_total + (t.errors_total ? ` (${t.errors_total} not ok)` : '');
  spark($('#ov-spark-calls'), t.series.calls);
  spark($('#ov-spark-errors'), t.series.errors);
  $('#ov-upstreams').replaceChildren(...o.upstreams.map((u) => h('tr', { dataset: { upstream: u.id } },
    h('td', {}, h('strong', {}, u.id), u.description ? h('div', { class: 'muted' }, u.description) : null),
    h('td', {}, u.transport),
    h('td', {}, badge(u.status), u.reason ? h('div', { class: 'muted' }, u.reason) : null),
    h('td', {}, u.tools), h('td', {}, u.restarts), h('td', { class: 'mono' }, u.target))));
  $('#ov-endpoints-section').hidden = !o.endpoints.length;
  $('#ov-endpoints').replaceChildren(...o.endpoints.map((e) => h('tr', { dataset: { endpoint: e.name } },
    h('td', {}, h('code', {}, e.path), e.description ? h('div', { class: 'muted' }, e.description) : null),
    h('td', {}, e.tools_listed), h('td', {}, e.discovery), h('td', {}, e.hooks), h('td', {}, e.rules),
    h('td', {}, e.sessions))));
  const r = o.reloads;
  $('#ov-reload').textContent = `Tree: ${o.home} · live reloads: ${r.ok} applied, ${r.failed} rejected` +
    (r.last_error ? ` · last rejected edit: ${r.last_error}` : '') + ` · audit log ${o.audit_log.enabled ? 'on' : 'off'}`;
  const ol = o.overload;
  $('#ov-overload-state').textContent = `Open connections: ${ol.open_connections}` +
    (ol.active ? ' · under overload (shorter timeouts)' : '') +
    (ol.resident_bytes !== null ? ` · resident memory ${(ol.resident_bytes / 1048576).toFixed(1)} MB` : '') +
    (ol.over_memory ? ' · past max_memory_mb (new sessions refused)' : '');
  $('#ov-overload').replaceChildren(...Object.entries(ol.actions).map(([name, n]) => h('tr', { dataset: { action: name } },
    h('td', { class: 'mono' }, name), h('td', {}, n))));
}

// --- tools ---------------------------------------------------------------------------------
let toolsData = null;
async function loadTools() {
  toolsData = await api('/api/tools');
  const ups = [...new Set(toolsData.tools.map((t) => t.upstream))].sort();
  const cats = [...new Set(toolsData.tools.map((t) => t.category).filter(Boolean))].sort();
  fillSelect($('#tools-upstream'), 'All upstreams', ups);
  fillSelect($('#tools-category'), 'All categories', cats);
  renderTools();
  $('#tools-meta').replaceChildren(...toolsData.meta_tools.map((m) => h('li', {}, h('code', {}, m.name), ' — ', m.description || '')));
}
function fillSelect(sel, all, values) {
  const keep = sel.value;
  sel.replaceChildren(h('option', { value: '' }, all), ...values.map((v) => h('option', { value: v }, v)));
  sel.value = values.includes(keep) ? keep : '';
}
function renderTools() {
  const q = $('#tools-search').value.toLowerCase();
  const up = $('#tools-upstream').value;
  const cat = $('#tools-category').value;
  const rows = toolsData.tools.filter((t) => (!up || t.upstream === up) && (!cat || t.category === cat) &&
    (!q || (t.name + ' ' + (t.description || '') + ' ' + t.upstream).toLowerCase().includes(q)));
  $('#tools-rows').replaceChildren(...rows.map(toolRow));
}
function toolRow(t) {
  const ident = t.source === 'register' ? { source: 'register', id: t.tool } : { upstream: t.upstream, tool: t.tool };
  const set = (fields) => act('#tools-error', Object.assign({}, ident, fields), '/api/tools/set', loadTools);
  const state = [t.listed ? badge('listed', 'ok') : badge(t.enabled ? 'not listed' : 'disabled', 'off')];
  if (t.hidden) state.push(badge('hidden', 'off'));
  if (t.pin === 'changed' || t.pin === 'new') {
    state.push(badge(t.pin, 'drifted'), h('div', { class: 'muted' }, t.pin === 'changed'
      ? 'the upstream changed its definition since it was approved'
      : 'new: never approved'),
    h('details', { class: 'pin-diff' }, h('summary', {}, 'diff'), h('pre', { class: 'diff' }, t.diff || '')));
  }
  if (t.note) state.push(h('div', { class: 'muted' }, t.note));
  const actions = h('td', { class: 'actions' },
    h('button', { class: 'toggle', onclick: () => set({ enabled: !t.enabled }) }, t.enabled ? 'Disable' : 'Enable'));
  if (t.review) {
    actions.append(h('button', { class: 'approve primary', onclick: () => act('#tools-error', { which: t.review }, '/api/pins/approve', loadTools) }, 'Approve'));
  }
  if (t.source === 'register') {
    actions.append(h('button', { class: 'hide', onclick: () => set({ hidden: !t.hidden }) }, t.hidden ? 'Unhide' : 'Hide'));
  } else {
    actions.append(h('button', { class: 'rename', onclick: (ev) => {
      const td = ev.target.closest('tr').firstChild;
      const input = h('input', { value: t.name, size: 22, class: 'rename-input' });
      const save = h('button', { class: 'primary rename-save', onclick: () => set({ as: input.value.trim() }) }, 'Save');
      td.replaceChildren(input, ' ', save);
      input.focus();
    } }, 'Rename'));
  }
  return h('tr', { dataset: { tool: t.name } },
    h('td', {}, h('code', {}, t.name), t.name !== t.tool && t.source !== 'register' ? h('div', { class: 'muted' }, 'upstream name: ' + t.tool) : null),
    h('td', {}, t.upstream, t.source === 'register' ? h('div', { class: 'muted' }, 'register') : null),
    h('td', {}, t.category || ''), h('td', {}, ...state), h('td', { class: 'desc' }, t.description || ''), actions);
}
for (const id of ['#tools-search', '#tools-upstream', '#tools-category']) $(id).addEventListener('input', () => toolsData && renderTools());

// --- hooks ---------------------------------------------------------------------------------
async function loadHooks() {
  const d = await api('/api/hooks');
  const n = d.hooks.length;
  $('#hooks-rows').replaceChildren(...d.hooks.map((k, i) => {
    const act2 = (path, body) => act('#hooks-error', body, path, loadHooks);
    return h('tr', { dataset: { hook: k.id } },
      h('td', {}, i + 1),
      h('td', {}, h('strong', {}, k.id), k.description ? h('div', { class: 'muted' }, k.description) : null),
      h('td', {}, k.event), h('td', {}, k.type, h('div', { class: 'muted mono' }, k.detail)),
      h('td', { class: 'mono' }, k.matcher || '*'),
      h('td', {}, k.enabled ? badge(k.active ? 'on' : 'on (inactive)', 'ok') : badge('off')),
      h('td', { class: 'actions' },
        h('button', { class: 'toggle', onclick: () => act2('/api/hooks/set', { id: k.id, enabled: !k.enabled }) }, k.enabled ? 'Disable' : 'Enable'),
        h('button', { class: 'up', disabled: i === 0, onclick: () => act2('/api/hooks/move', { id: k.id, to: i - 1 }) }, '↑'),
        h('button', { class: 'down', disabled: i === n - 1, onclick: () => act2('/api/hooks/move', { id: k.id, to: i + 1 }) }, '↓'),
        h('button', { class: 'edit', onclick: () => editHook(k) }, 'Edit'),
        h('button', { class: 'try', onclick: () => tryHook(k) }, 'Try it')));
  }));
}
function editHook(k) {
  const entry = Object.assign({}, k.entry || {});
  delete entry.id;
  const ta = h('textarea', { rows: 10, class: 'edit-json' }, JSON.stringify(entry, null, 2));
  const err = h('p', { class: 'error', id: 'hook-edit-error' });
  $('#hook-panel').hidden = false;
  $('#hook-panel').replaceChildren(h('h3', {}, 'Edit ' + k.id), ta, err,
    h('div', { class: 'form-row' }, h('button', { class: 'primary', onclick: async () => {
      let fields;
      try { fields = JSON.parse(ta.value); } catch (e) { err.textContent = 'Not JSON: ' + e.message; return; }
      for (const key of Object.keys(entry)) if (!(key in fields)) fields[key] = null;
      await act('#hook-edit-error', { id: k.id, fields }, '/api/hooks/update', async () => { $('#hook-panel').hidden = true; await loadHooks(); });
    } }, 'Save'), h('button', { onclick: () => { $('#hook-panel').hidden = true; } }, 'Cancel')));
}
function tryHook(k) {
  const phase = h('select', { id: 'try-phase' }, h('option', { value: 'request' }, 'request phase'), h('option', { value: 'response' }, 'response phase'));
  if (k.event === 'PostToolUse' || k.event === 'Response') phase.value = 'response';
  const method = h('input', { id: 'try-method', value: 'tools/call', size: 14 });
  const tool = h('input', { id: 'try-tool', placeholder: 'tool (default: the first listed)', size: 24 });
  const args = h('textarea', { id: 'try-args', rows: 4 }, '{}');
  const out = h('div', { id: 'try-result' });
  const run = async () => {
    out.replaceChildren(h('p', { class: 'muted' }, 'running…'));
    let a;
    try { a = JSON.parse(args.value || '{}'); } catch (e) { out.replaceChildren(h('p', { class: 'error' }, 'Arguments are not JSON: ' + e.message)); return; }
    const body = { id: k.id, phase: phase.value, method: method.value };
    if (tool.value.trim()) body.tool = tool.value.trim();
    if (phase.value === 'response') body.result = a; else body.arguments = a;
    try {
      const r = await api('/api/hooks/try', body);
      out.replaceChildren(...[
        h('div', { class: 'decision' }, 'Decision: ', badge(r.decision, r.decision), ' → ', badge(r.outcome, r.outcome)),
        r.reason ? h('p', {}, 'Reason: ', r.reason) : null,
        r.explain_reason ? h('p', {}, 'Explain reason: ', r.explain_reason) : null,
        h('pre', {}, JSON.stringify(r.message || r.hooks, null, 2))].filter(Boolean));
    } catch (e) { out.replaceChildren(h('p', { class: 'error' }, e.text ? e.text() : String(e))); }
  };
  $('#hook-panel').hidden = false;
  $('#hook-panel').replaceChildren(h('h3', {}, 'Try ' + k.id),
    h('div', { class: 'form-row' }, phase, method, tool),
    h('label', { class: 'muted' }, 'Arguments (request phase) or result (response phase), JSON:'), args,
    h('div', { class: 'form-row' }, h('button', { class: 'primary', id: 'try-run', onclick: run }, 'Fire sample event'),
      h('button', { onclick: () => { $('#hook-panel').hidden = true; } }, 'Close')), out);
}

// --- upstreams -----------------------------------------------------------------------------
let openStderr = null;
// A sign-in started with Connect: { id, url, until }. The view refreshes itself until the
// upstream is connected (or ten minutes pass: the flow expires then), and shows the link in
// case the browser blocked the new tab.
let signingIn = null;
const SIGN_IN_MS = 10 * 60 * 1000;
async function loadUpstreams() {
  const d = await api('/api/upstreams');
  const a = (path, body) => act('#upstreams-error', body, path, loadUpstreams);
  if (signingIn) {
    const u = d.upstreams.find((x) => x.id === signingIn.id);
    if (!u || !u.oauth || u.oauth.state === 'connected' || Date.now() > signingIn.until) signingIn = null;
  }
  $('#upstreams-rows').replaceChildren(...d.upstreams.map((u) => h('tr', { dataset: { upstream: u.id } },
    h('td', {}, h('strong', {}, u.id), u.server ? h('div', { class: 'muted' }, `${u.server.name || ''} ${u.server.version || ''}`) : null),
    h('td', {}, u.transport), h('td', {}, badge(u.status), u.reason ? h('div', { class: 'muted' }, u.reason) : null),
    signInCell(u),
    h('td', {}, u.restarts), h('td', { class: 'mono' }, u.target),
    h('td', { class: 'actions' },
      u.transport === 'local' ? null : h('button', { class: 'toggle', onclick: () => a('/api/upstreams/set', { id: u.id, fields: { enabled: !u.enabled } }) }, u.enabled ? 'Disable' : 'Enable'),
      u.transport === 'local' ? null : h('button', { class: 'edit', onclick: () => editUpstream(u) }, 'Edit'),
      h('button', { class: 'restart', disabled: u.status !== 'up', onclick: () => a('/api/upstreams/restart', { id: u.id }) }, 'Restart'),
      u.oauth && u.oauth.mode === 'shared' ? h('button', { class: 'connect primary', onclick: () => connectUpstream(u.id) }, 'Connect') : null,
      u.transport === 'stdio' ? h('button', { class: 'stderr', onclick: () => { openStderr = openStderr === u.id ? null : u.id; renderStderr(d); } }, 'stderr') : null))));
  renderStderr(d);
}
// The OAuth sign-in state of an upstream (empty for one that does not sign in).
function signInCell(u) {
  const o = u.oauth;
  if (!o) return h('td', { class: 'signin' });
  const kids = [];
  if (o.state === 'connected') {
    let text = 'connected';
    if (typeof o.expires_at === 'number') {
      const left = o.expires_at * 1000 - Date.now();
      text += left > 0 ? ` (expires in ${Math.ceil(left / 60000)}m)` : ' (expired)';
    }
    kids.push(badge(text, 'ok'));
    const about = [o.refreshable ? 'refreshable' : 'no refresh token'];
    if (o.scopes.length) about.push('scopes: ' + o.scopes.join(' '));
    kids.push(h('div', { class: 'muted' }, about.join(' · ')));
  } else if (o.state === 'needs_login') {
    kids.push(badge('needs login', 'starting'), o.reason ? h('div', { class: 'muted' }, o.reason) : null);
  } else if (o.state === 'failed') {
    kids.push(badge('failed', 'down'), o.reason ? h('div', { class: 'muted' }, o.reason) : null);
  } else {
    kids.push(badge(o.state, 'off'));
  }
  const modes = { shared: 'shared sign-in', per_user: 'each user as themselves', client_credentials: 'client credentials', exchange: 'token exchange' };
  kids.push(h('div', { class: 'muted' }, modes[o.mode] || o.mode));
  if (signingIn && signingIn.id === u.id) {
    kids.push(h('div', { class: 'muted' }, 'waiting for the sign-in · ',
      h('a', { href: signingIn.url, target: '_blank', rel: 'noopener noreferrer', class: 'signin-link' }, 'open the sign-in page')));
  }
  return h('td', { class: 'signin' }, ...kids);
}
// Connect: the gateway starts a sign-in and answers the authorization server's URL, opened in
// a new tab; the server sends the browser back to the gateway, which stores the grant.
async function connectUpstream(id) {
  const box = $('#upstreams-error');
  box.textContent = '';
  try {
    const r = await api('/api/upstreams/connect', { id });
    if (!/^https?:\/\//i.test(r.result.url)) throw new Error('the sign-in address is not a web address: ' + r.result.url);
    signingIn = { id, url: r.result.url, until: Date.now() + SIGN_IN_MS };
    window.open(r.result.url, '_blank', 'noopener');
    await loadUpstreams();
  } catch (e) {
    box.textContent = e.text ? e.text() : String(e);
  }
}
function renderStderr(d) {
  const u = d.upstreams.find((x) => x.id === openStderr);
  if (!u) { if (!$('#upstream-panel').dataset.edit) $('#upstream-panel').hidden = true; return; }
  delete $('#upstream-panel').dataset.edit;
  $('#upstream-panel').hidden = false;
  const pre = h('pre', { id: 'stderr-tail' }, u.stderr.length ? u.stderr.join('\n') : '(nothing on stderr yet)');
  $('#upstream-panel').replaceChildren(h('h3', {}, `stderr of ${u.id} (last ${u.stderr.length} lines, live)`), pre);
  pre.scrollTop = pre.scrollHeight;
}
function editUpstream(u) {
  openStderr = null;
  const fields = { description: u.description, expose_all: u.expose_all };
  const ta = h('textarea', { rows: 6 }, JSON.stringify(fields, null, 2));
  const err = h('p', { class: 'error', id: 'upstream-edit-error' });
  const panel = $('#upstream-panel');
  panel.dataset.edit = '1';
  panel.hidden = false;
  panel.replaceChildren(h('h3', {}, 'Edit ' + u.id + ' (fields of its mcp/expose.json entry)'), ta, err,
    h('div', { class: 'form-row' }, h('button', { class: 'primary', onclick: async () => {
      let f;
      try { f = JSON.parse(ta.value); } catch (e) { err.textContent = 'Not JSON: ' + e.message; return; }
      await act('#upstream-edit-error', { id: u.id, fields: f }, '/api/upstreams/set', async () => { delete panel.dataset.edit; panel.hidden = true; await loadUpstreams(); });
    } }, 'Save'), h('button', { onclick: () => { delete panel.dataset.edit; panel.hidden = true; } }, 'Cancel')));
}
$('#upstream-add').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const f = ev.target;
  const entry = { id: f.id.value.trim(), transport: f.transport.value, enabled: true, expose_all: f.expose_all.checked };
  const target = f.target.value.trim();
  if (entry.transport === 'stdio') {
    const parts = target.split(/\s+/);
    entry.command = parts[0];
    entry.args = parts.slice(1);
  } else entry.url = target;
  act('#upstreams-error', entry, '/api/upstreams/add', async () => { f.reset(); await loadUpstreams(); });
});

// --- connections ---------------------------------------------------------------------------
// Users' own connections to per-user upstreams: who, until when, which scopes (never a token).
function expiry(at) {
  if (typeof at !== 'number') return 'no expiry';
  const left = at * 1000 - Date.now();
  return left > 0 ? `in ${Math.ceil(left / 60000)}m` : 'expired';
}
async function loadConnections() {
  const d = await api('/api/connections');
  const rows = [];
  for (const u of d.upstreams) {
    if (u.error) rows.push(h('tr', { dataset: { upstream: u.upstream } }, h('td', {}, h('strong', {}, u.upstream)), h('td', { colspan: 4, class: 'error' }, u.error)));
    else if (!u.principals.length) rows.push(h('tr', { dataset: { upstream: u.upstream } }, h('td', {}, h('strong', {}, u.upstream)), h('td', { colspan: 4, class: 'muted' }, 'no one is connected')));
    for (const p of u.principals) {
      rows.push(h('tr', { class: 'connection', dataset: { upstream: u.upstream, principal: p.principal } },
        h('td', {}, h('strong', {}, u.upstream)), h('td', { class: 'mono' }, p.principal),
        h('td', {}, expiry(p.expires_at), h('div', { class: 'muted' }, p.refreshable ? 'refreshable' : 'no refresh token')),
        h('td', {}, (p.scopes || []).join(' ')),
        h('td', { class: 'actions' }, h('button', { class: 'revoke', onclick: () => {
          if (!confirm(`End ${p.principal}'s connection to ${u.upstream}?`)) return;
          act('#connections-error', { upstream: u.upstream, principal: p.principal }, '/api/connections/revoke', loadConnections);
        } }, 'Revoke'))));
    }
  }
  if (!d.upstreams.length) rows.push(h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'No upstream acts as each user.')));
  $('#connections-rows').replaceChildren(...rows);
}

// --- live traffic --------------------------------------------------------------------------
let paused = false;
let buffered = [];
const MAX_ROWS = 500;
function trafficRow(e, fresh) {
  const hooks = (e.hooks || []).map((k) => h('div', { class: 'hook' }, badge(k.decision, k.decision), ' ', k.id,
    h('span', { class: 'muted' }, ` ${k.phase} · ${k.us} µs`), k.reason ? h('span', { class: 'muted' }, ' — ' + k.reason) : null));
  const row = h('tr', { class: fresh ? 'new' : '', dataset: { tool: e.tool || '', endpoint: e.endpoint || '' } },
    h('td', { class: 'mono' }, (e.time || '').replace('T', ' ').replace('Z', '')),
    h('td', {}, h('code', {}, e.tool || e.method), e.endpoint ? h('div', { class: 'muted mono' }, '/mcp/' + e.endpoint) : null),
    h('td', {}, e.upstream || ''),
    h('td', {}, e.principal || e.client || '', h('div', { class: 'muted mono' }, (e.session || '').slice(0, 8))),
    h('td', {}, (e.duration_ms || 0).toFixed(1)),
    h('td', {}, badge(e.outcome), e.error ? h('div', { class: 'muted' }, e.error) : null),
    h('td', {}, ...hooks), h('td', {}, e.explain_reason || ''));
  row.dataset.text = JSON.stringify(e).toLowerCase();
  return row;
}
function applyFilter(row) {
  const q = $('#traffic-filter').value.toLowerCase();
  row.hidden = !!q && !row.dataset.text.includes(q);
}
function addTraffic(e, fresh) {
  if (paused) { buffered.push(e); $('#traffic-status').textContent = `paused · ${buffered.length} waiting`; return; }
  const row = trafficRow(e, fresh);
  applyFilter(row);
  const body = $('#traffic-rows');
  body.prepend(row);
  while (body.children.length > MAX_ROWS) body.lastChild.remove();
}
$('#traffic-filter').addEventListener('input', () => $$('#traffic-rows tr').forEach(applyFilter));
$('#traffic-clear').addEventListener('click', () => $('#traffic-rows').replaceChildren());
$('#traffic-pause').addEventListener('click', () => {
  paused = !paused;
  $('#traffic-pause').textContent = paused ? 'Resume' : 'Pause';
  $('#traffic-status').textContent = paused ? 'paused' : '';
  if (!paused) { const b = buffered; buffered = []; b.forEach((e) => addTraffic(e, true)); }
});

async function streamTraffic() {
  for (;;) {
    try {
      const recent = await api('/api/traffic/recent');
      $('#traffic-rows').replaceChildren();
      recent.events.forEach((e) => addTraffic(e, false));
      const r = await fetch('/api/traffic', { headers: { Authorization: 'Bearer ' + token } });
      if (r.status === 401) { showLogin('The token was refused.'); return; }
      $('#conn').textContent = 'live';
      $('#conn').classList.add('live');
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          if (/^event: /m.test(block)) continue;
          const data = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('');
          if (data) addTraffic(JSON.parse(data), true);
        }
      }
    } catch (e) { /* reconnect below */ }
    $('#conn').textContent = 'reconnecting…';
    $('#conn').classList.remove('live');
    await new Promise((r) => setTimeout(r, 1500));
  }
}

// --- logs ----------------------------------------------------------------------------------
async function loadLogs() {
  const f = $('#logs-form');
  const params = new URLSearchParams();
  for (const k of ['since', 'until', 'tool', 'session', 'outcome', 'q']) if (f[k].value) params.set(k, f[k].value);
  $('#logs-error').textContent = '';
  try {
    const d = await api('/api/logs?' + params);
    $('#logs-toggle').textContent = d.enabled ? 'Turn the audit log off' : 'Turn the audit log on';
    $('#logs-toggle').dataset.enabled = d.enabled ? '1' : '';
    $('#logs-info').textContent = `${d.path} · audit log ${d.enabled ? 'on' : 'off'} · ${d.events.length} matching of ${d.scanned} lines scanned (newest first)`;
    $('#logs-rows').replaceChildren(...d.events.map((e) => h('tr', {},
      h('td', { class: 'mono' }, (e.time || '').replace('T', ' ').replace('Z', '')),
      h('td', { class: 'mono' }, (e.session || '').slice(0, 8)), h('td', {}, e.method), h('td', {}, h('code', {}, e.tool || '')),
      h('td', {}, badge(e.outcome)), h('td', {}, (e.duration_ms || 0).toFixed(1)),
      h('td', {}, ...(e.hooks || []).map((k) => h('div', {}, badge(k.decision, k.decision), ' ', k.id))),
      h('td', {}, e.error || e.explain_reason || ''))));
  } catch (e) { $('#logs-error').textContent = e.text ? e.text() : String(e); }
}
$('#logs-form').addEventListener('submit', (ev) => { ev.preventDefault(); loadLogs(); });
$('#logs-toggle').addEventListener('click', () => act('#logs-error', { enabled: !$('#logs-toggle').dataset.enabled }, '/api/log/set', loadLogs));

// --- start ---------------------------------------------------------------------------------
let streaming = false;
async function boot() {
  if (!token) { showLogin(''); return; }
  try { await api('/api/overview'); } catch (e) { if (e.status !== 401) showLogin(e.message); return; }
  $('#login').hidden = true;
  $('#app').hidden = false;
  show(current);
  if (!streaming) { streaming = true; streamTraffic(); }
}
setInterval(() => {
  if ($('#app').hidden) return;
  if (current === 'overview') loadOverview().catch(() => {});
  if (current === 'upstreams' && (openStderr || signingIn)) loadUpstreams().catch(() => {});
}, 2000);
boot();
