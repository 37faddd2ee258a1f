// Providers & connections: breakers with their last transitions, window
// gates, connection cooldowns and terminal states, admission queues and
// gates, and the operator's actions on each.

import { store, on, api, h, replace, card, badge, button, countdown, fmtDur, fmtTime, isZeroTime, table, toast, fieldError } from './util.js';

function breakerLine(p) {
  const b = p.breaker;
  const t = p.thresholds;
  const degradedAt = t.degradation_threshold || Math.ceil(t.failure_threshold * 0.6);
  return h('div', { class: 'breaker' },
    badge(b.state), ' ',
    h('span', { text: `${b.failure_count} failure(s): DEGRADED at ${degradedAt}, OPEN at ${t.failure_threshold}, reset ${fmtDur(t.reset_ms)}` }),
    b.state === 'OPEN' && !isZeroTime(b.retry_at) ? [' · probe in ', countdown(b.retry_at)] : null,
    b.cycles ? h('span', { class: 'muted', text: ` · ${b.cycles} open cycle(s)` }) : null);
}

// timeline draws the last transitions (at most 20) oldest to newest.
function timeline(p) {
  const tr = p.breaker.transitions;
  if (!tr.length) return h('p', { class: 'muted timeline-empty', text: 'No transition yet.' });
  return h('ol', { class: 'timeline', 'data-provider': p.id }, tr.map((t) =>
    h('li', { class: 'to-' + t.to.toLowerCase(), title: t.reason || '' },
      h('span', { class: 'when', text: fmtTime(t.at) }),
      h('span', { class: 'what' }, badge(t.from), ' → ', badge(t.to)),
      t.reason ? h('span', { class: 'why', text: t.reason }) : null)));
}

function gateLine(p) {
  const g = p.window_gate;
  if (!g.enabled) return h('div', { class: 'muted', 'data-field': 'window-gate', 'data-state': 'off', text: `Window gate off (provider_cooldown.enabled); would cool after ${g.threshold} failures within ${fmtDur(g.window_ms)} for ${fmtDur(g.cooldown_ms)}.` });
  const cooling = !isZeroTime(g.cooling_until);
  return h('div', { class: 'gate', 'data-field': 'window-gate', 'data-state': cooling ? 'cooling' : 'open' }, 'Window gate: ', cooling ? [badge('cooling'), ' for ', countdown(g.cooling_until)] : badge('open', 'ok'),
    ` · ${g.failures_in_window}/${g.threshold} failures within ${fmtDur(g.window_ms)}, cools ${fmtDur(g.cooldown_ms)}`);
}

// terminalText says when and why a connection became terminal.
function terminalText(c, lastErr) {
  const why = c.terminal_reason || lastErr || '';
  return [c.status,
    c.terminal_at ? [' since ', h('span', { 'data-field': 'terminal-at', 'data-at': c.terminal_at, text: fmtTime(c.terminal_at) })] : null,
    why ? [': ', h('span', { 'data-field': 'terminal-reason', text: why })] : null,
    c.terminal_rule ? [' (rule ', h('span', { 'data-field': 'terminal-rule', text: c.terminal_rule }), ')'] : null];
}

function connStatus(c, lockouts) {
  const n = lockouts.filter((l) => `${l.provider}/${l.connection}` === c.ref).length;
  const locks = n ? h('a', { class: 'chip', href: '#/lockouts', text: `${n} model lockout(s)` }) : null;
  if (c.terminal) return [badge(c.status, 'terminal'), locks];
  if (!isZeroTime(c.cooling_until)) return [badge('cooling'), ' ', countdown(c.cooling_until, 'ending'), locks];
  return [badge(c.status === 'active' ? 'active' : c.status, c.status === 'active' ? 'ok' : ''), locks];
}

// testResult says how a connection test went (its answer's fields).
function testResult(ref, t) {
  if (!t.ok) return `${ref}: test failed on ${t.model}: ${t.status || 'no answer'}, ${t.reason}${t.message ? ' — ' + t.message : ''}`;
  const br = t.breaker_before === t.breaker_after ? `breaker ${t.breaker_after}` : `breaker ${t.breaker_before} → ${t.breaker_after}`;
  return `${ref}: test passed on ${t.model} in ${t.latency_ms} ms (${br})`;
}

