// Drives real OpenTelemetry exporters and GenAI instrumentations against a
// Stepwise server's OTLP receiver (the Go tests in otlpingest run it).
// Env: STEPWISE_URL (http://host:port), STEPWISE_TOKEN, SCENARIO
// (semconv-proto | semconv-http | openai | vercel | langchain | oi-openai),
// FAKE_URL (the OpenAI-compatible fake, for "openai" and "oi-openai"). Prints {"traceId": "..."}.
import { trace, context, SpanStatusCode } from '@opentelemetry/api';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { SimpleSpanProcessor, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as JSONExporter } from '@opentelemetry/exporter-trace-otlp-http';

const base = process.env.STEPWISE_URL;
const headers = process.env.STEPWISE_TOKEN ? { Authorization: `Bearer ${process.env.STEPWISE_TOKEN}` } : {};
const scenario = process.env.SCENARIO;
const exporter = scenario === 'semconv-http'
  ? new JSONExporter({ url: `${base}/v1/traces`, headers })
  : new ProtoExporter({ url: `${base}/v1/traces`, headers, compression: scenario === 'openai' ? 'gzip' : 'none' });
const provider = new NodeTracerProvider({
  // vercel and langchain keep the SDK's default service name
  // (unknown_service:node): the agent name then comes from the spans.
  resource: resourceFromAttributes(['vercel', 'langchain'].includes(scenario) ? {} : { 'service.name': `svc-${scenario}` }),
  // Batches of several spans, exported out of order with respect to start time.
  spanProcessors: [new BatchSpanProcessor(exporter, { maxExportBatchSize: 3, scheduledDelayMillis: 50 })],
});
provider.register();
const tracer = trace.getTracer('stepwise-test');
let traceId = '';

