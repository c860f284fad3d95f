"""render_steps gives the text of ``stepwise trace`` for the same session."""

from __future__ import annotations

import subprocess
import unittest

from stepwise import Client, HumanInputRequest
from stepwise.render import _go_json_indent, render_steps

from .server import Server, stepwise_bin

server: Server
client: Client


def setUpModule() -> None:
    global server, client
    server = Server(agents=["asker.yaml", "approver.yaml"]).start()
    client = Client(server.url)


def tearDownModule() -> None:
    server.stop()


def cli_trace(session_id: str) -> str:
    out = subprocess.run([stepwise_bin(), "--server", server.url, "trace", session_id], capture_output=True,
                         text=True, check=True, env={"PATH": "/usr/bin:/bin", "HOME": server.dir}, cwd=server.dir)
    return out.stdout.rstrip("\n")


class RenderTest(unittest.TestCase):
    def drive(self, agent: str, answer) -> str:
        inv = client.initiate(agent, "Compute <6*7> & tell me")
        for step in client.steps(inv, timeout=5):
            if isinstance(step, HumanInputRequest):
                client.provide_human_input(inv, step.request_id, answer)
        return inv.session_id

    def test_matches_the_cli_trace(self) -> None:
        for agent, answer in (("sdk-asker", "yes <go> & do"), ("sdk-approver", {"approved": True})):
            sid = self.drive(agent, answer)
            with self.subTest(agent=agent):
                mine = render_steps(client.list_steps(sid))
                self.assertIn("--- Step 1 ---\nUser: Compute <6*7> & tell me", mine)
                self.assertIn("Action Purpose: call calculator", mine)
                self.assertEqual(mine, cli_trace(sid))

    def test_go_json(self) -> None:
        self.assertEqual(_go_json_indent({"b": [1, 2.5, {"x": "<&>"}], "a": None, "c": {}}),
                         '{\n  "a": null,\n  "b": [\n    1,\n    2.5,\n    {\n      "x": "\\u003c\\u0026\\u003e"\n'
                         '    }\n  ],\n  "c": {}\n}')


if __name__ == "__main__":
    unittest.main()
