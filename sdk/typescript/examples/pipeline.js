#!/usr/bin/env node
// A validation → transform → LLM agent served by a worker: two custom steps
// with `next` routing (an invalid ticket goes to `reject` and never reaches
// the model), typed yields and progress while they run, a state update each,
// and a tool the model calls, all in this process; the model call itself
// runs on the server.
//
//   stepwise serve
//   OPENAI_API_KEY=… node sdk/typescript/examples/pipeline.js                      # serve until SIGTERM
//   node sdk/typescript/examples/pipeline.js --input 'order A-17 late, bob@EXAMPLE.com'  # serve, start one run, print it, stop
//
// --url (default $STEPWISE_SERVER or http://127.0.0.1:7700), --token ($STEPWISE_TOKEN),
// --model (default openai:gpt-4o-mini), --base-url and --api-key-env for an OpenAI-compatible server.

import { parseArgs } from 'node:util';
import { Client, Worker, defineAgent, tool, typedYield, progress } from '../src/index.js';

const { values } = parseArgs({
  options: {
    url: { type: 'string', default: process.env.STEPWISE_SERVER || 'http://127.0.0.1:7700' },
    token: { type: 'string', default: process.env.STEPWISE_TOKEN },
    model: { type: 'string', default: 'openai:gpt-4o-mini' },
    'base-url': { type: 'string' },
    'api-key-env': { type: 'string' },
    input: { type: 'string' },
  },
});

const EMAIL = /[^\s@,]+@[^\s@,]+\.[a-z]{2,}/i;
const ORDER = /\b[A-Z]-\d+\b/;

export const agent = defineAgent({
  name: 'ticket-pipeline',
  description: 'Validates a support ticket, normalises it, and has the model answer it.',
  instructions: 'You answer support tickets. Look the order up with lookup_order before answering. Be brief.',
  model: values.model,
  modelOptions: values['base-url'] ? { baseUrl: values['base-url'], apiKeyEnv: values['api-key-env'] } : undefined,
  startStep: 'validate',
  limits: { maxSteps: 20, stepTimeout: '30s' },
  reducers: { checks: 'append' },
  steps: {
    validate: {
      description: 'Checks that the ticket names an order and an email address.',
      next: ['transform', 'reject'],
      beforeExecute: (ctx) => ctx.runInput.trim(),
      async *execute(ctx, text) {
        const problems = [];
        for (const [field, re] of [['order', ORDER], ['email', EMAIL]]) {
          yield typedYield('validation.checking', { field });
          if (!re.test(text)) problems.push(`no ${field}`);
        }
        if (problems.length) return { next: 'reject', state: { problems, checks: ['validate: failed'] } };
        return { next: 'transform', state: { checks: ['validate: ok'] } };
      },
      afterExecute: (ctx, result) => ({ ...result, annotations: { action: `route to ${result.next}` } }),
    },
    transform: {
      description: 'Normalises the ticket into {order, email, text}.',
      next: ['llm'],
      async *execute(ctx) {
        yield progress(0.5, 'normalising');
        const text = ctx.runInput.trim();
        const ticket = { order: text.match(ORDER)[0], email: text.match(EMAIL)[0].toLowerCase(), text };
        return { next: 'llm', state: { ticket, checks: ['transform: ok'] }, output: ticket };
      },
    },
    reject: {
      description: 'Ends the run without the model.',
      execute: (ctx) => ({ next: 'end', content: `rejected: ${ctx.state.problems.join(', ')}`, output: { rejected: ctx.state.problems } }),
    },
  },
  tools: [
    tool({
      name: 'lookup_order',
      description: 'Look an order up by its id (like A-17).',
      parameters: { type: 'object', properties: { order: { type: 'string' } }, required: ['order'], additionalProperties: false },
      outputSchema: { type: 'object', properties: { status: { type: 'string' } }, required: ['order', 'status'] },
      execute: async ({ order }) => ({ order, status: order.endsWith('7') ? 'shipped yesterday' : 'being packed' }),
    }),
  ],
});

const worker = new Worker({ baseUrl: values.url, token: values.token, agents: [agent], workerId: `pipeline-example-${process.pid}` });
const serving = worker.run();

if (values.input !== undefined) {
  const client = new Client({ baseUrl: values.url, token: values.token });
  await worker.register();
  const inv = await client.initiate('ticket-pipeline', values.input);
  for await (const ev of client.subscribe({ runId: inv.run_id })) {
    if (ev.type === 'step_yield') console.log(`  yield ${ev.yield.name} ${JSON.stringify(ev.yield.data)}`);
    if (ev.type === 'step_progress') console.log(`  progress ${ev.progress.fraction} ${ev.progress.message ?? ''}`);
    if (ev.type === 'step_completed') {
      const s = ev.step;
      console.log(`#${s.sequence} ${s.kind} ${s.tool_name || s.name}${s.content ? `: ${s.content}` : ''}${s.metadata?.worker ? ` [worker ${s.metadata.worker}]` : ''}`);
    }
    if (ev.type === 'run_finished') console.log(`run ${ev.run.status}: ${ev.run.output ?? ''}`);
  }
  console.log(`state: ${JSON.stringify((await client.getRun(inv.run_id)).state)}`);
  await worker.stop();
}
await serving;
