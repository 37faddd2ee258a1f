// Requests: the last requests (no bodies, no secrets, no client keys) with
// their route, attempts, status and timings; one request's decision trail.

import { on, api, h, replace, card, badge, fmtDur, fmtTime, table } from './util.js';

const MAX = 200;

function statusBadge(r) {
  const kind = r.status >= 500 ? 'terminal' : r.status >= 400 ? 'warn' : 'ok';
  return badge(String(r.status) + (r.code ? ' ' + r.code : ''), kind);
}

function row(r, select) {
  const tr = h('tr', { class: 'clickable', 'data-seq': r.seq, tabindex: 0 },
    h('td', { text: fmtTime(r.at) }),
    h('td', null, h('code', { text: r.model || r.served_model || '–' }), r.stream ? h('span', { class: 'chip', text: 'stream' }) : null),
    h('td', { text: [r.route, r.provider && r.provider + (r.connection ? '/' + r.connection : '')].filter(Boolean).join(' → ') || '–' }),
    h('td', { 'data-field': 'attempts', text: String(r.attempts) }),
    h('td', null, statusBadge(r)),
    h('td', { text: fmtDur(r.duration_ms) }),
    h('td', { text: `${fmtDur(r.upstream_ms)} / ${fmtDur(r.overhead_ms)}` + (r.ttfb_ms ? ` · TTFB ${fmtDur(r.ttfb_ms)}` : '') }));
  tr.addEventListener('click', () => select(r.seq));
  tr.addEventListener('keydown', (e) => e.key === 'Enter' && select(r.seq));
  return tr;
}

// decisionsList shows the policy decisions of one request (the decision
// log's entries with its request id): what each failed attempt was judged.
function decisionsList(r, decisions) {
  if (!r.id) return h('p', { class: 'muted', text: 'This request has no id.' });
  if (decisions === null) return h('p', { class: 'muted', text: 'The decision log is not available.' });
  if (!decisions.length) return h('p', { class: 'muted', id: 'decisions', text: 'No policy decision: no attempt failed.' });
  return h('ul', { class: 'plain', id: 'decisions' }, decisions.map((d) => h('li', { 'data-decision': d.decision_id },
    h('strong', { text: `${d.provider}/${d.connection || '*'} ${d.model || ''}` }), ' ',
    badge(d.reason, 'warn'), ` status ${d.status}` + (d.restated_status !== d.status ? ` → ${d.restated_status}` : ''),
    h('span', { class: 'muted', text: ` · rule ${d.rule_id || '–'} (${d.rule_source})` + (d.scope ? ` · scope ${d.scope}` : '') + (d.cooldown_ms ? ` · cooldown ${fmtDur(d.cooldown_ms)}` : '') }))));
}

