"""Stepwise for Python: the client of ``stepwise serve`` and the worker that
serves an agent's custom steps and tools. Standard library only.

    from stepwise import Client
    c = Client("http://127.0.0.1:7700")
    inv = c.initiate("support", "Where is my order?")
    for step in c.steps(inv):
        ...
"""

from .agent import (Agent, AskHuman, Attachment, CustomStep, Decision, Delta, Limits, PermanentError, Progress, Retry,
                    StepEvent, StepResult, Tool, ToolResult, TransientError, Usage, Yield)
from .aio import AsyncClient
from .client import Client
from .errors import RunError, StepwiseError
from .records import (AgentInfo, AgentStep, BreakpointPause, Continuation, ErrorStep, Event, HumanInputRequest,
                      Invocation, PendingInput, Result, Run, Session, Step, ToolCall)
from .sse import RawEvent, read_events
from .worker import TaskContext, Worker

__all__ = [
    "AskHuman", "Attachment", "CustomStep", "Decision", "Delta", "Limits", "PermanentError", "Progress", "Retry",
    "StepEvent", "StepResult", "TaskContext", "Tool", "ToolResult", "TransientError", "Usage", "Worker", "Yield",
    "Agent", "AgentInfo", "AgentStep", "AsyncClient", "BreakpointPause", "Client", "Continuation", "ErrorStep", "Event",
    "HumanInputRequest", "Invocation", "PendingInput", "RawEvent", "Result", "Run", "RunError", "Session", "Step",
    "StepwiseError", "ToolCall", "read_events",
]
