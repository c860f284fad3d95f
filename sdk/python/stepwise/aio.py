"""The client half for asyncio: AsyncClient has Client's methods as coroutines.

Standard library only: each call runs the blocking client in a worker
thread (asyncio.to_thread), so the event loop never blocks; the iterators
(steps, sessions, subscribe) are async generators.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, AsyncIterator, Callable, Iterator, Optional

from .client import Client
from .records import AgentStep, Event, Invocation, Session

_DONE = object()


async def _aiter(make: Callable[[], Iterator[Any]]) -> AsyncIterator[Any]:
    it = make()

    def step() -> Any:
        try:
            return next(it)
        except StopIteration:
            return _DONE

    try:
        while True:
            v = await asyncio.to_thread(step)
            if v is _DONE:
                return
            yield v
    finally:
        # A generator still blocked in its thread (a task cancelled while
        # waiting) cannot be closed from here: it ends by itself at its next
        # event or read timeout.
        close = getattr(it, "close", None)
        if close:
            try:
                close()
            except ValueError:
                pass


class AsyncClient:
    """Client for asyncio: ``await c.next_step(inv)``, ``async for ev in c.subscribe(...)``."""

    _sync_methods = (
        "list_agents", "get_agent", "health", "start_run", "get_run", "cancel_run", "list_inputs", "answer",
        "continue_run", "initiate", "next_step", "provide_human_input", "list_sessions", "create_session",
        "get_session", "delete_session", "session_summary", "list_steps", "get_step", "list_runs", "forks", "tree",
        "fork", "retry", "replay",
    )

    def __init__(self, base_url: str, token: Optional[str] = None, timeout: float = 30.0) -> None:
        self.sync = Client(base_url, token, timeout)

    def __getattr__(self, name: str) -> Any:
        if name not in self._sync_methods:
            raise AttributeError(name)
        fn = getattr(self.sync, name)

        @functools.wraps(fn)
        async def call(*args: Any, **kw: Any) -> Any:
            return await asyncio.to_thread(fn, *args, **kw)

        return call

    def steps(self, inv: Invocation, timeout: float = 30.0) -> AsyncIterator[AgentStep]:
        return _aiter(lambda: self.sync.steps(inv, timeout))

    def sessions(self, **kw: Any) -> AsyncIterator[Session]:
        return _aiter(lambda: self.sync.sessions(**kw))

    def subscribe(self, **kw: Any) -> AsyncIterator[Event]:
        return _aiter(lambda: self.sync.subscribe(**kw))
