// Event streams: the SSE reader on split and CRLF input, and a stream that
// a proxy cuts at random byte offsets, resumed with Last-Event-ID.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client, StepwiseError, readEvents } from '../src/index.js';
import { startServer, cuttingProxy } from './helpers.js';

let server;
let client;

before(async () => {
  server = await startServer({ agents: ['looper.yaml', 'approver.yaml'] });
  client = new Client(server.url);
});

after(async () => {
  await server?.stop();
});

function bodyOf(chunks) {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(c) {
      for (const ch of chunks) c.enqueue(enc.encode(ch));
      c.close();
    },
  });
}

test('readEvents parses split lines, CRLF, comments and multi-line data', async () => {
  const chunks = ['retry: 1000\r\n\r\n: heart', 'beat\r\nid: 1:0\r', '\nevent: a\ndata: x\ndata: y\n\nid: 2:0\ndata: {"z"', ':1}\r\r'];
  const got = [];
  for await (const ev of readEvents(bodyOf(chunks))) got.push(ev);
  assert.deepEqual(got, [
    { id: '1:0', event: 'a', data: 'x\ny' },
    { id: '2:0', event: 'message', data: '{"z":1}' },
  ]);
});

test('a run stream cut at random byte offsets delivers every step once, in order', async () => {
  const seed = Number(process.env.STEPWISE_SDK_SEED || Date.now() % 100000);
  const proxy = await cuttingProxy(server.url, { minBytes: 200, maxBytes: 6000, seed });
  try {
    const via = new Client(proxy.url);
    const { run, invocation } = await client.startRun({ agent: 'sdk-looper', input: 'count' });
    const ids = [];
    const seqs = [];
    let connects = 0;
    let finished;
    for await (const ev of via.subscribe({
      runId: run.id,
      reconnect: { attempts: 1000, minDelayMs: 1, maxDelayMs: 10 },
      onConnect: () => connects++,
    })) {
      ids.push(ev.id);
      if (ev.type === 'step_completed') seqs.push(ev.step.sequence);
      if (ev.type === 'run_finished') finished = ev;
    }
    assert.ok(finished, 'the stream ends with run_finished');
    assert.equal(finished.run.status, 'completed');
    const stored = (await client.listSteps(invocation.session_id)).map((s) => s.sequence);
    assert.deepEqual(seqs, stored, `seed ${seed}: every committed step exactly once, in order`);
    const pos = ids.map((id) => id.split(':').map(Number));
    for (let i = 1; i < pos.length; i++) {
      const [a, b] = [pos[i - 1], pos[i]];
      assert.ok(b[0] > a[0] || (b[0] === a[0] && b[1] > a[1]), `seed ${seed}: ${ids[i - 1]} then ${ids[i]}`);
    }
    assert.ok(proxy.stats.cuts > 3, `seed ${seed}: the proxy cut the stream (${proxy.stats.cuts} cuts)`);
    assert.ok(connects > 3);
  } finally {
    await proxy.close();
  }
});

test('a session stream resumes after the last id it was given', async () => {
  const { run, invocation } = await client.startRun({ agent: 'sdk-looper', input: 'count again' });
  const first = [];
  for await (const ev of client.subscribe({ runId: run.id })) first.push(ev);
  const mid = first.find((e) => e.type === 'step_completed' && e.step.sequence === 10);
  const ac = new AbortController();
  const later = [];
  for await (const ev of client.subscribe({ sessionId: invocation.session_id, after: mid.id, signal: ac.signal })) {
    later.push(ev);
    if (ev.type === 'step_completed' && ev.step.sequence === 20) break;
  }
  const seqs = later.filter((e) => e.type === 'step_completed').map((e) => e.step.sequence);
  assert.deepEqual(seqs, Array.from({ length: 10 }, (_, i) => 11 + i));
});

test('an aborted subscription ends with the abort reason; a bad position is refused', async () => {
  const inv = await client.initiate('sdk-approver', 'What is 6*7?');
  const ac = new AbortController();
  const seen = [];
  await assert.rejects(
    (async () => {
      for await (const ev of client.subscribe({ sessionId: inv.session_id, signal: ac.signal })) {
        seen.push(ev.type);
        if (ev.type === 'run_waiting') ac.abort(new Error('enough'));
      }
    })(),
    /enough/,
  );
  assert.ok(seen.includes('run_waiting'));
  await assert.rejects(
    (async () => {
      for await (const _ of client.subscribe({ sessionId: inv.session_id, after: 'nonsense' })) void _;
    })(),
    (e) => e instanceof StepwiseError && e.status === 400 && e.code === 'invalid_position',
  );
  await client.cancelRun(inv.run_id);
});
