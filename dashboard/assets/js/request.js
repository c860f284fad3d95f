// What the model received: the exact request of an llm step — system
// prompt, messages as a chat (roles, tool calls, tool results), tools
// offered and parameters. From the step's recorded provider_request event
// when the server kept one, else rebuilt from the session up to the step
// (GET /v1/sessions/{id}/context?at=SEQ). Long messages fold; the raw JSON
// is one click away.

import { api, optional } from './api.js';
import { clear, fmtInt, h, jsonView, richText } from './dom.js';

const enc = encodeURIComponent;
const FOLD = 600; // characters shown before a message folds

// requestSection returns a section that loads the request of llm step s of
// session sessionID.
export function requestSection(sessionID, s) {
  const body = h('div', { class: 'req-body' }, h('p', { class: 'loading small', text: 'Loading the request…' }));
  const sec = h('section', { class: 'd-sec model-request', 'data-request': 'loading' }, h('h3', { text: 'What the model received' }), body);
  load(sessionID, s).then(({ req, source }) => {
    sec.dataset.request = source;
    clear(body, render(req, source, s));
  }).catch((e) => { sec.dataset.request = 'error'; clear(body, h('p', { class: 'error', text: 'Could not load the request: ' + e.message })); });
  return sec;
}

async function load(sessionID, s) {
  try {
    const r = await optional(`/v1/steps/${enc(s.id)}/events?type=provider_request`);
    const evs = (r?.events || []).filter((e) => e.payload && typeof e.payload === 'object' && Array.isArray(e.payload.messages));
    if (evs.length) return { req: evs[evs.length - 1].payload, source: 'recorded' };
  } catch { /* fall back to rebuilding */ }
  const ctxSession = s.session_id || sessionID;
  const req = await api(`/v1/sessions/${enc(ctxSession)}/context?at=${s.sequence}`);
  return { req, source: 'rebuilt' };
}

function render(req, source, s) {
  const raw = h('div', { class: 'req-raw', hidden: true }, jsonView(req));
  const chat = h('div', { class: 'req-view' });
  const toggle = h('button', { type: 'button', 'data-action': 'raw-request', 'aria-pressed': 'false', text: 'Raw JSON',
    onclick: () => { const on = raw.hidden; raw.hidden = !on; chat.hidden = on; toggle.setAttribute('aria-pressed', String(on)); toggle.textContent = on ? 'Chat view' : 'Raw JSON'; } });
  const m = s.metrics || {};
  const params = [['model', req.model || m.model], ['provider', m.provider], ['temperature', req.temperature], ['max tokens', req.max_tokens],
    ['messages', fmtInt(req.messages?.length || 0)], ['tools', fmtInt(req.tools?.length || 0)]].filter(([, v]) => v !== undefined && v !== null && v !== '');
  clear(chat,
    h('dl', { class: 'kv req-params' }, params.map(([k, v]) => [h('dt', { text: k }), h('dd', { text: String(v) })])),
    req.system ? message('system', req.system) : h('p', { class: 'muted small', text: source === 'rebuilt' && !req.tools?.length ? 'No system prompt (or this server does not run the agent).' : 'No system prompt.' }),
    (req.messages || []).map((msg) => message(msg.role, msg.content, msg)),
    req.tools?.length ? h('details', { class: 'req-tools' }, h('summary', { text: `Tools offered (${req.tools.length}): ` + req.tools.map((t) => t.name).join(', ') }),
      req.tools.map((t) => h('div', { class: 'req-tool' }, h('code', { class: 'tool', text: t.name }), t.description ? h('p', { class: 'small', text: t.description }) : null, jsonView(t.parameters ?? {})))) : null);
  return [h('div', { class: 'req-bar' },
    h('span', { class: 'muted small', text: source === 'recorded' ? 'Recorded request sent to the provider.' : `Rebuilt from the session: the messages before step ${s.sequence}.` }), toggle),
  chat, raw];
}

// message renders one chat message; long text folds.
function message(role, content, msg = {}) {
  const text = String(content ?? '');
  const box = h('div', { class: ['msg', 'msg-' + role], dataset: { role } },
    h('div', { class: 'msg-role' }, role, msg.tool_name ? [' · ', h('code', { text: msg.tool_name })] : null, msg.tool_call_id ? h('span', { class: 'muted small', text: ' ' + msg.tool_call_id }) : null));
  if (text) {
    if (text.length > FOLD) {
      const short = h('div', { class: 'msg-text' }, richText(text.slice(0, FOLD) + '…'));
      const full = h('div', { class: 'msg-text', hidden: true }, richText(text));
      const btn = h('button', { type: 'button', class: 'link', 'data-action': 'unfold', 'aria-expanded': 'false', text: `Show all ${fmtInt(text.length)} characters`,
        onclick: () => { const open = full.hidden; full.hidden = !open; short.hidden = open; btn.setAttribute('aria-expanded', String(open)); btn.textContent = open ? 'Fold' : `Show all ${fmtInt(text.length)} characters`; } });
      box.append(short, full, btn);
    } else box.appendChild(h('div', { class: 'msg-text' }, richText(text)));
  }
  if (msg.reasoning) box.appendChild(h('details', null, h('summary', { class: 'small', text: 'Reasoning' }), richText(msg.reasoning)));
  for (const c of msg.tool_calls || []) {
    box.appendChild(h('div', { class: 'call' }, h('span', { class: 'muted small', text: 'calls ' }), h('code', { class: 'tool', text: c.name }), h('span', { class: 'muted small', text: ' ' + (c.id || '') }), jsonView(c.arguments ?? null)));
  }
  return box;
}
