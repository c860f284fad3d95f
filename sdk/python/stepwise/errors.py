"""Errors of the Stepwise HTTP API.

Every refusal of the server is an RFC 9457 problem (docs/http_api.md,
"Errors"); StepwiseError carries its fields. A transport failure (no
server, a cut connection) is a StepwiseError with status 0.
"""

from __future__ import annotations

import json
from typing import Any


class StepwiseError(Exception):
    """A problem answered by the server, or a transport failure (status 0)."""

    def __init__(self, status: int = 0, code: str = "transport", title: str = "", detail: str = "") -> None:
        super().__init__(f"stepwise: {detail or title or code}")
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail

    @property
    def retryable(self) -> bool:
        """Whether the same request may succeed later (5xx, 429, transport)."""
        return self.status == 0 or self.status == 429 or self.status >= 500

    @classmethod
    def from_problem(cls, status: int, body: bytes | str, reason: str = "") -> "StepwiseError":
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        try:
            p: Any = json.loads(text) if text else {}
        except ValueError:
            p = {"detail": text[:500]}
        if not isinstance(p, dict):
            p = {}
        return cls(status, p.get("code") or f"http_{status}", p.get("title") or reason, p.get("detail") or "")


class RunError(Exception):
    """A failed or cancelled run, as the step-by-step loop reports it."""

    def __init__(self, message: str, cause: str = "", retry_count: int = 0, recoverable: bool = False) -> None:
        text = f"stepwise: {message}: {cause}" if cause and cause != message else f"stepwise: {message}"
        super().__init__(text)
        self.message = message
        self.cause = cause
        self.retry_count = retry_count
        self.recoverable = recoverable
