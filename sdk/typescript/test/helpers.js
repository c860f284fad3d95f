// Test helpers: a real `stepwise serve` (the binary of STEPWISE_BIN, or one
// built from this tree with `go build`) on a fresh SQLite file, or on the
// PostgreSQL database of STEPWISE_SDK_DB, with the agents of sdk/testdata.

import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, existsSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '../../..');
export const testdata = path.join(repoRoot, 'sdk/testdata');

let builtBin;
export function stepwiseBin() {
  if (process.env.STEPWISE_BIN) return process.env.STEPWISE_BIN;
  if (!builtBin) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'stepwise-sdk-bin-'));
    builtBin = path.join(dir, 'stepwise');
    execFileSync('go', ['build', '-o', builtBin, './cmd/stepwise'], { cwd: repoRoot, stdio: 'inherit' });
  }
  return builtBin;
}

export async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** Polls cond every 20 ms until it returns a truthy value or the deadline passes. */
export async function waitFor(cond, { timeoutMs = 30000, what = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Starts `stepwise serve` with the given agent files (names in sdk/testdata
 * or absolute paths). The database is STEPWISE_SDK_DB when it is a
 * postgres:// DSN, else a SQLite file of a new temporary directory.
 */
export async function startServer({ agents = [], tokens = [], args = [] } = {}) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'stepwise-sdk-'));
  const envDB = process.env.STEPWISE_SDK_DB || '';
  const db = envDB.startsWith('postgres') ? envDB : `sqlite:${path.join(dir, 'stepwise.db')}`;
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const argv = ['--db', db, 'serve', '--addr', `127.0.0.1:${port}`];
  for (const a of agents) {
    const file = path.isAbsolute(a) ? a : path.join(testdata, a);
    if (!existsSync(file)) throw new Error(`no agent file ${file}`);
    argv.push('--agent', file);
  }
  for (const t of tokens) argv.push('--token', t);
  argv.push(...args);
  const server = { url, db, dir, token: tokens[0], log: '' };
  server.start = async () => {
    const proc = spawn(stepwiseBin(), argv, {
      cwd: dir,
      env: { ...process.env, STEPWISE_DB: '', STEPWISE_SERVER: '', STEPWISE_SDK_FAKE_KEY: 'sk-fake' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    proc.stdout.on('data', (b) => (server.log += b));
    proc.stderr.on('data', (b) => (server.log += b));
    const exited = new Promise((resolve) => proc.once('exit', (code, sig) => resolve({ code, sig })));
    server.proc = proc;
    server.exited = exited;
    let gone = false;
    exited.then(() => (gone = true));
    await waitFor(
      async () => {
        if (gone) throw new Error(`stepwise serve exited:\n${server.log}`);
        try {
          const res = await fetch(`${url}/v1/health`, { headers: tokens[0] ? { Authorization: `Bearer ${tokens[0]}` } : {} });
          await res.body?.cancel();
          return res.ok;
        } catch {
          return false;
        }
      },
      { timeoutMs: 60000, what: `stepwise serve on ${url}` },
    );
  };
  /** Stops the server with a signal (SIGTERM: graceful) and waits for it. */
  server.stop = async (signal = 'SIGTERM') => {
    if (!server.proc || server.proc.exitCode !== null || server.proc.signalCode !== null) return;
    server.proc.kill(signal);
    await server.exited;
  };
  await server.start();
  return server;
}

/**
 * A TCP proxy in front of `target` that cuts every connection after a random
 * number of bytes from the server (between minBytes and maxBytes), so that
 * streams break at arbitrary points, inside events too.
 */
export async function cuttingProxy(target, { minBytes = 300, maxBytes = 4000, seed = 1 } = {}) {
  let s = seed >>> 0 || 1;
  const rand = () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4294967296;
  };
  const { hostname, port } = new URL(target);
  const stats = { connections: 0, cuts: 0 };
  const sockets = new Set();
  const srv = net.createServer((down) => {
    stats.connections++;
    const up = net.connect(Number(port), hostname);
    sockets.add(down).add(up);
    let budget = minBytes + Math.floor(rand() * (maxBytes - minBytes));
    down.on('error', () => up.destroy());
    up.on('error', () => down.destroy());
    down.on('close', () => up.destroy());
    up.on('close', () => down.destroy());
    down.pipe(up);
    up.on('data', (chunk) => {
      if (chunk.length < budget) {
        budget -= chunk.length;
        down.write(chunk);
        return;
      }
      down.write(chunk.subarray(0, budget));
      stats.cuts++;
      down.destroy();
      up.destroy();
    });
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${srv.address().port}`,
    stats,
    close: () =>
      new Promise((r) => {
        for (const so of sockets) so.destroy();
        srv.close(r);
      }),
  };
}
