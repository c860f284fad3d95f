// The inbox: every pending input request and approval, answerable here.
// It follows the store live: a stream per waiting run (up to maxStreams)
// re-reads the list when one of them moves on (answered, cancelled,
// expired, finished), and the cards are kept by request id, so that a
// card being filled in stays as it is while the others come and go.

import { api, stream } from './api.js';
import { clear, debounce, downState, h } from './dom.js';
import { inputCard } from './actions.js';

// maxStreams bounds the run streams the inbox holds open: a browser keeps
// about six connections per server, and the page's own requests need some.
const maxStreams = 3;

export function inboxView(main) {
  const list = h('div', { class: 'inbox' }, h('p', { class: 'loading', text: 'Loading…' }));
  clear(main, h('div', { class: 'page-head' }, h('h1', { text: 'Inbox' }), h('p', { class: 'muted', text: 'Runs waiting for a person: answer a question or approve a tool call, and the run resumes.' })), list);
  const cards = new Map(); // request id → card element
  const streams = new Map(); // run id → stream
  let closed = false, loading = null, again = false;
  const render = (inputs) => {
    const want = new Set(inputs.map((p) => p.request_id));
    for (const [id, el] of cards) if (!want.has(id)) { el.remove(); cards.delete(id); }
    if (!inputs.length) { clear(list, h('p', { class: 'empty muted', text: 'Nothing is waiting for you.' })); return; }
    list.querySelector(':scope > p')?.remove();
    inputs.forEach((p, i) => {
      let el = cards.get(p.request_id);
      if (!el) { el = inputCard(p, { onDone: load, showSession: true }); el.dataset.request = p.request_id; cards.set(p.request_id, el); }
      if (list.children[i] !== el) list.insertBefore(el, list.children[i] || null);
    });
  };
  const follow = (inputs) => {
    const runs = [...new Set(inputs.map((p) => p.run_id))].slice(0, maxStreams);
    for (const [id, es] of streams) if (!runs.includes(id)) { es.close(); streams.delete(id); }
    for (const id of runs) {
      if (streams.has(id)) continue;
      const es = stream(`/v1/runs/${encodeURIComponent(id)}/events`, {
        onEvent: (type) => {
          if (type === 'run_finished') { es.close(); streams.delete(id); }
          if (type !== 'step_delta') soon();
        },
      });
      streams.set(id, es);
    }
  };
  // load re-reads the pending inputs, one read at a time.
  async function load() {
    if (closed) return;
    if (loading) { again = true; return loading; }
    loading = (async () => {
      try {
        const r = await api('/v1/inputs');
        if (closed) return;
        render(r.inputs);
        follow(r.inputs);
      } catch (e) {
        cards.clear();
        clear(list, downState(e, load, 'the pending inputs'));
      }
    })();
    await loading;
    loading = null;
    if (again) { again = false; load(); }
  }
  const soon = debounce(load, 30);
  load();
  window.addEventListener('stepwise:inputs-changed', load);
  // A safety net for runs beyond maxStreams and for a stream cut meanwhile.
  const timer = setInterval(() => { if (!document.hidden) load(); }, 4000);
  return () => {
    closed = true;
    clearInterval(timer);
    window.removeEventListener('stepwise:inputs-changed', load);
    for (const es of streams.values()) es.close();
  };
}
