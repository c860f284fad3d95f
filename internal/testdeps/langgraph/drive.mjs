// Drives `stepwise serve`'s LangGraph Server API with the official LangGraph
// SDK client (@langchain/langgraph-sdk) and prints, as one JSON object, what
// it saw; the Go test (cmd/stepwise/langgraph_test.go) checks it.
//
//   node drive.mjs http://127.0.0.1:7700/langgraph TOKEN
//
// The server runs the agents of cmd/stepwise/testdata/langgraph: adder (two
// calculator calls in one reply), asker (asks with ask_human) and slow
// (answers after a delay).
import { Client } from "@langchain/langgraph-sdk";

const [apiUrl, token] = process.argv.slice(2);
if (!apiUrl || !token) {
  console.error("usage: node drive.mjs API_URL TOKEN");
  process.exit(2);
}

const client = new Client({ apiUrl, apiKey: token });
// Progress goes to stderr, so that a test that times out shows where.
const step = (name) => console.error(`[drive] ${new Date().toISOString()} ${name}`);
const seen = { errors: {} };

async function errorOf(fn) {
  try {
    await fn();
    return { none: true };
  } catch (e) {
    let detail;
    try {
      detail = JSON.parse(e.text ?? "").detail;
    } catch {}
    return { status: e.status, detail: detail ?? e.message };
  }
}

const human = (content) => ({ messages: [{ role: "user", content }] });
const types = (values) => (values?.messages ?? []).map((m) => m.type);
const lastText = (values) => values?.messages?.at(-1)?.content;
const until = async (what, fn) => {
  const deadline = Date.now() + 30000;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
};

// 0. Auth: the SDK sends the token as x-api-key; without it, 401.
step("0. auth");
seen.errors.noKey = await errorOf(() => new Client({ apiUrl, apiKey: null }).assistants.search());

// 1. Assistants are the agents.
step("1. Assistants are the agents.");
const assistants = await client.assistants.search({ limit: 10 });
seen.assistants = assistants.map((a) => a.graph_id).sort();
const adder = assistants.find((a) => a.graph_id === "adder");
seen.assistantGet = (await client.assistants.get(adder.assistant_id)).graph_id;
seen.assistantByName = (await client.assistants.get("adder")).assistant_id === adder.assistant_id;
const graph = await client.assistants.getGraph(adder.assistant_id);
seen.graph = { nodes: graph.nodes.map((n) => n.id), edges: graph.edges.map((e) => `${e.source}>${e.target}`) };
seen.schemas = Object.keys((await client.assistants.getSchemas(adder.assistant_id)).state_schema.properties);

// 2. Threads: create with metadata, search, update, get.
step("2. Threads: create with metadata, search, update, get.");
const thread = await client.threads.create({ metadata: { user: "ada", topic: "sums" } });
seen.threadCreated = { status: thread.status, user: thread.metadata.user };
await client.threads.create({ metadata: { user: "bob" } });
seen.searchAda = (await client.threads.search({ metadata: { user: "ada" } })).map((t) => t.thread_id === thread.thread_id);
seen.counts = { ada: await client.threads.count({ metadata: { user: "ada" } }), idle: await client.threads.count({ status: "idle" }), adder: await client.assistants.count({ graphId: "adder" }) };
await client.threads.update(thread.thread_id, { metadata: { topic: "arithmetic" } });
const updated = await client.threads.get(thread.thread_id);
seen.threadUpdated = { user: updated.metadata.user, topic: updated.metadata.topic };

// 3. A streamed run with parallel tool calls.
step("3. A streamed run with parallel tool calls.");
const events = [];
let created;
for await (const ev of client.runs.stream(thread.thread_id, adder.assistant_id, {
  input: human("add 2+3 and 6*7"),
  streamMode: ["values", "updates", "messages-tuple"],
  onRunCreated: (m) => (created = m),
})) {
  events.push(ev);
}
seen.stream = {
  first: events[0]?.event,
  metadataRun: events[0]?.data?.run_id,
  onRunCreated: created?.run_id,
  kinds: [...new Set(events.map((e) => e.event))].sort(),
  ids: events.filter((e) => e.id).length > 0,
};
const updates = events.filter((e) => e.event === "updates").map((e) => e.data);
const llmUpdate = updates.find((u) => u.llm?.messages?.[0]?.tool_calls?.length);
seen.stream.toolCalls = llmUpdate?.llm.messages[0].tool_calls.map((c) => `${c.name}(${c.args.expression})`);
seen.stream.toolMessages = updates
  .filter((u) => u.tools)
  .map((u) => u.tools.messages[0])
  .map((m) => ({ type: m.type, content: m.content, matches: llmUpdate?.llm.messages[0].tool_calls.some((c) => c.id === m.tool_call_id) }));
