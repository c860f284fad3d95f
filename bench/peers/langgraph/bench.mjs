// The LangGraph.js side of Stepwise's peer benchmark: the standard agent loop
// of `stepwise bench` (the model asks for one tool, the tool answers, repeat)
// as a LangGraph StateGraph, on a zero-latency in-process model, with a choice
// of checkpointer. See README.md for how its steps match Stepwise's.
//
//   node bench.mjs [--saver sqlite|memory|none] [--steps N] [--sync NORMAL|FULL]
//                  [--durability async|sync|exit] [--dir DIR] [--json]
import { mkdtempSync, rmSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";
import { performance } from "node:perf_hooks";

import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { END, MemorySaver, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";

const usage =
  "usage: node bench.mjs [--saver sqlite|memory|none] [--steps N] [--sync NORMAL|FULL] [--durability async|sync|exit] [--dir DIR] [--json]";

function parseArgs(argv) {
  const o = { saver: "sqlite", steps: 1000, sync: "NORMAL", durability: "async", dir: "", json: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) fail(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case "--saver": o.saver = value(); break;
      case "--steps": o.steps = Number(value()); break;
      case "--sync": o.sync = value().toUpperCase(); break;
      case "--durability": o.durability = value(); break;
      case "--dir": o.dir = value(); break;
      case "--json": o.json = true; break;
      case "-h": case "--help": console.log(usage); process.exit(0);
      default: fail(`unknown argument ${a}`);
    }
  }
  if (!["sqlite", "memory", "none"].includes(o.saver)) fail(`--saver ${o.saver}: want sqlite, memory or none`);
  if (!Number.isInteger(o.steps) || o.steps < 2) fail("--steps: want an integer ≥ 2");
  if (!["NORMAL", "FULL"].includes(o.sync)) fail(`--sync ${o.sync}: want NORMAL or FULL`);
  if (!["async", "sync", "exit"].includes(o.durability)) fail(`--durability ${o.durability}: want async, sync or exit`);
  return o;
}

function fail(msg) {
  console.error(`bench.mjs: ${msg}\n${usage}`);
  process.exit(2);
}

// The versions actually loaded, for the report.
function versions() {
  const require = createRequire(import.meta.url);
  const here = dirname(fileURLToPath(import.meta.url));
  const out = { node: process.versions.node };
  for (const p of ["@langchain/langgraph", "@langchain/langgraph-checkpoint-sqlite", "@langchain/core", "better-sqlite3"]) {
    try {
      out[p] = JSON.parse(readFileSync(join(here, "node_modules", p, "package.json"), "utf8")).version;
    } catch {
      try { out[p] = require(`${p}/package.json`).version; } catch { out[p] = "?"; }
    }
  }
  return out;
}

const opts = parseArgs(process.argv.slice(2));

// Steps as `stepwise bench` counts them: the user message, then per loop
// iteration a model step and a tool step, then the model's final answer.
// N steps are (N-2)/2 iterations; here the user message is the graph's input
// and every other step is one node run (agent or tools), one super-step.
const iterations = Math.max(0, Math.floor((opts.steps - 2) / 2));
const steps = 2 + 2 * iterations;

// The zero-latency scripted model: a tool call per reply for `iterations`
// replies, then a plain answer. Deterministic: the ids come from a counter.
let replies = 0;
function agent() {
  replies++;
  if (replies <= iterations) {
    return {
      messages: [new AIMessage({
        content: "",
        tool_calls: [{ id: `call_${replies}`, name: "echo", args: { n: 1 }, type: "tool_call" }],
      })],
    };
  }
  return { messages: [new AIMessage({ content: "done" })] };
}

// The tool node: echo returns its argument, one ToolMessage per call.
function tools(state) {
  const last = state.messages[state.messages.length - 1];
  return {
    messages: last.tool_calls.map((c) => new ToolMessage({ content: String(c.args.n), tool_call_id: c.id, name: c.name })),
  };
}

function route(state) {
  const last = state.messages[state.messages.length - 1];
  return last.tool_calls?.length ? "tools" : END;
}

let tmp = "";
let checkpointer;
let dbPath = "";
if (opts.saver === "sqlite") {
  tmp = opts.dir || mkdtempSync(join(tmpdir(), "langgraph-bench-"));
  dbPath = join(tmp, `bench-${Date.now()}.db`);
  const require = createRequire(import.meta.url);
  const Database = require("better-sqlite3");
  const db = new Database(dbPath);
  // SqliteSaver switches the file to WAL itself; the synchronous mode is
  // set here to match `stepwise bench --sync` (SQLite's default is FULL).
  db.pragma("journal_mode=WAL");
  db.pragma(`synchronous=${opts.sync}`);
  checkpointer = new SqliteSaver(db);
} else if (opts.saver === "memory") {
  checkpointer = new MemorySaver();
}

const graph = new StateGraph(MessagesAnnotation)
  .addNode("agent", agent)
  .addNode("tools", tools)
  .addEdge(START, "agent")
  .addConditionalEdges("agent", route, ["tools", END])
  .addEdge("tools", "agent")
  .compile(checkpointer ? { checkpointer } : {});

const config = {
  configurable: { thread_id: "bench" },
  recursionLimit: steps + 10,
  streamMode: "updates",
  durability: opts.durability,
};

// Timed from the start of the run to the last node's update; each node's
// update is one step's end (the user step is the input, at time 0).
const times = [];
const cpu0 = process.cpuUsage();
const t0 = performance.now();
times.push(t0);
let nodes = 0;
for await (const _update of await graph.stream({ messages: [new HumanMessage("go")] }, config)) {
  times.push(performance.now());
  nodes++;
}
const t1 = performance.now();
const cpu = process.cpuUsage(cpu0);

if (nodes !== steps - 1) {
  console.error(`bench.mjs: ${nodes} node runs, want ${steps - 1}`);
  process.exit(1);
}
if (replies !== iterations + 1) {
  console.error(`bench.mjs: ${replies} model replies, want ${iterations + 1}`);
  process.exit(1);
}
// The checkpoints the saver holds, counted without loading them.
let checkpoints = null;
if (opts.saver === "sqlite") {
  checkpoints = checkpointer.db.prepare("SELECT count(*) AS n FROM checkpoints WHERE thread_id = 'bench'").get().n;
  checkpointer.db.close();
} else if (opts.saver === "memory") {
  checkpoints = Object.values(checkpointer.storage.bench ?? {}).reduce((sum, ns) => sum + Object.keys(ns).length, 0);
}

const wallUS = (t1 - t0) * 1e3;
const cpuUS = cpu.user + cpu.system;
// Deciles over the node runs (the input step has no end of its own).
const n = times.length - 1;
const d = Math.floor(n / 10);
const result = {
  saver: opts.saver,
  steps,
  node_runs: nodes,
  checkpoints,
  durability: opts.durability,
  synchronous: opts.saver === "sqlite" ? opts.sync : undefined,
  per_step_us: wallUS / steps,
  first_decile_us: d > 0 ? ((times[d] - times[0]) * 1e3) / d : 0,
  last_decile_us: d > 0 ? ((times[n] - times[n - d]) * 1e3) / d : 0,
  steps_per_s: steps / (wallUS / 1e6),
  wall_s: wallUS / 1e6,
  cpu_s: cpuUS / 1e6,
  cpu_per_step_us: cpuUS / steps,
  peak_rss_mb: process.resourceUsage().maxRSS / 1024,
  versions: versions(),
};

if (tmp && !opts.dir) rmSync(tmp, { recursive: true, force: true });

if (opts.json) {
  console.log(JSON.stringify(result));
} else {
  const r = result;
  console.log(
    `langgraph saver=${r.saver}${r.synchronous ? `(${r.synchronous})` : ""} durability=${r.durability} steps=${r.steps}  ` +
      `per-step ${r.per_step_us.toFixed(1)} µs  first-decile ${r.first_decile_us.toFixed(1)} µs  last-decile ${r.last_decile_us.toFixed(1)} µs  ` +
      `${r.steps_per_s.toFixed(0)} steps/s  wall ${r.wall_s.toFixed(3)} s  CPU ${r.cpu_s.toFixed(3)} s (${r.cpu_per_step_us.toFixed(1)} µs/step)  ` +
      `peak RSS ${r.peak_rss_mb.toFixed(1)} MB` + (r.checkpoints !== null ? `  checkpoints ${r.checkpoints}` : ""),
  );
}
