// The worker half against a real `stepwise serve`: custom steps with
// typed yields and `next` routing, a tool the model calls, human input
// from a step, retries, refused results, and a graceful stop that hands a
// task to another worker. The model is a local OpenAI-compatible server.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client, Worker, defineAgent, tool, typedYield, progress, askHuman, TransientError, StepwiseError } from '../src/index.js';
import { startServer, waitFor } from './helpers.js';
import { fakeModel } from './fakemodel.js';

let server;
let client;
let model;

before(async () => {
  model = await fakeModel((req, k) => {
    const last = [...req.messages].reverse().find((m) => m.role === 'user')?.content ?? '';
    if (/lookup/.test(last) && k === 0) return { toolCalls: [{ name: 'lookup', arguments: { order: 'A-17' } }] };
    if (/refund/.test(last) && k === 0) return { toolCalls: [{ name: 'refund', arguments: { order: 'A-9' } }] };
    if (/bad-output/.test(last) && k === 0) return { toolCalls: [{ name: 'lookup', arguments: { order: 'BAD' } }] };
    const tool = [...req.messages].reverse().find((m) => m.role === 'tool');
    return { text: tool ? `model saw: ${tool.content}` : `model answers: ${last}` };
  });
  // A lease of an hour: a task another worker takes over was handed back,
  // not left to expire (no test here waits for a lease).
  server = await startServer({ args: ['--worker-lease', '1h'] });
  client = new Client(server.url);
});

after(async () => {
  await server?.stop();
  await model?.close();
});

const quiet = () => {};

function serve(agent, opts = {}) {
  const w = new Worker({ baseUrl: server.url, agents: [agent], log: quiet, pollWaitMs: 2000, ...opts });
  const done = w.run({ handleSignals: false });
  return { w, done };
}

async function finish(inv) {
  const types = [];
  let last;
  for await (const s of client.steps(inv, { timeoutMs: 5000 })) {
    types.push(s.type);
    last = s;
  }
  return { types, last };
}

test('custom steps route with next, report typed yields and update the state', async () => {
  const agent = defineAgent({
    name: 'sdk-ts-pipeline',
    model: model.model,
    modelOptions: model.modelOptions,
    startStep: 'validate',
    reducers: { checks: 'append' },
    steps: {
      validate: {
        next: ['transform', 'reject'],
        beforeExecute: (ctx) => ctx.runInput.trim(),
        async *execute(ctx, text) {
          yield typedYield('validation.checking', { field: 'text', chars: text.length });
          yield progress(0.5, 'checking');
          if (text.includes('invalid')) return { next: 'reject', state: { checks: ['invalid'] } };
          return { next: 'transform', state: { checks: ['valid'] } };
        },
        afterExecute: (ctx, r) => ({ ...r, annotations: { action: `route to ${r.next}` } }),
      },
      transform: async (ctx) => ({ next: 'llm', state: { upper: ctx.runInput.toUpperCase(), checks: ['transformed'] }, output: { n: 1 } }),
      reject: (ctx) => ({ next: 'end', content: `rejected ${ctx.state.checks.join(',')}` }),
    },
  });
  const { w, done } = serve(agent, { workerId: 'ts-pipeline-1' });
  try {
    await w.register();
    const { run, invocation } = await client.startRun({ agent: 'sdk-ts-pipeline', input: 'hello there' });
    const yields = [];
    for await (const ev of client.subscribe({ runId: run.id })) {
      if (ev.type === 'step_yield') yields.push(ev.yield);
    }
    assert.deepEqual(yields, [{ name: 'validation.checking', data: { field: 'text', chars: 11 } }]);
    const steps = await client.listSteps(invocation.session_id);
    assert.deepEqual(steps.map((s) => `${s.kind}:${s.name}`), ['user:input', 'custom:validate', 'custom:transform', 'llm:llm']);
    assert.equal(steps[1].metadata.worker, 'ts-pipeline-1');
    assert.equal(steps[1].annotations.action, 'route to transform');
    assert.equal(steps.at(-1).content, 'model answers: hello there');
    const done1 = await client.getRun(run.id);
    assert.equal(done1.status, 'completed');
    assert.deepEqual(done1.state, { checks: ['valid', 'transformed'], upper: 'HELLO THERE' });

    // The other branch never reaches the model.
    const calls = model.requests.length;
    const inv2 = await client.initiate('sdk-ts-pipeline', 'this is invalid');
    const r2 = await finish(inv2);
    assert.equal(r2.last.type, 'result');
    const steps2 = await client.listSteps(inv2.session_id);
    assert.deepEqual(steps2.map((s) => s.name), ['input', 'validate', 'reject']);
    assert.equal(steps2.at(-1).content, 'rejected invalid');
    assert.equal(model.requests.length, calls);
  } finally {
    await w.stop();
    await done;
  }
});

