"""Records of the Stepwise API as dataclasses.

Each is read from the server's JSON (docs/http_api.md, docs/step_format.md)
with ``from_json``; the fields keep the wire names, and ``raw`` keeps the
whole object, fields this version does not know included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union


def _pick(cls, d: dict[str, Any]) -> dict[str, Any]:
    names = cls.__dataclass_fields__
    return {k: v for k, v in d.items() if k in names and k != "raw"}


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: Any = None

    @classmethod
    def from_json(cls, d: Optional[dict]) -> Optional["ToolCall"]:
        if d is None:
            return None
        return cls(d.get("id", ""), d.get("name", ""), d.get("arguments"))


@dataclass
class Step:
    """A step in the wire format of docs/step_format.md (version 1)."""

    id: str
    session_id: str
    run_id: str
    sequence: int
    kind: str
    name: str
    status: str
    v: int = 1
    parent_id: str = ""
    hop: int = 0
    role: str = ""
    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str = ""
    tool_name: str = ""
    inputs: Any = None
    outputs: Any = None
    state_patch: Any = None
    error: Optional[dict[str, Any]] = None
    metrics: dict[str, Any] = field(default_factory=dict)
    annotations: dict[str, Any] = field(default_factory=dict)
    replay: str = ""
    fingerprint: str = ""
    progress: Optional[dict[str, Any]] = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Optional[dict]) -> Optional["Step"]:
        if d is None:
            return None
        kw = _pick(cls, d)
        kw["tool_calls"] = [ToolCall.from_json(c) for c in d.get("tool_calls") or []]
        for k in ("metrics", "annotations", "metadata"):
            kw[k] = d.get(k) or {}
        return cls(raw=d, **kw)


@dataclass
class Run:
    id: str
    session_id: str
    agent: str
    status: str
    hop: int = 0
    cursor: str = ""
    state: Any = None
    input: str = ""
    output: str = ""
    error: Optional[dict[str, Any]] = None
    step_count: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    parent_run_id: str = ""
    created_at: str = ""
    updated_at: str = ""
    finished_at: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Optional[dict]) -> Optional["Run"]:
        if d is None:
            return None
        kw = _pick(cls, d)
        kw["options"] = d.get("options") or {}
        return cls(raw=d, **kw)


@dataclass
class Session:
    id: str
    agent: str = ""
    title: str = ""
    parent_session_id: str = ""
    fork_sequence: int = 0
    last_sequence: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: str = ""
    updated_at: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Optional[dict]) -> Optional["Session"]:
        if d is None:
            return None
        kw = _pick(cls, d)
        kw["metadata"] = d.get("metadata") or {}
        return cls(raw=d, **kw)


@dataclass
class Invocation:
    """A run driven step by step: its ids and how far the caller has read."""

    run_id: str
    session_id: str
    cursor: str = "0:0"

    @classmethod
    def from_json(cls, d: dict) -> "Invocation":
        return cls(d["run_id"], d["session_id"], d.get("cursor") or "0:0")

    def to_json(self) -> dict[str, str]:
        return {"run_id": self.run_id, "session_id": self.session_id, "cursor": self.cursor}


@dataclass
class Continuation:
    """A step the run committed, and the run as it was at that step."""

    cursor: str
    status: str
    current_step: str
    step: Step
    progress: Optional[float] = None
    progress_message: str = ""
    type: str = "continuation"


@dataclass
class BreakpointPause:
    """Where a run paused at a breakpoint (docs/breakpoints.md).

    ``when`` is "before" or "after" the step ``step`` (of kind ``kind``;
    ``tools``, the tool calls of a tools step); ``matched`` is the selector
    that matched, or "step" when the previous answer stepped; ``state`` the
    run's state at the pause; ``at`` the run's step count with the pause
    recorded.
    """

    when: str
    step: str
    kind: str = ""
    tools: list[str] = field(default_factory=list)
    matched: str = ""
    state: Any = None
    at: int = 0
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Optional[dict]) -> Optional["BreakpointPause"]:
        if not isinstance(d, dict):
            return None
        kw = _pick(cls, d)
        kw.setdefault("when", "")
        kw.setdefault("step", "")
        kw["tools"] = d.get("tools") or []
        return cls(raw=d, **kw)


@dataclass
class HumanInputRequest:
    """The run waits for this request's answer (an approval when approval is
    set, a breakpoint's pause when breakpoint is)."""

    cursor: str
    request_id: str
    prompt: str
    schema: Any = None
    context: dict[str, Any] = field(default_factory=dict)
    approval: Optional[ToolCall] = None
    expires_at: str = ""
    breakpoint: Optional[BreakpointPause] = None
    type: str = "human_input_request"


