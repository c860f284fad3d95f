export * from './client.js';
export * from './agent.js';
export * from './worker.js';
