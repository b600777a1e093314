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
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

import pydantic_core

from .._redact import excerpt
from ..errors import ProviderError, StreamInterrupted

__all__ = [
    "DEFAULT_MAX_EVENT_SIZE",
    "ChunkDecoder",
    "SSEDecoder",
    "SSEEvent",
    "iter_sse",
    "load_json",
    "parse_event_json",
]


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event: ``event`` name (``message`` by default) and ``data`` text."""

    event: str
    data: str
    id: str | None = None


DEFAULT_MAX_EVENT_SIZE = 16 * 1024 * 1024
"""Characters one event may hold (its ``data`` lines plus an unfinished line): 16 MiB."""


class SSEDecoder:
    """Incremental line-based decoder: feed text, get complete events.

    Linear in the input: a line still arriving is kept as a list of pieces and joined
    once, when its end arrives (re-joining the whole buffer per chunk was quadratic).
    An event larger than ``max_event_size`` characters raises a
    :class:`~lovia.errors.ProviderError` instead of growing without bound.
    """

    __slots__ = (
        "_data",
        "_data_size",
        "_event",
        "_id",
        "_parts",
        "_parts_size",
        "_pending_cr",
        "max_event_size",
    )

    def __init__(self, max_event_size: int = DEFAULT_MAX_EVENT_SIZE) -> None:
        self.max_event_size = max_event_size
        self._parts: list[str] = []  # the unfinished line, in pieces
        self._parts_size = 0
        self._pending_cr = False
        self._data: list[str] = []
        self._data_size = 0
        self._event = ""
        self._id: str | None = None

    def feed(self, text: str) -> list[SSEEvent]:
        """Decode ``text`` (any fragment of the stream); return the events it completed."""
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]  # the LF of a CRLF split across two chunks
        self._pending_cr = text.endswith("\r")
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if "\n" not in text:  # the line goes on: keep the piece, join nothing
            if text:
                self._parts.append(text)
                self._parts_size += len(text)
                self._check_size()
            return []
        if self._parts:
            self._parts.append(text)
            text = "".join(self._parts)
            self._parts = []
        lines = text.split("\n")
        tail = lines.pop()
        self._parts_size = len(tail)
        if tail:
            self._parts.append(tail)
        events: list[SSEEvent] = []
        for line in lines:
            event = self._line(line)
            if event is not None:
                events.append(event)
        self._check_size()
        return events

    def _check_size(self) -> None:
        if self._parts_size + self._data_size > self.max_event_size:
            raise ProviderError(
                f"A server-sent event grew past {self.max_event_size} characters; "
                "the stream was stopped.",
                "The server sends an endless or enormous line. If such events are expected, "
                "raise StreamLimits(max_event_size=...) on the provider.",
                code="event_too_large",
            )

    def flush(self) -> list[SSEEvent]:
        """End of stream: dispatch whatever is pending (tolerating a missing blank line)."""
        events: list[SSEEvent] = []
        if self._parts:
            event = self._line("".join(self._parts))
            self._parts, self._parts_size = [], 0
            if event is not None:
                events.append(event)
        event = self._dispatch()
        if event is not None:
            events.append(event)
        return events

    def _line(self, line: str) -> SSEEvent | None:
        if line.startswith("data:"):  # the common case first
            value = line[6:] if line.startswith("data: ") else line[5:]
            self._data.append(value)
            self._data_size += len(value)
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
            self._data_size += len(value)
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
        self._data_size = 0
        self._event = ""
        return event


class ChunkDecoder:
    """Body chunks to SSE events as they arrive: UTF-8 is decoded incrementally (a
    character split across chunks is joined; invalid bytes become U+FFFD), then framed."""

    __slots__ = ("_sse", "_utf8")

    def __init__(self, max_event_size: int = DEFAULT_MAX_EVENT_SIZE) -> None:
        self._sse = SSEDecoder(max_event_size)
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, chunk: bytes | str) -> list[SSEEvent]:
        """The events ``chunk`` completes."""
        return self._sse.feed(chunk if isinstance(chunk, str) else self._utf8.decode(chunk))

    def end(self) -> list[SSEEvent]:
        """At the end of the body: the events still pending."""
        return [*self._sse.feed(self._utf8.decode(b"", final=True)), *self._sse.flush()]


def iter_sse(
    chunks: Iterable[str | bytes], max_event_size: int = DEFAULT_MAX_EVENT_SIZE
) -> list[SSEEvent]:
    """Decode a whole stream held in memory (handy for tests and replay)."""
    decoder = ChunkDecoder(max_event_size)
    events: list[SSEEvent] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    events.extend(decoder.end())
    return events


def load_json(data: str | bytes | bytearray) -> Any:
    """``json.loads(data)``, parsed by pydantic-core (about 2.4x faster on a streamed
    event). Text it refuses goes to ``json.loads``, which then gives the same value or the
    same ``ValueError``: JSON allows an escaped lone surrogate (``"\\ud800"``), which
    pydantic-core does not read."""
    try:
        return pydantic_core.from_json(data)
    except ValueError:
        return json.loads(data)


def parse_event_json(event: SSEEvent, provider: str) -> dict[str, Any]:
    """The JSON object in ``event.data``; a clear :class:`StreamInterrupted` if it is not one."""
    try:
        value: Any = load_json(event.data)
    except ValueError as exc:
        raise StreamInterrupted(
            f"{provider} sent a malformed event in the response stream "
            f"(not JSON: {excerpt(event.data, 120)!r}).",
            "The stream is corrupt; retry the call. If it keeps happening, the server or a "
            "proxy in between is mangling server-sent events.",
            provider=provider,
            code="malformed_event",
        ) from exc
    if not isinstance(value, dict):
        raise StreamInterrupted(
            f"{provider} sent an event that is not a JSON object: {excerpt(event.data, 120)!r}.",
            "The stream is corrupt; retry the call.",
            provider=provider,
            code="malformed_event",
        )
    return cast("dict[str, Any]", value)  # wire JSON: an object, checked above
