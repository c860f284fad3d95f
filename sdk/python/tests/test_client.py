"""The client half against a real ``stepwise serve``: the step-by-step loop
with an approval, the iterator form, human input, sessions, fork / retry /
replay, asyncio, and the problems of bad requests."""

from __future__ import annotations

import asyncio
import re
import unittest

from stepwise import (AsyncClient, Client, Continuation, ErrorStep, HumanInputRequest, Result, RunError,
                      StepwiseError)

from .server import Server

server: Server
client: Client


def setUpModule() -> None:
    global server, client
    server = Server(agents=["approver.yaml", "asker.yaml", "looper.yaml"]).start()
    client = Client(server.url)


def tearDownModule() -> None:
    server.stop()


def finish(c: Client, inv, answer="fine"):
    """Drives inv to its end, answering every request; returns the step types."""
    seen = []
    for step in c.steps(inv, timeout=5):
        seen.append(step.type)
        if isinstance(step, HumanInputRequest):
            c.provide_human_input(inv, step.request_id, answer)
    return seen


class ClientTest(unittest.TestCase):
    def test_agents(self) -> None:
        agents = {a.name: a for a in client.list_agents()}
        self.assertIn("sdk-approver", agents)
        self.assertEqual(agents["sdk-approver"].approvals, {"calculator": "always"})
        self.assertTrue(any(t["name"] == "calculator" for t in agents["sdk-approver"].tools))
        self.assertEqual(client.get_agent("sdk-asker").name, "sdk-asker")
        with self.assertRaises(StepwiseError) as cm:
            client.get_agent("no-such-agent")
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "unknown_agent"))

    def test_step_by_step_loop_with_approval(self) -> None:
        inv = client.initiate("sdk-approver", "What is 6*7?")
        kinds = []
        while True:
            step = client.next_step(inv, timeout=5)
            if isinstance(step, Continuation):
                kinds.append(step.step.kind)
                continue
            self.assertIsInstance(step, HumanInputRequest)
            break
        self.assertEqual(kinds, ["user", "llm"])
        self.assertEqual(step.approval.name, "calculator")
        self.assertEqual(step.approval.arguments, {"expression": "6*7"})
        self.assertEqual(client.get_run(inv.run_id).status, "waiting")
        self.assertEqual([p.request_id for p in client.list_inputs(inv.run_id)], [step.request_id])

        with self.assertRaises(StepwiseError) as cm:
            client.provide_human_input(inv, step.request_id, {"approved": "yes"})
        self.assertEqual((cm.exception.status, cm.exception.code), (422, "invalid_answer"))
        answered = client.provide_human_input(inv, step.request_id, {"approved": True})
        self.assertEqual((answered.kind, answered.outputs), ("input", {"approved": True}))
        with self.assertRaises(StepwiseError) as cm:
            client.provide_human_input(inv, step.request_id, {"approved": True})
        self.assertEqual(cm.exception.code, "already_answered")

        rest = []
        while True:
            step = client.next_step(inv, timeout=5)
            rest.append(step.step.kind if isinstance(step, Continuation) else step.type)
            if isinstance(step, Result):
                self.assertEqual(step.value, "The answer is 42.")
                break
        self.assertEqual(rest, ["tool", "llm", "result"])
        with self.assertRaises(StepwiseError) as cm:
            client.next_step(inv)
        self.assertEqual(cm.exception.code, "run_finished")

    def test_iterator_with_human_input_and_a_second_reader(self) -> None:
        inv = client.initiate("sdk-asker", "Compute something")
        seen = []
        for step in client.steps(inv, timeout=5):
            seen.append(step.type)
            if isinstance(step, HumanInputRequest):
                self.assertIn("May I compute 6*7?", step.prompt)
                client.provide_human_input(inv, step.request_id, "yes, go ahead")
            if isinstance(step, Result):
                self.assertEqual(step.value, "Confirmed and computed: 42.")
        self.assertEqual(seen[-1], "result")
        self.assertIn("human_input_request", seen)
        again = [s.step.kind if isinstance(s, Continuation) else s.type
                 for s in client.steps(type(inv)(inv.run_id, inv.session_id))]
        self.assertEqual(again, ["user", "llm", "input", "llm", "tool", "llm", "result"])

    def test_cancelled_run_raises_run_error(self) -> None:
        inv = client.initiate("sdk-approver", "What is 6*7?")
        last = None
        with self.assertRaises(RunError) as cm:
            for step in client.steps(inv, timeout=5):
                last = step
                if isinstance(step, HumanInputRequest):
                    client.cancel_run(inv.run_id, "changed my mind")
        self.assertIsInstance(last, ErrorStep)
        self.assertIn("changed my mind", str(cm.exception))
        with self.assertRaises(StepwiseError) as cm2:
            client.cancel_run(inv.run_id)
        self.assertEqual(cm2.exception.code, "run_finished")

    def test_sessions_fork_retry_replay(self) -> None:
        inv = client.initiate("sdk-asker", "Please compute", title="py sessions test", metadata={"suite": "py"})
        finish(client, inv)
        s = client.get_session(inv.session_id)
        self.assertEqual((s.title, s.agent, s.metadata), ("py sessions test", "sdk-asker", {"suite": "py"}))
        page, _ = client.list_sessions(agent="sdk-asker", limit=100)
        self.assertIn(inv.session_id, [x.id for x in page])
        every = [x.id for x in client.sessions(agent="sdk-asker", limit=1)]
        self.assertIn(inv.session_id, every)
        self.assertEqual(len(set(every)), len(every))

        steps = client.list_steps(inv.session_id)
        self.assertEqual([x.sequence for x in steps], list(range(1, len(steps) + 1)))
        self.assertEqual(steps[-1].content, "Confirmed and computed: 42.")
        self.assertEqual(client.get_step(inv.session_id, 1).content, "Please compute")
        self.assertEqual(client.session_summary(inv.session_id)["total_steps"], len(steps))

        fork = client.fork(inv.session_id, 2, title="py fork")
        self.assertEqual(fork.parent_session_id, inv.session_id)
        self.assertEqual(len(client.list_steps(fork.id)), 2)
        self.assertIn(fork.id, [x.id for x in client.forks(inv.session_id)])
        self.assertEqual(client.tree(fork.id)["session"]["id"], inv.session_id)

        run, rinv = client.retry(inv.session_id, 2)
        self.assertNotEqual(run.session_id, inv.session_id)
        self.assertEqual(finish(client, rinv, "again")[-1], "result")

        run, pinv = client.replay(inv.session_id)
        self.assertEqual(finish(client, pinv)[-1], "result")
        self.assertTrue(any(x.replay == "reused" for x in client.list_steps(run.session_id)))

        with self.assertRaises(StepwiseError) as cm:
            client.fork(inv.session_id, 0)
        self.assertEqual(cm.exception.status, 422)
        with self.assertRaises(StepwiseError) as cm:
            client.get_session("no-such-session")
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "not_found"))
        with self.assertRaises(StepwiseError) as cm:
            client.start_run("nobody", "x")
        self.assertEqual(cm.exception.code, "unknown_agent")

    def test_asyncio_client(self) -> None:
        async def main() -> list[str]:
            ac = AsyncClient(server.url)
            inv = await ac.initiate("sdk-approver", "What is 6*7?")
            seen = []
            async for step in ac.steps(inv, timeout=5):
                seen.append(step.type)
                if isinstance(step, HumanInputRequest):
                    await ac.provide_human_input(inv, step.request_id, {"approved": True})
            events = [ev.type async for ev in ac.subscribe(run_id=inv.run_id)]
            self.assertEqual(events[-1], "run_finished")
            sessions, _ = await ac.list_sessions(agent="sdk-approver")
            self.assertIn(inv.session_id, [s.id for s in sessions])
            return seen

        seen = asyncio.run(main())
        self.assertEqual(seen[-1], "result")
        self.assertIn("human_input_request", seen)

    def test_tokens(self) -> None:
        guarded = Server(agents=["approver.yaml"], tokens=["sdk-secret"]).start()
        try:
            for c in (Client(guarded.url), Client(guarded.url, token="wrong")):
                with self.assertRaises(StepwiseError) as cm:
                    c.list_agents()
                self.assertEqual((cm.exception.status, cm.exception.code), (401, "unauthorized"))
            names = [a.name for a in Client(guarded.url, token="sdk-secret").list_agents()]
            self.assertIn("sdk-approver", names)
        finally:
            guarded.stop()

    def test_no_server_is_a_transport_error(self) -> None:
        with self.assertRaises(StepwiseError) as cm:
            Client("http://127.0.0.1:1").list_agents()
        self.assertEqual(cm.exception.status, 0)
        self.assertTrue(cm.exception.retryable)
        self.assertTrue(re.search(r"GET /v1/agents", str(cm.exception)))


if __name__ == "__main__":
    unittest.main()
