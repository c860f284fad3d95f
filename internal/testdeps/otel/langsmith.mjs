// Drives the official langsmith client against a Stepwise server's
// LangSmith endpoints (the Go tests in otlpingest run it).
// Env: LANGSMITH_ENDPOINT (<server>/langsmith), LANGSMITH_API_KEY, SCENARIO
// (traceable | batch | single), FAKE_URL (the OpenAI-compatible fake, for
// "traceable"), SESSION (the thread id). Prints {"traceId": "..."}.
import OpenAI from 'openai';
import { Client } from 'langsmith';
import { traceable } from 'langsmith/traceable';
import { wrapOpenAI } from 'langsmith/wrappers';
import { getCurrentRunTree } from 'langsmith/singletons/traceable';
import { randomUUID } from 'node:crypto';

const client = new Client({ apiUrl: process.env.LANGSMITH_ENDPOINT, apiKey: process.env.LANGSMITH_API_KEY });
const scenario = process.env.SCENARIO;
let traceId = '';

// traceable: an agent (chain) with a retriever, a wrapped OpenAI client in a
// tool loop and a traced tool; the thread is named by session_id metadata.
async function traced() {
  const openai = wrapOpenAI(new OpenAI({ baseURL: `${process.env.FAKE_URL}/v1`, apiKey: 'k' }), { client });
  const echo = traceable(async (args) => `echo ${JSON.stringify(args)}`, { name: 'echo', run_type: 'tool', client });
  const retrieve = traceable(async (q) => [{ pageContent: `about ${q}` }], { name: 'docs', run_type: 'retriever', client });
  const agent = traceable(async (question) => {
    traceId = getCurrentRunTree().trace_id;
    await retrieve(question);
    const messages = [{ role: 'user', content: question }];
    const tools = [{ type: 'function', function: { name: 'echo', parameters: { type: 'object' } } }];
    for (;;) {
      // The fake streams, as the OpenAI API does with stream: true.
      const stream = await openai.chat.completions.create({ model: 'fake-model', messages: [...messages], tools, stream: true, stream_options: { include_usage: true } });
      const msg = { role: 'assistant', content: '', tool_calls: [] };
      for await (const chunk of stream) {
        const d = chunk.choices?.[0]?.delta;
        if (d?.content) msg.content += d.content;
        for (const tc of d?.tool_calls ?? []) {
          const c = (msg.tool_calls[tc.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
          if (tc.id) c.id = tc.id;
          if (tc.function?.name) c.function.name += tc.function.name;
          if (tc.function?.arguments) c.function.arguments += tc.function.arguments;
        }
      }
      messages.push(msg);
      if (!msg.tool_calls?.length) return msg.content;
      for (const c of msg.tool_calls) {
        messages.push({ role: 'tool', tool_call_id: c.id, content: await echo(JSON.parse(c.function.arguments)) });
      }
    }
  }, { name: 'ls-agent', run_type: 'chain', client, metadata: { session_id: process.env.SESSION } });
  await agent('Echo twice.');
  await client.awaitPendingTraceBatches();
}

// The run tree of one trace: a chain, an llm with a tool call, the tool.
function tree(now) {
  const root = randomUUID(), llm = randomUUID(), tool = randomUUID();
  const t = (ms) => new Date(now + ms).toISOString();
  const dotted = (ms, id) => `${t(ms).replace(/[-:.]/g, '').replace('T', 'T')}${id}`;
  const md = { extra: { metadata: { thread_id: process.env.SESSION } } };
  const rootDot = dotted(0, root);
  const llmExtra = { extra: { metadata: { thread_id: process.env.SESSION, ls_provider: 'openai', ls_model_name: 'gpt-4o-mini' } } };
  // Updates carry the run's extra too, as a RunTree's do: the client's
  // single-run path merges an update over its create.
  return {
    root,
    creates: [
      { id: root, trace_id: root, dotted_order: rootDot, name: 'batch-agent', run_type: 'chain', start_time: t(0), inputs: { question: 'Weather?' }, ...md },
      { id: llm, trace_id: root, parent_run_id: root, dotted_order: `${rootDot}.${dotted(1, llm)}`, name: 'ChatOpenAI', run_type: 'llm', start_time: t(1),
        inputs: { messages: [{ role: 'user', content: 'Weather?' }] }, ...llmExtra },
      { id: tool, trace_id: root, parent_run_id: root, dotted_order: `${rootDot}.${dotted(3, tool)}`, name: 'weather', run_type: 'tool', start_time: t(3),
        inputs: { city: 'Paris' }, ...md },
    ],
    updates: [
      { id: llm, trace_id: root, parent_run_id: root, dotted_order: `${rootDot}.${dotted(1, llm)}`, end_time: t(2),
        outputs: { choices: [{ message: { role: 'assistant', content: '', tool_calls: [{ id: 'call_w', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] }, finish_reason: 'tool_calls' }],
          usage: { prompt_tokens: 11, completion_tokens: 4 } }, ...llmExtra },
      { id: tool, trace_id: root, parent_run_id: root, dotted_order: `${rootDot}.${dotted(3, tool)}`, end_time: t(4), outputs: { output: 'sunny' }, ...md },
      { id: root, trace_id: root, dotted_order: rootDot, end_time: t(5), outputs: { answer: 'sunny' }, ...md },
    ],
  };
}

async function batch() {
  const r = tree(Date.now() - 10_000);
  traceId = r.root;
  // Creates first, updates later, then everything again: the re-send
  // changes nothing.
  await client.batchIngestRuns({ runCreates: r.creates });
  await client.multipartIngestRuns({ runUpdates: r.updates });
  await client.batchIngestRuns({ runCreates: r.creates, runUpdates: r.updates });
}

async function single() {
  const r = tree(Date.now() - 10_000);
  traceId = r.root;
  for (const c of r.creates) await client.createRun(c);
  for (const u of r.updates) await client.updateRun(u.id, u);
  await client.awaitPendingTraceBatches();
}

await { traceable: traced, batch, single }[scenario]();
console.log(JSON.stringify({ traceId }));
