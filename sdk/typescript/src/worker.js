// The worker half: registers agents, long-polls for their tasks, runs each
// step or tool handler under the task's lease (heartbeats, live reports)
// and finishes it with a result, a failure or a human-input request
// (docs/workers.md).

import os from 'node:os';
import { Client } from './client.js';
import { StepwiseError } from './errors.js';
import { KIND } from './agent.js';

const sleep = (ms, signal) =>
  new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        resolve();
      },
      { once: true },
    );
  });

const isAsyncIterator = (v) => v && typeof v[Symbol.asyncIterator] === 'function' && typeof v.next === 'function';
const isIterator = (v) => v && typeof v[Symbol.iterator] === 'function' && typeof v.next === 'function' && typeof v !== 'string';

/** The result of a tool with more than its output: content, is_error, attachments. */
export const toolResult = ({ output, content, isError, attachments } = {}) => ({ [KIND]: 'tool_result', output, content, isError, attachments });

const defaultLog = (level, msg, fields) => {
  if (level === 'warn' || level === 'error') console.error(`stepwise worker: ${msg}`, fields ?? '');
};

/** Serves the custom steps and tools of some agents for a Stepwise server. */
export class Worker {
  /**
   * @param {import('./worker.d.ts').WorkerOptions} o
   */
  constructor(o) {
    if (!o?.agents?.length) throw new TypeError('stepwise: a Worker needs at least one agent');
    this.client = o.client ?? new Client({ baseUrl: o.baseUrl, token: o.token, fetch: o.fetch });
    this.agents = new Map(o.agents.map((a) => [a.name, a]));
    if (this.agents.size !== o.agents.length) throw new TypeError('stepwise: an agent is given twice');
    this.workerId = o.workerId ?? `${os.hostname().replace(/[^A-Za-z0-9_.:-]/g, '-').slice(0, 80)}-${process.pid}`;
    this.concurrency = o.concurrency ?? 4;
    this.pollWaitMs = o.pollWaitMs ?? 30000;
    this.log = o.log ?? defaultLog;
    this.stopGraceMs = o.stopGraceMs ?? 5000;
    this.limits = undefined;
    this.active = new Map(); // task id → TaskRun
    this._stopping = false;
    this._pollAbort = undefined;
    this._slot = undefined;
    this._stopped = undefined;
  }

  async _call(path, body, { signal, ok } = {}) {
    const res = await this.client._send('POST', path, { body, signal, ok });
    if (res.status === 204) {
      await res.body?.cancel();
      return undefined;
    }
    return res.json();
  }

  /** Registers the agents (idempotent); returns the versions they resolved to. */
  async register({ signal } = {}) {
    const r = await this._call('/v1/workers/register', {
      worker_id: this.workerId,
      agents: [...this.agents.values()].map((a) => a.registration()),
    }, { signal });
    this.limits = r.limits;
    return r;
  }

  /**
   * Registers, then serves tasks until stop() (or SIGTERM / SIGINT when
   * handleSignals, the default): a graceful stop hands every held task back
   * to the server at once.
   */
  run(opts = {}) {
    if (!this._running) this._running = this._run(opts);
    return this._running;
  }

