// Model lockouts: every active lockout with its reason and time left;
// re-enable one or all.

import { store, on, api, h, replace, card, badge, button, countdown, table, toast } from './util.js';

function reenable(l) {
  return api('DELETE', '/api/resilience/model-cooldowns', { provider: l.provider, connection: l.connection, model: l.model });
}

async function reenableAll(list) {
  let cleared = 0;
  for (const l of list) {
    const r = await reenable(l);
    if (!r.ok) return r;
    if (r.data.cleared) cleared++;
  }
  toast(`${cleared} lockout(s) re-enabled`, 'ok');
  return { ok: true };
}

function render(el, st) {
  const list = st.lockouts;
  const rows = list.map((l) => h('tr', { 'data-lockout': `${l.provider}/${l.connection}/${l.model}` },
    h('td', { text: l.provider }), h('td', { text: l.connection }),
    h('td', null, h('strong', { text: l.model }), l.family ? h('span', { class: 'muted small', text: ` (family ${l.family})` }) : null),
    h('td', { 'data-field': 'reason' }, badge(l.reason, 'warn'), l.status ? ` ${l.status}` : ''),
    h('td', { text: String(l.failure_count) }),
    h('td', { 'data-field': 'time-left' }, countdown(l.expires_at, 'expiring')),
    h('td', null, button('Re-enable', () => reenable(l), { id: `reenable:${l.provider}/${l.connection}/${l.model}`, done: `${l.model} re-enabled on ${l.provider}/${l.connection}` }))));
  replace(el, card(null,
    h('div', { class: 'toolbar' },
      h('span', { text: `${list.length} active lockout(s)` }),
      button('Re-enable all', () => reenableAll(list), { id: 'reenable-all', disabled: !list.length })),
    table(['Provider', 'Connection', 'Model', 'Reason', 'Failures', 'Time left', ''], rows,
      { empty: st.flags.model_lockout ? 'No model is locked out.' : 'No model is locked out (model_lockout is off: see Settings).' })));
}

export default {
  title: 'Model lockouts',
  mount(root) {
    const el = h('div');
    replace(root, h('h2', { text: 'Model lockouts' }), el);
    render(el, store.state);
    return on('state', (st) => render(el, st));
  },
};
