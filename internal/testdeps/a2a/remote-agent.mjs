// An A2A agent on the official A2A JavaScript SDK's server side
// (@a2a-js/sdk: DefaultRequestHandler, InMemoryTaskStore,
// JsonRpcTransportHandler, v1.0 JSON-RPC binding) over node:http, for the
// client direction of Stepwise's A2A support (cmd/stepwise
// a2a_remote_test.go): a Stepwise agent file names it in sub_agents.
//
//   node remote-agent.mjs PORT
//
// The agent "colours" asks "Which colour?" (TASK_STATE_INPUT_REQUIRED) on
// a new task, and completes the task with the artifact "You chose <the
// answer>." when answered. It prints "listening PORT" when ready and one
// line per JSON-RPC call: "call METHOD MESSAGE_ID".
import http from "node:http";
import { AgentCard, TaskState, Role } from "@a2a-js/sdk";
import {
  AgentEvent,
  DefaultRequestHandler,
  InMemoryTaskStore,
  JsonRpcTransportHandler,
  ServerCallContext,
  UnauthenticatedUser,
} from "@a2a-js/sdk/server";

const port = Number(process.argv[2] || 0);
const text = (value) => ({ content: { $case: "text", value }, metadata: undefined, filename: "", mediaType: "text/plain" });
const now = () => new Date().toISOString();

const executor = {
  async execute(ctx, bus) {
    const { taskId, contextId } = ctx;
    if (!ctx.task) {
      bus.publish(AgentEvent.task({ id: taskId, contextId, status: { state: TaskState.TASK_STATE_WORKING, message: undefined, timestamp: now() },
        artifacts: [], history: [ctx.userMessage], metadata: undefined }));
      bus.publish(AgentEvent.statusUpdate({ taskId, contextId, metadata: undefined,
        status: { state: TaskState.TASK_STATE_INPUT_REQUIRED, timestamp: now(),
          message: { messageId: `${taskId}-q`, contextId, taskId, role: Role.ROLE_AGENT, parts: [text("Which colour?")], metadata: undefined, extensions: [], referenceTaskIds: [] } } }));
      bus.finished();
      return;
    }
    const answer = ctx.userMessage.parts.map((p) => (p.content?.$case === "text" ? p.content.value : JSON.stringify(p.content?.value))).join(" ");
    bus.publish(AgentEvent.task(ctx.task));
    bus.publish(AgentEvent.artifactUpdate({ taskId, contextId, append: false, lastChunk: true, metadata: undefined,
      artifact: { artifactId: "answer", name: "answer", description: "", parts: [text(`You chose ${answer}.`)], metadata: undefined, extensions: [] } }));
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, metadata: undefined, status: { state: TaskState.TASK_STATE_COMPLETED, message: undefined, timestamp: now() } }));
    bus.finished();
  },
  async cancelTask(taskId, bus) {
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId: "", metadata: undefined, status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: now() } }));
    bus.finished();
  },
};

let cardJSON;
const server = http.createServer(async (req, res) => {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  if (req.method === "GET" && req.url === "/.well-known/agent-card.json") {
    res.writeHead(200, { "Content-Type": "application/json" });
    res.end(JSON.stringify(cardJSON));
    return;
  }
  if (req.method !== "POST" || req.url !== "/a2a") {
    res.writeHead(404).end();
    return;
  }
  const body = Buffer.concat(chunks).toString();
  try {
    const parsed = JSON.parse(body);
    console.log(`call ${parsed.method} ${parsed.params?.message?.messageId ?? parsed.params?.id ?? ""}`);
  } catch {}
  const context = new ServerCallContext({ user: new UnauthenticatedUser(), requestedVersion: req.headers["a2a-version"] || "0.3" });
  const out = await transport.handle(body, context);
  if (out && typeof out[Symbol.asyncIterator] === "function") {
    res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
    try {
      for await (const ev of out) res.write(`data: ${JSON.stringify(ev)}\n\n`);
    } catch (err) {
      res.write(`data: ${JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32603, message: String(err) } })}\n\n`);
    }
    res.end();
    return;
  }
  res.writeHead(200, { "Content-Type": "application/json" });
  res.end(JSON.stringify(out));
});
let transport;
server.listen(port, "127.0.0.1", () => {
  const url = `http://127.0.0.1:${server.address().port}`;
  cardJSON = {
    name: "colours",
    description: "Asks which colour, then confirms it.",
    version: "1.0.0",
    supportedInterfaces: [{ url: `${url}/a2a`, protocolBinding: "JSONRPC", protocolVersion: "1.0" }],
    capabilities: { streaming: true, pushNotifications: false },
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
    skills: [{ id: "colours", name: "colours", description: "Picks a colour.", tags: ["colours"] }],
  };
  const handler = new DefaultRequestHandler(AgentCard.fromJSON(cardJSON), new InMemoryTaskStore(), executor);
  transport = new JsonRpcTransportHandler(handler);
  console.log(`listening ${server.address().port}`);
});
