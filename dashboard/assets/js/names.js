import { api } from './api.js';
import { clear, codeSpans, h, route, toast } from './dom.js';

// Session names: a session's title (the server names forks, retries and
// replays by what they are, e.g. "retry of X from #14"), else a
// description from its agent and time; never a raw id.

// sessionName is the display name of a session (or session row).
export function sessionName(s) {
  if (!s) return '';
  if (s.title) return s.title;
  const when = s.created_at ? new Date(s.created_at).toLocaleString() : '';
  if (s.parent_session_id) return `fork at #${s.fork_sequence}` + (when ? ' · ' + when : '');
  return (s.agent ? s.agent + ' session' : 'Session') + (when ? ' · ' + when : '');
}

// nameEl renders a session's name in an element, with `code` spans as code.
export function nameEl(tag, s, attrs) {
  return h(tag, attrs, codeSpans(sessionName(s)));
}

// sessions caches GET /v1/sessions/{id} for the names of sessions a page
// links to.
const sessions = new Map();

// sessionOf returns the session (a promise, cached; null when it cannot be
// read).
export function sessionOf(id) {
  if (!sessions.has(id)) sessions.set(id, api(`/v1/sessions/${encodeURIComponent(id)}`).catch(() => { sessions.delete(id); return null; }));
  return sessions.get(id);
}

// sessionLink is a link to a session named by its title or agent (filled in
// once read), the id on hover, with a button that copies the id.
export function sessionLink(id, { href = route(['s', id]), prefix = '', cls = '' } = {}) {
  const a = h('a', { href, class: cls, title: id, dataset: { id }, text: prefix + 'session' });
  sessionOf(id).then((s) => { if (s) clear(a, prefix, codeSpans(sessionName(s))); });
  return h('span', { class: 'named-id' }, a, copyID(id, 'session id'));
}

// copyID is a small button that copies an id; its title shows the id.
export function copyID(id, what = 'id') {
  return h('button', { type: 'button', class: 'copy-id', 'data-action': 'copy-id', title: `Copy the ${what}: ${id}`, 'aria-label': `Copy the ${what}`, text: '⧉',
    onclick: (ev) => { ev.preventDefault(); ev.stopPropagation(); navigator.clipboard?.writeText(id).then(() => toast('Copied ' + what + '.'), () => toast('Copy failed', 'error')); } });
}

let agents = null; // names of the agents this server runs (a promise)

// agentNames returns the set of agents this server runs (null when it
// cannot be read; asked again next time).
export function agentNames() {
  if (!agents) agents = api('/v1/agents').then((r) => new Set(r.agents.map((a) => a.name)), () => { agents = null; return null; });
  return agents;
}

// needsAgent disables buttons whose action runs the session's agent when
// this server does not run it, saying why in their title and in note.
export async function needsAgent(agent, buttons, note) {
  if (!agent) return;
  const names = await agentNames();
  if (!names || names.has(agent)) return;
  for (const b of buttons) {
    b.disabled = true;
    b.title = `The agent ${agent} does not run on this server, so it cannot run again here.`;
  }
  if (note) {
    note.hidden = false;
    note.textContent = `The agent ${agent} does not run on this server: ${buttons.map((b) => b.textContent).join(' and ')} need it. Forking, comparing and copying work.`;
  }
}
