// Drives Stepwise's MCP server with the official TypeScript client:
//
//   node drive.mjs stdio BIN ARG...      # spawns `BIN ARG...` (stepwise … mcp)
//   node drive.mjs http URL TOKEN        # streamable HTTP at URL (…/mcp)
//
// It lists the tools and resource templates, starts a run of the "asker"
// agent (cmd/stepwise/testdata/hitl), answers its pending request, waits
// for the run to complete, reads its steps, trace and resources, searches
// past steps, forks, retries and checks the errors of bad calls. It asserts
// as it goes and prints one JSON line of what it saw; any failure exits 1.
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";

const [mode, ...rest] = process.argv.slice(2);
let transport;
if (mode === "stdio") {
  const [command, ...args] = rest;
  transport = new StdioClientTransport({ command, args, env: { ...process.env }, stderr: "inherit" });
} else if (mode === "http") {
  const [url, token] = rest;
  transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: token ? { Authorization: `Bearer ${token}` } : {} },
  });
} else {
  console.error("usage: drive.mjs stdio BIN ARG... | http URL TOKEN");
  process.exit(2);
}

const client = new Client({ name: "stepwise-test", version: "1.0.0" });
await client.connect(transport);

// call calls a tool that must succeed and returns its structured output.
async function call(name, args) {
  const res = await client.callTool({ name, arguments: args });
  assert.ok(!res.isError, `${name}: ${JSON.stringify(res.content)}`);
  assert.ok(res.structuredContent, `${name}: no structuredContent`);
  return res.structuredContent;
}

// failing calls a tool that must fail and returns its error text.
async function failing(name, args) {
  const res = await client.callTool({ name, arguments: args });
  assert.equal(res.isError, true, `${name} ${JSON.stringify(args)} did not fail: ${JSON.stringify(res)}`);
  return res.content.map((c) => c.text).join("\n");
}

// until polls f until it returns a truthy value (30 s at most).
async function until(what, f) {
  const deadline = Date.now() + 30000;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const seen = {};
const { tools } = await client.listTools();
seen.tools = tools.map((t) => t.name).sort();
for (const t of tools) {
  assert.equal(t.inputSchema.type, "object", `${t.name}: input schema`);
  assert.equal(t.outputSchema?.type, "object", `${t.name}: output schema`);
}
const { resourceTemplates } = await client.listResourceTemplates();
seen.templates = resourceTemplates.map((t) => t.uriTemplate).sort();

// A run that asks the human, answered over MCP.
const started = await call("run_start", { agent: "asker", input: "compute" });
const runID = started.run.id;
const sessionID = started.run.session_id;
await until("the run to wait", async () => (await call("run_get", { run_id: runID })).run.status === "waiting");
const { inputs } = await call("inputs_list", { run_id: runID });
assert.equal(inputs.length, 1);
assert.match(inputs[0].request.prompt, /6\*7/);
const answered = await call("input_answer", { run_id: runID, request_id: inputs[0].request_id, answer: "yes" });
assert.ok(answered.sequence > 0);
const done = await until("the run to complete", async () => {
  const { run } = await call("run_get", { run_id: runID });
  return run.status === "completed" && run;
});
seen.output = done.output;

const read = await call("steps_read", { session_id: sessionID });
seen.steps = read.steps.length;
assert.equal(read.steps.length, read.last_sequence);
assert.deepEqual(read.steps.map((s) => s.sequence), read.steps.map((_, i) => i + 1));
const two = await call("steps_read", { session_id: sessionID, from: 2, to: 3 });
assert.deepEqual(two.steps.map((s) => s.sequence), [2, 3]);
const { trace } = await call("trace_render", { session_id: sessionID });
assert.match(trace, /42/);

const listed = await call("sessions_list", { query: sessionID });
assert.deepEqual(listed.sessions.map((s) => s.id), [sessionID]);

// Steps are embedded in the background: poll until the search finds one.
const hits = await until("a search hit", async () => {
  const res = await client.callTool({ name: "steps_search", arguments: { query: "May I compute 6*7?", k: 3 } });
  return !res.isError && res.structuredContent.hits.length > 0 && res.structuredContent.hits;
});
seen.searchHit = hits[0].step.session_id === sessionID;

const fork = await call("session_fork", { session_id: sessionID, at: 2, title: "fork at 2" });
assert.equal(fork.session.parent_session_id, sessionID);
assert.equal(fork.session.last_sequence, 2);
const retry = await call("session_retry", { session_id: sessionID, from: read.last_sequence });
assert.notEqual(retry.run.session_id, sessionID, "a retry forks by default");
seen.retrySession = retry.run.session_id;

// Resources.
const res = await client.readResource({ uri: `stepwise://sessions/${sessionID}` });
const body = JSON.parse(res.contents[0].text);
assert.equal(body.session.id, sessionID);
assert.equal(body.steps.length, read.last_sequence);
const tr = await client.readResource({ uri: `stepwise://sessions/${sessionID}/trace` });
assert.match(tr.contents[0].text, /42/);

// Bad input: tool errors, nothing changed.
seen.errors = {
  unknownSession: await failing("steps_read", { session_id: "no-such-session" }),
  badRange: await failing("steps_read", { session_id: sessionID, from: 5, to: 2 }),
  unknownAgent: await failing("run_start", { agent: "no-such-agent", input: "x" }),
  forkOutside: await failing("session_fork", { session_id: sessionID, at: 999 }),
  answeredTwice: await failing("input_answer", { run_id: runID, request_id: inputs[0].request_id, answer: "again" }),
  missingArgument: await failing("run_get", {}),
};
try {
  await client.readResource({ uri: "stepwise://sessions/no-such-session" });
  assert.fail("reading an unknown session succeeded");
} catch (e) {
  assert.ok(e instanceof McpError, String(e));
  seen.unknownResourceCode = e.code;
}
const after = await call("sessions_list", {});
seen.sessions = after.sessions.length;

await client.close();
console.log(JSON.stringify(seen));