function detail(r, decisions) {
  const total = Math.max(r.duration_ms, 1);
  const attempts = (r.trail || []).map((a, i) => {
    const bar = h('span', { class: 'span-bar ' + (a.outcome === 'success' ? 'ok' : 'fail') });
    bar.style.marginLeft = (a.start_ms / total) * 100 + '%';
    bar.style.width = Math.max(1, (a.duration_ms / total) * 100) + '%';
    return h('li', { 'data-attempt': i + 1, class: a.outcome === 'success' ? 'ok' : 'fail' },
      h('div', null, h('strong', { text: `#${i + 1} ${a.provider}/${a.connection} ${a.model}` }), ' ',
        badge(a.outcome, a.outcome === 'success' ? 'ok' : 'warn'), a.status ? ` ${a.status}` : '',
        ` · ${fmtDur(a.duration_ms)} from +${fmtDur(a.start_ms)}`, a.rule ? h('span', { class: 'muted', text: ` · rule ${a.rule}` }) : null,
        a.detail ? h('span', { class: 'muted', text: ' · ' + a.detail }) : null),
      h('div', { class: 'track' }, bar));
  });
  const skipped = (r.skipped || []).map((s) => h('li', { 'data-skip': `${s.provider}/${s.connection || '*'}/${s.model}`, 'data-reason': s.reason },
    badge(s.reason, 'warn'), ` ${s.provider}${s.connection ? '/' + s.connection : ''} ${s.model}`,
    s.seconds_left ? [' · ', h('span', { 'data-field': 'time-left', text: `${fmtDur(s.seconds_left * 1000)} left` })] : '', s.detail ? h('span', { class: 'muted', text: ' · ' + s.detail }) : null));
  const noTrail = !(r.trail && r.trail.length) && r.attempts > 0;
  return card(`Request #${r.seq}` + (r.id ? ` (${r.id})` : ''),
    h('dl', { class: 'facts' },
      h('dt', { text: 'Finished' }), h('dd', { text: fmtTime(r.at) }),
      h('dt', { text: 'Endpoint' }), h('dd', { text: r.endpoint }),
      h('dt', { text: 'Model asked / served' }), h('dd', { text: `${r.model || '–'} / ${r.served_model || '–'}` }),
      h('dt', { text: 'Route' }), h('dd', { text: r.route || '–' }),
      r.route_plugin ? h('dt', { text: 'Routing plugin' }) : null,
      r.route_plugin ? h('dd', { 'data-field': 'route-plugin', text: `${r.route_plugin}: ` + (r.route_fallback ? `configured order (${r.route_fallback})` : `rule ${r.route_rule || '–'}`) }) : null,
      h('dt', { text: 'Answer' }), h('dd', null, statusBadge(r), r.fallback ? h('span', { class: 'chip', text: 'fallback: ' + r.fallback }) : null),
      h('dt', { text: 'Timings' }), h('dd', { text: `total ${fmtDur(r.duration_ms)}, upstream ${fmtDur(r.upstream_ms)}, gateway ${fmtDur(r.overhead_ms)}` + (r.ttfb_ms ? `, first byte ${fmtDur(r.ttfb_ms)}` : '') })),
    h('h4', { text: `Attempts (${r.attempts})` }),
    attempts.length ? h('ol', { class: 'attempts', id: 'attempts' }, attempts)
      : h('p', { class: 'muted', text: noTrail ? 'No attempt trail was recorded for this request.' : 'No upstream attempt.' }),
    h('h4', { text: 'Skipped candidates' }),
    skipped.length ? h('ul', { class: 'plain', id: 'skipped' }, skipped) : h('p', { class: 'muted', text: 'None reported.' }),
    h('h4', { text: 'Policy decisions' }),
    decisionsList(r, decisions));
}

export default {
  title: 'Requests',
  mount(root) {
    const listEl = h('div', { id: 'request-list' });
    const detailEl = h('div', { id: 'request-detail' });
    let records = [];
    let selected = null;
    const select = async (seq) => {
      selected = seq;
      for (const tr of listEl.querySelectorAll('tr[data-seq]')) tr.classList.toggle('selected', Number(tr.dataset.seq) === seq);
      const r = await api('GET', '/api/console/requests/' + seq);
      if (!r.ok) return replace(detailEl, h('p', { class: 'field-error', text: r.error.message }));
      let decisions = [];
      if (r.data.id) {
        const d = await api('GET', '/api/policies/decisions?limit=100&request_id=' + encodeURIComponent(r.data.id));
        decisions = d.ok ? d.data.decisions : null;
      }
      if (selected === seq) replace(detailEl, detail(r.data, decisions));
    };
    const render = () => {
      replace(listEl, card(`Last ${records.length} request(s)`,
        table(['Finished', 'Model', 'Route', 'Attempts', 'Status', 'Duration', 'Upstream / gateway'], records.map((r) => row(r, select)),
          { class: 'requests', empty: 'No request yet: send one to /v1/chat/completions.' })));
      if (selected !== null) for (const tr of listEl.querySelectorAll('tr[data-seq]')) tr.classList.toggle('selected', Number(tr.dataset.seq) === selected);
    };
    replace(root, h('h2', { text: 'Requests' }), h('div', { class: 'split' }, listEl, detailEl));
    (async () => {
      const r = await api('GET', '/api/console/requests?limit=' + MAX);
      if (!r.ok) return replace(listEl, h('p', { class: 'field-error', text: r.error.message }));
      const seen = new Set(records.map((x) => x.seq));
      records = [...records, ...r.data.requests.filter((x) => !seen.has(x.seq))].sort((a, b) => b.seq - a.seq).slice(0, MAX);
      render();
    })();
    return on('requests', (recs) => {
      const seen = new Set(records.map((x) => x.seq));
      records = [...recs.filter((x) => !seen.has(x.seq)).reverse(), ...records].slice(0, MAX);
      render();
    });
  },
};