function connRow(p, c, lockouts) {
  const lastErr = [c.last_error_type, c.error_code ? String(c.error_code) : '', c.last_error].filter(Boolean).join(' · ');
  const clear = button('Clear cooldown', () => api('POST', '/api/resilience/cooldowns', { connection_ids: [c.ref] }),
    { id: 'clear:' + c.ref, disabled: c.terminal || isZeroTime(c.cooling_until), done: (r) => `${c.ref}: ${r.data.cleared} cleared, ${r.data.lockouts_cleared} lockout(s) cleared` });
  const reset = button('Reset', () => api('POST', '/api/resilience/connections/reset', { provider: p.id, connection: c.id }),
    { id: 'reset-conn:' + c.ref, class: 'danger', disabled: !c.terminal, title: 'Clears the terminal state: do it once the credential is fixed', done: `${c.ref} reset` });
  const test = button('Test', async () => {
    const r = await api('POST', `/api/providers/${encodeURIComponent(p.id)}/connections/${encodeURIComponent(c.id)}/test`);
    if (r.ok) toast(testResult(c.ref, r.data), r.data.ok ? 'ok' : 'error');
    return r.ok ? null : r;
  }, { id: 'test-conn:' + c.ref, title: 'Send one small real request to this connection; a pass returns a DEGRADED breaker to CLOSED', failed: `${c.ref}: test` });
  const prot = h('input', { type: 'checkbox', checked: c.rate_limit_protection, 'data-action': 'protect:' + c.ref, title: 'rate_limit_protection' });
  prot.addEventListener('change', async () => {
    prot.disabled = true;
    const r = await api('POST', '/api/rate-limits', { connection_id: c.ref, enabled: prot.checked });
    prot.disabled = false;
    if (!r.ok) {
      prot.checked = !prot.checked;
      toast('Rate-limit protection: ' + r.error.message, 'error');
    } else toast(`${c.ref}: rate-limit protection ${r.data.rate_limit_protection ? 'on' : 'off'} (queue ${r.data.protected ? 'active' : 'inactive'})`, 'ok');
  });
  const wall = c.low_priority_mode || c.auto_limit_reset
    ? h('div', { class: 'muted small', text: 'usage wall: ' + [c.low_priority_mode && 'low-priority lane', c.auto_limit_reset && 'session-limit reset'].filter(Boolean).join(', ') + (c.usage_wall && c.usage_wall.lane_active ? ' (lane active)' : '') })
    : null;
  return h('tr', { 'data-conn': c.ref, class: c.terminal ? 'row-terminal' : '' },
    h('td', null, h('strong', { text: c.id }), wall),
    h('td', { 'data-field': 'state' }, connStatus(c, lockouts)),
    h('td', { 'data-field': 'backoff', text: String(c.backoff_level) }),
    c.terminal ? h('td', { class: 'err', 'data-field': 'last-error', title: lastErr }, terminalText(c, lastErr))
      : h('td', { class: 'err', 'data-field': 'last-error', text: lastErr || '–', title: lastErr }),
    h('td', { text: `${c.queued} / ${c.running}` + (c.rejections ? ` · ${c.rejections} refused` : '') }),
    h('td', null, h('label', { class: 'switch' }, prot, c.protected ? ' queued' : ' direct')),
    h('td', { class: 'actions' }, test, ' ', clear, ' ', reset));
}

// collapsed remembers the transition lists the operator closed, across
// live re-renders.
const collapsed = new Set();

function transitions(p) {
  const d = h('details', { class: 'transitions', open: p.breaker.transitions.length > 0 && !collapsed.has(p.id) },
    h('summary', { text: `Last ${p.breaker.transitions.length} transition(s)` }), timeline(p));
  d.addEventListener('toggle', () => (d.open ? collapsed.delete(p.id) : collapsed.add(p.id)));
  return d;
}

