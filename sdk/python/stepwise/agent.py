"""Defining an agent a worker serves (docs/workers.md): its definition (an
agent file as a JSON object, docs/agent_file.md) and the handlers of its
custom steps and tools, registered with decorators.

    agent = Agent("triage", model="openai:gpt-4o-mini", start_step="classify")

    @agent.step("classify", next=["llm", "end"])
    def classify(ctx):
        yield Yield("triage.reading", {"chars": len(ctx.run_input)})
        return StepResult(next="llm", state={"kind": "question"})

    @agent.tool(parameters={"type": "object", "properties": {"order": {"type": "string"}}})
    def lookup_order(args, ctx):
        return {"order": args["order"], "status": "shipped"}
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

_NAME = re.compile(r"^[a-z0-9_-]{1,64}$")
_STEP = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
_TOOL = re.compile(r"^[A-Za-z0-9_.:/-]{1,128}$")


# --- what a handler yields (live reports) ---

@dataclass
class Yield:
    """A typed yield: a ``step_yield`` event {name, data}."""
    name: str
    data: Any = None


@dataclass
class Delta:
    """Streamed text of the step (``step_delta`` events)."""
    text: str


@dataclass
class Progress:
    """Progress of the step: a fraction in [0, 1] and/or a message."""
    fraction: Optional[float] = None
    message: str = ""


@dataclass
class StepEvent:
    """An event inside the step (recorded when the agent records step events)."""
    name: str
    data: Any = None


Report = Union[Yield, Delta, Progress, StepEvent, str]


# --- what a handler returns ---

@dataclass
class Decision:
    """A routing choice: the step is recorded as a decision step."""
    choice: str
    purpose: str = ""
    options: list[str] = field(default_factory=list)


@dataclass
class Usage:
    """A model call the handler made itself, priced by the server."""
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0


@dataclass
class StepResult:
    """The end of a step: where the run goes next and the state update."""
    next: str
    state: Optional[dict[str, Any]] = None
    content: Optional[str] = None
    output: Any = None
    decision: Optional[Decision] = None
    annotations: Optional[dict[str, str]] = None
    usage: list[Usage] = field(default_factory=list)
    cost_usd: Optional[float] = None


@dataclass
class AskHuman:
    """Parks the run on a human-input request; the answer re-invokes the
    step with ``ctx.answer`` set."""
    prompt: str
    schema: Optional[dict[str, Any]] = None
    context: Optional[dict[str, Any]] = None
    expires_at: Optional[str] = None
    on_expire: Optional[str] = None
    default: Any = None
    state: Optional[dict[str, Any]] = None
    content: Optional[str] = None


@dataclass
class Attachment:
    data: bytes
    name: str = ""
    content_type: str = ""
    kind: str = "file"


@dataclass
class ToolResult:
    """A tool's result with more than its output."""
    output: Any = None
    content: Optional[str] = None
    is_error: bool = False
    attachments: list[Attachment] = field(default_factory=list)


class TransientError(Exception):
    """A failure the agent's retry policy retries."""

    error_class = "transient"

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


class PermanentError(Exception):
    """A failure that fails the step at once (the default for any exception)."""

    error_class = "permanent"

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


# --- steps and tools ---

class CustomStep:
    """A custom step in the before_execute / execute / after_execute shape.

    ``execute`` may be a generator (sync or async): what it yields are live
    reports, what it returns the StepResult (or AskHuman).
    """

    next: list[str] = []
    description: str = ""
    messages: bool = False

    def before_execute(self, ctx: Any) -> Any:
        return None

    def execute(self, ctx: Any, prepared: Any) -> Any:
        raise NotImplementedError

    def after_execute(self, ctx: Any, result: Any) -> Any:
        return result


class _FuncStep(CustomStep):
    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def execute(self, ctx: Any, prepared: Any) -> Any:
        return self.fn(ctx)


@dataclass
class Tool:
    name: str
    fn: Callable[..., Any]
    description: str = ""
    parameters: Optional[dict[str, Any]] = None
    output_schema: Optional[dict[str, Any]] = None


