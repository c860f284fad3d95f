// Compiled (never run) by types.test.js with tsc --strict: the declarations
// of src/*.d.ts describe the API, and misuse is a type error.

import {
  Client,
  Invocation,
  StepwiseError,
  RunError,
  Worker,
  defineAgent,
  tool,
  typedYield,
  progress,
  delta,
  askHuman,
  TransientError,
  toolResult,
  type AgentStep,
  type StreamEvent,
  type Step,
  type PendingInput,
  type BreakpointPause,
} from '../src/index.js';

async function clientHalf(): Promise<void> {
  const c = new Client({ baseUrl: 'http://127.0.0.1:7700', token: 't' });
  const inv: Invocation = await c.initiate('a', 'hi', { title: 't', metadata: { k: 1 } });
  const s: AgentStep = await c.nextStep(inv, { timeoutMs: 1000 });
  if (s.type === 'continuation') {
    const st: Step = s.step;
    const seq: number = st.sequence;
    void seq;
  } else if (s.type === 'human_input_request') {
    const name: string | undefined = s.approval?.name;
    void name;
    const when: 'before' | 'after' | undefined = s.breakpoint?.when;
    void when;
    await c.provideHumanInput(inv, s.request_id, { approved: true });
  } else if (s.type === 'result') {
    const v: string = s.value;
    void v;
  } else {
    const r: boolean = s.recoverable;
    void r;
  }
  for await (const step of c.steps(inv)) void step.cursor;
  for await (const ev of c.subscribe({ sessionId: inv.session_id, after: '3:0' })) {
    const e: StreamEvent = ev;
    void e.step?.kind;
  }
  const { sessions, next_cursor } = await c.listSessions({ agent: 'a', limit: 10 });
  void sessions[0]?.id;
  void next_cursor;
  const r = await c.retry('s', { sequence: 2 });
  void r.invocation.cursor;
  await c.replay('s', { liveTools: ['x'] });
  await c.fork('s', { sequence: 2, edit: 'new text' });
  try {
    await c.getRun('x');
  } catch (err) {
    if (err instanceof StepwiseError) void (err.code + err.status);
    if (err instanceof RunError) void err.retryCount;
  }
  const { invocation } = await c.startRun({ agent: 'a', input: 'hi', breakpoints: { before: ['tools'], after: ['step:llm'] } });
  await c.initiate('a', 'hi', { breakpoints: { after: ['*'] } });
  const pending: PendingInput[] = await c.listInputs(invocation.run_id);
  const pause: BreakpointPause | undefined = pending[0]?.request.breakpoint;
  void (pause && pause.step + pause.matched + pause.at);
  const answered: Step = await c.continueRun(invocation.run_id, { step: true, state: { limit: 50 } });
  void answered.outputs;
  await c.continueRun(invocation.run_id);
  // @ts-expect-error: the state a breakpoint's answer merges is an object
  await c.continueRun(invocation.run_id, { state: 'x' });
  // @ts-expect-error: breakpoints are lists of selectors
  await c.startRun({ agent: 'a', breakpoints: { before: 'tools' } });
  // @ts-expect-error: a fork needs its sequence
  await c.fork('s', {});
  // @ts-expect-error: nextStep needs an invocation
  await c.nextStep('run-id');
}

interface OrderState {
  question: string;
  [k: string]: string;
}

function workerHalf(): Worker {
  const agent = defineAgent({
    name: 'orders',
    model: 'openai:gpt-4o-mini',
    startStep: 'validate',
    limits: { maxSteps: 10, stepTimeout: '30s' },
    approvals: { refund: 'always' },
    steps: {
      validate: {
        next: ['llm', 'end'],
        beforeExecute: (ctx) => ctx.runInput.trim(),
        async *execute(ctx, text: string) {
          yield typedYield('validation.checking', { chars: text.length });
          yield progress(0.5, 'half');
          yield delta('x');
          if (ctx.answer === undefined) return askHuman({ prompt: 'ok?' });
          return { next: 'llm', state: { question: text } };
        },
        afterExecute: (_ctx, result) => ({ ...result, annotations: { action: 'validated' } }),
      },
      plain: async (ctx) => ({ next: 'end', state: { seen: ctx.state.question } }),
    },
    tools: [
      tool<{ order: string }>({
        name: 'refund',
        parameters: { type: 'object' },
        async execute(args, ctx) {
          if (!args.order) throw new TransientError('later');
          return toolResult({ output: { refunded: true }, content: `refunded ${args.order} (${ctx.idempotencyKey})` });
        },
      }),
    ],
  });
  // @ts-expect-error: an agent needs a model
  defineAgent({ name: 'x' });
  const state: OrderState = { question: 'q' };
  void state;
  return new Worker({ baseUrl: 'http://127.0.0.1:7700', agents: [agent], concurrency: 2 });
}

void clientHalf;
void workerHalf;
