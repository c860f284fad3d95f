// Types of the client half. Records are the server's JSON, unchanged
// (docs/http_api.md, docs/step_format.md): snake_case fields.

export type JSONValue = null | boolean | number | string | JSONValue[] | { [k: string]: JSONValue };

export interface ToolCall {
  id: string;
  name: string;
  arguments: JSONValue;
}

export interface StepError {
  message: string;
  cause?: string;
  class?: 'transient' | 'permanent';
  attempt?: number;
  recoverable?: boolean;
  code?: string;
}

export interface StepMetrics {
  started_at?: string;
  finished_at?: string;
  duration_us?: number;
  first_token_latency_us?: number;
  input_tokens?: number;
  output_tokens?: number;
  cached_tokens?: number;
  reasoning_tokens?: number;
  cost?: number;
  model?: string;
  provider?: string;
  attempt?: number;
}

export type StepKind = 'user' | 'llm' | 'tool' | 'agent' | 'input' | 'decision' | 'custom' | 'error' | 'system';

/** A step in the wire format of docs/step_format.md (version 1). */
export interface Step {
  v: number;
  id: string;
  session_id: string;
  run_id: string;
  sequence: number;
  parent_id?: string;
  hop: number;
  kind: StepKind;
  name: string;
  status: 'completed' | 'failed' | 'waiting' | 'expired' | 'cancelled';
  role?: 'user' | 'assistant' | 'tool';
  content?: string;
  reasoning?: string;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  tool_name?: string;
  inputs?: JSONValue;
  outputs?: JSONValue;
  state_patch?: JSONValue;
  error?: StepError;
  metrics?: StepMetrics;
  annotations?: Record<string, string>;
  replay?: 'reused' | 'live';
  fingerprint?: string;
  progress?: { fraction?: number; message?: string };
  metadata?: Record<string, JSONValue>;
  created_at: string;
}

export type RunStatus = 'queued' | 'running' | 'waiting' | 'completed' | 'failed' | 'cancelled';

export interface Run {
  id: string;
  session_id: string;
  agent: string;
  hop: number;
  status: RunStatus;
  cursor: string;
  input?: string;
  output?: string;
  error?: StepError;
  step_count: number;
  state?: Record<string, JSONValue>;
  options?: Record<string, JSONValue>;
  created_at: string;
  updated_at: string;
  [k: string]: unknown;
}

export interface Session {
  id: string;
  agent?: string;
  title?: string;
  parent_session_id?: string;
  fork_sequence?: number;
  metadata?: Record<string, JSONValue>;
  created_at: string;
  updated_at: string;
  [k: string]: unknown;
}

export interface Agent {
  name: string;
  description?: string;
  instructions?: string;
  model?: string;
  tools: { name: string; description?: string; parameters?: JSONValue }[];
  sub_agents?: string[];
  steps?: string[];
  start_step: string;
  after_llm: string;
  approvals?: Record<string, 'always' | 'never'>;
  limits: { max_steps: number; step_timeout_ms: number; run_timeout_ms?: number; max_parallel_tools: number; max_depth: number };
  version?: string;
  on_update?: string;
}

export interface Continuation {
  type: 'continuation';
  cursor: string;
  status: 'running' | 'waiting';
  current_step: string;
  progress: number | null;
  progress_message?: string;
  step: Step;
}

export interface HumanInputRequest {
  type: 'human_input_request';
  cursor: string;
  request_id: string;
  prompt: string;
  schema?: JSONValue;
  context?: Record<string, JSONValue>;
  approval?: ToolCall;
  expires_at?: string;
  /** Set when the request is a breakpoint's pause; answer it with continueRun. */
  breakpoint?: BreakpointPause;
}

export interface Result {
  type: 'result';
  cursor: string;
  value: string;
  metadata?: Record<string, JSONValue>;
}

export interface ErrorStep {
  type: 'error';
  cursor: string;
  message: string;
  cause?: string;
  retry_count: number;
  recoverable: boolean;
}