async function semconv() {
  await tracer.startActiveSpan('invoke_agent weather', { attributes: {
    'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'weather', 'gen_ai.conversation.id': `conv-${scenario}` } }, async (root) => {
    traceId = root.spanContext().traceId;
    // The conversation id is on every GenAI span (the semconv's rule when it
    // is known), so that the first export already names the session.
    const conv = { 'gen_ai.conversation.id': `conv-${scenario}` };
    const user = { role: 'user', parts: [{ type: 'text', content: 'Weather in Paris?' }] };
    const call = { role: 'assistant', parts: [{ type: 'tool_call', id: 'call_1', name: 'get_weather', arguments: { city: 'Paris' } }] };
    const chat1 = tracer.startSpan('chat gpt-test', { attributes: {
      ...conv, 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-test', 'gen_ai.provider.name': 'openai',
      'gen_ai.input.messages': JSON.stringify([{ role: 'system', parts: [{ type: 'text', content: 'Be brief.' }] }, user]),
      'gen_ai.output.messages': JSON.stringify([{ ...call, finish_reason: 'tool_call' }]),
      'gen_ai.usage.input_tokens': 20, 'gen_ai.usage.output_tokens': 7, 'gen_ai.response.finish_reasons': ['tool_call'] } });
    chat1.end();
    const tool = tracer.startSpan('execute_tool get_weather', { attributes: {
      ...conv, 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'get_weather', 'gen_ai.tool.call.id': 'call_1',
      'gen_ai.tool.call.arguments': '{"city":"Paris"}', 'gen_ai.tool.call.result': '{"temp":21}' } });
    tool.end();
    const chat2 = tracer.startSpan('chat gpt-test', { attributes: {
      ...conv, 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-test', 'gen_ai.response.model': 'gpt-test-1', 'gen_ai.provider.name': 'openai',
      'gen_ai.input.messages': JSON.stringify([user, call, { role: 'tool', parts: [{ type: 'tool_call_response', id: 'call_1', response: { temp: 21 } }] }]),
      'gen_ai.output.messages': JSON.stringify([{ role: 'assistant', parts: [{ type: 'text', content: '21 degrees in Paris.' }], finish_reason: 'stop' }]),
      'gen_ai.usage.input_tokens': 40, 'gen_ai.usage.output_tokens': 9 } });
    chat2.end();
    const bad = tracer.startSpan('execute_tool get_forecast', { attributes: {
      ...conv, 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'get_forecast', 'gen_ai.tool.call.id': 'call_2' } });
    bad.setStatus({ code: SpanStatusCode.ERROR, message: 'forecast service down' });
    bad.end();
    tracer.startSpan('GET /unrelated').end(); // no convention: ignored
    root.end();
  });
}

async function openaiLoop() {
  const { OpenAIInstrumentation } = await import('@opentelemetry/instrumentation-openai');
  const { registerInstrumentations } = await import('@opentelemetry/instrumentation');
  const { LoggerProvider, BatchLogRecordProcessor } = await import('@opentelemetry/sdk-logs');
  const { OTLPLogExporter } = await import('@opentelemetry/exporter-logs-otlp-proto');
  const logs = await import('@opentelemetry/api-logs');
  const loggerProvider = new LoggerProvider({
    resource: resourceFromAttributes({ 'service.name': 'svc-openai' }),
    processors: [new BatchLogRecordProcessor({ exporter: new OTLPLogExporter({ url: `${base}/v1/logs`, headers }), maxExportBatchSize: 4, scheduledDelayMillis: 50 })],
  });
  logs.logs.setGlobalLoggerProvider(loggerProvider);
  registerInstrumentations({ instrumentations: [new OpenAIInstrumentation({ captureMessageContent: true })] });
  // Loaded through require so that the instrumentation's require hook
  // patches it (an ESM import would need the import-in-the-middle loader).
  const { createRequire } = await import('node:module');
  const openaiModule = createRequire(import.meta.url)('openai');
  const OpenAI = openaiModule.OpenAI ?? openaiModule.default ?? openaiModule;
  const client = new OpenAI({ apiKey: 'test', baseURL: `${process.env.FAKE_URL}/v1` });
  const tools = [{ type: 'function', function: { name: 'echo', description: 'echo', parameters: { type: 'object', properties: { n: { type: 'number' } } } } }];
  await tracer.startActiveSpan('invoke_agent echo-agent', { attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'echo-agent' } }, async (root) => {
    traceId = root.spanContext().traceId;
    const messages = [{ role: 'system', content: 'You echo.' }, { role: 'user', content: 'Echo three times.' }];
    for (let i = 0; i < 10; i++) {
      const stream = await client.chat.completions.create({ model: 'fake-model', messages, tools, stream: true, stream_options: { include_usage: true } });
      let content = ''; const calls = [];
      for await (const chunk of stream) {
        const d = chunk.choices[0]?.delta;
        if (!d) continue;
        if (d.content) content += d.content;
        for (const tc of d.tool_calls ?? []) {
          calls[tc.index] ??= { id: tc.id, type: 'function', function: { name: tc.function?.name ?? '', arguments: '' } };
          calls[tc.index].function.arguments += tc.function?.arguments ?? '';
        }
      }
      if (calls.length === 0) break;
      messages.push({ role: 'assistant', content: null, tool_calls: calls });
      for (const c of calls) messages.push({ role: 'tool', tool_call_id: c.id, content: `echo ${c.function.arguments}` });
    }
    root.end();
  });
  await loggerProvider.forceFlush();
  await loggerProvider.shutdown();
}

// oiOpenAI: @arizeai/openinference-instrumentation-openai over the openai
// client and a tool traced with traceTool of @arizeai/openinference-core (a
// TOOL span without the call's id), in a tool loop of one call.
async function oiOpenAI() {
  const { OpenAIInstrumentation } = await import('@arizeai/openinference-instrumentation-openai');
  const { traceTool } = await import('@arizeai/openinference-core');
  const { createRequire } = await import('node:module');
  const openaiModule = createRequire(import.meta.url)('openai');
  const instrumentation = new OpenAIInstrumentation();
  instrumentation.manuallyInstrument(openaiModule);
  const OpenAI = openaiModule.OpenAI ?? openaiModule.default ?? openaiModule;
  const client = new OpenAI({ apiKey: 'test', baseURL: `${process.env.FAKE_URL}/v1` });
  const tools = [{ type: 'function', function: { name: 'echo', description: 'echo', parameters: { type: 'object', properties: { n: { type: 'number' } } } } }];
  const echo = traceTool(async (args) => `echo ${JSON.stringify(args)}`, { name: 'echo' });
  await tracer.startActiveSpan('agent', { attributes: { 'openinference.span.kind': 'AGENT', 'session.id': 'oi-openai-session' } }, async (root) => {
    traceId = root.spanContext().traceId;
    const messages = [{ role: 'user', content: 'Echo once.' }];
    for (let i = 0; i < 5; i++) {
      // The fake streams its answers.
      const stream = await client.chat.completions.create({ model: 'fake-model', messages, tools, stream: true, stream_options: { include_usage: true } });
      const calls = [];
      for await (const chunk of stream) {
        for (const tc of chunk.choices[0]?.delta?.tool_calls ?? []) {
          calls[tc.index] ??= { id: tc.id, type: 'function', function: { name: tc.function?.name ?? '', arguments: '' } };
          calls[tc.index].function.arguments += tc.function?.arguments ?? '';
        }
      }
      if (calls.length === 0) break;
      messages.push({ role: 'assistant', content: null, tool_calls: calls });
      for (const c of calls) messages.push({ role: 'tool', tool_call_id: c.id, content: await echo(JSON.parse(c.function.arguments)) });
    }
    root.end();
  });
}

