// Policies & plugins: the serving bundle revision, operator rule files and
// their status, the operator-rules editor (validated by the gateway before
// it saves), the explain form, and the loaded plugins with a reload.

import { store, api, h, replace, card, badge, button, table, toast, fieldError, fmtTime, ago } from './util.js';

const RULE_EXAMPLE = [{ provider: 'openai', status: 403, match: '额度不足', restate_to: 429, scope: 'connection', reason: 'quota_exhausted', cooldown_ms: 60000 }];

function statusCard(data) {
  const st = data.status;
  const files = st.operator_files.map((f) => h('tr', { 'data-file': f.name }, h('td', null, h('code', { text: f.name })),
    h('td', null, f.loaded ? badge('loaded', 'ok') : badge('rejected', 'terminal')), h('td', { class: 'err', text: f.error || '' })));
  return card('Policy bundle',
    h('dl', { class: 'facts' },
      h('dt', { text: 'Serving revision' }), h('dd', null, h('code', { id: 'revision', text: st.revision })),
      h('dt', { text: 'Built-in revision' }), h('dd', null, h('code', { text: st.builtin_revision }), h('span', { class: 'muted', text: ` (${st.builtin_files.length} files)` })),
      h('dt', { text: 'Operator directory' }), h('dd', null, st.operator_dir ? h('code', { text: st.operator_dir }) : h('span', { class: 'muted', text: 'none (policies.dir)' })),
      h('dt', { text: 'Last reload' }), h('dd', { text: st.last_reload ? `${fmtTime(st.last_reload)} (${ago(st.last_reload)})` : '–' }),
      h('dt', { text: 'Operator rules' }), h('dd', { text: String(st.operator_rules) }),
      h('dt', { text: 'Evaluation errors' }), h('dd', { text: `${st.eval_errors} failed, ${st.invalid_decisions} invalid decisions, ${st.plugin_answers_ignored} plugin answers ignored` })),
    st.last_error ? h('p', { class: 'field-error', 'data-last-error': '', text: 'Last load rejected: ' + st.last_error }) : null,
    table(['Operator file', 'Status', 'Error'], files, { empty: 'No operator .rego file.' }));
}

function decisionLogCard(data, st) {
  const log = st.decision_log;
  const sink = (name, x) => x ? [h('dt', { text: name }), h('dd', { text: `${x.target}: ${x.written} written, ${x.dropped} dropped, ${x.queued} queued, ${x.failures} failures` + (x.last_error ? ` (last error: ${x.last_error})` : '') })] : [];
  const bundle = st.bundle;
  const rows = data.decisions.slice(0, 20).map((d) => h('tr', { 'data-decision': d.decision_id },
    h('td', { text: fmtTime(d.timestamp) }),
    h('td', null, h('code', { text: d.request_id || '–' })),
    h('td', { text: `${d.provider}/${d.connection || '*'}` }),
    h('td', { text: String(d.status) + (d.restated_status !== d.status ? ` → ${d.restated_status}` : '') }),
    h('td', null, badge(d.reason, 'warn')),
    h('td', null, h('code', { text: d.rule_id || '–' }), h('span', { class: 'muted', text: ` (${d.rule_source})` }))));
  return card('Decision log',
    h('dl', { class: 'facts', id: 'decision-log' },
      h('dt', { text: 'Policies from' }), h('dd', { 'data-field': 'source', text: st.source === 'bundle' && bundle ? `bundle ${bundle.url} (revision ${bundle.revision || '–'}${bundle.signed ? ', signed' : ''}, ${bundle.polls} polls${bundle.last_error ? ', last error: ' + bundle.last_error : ''})` : 'the operator directory' }),
      h('dt', { text: 'Decisions' }), h('dd', { 'data-field': 'recorded', text: log ? `${log.recorded} recorded, ${log.buffered} of ${log.capacity} kept` : 'no decision log' }),
      ...sink('File', log && log.file), ...sink('Service', log && log.service)),
    table(['Time', 'Request', 'Connection', 'Status', 'Reason', 'Rule'], rows, { empty: 'No decision yet: decisions are recorded for failed attempts only.' }));
}

function rulesCard(data, reload) {
  const text = h('textarea', { id: 'rules', rows: 10, spellcheck: 'false', 'data-path': 'body' });
  text.value = JSON.stringify(data.operator_rules, null, 2);
  const form = h('form', { id: 'rules-form' },
    h('p', { class: 'hint' }, 'A JSON list of operator rules, consulted before the built-in ones. The gateway validates the whole list and saves it only when every rule is valid. Fields: provider, status, match (text or /regex/), header, scope, reason, cooldown_ms, restate_to, id. Example: ',
      h('code', { text: JSON.stringify(RULE_EXAMPLE) })),
    text, h('div', { class: 'toolbar' }, h('button', { type: 'submit', class: 'primary', id: 'rules-save', text: 'Validate & save' })));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    let body;
    try {
      body = JSON.parse(text.value);
    } catch (err) {
      fieldError(form, 'body', 'Not valid JSON: ' + err.message);
      return;
    }
    const r = await api('PUT', '/api/policies/operator-rules', body);
    if (!r.ok) {
      fieldError(form, 'body', r.error.message);
      return;
    }
    fieldError(form, null, null);
    toast(`Operator rules saved (${r.data.operator_rules.length}); revision ${r.data.status.revision}`, 'ok');
    reload(r.data);
  });
  return card('Operator rules', form);
}

