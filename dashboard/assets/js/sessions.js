// The sessions list: search, filter by agent and status, sort, cursor
// pagination; status, steps, tokens, cost, duration and last activity.

import { api } from './api.js';
import { ago, badge, clear, debounce, downState, fmtCost, fmtInt, fmtMS, fmtTime, fmtTokens, h, inlineCode, route } from './dom.js';
import { nameEl, sessionName } from './names.js';

const STATUSES = ['running', 'waiting', 'queued', 'completed', 'failed', 'cancelled', 'idle'];

const COLUMNS = [
  { key: 'status', label: 'Status', get: (r) => r.status },
  { key: 'title', label: 'Session', get: (r) => sessionName(r).toLowerCase() },
  { key: 'agent', label: 'Agent', get: (r) => r.agent || '' },
  { key: 'steps', label: 'Steps', num: true, get: (r) => r.last_sequence },
  { key: 'tokens', label: 'Tokens', num: true, get: (r) => r.input_tokens + r.output_tokens },
  { key: 'cost', label: 'Cost', num: true, get: (r) => r.cost },
  { key: 'duration', label: 'Duration', num: true, get: (r) => r.duration_ms },
  { key: 'activity', label: 'Last activity', num: true, get: (r) => r.updated_at },
];

export function sessionsView(main, query) {
  const state = { q: query.q || '', agent: query.agent || '', status: query.status || '', sort: query.sort || 'activity', dir: query.dir || 'desc' };
  let rows = [], next = '', loading = false, selected = -1, ctl = null, failure = null;
  const picked = []; // up to two session ids to compare
  const compareBtn = h('button', { type: 'button', 'data-action': 'compare-picked', disabled: true, text: 'Compare 2 selected',
    onclick: () => { location.hash = route(['compare'], { a: picked[0], b: picked[1] }); } });
  const pick = (id, on) => {
    const i = picked.indexOf(id);
    if (on && i < 0) picked.push(id); else if (!on && i >= 0) picked.splice(i, 1);
    while (picked.length > 2) picked.shift();
    for (const cb of tbody.querySelectorAll('input.pick')) cb.checked = picked.includes(cb.value);
    compareBtn.disabled = picked.length !== 2;
  };

  const search = h('input', { type: 'search', id: 'q', 'data-search': true, placeholder: 'Search id, title or agent  ( / )', value: state.q, 'aria-label': 'Search sessions' });
  const agentSel = h('select', { id: 'agent-filter', 'aria-label': 'Filter by agent' }, h('option', { value: '', text: 'All agents' }));
  const statusSel = h('select', { id: 'status-filter', 'aria-label': 'Filter by status' }, h('option', { value: '', text: 'Any status' }),
    STATUSES.map((s) => h('option', { value: s, text: s, selected: s === state.status })));
  const tbody = h('tbody');
  const headRow = h('tr');
  const more = h('button', { type: 'button', class: 'more', text: 'Load more', hidden: true, onclick: () => load(false) });
  const info = h('p', { class: 'muted', role: 'status', 'aria-live': 'polite' });
  const table = h('table', { class: 'grid sessions', 'aria-label': 'Sessions' }, h('thead', null, headRow), tbody);

  clear(main,
    h('div', { class: 'page-head' }, h('h1', { text: 'Sessions' }),
      h('div', { class: 'toolbar', role: 'search' }, search, agentSel, statusSel, compareBtn)),
    h('div', { class: 'table-wrap' }, table), h('div', { class: 'foot' }, info, more));

  api('/v1/agents').then((r) => {
    for (const a of r.agents) agentSel.appendChild(h('option', { value: a.name, text: a.name, selected: a.name === state.agent }));
    if (state.agent && !r.agents.some((a) => a.name === state.agent)) agentSel.appendChild(h('option', { value: state.agent, text: state.agent, selected: true }));
  }).catch(() => {});

  const sync = () => {
    const hash = route(['sessions'], { q: state.q, agent: state.agent, status: state.status, sort: state.sort === 'activity' ? '' : state.sort, dir: state.dir === 'desc' ? '' : state.dir });
    history.replaceState(null, '', hash === '#/sessions' ? '#/' : hash);
  };

  const renderHead = () => {
    clear(headRow, COLUMNS.map((c) => {
      const active = state.sort === c.key;
      return h('th', { scope: 'col', class: c.num ? 'num' : '', 'aria-sort': active ? (state.dir === 'asc' ? 'ascending' : 'descending') : 'none' },
        h('button', { type: 'button', class: 'sort', onclick: () => { state.dir = active && state.dir === 'desc' ? 'asc' : 'desc'; state.sort = c.key; sync(); renderHead(); renderRows(); } },
          c.label, active ? (state.dir === 'asc' ? ' ▲' : ' ▼') : ''));
    }));
  };

  const sorted = () => {
    const col = COLUMNS.find((c) => c.key === state.sort) || COLUMNS[7];
    const m = state.dir === 'asc' ? 1 : -1;
    return [...rows].sort((a, b) => { const x = col.get(a), y = col.get(b); return x < y ? -m : x > y ? m : 0; });
  };

  const renderRows = () => {
    const list = sorted();
    clear(tbody, list.map((r, i) => {
      const href = route(['s', r.id]);
      return h('tr', { class: i === selected ? 'sel' : '', dataset: { id: r.id }, onclick: (ev) => { if (!(ev.target instanceof HTMLAnchorElement)) location.hash = href; } },
        h('td', null, h('input', { type: 'checkbox', class: 'pick', value: r.id, checked: picked.includes(r.id), 'aria-label': 'Select to compare', onclick: (ev) => ev.stopPropagation(), onchange: (ev) => pick(r.id, ev.target.checked) }), ' ', badge(r.status)),
        h('td', { class: 'title' }, nameEl('a', r, { href, class: 'trunc', dataset: { full: sessionName(r) } }),
          r.parent_session_id ? h('span', { class: 'muted small', text: ' fork @' + r.fork_sequence }) : null),
        h('td', { text: r.agent || '—' }),
        h('td', { class: 'num', text: fmtInt(r.last_sequence) }),
        h('td', { class: 'num', text: fmtTokens(r.input_tokens + r.output_tokens) }),
        h('td', { class: 'num', text: fmtCost(r.cost) }),
        h('td', { class: 'num', text: fmtMS(r.duration_ms) }),
        h('td', { class: 'num', title: fmtTime(r.updated_at), text: ago(r.updated_at) }));
    }));
    if (failure) {
      tbody.appendChild(h('tr', null, h('td', { colspan: COLUMNS.length }, downState(failure, () => load(true), 'the sessions'))));
    } else if (!list.length && !loading) {
      const filtered = state.q || state.agent || state.status;
      tbody.appendChild(h('tr', null, h('td', { colspan: COLUMNS.length, class: 'empty' }, filtered ? 'No sessions match these filters.'
        : h('div', { class: 'first-run' }, h('h2', { text: 'No sessions yet' }),
          inlineCode('Run `stepwise demo` to record a few example sessions, or start a run of one of your agents (`stepwise run --agent NAME --input "message"`). They appear here as they happen.', 'p')))));
    }
    info.textContent = rows.length ? `${fmtInt(rows.length)} session${rows.length === 1 ? '' : 's'}${next ? ' loaded' : ''}` : '';
    more.hidden = !next;
  };

  const load = async (reset) => {
    if (reset) { rows = []; next = ''; selected = -1; }
    ctl?.abort();
    ctl = new AbortController();
    loading = true;
    const q = new URLSearchParams({ limit: '50' });
    for (const k of ['q', 'agent', 'status']) if (state[k]) q.set(k, state[k]);
    if (!reset && next) q.set('cursor', next);
    try {
      const r = await api('/v1/dashboard/sessions?' + q, { signal: ctl.signal });
      rows = rows.concat(r.sessions);
      next = r.next_cursor || '';
      failure = null;
    } catch (e) {
      if (e.name !== 'AbortError') failure = e;
    } finally {
      loading = false;
      renderRows();
    }
  };

  search.addEventListener('input', debounce(() => { state.q = search.value.trim(); sync(); load(true); }, 250));
  agentSel.addEventListener('change', () => { state.agent = agentSel.value; sync(); load(true); });
  statusSel.addEventListener('change', () => { state.status = statusSel.value; sync(); load(true); });

  const onKey = (ev) => {
    if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey || /^(INPUT|TEXTAREA|SELECT)$/.test(ev.target.tagName) || document.querySelector('dialog[open]')) return;
    const trs = tbody.querySelectorAll('tr[data-id]');
    if (!trs.length) return;
    if (ev.key === 'j' || ev.key === 'k') {
      selected = Math.max(0, Math.min(trs.length - 1, selected + (ev.key === 'j' ? 1 : -1)));
      trs.forEach((tr, i) => tr.classList.toggle('sel', i === selected));
      trs[selected].querySelector('a').focus();
      ev.preventDefault();
    } else if (ev.key === 'Enter' && selected >= 0 && document.activeElement === document.body) {
      location.hash = route(['s', trs[selected].dataset.id]);
    }
  };
  document.addEventListener('keydown', onKey);

  renderHead();
  load(true);
  const timer = setInterval(() => { if (!document.hidden && !next && !loading) load(true); }, 10000);
  return () => { ctl?.abort(); clearInterval(timer); document.removeEventListener('keydown', onKey); };
}
