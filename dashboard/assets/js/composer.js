// Carrying a session on: a message box that sends the next user turn (a
// new run in the same session), and "Run from here" on a session whose
// last step is a message waiting for the model (an edited fork). The run
// streams into the timeline through the session's event stream.

import { api } from './api.js';
import { h, toast } from './dom.js';

const enc = encodeURIComponent;
const ACTIVE = new Set(['queued', 'running', 'waiting']);
let agentNames = null; // registered agents, read once

// composer returns {el, update}; ctx has sessionID and getters session and
// run (the latest top-level run), and onStarted.
export function composer(ctx) {
  const text = h('textarea', { id: 'next-turn', rows: 2, placeholder: 'Send the next message in this session…', 'aria-label': 'Next message' });
  const send = h('button', { type: 'submit', class: 'primary', 'data-action': 'send-turn', text: 'Send' });
  const fromHere = h('button', { type: 'button', 'data-action': 'run-from-here', text: 'Run from here', hidden: true,
    title: 'Run the agent on this session as it stands (after the edited message)' });
  const note = h('p', { class: 'muted small composer-note', role: 'status' });
  // Debug: the run pauses before every step (breakpoints, docs/breakpoints.md);
  // each pause shows above with Continue / Step / Edit state.
  const debug = h('input', { id: 'debug-run', type: 'checkbox', 'data-action': 'debug-run' });
  const debugLabel = h('label', { class: 'check small', for: 'debug-run', title: 'Pause the run before each step, to step through it' }, debug, ' Debug: pause before each step');
  const form = h('form', { class: 'composer', 'aria-label': 'Continue the session', hidden: true }, text, h('div', { class: 'composer-actions' }, send, fromHere, debugLabel), note);
  let lastChecked = -1, endsWithMessage = false, busy = false;

  const start = async (body) => {
    const s = ctx.session;
    busy = true; update();
    try {
      const bp = debug.checked ? { breakpoints: { before: ['*'] } } : {};
      await api('/v1/runs', { method: 'POST', body: { agent: s.agent, session_id: ctx.sessionID, ...body, ...bp } });
      text.value = '';
      endsWithMessage = false;
      toast('Run started.');
      ctx.onStarted?.();
    } catch (e) {
      note.textContent = e.message;
    } finally { busy = false; update(); }
  };
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const v = text.value.trim();
    if (!v) { note.textContent = 'Write a message first.'; text.focus(); return; }
    start({ input: v });
  });
  text.addEventListener('keydown', (ev) => { if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); form.requestSubmit(); } });
  fromHere.addEventListener('click', () => start({ continue: true }));

  const update = async () => {
    const s = ctx.session;
    if (!s || !s.agent) { form.hidden = true; return; }
    if (!agentNames) {
      agentNames = api('/v1/agents').then((r) => new Set(r.agents.map((a) => a.name)), () => null);
    }
    const names = await agentNames;
    if (!names) { agentNames = null; return; }
    form.hidden = false;
    const registered = names.has(s.agent);
    const active = ctx.run && ACTIVE.has(ctx.run.status);
    // Does the session end with a message the model has not answered?
    // Updates overlap (each awaits the API): only the one that asked about
    // the latest step may set the answer, never an older one resolving late.
    if (s.last_sequence !== lastChecked && s.last_sequence > 0) {
      const seq = s.last_sequence;
      lastChecked = seq;
      let ends = false;
      try {
        const last = await api(`/v1/sessions/${enc(ctx.sessionID)}/steps/${seq}`);
        ends = last.kind === 'user' || !!last.metadata?.edited_from;
      } catch { ends = false; }
      if (lastChecked !== seq) return;
      endsWithMessage = ends;
    }
    const blocked = !registered || active || busy;
    text.disabled = send.disabled = fromHere.disabled = blocked;
    fromHere.hidden = !endsWithMessage;
    if (!registered) note.textContent = `The agent ${s.agent} is not registered on this server, so the session cannot go on here.`;
    else if (active) note.textContent = 'A run is in progress; send the next message when it ends.';
    else if (!busy && (note.textContent.startsWith('The agent') || note.textContent.startsWith('A run'))) note.textContent = '';
  };
  return { el: form, update };
}