  async _run({ signal, handleSignals = true } = {}) {
    const onSignal = () => void this.stop();
    if (handleSignals) {
      process.once('SIGTERM', onSignal);
      process.once('SIGINT', onSignal);
    }
    signal?.addEventListener('abort', onSignal, { once: true });
    try {
      await this._retrying(() => this.register());
      let backoff = 100;
      while (!this._stopping) {
        if (this.active.size >= this.concurrency) {
          await new Promise((r) => (this._slot = r));
          continue;
        }
        this._pollAbort = new AbortController();
        let batch;
        try {
          const max = Math.min(this.concurrency - this.active.size, this.limits?.max_tasks ?? 16);
          batch = await this._call(
            '/v1/workers/poll',
            { worker_id: this.workerId, agents: [...this.agents.keys()], max, wait_ms: this.pollWaitMs },
            { signal: this._pollAbort.signal },
          );
          backoff = 100;
        } catch (err) {
          if (this._stopping) break;
          if (err instanceof StepwiseError && err.code === 'agent_not_served') {
            // The server restarted and forgot the registration.
            await this._retrying(() => this.register());
            continue;
          }
          if (err instanceof StepwiseError && !err.retryable) throw err;
          this.log('warn', `poll failed, retrying in ${backoff} ms: ${err.message}`);
          await sleep(backoff, this._pollAbort.signal);
          backoff = Math.min(backoff * 2, 5000);
          continue;
        }
        for (const task of batch?.tasks ?? []) {
          if (this._stopping) {
            // Claimed as the stop began: give it back at once.
            void this._call(`/v1/workers/tasks/${encodeURIComponent(task.id)}/release`, { token: task.token, reason: 'worker stopping' }).catch(() => {});
            continue;
          }
          const tr = new TaskRun(this, task);
          this.active.set(task.id, tr);
          tr.done = tr.run().finally(() => {
            this.active.delete(task.id);
            this._slot?.();
            this._slot = undefined;
          });
        }
      }
    } finally {
      if (handleSignals) {
        process.removeListener('SIGTERM', onSignal);
        process.removeListener('SIGINT', onSignal);
      }
      signal?.removeEventListener('abort', onSignal);
      await this._handBack();
    }
  }

  /** Stops serving: the poll ends, running handlers see their signal abort, held tasks go back to the server. */
  stop() {
    if (!this._stopping) {
      this._stopping = true;
      this._pollAbort?.abort();
      this._slot?.();
      for (const tr of this.active.values()) tr.abort('worker stopping', true);
    }
    return (this._running ?? Promise.resolve()).catch(() => {});
  }

  async _handBack() {
    this._stopping = true;
    for (const tr of this.active.values()) tr.abort('worker stopping', true);
    if (!this._stopped) {
      this._stopped = (async () => {
        try {
          await this._call('/v1/workers/release', { worker_id: this.workerId });
        } catch (err) {
          this.log('warn', `release failed (the leases will expire instead): ${err.message}`);
        }
        // Handlers saw their signal abort; their results are not reported.
        // Wait a moment for them to return, not for one that ignores it.
        let timer;
        const grace = new Promise((r) => (timer = setTimeout(r, this.stopGraceMs)));
        await Promise.race([Promise.allSettled([...this.active.values()].map((tr) => tr.done)), grace]);
        clearTimeout(timer);
      })();
    }
    await this._stopped;
  }

  async _retrying(fn) {
    let backoff = 100;
    for (;;) {
      try {
        return await fn();
      } catch (err) {
        if (this._stopping || (err instanceof StepwiseError && !err.retryable)) throw err;
        this.log('warn', `${err.message}; retrying in ${backoff} ms`);
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 5000);
      }
    }
  }
}

/** One claimed task: its handler, heartbeats, reports and finish. */
class TaskRun {
  constructor(worker, task) {
    this.w = worker;
    this.task = task;
    this.ctl = new AbortController();
    this.handedBack = false;
    this.lost = false;
    this.pending = [];
    this.flushing = Promise.resolve();
    this.flushTimer = undefined;
    this.path = `/v1/workers/tasks/${encodeURIComponent(task.id)}`;
  }

  abort(reason, handBack = false) {
    if (handBack) this.handedBack = true;
    if (!this.ctl.signal.aborted) this.ctl.abort(new Error(reason));
  }

