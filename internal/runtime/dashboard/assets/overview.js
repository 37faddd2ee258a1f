// Overview: live rates and latencies over the last 15 minutes, and the
// counts of everything removed from routing right now.

import { store, on, h, replace, card, fmtNum, badge } from './util.js';
import { lineChart, latest } from './charts.js';

const CHARTS = [
  { id: 'rps', title: 'Request rate', unit: 'req/s', series: [{ key: 'rps', name: 'requests/s', cls: 's0' }], digits: 2 },
  { id: 'success', title: 'Success rate', unit: '%', series: [{ key: 'success_pct', name: '2xx share', cls: 's1' }], min: 0, max: 100, digits: 0 },
  { id: 'attempts', title: 'Attempts per request', unit: '', series: [{ key: 'attempts_per_request', name: 'attempts', cls: 's2' }], digits: 2 },
  { id: 'latency', title: 'Upstream latency', unit: 'ms', series: [{ key: 'latency_p50_ms', name: 'p50', cls: 's0' }, { key: 'latency_p99_ms', name: 'p99', cls: 's3' }] },
  { id: 'overhead', title: 'Gateway overhead', unit: 'ms', series: [{ key: 'overhead_p50_ms', name: 'p50', cls: 's0' }, { key: 'overhead_p99_ms', name: 'p99', cls: 's3' }], digits: 2 },
  { id: 'ttfb', title: 'Stream time to first byte', unit: 'ms', series: [{ key: 'ttfb_p50_ms', name: 'p50', cls: 's0' }, { key: 'ttfb_p99_ms', name: 'p99', cls: 's3' }] },
];

const TILES = [
  ['open', 'Providers OPEN', 'danger'],
  ['degraded', 'Providers DEGRADED', 'warn'],
  ['half_open', 'Providers HALF_OPEN', 'warn'],
  ['cooling', 'Cooling connections', 'warn'],
  ['terminal', 'Terminal connections', 'danger'],
  ['lockouts', 'Model lockouts', 'warn'],
  ['queued', 'Queued requests', 'warn'],
  ['running', 'Requests in flight', ''],
];

function withPct(samples) {
  return samples.map((s) => ({ ...s, success_pct: s.success_rate === null ? null : s.success_rate * 100 }));
}

function renderCharts(el) {
  const samples = withPct(store.samples);
  replace(el, CHARTS.map((c) => {
    const now = c.series.map((sr) => {
      const v = latest(samples, sr.key);
      return h('span', { class: 'legend ' + sr.cls }, sr.name + ' ', h('b', { text: v === null ? '–' : fmtNum(v, c.digits ?? 1) + (c.unit ? ' ' + c.unit : '') }));
    });
    return h('figure', { class: 'chart-card', 'data-chart': c.id },
      h('figcaption', null, h('span', { class: 'chart-title', text: c.title }), h('span', { class: 'legends' }, now)),
      lineChart(samples, c.series, { min: c.min, max: c.max, digits: c.digits, label: c.title }));
  }), samples.length ? null : h('p', { class: 'hint', text: 'Collecting: the first sample arrives within 5 seconds of the gateway\'s start, one every 5 s after that.' }));
}

function renderTiles(el, st) {
  replace(el, TILES.map(([k, label, kind]) => {
    const n = st.counts[k] || 0;
    return h('div', { class: 'tile ' + (n > 0 ? kind : 'zero'), 'data-count': k },
      h('div', { class: 'n', text: String(n) }), h('div', { class: 'label', text: label }));
  }));
}

function renderFlags(el, st) {
  replace(el, h('ul', { class: 'flags' }, Object.entries(st.flags).map(([k, v]) =>
    h('li', null, badge(v ? 'on' : 'off', v ? 'on' : 'off'), ' ', h('code', { text: k }))),
  h('li', null, h('span', { class: 'muted', text: `${st.counts.providers} providers, ${st.counts.connections} connections, ${st.live_streams} console stream(s) open` }))));
}

export default {
  title: 'Overview',
  mount(root) {
    const tiles = h('div', { class: 'tiles', id: 'tiles' });
    const charts = h('div', { class: 'charts', id: 'charts' });
    const flags = h('div', { id: 'flags' });
    replace(root, h('h2', { text: 'Overview' }), tiles, card('Last 15 minutes', charts), card('Feature switches', flags));
    const state = (st) => {
      renderTiles(tiles, st);
      renderFlags(flags, st);
    };
    state(store.state);
    renderCharts(charts);
    const offState = on('state', state);
    const offSamples = on('samples', () => renderCharts(charts));
    const redraw = setInterval(() => renderCharts(charts), 5000); // slide the time axis
    return () => {
      offState();
      offSamples();
      clearInterval(redraw);
    };
  },
};
