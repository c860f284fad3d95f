// The inbox: every pending input request and approval, answerable here.

import { api } from './api.js';
import { clear, downState, h } from './dom.js';
import { inputCard } from './actions.js';

export function inboxView(main) {
  const list = h('div', { class: 'inbox' }, h('p', { class: 'loading', text: 'Loading…' }));
  clear(main, h('div', { class: 'page-head' }, h('h1', { text: 'Inbox' }), h('p', { class: 'muted', text: 'Runs waiting for a person: answer a question or approve a tool call, and the run resumes.' })), list);
  const load = async () => {
    try {
      const r = await api('/v1/inputs');
      clear(list, r.inputs.length ? r.inputs.map((p) => inputCard(p, { onDone: load, showSession: true })) : h('p', { class: 'empty muted', text: 'Nothing is waiting for you.' }));
    } catch (e) {
      clear(list, downState(e, load, 'the pending inputs'));
    }
  };
  load();
  window.addEventListener('stepwise:inputs-changed', load);
  // Requests answered, cancelled or expired elsewhere leave the page soon:
  // re-read now and then (keeping what is being typed: only when no form
  // has focus).
  const timer = setInterval(() => { if (!document.hidden && !list.contains(document.activeElement)) load(); }, 4000);
  return () => { clearInterval(timer); window.removeEventListener('stepwise:inputs-changed', load); };
}
