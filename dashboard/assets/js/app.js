// The dashboard's shell: hash routing, theme, keyboard shortcuts and the
// inbox counter. Each view is a function (main, params) that renders into
// main and returns a cleanup function.

import { api, forgetToken, hasToken } from './api.js';
import { clear, h, installTips } from './dom.js';
import { compareView } from './compare.js';
import { searchView } from './search.js';
import { sessionsView } from './sessions.js';
import { sessionView } from './session.js';
import { graphView } from './graph.js';
import { agentsView, agentView } from './agents.js';
import { inboxView } from './inbox.js';
import { experimentsView } from './experiments.js';
import { workersView } from './workers.js';

const main = document.getElementById('main');
let cleanup = null;

// parse splits "#/a/b?x=1" into segments and query.
function parse() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [p, q] = raw.split('?');
  const segs = p ? p.split('/').map((s) => { try { return decodeURIComponent(s); } catch { return s; } }) : [];
  return { segs, query: Object.fromEntries(new URLSearchParams(q || '')) };
}

function resolve({ segs, query }) {
  const [a, b, c] = segs;
  if (!a || a === 'sessions') return ['sessions', () => sessionsView(main, query)];
  if (a === 's' && b && c === 'graph') return ['sessions', () => graphView(main, { session: b, query })];
  if (a === 's' && b) return ['sessions', () => sessionView(main, { id: b, seq: c ? parseInt(c, 10) : 0, tab: query.tab || 'timeline' })];
  if (a === 'agents') return ['agents', () => agentsView(main)];
  if (a === 'a' && b && c === 'graph') return ['agents', () => graphView(main, { agent: b, query })];
  if (a === 'a' && b) return ['agents', () => agentView(main, { name: b })];
  if (a === 'inputs') return ['inputs', () => inboxView(main)];
  if (a === 'search') return ['search', () => searchView(main, query)];
  if (a === 'compare') return ['sessions', () => compareView(main, query)];
  if (a === 'workers') return ['workers', () => workersView(main)];
  if (a === 'experiments') return ['experiments', () => experimentsView(main, { compare: b === 'compare', query })];
  return ['', () => { clear(main, h('div', { class: 'empty' }, h('h1', { text: 'Not found' }), h('p', null, h('a', { href: '#/', text: 'Back to sessions' })))); return null; }];
}

let lastPath = null;

function render() {
  const r = parse();
  const path = r.segs.join('/') + '?' + new URLSearchParams(r.query).toString();
  if (path === lastPath) return;
  // A session view handles its own step selection (…/s/ID/SEQ) in place.
  if (lastPath && cleanup?.navigate && cleanup.navigate(r)) { lastPath = path; return; }
  lastPath = path;
  if (cleanup) { try { (cleanup.close || cleanup)(); } catch { /* ignore */ } }
  cleanup = null;
  const [nav, view] = resolve(r);
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === nav) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  clear(main);
  try {
    cleanup = view() || null;
  } catch (e) {
    clear(main, h('p', { class: 'error', text: 'This view failed: ' + e.message }));
  }
}

window.addEventListener('hashchange', render);

// Theme: system, light or dark, remembered.
const THEMES = ['system', 'light', 'dark'];
function applyTheme(t) {
  if (t === 'system') delete document.documentElement.dataset.theme; else document.documentElement.dataset.theme = t;
  const btn = document.getElementById('theme-btn');
  btn.setAttribute('aria-label', 'Theme: ' + t + ' (change)');
  btn.title = 'Theme: ' + t;
  btn.textContent = t === 'light' ? '☀' : t === 'dark' ? '☾' : '◐';
}
let theme = localStorage.getItem('stepwise-theme') || 'system';
if (!THEMES.includes(theme)) theme = 'system';
applyTheme(theme);
document.getElementById('theme-btn').addEventListener('click', () => {
  theme = THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length];
  localStorage.setItem('stepwise-theme', theme);
  applyTheme(theme);
});

const logout = document.getElementById('logout-btn');
logout.hidden = !hasToken();
logout.addEventListener('click', () => { forgetToken(); logout.hidden = true; location.reload(); });
document.getElementById('help-btn').addEventListener('click', () => document.getElementById('help').showModal());

// Global keys: "/" search, "?" help. Views add their own (j/k…).
document.addEventListener('keydown', (ev) => {
  if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const t = ev.target;
  if (t instanceof HTMLElement && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
  if (document.querySelector('dialog[open]')) return;
  if (ev.key === '/') {
    const s = main.querySelector('[data-search]');
    if (s) { ev.preventDefault(); s.focus(); s.select?.(); }
  } else if (ev.key === '?') {
    ev.preventDefault();
    document.getElementById('help').showModal();
  }
});

// The inbox counter: pending input requests anywhere.
async function refreshInbox() {
  try {
    const r = await api('/v1/inputs');
    const n = r.inputs.length;
    const el = document.getElementById('inbox-count');
    el.hidden = n === 0;
    el.textContent = String(n);
    el.setAttribute('aria-label', n + ' pending');
  } catch { /* shown by the views */ }
}
window.addEventListener('stepwise:inputs-changed', refreshInbox);
setInterval(() => { if (!document.hidden) refreshInbox(); }, 15000);

installTips();
render();
refreshInbox();
