// Drives `stepwise serve`'s A2A endpoints with the official A2A JavaScript
// SDK client (@a2a-js/sdk, v1.0 JSON-RPC binding) and prints, as one JSON
// object, what it saw; the Go test (cmd/stepwise/a2a_test.go) checks it.
//
//   node drive.mjs http://127.0.0.1:7700 TOKEN
//
// The server runs the agents of cmd/stepwise/testdata/a2a: helper (adds
// with the calculator, streaming), asker (asks a question with ask_human)
// and ops (its calculator calls need an approval).
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";

const [base, token] = process.argv.slice(2);
if (!base || !token) {
  console.error("usage: node drive.mjs BASE_URL TOKEN");
  process.exit(2);
}

const authFetch = (url, init = {}) => {
  const headers = new Headers(init.headers);
  headers.set("Authorization", `Bearer ${token}`);
  return fetch(url, { ...init, headers });
};
const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch })],
    preferredTransports: ["JSONRPC"],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl: authFetch }),
  }),
);

const seen = { errors: {} };
let n = 0;
const ROLE_USER = 1;
const text = (value) => ({ content: { $case: "text", value } });
const data = (value) => ({ content: { $case: "data", value } });
const message = (parts, extra = {}) => ({
  message: { messageId: `m-${++n}`, role: ROLE_USER, parts, ...extra },
});
const STATES = { 1: "submitted", 2: "working", 3: "completed", 4: "failed", 5: "canceled", 6: "input-required" };
const state = (task) => STATES[task.status?.state] ?? String(task.status?.state);
const partText = (part) => (part?.content?.$case === "text" ? part.content.value : undefined);
const artifactText = (task) => partText(task.artifacts?.[0]?.parts?.[0]);
const statusText = (task) => task.status?.message?.parts?.map(partText).filter((t) => t !== undefined).join("\n");

async function errorOf(fn) {
  try {
    await fn();
    return { none: true };
  } catch (e) {
    return { name: e.name, code: e.envelopeCode ?? e.code, message: e.message };
  }
}

async function collect(stream) {
  const events = [];
  for await (const ev of stream) {
    const p = ev.payload;
    const e = { kind: p.$case };
    if (p.$case === "task") Object.assign(e, { state: state(p.value), taskId: p.value.id });
    if (p.$case === "statusUpdate") {
      e.state = STATES[p.value.status?.state];
      e.text = p.value.status?.message?.parts?.map(partText).filter((t) => t !== undefined).join("\n");
      e.step = p.value.metadata?.stepwise?.step;
      e.taskId = p.value.taskId;
    }
    if (p.$case === "artifactUpdate") {
      e.text = partText(p.value.artifact?.parts?.[0]);
      e.lastChunk = p.value.lastChunk;
      e.taskId = p.value.taskId;
    }
    events.push(e);
  }
  return events;
}

// 1. Discovery: the root card (the default agent), then each agent's.
const rootCard = await new DefaultAgentCardResolver({ fetchImpl: authFetch }).resolve(base);
seen.rootCard = { name: rootCard.name, url: rootCard.supportedInterfaces?.[0]?.url };
seen.unauthenticatedCard = (await fetch(`${base}/.well-known/agent-card.json`)).status;
const helper = await factory.createFromUrl(`${base}/a2a/helper/`);
const card = await helper.getAgentCard();
seen.card = {
  name: card.name,
  description: card.description,
  skills: card.skills.map((s) => s.id),
  interface: card.supportedInterfaces[0],
  streaming: card.capabilities?.streaming,
  security: Object.keys(card.securitySchemes ?? {}),
};

// 2. Send (blocking) and a second task in the same context.
const firstMessage = message([text("add 2 and 3")]);
const first = await helper.sendMessage(firstMessage);
seen.send = { state: state(first), output: artifactText(first), id: first.id, contextId: first.contextId, history: first.history.length };
// The same message again (a retry after a lost response): the same task.
const resent = await helper.sendMessage(firstMessage);
seen.resend = { sameTask: resent.id === first.id, state: state(resent) };
const second = await helper.sendMessage(message([text("again")], { contextId: first.contextId }));
seen.sendAgain = { state: state(second), contextId: second.contextId, sameTask: second.id === first.id };

// 3. Stream.
seen.stream = await collect(helper.sendMessageStream(message([text("stream an addition")])));

// 4. Input required, answered by a second message on the task.
const asker = await factory.createFromUrl(`${base}/a2a/asker/`);
const asked = await collect(asker.sendMessageStream(message([text("compute it")])));
seen.asked = asked;
const askTask = asked[0].taskId;
const answered = await asker.sendMessage(message([text("yes, go ahead")], { taskId: askTask }));
seen.answered = { state: state(answered), output: artifactText(answered), sameTask: answered.id === askTask };
const got = await asker.getTask({ id: askTask });
seen.getTask = {
  state: state(got),
  history: got.history.map((m) => `${m.role === ROLE_USER ? "user" : "agent"}: ${m.parts.map(partText).join("")}`),
};
seen.getTaskShort = (await asker.getTask({ id: askTask, historyLength: 1 })).history.length;