test('a tool served by the worker is called by the model; a bad output is refused', async () => {
  let calls = 0;
  const agent = defineAgent({
    name: 'sdk-ts-tools',
    model: model.model,
    modelOptions: model.modelOptions,
    tools: [
      tool({
        name: 'lookup',
        description: 'Look an order up',
        parameters: { type: 'object', properties: { order: { type: 'string' } }, required: ['order'] },
        outputSchema: { type: 'object', properties: { status: { type: 'string' } }, required: ['status'] },
        async execute({ order }, ctx) {
          calls++;
          assert.match(ctx.idempotencyKey, /.+/);
          return order === 'BAD' ? { nope: true } : { order, status: 'shipped' };
        },
      }),
    ],
  });
  const { w, done } = serve(agent);
  try {
    await w.register();
    const inv = await client.initiate('sdk-ts-tools', 'please lookup my order');
    const r = await finish(inv);
    assert.equal(r.last.type, 'result');
    assert.equal(r.last.value, 'model saw: {"order":"A-17","status":"shipped"}');
    const steps = await client.listSteps(inv.session_id);
    const t = steps.find((s) => s.kind === 'tool');
    assert.equal(t.tool_name, 'lookup');
    assert.equal(t.metadata.worker, w.workerId);
    assert.equal(calls, 1);

    const inv2 = await client.initiate('sdk-ts-tools', 'bad-output please');
    const r2 = await finish(inv2);
    assert.equal(r2.last.type, 'result');
    const t2 = (await client.listSteps(inv2.session_id)).find((s) => s.kind === 'tool');
    assert.ok(t2.error, 'the refused output is a tool error');
    assert.match(r2.last.value, /model saw: .*invalid result/i);
  } finally {
    await w.stop();
    await done;
  }
});

test('a tool asks a human; the answer calls it again with ctx.answer', async () => {
  const seen = [];
  const agent = defineAgent({
    name: 'sdk-ts-tool-ask',
    model: model.model,
    modelOptions: model.modelOptions,
    tools: [
      tool({
        name: 'refund',
        description: 'Refund an order, once a person agrees',
        parameters: { type: 'object', properties: { order: { type: 'string' } }, required: ['order'] },
        execute({ order }, ctx) {
          seen.push(ctx.answers.length);
          if (ctx.answer === undefined) return askHuman({ prompt: `Refund ${order}?`, schema: { type: 'boolean' }, context: { order } });
          return { order, refunded: ctx.answer };
        },
      }),
    ],
  });
  const { w, done } = serve(agent);
  try {
    await w.register();
    const inv = await client.initiate('sdk-ts-tool-ask', 'refund please');
    let req;
    for (;;) {
      const s = await client.nextStep(inv, { timeoutMs: 5000 });
      if (s.type === 'human_input_request') {
        req = s;
        break;
      }
      assert.equal(s.type, 'continuation');
    }
    assert.equal(req.prompt, 'Refund A-9?');
    assert.equal((await client.getRun(inv.run_id)).status, 'waiting');
    await client.provideHumanInput(inv, req.request_id, true);
    const r = await finish(inv);
    assert.equal(r.last.type, 'result');
    assert.equal(r.last.value, 'model saw: {"order":"A-9","refunded":true}');
    assert.deepEqual(seen, [0, 1]);
    const t = (await client.listSteps(inv.session_id)).find((s) => s.kind === 'tool');
    assert.equal(t.metadata.worker, w.workerId);
  } finally {
    await w.stop();
    await done;
  }
});

