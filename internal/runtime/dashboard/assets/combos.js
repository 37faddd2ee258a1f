// Combos: each combo's targets with strategy, weights, the sticky position
// and why each target is excluded now; create, edit and delete through the
// combos API, its validation errors shown at the field.

import { store, on, api, h, replace, card, badge, button, countdown, table, toast, fieldError, isZeroTime } from './util.js';

const STRATEGIES = ['priority', 'weighted', 'round-robin', 'fill-first', 'p2c', 'random', 'strict-random', 'least-used',
  'cost-optimized', 'reset-aware', 'reset-window', 'headroom', 'quota-weighted', 'lkgp', 'context-optimized',
  'cache-optimized', 'context-relay', 'auto', 'fusion', 'pipeline'];

function exclusionCell(t) {
  if (t.child) return h('span', { class: 'muted', text: 'child combo (its own strategy)' });
  if (!t.excluded.length) return badge('eligible', 'ok');
  return h('ul', { class: 'plain' }, t.excluded.map((x) => h('li', null, badge(x.reason, 'warn'), ' ', h('code', { text: x.connection }),
    x.detail ? h('span', { class: 'muted', text: ' ' + x.detail }) : null,
    !isZeroTime(x.until) ? [' · ', countdown(x.until)] : h('span', { class: 'muted', text: ' · until reset' }))));
}

function comboCard(c, raw, openEditor, reload) {
  const rows = c.targets.map((t) => h('tr', { 'data-target': t.key, class: t.current ? 'current' : '' },
    h('td', null, h('code', { text: t.key }), t.current ? h('span', { class: 'chip', text: 'sticky position' }) : null),
    h('td', { text: t.weight ? String(t.weight) : '–' }),
    h('td', { text: t.price_in || t.price_out ? `${t.price_in || 0} / ${t.price_out || 0}` : '–' }),
    h('td', { text: t.child ? '–' : `${t.eligible} of ${t.eligible + t.excluded.length}` }),
    h('td', null, exclusionCell(t))));
  const pos = c.position ? `position: ${c.position.key || '–'}${c.position.count ? ` (${c.position.count} success(es) in the batch)` : ''}` : '';
  return h('section', { class: 'card', 'data-combo': c.name },
    h('header', null,
      h('h3', null, c.name, ' ', badge(c.source, c.source === 'api' ? 'api' : 'config')),
      h('div', { class: 'actions' },
        button('Edit', async () => openEditor(raw), { id: 'edit-combo:' + c.name }),
        c.source === 'api' ? button('Delete', async () => {
          const r = await api('DELETE', '/api/combos/' + encodeURIComponent(c.name));
          if (r.ok) reload();
          return r;
        }, { id: 'delete-combo:' + c.name, class: 'danger', done: `combo ${c.name} deleted` }) : null)),
    h('p', { class: 'muted', text: `strategy ${c.strategy}` + (c.sticky_limit ? `, sticky ${c.sticky_limit}` : '') + (pos ? ' · ' + pos : '') }),
    table(['Target', 'Weight', 'Price in / out', 'Eligible connections', 'Why excluded now'], rows));
}

function targetRow(t, i, remove) {
  const f = (name, value, type = 'text', cls = '') =>
    h('input', { type, value: value ?? '', 'data-path': `targets[${i}].${name}`, 'data-field': name, class: cls, step: type === 'number' ? 'any' : null, placeholder: name });
  return h('div', { class: 'row target', 'data-row': i },
    f('model', t.model, 'text', 'wide'), f('connection', t.connection), f('weight', t.weight, 'number', 'num'),
    f('price_in', t.price_in, 'number', 'num'), f('price_out', t.price_out, 'number', 'num'),
    h('button', { type: 'button', class: 'icon', title: 'remove target', onclick: remove, text: '✕' }));
}

// errorPath maps a combos API error to the editor's field: param is
// "combos[N].targets[i].model" for a configuration error; a routing error
// (unknown provider or model) names "name.targets[i]" in its message.
function errorPath(err) {
  const p = (err.param || '').replace(/^combos\[\d+\]\./, '');
  if (p && p !== 'combo' && p !== 'body') return p;
  const m = /targets\[(\d+)\]/.exec(err.message || '');
  return m ? `targets[${m[1]}].model` : p;
}

