"""Steps as text, with the ``--- Step N ---`` trace templates of the server
(render.go, ``stepwise trace``): User, Assistant, Action, Decision, Call
Program / End Program, Human Input Request, custom steps, errors, notes; a
step or tool call a worker served ends with ``Worker: ID``.

``render_steps(steps)`` gives the same text as ``stepwise trace SESSION``.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any, Iterable

from .records import Step


def _go_number(v: float) -> str:
    # encoding/json's float64 format: the shortest decimal that reads back,
    # plain between 1e-6 and 1e21, else an exponent without leading zeros.
    if v == 0:
        return "0"
    r = repr(v)
    if 1e-6 <= abs(v) < 1e21:
        d = format(Decimal(r), "f")
        return d[:-2] if d.endswith(".0") else d
    mant, _, exp = r.partition("e")
    if not exp:
        mant, _, exp = f"{v:e}".partition("e")
    sign = "-" if exp.startswith("-") else "+"
    return f"{mant.removesuffix('.0')}e{sign}{exp.lstrip('+-').lstrip('0') or '0'}"


def _normalise(v: Any) -> Any:
    """A value as Go sees it after decoding into any: every number a float64."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, list):
        return [_normalise(x) for x in v]
    if isinstance(v, dict):
        return {k: _normalise(x) for k, x in v.items()}
    return v


def _go_escape(s: str) -> str:
    return (s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _go_json_indent(v: Any, indent: str = "") -> str:
    """json.MarshalIndent(v, "", "  ") of a decoded value (maps sorted, HTML escaped)."""
    v = _normalise(v)
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _go_number(v)
    if isinstance(v, str):
        return _go_escape(json.dumps(v, ensure_ascii=False))
    inner = indent + "  "
    if isinstance(v, list):
        if not v:
            return "[]"
        return "[\n" + ",\n".join(inner + _go_json_indent(x, inner) for x in v) + "\n" + indent + "]"
    if not v:
        return "{}"
    items = sorted(v.items())
    return "{\n" + ",\n".join(f"{inner}{_go_escape(json.dumps(k, ensure_ascii=False))}: {_go_json_indent(x, inner)}"
                             for k, x in items) + "\n" + indent + "}"


def _raw(v: Any) -> str:
    """A json.RawMessage printed with %s: the compact JSON the server sent."""
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def _set(v: Any) -> bool:
    return v is not None


def _worker(s: Step) -> str:
    """The line naming the worker that served a step or tool call, if one did."""
    w = (s.metadata or {}).get("worker")
    return f"\nWorker: {w}" if isinstance(w, str) and w else ""


def render_step(s: Step) -> str:
    n = s.sequence
    inputs = s.inputs if isinstance(s.inputs, dict) else {}
    head = f"--- Step {n} ---"
    k = s.kind
    if k == "user":
        out = f"{head}\nUser: {s.content}"
    elif k == "llm":
        out = head
        if s.content or not s.tool_calls:
            out += f"\nAssistant: {s.content}"
        for c in s.tool_calls:
            out += f"\nTool Call: {c.name} {_raw(c.arguments) if c.arguments is not None else ''}"
    elif k == "tool":
        action = {"tool": s.tool_name, "arguments": s.inputs, "result": s.content}
        out = f"{head}\nAction Purpose: call {s.tool_name}\nAction: {_go_json_indent(action)}{_worker(s)}"
    elif k == "decision":
        outputs = s.outputs if isinstance(s.outputs, dict) else {}
        purpose = inputs.get("purpose") if isinstance(inputs.get("purpose"), str) else ""
        choice = outputs.get("choice") if isinstance(outputs.get("choice"), str) else ""
        out = f"{head}\nDecision Purpose: {purpose}\nDecision: {choice}"
    elif k == "agent":
        purpose = inputs.get("input") if isinstance(inputs.get("input"), str) else ""
        out = (f"{head}\nCall Program: {s.tool_name}\nProgram Purpose: {purpose}\nEnd Program: {s.tool_name}"
               f"\nProgram Result: {s.content}")
    elif k == "input":
        purpose = inputs.get("prompt") if isinstance(inputs.get("prompt"), str) else ""
        answer = "(waiting)" if s.status == "waiting" else s.content
        out = f"{head}\nHuman Input Request: {purpose}\nAnswer: {answer}"
    elif k == "custom":
        action = (s.annotations or {}).get("action") or ""
        out = f"{head}\nStep: {s.name}"
        if action:
            out += f"\nAction: {action}"
        if s.content:
            out += f"\nSummary: {s.content}"
        if _set(s.inputs):
            out += f"\nInputs: {_raw(s.inputs)}"
        if _set(s.outputs):
            out += f"\nOutputs: {_raw(s.outputs)}"
        if _set(s.state_patch):
            out += f"\nState Update: {_raw(s.state_patch)}"
        if not (action or s.content or _set(s.inputs) or _set(s.outputs) or _set(s.state_patch)):
            out += "\n(no output)"
        out += _worker(s)
    elif k == "error" and s.error:
        e = s.error
        out = f"{head}\nError in {s.name}: {e.get('message', '')} ({e.get('class', '')}, attempt {e.get('attempt', 0)})"
    elif k == "system":
        out = f"{head}\nNote: {s.content}"
    else:
        out = f"{head}\n{k}: {s.content}"
    if s.hop > 0:
        pad = "  " * s.hop
        out = pad + out.replace("\n", "\n" + pad)
    return out


def render_steps(steps: Iterable[Step]) -> str:
    """The steps rendered one block each, separated by blank lines."""
    return "\n\n".join(render_step(s) for s in steps)
