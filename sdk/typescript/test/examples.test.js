// The examples run against a real server and do what their comments say.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { startServer, repoRoot } from './helpers.js';
import { fakeModel } from './fakemodel.js';

let server;
let model;

before(async () => {
  model = await fakeModel((req, k) => {
    const user = req.messages.filter((m) => m.role === 'user').at(-1).content;
    const order = /[A-Z]-\d+/.exec(user)?.[0];
    if (k === 0 && order) return { toolCalls: [{ name: 'lookup_order', arguments: { order } }] };
    const t = req.messages.filter((m) => m.role === 'tool').at(-1);
    return { text: `Your order: ${t ? JSON.parse(t.content).status : 'unknown'}.` };
  });
  server = await startServer({ agents: [path.join(repoRoot, 'sdk/examples/approval-agent.yaml')] });
});

after(async () => {
  await server?.stop();
  await model?.close();
});

function runExample(file, args, stdin) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [path.join(repoRoot, 'sdk/typescript/examples', file), ...args], {
      env: { ...process.env, STEPWISE_SERVER: server.url },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    p.stdout.on('data', (b) => {
      out += b;
      if (stdin && out.includes('[y/N]')) {
        p.stdin.end(stdin);
        stdin = undefined;
      }
    });
    p.stderr.on('data', (b) => (err += b));
    p.on('error', reject);
    p.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${file} exited ${code}\n${out}\n${err}`))));
    if (!stdin) p.stdin.end();
  });
}

test('approval-loop --yes approves the calculator and prints the result', async () => {
  const out = await runExample('approval-loop.js', ['--yes', 'What is 6*7?']);
  assert.match(out, /#1 user: What is 6\*7\?/);
  assert.match(out, /calculator\(\{"expression":"6\*7"\}\)/);
  assert.match(out, /approved/);
  assert.match(out, /result: The answer is 42\./);
});

test('approval-loop asks on the terminal and takes the answer', async () => {
  const out = await runExample('approval-loop.js', ['What is 6*7?'], 'y\n');
  assert.match(out, /approve calculator\(\{"expression":"6\*7"\}\)\? \[y\/N\]/);
  assert.match(out, /result: The answer is 42\./);
});

test('pipeline: validate → transform → llm with a worker tool, and the reject branch', async () => {
  const fake = ['--model', 'openai:fake', '--base-url', model.url, '--api-key-env', 'STEPWISE_SDK_FAKE_KEY'];
  const out = await runExample('pipeline.js', [...fake, '--input', 'order A-17 is late, bob@EXAMPLE.com']);
  assert.match(out, /yield validation\.checking \{"field":"order"\}/);
  assert.match(out, /yield validation\.checking \{"field":"email"\}/);
  assert.match(out, /progress 0\.5 normalising/);
  assert.match(out, /#2 custom validate \[worker pipeline-example-\d+\]/);
  assert.match(out, /#3 custom transform \[worker/);
  assert.match(out, /tool lookup_order: \{"order":"A-17","status":"shipped yesterday"\} \[worker/);
  assert.match(out, /run completed: Your order: shipped yesterday\./);
  assert.match(out, /state: .*"checks":\["validate: ok","transform: ok"\].*"email":"bob@example\.com"/);

  const bad = await runExample('pipeline.js', [...fake, '--input', 'it is late']);
  assert.match(bad, /#3 custom reject: rejected: no order, no email/);
  assert.doesNotMatch(bad, / llm /);
  assert.match(bad, /run completed/);
});
