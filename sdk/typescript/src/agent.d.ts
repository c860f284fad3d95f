import type { JSONValue } from './client.js';

declare const KIND: unique symbol;

/** A live report of a running step or tool (docs/workers.md, "While a task runs"). */
export type Report =
  | { name: string; data?: JSONValue } // a typed yield
  | { readonly [KIND]: 'yield'; name: string; data?: JSONValue }
  | { readonly [KIND]: 'delta'; text: string }
  | { readonly [KIND]: 'progress'; fraction?: number; message?: string }
  | { readonly [KIND]: 'event'; name: string; data?: JSONValue }
  | string; // a delta

export declare function typedYield<N extends string, D extends JSONValue>(name: N, data?: D): { readonly [KIND]: 'yield'; name: N; data?: D };
export declare function delta(text: string): Report;
export declare function progress(fraction?: number, message?: string): Report;
export declare function stepEvent(name: string, data?: JSONValue): Report;

export interface HumanInputSpec {
  prompt: string;
  schema?: JSONValue;
  context?: Record<string, JSONValue>;
  expires_at?: string;
  on_expire?: 'fail' | 'default';
  default?: JSONValue;
}

export interface AskHuman {
  readonly [KIND]: 'input';
  request: HumanInputSpec;
  state?: Record<string, JSONValue>;
  content?: string;
}

/** Parks the run on a human-input request; the answer re-invokes the step (or tool) with ctx.answer set. A tool's request has prompt, schema and context only. */
export declare function askHuman(request: HumanInputSpec, o?: { state?: Record<string, JSONValue>; content?: string }): AskHuman;

export declare class TransientError extends Error {
  constructor(message: string, o?: { code?: string });
  readonly class: 'transient';
  code?: string;
}

export declare class PermanentError extends Error {
  constructor(message: string, o?: { code?: string });
  readonly class: 'permanent';
  code?: string;
}

/** What a handler sees of its task. */
export interface TaskContext<S = Record<string, JSONValue>> {
  task: Record<string, unknown>;
  workerId: string;
  agent: string;
  runId: string;
  sessionId: string;
  stepId?: string;
  /** Stable across re-executions of the task after a crash: make side effects idempotent with it. */
  idempotencyKey: string;
  attempt: number;
  /** The run's custom state. */
  state: S;
  runInput: string;
  messages?: { role: string; content?: string; [k: string]: unknown }[];
  /** Set when the step (or tool call) is re-invoked with the answer of its human-input request. */
  answer?: JSONValue;
  /** A tool call's answers so far, oldest first (a call may ask several times). */
  answers: JSONValue[];
  request?: HumanInputSpec;
  requestId?: string;
  toolCallId?: string;
  /** Aborts when the run no longer needs the task or the worker stops. */
  signal: AbortSignal;
  report(r: Report): void;
  delta(text: string): void;
  progress(fraction?: number, message?: string): void;
  yield(name: string, data?: JSONValue): void;
  event(name: string, data?: JSONValue): void;
}

/** Where the run goes after a step, and its state update (merged by the agent's reducers). */
export interface StepReturn<S = Record<string, JSONValue>> {
  next: string;
  state?: Partial<S>;
  content?: string;
  output?: JSONValue;
  decision?: { purpose?: string; options?: string[]; choice: string };
  annotations?: { state?: string; goal?: string; action?: string };
  usage?: { model: string; input_tokens?: number; output_tokens?: number; cached_tokens?: number; reasoning_tokens?: number }[];
  costUsd?: number;
}

/** A custom step in the beforeExecute / execute / afterExecute shape. */
export interface StepDefinition<S = Record<string, JSONValue>, P = unknown, Y extends Report = Report> {
  description?: string;
  /** The steps it may route to (for the graph). */
  next?: string[];
  /** Put the run's model context in ctx.messages. */
  messages?: boolean;
  beforeExecute?(ctx: TaskContext<S>): P | Promise<P>;
  execute(ctx: TaskContext<S>, prepared: P): AsyncGenerator<Y, StepReturn<S> | AskHuman, void> | Generator<Y, StepReturn<S> | AskHuman, void> | Promise<StepReturn<S> | AskHuman> | StepReturn<S> | AskHuman;
  afterExecute?(ctx: TaskContext<S>, result: StepReturn<S>): StepReturn<S> | AskHuman | void | Promise<StepReturn<S> | AskHuman | void>;
}

export interface ToolResult {
  output?: JSONValue;
  content?: string;
  isError?: boolean;
  attachments?: { name?: string; contentType?: string; kind?: 'screenshot' | 'image' | 'file'; data: Uint8Array }[];
}

export interface ToolDefinition<A = Record<string, JSONValue>> {
  name: string;
  description?: string;
  /** JSON Schema of the arguments. */
  parameters?: JSONValue;
  /** JSON Schema the output must satisfy (checked by the server). */
  outputSchema?: JSONValue;
  execute(args: A, ctx: TaskContext): unknown;
}

export declare function tool<A = Record<string, JSONValue>>(t: ToolDefinition<A>): ToolDefinition<A>;

type Duration = string | number; // a Go duration ("30s") or milliseconds

export interface AgentOptions {
  name: string;
  /** provider:model, e.g. "openai:gpt-4o-mini"; the model call runs on the server. */
  model: string;
  description?: string;
  instructions?: string;
  modelOptions?: { baseUrl?: string; apiKeyEnv?: string; temperature?: number; maxTokens?: number; timeout?: Duration };
  startStep?: string;
  steps?: Record<string, StepDefinition<any, any, any> | StepDefinition<any, any, any>['execute']>;
  tools?: ToolDefinition<any>[];
  /** Built-in tools of the agent file (calculator, clock, http_get…). */
  builtinTools?: (string | Record<string, JSONValue>)[];
  limits?: { maxSteps?: number; stepTimeout?: Duration; runTimeout?: Duration; maxParallelTools?: number; maxDepth?: number };
  retry?: { maxAttempts?: number; initialInterval?: Duration; maxInterval?: Duration };
  approvals?: Record<string, 'always' | 'never'>;
  reducers?: Record<string, 'replace' | 'append' | 'merge' | 'sum'>;
  onUpdate?: 'continue' | 'restart' | 'fail';
  stepMap?: Record<string, string>;
  prices?: Record<string, { input?: number; output?: number; cached?: number }>;
  metadata?: Record<string, JSONValue>;
  /** Further agent-file fields, as JSON (docs/agent_file.md). */
  definition?: Record<string, JSONValue>;
}

export interface AgentDefinition {
  readonly name: string;
  readonly definition: Record<string, JSONValue>;
  readonly steps: Map<string, StepDefinition<any, any, any>>;
  readonly tools: Map<string, ToolDefinition<any>>;
  registration(): Record<string, JSONValue>;
}

export declare function defineAgent(o: AgentOptions): AgentDefinition;
