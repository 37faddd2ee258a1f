// Settings: every resilience setting (GET/PATCH /api/resilience) in cards
// grouped as the specification groups them, each field with its default
// and clamp, validation errors shown at the field; the usage-wall opt-ins
// per connection (read-only).

import { store, api, h, replace, card, badge, table, toast, fieldError, fmtTime, isZeroTime } from './util.js';

// GROUPS maps the top-level settings to cards. A setting no group names
// (added by a newer gateway) lands in "Other settings".
const GROUPS = [
  { id: 'breaker', title: 'Circuit breaker', spec: '§1', keys: ['circuit_breaker'] },
  { id: 'window', title: 'Provider window gate', spec: '§1b', keys: ['provider_cooldown'] },
  { id: 'cooldown', title: 'Connection cooldown and order', spec: '§2, §4', keys: ['connection_cooldown', 'stream_stall_cooldown', 'local_timeout_cooldown', 'connection_order'] },
  { id: 'combo', title: 'Combo cooldown wait', spec: '§6', keys: ['combo_cooldown_wait'] },
  { id: 'queue', title: 'Request queue', spec: '§7', keys: ['request_queue', 'concurrency'] },
  { id: 'quota', title: 'Quota-share concurrency', spec: '§5', keys: ['quota_share_concurrency_limit'] },
  { id: 'lockout', title: 'Model lockout', spec: '§3', keys: ['model_lockout'] },
  { id: 'stream', title: 'Stream recovery', spec: '§8, §9', keys: ['stream_recovery'] },
  { id: 'affinity', title: 'Session affinity', spec: '§2c', keys: ['session_affinity_ttl_ms'] },
  { id: 'flags', title: 'Emergency fallback & feature flags', spec: '§14', keys: ['emergency_fallback', 'max_attempts_per_request', 'feature_flags'] },
];

// HINTS are the clamps and meanings of docs/resilience.md, by path (a *
// matches one segment).
const HINTS = {
  'circuit_breaker.*.failure_threshold': 'opens at; 1..1000',
  'circuit_breaker.*.degradation_threshold': 'DEGRADED at; ≤ failure_threshold − 1, 0 = derived (60 %)',
  'circuit_breaker.*.reset_ms': 'OPEN → HALF_OPEN after; 1 s..24 h',
  'connection_cooldown.*.base_ms': 'first cooldown; ≤ 24 h',
  'connection_cooldown.*.max_backoff_level': 'base × 2^level; ≤ 20',
  'model_lockout.error_codes': 'HTTP statuses 100..599, comma separated',
  'model_lockout.max_cooldown_ms': '≥ base_cooldown_ms',
  'combo_cooldown_wait.max_wait_ms': 'clamped by the gateway (spec: ≤ 30000, amended ≤ 120000)',
  'combo_cooldown_wait.max_attempts': '≤ 10',
  'request_queue.max_wait_ms': 'queue-wait budget; 1 ms..24 h',
  'request_queue.execution_max_wait_ms': 'execution budget; 1 ms..24 h',
  'request_queue.max_queue_depth': '0 = unbounded; ≤ 100000',
  'stream_recovery.content_stall_timeout_ms': '0 = adaptive',
  'stream_recovery.throughput_watchdog.window_ms': '≥ 1000',
  'stream_recovery.throughput_watchdog.min_useful_bytes_per_second': '≥ 1',
  'stream_recovery.throughput_watchdog.min_useful_bytes': '≥ 1',
  'session_affinity_ttl_ms': '0 = off; ≤ 24 h',
  'max_attempts_per_request': '1..100',
  'emergency_fallback.targets': 'provider/model, comma separated',
  'connection_order': 'headroom (most reported quota first) or config (configured order)',
};

function hintFor(path) {
  const parts = path.split('.');
  for (const [k, v] of Object.entries(HINTS)) {
    const kp = k.split('.');
    if (kp.length === parts.length && kp.every((x, i) => x === '*' || x === parts[i])) return v;
  }
  return '';
}

function get(obj, path) {
  return path.split('.').reduce((o, k) => (o === null || o === undefined ? undefined : o[k]), obj);
}

function show(v) {
  if (Array.isArray(v)) return v.join(', ');
  if (v === undefined) return '–';
  return String(v);
}

// fields renders the inputs of value at path, recursively; a top-level
// block's members go straight into its card.
function fields(path, value, defaults, top = false) {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const kids = Object.keys(value).map((k) => fields(path + '.' + k, value[k], defaults));
    return top ? kids : h('fieldset', { class: 'group' }, h('legend', { text: path.split('.').pop() }), kids);
  }
  const def = get(defaults, path);
  const id = 'set-' + path.replace(/[^a-z0-9]+/gi, '-');
  let input;
  if (typeof value === 'boolean') {
    input = h('input', { id, type: 'checkbox', checked: value, 'data-path': path, 'data-kind': 'bool' });
  } else if (Array.isArray(value)) {
    const numeric = (Array.isArray(def) ? def : value).every((x) => typeof x === 'number');
    input = h('input', { id, type: 'text', value: value.join(', '), 'data-path': path, 'data-kind': numeric ? 'numbers' : 'strings' });
  } else if (typeof value === 'number') {
    input = h('input', { id, type: 'number', step: 'any', value, 'data-path': path, 'data-kind': 'number', class: 'num' });
  } else {
    input = h('input', { id, type: 'text', value: value ?? '', 'data-path': path, 'data-kind': 'string' });
  }
  const hint = hintFor(path);
  return h('div', { class: 'field setting' },
    h('label', { for: id, text: path.split('.').pop() }), input,
    h('span', { class: 'hint' }, 'default ', h('code', { text: show(def) }), hint ? ' · ' + hint : ''));
}

