// The examples run against a real server and do what their comments say.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { startServer, repoRoot } from './helpers.js';

let server;

before(async () => {
  server = await startServer({ agents: [path.join(repoRoot, 'sdk/examples/approval-agent.yaml')] });
});

after(async () => {
  await server?.stop();
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
