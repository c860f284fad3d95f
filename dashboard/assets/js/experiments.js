// Experiments: the experiments run over datasets (GET /v1/experiments) and
// the comparison of two of them over the same dataset
// (GET /v1/experiments/compare?a=&b=): aggregate metrics with their
// winner, then each dataset item's result in both.

import { api } from './api.js';
import { sessionLink } from './names.js';
import { ago, badge, clear, clip, inlineCode, fmtCost, fmtInt, fmtMS, h, route, shortID } from './dom.js';

const enc = encodeURIComponent;

// unavailable says why the experiment endpoints cannot be used.
function unavailable(e) {
  if (e.code === 'route_not_found' || e.status === 405) return 'This server has no experiment endpoints.';
  if (e.code === 'not_implemented') return 'This server\'s store keeps no experiments.';
  return 'Could not load experiments: ' + e.message;
}

// label names an experiment in a picker.
const label = (x) => `${x.name} · ${x.agent} · ${x.status}`;

// picker is a select of experiments, grouped by dataset.
function picker(id, xs, datasets, selected) {
  const byDataset = new Map();
  for (const x of xs) {
    if (!byDataset.has(x.dataset_id)) byDataset.set(x.dataset_id, []);
    byDataset.get(x.dataset_id).push(x);
  }
  return h('select', { id, name: id, required: true },
    h('option', { value: '', text: '— pick —' }),
    [...byDataset].map(([ds, list]) => h('optgroup', { label: 'Dataset ' + (datasets.get(ds) || shortID(ds)) },
      list.map((x) => h('option', { value: x.id, selected: x.id === selected || x.name === selected, text: label(x) })))));
}

// experimentsView: #/experiments (the list and the pickers) and
// #/experiments/compare?a=&b= (the comparison under them).
export function experimentsView(main, { compare = false, query = {} } = {}) {
  const form = h('div');
  const list = h('div', null, h('p', { class: 'loading', text: 'Loading…' }));
  const result = h('div', { id: 'compare-result' });
  clear(main, h('div', { class: 'page-head' }, compare ? h('div', { class: 'crumbs' }, h('a', { href: '#/experiments', text: 'Experiments' }), ' / ') : null,
    h('h1', { text: compare ? 'Compare experiments' : 'Experiments' })), form, result, list);
  let alive = true;
  Promise.all([api('/v1/experiments?limit=500'), api('/v1/datasets?limit=1000').catch(() => ({ datasets: [] }))]).then(([r, d]) => {
    if (!alive) return;
    const xs = r.experiments || [];
    const datasets = new Map((d.datasets || []).map((x) => [x.id, x.name]));
    if (!xs.length) { clear(list, inlineCode('No experiments yet. Run one with `eval.RunExperiment` or `stepwise eval run`.', 'p', { class: 'empty muted' })); return; }
    const a = picker('cmp-a', xs, datasets, query.a), b = picker('cmp-b', xs, datasets, query.b);
    const err = h('p', { class: 'error', hidden: true });
    clear(form, h('form', { class: 'card toolbar', id: 'compare-form', onsubmit: (ev) => {
      ev.preventDefault();
      if (!a.value || !b.value) { err.hidden = false; err.textContent = 'Pick experiments A and B.'; return; }
      location.hash = route(['experiments', 'compare'], { a: a.value, b: b.value });
    } }, h('label', { for: 'cmp-a', text: 'A ' }), a, h('label', { for: 'cmp-b', text: ' B ' }), b,
    h('button', { type: 'submit', class: 'primary', text: 'Compare' }), err));
    clear(list, h('section', { class: 'card' }, h('h2', { text: 'All experiments' }), h('div', { class: 'table-wrap' }, h('table', { class: 'grid compact', id: 'experiments' },
      h('thead', null, h('tr', null, ['Name', 'Agent', 'Dataset', 'Status', 'Items', 'Completed', 'Created', ''].map((t) => h('th', { scope: 'col', text: t })))),
      h('tbody', null, xs.map((x) => {
        const s = x.summary || {};
        return h('tr', { dataset: { id: x.id } }, h('td', { text: x.name, title: x.id }), h('td', { text: x.agent }),
          h('td', { text: datasets.get(x.dataset_id) || shortID(x.dataset_id) }), h('td', null, badge(x.status)),
          h('td', { class: 'num', text: fmtInt(s.items) }), h('td', { class: 'num', text: fmtInt(s.completed) }),
          h('td', { text: ago(x.created_at) }),
          h('td', null, h('button', { type: 'button', text: 'Use as A', onclick: () => { a.value = x.id; } }), ' ',
            h('button', { type: 'button', text: 'Use as B', onclick: () => { b.value = x.id; } })));
      }))))));
  }).catch((e) => { if (alive) clear(list, h('p', { class: 'error', text: unavailable(e) })); });
  if (compare) loadComparison(result, query.a, query.b, () => alive);
  return () => { alive = false; };
}

