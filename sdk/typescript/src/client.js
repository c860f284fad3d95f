// The client half: the /v1 API of `stepwise serve` (docs/http_api.md) on
// the built-in fetch. Records (runs, sessions, steps, events) are returned
// as the server sends them, in the wire format of docs/step_format.md.

import { StepwiseError, RunError, errorOf } from './errors.js';
import { readEvents } from './sse.js';

const sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        reject(signal.reason);
      },
      { once: true },
    );
  });

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

const seg = (s) => encodeURIComponent(String(s));

/** A client of one Stepwise server. */
export class Client {
  /**
   * @param {string | {baseUrl: string, token?: string, fetch?: typeof fetch}} opts
   */
  constructor(opts) {
    const o = typeof opts === 'string' ? { baseUrl: opts } : opts;
    if (!o?.baseUrl) throw new TypeError('stepwise: Client needs a baseUrl');
    this.baseUrl = o.baseUrl.replace(/\/+$/, '');
    this.token = o.token;
    this._fetch = o.fetch ?? globalThis.fetch;
  }

  _headers(extra) {
    const h = { ...extra };
    if (this.token) h.Authorization = `Bearer ${this.token}`;
    return h;
  }

  /**
   * One request; a non-2xx answer throws its StepwiseError.
   * @returns {Promise<Response>}
   */
  async _send(method, path, { body, headers, signal, ok = [] } = {}) {
    const init = { method, headers: this._headers(headers), signal };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers['Content-Type'] = 'application/json';
    }
    let res;
    try {
      res = await this._fetch(this.baseUrl + path, init);
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      throw new StepwiseError({ detail: `${method} ${path}: ${err.message}`, cause: err });
    }
    if (!res.ok && !ok.includes(res.status)) throw await errorOf(res);
    return res;
  }

  async _json(method, path, opts) {
    const res = await this._send(method, path, opts);
    if (res.status === 204) return undefined;
    return res.json();
  }

  // --- agents ---

  /** @returns {Promise<object[]>} the agents the server runs */
  async listAgents(opts = {}) {
    return (await this._json('GET', '/v1/agents', opts)).agents;
  }

  getAgent(name, opts = {}) {
    return this._json('GET', `/v1/agents/${seg(name)}`, opts);
  }

  health(opts = {}) {
    return this._json('GET', '/v1/health', opts);
  }

  // --- runs ---

  /**
   * Starts a run of an agent; it executes on the server in the background.
   * @returns {Promise<{run: object, invocation: {run_id: string, session_id: string, cursor: string}}>}
   */
  startRun({ agent, input, sessionId, state, title, continue: cont, metadata, breakpoints, signal } = {}) {
    return this._json('POST', '/v1/runs', {
      signal,
      body: { agent, input, session_id: sessionId, state, title, continue: cont || undefined, metadata, breakpoints },
    });
  }

  getRun(id, opts = {}) {
    return this._json('GET', `/v1/runs/${seg(id)}`, opts);
  }

  cancelRun(id, reason, opts = {}) {
    return this._json('POST', `/v1/runs/${seg(id)}/cancel`, { ...opts, body: reason ? { reason } : {} });
  }

  /** Pending input requests, of one run or of every run. */
  async listInputs(runId, opts = {}) {
    const path = runId ? `/v1/runs/${seg(runId)}/inputs` : '/v1/inputs';
    return (await this._json('GET', path, opts)).inputs;
  }

  /**
   * Answers an input request (an approval: {approved: true|false, message?}).
   * @returns {Promise<object>} the answered input step
   */
  async answer(runId, requestId, answer, opts = {}) {
    const r = await this._json('POST', `/v1/runs/${seg(runId)}/inputs/${seg(requestId)}`, {
      ...opts,
      body: { answer },
    });
    return r.step;
  }

  /**
   * Answers the breakpoint the run is paused at (docs/breakpoints.md): it
   * runs on to its next breakpoint, or with `step` runs the next step and
   * pauses again before the one after it; `state`, an object, is merged
   * into the run's state first (RFC 7386). Throws StepwiseError
   * not_at_breakpoint (status 409) when the run has no pending pause.
   * @param {string} runId
   * @param {{step?: boolean, state?: object, signal?: AbortSignal}} [opts]
   * @returns {Promise<object>} the answered input step
   */
  async continueRun(runId, { step = false, state, signal } = {}) {
    if (state !== undefined && (state === null || typeof state !== 'object' || Array.isArray(state))) {
      throw new TypeError(`stepwise: continueRun state must be an object, not ${Array.isArray(state) ? 'an array' : state === null ? 'null' : typeof state}`);
    }
    const pause = (await this.listInputs(runId, { signal })).find((p) => p.request?.breakpoint);
    if (!pause) {
      throw new StepwiseError({
        status: 409,
        code: 'not_at_breakpoint',
        title: 'Not paused at a breakpoint',
        detail: `run ${runId} is not paused at a breakpoint`,
      });
    }
    const answer = { action: step ? 'step' : 'continue' };
    if (state !== undefined) answer.state = state;
    return this.answer(runId, pause.request_id, answer, { signal });
  }

  // --- the step-by-step loop ---

  /**
   * Starts a run and returns its invocation, the handle of nextStep.
   * @returns {Promise<Invocation>}
   */
  async initiate(agent, input, opts = {}) {
    const { invocation } = await this.startRun({ ...opts, agent, input });
    return new Invocation(invocation);
  }

  /**
   * The next step of the run after inv.cursor: a continuation, a
   * human_input_request, the result or the error (each once, in order;
   * docs/http_api.md, "The next-step long-poll"). Waits until one exists;
   * advances inv.cursor. Past the result it throws StepwiseError run_finished.
   * @param {Invocation} inv
   * @param {{timeoutMs?: number, signal?: AbortSignal}} [opts] timeoutMs bounds each long-poll request (default 30 s)
   */
  async nextStep(inv, { timeoutMs = 30000, signal } = {}) {
    for (;;) {
      const path = `/v1/runs/${seg(inv.run_id)}/next${query({ after: inv.cursor, timeout: `${Math.ceil(timeoutMs / 1000)}s` })}`;
      const res = await this._send('GET', path, { signal });
      if (res.status === 204) {
        const cur = res.headers.get('Stepwise-Cursor');
        if (cur) inv.cursor = cur;
        await res.body?.cancel();
        continue;
      }
      const step = await res.json();
      inv.cursor = step.cursor;
      return step;
    }
  }

  /**
   * Answers the request a human_input_request step carries, on inv's run.
   * @returns {Promise<object>} the answered input step
   */
  provideHumanInput(inv, requestId, answer, opts = {}) {
    return this.answer(inv.run_id, requestId, answer, opts);
  }

  /**
   * The steps of the run as an async iterator, ending after its result; a
   * failed or cancelled run throws a RunError after yielding its error step.
   * A human_input_request is yielded and the iterator waits for its answer.
   * @param {Invocation} inv
   */
  async *steps(inv, opts = {}) {
    for (;;) {
      const step = await this.nextStep(inv, opts);
      if (step.type === 'error') {
        yield step;
        throw new RunError(step);
      }
      yield step;
      if (step.type === 'result') return;
    }
  }

  // --- sessions ---

  /** @returns {Promise<{sessions: object[], next_cursor?: string}>} one page, newest activity first */
  listSessions({ agent, parent, q, cursor, limit, signal } = {}) {
    return this._json('GET', `/v1/sessions${query({ agent, parent, q, cursor, limit })}`, { signal });
  }

  /** Every session matching the filter, page by page. */
  async *sessions(filter = {}) {
    let cursor;
    do {
      const page = await this.listSessions({ ...filter, cursor });
      yield* page.sessions;
      cursor = page.next_cursor;
    } while (cursor);
  }

  createSession({ agent, title, metadata, signal } = {}) {
    return this._json('POST', '/v1/sessions', { signal, body: { agent, title, metadata } });
  }

  getSession(id, opts = {}) {
    return this._json('GET', `/v1/sessions/${seg(id)}`, opts);
  }

  async deleteSession(id, opts = {}) {
    await this._send('DELETE', `/v1/sessions/${seg(id)}`, opts);
  }

  sessionSummary(id, opts = {}) {
    return this._json('GET', `/v1/sessions/${seg(id)}/summary`, opts);
  }

  /** The session's steps in sequence order, its fork lineage included. */
  async listSteps(sessionId, { startSeq, endSeq, limit, signal } = {}) {
    const q = query({ start_seq: startSeq, end_seq: endSeq, limit });
    return (await this._json('GET', `/v1/sessions/${seg(sessionId)}/steps${q}`, { signal })).steps;
  }

  getStep(sessionId, sequence, opts = {}) {
    return this._json('GET', `/v1/sessions/${seg(sessionId)}/steps/${seg(sequence)}`, opts);
  }

  async listRuns(sessionId, { limit, signal } = {}) {
    return (await this._json('GET', `/v1/sessions/${seg(sessionId)}/runs${query({ limit })}`, { signal })).runs;
  }

  async forks(sessionId, opts = {}) {
    return (await this._json('GET', `/v1/sessions/${seg(sessionId)}/forks`, opts)).sessions;
  }

  tree(sessionId, opts = {}) {
    return this._json('GET', `/v1/sessions/${seg(sessionId)}/tree`, opts);
  }

  // --- fork, retry, replay ---

  /** A new session sharing the first `sequence` steps (step `sequence` replaced by `edit`). */
  fork(sessionId, { sequence, edit, title, signal }) {
    return this._json('POST', `/v1/sessions/${seg(sessionId)}/fork`, { signal, body: { sequence, edit, title } });
  }

  /** Re-runs from step `sequence` (in a fork unless destructive). */
  async retry(sessionId, { sequence, destructive, agent, signal }) {
    const r = await this._json('POST', `/v1/sessions/${seg(sessionId)}/retry`, {
      signal,
      body: { sequence, destructive: destructive || undefined, agent },
    });
    return { run: r.run, invocation: new Invocation(r.invocation) };
  }

  /** Replays the session in a fork, reusing recorded model and tool results. */
  async replay(sessionId, { liveTools, allToolsLive, agent, signal } = {}) {
    const r = await this._json('POST', `/v1/sessions/${seg(sessionId)}/replay`, {
      signal,
      body: { live_tools: liveTools, all_tools_live: allToolsLive || undefined, agent },
    });
    return { run: r.run, invocation: new Invocation(r.invocation) };
  }

  // --- event streams ---

  /**
   * The events of a session or a run as an async iterator (docs/http_api.md,
   * "Streams"). It reconnects on its own with Last-Event-ID, the id of the
   * last event it yielded, so every event arrives once, in order; a run's
   * stream ends after its run_finished. A refused request (4xx) throws at
   * once; after `reconnect.attempts` consecutive failed connections (default
   * 10; backoff 100 ms doubling to 5 s) the last failure is thrown. Breaking
   * out of the loop or aborting `signal` closes the connection.
   * @param {{sessionId?: string, runId?: string, after?: string, signal?: AbortSignal,
   *   reconnect?: {attempts?: number, minDelayMs?: number, maxDelayMs?: number},
   *   onConnect?: (lastEventId: string|undefined) => void}} params
   */
  async *subscribe({ sessionId, runId, after, signal, reconnect = {}, onConnect } = {}) {
    if (!sessionId && !runId) throw new TypeError('stepwise: subscribe needs a sessionId or a runId');
    const path = runId ? `/v1/runs/${seg(runId)}/events` : `/v1/sessions/${seg(sessionId)}/events`;
    const attempts = reconnect.attempts ?? 10;
    const minDelay = reconnect.minDelayMs ?? 100;
    const maxDelay = reconnect.maxDelayMs ?? 5000;
    let last = after;
    let failures = 0;
    let delay = minDelay;
    for (;;) {
      let failure;
      let got = 0;
      const ctl = new AbortController();
      const onAbort = () => ctl.abort(signal.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
      try {
        const headers = { Accept: 'text/event-stream' };
        if (last) headers['Last-Event-ID'] = last;
        onConnect?.(last);
        const res = await this._send('GET', path, { headers, signal: ctl.signal });
        for await (const raw of readEvents(res.body)) {
          if (raw.event === 'error') {
            let p = {};
            try {
              p = JSON.parse(raw.data);
            } catch {
              p = { detail: raw.data };
            }
            throw new StepwiseError({ status: p.status || 500, code: p.code, title: p.title, detail: p.detail });
          }
          const ev = JSON.parse(raw.data);
          if (raw.id) last = raw.id;
          failures = 0;
          delay = minDelay;
          got++;
          yield ev;
          if (runId && ev.type === 'run_finished') return;
        }
        // The server ended the stream (shutdown, a slow reader dropped):
        // resume; at once unless the connection brought nothing.
        if (got === 0) failure = new StepwiseError({ detail: `${path}: the stream ended without an event` });
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        if (err instanceof StepwiseError && err.status >= 400 && err.status < 500 && err.status !== 429) throw err;
        failure = err;
      } finally {
        signal?.removeEventListener('abort', onAbort);
        ctl.abort();
      }
      if (failure) {
        failures++;
        if (failures >= attempts) throw failure;
        await sleep(delay, signal);
        delay = Math.min(delay * 2, maxDelay);
      }
    }
  }
}

/** A run driven step by step: its ids and how far the caller has read. */
export class Invocation {
  /** @param {{run_id: string, session_id: string, cursor?: string}} o */
  constructor({ run_id, session_id, cursor = '0:0' }) {
    this.run_id = run_id;
    this.session_id = session_id;
    this.cursor = cursor || '0:0';
  }

  toJSON() {
    return { run_id: this.run_id, session_id: this.session_id, cursor: this.cursor };
  }
}
