// Shared helpers of the Breakwater console: DOM building, the admin API
// client, time formatting and the live store. No framework, no build step.

const SVG_NS = 'http://www.w3.org/2000/svg';

// store holds the session: the admin token (mirrored in sessionStorage),
// the latest live state, the overview samples and the clock offset to the
// gateway (server time − local time).
export const store = {
  token: null,
  state: null,
  samples: [],
  offset: 0,
  listeners: new Map(),
  onUnauthorized: null,
};

// on subscribes fn to a store event ("state", "samples", "requests",
// "live"); it returns the unsubscribe function.
export function on(event, fn) {
  if (!store.listeners.has(event)) store.listeners.set(event, new Set());
  store.listeners.get(event).add(fn);
  return () => store.listeners.get(event).delete(fn);
}

export function emit(event, value) {
  for (const fn of store.listeners.get(event) || []) fn(value);
}

// h builds an element: h('div', {class: 'x', onclick: fn}, 'text', child).
// A tag written 'svg:path' is created in the SVG namespace. Attribute values
// that are null, undefined or false are left out; children that are null,
// undefined or false are skipped, arrays are flattened. Text is always set
// as text, never parsed as HTML.
export function h(tag, attrs, ...kids) {
  const svg = tag.startsWith('svg:');
  const el = svg ? document.createElementNS(SVG_NS, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.setAttribute('class', v);
    else if (k === 'text') el.textContent = v;
    else if (k === 'value' && !svg) el.value = v;
    else if (k === 'checked' && !svg) el.checked = !!v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, kids);
  return el;
}

function append(el, kids) {
  for (const k of kids) {
    if (k === null || k === undefined || k === false) continue;
    if (Array.isArray(k)) append(el, k);
    else if (k instanceof Node) el.appendChild(k);
    else el.appendChild(document.createTextNode(String(k)));
  }
}

// replace empties el and appends kids.
export function replace(el, ...kids) {
  el.replaceChildren();
  append(el, kids);
  return el;
}

// api calls the admin API with the session's token as a Bearer header (the
// token is never put in a URL). It resolves to {ok, status, data, error},
// error being the gateway's {message, param, code}.
export async function api(method, path, body) {
  const opts = { method, headers: { Authorization: 'Bearer ' + store.token }, cache: 'no-store' };
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = typeof body === 'string' ? body : JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, opts);
  } catch (e) {
    return { ok: false, status: 0, data: null, error: { message: 'the gateway did not answer (' + e.message + ')' } };
  }
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = text;
  }
  if (res.status === 401 && store.onUnauthorized) store.onUnauthorized();
  if (!res.ok) {
    const error = (data && data.error) || { message: res.status + ' ' + res.statusText };
    return { ok: false, status: res.status, data, error };
  }
  return { ok: true, status: res.status, data, error: null };
}

// serverNow is the gateway's current time in milliseconds.
export function serverNow() {
  return Date.now() + store.offset;
}

// left is the time in ms until the ISO time iso on the gateway's clock (0
// when past or empty).
export function left(iso) {
  if (!iso) return 0;
  return Math.max(0, Date.parse(iso) - serverNow());
}

// isZeroTime reports Go's zero time or an empty value.
export function isZeroTime(iso) {
  return !iso || iso.startsWith('0001-01-01');
}

// fmtDur formats a duration in ms for people: 350 ms, 4.2 s, 3 min 05 s,
// 2 h 10 min, 3 d 4 h.
export function fmtDur(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '–';
  if (ms < 1000) return Math.round(ms) + ' ms';
  const s = ms / 1000;
  if (s < 60) return s.toFixed(1) + ' s';
  const m = Math.floor(s / 60);
  if (m < 60) return m + ' min ' + String(Math.floor(s % 60)).padStart(2, '0') + ' s';
  const hr = Math.floor(m / 60);
  if (hr < 48) return hr + ' h ' + String(m % 60).padStart(2, '0') + ' min';
  return Math.floor(hr / 24) + ' d ' + (hr % 24) + ' h';
}

