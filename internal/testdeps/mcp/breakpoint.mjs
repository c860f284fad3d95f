// Steps through a breakpoint's pause over MCP with the official client:
//
//   node breakpoint.mjs BIN ARG...      # spawns `BIN ARG...` (stepwise … mcp)
//
// It starts a run of the "stepper" agent (cmd/stepwise/testdata/breakpoints,
// a breakpoint after the calculator), finds the pause with inputs_list,
// answers it with input_answer and waits for the run to complete. It
// prints one JSON line of what it saw; any failure exits 1.
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const client = new Client({ name: "stepwise-test", version: "1.0.0" });
await client.connect(new StdioClientTransport({ command, args, env: { ...process.env }, stderr: "inherit" }));

async function call(name, a) {
  const res = await client.callTool({ name, arguments: a });
  assert.ok(!res.isError, `${name}: ${JSON.stringify(res.content)}`);
  return res.structuredContent;
}

async function until(what, f) {
  const deadline = Date.now() + 30000;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// The run's own breakpoint (before the first model call), then the agent
// file's (after the calculator).
const started = await call("run_start", { agent: "stepper", input: "6*7?", breakpoints: { before: ["llm"] } });
const runID = started.run.id;
await until("the run to pause", async () => (await call("run_get", { run_id: runID })).run.status === "waiting");
const first = (await call("inputs_list", { run_id: runID })).inputs;
assert.equal(first.length, 1);
assert.equal(first[0].request.breakpoint.step, "llm");
await call("input_answer", { run_id: runID, request_id: first[0].request_id, answer: "continue" });
await until("the run to pause again", async () => {
  const { inputs } = await call("inputs_list", { run_id: runID });
  return inputs.length === 1 && inputs[0].request_id !== first[0].request_id;
});
const { inputs } = await call("inputs_list", { run_id: runID });
assert.equal(inputs.length, 1);
const seen = { breakpoint: inputs[0].request.breakpoint };
await call("input_answer", { run_id: runID, request_id: inputs[0].request_id, answer: { action: "continue", state: { via: "mcp" } } });
const done = await until("the run to complete", async () => {
  const { run } = await call("run_get", { run_id: runID });
  return run.status === "completed" && run;
});
seen.output = done.output;
seen.state = done.state;
await client.close();
console.log(JSON.stringify(seen));
