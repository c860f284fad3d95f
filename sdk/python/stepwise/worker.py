"""The worker half (docs/workers.md): registers agents, long-polls for their
tasks, runs each step or tool handler under the task's lease (heartbeats,
live reports) and finishes it with a result, a failure or a human-input
request. Threads for sync handlers; async handlers run on an event loop of
their task's thread; ``await worker.run_async()`` serves from asyncio.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import http.client
import inspect
import json
import logging
import os
import re
import signal
import socket
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

from .agent import (Agent, AskHuman, Delta, Progress, StepEvent, StepResult, ToolResult, Yield)
from .errors import StepwiseError

log = logging.getLogger("stepwise.worker")


class TaskContext:
    """What a handler sees of its task."""

    def __init__(self, run: "_TaskRun") -> None:
        t = run.task
        inp = t.get("input") or {}
        self._run = run
        self.task: dict[str, Any] = t
        self.worker_id: str = run.worker.worker_id
        self.agent: str = t.get("agent", "")
        self.run_id: str = t.get("run_id", "")
        self.session_id: str = t.get("session_id", "")
        self.step_id: str = t.get("step_id", "")
        self.idempotency_key: str = t.get("idempotency_key", "")
        self.attempt: int = t.get("attempt", 1)
        self.state: dict[str, Any] = inp.get("state") or {}
        self.run_input: str = inp.get("run_input", "")
        self.messages: Optional[list] = inp.get("messages")
        self.answer: Any = inp.get("answer")
        self.answers: list = inp.get("answers") or []
        self.request: Optional[dict] = inp.get("request")
        self.request_id: str = inp.get("request_id", "")
        self.tool_call_id: str = inp.get("tool_call_id", "")

    @property
    def cancelled(self) -> bool:
        """Set when the run no longer needs the task or the worker stops: return."""
        return self._run.cancelled.is_set()

    def report(self, r: Any) -> None:
        self._run.report(r)

    def delta(self, text: str) -> None:
        self._run.report(Delta(text))

    def progress(self, fraction: Optional[float] = None, message: str = "") -> None:
        self._run.report(Progress(fraction, message))

    def yield_(self, name: str, data: Any = None) -> None:
        self._run.report(Yield(name, data))

    def event(self, name: str, data: Any = None) -> None:
        self._run.report(StepEvent(name, data))


def _event_of(r: Any) -> dict[str, Any]:
    if isinstance(r, str):
        return {"type": "delta", "text": r}
    if isinstance(r, Delta):
        return {"type": "delta", "text": r.text}
    if isinstance(r, Progress):
        return {k: v for k, v in {"type": "progress", "fraction": r.fraction, "message": r.message or None}.items()
                if v is not None}
    if isinstance(r, StepEvent):
        return {"type": "event", "name": r.name, "data": r.data}
    if isinstance(r, Yield):
        return {"type": "yield", "name": r.name, "data": r.data}
    raise TypeError("stepwise: a step yields Yield(name, data), Delta(text), Progress(fraction, message) or "
                    f"StepEvent(name, data), not {r!r}")


def _plain(v: Any) -> Any:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {k: _plain(x) for k, x in dataclasses.asdict(v).items() if x is not None}
    return v


class _Conn:
    """One abortable POST: another thread may close it to end a long-poll."""

    def __init__(self, base: str, timeout: float) -> None:
        u = urllib.parse.urlsplit(base)
        cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
        self.conn = cls(u.hostname, u.port, timeout=timeout)
        self.prefix = u.path.rstrip("/")

    def post(self, path: str, body: Any, token: Optional[str]) -> tuple[int, bytes, str]:
        h = {"Content-Type": "application/json"}
        if token:
            h["Authorization"] = f"Bearer {token}"
        self.conn.request("POST", self.prefix + path, json.dumps(body).encode(), h)
        res = self.conn.getresponse()
        return res.status, res.read(), res.reason

    def abort(self) -> None:
        sock = self.conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.conn.close()


class Worker:
    """Serves the custom steps and tools of some agents for a Stepwise server."""

    def __init__(self, base_url: str, agents: list[Agent], token: Optional[str] = None,
                 worker_id: Optional[str] = None, concurrency: int = 4, poll_wait: float = 30.0,
                 stop_grace: float = 5.0) -> None:
        if not agents:
            raise ValueError("stepwise: a Worker needs at least one agent")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.agents = {a.name: a for a in agents}
        if len(self.agents) != len(agents):
            raise ValueError("stepwise: an agent is given twice")
        host = re.sub(r"[^A-Za-z0-9_.:-]", "-", socket.gethostname())[:80]
        self.worker_id = worker_id or f"{host}-{os.getpid()}"
        self.concurrency = concurrency
        self.poll_wait = poll_wait
        self.stop_grace = stop_grace
        self.limits: dict[str, Any] = {}
        self.active: dict[str, _TaskRun] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._slot = threading.Condition(self._lock)
        self._poll: Optional[_Conn] = None

    def _post(self, path: str, body: Any, timeout: float = 30.0, conn: Optional[_Conn] = None) -> Any:
        c = conn or _Conn(self.base_url, timeout)
        try:
            status, raw, reason = c.post(path, body, self.token)
        except (OSError, http.client.HTTPException) as e:
            raise StepwiseError(detail=f"POST {path}: {e}") from e
        finally:
            if conn is None:
                c.close()
        if status >= 300:
            raise StepwiseError.from_problem(status, raw, reason)
        if status == 204 or not raw:
            return None
        return json.loads(raw)

    def register(self) -> dict[str, Any]:
        """Registers the agents (idempotent); returns the versions they resolved to."""
        r = self._post("/v1/workers/register", {"worker_id": self.worker_id,
                                                "agents": [a.registration() for a in self.agents.values()]})
        self.limits = r.get("limits") or {}
        return r

    def _retrying(self, fn: Any) -> Any:
        delay = 0.1
        while True:
            try:
                return fn()
            except StepwiseError as e:
                if self._stopping.is_set() or not e.retryable:
                    raise
                log.warning("%s; retrying in %.1fs", e, delay)
                if self._stopping.wait(delay):
                    raise
                delay = min(delay * 2, 5.0)

    def run(self, handle_signals: bool = True) -> None:
        """Registers, then serves tasks until stop() (or SIGTERM / SIGINT when
        handle_signals and on the main thread): a graceful stop hands every
        held task back to the server at once."""
        old = {}
        if handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                old[sig] = signal.signal(sig, lambda *_: self.stop())
        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="stepwise-task")
        try:
            self._retrying(self.register)
            delay = 0.1
            while not self._stopping.is_set():
                with self._slot:
                    while len(self.active) >= self.concurrency and not self._stopping.is_set():
                        self._slot.wait(0.5)
                    free = self.concurrency - len(self.active)
                if self._stopping.is_set():
                    break
                conn = _Conn(self.base_url, self.poll_wait + 30)
                self._poll = conn
                try:
                    body = {"worker_id": self.worker_id, "agents": list(self.agents), "wait_ms": int(self.poll_wait * 1000),
                            "max": min(free, self.limits.get("max_tasks", 16))}
                    batch = self._post("/v1/workers/poll", body, conn=conn)
                    delay = 0.1
                except StepwiseError as e:
                    if self._stopping.is_set():
                        break
                    if e.code == "agent_not_served":
                        self._retrying(self.register)
                        continue
                    if not e.retryable:
                        raise
                    log.warning("poll failed, retrying in %.1fs: %s", delay, e)
                    self._stopping.wait(delay)
                    delay = min(delay * 2, 5.0)
                    continue
                finally:
                    self._poll = None
                    conn.close()
                for task in (batch or {}).get("tasks") or []:
                    if self._stopping.is_set():
                        self._release_one(task)
                        continue
                    tr = _TaskRun(self, task)
                    with self._lock:
                        self.active[task["id"]] = tr
                    pool.submit(tr.run)
        finally:
            for sig, h in old.items():
                signal.signal(sig, h)
            self._hand_back()
            pool.shutdown(wait=False, cancel_futures=True)

    def stop(self) -> None:
        """Stops serving: the poll ends, handlers see ctx.cancelled, held tasks go back to the server."""
        self._stopping.set()
        poll = self._poll
        if poll is not None:
            poll.abort()
        with self._lock:
            for tr in self.active.values():
                tr.cancel(hand_back=True)
            self._slot.notify_all()

    async def run_async(self) -> None:
        """run() for asyncio: cancelling the awaiting task stops the worker gracefully."""
        fut = asyncio.ensure_future(asyncio.to_thread(self.run, False))
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError:
            self.stop()
            await fut
            raise

    def _release_one(self, task: dict[str, Any]) -> None:
        try:
            self._post(f"/v1/workers/tasks/{urllib.parse.quote(task['id'], safe='')}/release",
                       {"token": task["token"], "reason": "worker stopping"})
        except StepwiseError as e:
            log.warning("release of task %s failed: %s", task.get("id"), e)

    def _hand_back(self) -> None:
        self.stop()
        try:
            self._post("/v1/workers/release", {"worker_id": self.worker_id})
        except StepwiseError as e:
            log.warning("release failed (the leases will expire instead): %s", e)
        deadline = time.monotonic() + self.stop_grace
        with self._slot:
            while self.active and time.monotonic() < deadline:
                self._slot.wait(0.05)

    def _done(self, task_id: str) -> None:
        with self._slot:
            self.active.pop(task_id, None)
            self._slot.notify_all()


class _TaskRun:
    """One claimed task: its handler, heartbeats, reports and finish."""

    def __init__(self, worker: Worker, task: dict[str, Any]) -> None:
        self.worker = worker
        self.task = task
        self.path = f"/v1/workers/tasks/{urllib.parse.quote(task['id'], safe='')}"
        self.cancelled = threading.Event()
        self.handed_back = False
        self.lost = False
        self.pending: list[dict[str, Any]] = []
        self.plock = threading.Lock()
        self.wake = threading.Event()
        self.finished = threading.Event()

    def cancel(self, hand_back: bool = False) -> None:
        if hand_back:
            self.handed_back = True
        self.cancelled.set()
        self.wake.set()

    def report(self, r: Any) -> None:
        if r is None:
            return
        ev = json.loads(json.dumps(_plain(_event_of(r))))
        with self.plock:
            self.pending.append(ev)
        self.wake.set()

    def _lease_error(self, e: StepwiseError, what: str) -> None:
        if e.code in ("lease_lost", "task_finished", "task_not_found"):
            self.lost = True
            self.cancel()
            log.warning("task %s %s: %s; dropping it", self.task["id"], what, e)
        else:
            log.warning("task %s %s failed: %s", self.task["id"], what, e)

    def _flush(self) -> None:
        limit = self.worker.limits.get("max_events_batch", 256)
        while True:
            with self.plock:
                events, self.pending = self.pending[:limit], self.pending[limit:]
            if not events or self.lost or self.handed_back:
                return
            try:
                lease = self.worker._post(self.path + "/events", {"token": self.task["token"], "events": events})
                if lease and lease.get("cancel"):
                    self.cancel()
            except StepwiseError as e:
                self._lease_error(e, "report")

    def _lease_loop(self) -> None:
        hb = self.worker.limits.get("heartbeat_ms", 5000) / 1000.0
        next_beat = time.monotonic() + hb
        while not self.finished.is_set():
            self.wake.wait(max(0.0, min(0.02 if self.pending else hb, next_beat - time.monotonic())))
            self.wake.clear()
            if self.finished.is_set():
                return
            if self.pending:
                time.sleep(0.02)  # gather a batch
                self._flush()
                next_beat = time.monotonic() + hb
            elif time.monotonic() >= next_beat and not (self.lost or self.handed_back):
                try:
                    lease = self.worker._post(self.path + "/heartbeat", {"token": self.task["token"]})
                    if lease and lease.get("cancel"):
                        self.cancel()
                except StepwiseError as e:
                    self._lease_error(e, "heartbeat")
                next_beat = time.monotonic() + hb

    def run(self) -> None:
        lease = threading.Thread(target=self._lease_loop, daemon=True)
        lease.start()
        try:
            try:
                outcome = ("ok", self._tool() if self.task.get("kind") == "tool" else self._step())
            except BaseException as e:  # noqa: BLE001 - a handler's failure is the task's
                outcome = ("fail", e)
            self.finished.set()
            self.wake.set()
            lease.join()
            self._flush()
            if self.handed_back or self.lost or self.cancelled.is_set():
                return
            self._finish(*outcome)
        finally:
            self.finished.set()
            self.worker._done(self.task["id"])

    def _drive(self, v: Any) -> Any:
        """Runs a handler's value: a generator's yields are reports, its return the result."""
        if inspect.isawaitable(v) or inspect.isasyncgen(v):
            return asyncio.run(self._drive_async(v))
        if inspect.isgenerator(v):
            while True:
                try:
                    r = next(v)
                except StopIteration as stop:
                    return stop.value
                self.report(r)
                if self.cancelled.is_set():
                    v.close()
                    return None
        return v

    async def _drive_async(self, v: Any) -> Any:
        if inspect.isawaitable(v):
            return await v
        result = None
        async for r in v:
            # An async generator cannot return a value: its last yield of a
            # StepResult (or AskHuman, ToolResult) is the result.
            if isinstance(r, (StepResult, AskHuman, ToolResult)):
                result = r
                continue
            self.report(r)
            if self.cancelled.is_set():
                await v.aclose()
                return None
        return result

    def _step(self) -> dict[str, Any]:
        agent = self.worker.agents.get(self.task.get("agent", ""))
        s = agent.steps.get(self.task.get("name", "")) if agent else None
        if s is None:
            raise RuntimeError(f"this worker has no step {self.task.get('name')} of agent {self.task.get('agent')}")
        ctx = TaskContext(self)
        prepared = self._drive(s.before_execute(ctx))
        result = self._drive(s.execute(ctx, prepared))
        if not isinstance(result, AskHuman):
            result = self._drive(s.after_execute(ctx, result))
        if isinstance(result, AskHuman):
            req = {k: v for k, v in {"prompt": result.prompt, "schema": result.schema, "context": result.context,
                                     "expires_at": result.expires_at, "on_expire": result.on_expire,
                                     "default": result.default}.items() if v is not None}
            return {"input": {"request": req, "state": result.state, "content": result.content}}
        if not isinstance(result, StepResult):
            raise TypeError(f"step {self.task.get('name')} returned {result!r}: a step returns StepResult(next=..., "
                            "state=...) or AskHuman(...)")
        return {"complete": {"content": result.content, "output": result.output, "state": result.state,
                             "next": result.next, "decision": _plain(result.decision),
                             "annotations": result.annotations,
                             "usage": [_plain(u) for u in result.usage] or None, "cost_usd": result.cost_usd}}

    def _tool(self) -> dict[str, Any]:
        agent = self.worker.agents.get(self.task.get("agent", ""))
        t = agent.tools.get(self.task.get("name", "")) if agent else None
        if t is None:
            raise RuntimeError(f"this worker has no tool {self.task.get('name')} of agent {self.task.get('agent')}")
        ctx = TaskContext(self)
        r = self._drive(t.fn((self.task.get("input") or {}).get("arguments") or {}, ctx))
        if isinstance(r, AskHuman):
            # The call parks the run; the answer makes the call again with
            # ctx.answer (and ctx.answers: every answer so far) set.
            req = {k: v for k, v in {"prompt": r.prompt, "schema": r.schema, "context": r.context}.items() if v is not None}
            return {"input": {"request": req}}
        if isinstance(r, ToolResult):
            atts = [{"name": a.name or None, "content_type": a.content_type or None, "kind": a.kind,
                     "data": base64.b64encode(a.data).decode()} for a in r.attachments]
            return {"complete": {"output": r.output, "content": r.content, "is_error": r.is_error or None,
                                 "attachments": atts or None}}
        return {"complete": {"output": _plain(r)}}

    def _finish(self, kind: str, value: Any) -> None:
        token = self.task["token"]
        if kind == "fail":
            path = "fail"
            body = {"token": token, "message": str(value) or type(value).__name__,
                    "class": "transient" if getattr(value, "error_class", "") == "transient" else "permanent",
                    "code": getattr(value, "code", None) or None}
            if not isinstance(value, Exception) or not getattr(value, "error_class", ""):
                log.warning("task %s: handler failed: %r", self.task["id"], value)
        elif "input" in value:
            path, body = "input", {"token": token, **value["input"]}
        else:
            path, body = "complete", {"token": token, **value["complete"]}
        body = {k: v for k, v in body.items() if v is not None}
        delay = 0.1
        for attempt in range(1, 21):
            try:
                self.worker._post(f"{self.path}/{path}", body)
                return
            except StepwiseError as e:
                if e.code == "invalid_result" and path != "fail":
                    # The server refused the result: fail the task with its
                    # reason rather than leave the run waiting on it.
                    log.warning("task %s: result refused: %s", self.task["id"], e.detail)
                    path = "fail"
                    body = {"token": token, "message": f"invalid result: {e.detail}", "class": "permanent",
                            "code": "invalid_result"}
                    continue
                if not e.retryable:
                    self._lease_error(e, path)
                    return
                if self.handed_back:
                    return
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
        log.error("task %s: %s failed 20 times; the lease will expire", self.task["id"], path)
