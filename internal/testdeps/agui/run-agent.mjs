// Runs the real @ag-ui/client HttpAgent against a Stepwise AG-UI endpoint
// and validates every event the server sends with @ag-ui/core's schemas.
//
//   AGUI_URL=http://127.0.0.1:7700/v1/agui/my-agent \
//   AGUI_SCENARIO='{"threadId":"t1","turns":[{"message":"hi"},{"resume":{"status":"resolved","payload":"Ada"}}]}' \
//   node run-agent.mjs
//
// Each turn is one runAgent call on the same HttpAgent (so the thread, the
// messages and the pending interrupts carry over, as in a front end). A turn
// either adds a user message, resumes every pending interrupt with the
// given status and payload, or ("toolResult": "...") answers every frontend
// tool call the previous turn left pending (RUN_FINISHED success with
// pendingToolCallIds) with a tool message, as a front end that executed
// them. "tools" (top level) are the frontend tools declared on every run. Output: one JSON line per raw event as received
// ({"turn": n, "event": {...}}), then one summary line per turn
// ({"turn": n, "summary": {...}}). A turn with "expectError": true must end
// with RUN_ERROR (or fail in the client: printed as {"turn": n,
// "client_error": "..."}); any other turn must not. Exits 1 on a schema violation, on an
// unknown key, or when the client fails unexpectedly.
import { HttpAgent } from "@ag-ui/client";
import { EventSchema } from "@ag-ui/core/schemas";

const url = process.env.AGUI_URL;
const scenario = JSON.parse(process.env.AGUI_SCENARIO ?? "{}");
if (!url || !Array.isArray(scenario.turns)) {
  console.error("set AGUI_URL and AGUI_SCENARIO (see the header of run-agent.mjs)");
  process.exit(2);
}

let turn = 0;
let failures = 0;

// The shapes of every event type, for the unknown-key check: AG-UI objects
// are declared loose, but a producer that adds keys is not conforming.
const shapes = new Map();
for (const option of EventSchema.options) {
  shapes.set(option.shape.type.value, new Set(Object.keys(option.shape)));
}

function fail(msg) {
  failures++;
  console.log(JSON.stringify({ turn, error: msg }));
}

function validate(ev) {
  const res = EventSchema.safeParse(ev);
  if (!res.success) {
    fail(`schema: ${JSON.stringify(ev)}: ${res.error.message}`);
    return;
  }
  const keys = shapes.get(ev.type);
  for (const k of Object.keys(ev)) {
    if (!keys.has(k)) fail(`unknown key ${k} in ${ev.type}`);
  }
}

// fetch that tees the response body: the agent reads one copy, the other
// is parsed here so that exactly what the server sent is validated.
async function teeFetch(input, init) {
  const res = await fetch(input, init);
  if (!res.ok || !res.body) {
    const text = await res.text();
    console.log(JSON.stringify({ turn, http_error: res.status, body: text }));
    return new Response(text, { status: res.status, headers: res.headers });
  }
  const [a, b] = res.body.tee();
  (async () => {
    const reader = b.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
        if (!data) continue;
        let ev;
        try {
          ev = JSON.parse(data);
        } catch (e) {
          fail(`not JSON: ${data}`);
          continue;
        }
        validate(ev);
        console.log(JSON.stringify({ turn, event: ev }));
      }
    }
  })();
  return new Response(a, { status: res.status, headers: res.headers });
}

const agent = new HttpAgent({ url, threadId: scenario.threadId, fetch: teeFetch, headers: scenario.headers ?? {} });
let outcome;
let runError;
let pendingToolCallIds = [];
agent.subscribe({
  onRunFinishedEvent: (p) => {
    outcome = p.outcome;
    pendingToolCallIds = p.pendingToolCallIds ?? [];
  },
  onRunErrorEvent: (p) => {
    runError = p.event;
  },
});

for (const t of scenario.turns) {
  turn++;
  outcome = undefined;
  runError = undefined;
  const params = {};
  if (scenario.tools) params.tools = scenario.tools;
  if (t.toolResult !== undefined) {
    for (const id of pendingToolCallIds) {
      agent.addMessage({ id: `t${turn}-${id}`, role: "tool", toolCallId: id, content: t.toolResult });
    }
  }
  if (t.message !== undefined) {
    agent.addMessage({ id: `u${turn}`, role: "user", content: t.message });
  }
  if (t.resume) {
    params.resume = agent.pendingInterrupts.map((i) => ({ interruptId: i.id, status: t.resume.status, ...(t.resume.payload !== undefined && { payload: t.resume.payload }) }));
  }
  if (t.state !== undefined) agent.setState(t.state);
  try {
    const res = await agent.runAgent(params);
    // Let the tee parser finish printing.
    await new Promise((r) => setTimeout(r, 20));
    console.log(JSON.stringify({
      turn,
      summary: {
        outcome: outcome ?? null,
        pendingToolCallIds,
        result: res.result ?? null,
        pendingInterrupts: agent.pendingInterrupts,
        messages: agent.messages,
        state: agent.state,
      },
    }));
    if (t.expectError && !runError) fail("the turn was expected to end with RUN_ERROR");
    if (!t.expectError && runError) fail(`unexpected RUN_ERROR: ${JSON.stringify(runError)}`);
  } catch (e) {
    await new Promise((r) => setTimeout(r, 20));
    if (t.expectError) {
      console.log(JSON.stringify({ turn, client_error: String(e?.message ?? e) }));
      continue;
    }
    fail(`client: ${e?.message ?? e}`);
    break;
  }
}
process.exit(failures > 0 ? 1 : 0);