  context() {
    const t = this.task;
    const input = t.input || {};
    const report = (r) => this.report(r);
    return {
      task: t,
      workerId: this.w.workerId,
      agent: t.agent,
      runId: t.run_id,
      sessionId: t.session_id,
      stepId: t.step_id,
      idempotencyKey: t.idempotency_key,
      attempt: t.attempt,
      state: input.state ?? {},
      runInput: input.run_input ?? '',
      messages: input.messages,
      answer: input.answer,
      answers: input.answers ?? [],
      request: input.request,
      requestId: input.request_id,
      toolCallId: input.tool_call_id,
      signal: this.ctl.signal,
      report,
      delta: (text) => report({ [KIND]: 'delta', text }),
      progress: (fraction, message) => report({ [KIND]: 'progress', fraction, message }),
      yield: (name, data) => report({ [KIND]: 'yield', name, data }),
      event: (name, data) => report({ [KIND]: 'event', name, data }),
    };
  }

  /** Queues a live report (a typed yield, a delta, progress, an event). */
  report(r) {
    if (r === undefined || r === null) return;
    let ev;
    if (typeof r === 'string') ev = { type: 'delta', text: r };
    else if (r[KIND] === 'delta') ev = { type: 'delta', text: r.text };
    else if (r[KIND] === 'progress') ev = { type: 'progress', fraction: r.fraction, message: r.message };
    else if (r[KIND] === 'event') ev = { type: 'event', name: r.name, data: r.data };
    else if (r[KIND] === 'yield' || typeof r.name === 'string') ev = { type: 'yield', name: r.name, data: r.data };
    else throw new TypeError('stepwise: a step yields {name, data} (a typed yield), delta(text), progress(fraction, message) or stepEvent(name, data)');
    this.pending.push(JSON.parse(JSON.stringify(ev)));
    const max = this.w.limits?.max_events_batch ?? 256;
    if (this.pending.length >= max) this.flush();
    else if (!this.flushTimer) this.flushTimer = setTimeout(() => this.flush(), 20);
  }

  flush() {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    if (this.pending.length === 0) return this.flushing;
    const max = this.w.limits?.max_events_batch ?? 256;
    const batches = [];
    while (this.pending.length) batches.push(this.pending.splice(0, max));
    this.flushing = this.flushing.then(async () => {
      for (const events of batches) {
        if (this.lost || this.handedBack) return;
        try {
          const lease = await this.w._call(`${this.path}/events`, { token: this.task.token, events });
          if (lease?.cancel) this.abort('the run no longer needs the task');
        } catch (err) {
          this.onLeaseError(err, 'report');
        }
      }
    });
    return this.flushing;
  }

  onLeaseError(err, what) {
    if (err instanceof StepwiseError && (err.code === 'lease_lost' || err.code === 'task_finished' || err.code === 'task_not_found')) {
      this.lost = true;
      this.abort(`${what}: ${err.code}`);
      this.w.log('warn', `task ${this.task.id} ${what}: ${err.message}; dropping it`);
      return;
    }
    this.w.log('warn', `task ${this.task.id} ${what} failed: ${err.message}`);
  }

  async run() {
    const hbMs = this.w.limits?.heartbeat_ms ?? 5000;
    const hb = setInterval(async () => {
      try {
        const lease = await this.w._call(`${this.path}/heartbeat`, { token: this.task.token });
        if (lease?.cancel) this.abort('the run no longer needs the task');
      } catch (err) {
        this.onLeaseError(err, 'heartbeat');
      }
    }, hbMs);
    try {
      let outcome;
      try {
        outcome = this.task.kind === 'tool' ? await this.runTool() : await this.runStep();
      } catch (err) {
        outcome = { fail: err };
      }
      await this.flush();
      if (this.handedBack || this.lost || this.ctl.signal.aborted) return;
      await this.finish(outcome);
    } finally {
      clearInterval(hb);
      clearTimeout(this.flushTimer);
    }
  }

