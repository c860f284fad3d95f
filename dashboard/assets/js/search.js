// Search over the content of steps across sessions (GET /v1/dashboard/steps):
// text, filters by kind, status, error class, tool, model, metadata, time
// range and cost, sorted by the server; and "similar steps" from the
// embedding search (GET /v1/search).

import { api, APIError } from './api.js';
import { badge, clear, codeSpans, debounce, downState, fmtCost, fmtInt, fmtMS, fmtTime, fmtTokens, h, route } from './dom.js';
import { summaryOf, durationMS } from './timeline.js';

const FIELDS = ['q', 'kind', 'status', 'error_class', 'tool', 'model', 'meta', 'from', 'to', 'min_cost', 'max_cost', 'sort', 'dir', 'agent'];
const SORTS = [['time', 'Time'], ['cost', 'Cost'], ['duration', 'Duration'], ['tokens', 'Tokens']];

export function searchView(main, query) {
  const state = Object.fromEntries(FIELDS.map((k) => [k, query[k] || '']));
  let offset = 0, hits = [], total = 0, ctl = null, pending = false;
  const input = (k, attrs) => {
    const el = h('input', { id: 'sf-' + k, value: state[k], ...attrs });
    el.addEventListener('input', debounce(() => { state[k] = el.value.trim(); go(); }, 300));
    return h('label', { class: 'sf' }, h('span', { text: attrs['data-label'] }), el);
  };
  const select = (k, label, opts) => {
    const el = h('select', { id: 'sf-' + k }, opts.map(([v, t]) => h('option', { value: v, text: t, selected: v === state[k] })));
    el.addEventListener('change', () => { state[k] = el.value; go(); });
    return h('label', { class: 'sf' }, h('span', { text: label }), el);
  };
  const q = h('input', { type: 'search', id: 'step-q', 'data-search': true, value: state.q, placeholder: 'Search step content across sessions  ( / )', 'aria-label': 'Search step content' });
  q.addEventListener('input', debounce(() => { state.q = q.value.trim(); go(); }, 300));
  const similar = h('button', { type: 'button', 'data-action': 'similar', text: 'Similar steps', title: 'Steps similar in meaning (embedding search)', onclick: () => findSimilar() });
  const agentSel = h('select', { id: 'sf-agent' }, h('option', { value: '', text: 'any' }), state.agent ? h('option', { value: state.agent, text: state.agent, selected: true }) : null);
  agentSel.addEventListener('change', () => { state.agent = agentSel.value; go(); });
  api('/v1/agents').then((r) => { for (const a of r.agents) if (a.name !== state.agent) agentSel.appendChild(h('option', { value: a.name, text: a.name })); }).catch(() => {});
  const filters = h('div', { class: 'search-filters' },
    h('label', { class: 'sf' }, h('span', { text: 'Agent' }), agentSel),
    select('kind', 'Kind', [['', 'any'], ...['user', 'llm', 'tool', 'agent', 'input', 'decision', 'error', 'system'].map((k) => [k, k])]),
    select('status', 'Status', [['', 'any'], ...['completed', 'failed', 'waiting', 'expired', 'cancelled'].map((k) => [k, k])]),
    select('error_class', 'Error class', [['', 'any'], ['transient', 'transient'], ['permanent', 'permanent']]),
    input('tool', { type: 'text', 'data-label': 'Tool', placeholder: 'name' }),
    input('model', { type: 'text', 'data-label': 'Model', placeholder: 'contains' }),
    input('meta', { type: 'text', 'data-label': 'Metadata', placeholder: 'key=value' }),
    input('from', { type: 'datetime-local', 'data-label': 'From' }),
    input('to', { type: 'datetime-local', 'data-label': 'To' }),
    input('min_cost', { type: 'number', min: '0', step: 'any', 'data-label': 'Min cost $' }),
    select('sort', 'Sort by', SORTS), select('dir', 'Order', [['desc', 'highest / newest first'], ['asc', 'lowest / oldest first']]));
  const info = h('p', { class: 'muted small', role: 'status', 'aria-live': 'polite' });
  const tbody = h('tbody');
  const more = h('button', { type: 'button', class: 'more', text: 'Load more', hidden: true, onclick: () => load(false) });
  const simBox = h('div', { class: 'similar' });
  clear(main, h('div', { class: 'page-head' }, h('h1', { text: 'Search steps' }), h('div', { class: 'toolbar', role: 'search' }, q, similar), filters),
    simBox, info,
    h('div', { class: 'table-wrap' }, h('table', { class: 'grid steps-found', 'aria-label': 'Steps found' },
      h('thead', null, h('tr', null, ['When', 'Session', '#', 'Kind', 'Step', 'Status', 'Time', 'Tokens', 'Cost'].map((t, i) => h('th', { scope: 'col', class: i >= 6 ? 'num' : '', text: t })))), tbody)),
    h('div', { class: 'foot' }, more));

  const params = () => {
    const p = new URLSearchParams({ limit: '50', offset: String(offset) });
    for (const k of FIELDS) {
      let v = state[k];
      if (!v) continue;
      if (k === 'from' || k === 'to') v = new Date(v).toISOString().replace(/\.\d{3}Z$/, 'Z');
      p.set(k, v);
    }
    return p;
  };
  const go = () => {
    history.replaceState(null, '', route(['search'], Object.fromEntries(FIELDS.map((k) => [k, state[k]]))));
    load(true);
  };
  const row = (x) => {
    const s = x.step, m = s.metrics || {};
    const href = route(['s', x.session_id, String(s.sequence)]);
    return h('tr', { dataset: { step: s.id }, onclick: (ev) => { if (!(ev.target instanceof HTMLAnchorElement)) location.hash = href; } },
      h('td', { class: 'small', text: fmtTime(s.created_at) }),
      h('td', { class: 'title' }, h('a', { href: route(['s', x.session_id]), class: 'trunc', dataset: { full: x.session_title || x.agent || '' } }, codeSpans(x.session_title || (x.agent ? x.agent + ' session' : 'session')))),
      h('td', null, h('a', { href, text: '#' + s.sequence })),
      h('td', null, badge(s.kind, 'kind')),
      h('td', { class: 'title' }, h('span', { class: 'trunc', dataset: { full: s.content || summaryOf(s) } }, codeSpans(summaryOf(s)))),
      h('td', null, s.status === 'completed' ? '' : badge(s.status)),
      h('td', { class: 'num', text: durationMS(s) !== null ? fmtMS(durationMS(s)) : '' }),
      h('td', { class: 'num', text: m.input_tokens || m.output_tokens ? fmtTokens((m.input_tokens || 0) + (m.output_tokens || 0)) : '' }),
      h('td', { class: 'num', text: m.cost ? fmtCost(m.cost) : '' }));
  };
  // load asks for a page: the first one (reset) or the next. The shown
  // rows change only when the answer comes; "Load more" waits while a new
  // search is on its way (it would page the old one).
  const load = async (reset) => {
    if (!reset && pending) return;
    ctl?.abort();
    ctl = new AbortController();
    pending = reset || pending;
    more.disabled = pending;
    offset = pending ? 0 : hits.length;
    try {
      const r = await api('/v1/dashboard/steps?' + params(), { signal: ctl.signal });
      hits = pending ? r.steps : hits.concat(r.steps);
      pending = false;
      more.disabled = false;
      total = r.total;
      clear(tbody, hits.map(row));
      if (!hits.length) tbody.appendChild(h('tr', null, h('td', { colspan: 9, class: 'empty', text: 'No step matches.' })));
      info.textContent = `${fmtInt(total)} step${total === 1 ? '' : 's'} match · ${fmtInt(r.scanned_steps)} steps in ${fmtInt(r.scanned_sessions)} sessions searched` + (r.truncated ? ' (the newest; narrow by agent or time to go further back)' : '');
      more.hidden = hits.length >= total;
    } catch (e) {
      if (e.name === 'AbortError') return;
      clear(tbody, h('tr', null, h('td', { colspan: 9 }, e.status === 400 ? h('p', { class: 'error', text: e.message }) : downState(e, () => load(true), 'the steps'))));
    }
  };
  const findSimilar = async () => {
    if (!state.q) { clear(simBox, h('p', { class: 'muted small', text: 'Type what to look for first.' })); return; }
    clear(simBox, h('p', { class: 'loading small', text: 'Looking for similar steps…' }));
    try {
      const r = await api('/v1/search?' + new URLSearchParams({ q: state.q, k: '10', ...(state.kind ? { kind: state.kind } : {}) }));
      clear(simBox, h('section', { class: 'card' }, h('h2', { text: `Similar steps (${r.steps.length})` }),
        h('ol', { class: 'similar-list' }, r.steps.map((x) => h('li', null, h('a', { href: route(['s', x.step.session_id, String(x.step.sequence)]), text: '#' + x.step.sequence }), ' ', badge(x.step.kind, 'kind'), ' ',
          h('span', null, codeSpans(summaryOf(x.step))), h('span', { class: 'muted small', text: ` · similarity ${x.score.toFixed(2)}` }))))));
    } catch (e) {
      clear(simBox, h('p', { class: e instanceof APIError && e.status === 404 ? 'muted' : 'error', text: e instanceof APIError && e.status === 404 ? 'No step embeddings on this server yet: similar steps need the recall worker.' : 'Similar steps failed: ' + e.message }));
    }
  };
  load(true);
  return () => ctl?.abort();
}
