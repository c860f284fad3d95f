import { h, codeSpans } from './dom.js';

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
