"""The examples run against a real server and do what their docstrings say."""

from __future__ import annotations

import os
import subprocess
import sys
import unittest

from .server import REPO, Server

server: Server


def setUpModule() -> None:
    global server
    server = Server(agents=[os.path.join(REPO, "sdk", "examples", "approval-agent.yaml")]).start()


def tearDownModule() -> None:
    server.stop()


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


if __name__ == "__main__":
    unittest.main()
