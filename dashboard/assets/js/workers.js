// Workers: the worker processes this server has seen since it started
// (GET /v1/workers, docs/workers.md) and what each did through it, with a
// link to the steps each served (a search by metadata.worker). Refreshed
// every five seconds while open.

import { api } from './api.js';
import { ago, clear, downState, fmtInt, fmtMS, h, route } from './dom.js';

const COLS = [['Worker', ''], ['Agents', ''], ['Last seen', ''], ['Polling', 'num'], ['Holding', 'num'], ['Claimed', 'num'],
  ['Completed', 'num'], ['Failed', 'num'], ['Parked', 'num'], ['Released', 'num'], ['Lease lost', 'num'], ['Task p50', 'num'], ['Task p95', 'num']];

export function workersView(main) {
  const body = h('div', { class: 'card' }, h('p', { class: 'loading', text: 'Loading…' }));
  const since = h('p', { class: 'muted small' });
  clear(main, h('div', { class: 'page-head' }, h('h1', { text: 'Workers' })), since, body);
  let stopped = false;
  const load = () => api('/v1/workers').then((r) => {
    if (stopped) return;
    since.textContent = `Counted by this server process since it started, ${ago(r.since)}. With several servers on one database, each counts the calls it served.`;
    if (!r.workers.length) {
      clear(body, h('p', { class: 'empty muted', text: 'No worker has called this server since it started.' }));
      return;
    }
    const timed = (ms, n) => (n ? fmtMS(ms) : '—');
    clear(body, h('table', { class: 'grid compact', 'data-table': 'workers' },
      h('thead', null, h('tr', null, COLS.map(([t, c]) => h('th', { scope: 'col', class: c, text: t })))),
      h('tbody', null, r.workers.map((w) => h('tr', { 'data-worker': w.id },
        h('td', null, h('a', { href: route(['search'], { meta: 'worker=' + w.id }), title: 'The steps this worker served' }, h('code', { class: 'worker', text: w.id }))),
        h('td', { text: w.agents.join(', ') }),
        h('td', { text: ago(w.last_seen), title: w.last_seen }),
        [w.polling, w.holding, w.claimed, w.completed, w.failed, w.parked, w.released, w.lease_lost].map((v) => h('td', { class: 'num', text: fmtInt(v) })),
        h('td', { class: 'num', text: timed(w.task_p50_ms, w.task_samples), title: `over its last ${w.task_samples} tasks` }),
        h('td', { class: 'num', text: timed(w.task_p95_ms, w.task_samples) }))))));
  }).catch((e) => {
    if (stopped) return;
    if (e.status === 404 && e.code === 'route_not_found') {
      clear(body, h('p', { class: 'empty muted', text: 'This server serves no workers (stepwise serve does).' }));
      return;
    }
    clear(body, downState(e, load, 'the workers'));
  });
  load();
  const timer = setInterval(load, 5000);
  return () => { stopped = true; clearInterval(timer); };
}