@dataclass
class Limits:
    max_steps: Optional[int] = None
    step_timeout: Optional[str] = None  # a Go duration: "30s", "2m"
    run_timeout: Optional[str] = None
    max_parallel_tools: Optional[int] = None
    max_depth: Optional[int] = None


@dataclass
class Retry:
    max_attempts: Optional[int] = None
    initial_interval: Optional[str] = None
    max_interval: Optional[str] = None


def _compact(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


class Agent:
    """An agent served by a worker: its definition and its handlers."""

    def __init__(self, name: str, model: str, instructions: Optional[str] = None, description: Optional[str] = None,
                 start_step: Optional[str] = None, limits: Optional[Limits] = None, retry: Optional[Retry] = None,
                 approvals: Optional[dict[str, str]] = None, reducers: Optional[dict[str, str]] = None,
                 on_update: Optional[str] = None, builtin_tools: Optional[list[Any]] = None,
                 model_options: Optional[dict[str, Any]] = None, definition: Optional[dict[str, Any]] = None) -> None:
        if not _NAME.match(name or ""):
            raise ValueError(f"stepwise: agent name {name!r}: want 1-64 of a-z, 0-9, _ and -")
        if not model:
            raise ValueError(f"stepwise: agent {name}: model is required (provider:model)")
        self.name = name
        d = dict(definition or {})
        d.update(_compact({
            "name": name, "model": model, "instructions": instructions, "description": description,
            "start_step": start_step, "approvals": approvals, "reducers": reducers, "on_update": on_update,
            "tools": builtin_tools, "model_options": model_options,
            "limits": _compact(vars(limits)) if limits else None,
            "retry": _compact(vars(retry)) if retry else None,
        }))
        self.definition = d
        self.steps: dict[str, CustomStep] = {}
        self.tools: dict[str, Tool] = {}

    def step(self, name: Optional[str] = None, next: Optional[list[str]] = None, description: str = "",
             messages: bool = False) -> Callable[[Any], Any]:
        """Registers a custom step: a function ``fn(ctx)`` (a generator, or
        async) or a CustomStep subclass."""

        def register(obj: Any) -> Any:
            n = name or getattr(obj, "__name__", "")
            if not _STEP.match(n):
                raise ValueError(f"stepwise: step name {n!r}: want 1-64 of letters, digits, _ . : -")
            if n in self.steps:
                raise ValueError(f"stepwise: step {n} defined twice")
            s = obj() if isinstance(obj, type) and issubclass(obj, CustomStep) else _FuncStep(obj)
            s.next = list(next if next is not None else getattr(obj, "next", []) or [])
            s.description = description or getattr(obj, "description", "") or (obj.__doc__ or "").strip()
            s.messages = messages or getattr(obj, "messages", False)
            self.steps[n] = s
            return obj

        return register

    def tool(self, name: Optional[str] = None, description: str = "", parameters: Optional[dict] = None,
             output_schema: Optional[dict] = None) -> Callable[[Callable], Callable]:
        """Registers a tool ``fn(args, ctx)`` (or async): its return value is
        the output (or a ToolResult)."""

        def register(fn: Callable) -> Callable:
            n = name or fn.__name__
            if not _TOOL.match(n):
                raise ValueError(f"stepwise: tool name {n!r}: want 1-128 of letters, digits, _ . : / -")
            if n in self.tools:
                raise ValueError(f"stepwise: tool {n} defined twice")
            self.tools[n] = Tool(n, fn, description or (fn.__doc__ or "").strip(), parameters, output_schema)
            return fn

        return register

    def registration(self) -> dict[str, Any]:
        """The body of this agent in POST /v1/workers/register."""
        start = self.definition.get("start_step")
        if start and start not in self.steps and start not in ("llm", "tools"):
            raise ValueError(f"stepwise: agent {self.name}: start step {start} is not one of its steps")
        return {
            "definition": self.definition,
            "steps": [_compact({"name": n, "description": s.description or None, "next": s.next or None,
                                "messages": s.messages or None}) for n, s in self.steps.items()],
            "tools": [_compact({"name": t.name, "description": t.description or None, "parameters": t.parameters,
                                "output_schema": t.output_schema}) for t in self.tools.values()],
        }
