"""Breakpoints from the client: a run started with breakpoints pauses, the
pause is a pending input with its breakpoint, and continue_run steps, edits
the state and goes on (docs/breakpoints.md)."""

from __future__ import annotations

import asyncio
import unittest

from stepwise import AsyncClient, BreakpointPause, Client, HumanInputRequest, PendingInput, Result, StepwiseError

from .server import Server, wait_for

server: Server
client: Client


def setUpModule() -> None:
    global server, client
    server = Server(agents=["stepper.yaml", "approver.yaml"]).start()
    client = Client(server.url)


def tearDownModule() -> None:
    server.stop()


def pause_of(run_id: str, other_than: str = "") -> PendingInput:
    """Waits for the run's pending breakpoint pause (one other than other_than)."""
    def find():
        return next((p for p in client.list_inputs(run_id) if p.breakpoint and p.request_id != other_than), None)
    return wait_for(find, what=f"a pause of run {run_id}")


def finished(run_id: str):
    return wait_for(lambda: (r := client.get_run(run_id)).status == "completed" and r, what=f"run {run_id} to finish")


class BreakpointTest(unittest.TestCase):
    def test_continue_run_steps_edits_state_and_finishes(self) -> None:
        run, _ = client.start_run("sdk-stepper", "What is 6*7?", breakpoints={"before": ["tools"]})
        self.assertEqual(run.options.get("breakpoints"), {"before": ["tools"]})

        first = pause_of(run.id)
        bp = first.breakpoint
        self.assertIsInstance(bp, BreakpointPause)
        self.assertEqual((bp.when, bp.step, bp.kind, bp.tools, bp.matched),
                         ("before", "tools", "tool", ["calculator"], "tools"))
        self.assertGreater(bp.at, 0)
        self.assertEqual(first.request["breakpoint"]["step"], "tools")
        self.assertEqual(client.get_run(run.id).status, "waiting")

        # A state that is not a dict is refused before anything is sent.
        for bad in ([1], "x", 7):
            with self.assertRaisesRegex(TypeError, "state must be a dict"):
                client.continue_run(run.id, state=bad)
        self.assertEqual(pause_of(run.id).request_id, first.request_id)

        stepped = client.continue_run(run.id, step=True)
        self.assertEqual((stepped.id, stepped.kind, stepped.outputs), (first.request_id, "input", {"action": "step"}))

        # Stepping ran the tools step and paused again before the next one.
        second = pause_of(run.id, other_than=first.request_id)
        bp = second.breakpoint
        self.assertEqual((bp.when, bp.step, bp.kind, bp.matched), ("before", "llm", "llm", "step"))
        steps = client.list_steps(run.session_id)
        self.assertTrue(any(s.kind == "tool" and s.tool_name == "calculator" for s in steps), "the tools step ran")

        edited = client.continue_run(run.id, state={"note": "edited"})
        self.assertEqual(edited.outputs, {"action": "continue", "state": {"note": "edited"}})
        done = finished(run.id)
        self.assertEqual(done.output, "The answer is 42.")
        self.assertEqual(done.state, {"note": "edited"})

        with self.assertRaises(StepwiseError) as cm:
            client.continue_run(run.id)
        e = cm.exception
        self.assertEqual((e.status, e.code, e.retryable), (409, "not_at_breakpoint", False))
        self.assertIn(run.id, str(e))

    def test_initiate_with_breakpoints_yields_the_pause(self) -> None:
        inv = client.initiate("sdk-stepper", "What is 6*7?", breakpoints={"after": ["tool:calculator"]})
        request, result = None, None
        for step in client.steps(inv, timeout=5):
            if isinstance(step, HumanInputRequest):
                request = step
                client.continue_run(inv.run_id)
            if isinstance(step, Result):
                result = step.value
        self.assertIsNotNone(request)
        self.assertIsInstance(request.breakpoint, BreakpointPause)
        self.assertEqual((request.breakpoint.when, request.breakpoint.step, request.breakpoint.matched),
                         ("after", "tools", "tool:calculator"))
        self.assertEqual(result, "The answer is 42.")

    def test_continue_run_refuses_a_run_waiting_for_an_approval(self) -> None:
        inv = client.initiate("sdk-approver", "What is 6*7?")
        pending = wait_for(lambda: client.list_inputs(inv.run_id), what="the approval")
        self.assertIsNone(pending[0].breakpoint)
        self.assertEqual(pending[0].request["approval"]["name"], "calculator")
        with self.assertRaises(StepwiseError) as cm:
            client.continue_run(inv.run_id)
        self.assertEqual(cm.exception.code, "not_at_breakpoint")
        client.cancel_run(inv.run_id)

    def test_asyncio_continue_run(self) -> None:
        async def main() -> list[str]:
            ac = AsyncClient(server.url)
            run, _ = await ac.start_run("sdk-stepper", "What is 6*7?", breakpoints={"before": ["llm"]})
            first = await asyncio.to_thread(pause_of, run.id)
            await ac.continue_run(run.id)
            second = await asyncio.to_thread(pause_of, run.id, first.request_id)
            await ac.continue_run(run.id)
            done = await asyncio.to_thread(finished, run.id)
            return [first.breakpoint.step, second.breakpoint.step, done.output]

        self.assertEqual(asyncio.run(main()), ["llm", "llm", "The answer is 42."])

    def test_pause_parsing_keeps_unknown_fields(self) -> None:
        p = PendingInput.from_json({"request_id": "r", "run_id": "u", "session_id": "s", "request": {
            "prompt": "Paused", "breakpoint": {"when": "after", "step": "x", "matched": "*", "at": 4, "future": 1}}})
        self.assertEqual((p.breakpoint.when, p.breakpoint.step, p.breakpoint.at, p.breakpoint.tools),
                         ("after", "x", 4, []))
        self.assertEqual(p.breakpoint.raw["future"], 1)
        self.assertIsNone(PendingInput.from_json({"request_id": "r", "run_id": "u", "session_id": "s"}).breakpoint)


if __name__ == "__main__":
    unittest.main()
