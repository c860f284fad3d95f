// Compare two sessions side by side (a fork and its origin, two retries, a
// replay and its source): steps aligned by sequence from the shared start,
// the fork point and the first divergent step marked, per-side totals
// (steps, tokens, cost, time), replayed steps marked reused or live.

import { api } from './api.js';
import { badge, clear, codeSpans, downState, fmtCost, fmtInt, fmtMS, fmtTokens, h, route } from './dom.js';
import { nameEl, sessionName } from './names.js';
import { summaryOf } from './timeline.js';

const enc = encodeURIComponent;
const MAX = 2000; // steps per side shown

export function compareView(main, query) {
  const pick = (id, label, value) => {
    const sel = h('select', { id, 'aria-label': label }, h('option', { value: '', text: '— pick a session —' }));
    if (value) sel.appendChild(h('option', { value, text: value, selected: true }));
    return sel;
  };
  const selA = pick('cmp-a', 'Left session', query.a), selB = pick('cmp-b', 'Right session', query.b);
  const body = h('div', { class: 'compare' });
  const go = () => { location.hash = route(['compare'], { a: selA.value, b: selB.value }); };
  selA.addEventListener('change', go); selB.addEventListener('change', go);
  clear(main, h('div', { class: 'page-head' }, h('div', { class: 'crumbs' }, h('a', { href: '#/', text: 'Sessions' }), ' / '), h('h1', { text: 'Compare sessions' }),
    h('div', { class: 'toolbar' }, selA, h('span', { class: 'muted', text: 'vs' }), selB)), body);
  let alive = true;
  api('/v1/dashboard/sessions?limit=100').then((r) => {
    for (const s of r.sessions) for (const sel of [selA, selB]) {
      const o = [...sel.options].find((x) => x.value === s.id);
      const label = sessionName(s).replace(/`/g, ''); // an option holds text only
      if (o) o.textContent = label; else sel.appendChild(h('option', { value: s.id, text: label }));
    }
  }).catch(() => {});
  const load = async () => {
    if (!query.a || !query.b) { clear(body, h('p', { class: 'muted empty', text: 'Pick two sessions. A fork, retry or replay opens here from its session page (Compare).' })); return; }
    clear(body, h('p', { class: 'loading', text: 'Loading both sessions…' }));
    try {
      const [a, b] = await Promise.all([side(query.a), side(query.b)]);
      if (alive) render(body, a, b);
    } catch (e) {
      if (alive) clear(body, e.status === 404 ? h('p', { class: 'error', text: e.message }) : downState(e, load, 'the sessions'));
    }
  };
  load();
  return () => { alive = false; };
}

async function side(id) {
  const s = await api(`/v1/sessions/${enc(id)}`);
  const r = s.last_sequence ? await api(`/v1/sessions/${enc(id)}/steps?start_seq=1&end_seq=${Math.min(MAX, s.last_sequence)}`) : { steps: [] };
  return { s, steps: r.steps };
}

// forkPoint is the last sequence both sides share by construction.
function forkPoint(a, b) {
  if (b.s.parent_session_id === a.s.id) return b.s.fork_sequence;
  if (a.s.parent_session_id === b.s.id) return a.s.fork_sequence;
  if (a.s.parent_session_id && a.s.parent_session_id === b.s.parent_session_id) return Math.min(a.s.fork_sequence, b.s.fork_sequence);
  const ed = (x, y) => String(x.s.metadata?.forked_from || '') === y.s.id ? (x.s.metadata.edited_sequence || 1) - 1 : -1;
  const e = Math.max(ed(a, b), ed(b, a));
  return e >= 0 ? e : 0;
}

// same says whether two steps say the same thing.
function same(x, y) {
  if (!x || !y) return false;
  if (x.id === y.id) return true;
  return x.kind === y.kind && (x.content || '') === (y.content || '') && (x.tool_name || '') === (y.tool_name || '') &&
    JSON.stringify(x.tool_calls?.map((c) => [c.name, c.arguments]) || []) === JSON.stringify(y.tool_calls?.map((c) => [c.name, c.arguments]) || []);
}

function totals(x, fork) {
  let tok = 0, cost = 0, us = 0;
  for (const st of x.steps) {
    const m = st.metrics || {};
    tok += (m.input_tokens || 0) + (m.output_tokens || 0); cost += m.cost || 0; us += m.duration_us || 0;
  }
  return h('div', { class: 'cmp-totals', dataset: { steps: String(x.s.last_sequence) } },
    nameEl('a', x.s, { href: route(['s', x.s.id]), class: 'cmp-name' }),
    h('div', { class: 'small' }, `${fmtInt(x.s.last_sequence)} steps` + (fork ? ` (${fmtInt(Math.min(fork, x.s.last_sequence))} shared)` : '') +
      ` · ${fmtTokens(tok)} tokens · ${fmtCost(cost)} · ${fmtMS(us / 1000)} step time`, h('span', { class: 'muted', text: ' (all steps shown, shared ones included)' })));
}

function render(body, a, b) {
  const fork = forkPoint(a, b);
  const n = Math.max(a.steps.length, b.steps.length);
  const byA = new Map(a.steps.map((s) => [s.sequence, s])), byB = new Map(b.steps.map((s) => [s.sequence, s]));
  let diverged = 0;
  for (let q = 1; q <= n; q++) if (!same(byA.get(q), byB.get(q))) { diverged = q; break; }
  const cell = (st, other, side) => {
    if (!st) return h('td', { class: 'cmp-cell none', text: '—' });
    const cls = ['cmp-cell', 'rk-' + st.kind, other && st.id === other.id ? 'shared' : ''];
    // Two different steps at one position: mark the words each side has
    // and the other has not.
    const differs = other && !same(st, other) && summaryOf(st) !== summaryOf(other);
    return h('td', { class: cls },
      h('span', { class: 'kind k-' + st.kind, text: st.kind }), ' ',
      st.replay ? [badge(st.replay === 'reused' ? 'reused' : 'live', 'replay'), ' '] : null,
      h('span', { class: 'trunc cmp-sum', dataset: { full: summaryOf(st) } }, differs ? wordDiff(summaryOf(st), summaryOf(other), side) : codeSpans(summaryOf(st))),
      st.status !== 'completed' ? [' ', badge(st.status)] : null);
  };
  const rows = [];
  for (let q = 1; q <= n; q++) {
    const x = byA.get(q), y = byB.get(q);
    const cls = [q === diverged ? 'diverged' : '', q <= fork ? 'before-fork' : '', q === fork ? 'fork-row' : ''];
    rows.push(h('tr', { class: cls, dataset: { seq: String(q) } },
      h('th', { scope: 'row', class: 'num' }, h('a', { href: route(['s', (x || y).session_id || a.s.id, String(q)]), text: '#' + q })),
      cell(x, y, 'left'), cell(y, x, 'right'),
      h('td', { class: 'cmp-mark small' }, q === diverged ? h('strong', { class: 'error', text: 'first divergence' }) : q === fork ? h('span', { class: 'muted', text: 'fork point' }) : x && y && x.id === y.id ? h('span', { class: 'muted', text: 'shared' }) : '')));
  }
  clear(body,
    h('div', { class: 'cmp-head' }, totals(a, fork), totals(b, fork)),
    h('p', { class: 'small', role: 'status' }, diverged ? `The sessions diverge at step #${diverged}` : 'The sessions do not diverge in the steps shown', fork ? ` · fork point #${fork}` : ''),
    h('div', { class: 'table-wrap' }, h('table', { class: 'grid compact cmp-table', 'aria-label': 'Steps side by side' },
      h('thead', null, h('tr', null, h('th', { scope: 'col', class: 'num', text: '#' }), h('th', { scope: 'col', text: 'Left' }), h('th', { scope: 'col', text: 'Right' }), h('th', { scope: 'col', text: '' }))),
      h('tbody', null, rows))));
  body.querySelector('tr.diverged')?.scrollIntoView({ block: 'center' });
}

// maxDiffWords bounds the words compared (the diff is quadratic).
const maxDiffWords = 400;

// wordDiff renders text with the words that are not in other (by a longest
// common subsequence of words) marked: removed on the left, added on the
// right.
export function wordDiff(text, other, side) {
  const split = (t) => t.replace(/`/g, '').split(/(\s+)/).filter((w) => w !== '');
  const a = split(text), b = split(other);
  if (a.length > maxDiffWords || b.length > maxDiffWords) return a.join('');
  // lcs[i][j]: the common subsequence length of a[i:] and b[j:].
  const lcs = Array.from({ length: a.length + 1 }, () => new Int32Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i--) for (let j = b.length - 1; j >= 0; j--) lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  const out = [];
  let run = '', marked = false;
  const push = (w, mark) => {
    if (mark !== marked && run) { out.push(marked ? h('mark', { class: 'cmp-' + (side === 'left' ? 'del' : 'ins'), text: run }) : run); run = ''; }
    marked = mark; run += w;
  };
  for (let i = 0, j = 0; i < a.length;) {
    if (j < b.length && a[i] === b[j]) { push(a[i], false); i++; j++; }
    else if (j < b.length && lcs[i][j + 1] >= lcs[i + 1][j]) j++;
    else { push(a[i], !/^\s+$/.test(a[i])); i++; }
  }
  push('', !marked);
  return out;
}
