// Breakpoints from the client: a run started with breakpoints pauses, the
// pause is a pending input with its breakpoint, and continueRun steps,
// edits the state and goes on (docs/breakpoints.md).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client, StepwiseError } from '../src/index.js';
import { startServer, waitFor } from './helpers.js';

let server;
let client;

before(async () => {
  server = await startServer({ agents: ['stepper.yaml', 'approver.yaml'] });
  client = new Client({ baseUrl: server.url });
});

after(async () => {
  await server?.stop();
});

/** Waits for the run's pending breakpoint pause and returns its PendingInput. */
async function pauseOf(runId) {
  return waitFor(async () => (await client.listInputs(runId)).find((p) => p.request.breakpoint), { what: `a pause of run ${runId}` });
}

test('continueRun steps from a breakpoint, edits the state and finishes the run', async () => {
  const { run } = await client.startRun({ agent: 'sdk-stepper', input: 'What is 6*7?', breakpoints: { before: ['tools'] } });
  assert.deepEqual(run.options.breakpoints, { before: ['tools'] });

  const first = await pauseOf(run.id);
  const bp = first.request.breakpoint;
  assert.deepEqual(
    { when: bp.when, step: bp.step, kind: bp.kind, tools: bp.tools, matched: bp.matched },
    { when: 'before', step: 'tools', kind: 'tool', tools: ['calculator'], matched: 'tools' },
  );
  assert.equal((await client.getRun(run.id)).status, 'waiting');

  // A state that is not an object is refused before anything is sent.
  for (const bad of [[1], 'x', 7, null]) {
    await assert.rejects(client.continueRun(run.id, { state: bad }), (e) => e instanceof TypeError && /state must be an object/.test(e.message));
  }
  assert.equal((await pauseOf(run.id)).request_id, first.request_id);

  const stepped = await client.continueRun(run.id, { step: true });
  assert.equal(stepped.id, first.request_id);
  assert.equal(stepped.kind, 'input');
  assert.deepEqual(stepped.outputs, { action: 'step' });

  // Stepping ran the tools step and paused again before the next one.
  const second = await waitFor(async () => {
    const p = await pauseOf(run.id);
    return p.request_id !== first.request_id && p;
  });
  assert.deepEqual(
    { when: second.request.breakpoint.when, step: second.request.breakpoint.step, kind: second.request.breakpoint.kind, matched: second.request.breakpoint.matched },
    { when: 'before', step: 'llm', kind: 'llm', matched: 'step' },
  );
  const steps = await client.listSteps(run.session_id);
  assert.ok(steps.some((s) => s.kind === 'tool' && s.tool_name === 'calculator'), 'the tools step ran before the second pause');

  const edited = await client.continueRun(run.id, { state: { note: 'edited' } });
  assert.deepEqual(edited.outputs, { action: 'continue', state: { note: 'edited' } });
  const done = await waitFor(async () => {
    const r = await client.getRun(run.id);
    return r.status === 'completed' && r;
  });
  assert.equal(done.output, 'The answer is 42.');
  assert.deepEqual(done.state, { note: 'edited' });

  await assert.rejects(
    client.continueRun(run.id),
    (e) => e instanceof StepwiseError && e.code === 'not_at_breakpoint' && e.status === 409 && !e.retryable && e.message.includes(run.id),
  );
});

test('initiate with breakpoints: the pause is a human_input_request with its breakpoint', async () => {
  const inv = await client.initiate('sdk-stepper', 'What is 6*7?', { breakpoints: { after: ['tool:calculator'] } });
  let request;
  for await (const step of client.steps(inv, { timeoutMs: 5000 })) {
    if (step.type === 'human_input_request') {
      request = step;
      await client.continueRun(inv.run_id);
    }
    if (step.type === 'result') assert.equal(step.value, 'The answer is 42.');
  }
  assert.ok(request, 'the run paused');
  assert.equal(request.breakpoint.when, 'after');
  assert.equal(request.breakpoint.step, 'tools');
  assert.equal(request.breakpoint.matched, 'tool:calculator');
});

test('continueRun refuses a run waiting for something other than a breakpoint', async () => {
  const inv = await client.initiate('sdk-approver', 'What is 6*7?');
  const [approval] = await waitFor(async () => {
    const p = await client.listInputs(inv.run_id);
    return p.length > 0 && p;
  });
  assert.equal(approval.request.approval.name, 'calculator');
  await assert.rejects(client.continueRun(inv.run_id), (e) => e instanceof StepwiseError && e.code === 'not_at_breakpoint');
  await client.cancelRun(inv.run_id);
});
