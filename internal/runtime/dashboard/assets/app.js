// Breakwater console: sign-in, navigation, live updates over server-sent
// events, the DEGRADED banner and the one-second countdown ticker.

import { store, api, emit, h, replace, tickCountdowns, toast } from './util.js';
import overview from './overview.js';
import providers from './providers.js';
import lockouts from './lockouts.js';
import combos from './combos.js';
import settings from './settings.js';
import policies from './policies.js';
import requests from './requests.js';

const pages = { overview, providers, lockouts, combos, settings, policies, requests };
const TOKEN_KEY = 'breakwater.admin_token';
const $ = (id) => document.getElementById(id);

let current = null; // {name, cleanup}
let live = null; // the EventSource
let retryTimer = null;
let retryDelay = 1000;

function showLogin(message) {
  stopLive();
  store.token = null;
  store.state = null;
  store.samples = [];
  sessionStorage.removeItem(TOKEN_KEY);
  unmount();
  replace($('page'));
  $('nav').hidden = true;
  $('session').hidden = true;
  $('banner').hidden = true;
  $('login').hidden = false;
  $('error').textContent = message || '';
  $('token').value = '';
  $('token').focus();
}

async function signIn(token) {
  store.token = token;
  const r = await api('GET', '/api/console/state');
  if (!r.ok) {
    showLogin(r.status === 401 ? 'The gateway refused this token.' : 'Cannot reach the admin API: ' + r.error.message);
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  applyState(r.data);
  $('login').hidden = true;
  $('nav').hidden = false;
  $('session').hidden = false;
  startLive();
  route();
}

function applyState(st) {
  for (const p of st.providers) p.breaker.transitions = p.breaker.transitions || []; // omitted when empty
  store.offset = Date.parse(st.now) - Date.now();
  store.state = st;
  renderBanner(st);
  emit('state', st);
}

// renderBanner warns about DEGRADED and OPEN providers on every page.
function renderBanner(st) {
  const banner = $('banner');
  const bad = st.providers.filter((p) => p.breaker.state === 'DEGRADED' || p.breaker.state === 'OPEN');
  if (!bad.length) {
    banner.hidden = true;
    return;
  }
  const open = bad.some((p) => p.breaker.state === 'OPEN');
  banner.className = 'banner ' + (open ? 'danger' : 'warn');
  replace(banner, h('strong', { text: open ? 'Providers down: ' : 'DEGRADED: ' }),
    bad.map((p, i) => [i ? ', ' : '', h('a', { href: '#/providers', text: p.id }),
      ` ${p.breaker.state} (${p.breaker.failure_count} failures; opens at ${p.thresholds.failure_threshold})`]));
  banner.hidden = false;
}

// startLive opens the one event stream of this console: a single-use
// ticket is fetched with the Bearer token (the token never goes into the
// URL), then an EventSource carries state, samples and requests.
async function startLive() {
  stopLive();
  const r = await api('POST', '/api/console/ticket');
  if (!store.token) return;
  if (!r.ok) {
    scheduleLive();
    return;
  }
  const es = new EventSource('/api/console/events?ticket=' + encodeURIComponent(r.data.ticket));
  live = es;
  es.addEventListener('open', () => {
    retryDelay = 1000;
    setLive(true);
  });
  es.addEventListener('state', (e) => applyState(JSON.parse(e.data)));
  es.addEventListener('samples', (e) => {
    const seen = new Set(store.samples.map((s) => s.at));
    for (const s of JSON.parse(e.data)) if (!seen.has(s.at)) store.samples.push(s);
    const floor = Date.now() + store.offset - 15 * 60 * 1000;
    store.samples = store.samples.filter((s) => Date.parse(s.at) >= floor);
    emit('samples', store.samples);
  });
  es.addEventListener('requests', (e) => emit('requests', JSON.parse(e.data)));
  es.addEventListener('error', () => {
    // A used ticket cannot reconnect: close and start over with a new one.
    if (live !== es) return;
    es.close();
    live = null;
    setLive(false);
    scheduleLive();
  });
}

function scheduleLive() {
  clearTimeout(retryTimer);
  retryTimer = setTimeout(() => store.token && startLive(), retryDelay);
  retryDelay = Math.min(retryDelay * 2, 15000);
}

function stopLive() {
  clearTimeout(retryTimer);
  if (live) live.close();
  live = null;
  setLive(false);
}

function setLive(on) {
  const el = $('live');
  el.className = 'live ' + (on ? 'on' : 'off');
  el.textContent = on ? 'live' : 'reconnecting';
  emit('live', on);
}

function unmount() {
  if (current && current.cleanup) current.cleanup();
  current = null;
}

// route renders the page named by the location hash (#/providers).
function route() {
  if (!store.token || !store.state) return; // signing in: signIn routes when it is done
  const name = (location.hash.replace(/^#\/?/, '').split('/')[0]) || 'overview';
  const page = pages[name] || pages.overview;
  unmount();
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.page === name);
  const root = replace($('page'), '');
  root.dataset.page = name;
  document.title = page.title + ' · Breakwater console';
  current = { name, cleanup: page.mount(root) };
}

function init() {
  store.onUnauthorized = () => {
    if (store.token) showLogin('The gateway refused the token (it may have changed). Sign in again.');
  };
  $('login-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const tok = $('token').value.trim();
    $('token').value = '';
    if (tok) signIn(tok);
  });
  $('logout').addEventListener('click', () => {
    showLogin('');
    toast('Signed out.');
  });
  window.addEventListener('hashchange', route);
  setInterval(tickCountdowns, 1000);
  const saved = sessionStorage.getItem(TOKEN_KEY);
  if (saved) signIn(saved);
  else showLogin('');
}

init();
