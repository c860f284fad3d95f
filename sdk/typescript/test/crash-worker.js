// A worker process of the Go crash test (TestWorkersCrash/*/typescript in
// cmd/stepwise/workers_test.go): it serves the "shop" agent with this SDK —
// a custom start step "validate" and a tool "charge" whose side effect is a
// line in an execution log — until it is SIGKILLed. The test kills these
// processes and the server at random moments and checks that every task's
// result commits once and that no task executes after its result committed.
//
//   STEPWISE_TEST_WORKER=id STEPWISE_TEST_WORKER_URL=http://… \
//   STEPWISE_TEST_WORKER_MODEL=http://… STEPWISE_TEST_WORKER_LOG=file node test/crash-worker.js

import fs from 'node:fs';
import { Worker, defineAgent, tool, progress } from '../src/index.js';

const env = (name) => {
  const v = process.env[name];
  if (!v) {
    console.error(`crash-worker: ${name} is not set`);
    process.exit(2);
  }
  return v;
};

const id = env('STEPWISE_TEST_WORKER');
const execLog = env('STEPWISE_TEST_WORKER_LOG');
const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
  });
// The wall clock in nanoseconds (the Go side compares with the commit time).
const nowNs = () => BigInt(Math.round((performance.timeOrigin + performance.now()) * 1000)) * 1000n;

const shop = defineAgent({
  name: 'shop',
  model: 'openai:gpt-4o-mini',
  modelOptions: { baseUrl: `${env('STEPWISE_TEST_WORKER_MODEL')}/v1`, apiKeyEnv: 'SHOP_KEY' },
  startStep: 'validate',
  steps: {
    validate: {
      next: ['llm'],
      async *execute() {
        yield progress(undefined, 'validating');
        return { next: 'llm', content: 'valid', state: { validated: true } };
      },
    },
  },
  tools: [
    tool({
      name: 'charge',
      description: 'Charge an order (a side effect)',
      parameters: { type: 'object', properties: { order: { type: 'string' } }, required: ['order'] },
      outputSchema: { type: 'object', required: ['charged'] },
      async execute(args, ctx) {
        fs.appendFileSync(execLog, `${ctx.idempotencyKey} ${nowNs()} ${id}\n`);
        // The side effect's latency, so that kills land during it.
        await sleep(20 + Math.floor(Math.random() * 130), ctx.signal);
        return { charged: true };
      },
    }),
  ],
});

const worker = new Worker({ baseUrl: env('STEPWISE_TEST_WORKER_URL'), workerId: id, agents: [shop], concurrency: 2, pollWaitMs: 5000, log: () => {} });
await worker.run();
