// Agents: the registered agents, and an agent's overview — runs by status,
// tokens, cost, latency percentiles per step kind, error rate, repeated-step
// ratio — with links to its merged workflow graph and its sessions.

import { api } from './api.js';
import { ago, badge, clear, downState, fmtBytes, fmtCost, fmtCPU, fmtInt, fmtMS, fmtPct, fmtTokens, h, inlineCode, route } from './dom.js';
import { nameEl } from './names.js';
import { chartsSection } from './charts.js';

const enc = encodeURIComponent;

export function agentsView(main) {
  const list = h('div', { class: 'cards' }, h('p', { class: 'loading', text: 'Loading…' }));
  clear(main, h('div', { class: 'page-head' }, h('h1', { text: 'Agents' })), list);
  api('/v1/agents').then((r) => {
    if (!r.agents.length) { clear(list, h('p', { class: 'empty muted', text: 'No agents are registered on this server.' })); return; }
    clear(list, r.agents.map((a) => h('a', { class: 'card agent-card', href: route(['a', a.name]) },
      h('div', { class: 'card-head' }, h('strong', { text: a.name }), a.model ? h('code', { class: 'muted small', text: a.model }) : null),
      a.description ? inlineCode(a.description, 'p') : null,
      h('p', { class: 'muted small', text: [`${a.tools.length} tool${a.tools.length === 1 ? '' : 's'}`, a.sub_agents?.length ? `${a.sub_agents.length} sub-agents` : '', a.steps?.length ? `${a.steps.length} custom steps` : '', a.approvals ? 'approvals' : ''].filter(Boolean).join(' · ') }))));
  }).catch((e) => clear(list, downState(e, () => agentsView(main), 'the agents')));
  return null;
}

const RUN_ORDER = ['running', 'waiting', 'queued', 'completed', 'failed', 'cancelled'];

export function agentView(main, { name }) {
  const body = h('div', { class: 'overview' }, h('p', { class: 'loading', text: 'Computing the overview…' }));
  const recent = h('div');
  clear(main, h('div', { class: 'page-head' }, h('div', { class: 'crumbs' }, h('a', { href: '#/agents', text: 'Agents' }), ' / '), h('h1', { text: name }),
    h('div', { class: 'toolbar' }, h('a', { class: 'button', href: route(['a', name, 'graph']), text: 'Workflow graph' }), h('a', { class: 'button', href: route(['sessions'], { agent: name }), text: 'All sessions' }))),
  body, chartsSection(name), recent);
  api(`/v1/agents/${enc(name)}/overview`).then((o) => {
    const total = o.runs_total || 0;
    const kpi = (label, value, hint) => h('div', { class: 'kpi' }, h('div', { class: 'kpi-v', text: value }), h('div', { class: 'kpi-l', text: label }), hint ? h('div', { class: 'muted small', text: hint }) : null);
    clear(body,
      h('div', { class: 'kpis' },
        kpi('runs', fmtInt(total), `${o.sessions} sessions covered${o.truncated ? ' (newest)' : ''}`),
        kpi('steps', fmtInt(o.steps)),
        kpi('tokens', fmtTokens(o.input_tokens + o.output_tokens), `${fmtTokens(o.input_tokens)} in · ${fmtTokens(o.output_tokens)} out`),
        kpi('cost', fmtCost(o.cost)),
        kpi('error rate', fmtPct(o.error_rate), `${fmtInt(o.error_steps)} error steps · ${fmtPct(o.failed_run_rate)} of finished runs failed`),
        kpi('repeated-step ratio', o.repeated_step_ratio.toFixed(2), `share of steps that revisit a state · ${o.graph_nodes} states · ${o.loops} loops${o.stuck_nodes ? ` · ${o.stuck_nodes} stuck` : ''}`)),
      h('section', { class: 'card' }, h('h2', { text: 'Runs by status' }),
        total ? h('div', { class: 'bar', role: 'img', 'aria-label': RUN_ORDER.filter((s) => o.runs[s]).map((s) => `${o.runs[s]} ${s}`).join(', ') },
          RUN_ORDER.filter((s) => o.runs[s]).map((s) => h('span', { class: 'seg status-' + s, style: { flexGrow: String(o.runs[s]) }, title: `${o.runs[s]} ${s}` }))) : null,
        h('ul', { class: 'inline-legend' }, RUN_ORDER.filter((s) => o.runs[s]).map((s) => h('li', null, badge(s), ' ', fmtInt(o.runs[s]))))),
      h('section', { class: 'card' }, h('h2', { text: 'Latency per step kind' }),
        o.latency.length ? h('table', { class: 'grid compact' },
          h('thead', null, h('tr', null, ['Kind', 'Steps', 'Mean', 'p50', 'p90', 'p99', 'Max'].map((t, i) => h('th', { scope: 'col', class: i ? 'num' : '', text: t })))),
          h('tbody', null, o.latency.map((l) => h('tr', null, h('td', null, badge(l.kind, 'kind')), h('td', { class: 'num', text: fmtInt(l.count) }),
            [l.mean_ms, l.p50_ms, l.p90_ms, l.p99_ms, l.max_ms].map((v) => h('td', { class: 'num', text: fmtMS(v) })))))) : h('p', { class: 'muted', text: 'No steps yet.' })),
      h('section', { class: 'card', 'data-card': 'resources' }, h('h2', { text: 'Resource use per step kind' }),
        (o.resources || []).length ? h('table', { class: 'grid compact' },
          h('thead', null, h('tr', null, ['Kind', 'Steps', 'CPU', 'CPU / step', 'Allocated', 'Objects', 'Overlapped'].map((t, i) => h('th', { scope: 'col', class: i ? 'num' : '', text: t })))),
          h('tbody', null, o.resources.map((r) => h('tr', null, h('td', null, badge(r.kind, 'kind')), h('td', { class: 'num', text: fmtInt(r.steps) }),
            h('td', { class: 'num', text: fmtCPU(r.cpu_ms) }), h('td', { class: 'num', text: fmtCPU(r.mean_cpu_ms) }),
            h('td', { class: 'num', text: fmtBytes(r.alloc_bytes) }), h('td', { class: 'num', text: fmtInt(r.alloc_objects) }),
            h('td', { class: 'num', text: fmtInt(r.overlapped), title: 'steps that ran beside others: their figures are shared upper bounds' }))))) :
          h('p', { class: 'muted', text: 'No step recorded its resource use (stepwise serve --no-step-resources turns it off).' }),
        h('p', { class: 'muted small', text: 'The process\'s CPU time and heap allocation while each step ran: exact for a step that ran alone, shared with the steps beside it otherwise.' })));
  }).catch((e) => clear(body, e.status === 404 ? h('p', { class: 'error', text: 'No such agent: ' + e.message }) : downState(e, () => agentView(main, { name }), 'the overview')));
  api(`/v1/dashboard/sessions?agent=${enc(name)}&limit=10`).then((r) => {
    if (!r.sessions.length) return;
    clear(recent, h('section', { class: 'card' }, h('h2', { text: 'Recent sessions' }), h('ul', { class: 'recent' }, r.sessions.map((s) => h('li', null,
      badge(s.status), ' ', nameEl('a', s, { href: route(['s', s.id]) }),
      h('span', { class: 'muted small', text: ` · ${fmtInt(s.last_sequence)} steps · ${fmtCost(s.cost)} · ${ago(s.updated_at)}` }))))));
  }).catch(() => {});
  return null;
}
