#!/usr/bin/env node
// The step-by-step client loop with a human approval: start a run, read its
// steps one by one, and answer the approval request it parks on.
//
//   stepwise serve --agent sdk/examples/approval-agent.yaml
//   node sdk/typescript/examples/approval-loop.js "What is 6*7?"        # asks y/N on the terminal
//   node sdk/typescript/examples/approval-loop.js --yes "What is 6*7?"  # approves everything
//
// --url (default $STEPWISE_SERVER or http://127.0.0.1:7700), --token
// (default $STEPWISE_TOKEN), --agent (default approval-demo).

import readline from 'node:readline/promises';
import { parseArgs } from 'node:util';
import { Client } from '../src/index.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    url: { type: 'string', default: process.env.STEPWISE_SERVER || 'http://127.0.0.1:7700' },
    token: { type: 'string', default: process.env.STEPWISE_TOKEN },
    agent: { type: 'string', default: 'approval-demo' },
    yes: { type: 'boolean', default: false },
  },
});

const client = new Client({ baseUrl: values.url, token: values.token });
const rl = values.yes ? undefined : readline.createInterface({ input: process.stdin, output: process.stdout });

const inv = await client.initiate(values.agent, positionals.join(' ') || 'What is 6*7?');
console.log(`run ${inv.run_id} (session ${inv.session_id})`);
for await (const step of client.steps(inv)) {
  switch (step.type) {
    case 'continuation': {
      const s = step.step;
      const calls = (s.tool_calls || []).map((c) => ` → ${c.name}(${JSON.stringify(c.arguments)})`).join('');
      console.log(`#${s.sequence} ${s.kind}${s.content ? `: ${s.content}` : ''}${calls}`);
      break;
    }
    case 'human_input_request': {
      let approved = true;
      if (step.approval) {
        const q = `approve ${step.approval.name}(${JSON.stringify(step.approval.arguments)})? [y/N] `;
        approved = values.yes || /^y(es)?$/i.test((await rl.question(q)).trim());
        await client.provideHumanInput(inv, step.request_id, { approved });
      } else {
        const text = values.yes ? 'yes' : await rl.question(`${step.prompt} `);
        await client.provideHumanInput(inv, step.request_id, text);
      }
      console.log(approved ? 'approved' : 'rejected');
      break;
    }
    case 'result':
      console.log(`result: ${step.value}`);
      break;
  }
}
rl?.close();
