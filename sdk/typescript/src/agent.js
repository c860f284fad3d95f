// Defining an agent a worker serves: its definition (an agent file as a
// JSON object, docs/agent_file.md) and the handlers of its custom steps and
// tools (docs/workers.md).

const NAME = /^[a-z0-9_-]{1,64}$/;
const STEP = /^[A-Za-z0-9_.:-]{1,64}$/;
const TOOL = /^[A-Za-z0-9_.:/-]{1,128}$/;

const ms = (v) => (typeof v === 'number' ? `${v}ms` : v);

/** A typed yield of a step: a `step_yield` event {name, data}. */
export const typedYield = (name, data) => ({ [KIND]: 'yield', name, data });
/** Streamed text of a step: `step_delta` events. */
export const delta = (text) => ({ [KIND]: 'delta', text });
/** Progress of a step: fraction in [0, 1] and/or a message. */
export const progress = (fraction, message) => ({ [KIND]: 'progress', fraction, message });
/** An event inside the step (recorded when the agent records step events). */
export const stepEvent = (name, data) => ({ [KIND]: 'event', name, data });

export const KIND = Symbol.for('stepwise.report');

/**
 * What a step returns to park the run on a human-input request; the answer
 * re-invokes the step with ctx.answer set.
 */
export const askHuman = (request, { state, content } = {}) => ({ [KIND]: 'input', request, state, content });

/** A failure the agent's retry policy retries. */
export class TransientError extends Error {
  constructor(message, { code } = {}) {
    super(message);
    this.name = 'TransientError';
    this.class = 'transient';
    this.code = code;
  }
}

/** A failure that fails the step at once (the default for any thrown error). */
export class PermanentError extends Error {
  constructor(message, { code } = {}) {
    super(message);
    this.name = 'PermanentError';
    this.class = 'permanent';
    this.code = code;
  }
}

function definitionOf(o) {
  const d = { ...(o.definition || {}) };
  d.name = o.name;
  if (o.description !== undefined) d.description = o.description;
  if (o.instructions !== undefined) d.instructions = o.instructions;
  d.model = o.model;
  if (o.modelOptions) {
    const m = o.modelOptions;
    d.model_options = {
      base_url: m.baseUrl,
      api_key_env: m.apiKeyEnv,
      temperature: m.temperature,
      max_tokens: m.maxTokens,
      timeout: ms(m.timeout),
    };
  }
  if (o.startStep) d.start_step = o.startStep;
  if (o.builtinTools) d.tools = o.builtinTools;
  if (o.limits) {
    const l = o.limits;
    d.limits = {
      max_steps: l.maxSteps,
      step_timeout: ms(l.stepTimeout),
      run_timeout: ms(l.runTimeout),
      max_parallel_tools: l.maxParallelTools,
      max_depth: l.maxDepth,
    };
  }
  if (o.retry) {
    const r = o.retry;
    d.retry = { max_attempts: r.maxAttempts, initial_interval: ms(r.initialInterval), max_interval: ms(r.maxInterval) };
  }
  if (o.approvals) d.approvals = o.approvals;
  if (o.reducers) d.reducers = o.reducers;
  if (o.onUpdate) d.on_update = o.onUpdate;
  if (o.stepMap) d.step_map = o.stepMap;
  if (o.prices) d.prices = o.prices;
  if (o.metadata) d.metadata = o.metadata;
  return JSON.parse(JSON.stringify(d)); // drops the undefined fields
}

/**
 * An agent served by a worker.
 * @param {import('./agent.d.ts').AgentOptions} o
 */
export function defineAgent(o) {
  if (!o || !NAME.test(o.name || '')) throw new TypeError(`stepwise: agent name ${JSON.stringify(o?.name)}: want 1-64 of a-z, 0-9, _ and -`);
  if (!o.model) throw new TypeError(`stepwise: agent ${o.name}: model is required (provider:model)`);
  const steps = new Map();
  for (const [name, s] of Object.entries(o.steps || {})) {
    if (!STEP.test(name)) throw new TypeError(`stepwise: step name ${JSON.stringify(name)}: want 1-64 of letters, digits, _ . : -`);
    const st = typeof s === 'function' ? { execute: s } : s;
    if (typeof st.execute !== 'function') throw new TypeError(`stepwise: step ${name}: execute is required`);
    steps.set(name, st);
  }
  const tools = new Map();
  for (const t of o.tools || []) {
    if (!TOOL.test(t.name || '')) throw new TypeError(`stepwise: tool name ${JSON.stringify(t.name)}: want 1-128 of letters, digits, _ . : / -`);
    if (typeof t.execute !== 'function') throw new TypeError(`stepwise: tool ${t.name}: execute is required`);
    if (tools.has(t.name)) throw new TypeError(`stepwise: tool ${t.name} defined twice`);
    tools.set(t.name, t);
  }
  if (o.startStep && !steps.has(o.startStep) && !['llm', 'tools'].includes(o.startStep)) {
    throw new TypeError(`stepwise: agent ${o.name}: start step ${o.startStep} is not one of its steps`);
  }
  const definition = definitionOf(o);
  return {
    name: o.name,
    definition,
    steps,
    tools,
    /** The body of the agent in POST /v1/workers/register. */
    registration() {
      return {
        definition,
        steps: [...steps].map(([name, s]) => ({ name, description: s.description, next: s.next, messages: s.messages || undefined })),
        tools: [...tools.values()].map((t) => ({
          name: t.name,
          description: t.description,
          parameters: t.parameters,
          output_schema: t.outputSchema,
        })),
      };
    },
  };
}

/** A tool a worker serves: the model calls it with arguments matching `parameters`. */
export function tool(t) {
  return t;
}
