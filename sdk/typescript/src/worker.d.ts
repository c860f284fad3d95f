import type { Client } from './client.js';
import type { AgentDefinition, ToolResult } from './agent.js';

export interface WorkerOptions {
  baseUrl?: string;
  token?: string;
  /** A client to use instead of one made of baseUrl and token. */
  client?: Client;
  fetch?: typeof fetch;
  agents: AgentDefinition[];
  /** Default: host name and process id. */
  workerId?: string;
  /** Tasks handled at once (default 4). */
  concurrency?: number;
  /** How long a poll is held (default 30000 ms; the server caps it at 60 s). */
  pollWaitMs?: number;
  /** How long stop() waits for aborted handlers to return (default 5000 ms). */
  stopGraceMs?: number;
  log?: (level: 'info' | 'warn' | 'error', msg: string, fields?: unknown) => void;
}

export declare function toolResult(r: ToolResult): ToolResult;

export declare class Worker {
  constructor(o: WorkerOptions);
  readonly workerId: string;
  /** The server's numbers, from the registration. */
  limits?: { lease_ms: number; heartbeat_ms: number; max_poll_ms: number; max_tasks: number; max_body_bytes: number; max_events_batch: number };
  register(o?: { signal?: AbortSignal }): Promise<{ worker_id: string; agents: { name: string; version: string; changed: boolean }[] }>;
  /** Serves until stop(), `signal`, or SIGTERM / SIGINT (handleSignals, default true). */
  run(o?: { signal?: AbortSignal; handleSignals?: boolean }): Promise<void>;
  /** Graceful stop: held tasks are handed back at once; resolves when run() has returned. */
  stop(): Promise<void>;
}