// metricText formats a metric value by its name.
function metricText(name, v) {
  if (v === null || v === undefined) return '—';
  if (name === 'cost_usd') return fmtCost(v);
  if (name === 'tokens') return fmtInt(v);
  if (name === 'mean_duration_s') return fmtMS(v * 1000);
  if (name === 'success_rate') return (v * 100).toFixed(0) + '%';
  return v.toFixed(2);
}

function deltaText(m) {
  if (m.a === null || m.b === null || m.a === undefined || m.b === undefined) return '';
  const d = m.delta || 0;
  return (d > 0 ? '+' : d < 0 ? '−' : '±') + metricText(m.name, Math.abs(d));
}

// cell shows one experiment's result of an item.
function cell(it) {
  if (!it) return h('td', { class: 'muted', text: 'not run' });
  const scores = Object.entries(it.scores || {}).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(' · ');
  return h('td', null, badge(it.status), ' ', h('span', { text: clip(it.output || it.error || '', 160) }),
    scores ? h('div', { class: 'muted small', text: scores }) : null,
    it.session_id ? h('div', { class: 'small' }, sessionLink(it.session_id)) : null);
}

async function loadComparison(el, a, b, alive) {
  if (!a || !b) { clear(el, h('p', { class: 'muted', text: 'Pick experiments A and B.' })); return; }
  clear(el, h('p', { class: 'loading', text: 'Comparing…' }));
  let c;
  try {
    c = await api(`/v1/experiments/compare?a=${enc(a)}&b=${enc(b)}`);
  } catch (e) {
    if (alive()) clear(el, h('p', { class: 'error', text: e.status === 404 && e.code === 'not_found' ? 'No such experiment: ' + e.message : e.status === 422 ? e.message : unavailable(e) }));
    return;
  }
  if (!alive()) return;
  const side = (x) => h('span', null, h('strong', { text: x.name }), h('span', { class: 'muted small', text: ` ${x.agent} · ${x.status}` }));
  clear(el,
    h('p', { class: 'meta' }, 'A ', side(c.a), ' vs B ', side(c.b), h('span', { class: 'muted', text: ` · dataset ${c.dataset?.name || ''} (${fmtInt(c.dataset?.item_count)} items)` })),
    h('section', { class: 'card' }, h('h2', { text: 'Metrics' }), h('table', { class: 'grid compact', id: 'compare-metrics' },
      h('thead', null, h('tr', null, ['Metric', 'A', 'B', 'Δ (B − A)', 'Better'].map((t, i) => h('th', { scope: 'col', class: i && i < 4 ? 'num' : '', text: t })))),
      h('tbody', null, (c.metrics || []).map((m) => h('tr', { dataset: { metric: m.name, winner: m.winner || '' } },
        h('td', { text: m.name }), h('td', { class: 'num', text: metricText(m.name, m.a) }), h('td', { class: 'num', text: metricText(m.name, m.b) }),
        h('td', { class: 'num', text: deltaText(m) }),
        h('td', { text: m.winner ? m.winner.toUpperCase() + (m.higher_is_better ? ' (higher)' : ' (lower)') : '' })))))),
    h('section', { class: 'card' }, h('h2', { text: `Items (${(c.items || []).length})` }), h('div', { class: 'table-wrap' }, h('table', { class: 'grid compact', id: 'compare-items' },
      h('thead', null, h('tr', null, ['#', 'Input', 'Expected', 'A', 'B', 'Changed'].map((t) => h('th', { scope: 'col', text: t })))),
      h('tbody', null, (c.items || []).map((it) => h('tr', { dataset: { index: String(it.index), changed: (it.changed || []).join(',') } },
        h('td', { class: 'num', text: String(it.index) }), h('td', { text: clip(it.input || '', 200) }), h('td', { text: clip(it.expected || '', 120) }),
        cell(it.a), cell(it.b), h('td', { text: (it.changed || []).join(', ') }))))))));
}
