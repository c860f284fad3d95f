"""The client half: the /v1 API of ``stepwise serve`` (docs/http_api.md).

Standard library only (urllib). Every method is a plain blocking call;
``stepwise.aio.AsyncClient`` is the same surface for asyncio.
"""

from __future__ import annotations

import http.client
import json
import math
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Iterator, Optional

from .errors import RunError, StepwiseError
from .records import (AgentInfo, AgentStep, ErrorStep, Event, Invocation, PendingInput, Result, Run, Session, Step,
                      agent_step)
from .sse import read_events

_UNSET = object()


def _q(params: dict[str, Any]) -> str:
    kept = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in params.items() if v not in (None, "")}
    return ("?" + urllib.parse.urlencode(kept)) if kept else ""


def _seg(s: Any) -> str:
    return urllib.parse.quote(str(s), safe="")


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


class Client:
    """A client of one Stepwise server.

    ``timeout`` bounds each ordinary request (seconds); long-polls and
    streams use their own bounds.
    """

    def __init__(self, base_url: str, token: Optional[str] = None, timeout: float = 30.0) -> None:
        if not base_url:
            raise ValueError("stepwise: Client needs a base_url")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    # --- transport ---

    def _open(self, method: str, path: str, body: Any = _UNSET, headers: Optional[dict[str, str]] = None,
              timeout: Optional[float] = None):
        h = dict(headers or {})
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not _UNSET:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        req = urllib.request.Request(self.base_url + path, data=data, method=method, headers=h)
        try:
            return urllib.request.urlopen(req, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as e:
            with e:
                raise StepwiseError.from_problem(e.code, e.read(), e.reason) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            reason = getattr(e, "reason", e)
            raise StepwiseError(detail=f"{method} {path}: {reason}") from e

    def _json(self, method: str, path: str, body: Any = _UNSET, timeout: Optional[float] = None) -> Any:
        with self._open(method, path, body, timeout=timeout) as res:
            raw = res.read()
            if res.status == 204 or not raw:
                return None
            return json.loads(raw)

    # --- agents ---

    def list_agents(self) -> list[AgentInfo]:
        return [AgentInfo.from_json(a) for a in self._json("GET", "/v1/agents")["agents"]]

    def get_agent(self, name: str) -> AgentInfo:
        return AgentInfo.from_json(self._json("GET", f"/v1/agents/{_seg(name)}"))

    def health(self) -> dict[str, Any]:
        return self._json("GET", "/v1/health")

    # --- runs ---

    def start_run(self, agent: str, input: Optional[str] = None, *, session_id: Optional[str] = None,
                  state: Optional[dict] = None, title: Optional[str] = None, continue_: bool = False,
                  metadata: Optional[dict] = None, breakpoints: Optional[dict] = None) -> tuple[Run, Invocation]:
        """Starts a run; it executes on the server in the background.

        ``breakpoints``, ``{"before": [...], "after": [...]}`` of selectors
        (docs/breakpoints.md), pause the run before or after those steps.
        """
        body = _drop_none({"agent": agent, "input": input, "session_id": session_id, "state": state, "title": title,
                           "continue": continue_ or None, "metadata": metadata, "breakpoints": breakpoints})
        r = self._json("POST", "/v1/runs", body)
        return Run.from_json(r["run"]), Invocation.from_json(r["invocation"])

    def get_run(self, run_id: str) -> Run:
        return Run.from_json(self._json("GET", f"/v1/runs/{_seg(run_id)}"))

    def cancel_run(self, run_id: str, reason: Optional[str] = None) -> Run:
        return Run.from_json(self._json("POST", f"/v1/runs/{_seg(run_id)}/cancel", _drop_none({"reason": reason})))

    def list_inputs(self, run_id: Optional[str] = None) -> list[PendingInput]:
        path = f"/v1/runs/{_seg(run_id)}/inputs" if run_id else "/v1/inputs"
        return [PendingInput.from_json(p) for p in self._json("GET", path)["inputs"]]

    def answer(self, run_id: str, request_id: str, answer: Any) -> Step:
        """Answers an input request (an approval: ``{"approved": True}``); returns the answered input step."""
        r = self._json("POST", f"/v1/runs/{_seg(run_id)}/inputs/{_seg(request_id)}", {"answer": answer})
        return Step.from_json(r["step"])

    def continue_run(self, run_id: str, step: bool = False, state: Optional[dict] = None) -> Step:
        """Answers the breakpoint the run is paused at (docs/breakpoints.md).

        The run goes on to its next breakpoint, or with ``step`` runs the next
        step and pauses again before the one after it; ``state``, a dict, is
        merged into the run's state first (RFC 7386). Returns the answered
        input step. Raises StepwiseError ``not_at_breakpoint`` (status 409)
        when the run has no pending pause, TypeError when state is not a dict.
        """
        if state is not None and not isinstance(state, dict):
            raise TypeError(f"stepwise: continue_run state must be a dict, not {type(state).__name__}")
        pause = next((p for p in self.list_inputs(run_id) if p.breakpoint is not None), None)
        if pause is None:
            raise StepwiseError(409, "not_at_breakpoint", "Not paused at a breakpoint",
                                f"run {run_id} is not paused at a breakpoint")
        answer: dict[str, Any] = {"action": "step" if step else "continue"}
        if state is not None:
            answer["state"] = state
        return self.answer(run_id, pause.request_id, answer)

    # --- the step-by-step loop ---

    def initiate(self, agent: str, input: str, **kw: Any) -> Invocation:
        """Starts a run and returns its invocation, the handle of next_step."""
        return self.start_run(agent, input, **kw)[1]

    def next_step(self, inv: Invocation, timeout: float = 30.0) -> AgentStep:
        """The next step of the run after inv.cursor (each once, in order).

        Waits until one exists, long-polling ``timeout`` seconds per request;
        advances inv.cursor. Past the result it raises StepwiseError
        ``run_finished``.
        """
        while True:
            path = f"/v1/runs/{_seg(inv.run_id)}/next" + _q({"after": inv.cursor, "timeout": f"{math.ceil(timeout)}s"})
            with self._open("GET", path, timeout=timeout + 30) as res:
                raw = res.read()
                if res.status == 204:
                    inv.cursor = res.headers.get("Stepwise-Cursor") or inv.cursor
                    continue
            step = agent_step(json.loads(raw))
            inv.cursor = step.cursor
            return step

    def provide_human_input(self, inv: Invocation, request_id: str, answer: Any) -> Step:
        """Answers the request a HumanInputRequest carries, on inv's run."""
        return self.answer(inv.run_id, request_id, answer)

    def steps(self, inv: Invocation, timeout: float = 30.0) -> Iterator[AgentStep]:
        """The run's steps, ending after its Result.

        A failed or cancelled run raises RunError after yielding its
        ErrorStep. A HumanInputRequest is yielded and the loop then waits
        for its answer (give it with provide_human_input inside the loop).
        """
        while True:
            step = self.next_step(inv, timeout)
            yield step
            if isinstance(step, ErrorStep):
                raise RunError(step.message, step.cause, step.retry_count, step.recoverable)
            if isinstance(step, Result):
                return

    # --- sessions ---

    def list_sessions(self, agent: Optional[str] = None, parent: Optional[str] = None, q: Optional[str] = None,
                      cursor: Optional[str] = None, limit: Optional[int] = None) -> tuple[list[Session], str]:
        """One page, newest activity first, and the cursor of the next ("" on the last)."""
        r = self._json("GET", "/v1/sessions" + _q({"agent": agent, "parent": parent, "q": q, "cursor": cursor,
                                                   "limit": limit}))
        return [Session.from_json(s) for s in r["sessions"]], r.get("next_cursor", "")

    def sessions(self, agent: Optional[str] = None, parent: Optional[str] = None, q: Optional[str] = None,
                 limit: Optional[int] = None) -> Iterator[Session]:
        """Every matching session, page by page."""
        cursor = None
        while True:
            page, cursor = self.list_sessions(agent, parent, q, cursor, limit)
            yield from page
            if not cursor:
                return

    def create_session(self, agent: Optional[str] = None, title: Optional[str] = None,
                       metadata: Optional[dict] = None) -> Session:
        return Session.from_json(self._json("POST", "/v1/sessions",
                                            _drop_none({"agent": agent, "title": title, "metadata": metadata})))

    def get_session(self, session_id: str) -> Session:
        return Session.from_json(self._json("GET", f"/v1/sessions/{_seg(session_id)}"))

    def delete_session(self, session_id: str) -> None:
        self._json("DELETE", f"/v1/sessions/{_seg(session_id)}")

    def session_summary(self, session_id: str) -> dict[str, Any]:
        return self._json("GET", f"/v1/sessions/{_seg(session_id)}/summary")

    def list_steps(self, session_id: str, start_seq: Optional[int] = None, end_seq: Optional[int] = None,
                   limit: Optional[int] = None) -> list[Step]:
        """The session's steps in sequence order, its fork lineage included."""
        r = self._json("GET", f"/v1/sessions/{_seg(session_id)}/steps" +
                       _q({"start_seq": start_seq, "end_seq": end_seq, "limit": limit}))
        return [Step.from_json(s) for s in r["steps"]]

    def get_step(self, session_id: str, sequence: int) -> Step:
        return Step.from_json(self._json("GET", f"/v1/sessions/{_seg(session_id)}/steps/{_seg(sequence)}"))

    def list_runs(self, session_id: str, limit: Optional[int] = None) -> list[Run]:
        r = self._json("GET", f"/v1/sessions/{_seg(session_id)}/runs" + _q({"limit": limit}))
        return [Run.from_json(x) for x in r["runs"]]

    def forks(self, session_id: str) -> list[Session]:
        return [Session.from_json(s) for s in self._json("GET", f"/v1/sessions/{_seg(session_id)}/forks")["sessions"]]

    def tree(self, session_id: str) -> dict[str, Any]:
        return self._json("GET", f"/v1/sessions/{_seg(session_id)}/tree")

    # --- fork, retry, replay ---

    def fork(self, session_id: str, sequence: int, edit: Optional[str] = None, title: Optional[str] = None) -> Session:
        """A new session sharing the first ``sequence`` steps (step ``sequence`` replaced by ``edit``)."""
        body = _drop_none({"sequence": sequence, "edit": edit, "title": title})
        return Session.from_json(self._json("POST", f"/v1/sessions/{_seg(session_id)}/fork", body))

    def retry(self, session_id: str, sequence: int, destructive: bool = False,
              agent: Optional[str] = None) -> tuple[Run, Invocation]:
        """Re-runs from step ``sequence`` (in a fork unless destructive)."""
        body = _drop_none({"sequence": sequence, "destructive": destructive or None, "agent": agent})
        r = self._json("POST", f"/v1/sessions/{_seg(session_id)}/retry", body)
        return Run.from_json(r["run"]), Invocation.from_json(r["invocation"])

    def replay(self, session_id: str, live_tools: Optional[list[str]] = None, all_tools_live: bool = False,
               agent: Optional[str] = None) -> tuple[Run, Invocation]:
        """Replays the session in a fork, reusing recorded model and tool results."""
        body = _drop_none({"live_tools": live_tools, "all_tools_live": all_tools_live or None, "agent": agent})
        r = self._json("POST", f"/v1/sessions/{_seg(session_id)}/replay", body)
        return Run.from_json(r["run"]), Invocation.from_json(r["invocation"])

    # --- event streams ---

    def subscribe(self, session_id: Optional[str] = None, run_id: Optional[str] = None, after: Optional[str] = None,
                  attempts: int = 10, min_delay: float = 0.1, max_delay: float = 5.0, read_timeout: float = 60.0,
                  on_connect: Optional[Callable[[Optional[str]], None]] = None) -> Iterator[Event]:
        """The events of a session or a run (docs/http_api.md, "Streams").

        Reconnects on its own with Last-Event-ID, the id of the last event it
        yielded, so every event arrives once, in order; a run's stream ends
        after its run_finished. A refused request (4xx) raises at once; after
        ``attempts`` consecutive failed connections (backoff from
        ``min_delay`` doubling to ``max_delay`` seconds) the last failure is
        raised. Closing the generator (``break``) closes the connection.
        """
        if not session_id and not run_id:
            raise ValueError("stepwise: subscribe needs a session_id or a run_id")
        path = f"/v1/runs/{_seg(run_id)}/events" if run_id else f"/v1/sessions/{_seg(session_id)}/events"
        last, failures, delay = after, 0, min_delay
        while True:
            failure: Optional[BaseException] = None
            got = 0
            try:
                headers = {"Accept": "text/event-stream"}
                if last:
                    headers["Last-Event-ID"] = last
                if on_connect:
                    on_connect(last)
                with self._open("GET", path, headers=headers, timeout=read_timeout) as res:
                    for raw in read_events(res):
                        if raw.event == "error":
                            try:
                                p = json.loads(raw.data)
                            except ValueError:
                                p = {"detail": raw.data}
                            raise StepwiseError(p.get("status") or 500, p.get("code") or "internal", p.get("title", ""),
                                                p.get("detail", ""))
                        ev = Event.from_json(json.loads(raw.data))
                        if raw.id:
                            last = raw.id
                        failures, delay, got = 0, min_delay, got + 1
                        yield ev
                        if run_id and ev.type == "run_finished":
                            return
                if got == 0:
                    failure = StepwiseError(detail=f"{path}: the stream ended without an event")
            except StepwiseError as e:
                if 400 <= e.status < 500 and e.status != 429:
                    raise
                failure = e
            except (OSError, ValueError, socket.timeout, http.client.HTTPException) as e:
                # A connection cut inside a chunk, a read timeout, a torn line.
                failure = StepwiseError(detail=f"{path}: {e}")
            if failure is not None:
                failures += 1
                if failures >= attempts:
                    raise failure
                time.sleep(delay)
                delay = min(delay * 2, max_delay)
