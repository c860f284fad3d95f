"""A local OpenAI-compatible chat-completions server (streamed SSE chunks)
for the worker tests: a worker may not register a scripted model (it reads
a file of the server), so the agents it registers use ``openai:fake`` with
this server as their base_url.

``reply(request, k)`` chooses each answer, k being the number of assistant
messages after the last user message; it returns {"text": ...} or
{"tool_calls": [{"name", "arguments"}]}. Tool call ids are call_<p>_<i>,
p the assistant messages of the whole request.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


class FakeModel:
    def __init__(self, reply: Callable[[dict, int], dict]) -> None:
        self.requests: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                if not self.path.endswith("/chat/completions"):
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                fake.requests.append(body)
                msgs = body.get("messages") or []
                last_user = max([i for i, m in enumerate(msgs) if m.get("role") == "user"], default=-1)
                k = sum(1 for m in msgs[last_user + 1:] if m.get("role") == "assistant")
                p = sum(1 for m in msgs if m.get("role") == "assistant")
                turn = reply(body, k)
                out = []

                def chunk(delta: Any, finish: Any = None) -> None:
                    out.append("data: " + json.dumps({"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                                                      "created": 1, "model": "fake",
                                                      "choices": [{"index": 0, "delta": delta,
                                                                   "finish_reason": finish}]}) + "\n\n")

                if turn.get("tool_calls"):
                    for i, c in enumerate(turn["tool_calls"]):
                        head = {"index": i, "id": f"call_{p}_{i}", "type": "function",
                                "function": {"name": c["name"], "arguments": ""}}
                        chunk({"role": "assistant", "content": None, "tool_calls": [head]} if i == 0
                              else {"tool_calls": [head]})
                        chunk({"tool_calls": [{"index": i, "function": {"arguments": json.dumps(c.get("arguments") or {})}}]})
                    chunk({}, "tool_calls")
                else:
                    chunk({"role": "assistant", "content": ""})
                    chunk({"content": turn.get("text", "")})
                    chunk({}, "stop")
                out.append("data: [DONE]\n\n")
                data = "".join(out).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.model = "openai:fake"
        self.model_options = {"base_url": self.url, "api_key_env": "STEPWISE_SDK_FAKE_KEY"}
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
