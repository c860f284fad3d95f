// @stepwise/sdk: the client of `stepwise serve` and the worker that serves
// an agent's custom steps and tools.
export { Client, Invocation } from './client.js';
export { StepwiseError, RunError } from './errors.js';
export { readEvents } from './sse.js';
export { defineAgent, tool, typedYield, delta, progress, stepEvent, askHuman, TransientError, PermanentError } from './agent.js';
export { Worker, toolResult } from './worker.js';
