"""Test helpers: a real ``stepwise serve`` (the binary of STEPWISE_BIN, or one
built from this tree with ``go build``) on a fresh SQLite file, or on the
PostgreSQL database of STEPWISE_SDK_DB, with the agents of sdk/testdata."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from typing import Callable, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
TESTDATA = os.path.join(REPO, "sdk", "testdata")

_built: Optional[str] = None


def stepwise_bin() -> str:
    global _built
    if os.environ.get("STEPWISE_BIN"):
        return os.environ["STEPWISE_BIN"]
    if _built is None:
        out = os.path.join(tempfile.mkdtemp(prefix="stepwise-sdk-bin-"), "stepwise")
        subprocess.run(["go", "build", "-o", out, "./cmd/stepwise"], cwd=REPO, check=True)
        _built = out
    return _built


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(cond: Callable[[], object], timeout: float = 30.0, what: str = "condition") -> object:
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class Server:
    """``stepwise serve`` with the given agent files (names in sdk/testdata)."""

    def __init__(self, agents: list[str] = (), tokens: list[str] = (), args: list[str] = ()) -> None:
        self.dir = tempfile.mkdtemp(prefix="stepwise-sdk-py-")
        env_db = os.environ.get("STEPWISE_SDK_DB", "")
        self.db = env_db if env_db.startswith("postgres") else "sqlite:" + os.path.join(self.dir, "stepwise.db")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = tokens[0] if tokens else None
        argv = [stepwise_bin(), "--db", self.db, "serve", "--addr", f"127.0.0.1:{self.port}"]
        for a in agents:
            path = a if os.path.isabs(a) else os.path.join(TESTDATA, a)
            if not os.path.exists(path):
                raise FileNotFoundError(path)
            argv += ["--agent", path]
        for t in tokens:
            argv += ["--token", t]
        self.argv = argv + list(args)
        self.log = ""
        self.proc: Optional[subprocess.Popen] = None

    def start(self) -> "Server":
        env = dict(os.environ, STEPWISE_DB="", STEPWISE_SERVER="", STEPWISE_SDK_FAKE_KEY="sk-fake")
        self.proc = subprocess.Popen(self.argv, cwd=self.dir, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        proc = self.proc

        def drain() -> None:
            for line in proc.stdout:
                self.log += line.decode("utf-8", "replace")

        self.drainer = threading.Thread(target=drain, daemon=True)
        self.drainer.start()

        def up() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"stepwise serve exited {proc.returncode}:\n{self.log}")
            req = urllib.request.Request(self.url + "/v1/health")
            if self.token:
                req.add_header("Authorization", f"Bearer {self.token}")
            try:
                with urllib.request.urlopen(req, timeout=2) as r:
                    return r.status == 200
            except OSError:
                return False

        wait_for(up, 60, f"stepwise serve on {self.url}")
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(60)
        if self.proc and self.proc.stdout:
            self.drainer.join(10)
            self.proc.stdout.close()
