// The client half against a real `stepwise serve`: the step-by-step loop
// with an approval, its async-iterator form, human input, sessions, fork /
// retry / replay and the problems of bad requests.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client, StepwiseError, RunError } from '../src/index.js';
import { startServer } from './helpers.js';

let server;
let client;

before(async () => {
  server = await startServer({ agents: ['approver.yaml', 'asker.yaml', 'looper.yaml'] });
  client = new Client({ baseUrl: server.url });
});

after(async () => {
  await server?.stop();
});

test('agents are listed with their tools and approvals', async () => {
  const agents = await client.listAgents();
  const a = agents.find((x) => x.name === 'sdk-approver');
  assert.ok(a, `sdk-approver among ${agents.map((x) => x.name)}`);
  assert.deepEqual(a.approvals, { calculator: 'always' });
  assert.ok(a.tools.some((t) => t.name === 'calculator'));
  assert.equal((await client.getAgent('sdk-asker')).name, 'sdk-asker');
  await assert.rejects(client.getAgent('no-such-agent'), (e) => e instanceof StepwiseError && e.status === 404 && e.code === 'unknown_agent');
});

test('the step-by-step loop parks on an approval and resumes with the answer', async () => {
  const inv = await client.initiate('sdk-approver', 'What is 6*7?');
  assert.match(inv.run_id, /^[0-9a-f-]{36}$/);
  const kinds = [];
  let request;
  for (;;) {
    const step = await client.nextStep(inv, { timeoutMs: 5000 });
    if (step.type === 'continuation') {
      kinds.push(step.step.kind);
      continue;
    }
    assert.equal(step.type, 'human_input_request');
    request = step;
    break;
  }
  assert.deepEqual(kinds, ['user', 'llm']);
  assert.equal(request.approval.name, 'calculator');
  assert.deepEqual(request.approval.arguments, { expression: '6*7' });
  // The run waits: it is parked, not blocked on this client.
  assert.equal((await client.getRun(inv.run_id)).status, 'waiting');
  const pending = await client.listInputs(inv.run_id);
  assert.deepEqual(pending.map((p) => p.request_id), [request.request_id]);

  // A malformed answer is refused and changes nothing.
  await assert.rejects(client.provideHumanInput(inv, request.request_id, { approved: 'yes' }), (e) => e.status === 422 && e.code === 'invalid_answer');
  const answered = await client.provideHumanInput(inv, request.request_id, { approved: true });
  assert.equal(answered.kind, 'input');
  assert.deepEqual(answered.outputs, { approved: true });
  await assert.rejects(client.provideHumanInput(inv, request.request_id, { approved: true }), (e) => e.status === 409 && e.code === 'already_answered');

  const rest = [];
  for (;;) {
    const step = await client.nextStep(inv, { timeoutMs: 5000 });
    rest.push(step.type === 'continuation' ? step.step.kind : step.type);
    if (step.type === 'result') {
      assert.equal(step.value, 'The answer is 42.');
      break;
    }
  }
  // The answered request was this reader's step 3: what follows is after it.
  assert.deepEqual(rest, ['tool', 'llm', 'result']);
  await assert.rejects(client.nextStep(inv), (e) => e instanceof StepwiseError && e.code === 'run_finished');
  assert.equal((await client.getRun(inv.run_id)).status, 'completed');
});

test('the async-iterator form answers a human-input request inside the loop', async () => {
  const inv = await client.initiate('sdk-asker', 'Compute something');
  const seen = [];
  for await (const step of client.steps(inv, { timeoutMs: 5000 })) {
    seen.push(step.type);
    if (step.type === 'human_input_request') {
      assert.match(step.prompt, /May I compute 6\*7\?/);
      await client.provideHumanInput(inv, step.request_id, 'yes, go ahead');
    }
    if (step.type === 'result') assert.equal(step.value, 'Confirmed and computed: 42.');
  }
  assert.equal(seen.at(-1), 'result');
  assert.ok(seen.includes('human_input_request'));
  // A second reader from the start sees the same steps, the request now a
  // continuation carrying its answer.
  const again = [];
  for await (const step of client.steps({ run_id: inv.run_id, session_id: inv.session_id, cursor: '0:0' })) {
    again.push(step.type === 'continuation' ? step.step.kind : step.type);
  }
  assert.deepEqual(again, ['user', 'llm', 'input', 'llm', 'tool', 'llm', 'result']);
});