const chunks = events.filter((e) => e.event === "messages").map((e) => e.data);
// The model's text: its chunks, or the whole message when its chunks were
// not streamed to this subscriber.
seen.stream.chunkText = chunks.filter(([m]) => m.type === "AIMessageChunk" || m.type === "ai").map(([m]) => m.content).join("");
seen.stream.chunkNode = chunks[0]?.[1]?.langgraph_node;
seen.stream.toolChunks = chunks.filter(([m]) => m.type === "tool").length;
const values = events.filter((e) => e.event === "values").at(-1)?.data;
seen.stream.finalTypes = types(values);
seen.stream.finalText = lastText(values);

// A stream whose connection breaks: the SDK reconnects to the run's
// stream (the Location header) with Last-Event-ID and gets the rest once.
step("3b. a broken stream, resumed");
let cuts = 0;
const reconnects = []; // the Last-Event-ID of each reconnection
let sawId; // resolved once the loop below got an event with an id
const idSeen = new Promise((resolve) => (sawId = resolve));
const cuttingFetch = async (url, init) => {
  const res = await fetch(url, init);
  if (cuts > 0 && (init?.method ?? "GET") === "GET" && String(url).includes("/stream")) reconnects.push(new Headers(init?.headers).get("last-event-id"));
  if (cuts > 0 || init?.method !== "POST" || !String(url).includes("/runs/stream")) return res;
  cuts++;
  // Pass the stream on up to the end of its first event with an id, then
  // fail it, wherever the server's chunks end.
  const reader = res.body.getReader();
  const enc = new TextEncoder();
  const dec = new TextDecoder();
  let text = "";
  let cutNow = false;
  const body = new ReadableStream({
    async pull(ctrl) {
      if (cutNow) {
        await idSeen; // an error drops what the pipes hold: fail once it is read
        return ctrl.error(new TypeError("terminated: the test cut the connection"));
      }
      for (;;) {
        const { done, value } = await reader.read();
        if (done) {
          if (text) ctrl.enqueue(enc.encode(text));
          return ctrl.close();
        }
        text += dec.decode(value, { stream: true });
        const id = text.indexOf("\nid: ");
        const end = id < 0 ? -1 : text.indexOf("\n\n", id);
        if (end >= 0) {
          ctrl.enqueue(enc.encode(text.slice(0, end + 2)));
          await reader.cancel();
          cutNow = true;
          return;
        }
      }
    },
  });
  return new Response(body, { status: res.status, headers: res.headers });
};
const cutting = new Client({ apiUrl, apiKey: token, callerOptions: { fetch: cuttingFetch } });
const cutThread = await client.threads.create();
const cutEvents = [];
for await (const ev of cutting.runs.stream(cutThread.thread_id, adder.assistant_id, {
  input: human("add 2+3 and 6*7"),
  streamMode: ["updates"],
})) {
  cutEvents.push(ev);
  if (ev.id) sawId();
}
seen.reconnect = {
  cuts,
  reconnects: reconnects.length,
  resumedAfter: !!reconnects[0],
  nodes: cutEvents.filter((e) => e.event === "updates").map((e) => Object.keys(e.data)[0]),
};

seen.run = await client.runs.get(thread.thread_id, created.run_id);
seen.runs = (await client.runs.list(thread.thread_id)).map((r) => r.status);

