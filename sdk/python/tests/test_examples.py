"""The examples run against a real server and do what their docstrings say."""

from __future__ import annotations

import os
import subprocess
import sys
import unittest

from .fakemodel import FakeModel
from .server import REPO, Server, stepwise_bin

server: Server
model: FakeModel


def reply(req: dict, k: int) -> dict:
    if k == 0:
        return {"tool_calls": [{"name": "lookup_order", "arguments": {"order": "A-17"}}]}
    return {"text": "Order A-17 shipped yesterday."}


def setUpModule() -> None:
    global server, model
    model = FakeModel(reply)
    server = Server(agents=[os.path.join(REPO, "sdk", "examples", "approval-agent.yaml")]).start()


def tearDownModule() -> None:
    server.stop()
    model.close()


def run_example(name: str, *args: str, stdin: str = "") -> str:
    p = subprocess.run([sys.executable, os.path.join(REPO, "sdk", "python", "examples", name), *args],
                       input=stdin, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, STEPWISE_SERVER=server.url))
    if p.returncode != 0:
        raise AssertionError(f"{name} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p.stdout


class ExamplesTest(unittest.TestCase):
    def test_approval_loop(self) -> None:
        for args, stdin in ((["--yes"], ""), (["--asyncio", "--yes"], ""), ([], "y\n")):
            with self.subTest(args=args):
                out = run_example("approval_loop.py", *args, "What is 6*7?", stdin=stdin)
                self.assertIn("#1 user: What is 6*7?", out)
                self.assertIn('calculator({"expression": "6*7"})', out)
                self.assertIn("approved", out)
                self.assertIn("result: The answer is 42.", out)
                if stdin:
                    self.assertIn("[y/N]", out)

    def test_typed_steps(self) -> None:
        out = run_example("typed_steps.py", "--model", "openai:fake", "--base-url", model.url,
                          "--api-key-env", "STEPWISE_SDK_FAKE_KEY", "Where is order A-17?")
        head, _, trace = out.partition("\n\n")
        for want in ("--- Step 1 ---\nUser: Where is order A-17?",
                     "Decision Purpose: Does the question name an order?\nDecision: normalise",
                     "Step: normalise\nAction: Call Program: normalise_ticket\nSummary: normalised ticket for A-17",
                     "Action Purpose: call lookup_order",
                     '"result": "{\\"order\\":\\"A-17\\",\\"status\\":\\"shipped\\"}"',
                     "Assistant: Order A-17 shipped yesterday."):
            self.assertIn(want, trace)
        # The steps the Python worker served name it, as stepwise trace does.
        self.assertRegex(trace, r"Step: normalise\n(?:[^\n]+\n)*?Worker: typed-steps-\d+")
        session = head.split()[-1]
        cli = subprocess.run([stepwise_bin(), "--server", server.url, "trace", session], capture_output=True,
                             text=True, check=True, cwd=server.dir)
        self.assertEqual(trace.rstrip("\n"), cli.stdout.rstrip("\n"), "the SDK renders what stepwise trace renders")


if __name__ == "__main__":
    unittest.main()