/** What nextStep returns: one of the four steps of the client protocol. */
export type AgentStep = Continuation | HumanInputRequest | Result | ErrorStep;

export type EventType =
  | 'run_started'
  | 'step_started'
  | 'step_delta'
  | 'step_progress'
  | 'step_yield'
  | 'step_reset'
  | 'step_completed'
  | 'run_waiting'
  | 'run_finished';

/** One event of a session or run stream; `id` is its position SEQ:IDX. */
export interface StreamEvent {
  id: string;
  type: EventType;
  session_id: string;
  run_id: string;
  time: string;
  step_name?: string;
  delta?: { content?: string; reasoning?: string; [k: string]: unknown };
  step?: Step;
  run?: Run;
  progress?: { fraction?: number; message?: string };
  yield?: { name: string; data?: JSONValue };
  reset?: { attempt: number; reason: string; retrying: boolean };
}

/**
 * Pause a run before or after the steps the selectors select: a step name,
 * a kind, a tool name, `*`, or `step:NAME`, `kind:KIND`, `tool:NAME`
 * (docs/breakpoints.md).
 */
export interface Breakpoints {
  before?: string[];
  after?: string[];
}

/** Where a run paused at a breakpoint. */
export interface BreakpointPause {
  when: 'before' | 'after';
  /** The step the run paused before or after. */
  step: string;
  kind?: StepKind;
  /** The tool calls of a tools step. */
  tools?: string[];
  /** The selector that matched, or "step" when the previous answer stepped. */
  matched: string;
  /** The run's state at the pause. */
  state?: JSONValue;
  /** The run's step count with the pause recorded. */
  at: number;
}

/** The answer to a breakpoint's pause (continueRun sends it). */
export interface BreakpointAnswer {
  action?: 'continue' | 'step';
  state?: Record<string, JSONValue>;
}

export interface PendingInput {
  request_id: string;
  run_id: string;
  session_id: string;
  request: {
    prompt: string;
    schema?: JSONValue;
    context?: Record<string, JSONValue>;
    approval?: ToolCall;
    expires_at?: string;
    /** Set when the request is a breakpoint's pause. */
    breakpoint?: BreakpointPause;
  };
}

export interface ClientOptions {
  baseUrl: string;
  /** A bearer token of the server (`stepwise serve --token`). */
  token?: string;
  fetch?: typeof fetch;
}

export interface CallOptions {
  signal?: AbortSignal;
}

export interface StartRunOptions extends CallOptions {
  sessionId?: string;
  state?: Record<string, JSONValue>;
  title?: string;
  continue?: boolean;
  metadata?: Record<string, JSONValue>;
  /** Pause the run before or after chosen steps (docs/breakpoints.md). */
  breakpoints?: Breakpoints;
}

export interface ContinueRunOptions extends CallOptions {
  /** Run the next step, then pause again before the one after it. */
  step?: boolean;
  /** Merged into the run's state (RFC 7386) before the run goes on. */
  state?: Record<string, JSONValue>;
}

export interface NextStepOptions extends CallOptions {
  /** Bound of each long-poll request (default 30000; the server caps it at 120 s). */
  timeoutMs?: number;
}

export interface SubscribeParams extends CallOptions {
  sessionId?: string;
  runId?: string;
  /** Start after this position (SEQ:IDX); later reconnects send the last id seen. */
  after?: string;
  reconnect?: { attempts?: number; minDelayMs?: number; maxDelayMs?: number };
  onConnect?: (lastEventId: string | undefined) => void;
}

export declare class Invocation {
  constructor(o: { run_id: string; session_id: string; cursor?: string });
  run_id: string;
  session_id: string;
  /** The position after which nextStep reads. */
  cursor: string;
  toJSON(): { run_id: string; session_id: string; cursor: string };
}