// 5. Approvals: a bad answer is refused and changes nothing; yes approves.
const ops = await factory.createFromUrl(`${base}/a2a/ops/`);
const approval = await ops.sendMessage(message([text("multiply")]));
const approvalData = approval.status.message.parts.find((p) => p.content?.$case === "data")?.content.value;
seen.approval = { state: state(approval), prompt: statusText(approval), kind: approvalData?.stepwise?.requests?.[0]?.kind, tool: approvalData?.stepwise?.requests?.[0]?.tool?.name };
seen.errors.badApproval = await errorOf(() => ops.sendMessage(message([text("maybe")], { taskId: approval.id })));
seen.errors.badApprovalData = await errorOf(() => ops.sendMessage(message([data({ approved: "sure" })], { taskId: approval.id })));
seen.afterBadApproval = state(await ops.getTask({ id: approval.id }));
const approved = await ops.sendMessage(message([data({ approved: true })], { taskId: approval.id }));
seen.approved = { state: state(approved), output: artifactText(approved) };

// 6. Resubscribe: follow a task that needs input while another call
// answers it.
const waiting = await asker.sendMessage(message([text("compute it again")]));
const sub = asker.resubscribeTask({ id: waiting.id });
const firstEvent = await sub.next();
const rest = (async () => {
  const evs = [];
  for await (const ev of { [Symbol.asyncIterator]: () => sub }) evs.push(ev);
  return evs;
})();
await asker.sendMessage(message([text("yes")], { taskId: waiting.id }), {});
const later = await rest;
seen.resubscribe = {
  first: firstEvent.value.payload.$case,
  firstState: state(firstEvent.value.payload.value),
  kinds: later.map((e) => e.payload.$case),
  lastState: STATES[later.at(-1)?.payload.value.status?.state],
  artifact: partText(later.find((e) => e.payload.$case === "artifactUpdate")?.payload.value.artifact.parts[0]),
};

// 7. Cancel.
const toCancel = await asker.sendMessage(message([text("compute, then wait")]));
const canceled = await asker.cancelTask({ id: toCancel.id });
seen.cancel = { before: state(toCancel), after: state(canceled) };
seen.errors.cancelAgain = await errorOf(() => asker.cancelTask({ id: toCancel.id }));
seen.errors.messageToCanceled = await errorOf(() => asker.sendMessage(message([text("hello?")], { taskId: toCancel.id })));
seen.errors.resubscribeCanceled = await errorOf(async () => {
  for await (const _ of asker.resubscribeTask({ id: toCancel.id }));
});

// 8. Unknown tasks and wrong agents.
seen.errors.unknownTask = await errorOf(() => asker.getTask({ id: "no-such-task" }));
seen.errors.cancelUnknown = await errorOf(() => asker.cancelTask({ id: "no-such-task" }));
seen.errors.otherAgentsTask = await errorOf(() => helper.getTask({ id: askTask }));
seen.errors.answerUnknown = await errorOf(() => asker.sendMessage(message([text("yes")], { taskId: "no-such-task" })));

// 9. Bad JSON-RPC, sent raw: the protocol's error codes.
async function raw(body, headers = {}) {
  const res = await authFetch(`${base}/a2a/helper`, { method: "POST", headers: { "Content-Type": "application/json", ...headers }, body });
  const json = await res.json();
  return { status: res.status, code: json.error?.code, message: json.error?.message, id: json.id };
}
seen.raw = {
  parse: await raw("{not json"),
  invalidRequest: await raw(JSON.stringify({ jsonrpc: "1.0", id: 1, method: "GetTask", params: { id: "x" } })),
  noMethod: await raw(JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tasks/explode", params: {} })),
  noParams: await raw(JSON.stringify({ jsonrpc: "2.0", id: 3, method: "SendMessage" })),
  unknownField: await raw(JSON.stringify({ jsonrpc: "2.0", id: 4, method: "SendMessage", params: { message: { messageId: "x", role: "ROLE_USER", parts: [{ text: "hi" }] }, extra: 1 } })),
  agentRole: await raw(JSON.stringify({ jsonrpc: "2.0", id: 5, method: "SendMessage", params: { message: { messageId: "x", role: "ROLE_AGENT", parts: [{ text: "hi" }] } } })),
  filePart: await raw(JSON.stringify({ jsonrpc: "2.0", id: 6, method: "SendMessage", params: { message: { messageId: "x", role: "ROLE_USER", parts: [{ url: "https://example.com/a.pdf" }] } } })),
  version: await raw(JSON.stringify({ jsonrpc: "2.0", id: 7, method: "GetTask", params: { id: "x" } }), { "A2A-Version": "9.0" }),
  push: await raw(JSON.stringify({ jsonrpc: "2.0", id: 8, method: "CreateTaskPushNotificationConfig", params: {} })),
  batch: await raw(JSON.stringify([{ jsonrpc: "2.0", id: 9, method: "GetTask", params: { id: "x" } }])),
};

// 10. The v0.3 method names and shapes.
const legacy = await raw(JSON.stringify({ jsonrpc: "2.0", id: "legacy-1", method: "message/send",
  params: { message: { kind: "message", messageId: "legacy-m", role: "user", parts: [{ kind: "text", text: "add 2 and 3" }] } } }));
const legacyRes = await (await authFetch(`${base}/a2a/helper`, { method: "POST", headers: { "Content-Type": "application/json" },
  body: JSON.stringify({ jsonrpc: "2.0", id: "legacy-2", method: "tasks/get", params: { id: first.id } }) })).json();
seen.legacy = { sendError: legacy.code, kind: legacyRes.result?.kind, state: legacyRes.result?.status?.state, partKind: legacyRes.result?.artifacts?.[0]?.parts?.[0]?.kind };

console.log(JSON.stringify(seen));