// 4. State and history: one checkpoint per step; time travel from the
// third checkpoint runs on a fork there.
step("4. state, history, time travel");
const state = await client.threads.getState(thread.thread_id);
seen.state = { types: types(state.values), next: state.next, checkpoint: !!state.checkpoint.checkpoint_id };
const history = await client.threads.getHistory(thread.thread_id, { limit: 20 });
seen.history = history.map((s) => s.metadata.step);
const chronological = [...history].reverse();
const third = chronological[2];
seen.third = { step: third.metadata.step, types: types(third.values), next: third.next };
const atThird = await client.threads.getState(thread.thread_id, third.checkpoint.checkpoint_id);
seen.atThird = types(atThird.values);
let travelRun;
const travel = await client.runs.wait(thread.thread_id, adder.assistant_id, {
  input: null,
  checkpointId: third.checkpoint.checkpoint_id,
  onRunCreated: (m) => (travelRun = m),
});
seen.travel = { types: types(travel), text: lastText(travel), otherThread: !!travelRun && travelRun.thread_id !== thread.thread_id };
if (travelRun) {
  const fork = await client.threads.get(travelRun.thread_id);
  seen.travelFork = { from: fork.metadata.stepwise_forked_from === thread.thread_id, at: fork.metadata.stepwise_fork_sequence, user: fork.metadata.user };
  const forkHistory = await client.threads.getHistory(travelRun.thread_id, { limit: 20 });
  const shared = [...forkHistory].reverse().slice(0, 3).map((s) => s.checkpoint.checkpoint_id);
  seen.travelShared = shared.join() === chronological.slice(0, 3).map((s) => s.checkpoint.checkpoint_id).join();
  seen.travelSteps = forkHistory.length;
}
seen.afterTravel = types((await client.threads.getState(thread.thread_id)).values).length;

// 5. updateState: a state patch the thread's values carry.
step("5. updateState: a state patch the thread's values carry.");
const upd = await client.threads.updateState(thread.thread_id, { values: { mood: "happy" } });
seen.updateState = { checkpoint: !!upd.checkpoint?.checkpoint_id, mood: (await client.threads.getState(thread.thread_id)).values.mood };

// 6. An interrupt, resumed with command.resume.
step("6. An interrupt, resumed with command.resume.");
const asker = (await client.assistants.search({ graphId: "asker" }))[0];
const askThread = await client.threads.create();
const asked = [];
for await (const ev of client.runs.stream(askThread.thread_id, asker.assistant_id, { input: human("compute it"), streamMode: ["updates", "values"] })) {
  asked.push(ev);
}
const interruptUpdate = asked.find((e) => e.event === "updates" && e.data.__interrupt__);
seen.interrupt = {
  value: interruptUpdate?.data.__interrupt__[0]?.value?.prompt,
  kind: interruptUpdate?.data.__interrupt__[0]?.value?.kind,
  inValues: !!asked.filter((e) => e.event === "values").at(-1)?.data?.__interrupt__,
};
const interrupted = await client.threads.get(askThread.thread_id);
seen.interruptedThread = { status: interrupted.status, interrupts: Object.values(interrupted.interrupts).flat().length };
const askState = await client.threads.getState(askThread.thread_id);
seen.interruptState = { tasks: askState.tasks.length, interrupts: askState.tasks[0]?.interrupts?.length, next: askState.next };
const resumed = [];
for await (const ev of client.runs.stream(askThread.thread_id, asker.assistant_id, { command: { resume: "yes" }, streamMode: "values" })) {
  resumed.push(ev);
}
const resumedValues = resumed.filter((e) => e.event === "values").at(-1)?.data;
seen.resumed = { text: lastText(resumedValues), types: types(resumedValues), status: (await client.threads.get(askThread.thread_id)).status };
seen.errors.resumeIdle = await errorOf(() => client.runs.wait(askThread.thread_id, asker.assistant_id, { command: { resume: "again" } }));

// 7. A cancelled run.
step("7. A cancelled run.");
const slow = (await client.assistants.search({ graphId: "slow" }))[0];
const cancelThread = await client.threads.create();
const toCancel = await client.runs.create(cancelThread.thread_id, slow.assistant_id, { input: human("take your time") });
seen.cancelCreated = toCancel.status;
await until("the run to start", async () => (await client.runs.get(cancelThread.thread_id, toCancel.run_id)).status === "running");
await client.runs.cancel(cancelThread.thread_id, toCancel.run_id);
seen.cancelled = (await client.runs.get(cancelThread.thread_id, toCancel.run_id)).status;
seen.errors.cancelAgain = await errorOf(() => client.runs.cancel(cancelThread.thread_id, toCancel.run_id));

