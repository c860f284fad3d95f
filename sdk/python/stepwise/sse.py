"""A Server-Sent Events reader over a binary stream (an http.client response).

One RawEvent per dispatched event, by the WHATWG parsing rules: CR, LF or
CRLF line ends, comment lines ignored, multi-line data joined with LF.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO, Iterator, Optional


@dataclass
class RawEvent:
    id: Optional[str]
    event: str
    data: str


def _lines(stream: BinaryIO) -> Iterator[str]:
    # readline splits on LF only; a CR alone also ends a line.
    pending = b""
    while True:
        chunk = stream.readline()
        if not chunk:
            if pending:
                yield from pending.decode("utf-8", "replace").split("\r")
            return
        pending += chunk
        if not pending.endswith(b"\n"):
            continue
        text = pending.decode("utf-8", "replace")
        pending = b""
        text = text[:-2] if text.endswith("\r\n") else text[:-1]
        yield from text.split("\r")


def read_events(stream: BinaryIO) -> Iterator[RawEvent]:
    data: list[str] = []
    event = ""
    ev_id: Optional[str] = None
    for line in _lines(stream):
        if line == "":
            if data:
                yield RawEvent(ev_id, event or "message", "\n".join(data))
            data, event, ev_id = [], "", None
            continue
        if line.startswith(":"):
            continue
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            event = value
        elif field == "id" and "\0" not in value:
            ev_id = value
