"""The one Server-Sent Events decoder every adapter uses.

Tolerant by design, because real servers differ: ``event:`` / ``id:`` / ``retry:``
lines, comment lines (``: OPENROUTER PROCESSING``), CRLF / CR / LF line ends,
multi-line ``data:``, JSON laid out with any whitespace, and a stream that ends
without ``[DONE]`` or without a final blank line (the pending event is still
dispatched). Bytes are decoded incrementally, so a multi-byte UTF-8 character split
across network chunks is never mangled.

Parsing JSON out of a ``data:`` payload is :func:`parse_event_json`; a malformed payload
raises :class:`~lovia.errors.StreamInterrupted` (the stream is corrupt: what arrived so
far is kept by the caller, and nothing is retried once content was seen).
"""

from __future__ import annotations

import codecs
import json
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import StreamInterrupted

__all__ = ["SSEDecoder", "SSEEvent", "aiter_sse", "iter_sse", "parse_event_json"]


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event: ``event`` name (``message`` by default) and ``data`` text."""

    event: str
    data: str
    id: str | None = None


class SSEDecoder:
    """Incremental line-based decoder: feed text, get complete events."""

    __slots__ = ("_buffer", "_data", "_event", "_id", "_pending_cr")

    def __init__(self) -> None:
        self._buffer = ""
        self._pending_cr = False
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None

    def feed(self, text: str) -> list[SSEEvent]:
        """Decode ``text`` (any fragment of the stream); return the events it completed."""
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]  # the LF of a CRLF split across two chunks
        self._pending_cr = text.endswith("\r")
        buffer = self._buffer + text
        if "\r" in buffer:
            buffer = buffer.replace("\r\n", "\n").replace("\r", "\n")
        lines = buffer.split("\n")
        self._buffer = lines.pop()
        events: list[SSEEvent] = []
        for line in lines:
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def flush(self) -> list[SSEEvent]:
        """End of stream: dispatch whatever is pending (tolerating a missing blank line)."""
        events: list[SSEEvent] = []
        if self._buffer:
            event = self._line(self._buffer)
            self._buffer = ""
            if event is not None:
                events.append(event)
        event = self._dispatch()
        if event is not None:
            events.append(event)
        return events

    def _line(self, line: str) -> SSEEvent | None:
        if line.startswith("data:"):  # the common case first
            self._data.append(line[6:] if line.startswith("data: ") else line[5:])
            return None
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # comment / keep-alive
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id":
            self._id = value
        return None

    def _dispatch(self) -> SSEEvent | None:
        if not self._data:
            self._event = ""
            return None
        data = self._data[0] if len(self._data) == 1 else "\n".join(self._data)
        event = SSEEvent(event=self._event or "message", data=data, id=self._id)
        self._data = []
        self._event = ""
        return event


def iter_sse(chunks: Iterable[str | bytes]) -> list[SSEEvent]:
    """Decode a whole stream held in memory (handy for tests and replay)."""
    decoder = SSEDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    events: list[SSEEvent] = []
    for chunk in chunks:
        text = utf8.decode(chunk) if isinstance(chunk, bytes) else chunk
        events.extend(decoder.feed(text))
    events.extend(decoder.feed(utf8.decode(b"", final=True)))
    events.extend(decoder.flush())
    return events


async def aiter_sse(chunks: AsyncIterable[bytes]) -> AsyncIterator[SSEEvent]:
    """Decode events from ``response.aiter_bytes()`` as they arrive."""
    decoder = SSEDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    async for chunk in chunks:
        for event in decoder.feed(utf8.decode(chunk)):
            yield event
    for event in decoder.feed(utf8.decode(b"", final=True)):
        yield event
    for event in decoder.flush():
        yield event


def parse_event_json(event: SSEEvent, provider: str) -> dict[str, Any]:
    """The JSON object in ``event.data``; a clear :class:`StreamInterrupted` if it is not one."""
    try:
        value: Any = json.loads(event.data)
    except ValueError as exc:
        raise StreamInterrupted(
            f"{provider} sent a malformed event in the response stream "
            f"(not JSON: {event.data[:120]!r}).",
            "The stream is corrupt; retry the call. If it keeps happening, the server or a "
            "proxy in between is mangling server-sent events.",
            provider=provider,
            code="malformed_event",
        ) from exc
    if not isinstance(value, dict):
        raise StreamInterrupted(
            f"{provider} sent an event that is not a JSON object: {event.data[:120]!r}.",
            "The stream is corrupt; retry the call.",
            provider=provider,
            code="malformed_event",
        )
    return value  # type: ignore[return-value]