// editor is the create/edit form of one combo.
function editor(el, raw, done) {
  const combo = raw || { name: '', strategy: 'priority', sticky_limit: 0, targets: [{ model: '' }] };
  let targets = combo.targets.map((t) => ({ ...t }));
  const name = h('input', { id: 'combo-name', value: combo.name, 'data-path': 'name', disabled: !!raw, required: true });
  const strategy = h('select', { id: 'combo-strategy', 'data-path': 'strategy' }, STRATEGIES.map((s) => h('option', { value: s, text: s })));
  strategy.value = STRATEGIES.includes(combo.strategy) ? combo.strategy : 'priority';
  const sticky = h('input', { id: 'combo-sticky', type: 'number', min: 0, step: 1, value: combo.sticky_limit || 0, 'data-path': 'sticky_limit', class: 'num' });
  const rowsEl = h('div', { class: 'targets' });
  const read = () => [...rowsEl.querySelectorAll('.target')].map((row) => {
    const t = {};
    for (const inp of row.querySelectorAll('input')) {
      const v = inp.value.trim();
      if (v === '') continue;
      t[inp.dataset.field] = inp.type === 'number' ? Number(v) : v;
    }
    return t;
  });
  const drawRows = () => replace(rowsEl, targets.map((t, i) => targetRow(t, i, () => {
    targets = read();
    targets.splice(i, 1);
    drawRows();
  })));
  drawRows();
  const form = h('form', { class: 'editor', id: 'combo-editor' },
    h('div', { class: 'field' }, h('label', { for: 'combo-name', text: 'Name' }), name),
    h('div', { class: 'field' }, h('label', { for: 'combo-strategy', text: 'Strategy' }), strategy),
    h('div', { class: 'field' }, h('label', { for: 'combo-sticky', text: 'Sticky limit' }), sticky),
    h('div', { class: 'field' }, h('label', { text: 'Targets: model (provider/model or combo), connection, weight, price in, price out' }), rowsEl,
      h('button', { type: 'button', text: '+ target', onclick: () => { targets = read(); targets.push({ model: '' }); drawRows(); } })),
    h('div', { class: 'toolbar' }, h('button', { type: 'submit', id: 'combo-save', class: 'primary', text: raw ? 'Save combo' : 'Create combo' }),
      h('button', { type: 'button', text: 'Cancel', onclick: () => done(false) })));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = { ...combo, name: name.value.trim(), strategy: strategy.value, sticky_limit: Number(sticky.value) || 0, targets: read() };
    delete body.source;
    if (!body.name) return fieldError(form, 'name', 'name: is required');
    const r = await api('PUT', '/api/combos/' + encodeURIComponent(body.name), body);
    if (!r.ok) return fieldError(form, errorPath(r.error), r.error.message);
    toast(`combo ${body.name} saved`, 'ok');
    done(true);
  });
  replace(el, card(raw ? `Edit combo ${combo.name}` : 'New combo', raw && raw.source === 'config'
    ? h('p', { class: 'hint', text: 'This combo comes from the configuration file: saving defines an API combo of the same name that replaces it until deleted.' }) : null, form));
  name.disabled ? strategy.focus() : name.focus();
}

export default {
  title: 'Combos',
  mount(root) {
    const editEl = h('div', { id: 'combo-edit' });
    const listEl = h('div', { id: 'combo-list' });
    let rawByName = new Map();
    let busy = false;
    let last = 0;
    const load = async () => {
      if (busy) return;
      busy = true;
      const [view, raw] = await Promise.all([api('GET', '/api/console/combos'), api('GET', '/api/combos')]);
      busy = false;
      last = Date.now();
      if (!view.ok || !raw.ok) return replace(listEl, h('p', { class: 'field-error', text: (view.error || raw.error).message }));
      rawByName = new Map(raw.data.combos.map((c) => [c.name, c]));
      replace(listEl, view.data.combos.length ? view.data.combos.map((c) => comboCard(c, rawByName.get(c.name), openEditor, load)) : card(null, h('p', { class: 'muted', text: 'No combo yet.' })));
    };
    const openEditor = (raw) => editor(editEl, raw, (saved) => {
      replace(editEl);
      if (saved) load();
    });
    replace(root, h('div', { class: 'title-row' }, h('h2', { text: 'Combos' }), button('New combo', async () => openEditor(null), { id: 'new-combo', class: 'primary' })), editEl, listEl);
    load();
    // Exclusions change with the live state: refresh at most every 2 s.
    const off = on('state', () => {
      if (Date.now() - last > 2000) load();
    });
    return off;
  },
};