test('a cancelled run ends the iterator with a RunError', async () => {
  const inv = await client.initiate('sdk-approver', 'What is 6*7?');
  await assert.rejects(
    (async () => {
      for await (const step of client.steps(inv, { timeoutMs: 5000 })) {
        if (step.type === 'human_input_request') await client.cancelRun(inv.run_id, 'changed my mind');
      }
    })(),
    (e) => e instanceof RunError && /changed my mind/.test(e.message),
  );
  await assert.rejects(client.cancelRun(inv.run_id), (e) => e.code === 'run_finished');
});

test('sessions: list, get, steps, fork, retry and replay', async () => {
  const inv = await client.initiate('sdk-asker', 'Please compute', { title: 'sdk sessions test', metadata: { suite: 'ts' } });
  for await (const step of client.steps(inv)) {
    if (step.type === 'human_input_request') await client.provideHumanInput(inv, step.request_id, 'fine');
  }
  const session = await client.getSession(inv.session_id);
  assert.equal(session.title, 'sdk sessions test');
  assert.equal(session.agent, 'sdk-asker');

  const page = await client.listSessions({ agent: 'sdk-asker', limit: 100 });
  assert.ok(page.sessions.some((s) => s.id === inv.session_id));
  const all = [];
  for await (const s of client.sessions({ agent: 'sdk-asker', limit: 1 })) all.push(s.id);
  assert.ok(all.includes(inv.session_id));
  assert.equal(new Set(all).size, all.length);

  const steps = await client.listSteps(inv.session_id);
  assert.deepEqual(steps.map((s) => s.sequence), steps.map((_, i) => i + 1));
  assert.equal(steps.at(-1).content, 'Confirmed and computed: 42.');
  assert.equal((await client.getStep(inv.session_id, 1)).content, 'Please compute');
  const summary = await client.sessionSummary(inv.session_id);
  assert.equal(summary.total_steps, steps.length);

  const fork = await client.fork(inv.session_id, { sequence: 2, title: 'sdk fork' });
  assert.equal(fork.parent_session_id, inv.session_id);
  assert.equal((await client.listSteps(fork.id)).length, 2);
  assert.ok((await client.forks(inv.session_id)).some((s) => s.id === fork.id));
  const tree = await client.tree(fork.id);
  assert.equal(tree.session.id, inv.session_id);

  const retried = await client.retry(inv.session_id, { sequence: 2 });
  assert.notEqual(retried.run.session_id, inv.session_id);
  const retriedTypes = [];
  for await (const step of client.steps(retried.invocation)) {
    retriedTypes.push(step.type);
    if (step.type === 'human_input_request') await client.provideHumanInput(retried.invocation, step.request_id, 'again');
  }
  assert.equal(retriedTypes.at(-1), 'result');

  const replayed = await client.replay(inv.session_id);
  let result;
  for await (const step of client.steps(replayed.invocation)) {
    if (step.type === 'human_input_request') await client.provideHumanInput(replayed.invocation, step.request_id, 'fine');
    if (step.type === 'result') result = step.value;
  }
  assert.equal(result, 'Confirmed and computed: 42.');
  const replaySteps = await client.listSteps(replayed.run.session_id);
  assert.ok(replaySteps.some((s) => s.replay === 'reused'), 'a replay reuses recorded steps');

  await assert.rejects(client.fork(inv.session_id, { sequence: 0 }), (e) => e.status === 422);
  await assert.rejects(client.getSession('no-such-session'), (e) => e.status === 404 && e.code === 'not_found');
  await assert.rejects(client.startRun({ agent: 'nobody', input: 'x' }), (e) => e.code === 'unknown_agent');
});

test('a server with tokens refuses a client without one', async () => {
  const guarded = await startServer({ agents: ['approver.yaml'], tokens: ['sdk-secret'] });
  try {
    await assert.rejects(new Client(guarded.url).listAgents(), (e) => e.status === 401 && e.code === 'unauthorized');
    await assert.rejects(new Client({ baseUrl: guarded.url, token: 'wrong' }).listAgents(), (e) => e.status === 401);
    const agents = await new Client({ baseUrl: guarded.url, token: 'sdk-secret' }).listAgents();
    assert.ok(agents.some((a) => a.name === 'sdk-approver'));
  } finally {
    await guarded.stop();
  }
});

test('a server that is not there is a transport error, not a hang', async () => {
  const c = new Client('http://127.0.0.1:1');
  await assert.rejects(c.listAgents(), (e) => e instanceof StepwiseError && e.status === 0 && e.retryable);
});