  async runStep() {
    const agent = this.w.agents.get(this.task.agent);
    const s = agent?.steps.get(this.task.name);
    if (!s) throw new Error(`this worker has no step ${this.task.name} of agent ${this.task.agent}`);
    const ctx = this.context();
    const prepared = s.beforeExecute ? await s.beforeExecute(ctx) : undefined;
    let result = await this.drive(s.execute(ctx, prepared));
    if (result?.[KIND] === 'input') return { input: result };
    if (s.afterExecute) result = (await s.afterExecute(ctx, result)) ?? result;
    if (result?.[KIND] === 'input') return { input: result };
    if (!result || typeof result.next !== 'string' || !result.next) {
      throw new Error(`step ${this.task.name} returned ${JSON.stringify(result)}: a step returns {next, state?} (next: a step of the agent, "llm", "tools" or "end")`);
    }
    return {
      complete: {
        content: result.content,
        output: result.output,
        state: result.state,
        next: result.next,
        decision: result.decision,
        annotations: result.annotations,
        usage: result.usage,
        cost_usd: result.costUsd,
      },
    };
  }

  async runTool() {
    const agent = this.w.agents.get(this.task.agent);
    const t = agent?.tools.get(this.task.name);
    if (!t) throw new Error(`this worker has no tool ${this.task.name} of agent ${this.task.agent}`);
    const ctx = this.context();
    const r = await this.drive(t.execute(this.task.input?.arguments ?? {}, ctx));
    // The call parks the run; the answer makes the call again with
    // ctx.answer (and ctx.answers: every answer so far) set.
    if (r?.[KIND] === 'input') return { input: { request: { prompt: r.request?.prompt, schema: r.request?.schema, context: r.request?.context } } };
    if (r?.[KIND] === 'tool_result') {
      return {
        complete: {
          output: r.output,
          content: r.content,
          is_error: r.isError || undefined,
          attachments: r.attachments?.map((a) => ({
            name: a.name,
            content_type: a.contentType,
            kind: a.kind,
            data: Buffer.from(a.data).toString('base64'),
          })),
        },
      };
    }
    return { complete: { output: r === undefined ? null : r } };
  }

  /** Runs a handler's value: an (async) generator's yields are reports, its return the result. */
  async drive(v) {
    if (isAsyncIterator(v) || isIterator(v)) {
      for (;;) {
        const { value, done } = await v.next();
        if (done) return value;
        this.report(value);
        if (this.ctl.signal.aborted) {
          await v.return?.();
          return undefined;
        }
      }
    }
    return await v;
  }

  async finish(outcome) {
    let path;
    let body;
    if (outcome.fail) {
      const err = outcome.fail;
      path = 'fail';
      body = {
        token: this.task.token,
        message: err?.message ?? String(err),
        class: err?.class === 'transient' ? 'transient' : 'permanent',
        code: typeof err?.code === 'string' ? err.code : undefined,
      };
    } else if (outcome.input) {
      path = 'input';
      const { request, state, content } = outcome.input;
      body = { token: this.task.token, request, state, content };
    } else {
      path = 'complete';
      body = { token: this.task.token, ...outcome.complete };
    }
    body = JSON.parse(JSON.stringify(body));
    let backoff = 100;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.w._call(`${this.path}/${path}`, body);
      } catch (err) {
        if (err instanceof StepwiseError && err.code === 'invalid_result' && path !== 'fail') {
          // The server refused the result (schema, next, state): fail the
          // task with its reason instead of leaving the run waiting.
          this.w.log('warn', `task ${this.task.id}: result refused: ${err.detail}`);
          path = 'fail';
          body = { token: this.task.token, message: `invalid result: ${err.detail}`, class: 'permanent', code: 'invalid_result' };
          continue;
        }
        if (err instanceof StepwiseError && !err.retryable) {
          this.onLeaseError(err, path);
          return undefined;
        }
        if (this.handedBack || attempt >= 20) {
          this.w.log('error', `task ${this.task.id}: ${path} failed: ${err.message}`);
          return undefined;
        }
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 2000);
      }
    }
  }
}