export declare class Client {
  constructor(opts: string | ClientOptions);
  readonly baseUrl: string;
  listAgents(opts?: CallOptions): Promise<Agent[]>;
  getAgent(name: string, opts?: CallOptions): Promise<Agent>;
  health(opts?: CallOptions): Promise<{ status: string }>;

  startRun(p: StartRunOptions & { agent: string; input?: string }): Promise<{ run: Run; invocation: { run_id: string; session_id: string; cursor: string } }>;
  getRun(id: string, opts?: CallOptions): Promise<Run>;
  cancelRun(id: string, reason?: string, opts?: CallOptions): Promise<Run>;
  listInputs(runId?: string, opts?: CallOptions): Promise<PendingInput[]>;
  answer(runId: string, requestId: string, answer: JSONValue, opts?: CallOptions): Promise<Step>;
  /** Answers the run's pending breakpoint pause; StepwiseError not_at_breakpoint when there is none. */
  continueRun(runId: string, opts?: ContinueRunOptions): Promise<Step>;

  initiate(agent: string, input: string, opts?: StartRunOptions): Promise<Invocation>;
  nextStep(inv: Invocation | { run_id: string; cursor: string }, opts?: NextStepOptions): Promise<AgentStep>;
  provideHumanInput(inv: Invocation | { run_id: string }, requestId: string, answer: JSONValue, opts?: CallOptions): Promise<Step>;
  steps(inv: Invocation | { run_id: string; session_id: string; cursor: string }, opts?: NextStepOptions): AsyncGenerator<AgentStep, void>;

  listSessions(f?: CallOptions & { agent?: string; parent?: string; q?: string; cursor?: string; limit?: number }): Promise<{ sessions: Session[]; next_cursor?: string }>;
  sessions(f?: { agent?: string; parent?: string; q?: string; limit?: number }): AsyncGenerator<Session, void>;
  createSession(p?: CallOptions & { agent?: string; title?: string; metadata?: Record<string, JSONValue> }): Promise<Session>;
  getSession(id: string, opts?: CallOptions): Promise<Session>;
  deleteSession(id: string, opts?: CallOptions): Promise<void>;
  sessionSummary(id: string, opts?: CallOptions): Promise<Record<string, unknown>>;
  listSteps(sessionId: string, q?: CallOptions & { startSeq?: number; endSeq?: number; limit?: number }): Promise<Step[]>;
  getStep(sessionId: string, sequence: number, opts?: CallOptions): Promise<Step>;
  listRuns(sessionId: string, q?: CallOptions & { limit?: number }): Promise<Run[]>;
  forks(sessionId: string, opts?: CallOptions): Promise<Session[]>;
  tree(sessionId: string, opts?: CallOptions): Promise<{ session: Session; forks?: unknown[] }>;

  fork(sessionId: string, p: CallOptions & { sequence: number; edit?: string; title?: string }): Promise<Session>;
  retry(sessionId: string, p: CallOptions & { sequence: number; destructive?: boolean; agent?: string }): Promise<{ run: Run; invocation: Invocation }>;
  replay(sessionId: string, p?: CallOptions & { liveTools?: string[]; allToolsLive?: boolean; agent?: string }): Promise<{ run: Run; invocation: Invocation }>;

  subscribe(p: SubscribeParams): AsyncGenerator<StreamEvent, void>;
}

export declare class StepwiseError extends Error {
  constructor(p?: { status?: number; code?: string; title?: string; detail?: string; cause?: unknown });
  /** HTTP status; 0 for a transport failure. */
  status: number;
  /** The problem's stable code (docs/http_api.md, "Errors"), or "transport". */
  code: string;
  title: string;
  detail: string;
  readonly retryable: boolean;
}

export declare class RunError extends Error {
  constructor(e: { message: string; cause?: string; retry_count?: number; recoverable?: boolean });
  runCause: string;
  retryCount: number;
  recoverable: boolean;
}

export declare function readEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<{ id: string | undefined; event: string; data: string }, void>;
