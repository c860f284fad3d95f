"""The worker half against a real ``stepwise serve``: decorated steps with
typed yields and ``next`` routing, a Step class in the before / execute /
after shape, a tool the model calls, human input from a step, retries,
async handlers, a refused definition, and a graceful stop that hands a task
to another worker. The model is a local OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import threading
import time
import unittest

from stepwise import (Agent, AskHuman, Client, CustomStep, Decision, HumanInputRequest, Progress, Retry, RunError,
                      StepResult, StepwiseError, TransientError, Worker, Yield)

from .fakemodel import FakeModel
from .server import Server, wait_for

server: Server
client: Client
model: FakeModel


def reply(req: dict, k: int) -> dict:
    msgs = req["messages"]
    last = next((m.get("content") or "" for m in reversed(msgs) if m["role"] == "user"), "")
    if "refund" in last and k == 0:
        return {"tool_calls": [{"name": "refund", "arguments": {"order": "A-9"}}]}
    if "lookup" in last and k == 0:
        return {"tool_calls": [{"name": "lookup", "arguments": {"order": "A-17"}}]}
    tool = next((m for m in reversed(msgs) if m["role"] == "tool"), None)
    return {"text": f"model saw: {tool['content']}" if tool else f"model answers: {last}"}


def setUpModule() -> None:
    global server, client, model
    model = FakeModel(reply)
    server = Server().start()
    client = Client(server.url)


def tearDownModule() -> None:
    server.stop()
    model.close()


class Serving:
    """A worker running on a thread for the duration of a with block."""

    def __init__(self, agent: Agent, worker_id: str = "") -> None:
        self.worker = Worker(server.url, agents=[agent], worker_id=worker_id or None, poll_wait=2)
        self.thread = threading.Thread(target=self.worker.run, kwargs={"handle_signals": False}, daemon=True)

    def __enter__(self) -> Worker:
        self.worker.register()
        self.thread.start()
        return self.worker

    def __exit__(self, *exc: object) -> None:
        self.worker.stop()
        self.thread.join(30)
        assert not self.thread.is_alive(), "the worker stopped"


def finish(inv):
    return list(client.steps(inv, timeout=5))


class WorkerTest(unittest.TestCase):
    def test_steps_route_yield_and_update_state(self) -> None:
        agent = Agent("sdk-py-pipeline", model=model.model, model_options=model.model_options,
                      start_step="validate", reducers={"checks": "append"})

        @agent.step("validate", next=["transform", "reject"])
        def validate(ctx):
            yield Yield("validation.checking", {"chars": len(ctx.run_input)})
            yield Progress(0.5, "checking")
            if "invalid" in ctx.run_input:
                return StepResult(next="reject", state={"checks": ["invalid"]})
            return StepResult(next="transform", state={"checks": ["valid"]},
                              decision=Decision("transform", purpose="Is the ticket valid?",
                                                options=["transform", "reject"]))

        @agent.step("transform", next=["llm"])
        class Transform(CustomStep):
            def before_execute(self, ctx):
                return ctx.run_input.upper()

            def execute(self, ctx, upper):
                return StepResult(next="llm", state={"upper": upper, "checks": ["transformed"]})

            def after_execute(self, ctx, result):
                result.annotations = {"action": "uppercased"}
                return result

        @agent.step("reject")
        def reject(ctx):
            return StepResult(next="end", content="rejected " + ",".join(ctx.state["checks"]))

        with Serving(agent, "py-pipeline-1"):
            run, inv = client.start_run("sdk-py-pipeline", "hello there")
            yields = [ev.yield_ for ev in client.subscribe(run_id=run.id) if ev.type == "step_yield"]
            self.assertEqual(yields, [{"name": "validation.checking", "data": {"chars": 11}}])
            steps = client.list_steps(inv.session_id)
            self.assertEqual([(s.kind, s.name) for s in steps],
                             [("user", "input"), ("decision", "validate"), ("custom", "transform"), ("llm", "llm")])
            self.assertEqual(steps[1].metadata.get("worker"), "py-pipeline-1")
            self.assertEqual(steps[2].annotations.get("action"), "uppercased")
            self.assertEqual(steps[-1].content, "model answers: hello there")
            r = client.get_run(run.id)
            self.assertEqual(r.status, "completed")
            self.assertEqual(r.state, {"checks": ["valid", "transformed"], "upper": "HELLO THERE"})

            calls = len(model.requests)
            inv2 = client.initiate("sdk-py-pipeline", "this is invalid")
            self.assertEqual(finish(inv2)[-1].type, "result")
            self.assertEqual([s.name for s in client.list_steps(inv2.session_id)], ["input", "validate", "reject"])
            self.assertEqual(len(model.requests), calls, "the reject branch never calls the model")

    def test_tool_called_by_the_model(self) -> None:
        agent = Agent("sdk-py-tools", model=model.model, model_options=model.model_options)
        seen = []

        @agent.tool(parameters={"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]},
                    output_schema={"type": "object", "required": ["status"]})
        async def lookup(args, ctx):
            """Look an order up."""
            seen.append(ctx.idempotency_key)
            await asyncio.sleep(0)
            return {"order": args["order"], "status": "shipped"}

        with Serving(agent) as w:
            inv = client.initiate("sdk-py-tools", "please lookup my order")
            last = finish(inv)[-1]
            self.assertEqual(last.value, 'model saw: {"order":"A-17","status":"shipped"}')
            tool = next(s for s in client.list_steps(inv.session_id) if s.kind == "tool")
            self.assertEqual((tool.tool_name, tool.metadata.get("worker")), ("lookup", w.worker_id))
            self.assertEqual(len(seen), 1)

    def test_tool_asks_a_human(self) -> None:
        agent = Agent("sdk-py-tool-ask", model=model.model, model_options=model.model_options)
        seen = []

        @agent.tool(parameters={"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]})
        def refund(args, ctx):
            """Refund an order, once a person agrees."""
            seen.append(len(ctx.answers))
            if ctx.answer is None:
                return AskHuman(f"Refund {args['order']}?", schema={"type": "boolean"})
            return {"order": args["order"], "refunded": ctx.answer}

        with Serving(agent) as w:
            inv = client.initiate("sdk-py-tool-ask", "refund please")
            req = None
            for step in client.steps(inv, timeout=5):
                if isinstance(step, HumanInputRequest):
                    req = step
                    self.assertEqual(client.get_run(inv.run_id).status, "waiting")
                    client.provide_human_input(inv, step.request_id, True)
                last = step
            self.assertEqual(req.prompt, "Refund A-9?")
            self.assertEqual(last.value, 'model saw: {"order":"A-9","refunded":true}')
            self.assertEqual(seen, [0, 1])
            tool = next(s for s in client.list_steps(inv.session_id) if s.kind == "tool")
            self.assertEqual(tool.metadata.get("worker"), w.worker_id)

    def test_human_input_and_transient_retry(self) -> None:
        agent = Agent("sdk-py-ask", model=model.model, model_options=model.model_options, start_step="confirm",
                      retry=Retry(max_attempts=3, initial_interval="10ms", max_interval="20ms"))
        attempts = []

        @agent.step("confirm")
        def confirm(ctx):
            if ctx.answer is None:
                return AskHuman("Ship it?", schema={"type": "string"}, state={"asked": True})
            return StepResult(next="flaky", state={"answer": ctx.answer})

        @agent.step("flaky")
        def flaky(ctx):
            attempts.append(ctx.attempt)
            if len(attempts) < 2:
                raise TransientError("not yet")
            return StepResult(next="end", content="shipped")

        with Serving(agent):
            inv = client.initiate("sdk-py-ask", "go")
            req = None
            for step in client.steps(inv, timeout=5):
                if isinstance(step, HumanInputRequest):
                    req = step
                    self.assertEqual(client.get_run(inv.run_id).status, "waiting")
                    client.provide_human_input(inv, step.request_id, "yes")
            self.assertEqual(req.prompt, "Ship it?")
            self.assertEqual(client.get_run(inv.run_id).state, {"asked": True, "answer": "yes"})
            self.assertEqual(len(attempts), 2)
            self.assertTrue(any(s.kind == "error" and "not yet" in s.error["message"]
                                for s in client.list_steps(inv.session_id)))

    def test_unknown_next_fails_the_run(self) -> None:
        agent = Agent("sdk-py-badnext", model=model.model, model_options=model.model_options, start_step="route")

        @agent.step("route")
        def route(ctx):
            return StepResult(next="nowhere")

        with Serving(agent):
            inv = client.initiate("sdk-py-badnext", "go")
            with self.assertRaises(RunError) as cm:
                finish(inv)
            self.assertIn("nowhere", str(cm.exception))

    def test_malformed_definition_is_refused(self) -> None:
        agent = Agent("sdk-py-bad", model="openai:x", definition={"limits": {"max_steps": -1}})
        with self.assertRaises(StepwiseError) as cm:
            Worker(server.url, agents=[agent]).register()
        self.assertEqual((cm.exception.status, cm.exception.code), (422, "invalid_definition"))

    def test_graceful_stop_hands_the_task_to_another_worker(self) -> None:
        started = threading.Event()

        def make(name: str) -> Agent:
            agent = Agent("sdk-py-handoff", model=model.model, model_options=model.model_options, start_step="work")

            @agent.step("work")
            def work(ctx):
                if name == "first":
                    started.set()
                    while not ctx.cancelled:
                        time.sleep(0.01)
                    return StepResult(next="end", content="from the first worker (must not commit)")
                return StepResult(next="end", content=f"done by {name}")

            return agent

        first = Serving(make("first"), "py-first")
        first.__enter__()
        inv = client.initiate("sdk-py-handoff", "go")
        wait_for(started.is_set, 30, "the first worker to take the task")
        t0 = time.monotonic()
        first.__exit__(None, None, None)
        with Serving(make("second"), "py-second"):
            self.assertEqual(finish(inv)[-1].type, "result")
            elapsed = time.monotonic() - t0
            work = [s for s in client.list_steps(inv.session_id) if s.name == "work"]
            self.assertEqual(len(work), 1)
            self.assertEqual((work[0].content, work[0].metadata.get("worker")), ("done by second", "py-second"))
            self.assertLess(elapsed, 10, "handed back, not left to expire")

    def test_run_async(self) -> None:
        agent = Agent("sdk-py-async", model=model.model, model_options=model.model_options, start_step="go")

        @agent.step("go")
        async def go(ctx):
            yield Yield("async.step", {"ok": True})
            yield StepResult(next="end", content="async done")

        async def main() -> str:
            w = Worker(server.url, agents=[agent], poll_wait=2)
            task = asyncio.ensure_future(w.run_async())
            await asyncio.to_thread(wait_for, lambda: w.limits, 30, "registration")
            inv = await asyncio.to_thread(client.initiate, "sdk-py-async", "go")
            steps = await asyncio.to_thread(finish, inv)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            self.assertEqual(steps[-1].type, "result")
            return (await asyncio.to_thread(client.list_steps, inv.session_id))[-1].content

        self.assertEqual(asyncio.run(main()), "async done")


if __name__ == "__main__":
    unittest.main()