function readInput(inp) {
  switch (inp.dataset.kind) {
    case 'bool': return inp.checked;
    case 'number': return inp.value.trim() === '' ? null : Number(inp.value);
    case 'numbers': return inp.value.split(',').map((x) => x.trim()).filter(Boolean).map((x) => (Number.isFinite(Number(x)) ? Number(x) : x));
    case 'strings': return inp.value.split(',').map((x) => x.trim()).filter(Boolean);
    default: return inp.value;
  }
}

// patchOf builds a merge patch of the inputs whose value differs from cur.
function patchOf(form, cur) {
  const patch = {};
  const changed = [];
  for (const inp of form.querySelectorAll('[data-path]')) {
    const v = readInput(inp);
    if (JSON.stringify(v) === JSON.stringify(get(cur, inp.dataset.path))) continue;
    changed.push([inp.dataset.path, v]);
    const parts = inp.dataset.path.split('.');
    let o = patch;
    for (const p of parts.slice(0, -1)) o = o[p] = o[p] || {};
    o[parts[parts.length - 1]] = v;
  }
  return { patch, changed };
}

function groupCard(g, keys, cur, defaults, reload) {
  const form = h('form', { class: 'settings', 'data-group': g.id, novalidate: true },
    keys.map((k) => fields(k, cur[k], defaults, keys.length === 1)),
    h('div', { class: 'toolbar' }, h('button', { type: 'submit', class: 'primary', 'data-action': 'save:' + g.id, text: 'Save' }),
      h('span', { class: 'saved muted' })));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const { patch, changed } = patchOf(form, cur);
    if (!changed.length) {
      toast('Nothing changed.');
      return;
    }
    const r = await api('PATCH', '/api/resilience', patch);
    if (!r.ok) {
      fieldError(form, (r.error.param || '').replace(/\[\d+\]$/, ''), r.error.message);
      return;
    }
    const clamped = changed.filter(([p, v]) => JSON.stringify(get(r.data, p)) !== JSON.stringify(v)).map(([p]) => `${p} clamped to ${show(get(r.data, p))}`);
    toast(clamped.length ? 'Saved; ' + clamped.join('; ') : 'Saved.', 'ok');
    reload(r.data, clamped);
  });
  return h('section', { class: 'card settings-card', 'data-card': g.id }, h('h3', null, g.title, ' ', h('span', { class: 'muted small', text: g.spec || '' })), form);
}

function wallCard(st) {
  const rows = [];
  for (const p of st.providers) {
    if (p.kind !== 'anthropic') continue;
    for (const c of p.connections) {
      const w = c.usage_wall;
      rows.push(h('tr', { 'data-wall': c.ref }, h('td', { text: c.ref }),
        h('td', null, badge(c.low_priority_mode ? 'on' : 'off', c.low_priority_mode ? 'on' : 'off')),
        h('td', null, badge(c.auto_limit_reset ? 'on' : 'off', c.auto_limit_reset ? 'on' : 'off')),
        h('td', { text: w ? (w.lane_active ? 'lane active until ' + fmtTime(w.lane_until) : (w.last_end_reason ? 'ended: ' + w.last_end_reason : 'idle')) +
          (w.last_reset_result ? ` · last reset ${w.last_reset_result}` : '') + (w && !isZeroTime(w.next_reset_at) ? ` · next reset ${fmtTime(w.next_reset_at)}` : '') : '–' })));
    }
  }
  return card('Claude usage wall (per connection)',
    h('p', { class: 'hint', text: 'Opt-ins of docs/resilience.md §2b: low_priority_mode (the lower-priority lane) and auto_limit_reset (session-limit reset). Read-only here: there is no runtime setter yet; set them under providers[].connections[].provider_specific in the configuration file.' }),
    table(['Connection', 'Low-priority lane', 'Session-limit reset', 'State'], rows, { empty: 'No Anthropic connection configured.' }));
}

export default {
  title: 'Settings',
  mount(root) {
    const el = h('div', { id: 'settings' });
    replace(root, h('h2', { text: 'Resilience settings' }), h('p', { class: 'hint', text: 'Saved through PATCH /api/resilience: validated, clamped as the specification says, persisted and applied at once, no restart.' }), el);
    let defaults = {};
    const render = (cur) => {
      const known = new Set(GROUPS.flatMap((g) => g.keys));
      const other = Object.keys(cur).filter((k) => !known.has(k));
      const cards = GROUPS.map((g) => [g, g.keys.filter((k) => k in cur)]).filter(([, ks]) => ks.length)
        .map(([g, ks]) => groupCard(g, ks, cur, defaults, render));
      if (other.length) cards.push(groupCard({ id: 'other', title: 'Other settings' }, other, cur, defaults, render));
      replace(el, h('div', { class: 'settings-grid' }, cards), wallCard(store.state));
    };
    (async () => {
      const [cur, def] = await Promise.all([api('GET', '/api/resilience'), api('GET', '/api/resilience/defaults')]);
      if (!cur.ok) return replace(el, h('p', { class: 'field-error', text: cur.error.message }));
      defaults = def.ok ? def.data : {};
      render(cur.data);
    })();
    return null;
  },
};
