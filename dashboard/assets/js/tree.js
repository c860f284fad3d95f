// The fork tree of a session: the root ancestor and every fork under it,
// each linked, the current session marked.

import { api } from './api.js';
import { ago, clear, fmtInt, h, route } from './dom.js';
import { nameEl } from './names.js';

export function forkTree(id) {
  const box = h('div', { class: 'fork-tree', role: 'region', 'aria-label': 'Fork tree' }, h('p', { class: 'loading', text: 'Loading the fork tree…' }));
  api(`/v1/sessions/${encodeURIComponent(id)}/tree`).then((t) => {
    const node = (n) => {
      const s = n.session;
      const cur = s.id === id;
      return h('li', null,
        h('div', { class: ['fork-node', cur ? 'current' : ''] },
          nameEl('a', s, { href: route(['s', s.id]), 'aria-current': cur ? 'page' : undefined }),
          s.parent_session_id ? forkedAt(s) : h('span', { class: 'muted small', text: ' root' }),
          h('span', { class: 'muted small', text: ` · ${fmtInt(s.last_sequence)} steps · ${ago(s.updated_at)}` })),
        n.forks?.length ? h('ul', null, n.forks.map(node)) : null);
    };
    clear(box, h('ul', { class: 'tree' }, node(t)));
  }).catch((e) => clear(box, h('p', { class: 'error', text: 'Could not load the fork tree: ' + e.message })));
  return box;
}

// forkedAt says where a fork branches off: at its fork sequence, or, for a
// fork whose first own step is an edited copy of the parent's next step,
// at that step (it shares the steps before it).
function forkedAt(s) {
  const el = h('span', { class: 'muted small fork-at', text: ` forked at #${s.fork_sequence}` });
  const next = s.fork_sequence + 1;
  if (s.last_sequence >= next) {
    api(`/v1/sessions/${encodeURIComponent(s.id)}/steps/${next}`).then((st) => {
      if (st?.metadata?.edited_from) el.textContent = ` edited at #${next}`;
    }).catch(() => {});
  }
  return el;
}