async function vercel() {
  const { generateText, tool, stepCountIs } = await import('ai');
  const { MockLanguageModelV3 } = await import('ai/test');
  const { z } = await import('zod');
  let call = 0;
  const usage = (i, o) => ({ inputTokens: { total: i, noCache: i, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: o, text: o, reasoning: 0 } });
  const model = new MockLanguageModelV3({ doGenerate: async () => {
    call++;
    if (call === 1) return { content: [{ type: 'tool-call', toolCallId: 'tc-1', toolName: 'add', input: '{"a":2,"b":3}' }], finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage: usage(10, 4), warnings: [] };
    return { content: [{ type: 'text', text: 'The sum is 5.' }], finishReason: { unified: 'stop', raw: 'stop' }, usage: usage(25, 6), warnings: [] };
  } });
  await tracer.startActiveSpan('vercel-test', async (outer) => {
    traceId = outer.spanContext().traceId;
    outer.end();
  });
  // generateText starts its own root span (a new trace): that trace is the session.
  const res = await generateText({ model, prompt: 'What is 2+3?', stopWhen: stepCountIs(5),
    tools: { add: tool({ description: 'add', inputSchema: z.object({ a: z.number(), b: z.number() }), execute: async ({ a, b }) => ({ sum: a + b }) }) },
    experimental_telemetry: { isEnabled: true, functionId: 'calculator', recordInputs: true, recordOutputs: true } });
  if (res.text !== 'The sum is 5.') throw new Error(`unexpected text ${res.text}`);
  traceId = '';
}

async function langchain() {
  const { LangChainInstrumentation } = await import('@arizeai/openinference-instrumentation-langchain');
  const CallbackManagerModule = await import('@langchain/core/callbacks/manager');
  new LangChainInstrumentation().manuallyInstrument(CallbackManagerModule);
  const { BaseChatModel } = await import('@langchain/core/language_models/chat_models');
  // A chat model that answers from a script, one response per call.
  class ScriptedChat extends BaseChatModel {
    constructor(responses) { super({}); this.responses = responses; this.calls = 0; }
    _llmType() { return 'scripted'; }
    async _generate() {
      const message = this.responses[this.calls++];
      return { generations: [{ text: typeof message.content === 'string' ? message.content : '', message }] };
    }
  }
  const { AIMessage, HumanMessage } = await import('@langchain/core/messages');
  const { tool } = await import('@langchain/core/tools');
  const { z } = await import('zod');
  const lookup = tool(async ({ q }) => `found ${q}`, { name: 'lookup', description: 'look up', schema: z.object({ q: z.string() }) });
  const model = new ScriptedChat([
    new AIMessage({ content: '', tool_calls: [{ id: 'lc-1', name: 'lookup', args: { q: 'otel' } }] }),
    new AIMessage('OTel is found.'),
  ]);
  await tracer.startActiveSpan('agent', { attributes: { 'openinference.span.kind': 'AGENT', 'session.id': 'lc-session' } }, async (root) => {
    traceId = root.spanContext().traceId;
    const messages = [new HumanMessage('What is otel?')];
    const ai1 = await model.invoke(messages);
    messages.push(ai1);
    for (const tc of ai1.tool_calls) messages.push(await lookup.invoke({ ...tc, type: 'tool_call' }));
    const ai2 = await model.invoke(messages);
    messages.push(ai2);
    root.end();
  });
}

const run = { 'semconv-proto': semconv, 'semconv-http': semconv, openai: openaiLoop, vercel, langchain, 'oi-openai': oiOpenAI }[scenario];
if (!run) throw new Error(`unknown scenario ${scenario}`);
await run();
await provider.forceFlush();
await provider.shutdown();
console.log(JSON.stringify({ traceId }));