function providerCard(p, lockouts) {
  return h('section', { class: 'card provider state-' + p.breaker.state.toLowerCase(), 'data-provider': p.id },
    h('header', null,
      h('h3', null, p.id, ' ', h('span', { class: 'muted small', text: [p.kind, p.profile].filter(Boolean).join(' · ') })),
      button('Reset breaker', () => api('POST', '/api/resilience/reset', { provider: p.id }), { id: 'reset-breaker:' + p.id, done: `${p.id}: breaker reset` })),
    breakerLine(p), gateLine(p),
    transitions(p),
    table(['Connection', 'State', 'Backoff', 'Last error', 'Queued / running', 'Rate-limit protection', ''], p.connections.map((c) => connRow(p, c, lockouts)), { class: 'conns', empty: 'no connection' }));
}

function gatesCard(st) {
  const rows = st.gates.map((g) => {
    const name = [g.provider, g.connection, g.model].filter(Boolean).join(' / ') || 'all requests';
    const pct = g.cap ? Math.min(100, (g.held / g.cap) * 100) : 0;
    const bar = h('span', { class: 'bar' }, h('span', { class: 'fill' }));
    bar.firstChild.style.width = pct + '%';
    return h('tr', { 'data-gate': g.level + ':' + name }, h('td', { text: g.level }), h('td', { text: name }), h('td', null, bar, ` ${g.held} / ${g.cap}`), h('td', { text: String(g.waiting) }));
  });
  return card('Concurrency gates', table(['Level', 'Gate', 'Held / cap', 'Waiting'], rows, { empty: 'No concurrency gate configured (global, provider, account or model).' }));
}

// capsCard edits the per-model concurrency caps of every connection.
async function capsCard(el) {
  const r = await api('GET', '/api/resilience/model-concurrency');
  if (!r.ok) return replace(el, card('Per-model concurrency caps', h('p', { class: 'field-error', text: r.error.message })));
  const rows = r.data.connections.map((c) => {
    const ref = c.provider + '/' + c.connection;
    const caps = Object.entries(c.caps);
    const model = h('select', { 'data-path': 'model' }, c.models.map((m) => h('option', { value: m, text: m })));
    const cap = h('input', { type: 'number', min: 0, step: 1, value: caps.length ? caps[0][1] : 1, 'data-path': 'cap', class: 'num' });
    const form = h('form', { class: 'row', 'data-caps': ref }, model, ' cap ', cap, ' ', h('button', { type: 'submit', text: 'Set' }));
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const res = await api('PUT', '/api/resilience/model-concurrency', { provider: c.provider, connection: c.connection, model: model.value, cap: Number(cap.value) });
      if (!res.ok) return fieldError(form, res.error.param, res.error.message);
      fieldError(form, null, null);
      toast(`${ref}: ${model.value} cap ${Number(cap.value) || 'removed'}`, 'ok');
      capsCard(el);
    });
    return h('tr', { 'data-caps-row': ref },
      h('td', { text: ref }),
      h('td', null, caps.length ? caps.map(([m, n]) => h('span', { class: 'chip', text: `${m}: ${n}` })) : h('span', { class: 'muted', text: 'none' })),
      h('td', null, form));
  });
  replace(el, card('Per-model concurrency caps', h('p', { class: 'hint', text: 'rate_limit_overrides.model_concurrency, set at run time: validated, saved, applied to the gates at once. Cap 0 removes a cap.' }),
    table(['Connection', 'Caps', 'Set a cap'], rows)));
}

export default {
  title: 'Providers & connections',
  mount(root) {
    const liveEl = h('div', { id: 'providers-live' });
    const gatesEl = h('div');
    const capsEl = h('div', { id: 'caps' });
    replace(root, h('h2', { text: 'Providers & connections' }), liveEl, gatesEl, capsEl);
    const render = (st) => {
      replace(liveEl, st.providers.map((p) => providerCard(p, st.lockouts)));
      replace(gatesEl, gatesCard(st));
    };
    render(store.state);
    capsCard(capsEl);
    return on('state', render);
  },
};