// 8. A concurrent run on a busy thread: reject (the default) is refused,
// enqueue runs after the first.
step("8. a busy thread");
const busyThread = await client.threads.create();
const first = await client.runs.create(busyThread.thread_id, slow.assistant_id, { input: human("first") });
seen.errors.reject = await errorOf(() => client.runs.create(busyThread.thread_id, slow.assistant_id, { input: human("second"), multitaskStrategy: "reject" }));
const enqueued = client.runs.create(busyThread.thread_id, slow.assistant_id, { input: human("third"), multitaskStrategy: "enqueue" });
const firstValues = await client.runs.join(busyThread.thread_id, first.run_id);
const second = await enqueued;
const secondValues = await client.runs.join(busyThread.thread_id, second.run_id);
seen.enqueue = {
  first: lastText(firstValues),
  second: lastText(secondValues),
  distinct: second.run_id !== first.run_id,
  humans: secondValues.messages.filter((m) => m.type === "human").map((m) => m.content),
  statuses: (await client.runs.list(busyThread.thread_id)).map((r) => r.status),
};
// interrupt: cancels the running one, then starts.
const humansOf = async (id) => (await client.threads.getState(id)).values.messages.filter((m) => m.type === "human").map((m) => m.content);
const running = await client.runs.create(busyThread.thread_id, slow.assistant_id, { input: human("fourth") });
await until("the fourth message in the thread", async () => (await humansOf(busyThread.thread_id)).includes("fourth"));
const interrupting = await client.runs.wait(busyThread.thread_id, slow.assistant_id, { input: human("fifth"), multitaskStrategy: "interrupt" });
seen.interruptStrategy = { text: lastText(interrupting), before: (await client.runs.get(busyThread.thread_id, running.run_id)).status };

step("rollback");
// rollback: cancels the running one and deletes what it wrote.
const rolled = await client.runs.create(busyThread.thread_id, slow.assistant_id, { input: human("sixth") });
await until("the sixth message in the thread", async () => (await humansOf(busyThread.thread_id)).includes("sixth"));
const rolling = await client.runs.wait(busyThread.thread_id, slow.assistant_id, { input: human("seventh"), multitaskStrategy: "rollback" });
seen.rollback = { humans: rolling.messages.filter((m) => m.type === "human").map((m) => m.content), text: lastText(rolling) };

step("join");
// Joining a run's stream: from its start, or after an event id (a
// reconnection), in other stream modes.
const allUpdates = [];
for await (const ev of client.runs.joinStream(thread.thread_id, created.run_id, { streamMode: ["updates", "messages", "events"] })) {
  allUpdates.push(ev);
}
seen.join = {
  first: allUpdates[0]?.event,
  updates: allUpdates.filter((e) => e.event === "updates").length,
  complete: allUpdates.filter((e) => e.event === "messages/complete").map((e) => e.data[0].type),
  events: [...new Set(allUpdates.filter((e) => e.event === "events").map((e) => e.data.event))].sort(),
};
const middle = allUpdates.filter((e) => e.event === "updates")[0];
const rest = [];
for await (const ev of client.runs.joinStream(thread.thread_id, created.run_id, { lastEventId: middle.id, streamMode: "updates" })) {
  rest.push(ev);
}
seen.rejoin = rest.filter((e) => e.event === "updates").map((e) => Object.keys(e.data)[0]);

step("failed run");
// A failed run: wait raises its error; a stream ends with an error event.
const broken = (await client.assistants.search({ graphId: "broken" }))[0];
seen.errors.failedWait = await (async () => {
  try {
    await client.runs.wait(null, broken.assistant_id, { input: human("hi") });
    return { none: true };
  } catch (e) {
    return { message: e.message };
  }
})();
const failedEvents = [];
for await (const ev of client.runs.stream(null, broken.assistant_id, { input: human("hi"), streamMode: "updates" })) {
  failedEvents.push(ev);
}
seen.failedStream = { last: failedEvents.at(-1)?.event, message: failedEvents.at(-1)?.data?.message };

// 9. Copy and delete.
step("9. Copy and delete.");
const copy = await client.threads.copy(thread.thread_id);
seen.copy = { types: types(copy.values).length, other: copy.thread_id !== thread.thread_id };
await client.threads.delete(copy.thread_id);
seen.errors.deleted = await errorOf(() => client.threads.get(copy.thread_id));

// 10. Wrong ids.
step("10. Wrong ids.");
seen.errors.thread = await errorOf(() => client.threads.get("no-such-thread"));
seen.errors.run = await errorOf(() => client.runs.get(thread.thread_id, "no-such-run"));
seen.errors.assistant = await errorOf(() => client.assistants.get("no-such-assistant"));
seen.errors.checkpoint = await errorOf(() => client.threads.getState(thread.thread_id, "no-such-checkpoint"));
seen.errors.runOnMissingThread = await errorOf(() => client.runs.wait("no-such-thread", adder.assistant_id, { input: human("hi") }));
seen.errors.unknownAssistantRun = await errorOf(() => client.runs.wait(thread.thread_id, "no-such-assistant", { input: human("hi") }));

console.log(JSON.stringify(seen));
