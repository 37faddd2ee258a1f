// Hand-drawn SVG time-series charts for the overview: no chart library.

import { h, fmtNum, serverNow } from './util.js';

const W = 320;
const H = 120;
const PAD = { l: 40, r: 8, t: 8, b: 18 };
const SPAN = 15 * 60 * 1000;

// lineChart draws series over the last 15 minutes. series is a list of
// {name, key, cls}; samples the overview samples ({at, <key>: number|null}).
// A null value breaks the line. opts: {unit, min, max, digits}.
export function lineChart(samples, series, opts = {}) {
  const now = serverNow();
  const x0 = now - SPAN;
  const pts = samples.filter((s) => Date.parse(s.at) >= x0);
  let lo = opts.min ?? Infinity;
  let hi = opts.max ?? -Infinity;
  for (const s of pts) {
    for (const sr of series) {
      const v = s[sr.key];
      if (v === null || v === undefined) continue;
      if (opts.min === undefined) lo = Math.min(lo, v);
      if (opts.max === undefined) hi = Math.max(hi, v);
    }
  }
  if (!Number.isFinite(lo)) lo = 0;
  if (!Number.isFinite(hi)) hi = 1;
  if (opts.min === undefined) lo = Math.min(lo, 0);
  if (hi <= lo) hi = lo + 1;
  hi = niceCeil(hi);
  const xs = (t) => PAD.l + ((t - x0) / SPAN) * (W - PAD.l - PAD.r);
  const ys = (v) => H - PAD.b - ((v - lo) / (hi - lo)) * (H - PAD.t - PAD.b);

  const svg = h('svg:svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': opts.label || '' });
  for (const f of [0, 0.5, 1]) {
    const v = lo + (hi - lo) * f;
    const y = ys(v);
    svg.appendChild(h('svg:line', { x1: PAD.l, x2: W - PAD.r, y1: y, y2: y, class: 'gridline' }));
    svg.appendChild(h('svg:text', { x: PAD.l - 4, y: y + 3, class: 'axis', 'text-anchor': 'end' }, fmtNum(v, opts.digits ?? 1)));
  }
  for (const [label, t] of [['−15 min', x0], ['−10', now - 10 * 60e3], ['−5', now - 5 * 60e3], ['now', now]]) {
    svg.appendChild(h('svg:text', { x: xs(t), y: H - 4, class: 'axis', 'text-anchor': t === now ? 'end' : 'middle' }, label));
  }
  for (const sr of series) {
    let d = '';
    let pen = false;
    for (const s of pts) {
      const v = s[sr.key];
      if (v === null || v === undefined) {
        pen = false;
        continue;
      }
      d += (pen ? 'L' : 'M') + xs(Date.parse(s.at)).toFixed(1) + ' ' + ys(v).toFixed(1) + ' ';
      pen = true;
    }
    if (d) svg.appendChild(h('svg:path', { d, class: 'line ' + sr.cls }));
    const last = [...pts].reverse().find((s) => s[sr.key] !== null && s[sr.key] !== undefined);
    if (last) svg.appendChild(h('svg:circle', { cx: xs(Date.parse(last.at)), cy: ys(last[sr.key]), r: 2.5, class: 'dot ' + sr.cls }));
  }
  return svg;
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
function niceCeil(v) {
  if (v <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

// latest returns the newest non-null value of key.
export function latest(samples, key) {
  for (let i = samples.length - 1; i >= 0; i--) {
    const v = samples[i][key];
    if (v !== null && v !== undefined) return v;
  }
  return null;
}