test('a step asks a human; the answer re-invokes it; transient errors are retried', async () => {
  let attempts = 0;
  const agent = defineAgent({
    name: 'sdk-ts-ask',
    model: model.model,
    modelOptions: model.modelOptions,
    startStep: 'confirm',
    retry: { maxAttempts: 3, initialInterval: '10ms', maxInterval: '20ms' },
    steps: {
      confirm: (ctx) => {
        if (ctx.answer === undefined) return askHuman({ prompt: 'Ship it?', schema: { type: 'string' } }, { state: { asked: true } });
        return { next: 'flaky', state: { answer: ctx.answer } };
      },
      flaky: () => {
        attempts++;
        if (attempts < 2) throw new TransientError('not yet');
        return { next: 'end', content: 'shipped' };
      },
    },
  });
  const { w, done } = serve(agent);
  try {
    await w.register();
    const inv = await client.initiate('sdk-ts-ask', 'go');
    let req;
    for (;;) {
      const s = await client.nextStep(inv, { timeoutMs: 5000 });
      if (s.type === 'human_input_request') {
        req = s;
        break;
      }
      assert.equal(s.type, 'continuation');
    }
    assert.equal(req.prompt, 'Ship it?');
    assert.equal((await client.getRun(inv.run_id)).status, 'waiting');
    await client.provideHumanInput(inv, req.request_id, 'yes');
    const r = await finish(inv);
    assert.equal(r.last.type, 'result');
    const run = await client.getRun(inv.run_id);
    assert.deepEqual(run.state, { asked: true, answer: 'yes' });
    assert.equal(attempts, 2);
    const steps = await client.listSteps(inv.session_id);
    assert.ok(steps.some((s) => s.kind === 'error' && /not yet/.test(s.error.message)));
  } finally {
    await w.stop();
    await done;
  }
});

test('a step result naming an unknown next step fails the run with the reason', async () => {
  const agent = defineAgent({
    name: 'sdk-ts-badnext',
    model: model.model,
    modelOptions: model.modelOptions,
    startStep: 'route',
    steps: { route: () => ({ next: 'nowhere' }) },
  });
  const { w, done } = serve(agent);
  try {
    await w.register();
    const inv = await client.initiate('sdk-ts-badnext', 'go');
    const r = await finish(inv).catch((e) => ({ err: e }));
    assert.ok(r.err, 'the run fails');
    assert.match(r.err.message, /nowhere/);
  } finally {
    await w.stop();
    await done;
  }
});

test('a malformed definition is refused with a clear error', async () => {
  const agent = defineAgent({ name: 'sdk-ts-bad', model: 'openai:x', definition: { limits: { max_steps: -1 } } });
  const w = new Worker({ baseUrl: server.url, agents: [agent], log: quiet });
  await assert.rejects(w.register(), (e) => e instanceof StepwiseError && e.status === 422 && e.code === 'invalid_definition');
});

test('a graceful stop hands the task back at once and another worker completes it', async () => {
  let started = 0;
  let release;
  const blocked = new Promise((r) => (release = r));
  const mk = (name) =>
    defineAgent({
      name: 'sdk-ts-handoff',
      model: model.model,
      modelOptions: model.modelOptions,
      startStep: 'work',
      steps: {
        work: async (ctx) => {
          started++;
          if (name === 'first') {
            await new Promise((r) => ctx.signal.addEventListener('abort', r, { once: true }));
            release();
            return { next: 'end', content: 'from the first worker (must not commit)' };
          }
          return { next: 'end', content: `done by ${name}` };
        },
      },
    });
  const first = serve(mk('first'), { workerId: 'ts-first' });
  await first.w.register();
  const inv = await client.initiate('sdk-ts-handoff', 'go');
  await waitFor(() => started === 1, { what: 'the first worker to take the task' });
  await first.w.stop();
  await first.done;
  await blocked;
  const second = serve(mk('second'), { workerId: 'ts-second' });
  try {
    const r = await finish(inv);
    assert.equal(r.last.type, 'result');
    const steps = await client.listSteps(inv.session_id);
    const work = steps.filter((s) => s.name === 'work');
    assert.equal(work.length, 1, 'one result committed');
    assert.equal(work[0].content, 'done by second');
    assert.equal(work[0].metadata.worker, 'ts-second');
    // The lease is an hour: the second worker has the task because the
    // stop handed it back.
  } finally {
    await second.w.stop();
    await second.done;
  }
});