function explainCard() {
  const providers = store.state.providers.map((p) => p.id);
  const provider = h('select', { id: 'ex-provider', 'data-path': 'provider' }, providers.map((p) => h('option', { value: p, text: p })));
  const status = h('input', { id: 'ex-status', type: 'number', value: 429, 'data-path': 'status', class: 'num' });
  const headers = h('textarea', { id: 'ex-headers', rows: 3, placeholder: 'Retry-After: 30', 'data-path': 'headers', spellcheck: 'false' });
  const body = h('textarea', { id: 'ex-body', rows: 4, placeholder: '{"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}', 'data-path': 'body', spellcheck: 'false' });
  const out = h('div', { id: 'explain-result' });
  const form = h('form', { id: 'explain-form', class: 'editor' },
    h('div', { class: 'field' }, h('label', { for: 'ex-provider', text: 'Provider' }), provider),
    h('div', { class: 'field' }, h('label', { for: 'ex-status', text: 'Upstream status (0 = transport error)' }), status),
    h('div', { class: 'field' }, h('label', { for: 'ex-headers', text: 'Response headers, one "Name: value" a line' }), headers),
    h('div', { class: 'field' }, h('label', { for: 'ex-body', text: 'Response body' }), body),
    h('div', { class: 'toolbar' }, h('button', { type: 'submit', class: 'primary', id: 'explain', text: 'Explain' })), out);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const hs = {};
    for (const line of headers.value.split('\n')) {
      const i = line.indexOf(':');
      if (i > 0) hs[line.slice(0, i).trim()] = line.slice(i + 1).trim();
    }
    const r = await api('POST', '/api/policies/explain', { provider: provider.value, status: Number(status.value), headers: hs, body: body.value });
    if (!r.ok) {
      fieldError(form, r.error.param, r.error.message);
      return;
    }
    fieldError(form, null, null);
    const x = r.data;
    replace(out, h('dl', { class: 'facts result' },
      h('dt', { text: 'Restated status' }), h('dd', { 'data-field': 'restated_status', text: String(x.restated_status) }),
      h('dt', { text: 'Classification' }), h('dd', { 'data-field': 'reason' }, badge(x.reason, 'warn'), ` scope ${x.scope}` + (x.cooldown_ms ? `, cooldown ${x.cooldown_ms} ms` : '')),
      h('dt', { text: 'Deciding rule' }), h('dd', { 'data-field': 'rule' }, h('code', { text: x.rule_id || '–' }), ` (${x.source})`)),
    h('ol', { class: 'trace' }, x.trace.map((t) => h('li', { text: t }))));
  });
  return card('Explain an upstream error', form);
}

function routeCard(strategies) {
  const rows = strategies.map((r) => h('tr', { 'data-route': r.combo },
    h('td', null, h('code', { text: r.combo })), h('td', { text: r.plugin }),
    h('td', { 'data-field': 'route-calls', text: `${r.calls} calls, ${r.declined} declined, ${r.fallbacks} fell back` })));
  return table(['Combo', 'Routing plugin', 'Decisions'], rows, { empty: 'No combo is routed by a plugin (strategy plugin:<name>).' });
}

function pluginsCard(list, strategies, reload) {
  const rows = list.map((p) => h('tr', { 'data-plugin': p.name },
    h('td', null, h('strong', { text: p.name }), h('div', { class: 'muted small', text: p.path })),
    h('td', { text: p.hooks.join(', ') }),
    h('td', null, h('code', { 'data-field': 'sha', title: p.sha256, text: 'sha256 ' + p.sha256.slice(0, 12) }), h('div', { class: 'muted small', text: `ABI ${p.abi_version} · ${p.encoding} · deadline ${p.deadline}` })),
    h('td', { 'data-field': 'calls', text: `${p.calls} calls, ${p.errors} errors, p99 ${p.p99_us} µs` }),
    h('td', { 'data-field': 'loaded_at', text: fmtTime(p.loaded_at) }),
    h('td', { class: 'err', text: p.last_error || '' })));
  return card('Plugins',
    h('div', { class: 'toolbar' }, button('Reload plugins', async () => {
      const r = await api('POST', '/api/plugins/reload');
      if (r.ok) reload(r.data);
      return r;
    }, { id: 'reload-plugins', done: 'Plugins reloaded' })),
    table(['Plugin', 'Hooks', 'Build', 'Calls', 'Loaded', 'Last error'], rows, { empty: 'No plugin configured (plugins: in the configuration file).' }),
    h('h4', { text: 'Routing plugins' }), routeCard(strategies));
}

export default {
  title: 'Policies & plugins',
  mount(root) {
    const statusEl = h('div', { id: 'policy-status' });
    const rulesEl = h('div', { id: 'policy-rules' });
    const decisionsEl = h('div', { id: 'policy-decisions' });
    const pluginsEl = h('div', { id: 'plugins' });
    replace(root, h('h2', { text: 'Policies & plugins' }), statusEl, decisionsEl, rulesEl, explainCard(), pluginsEl);
    const showPolicies = (data) => {
      replace(statusEl, statusCard(data));
      replace(rulesEl, rulesCard(data, showPolicies));
    };
    const showPlugins = (data) => replace(pluginsEl, pluginsCard(data.plugins, data.route_strategies || [], showPlugins));
    (async () => {
      const [pol, plug, dec] = await Promise.all([api('GET', '/api/policies'), api('GET', '/api/plugins'), api('GET', '/api/policies/decisions?limit=20')]);
      if (pol.ok) showPolicies(pol.data);
      else replace(statusEl, h('p', { class: 'field-error', text: pol.error.message }));
      if (dec.ok && pol.ok) replace(decisionsEl, decisionLogCard(dec.data, pol.data.status));
      else if (!dec.ok) replace(decisionsEl, h('p', { class: 'field-error', text: dec.error.message }));
      if (plug.ok) showPlugins(plug.data);
      else replace(pluginsEl, h('p', { class: 'field-error', text: plug.error.message }));
    })();
    return null;
  },
};