// fmtNum formats a figure with at most digits decimals.
export function fmtNum(v, digits = 2) {
  if (v === null || v === undefined) return '–';
  return Number(v).toLocaleString(undefined, { maximumFractionDigits: digits });
}

// fmtTime formats an ISO time as a local clock time (with the date when it
// is not today).
export function fmtTime(iso) {
  if (isZeroTime(iso)) return '–';
  const d = new Date(iso);
  const t = d.toLocaleTimeString(undefined, { hour12: false });
  return d.toDateString() === new Date().toDateString() ? t : d.toLocaleDateString() + ' ' + t;
}

// ago formats how long ago an ISO time was.
export function ago(iso) {
  if (isZeroTime(iso)) return '–';
  return fmtDur(Math.max(0, serverNow() - Date.parse(iso))) + ' ago';
}

// countdown returns a span that counts down to the ISO time until (the
// console's one-second ticker updates every [data-until] element).
export function countdown(until, expired = 'now') {
  const el = h('span', { class: 'countdown', 'data-until': until, 'data-expired': expired });
  tick(el);
  return el;
}

function tick(el) {
  const ms = left(el.dataset.until);
  el.textContent = ms > 0 ? fmtDur(ms) : el.dataset.expired;
}

// tickCountdowns refreshes every countdown on the page.
export function tickCountdowns() {
  for (const el of document.querySelectorAll('[data-until]')) tick(el);
}

// badge is a coloured state label (CLOSED, OPEN, cooling, banned, ...).
export function badge(text, kind) {
  return h('span', { class: 'badge ' + (kind || String(text).toLowerCase().replace(/[^a-z_]/g, '')), text });
}

// toast shows a short message in the corner.
export function toast(msg, kind = 'info') {
  const box = document.getElementById('toasts');
  if (!box) return;
  const t = h('div', { class: 'toast ' + kind, role: 'status', text: msg });
  box.appendChild(t);
  setTimeout(() => t.remove(), kind === 'error' ? 8000 : 4000);
}

// button builds a button that runs action, disabling itself meanwhile and
// reporting the API answer in a toast.
export function button(label, action, opts = {}) {
  const b = h('button', { type: 'button', class: opts.class || '', title: opts.title, 'data-action': opts.id, disabled: opts.disabled });
  b.textContent = label;
  b.addEventListener('click', async () => {
    if (opts.confirm && !window.confirm(opts.confirm)) return;
    b.disabled = true;
    try {
      const r = await action();
      if (r && r.ok === false) toast((opts.failed || label + ' failed') + ': ' + r.error.message, 'error');
      else if (r && opts.done) toast(typeof opts.done === 'function' ? opts.done(r) : opts.done, 'ok');
    } finally {
      b.disabled = false;
    }
  });
  return b;
}

// fieldError shows msg under the form field whose data-path is path (or
// under the form when no field matches) and returns the element shown.
export function fieldError(form, path, msg) {
  for (const old of form.querySelectorAll('.field-error')) old.remove();
  for (const old of form.querySelectorAll('.invalid')) old.classList.remove('invalid');
  if (!msg) return null;
  let input = null;
  for (const el of form.querySelectorAll('[data-path]')) {
    if (el.dataset.path === path) input = el;
  }
  const err = h('div', { class: 'field-error', role: 'alert', 'data-error-for': path || 'form', text: msg });
  if (input) {
    input.classList.add('invalid');
    input.closest('.field, label, td, .row')?.appendChild(err) ?? input.after(err);
    input.focus();
  } else {
    form.prepend(err);
  }
  return err;
}

// table builds a table from header labels and rows of cells.
export function table(headers, rows, opts = {}) {
  return h('table', { class: 'grid ' + (opts.class || '') },
    h('thead', null, h('tr', null, headers.map((x) => h('th', { text: x })))),
    h('tbody', null, rows.length ? rows : h('tr', null, h('td', { class: 'empty', colspan: headers.length, text: opts.empty || 'nothing to show' }))));
}

// card is a titled section.
export function card(title, ...kids) {
  return h('section', { class: 'card' }, title ? h('h3', { text: title }) : null, ...kids);
}
