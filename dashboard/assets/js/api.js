// The /v1 API: JSON calls with the bearer token, a login prompt on 401,
// and Server-Sent Event streams read with fetch (so they carry the token
// too) that resume from the last event id after a disconnect.

const base = document.querySelector('meta[name="stepwise-api"]')?.content || '';
const TOKEN = 'stepwise-token';

// APIError is a failed call; problem is the RFC 9457 body when there is one.
export class APIError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.code = problem?.code || '';
    this.problem = problem;
  }
}

export function hasToken() { return !!sessionStorage.getItem(TOKEN); }
export function forgetToken() { sessionStorage.removeItem(TOKEN); }

function headers(extra) {
  const hd = { Accept: 'application/json', ...extra };
  const t = sessionStorage.getItem(TOKEN);
  if (t) hd.Authorization = 'Bearer ' + t;
  return hd;
}

let loginPending = null;

// login asks for a token once, however many calls are waiting for it.
function login(message) {
  if (loginPending) return loginPending;
  const dlg = document.getElementById('login');
  const form = document.getElementById('login-form');
  const input = document.getElementById('login-token');
  const err = document.getElementById('login-error');
  err.hidden = !message;
  err.textContent = message || '';
  loginPending = new Promise((resolve) => {
    const done = (ev) => {
      ev.preventDefault();
      const v = input.value.trim();
      if (!v) return;
      sessionStorage.setItem(TOKEN, v);
      input.value = '';
      form.removeEventListener('submit', done);
      dlg.close();
      loginPending = null;
      document.getElementById('logout-btn').hidden = false;
      resolve();
    };
    form.addEventListener('submit', done);
    if (!dlg.open) dlg.showModal();
    input.focus();
  });
  return loginPending;
}

// api calls the API. State-changing calls send a JSON body and the
// X-Stepwise-CSRF header. A 401 asks for a token and retries.
export async function api(path, { method = 'GET', body, signal, raw = false } = {}) {
  for (let attempt = 0; ; attempt++) {
    const extra = {};
    if (method !== 'GET' && method !== 'HEAD') {
      extra['Content-Type'] = 'application/json';
      extra['X-Stepwise-CSRF'] = '1';
    }
    let res;
    try {
      res = await fetch(base + path, {
        method, headers: headers(extra), signal, credentials: 'same-origin', cache: 'no-store',
        body: body === undefined ? (method === 'POST' ? '{}' : undefined) : JSON.stringify(body),
      });
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      // A network failure: say so plainly (never "Failed to fetch").
      throw new APIError(0, { detail: 'The Stepwise server is not answering.', code: 'offline' });
    }
    if (res.status === 401 && attempt < 5) {
      if (hasToken()) forgetToken();
      await login(attempt ? 'That token was refused.' : '');
      continue;
    }
    if (raw && res.ok) return res;
    if (res.status === 204) return null;
    const ct = res.headers.get('Content-Type') || '';
    const data = ct.includes('json') ? await res.json().catch(() => null) : await res.text();
    if (!res.ok) throw new APIError(res.status, typeof data === 'object' ? data : { detail: String(data).slice(0, 300) });
    return data;
  }
}

// optional calls an endpoint that may not exist on this server: it
// resolves to undefined when the route is unknown (404 route_not_found or
// 405), so the caller hides the feature.
export async function optional(path, opts) {
  try {
    return await api(path, opts);
  } catch (e) {
    if (e instanceof APIError && ((e.status === 404 && e.code === 'route_not_found') || e.status === 405)) return undefined;
    throw e;
  }
}

// stream reads an SSE endpoint and calls onEvent(type, data, id) for each
// event (id is null for an event without one). After a disconnect it reconnects with Last-Event-ID = the last id
// received, so no event is lost or repeated. onState('live' | 'reconnecting'
// | 'closed') reports the connection. close() ends it.
export function stream(path, { onEvent, onState, lastId = '' }) {
  const ctl = new AbortController();
  let closed = false, retry = 1000;
  const run = async () => {
    while (!closed) {
      try {
        const hd = headers({ Accept: 'text/event-stream' });
        if (lastId) hd['Last-Event-ID'] = lastId;
        const res = await fetch(base + path, { headers: hd, signal: ctl.signal, cache: 'no-store' });
        if (res.status === 401) { forgetToken(); await login(''); continue; }
        if (!res.ok || !res.body) throw new APIError(res.status, await res.json().catch(() => null));
        onState?.('live');
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '', ev = { data: [], type: '', id: null };
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let nl;
          while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
            const line = buf.slice(0, nl);
            buf = buf.slice(buf[nl] === '\r' && buf[nl + 1] === '\n' ? nl + 2 : nl + 1);
            if (line === '') {
              if (ev.id !== null) lastId = ev.id;
              if (ev.data.length) {
                let data = ev.data.join('\n');
                try { data = JSON.parse(data); } catch { /* keep text */ }
                onEvent(ev.type || 'message', data, ev.id);
              }
              ev = { data: [], type: '', id: null };
              continue;
            }
            if (line.startsWith(':')) continue;
            const i = line.indexOf(':');
            const field = i < 0 ? line : line.slice(0, i);
            const val = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
            if (field === 'data') ev.data.push(val);
            else if (field === 'event') ev.type = val;
            else if (field === 'id' && !val.includes('\0')) ev.id = val;
            else if (field === 'retry' && /^\d+$/.test(val)) retry = Math.min(+val, 30000);
          }
        }
      } catch (e) {
        if (closed || e.name === 'AbortError') break;
        if (e instanceof APIError && e.status >= 400 && e.status < 500 && e.status !== 408 && e.status !== 429) {
          onState?.('closed', e);
          return;
        }
      }
      if (closed) break;
      onState?.('reconnecting');
      await new Promise((r) => setTimeout(r, retry));
    }
    onState?.('closed');
  };
  run();
  return { close() { closed = true; ctl.abort(); }, get lastId() { return lastId; } };
}