@dataclass
class Result:
    """The output of a completed run."""

    cursor: str
    value: str
    metadata: dict[str, Any] = field(default_factory=dict)
    type: str = "result"


@dataclass
class ErrorStep:
    """A failed or cancelled run."""

    cursor: str
    message: str
    cause: str = ""
    retry_count: int = 0
    recoverable: bool = False
    type: str = "error"


AgentStep = Union[Continuation, HumanInputRequest, Result, ErrorStep]


def agent_step(d: dict[str, Any]) -> AgentStep:
    """Decodes the body of GET /v1/runs/{id}/next."""
    t = d.get("type")
    cur = d.get("cursor", "")
    if t == "continuation":
        return Continuation(cur, d.get("status", ""), d.get("current_step", ""), Step.from_json(d.get("step")),
                            d.get("progress"), d.get("progress_message", ""))
    if t == "human_input_request":
        return HumanInputRequest(cur, d.get("request_id", ""), d.get("prompt", ""), d.get("schema"),
                                 d.get("context") or {}, ToolCall.from_json(d.get("approval")), d.get("expires_at", ""),
                                 BreakpointPause.from_json(d.get("breakpoint")))
    if t == "result":
        return Result(cur, d.get("value", ""), d.get("metadata") or {})
    if t == "error":
        return ErrorStep(cur, d.get("message", ""), d.get("cause", ""), d.get("retry_count", 0), d.get("recoverable", False))
    raise ValueError(f"stepwise: unknown next-step type {t!r}")


@dataclass
class Event:
    """One event of a session or run stream; id is its position SEQ:IDX."""

    id: str
    type: str
    session_id: str = ""
    run_id: str = ""
    time: str = ""
    step_name: str = ""
    delta: Optional[dict[str, Any]] = None
    step: Optional[Step] = None
    run: Optional[Run] = None
    progress: Optional[dict[str, Any]] = None
    yield_: Optional[dict[str, Any]] = None
    reset: Optional[dict[str, Any]] = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Event":
        return cls(d.get("id", ""), d.get("type", ""), d.get("session_id", ""), d.get("run_id", ""), d.get("time", ""),
                   d.get("step_name", ""), d.get("delta"), Step.from_json(d.get("step")), Run.from_json(d.get("run")),
                   d.get("progress"), d.get("yield"), d.get("reset"), d)


@dataclass
class PendingInput:
    """A waiting input request; ``request`` is its JSON, ``breakpoint`` its
    pause when the request is a breakpoint's (``request["breakpoint"]``)."""

    request_id: str
    run_id: str
    session_id: str
    request: dict[str, Any] = field(default_factory=dict)
    breakpoint: Optional[BreakpointPause] = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "PendingInput":
        req = d.get("request") or {}
        bp = BreakpointPause.from_json(req.get("breakpoint"))
        return cls(d["request_id"], d["run_id"], d["session_id"], req, bp)


@dataclass
class AgentInfo:
    name: str
    description: str = ""
    instructions: str = ""
    model: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)
    sub_agents: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    start_step: str = ""
    after_llm: str = ""
    approvals: dict[str, str] = field(default_factory=dict)
    limits: dict[str, Any] = field(default_factory=dict)
    version: str = ""
    on_update: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "AgentInfo":
        kw = _pick(cls, d)
        for k, empty in (("tools", []), ("sub_agents", []), ("steps", []), ("approvals", {}), ("limits", {})):
            kw[k] = d.get(k) or empty
        return cls(raw=d, **kw)
