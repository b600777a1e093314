"""The transcript: the authoritative, append-only record of a run.

Every entry is a frozen pydantic model discriminated by ``type``, with a stable ``id``,
the ``run_id`` and ``turn`` it belongs to, the ``agent`` that was active, and a
timestamp. Entries built by user code (``InputEntry(role="user", content=...)``) leave
those fields empty; the loop stamps them when it appends.

Pairing is by id, never by position: a :class:`ToolResultEntry` names its
:class:`ToolCallEntry` through ``call_id``; consecutive model entries of one response
share a ``message_id``.

Text is cleaned where an entry is created, so what is stored, traced and printed is
always valid Unicode: surrogate pairs split in two (a stream that sent each half in its
own chunk) are joined back into one character, and a lone surrogate becomes U+FFFD
(see :func:`clean_text`).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Annotated, Any, Literal, TypedDict, TypeVar, cast, overload

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from .errors import UserError

__all__ = [
    "EntriesView",
    "EntryStamp",
    "HandoffEntry",
    "InputEntry",
    "ReasoningEntry",
    "SystemEntry",
    "TextEntry",
    "ToolCallEntry",
    "ToolResultEntry",
    "Transcript",
    "TranscriptEntry",
    "clean_text",
    "dump_entries",
    "input_entries",
    "load_entries",
    "new_id",
]


def new_id(prefix: str = "e") -> str:
    """A new random id such as ``e_3f9c0a1b2c3d4e5f``."""
    return f"{prefix}_{os.urandom(8).hex()}"


_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def clean_text(text: str) -> str:
    """``text`` as valid Unicode: split surrogate pairs joined, lone surrogates → U+FFFD.

    A JSON ``\\ud83d`` escape in one stream chunk and ``\\ude00`` in the next decode to
    two lone surrogates; joined they are one emoji again. A surrogate with no partner
    (a file name decoded with ``surrogateescape``, a broken provider) cannot be encoded
    as UTF-8, so stores, exporters and terminals would refuse it: it becomes U+FFFD.
    Valid text is returned as is (the same object).
    """
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _clean(value: Any) -> Any:
    """:func:`clean_text` applied to every string in JSON-like data."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        items = cast(dict[Any, Any], value).items()
        return {_clean(k): _clean(v) for k, v in items}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in cast(list[Any], value)]
    return value


class DeltaCleaner:
    """Cleans streamed text chunk by chunk, as :func:`clean_text` cleans a whole entry.

    A chunk that ends with the first half of a surrogate pair keeps that half back
    until the next chunk of the same stream (``key``: text, reasoning, a tool call's
    index), so the pair is joined instead of becoming two U+FFFD. :meth:`flush` returns
    what is still held at the end (a U+FFFD per stream whose pair never completed).
    """

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: dict[Any, str] = {}

    def feed(self, key: Any, text: str) -> str:
        held = self._held.pop(key, "")
        if not held and (text.isascii() or _SURROGATE.search(text) is None):
            return text
        text = held + text
        if text and "\ud800" <= text[-1] <= "\udbff":
            self._held[key] = text[-1]
            text = text[:-1]
        return clean_text(text)

    def flush(self) -> dict[Any, str]:
        held, self._held = self._held, {}
        return dict.fromkeys(held, REPLACEMENT)


class _Entry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    id: str = Field(default_factory=new_id)
    """Stable id of this entry."""
    run_id: str = ""
    """The run that appended it (empty until the loop stamps it)."""
    turn: int = 0
    """Turn index (1-based; 0 = before the first turn)."""
    agent: str = ""
    """Name of the agent that was active."""
    ts: float = Field(default_factory=time.time)
    """Unix time when it was created."""

    @model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        # the one place text is cleaned: every entry, whoever builds it (see clean_text)
        if not isinstance(data, dict):
            return data
        fields = cast(dict[Any, Any], data)
        # nothing to clean (the common case): no copy, no walk
        return fields if _plain(fields) else _clean(fields)


_E = TypeVar("_E", bound=_Entry)


class EntryStamp(TypedDict, total=False):
    """The run id, turn and agent an entry is recorded with, as keyword arguments:
    ``TextEntry(text=..., **stamp)``. A model call's request carries the ones its
    response's entries get (:attr:`lovia.model.ModelRequest.stamp`)."""

    run_id: str
    turn: int
    agent: str


def stamped(entry: _E, run_id: str, turn: int, agent: str) -> _E:
    """``entry`` with this run's id, turn and agent: itself when it has them already
    (built with its request's stamp), else a copy (entries are frozen)."""
    if entry.run_id == run_id and entry.turn == turn and entry.agent == agent:
        return entry
    return entry.model_copy(update={"run_id": run_id, "turn": turn, "agent": agent})


_SCALARS = frozenset({int, float, bool, type(None)})


def _plain(data: dict[Any, Any]) -> bool:
    """True when every key and value is ASCII text or a scalar (nothing to clean)."""
    for key, value in data.items():
        if type(key) is not str or not key.isascii():
            return False
        if type(value) is str:
            if not value.isascii():
                return False
        elif type(value) not in _SCALARS:
            return False
    return True


class SystemEntry(_Entry):
    """The system prompt the active agent runs with (again after each handoff)."""

    type: Literal["system"] = "system"
    content: str


class InputEntry(_Entry):
    """A message into the conversation: the user's input, a mailbox message, a reminder.

    ``origin`` says where it came from: ``input`` (the run's input), ``mailbox``
    (steering during the run), ``repair`` (structured-output repair request),
    ``injected`` (a view injector; never persisted), ``summary`` (a compaction summary
    in a view; never persisted), ``history`` (given by the caller as prior messages).
    """

    type: Literal["input"] = "input"
    role: Literal["user", "system", "assistant", "developer"] = "user"
    content: str
    origin: str = "input"


class TextEntry(_Entry):
    """Text the model answered with."""

    type: Literal["text"] = "text"
    text: str
    message_id: str = ""
    refusal: bool = False


class ReasoningEntry(_Entry):
    """Model reasoning, with the provider's signature / encrypted content kept verbatim."""

    type: Literal["reasoning"] = "reasoning"
    text: str = ""
    signature: str | None = None
    encrypted: str | None = None
    redacted: bool = False
    provider: str = ""
    """Provider that produced it; reasoning is only sent back to the same provider."""
    message_id: str = ""
    details: dict[str, Any] | None = None
    """Provider-specific fields needed to round-trip it (e.g. a Responses item id)."""


class ToolCallEntry(_Entry):
    """A tool call requested by the model; ``arguments`` is the JSON text as sent."""

    type: Literal["tool_call"] = "tool_call"
    call_id: str
    name: str
    arguments: str = "{}"
    message_id: str = ""

    @property
    def key(self) -> str:
        """Idempotency key of this call: ``run_id:call_id`` (stable across resume)."""
        return f"{self.run_id}:{self.call_id}"


class ToolResultEntry(_Entry):
    """The result of a tool call, paired with it by ``call_id``."""

    type: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str
    content: str
    is_error: bool = False


class HandoffEntry(_Entry):
    """The active agent changed from ``from_agent`` to ``to_agent``."""

    type: Literal["handoff"] = "handoff"
    from_agent: str
    to_agent: str
    call_id: str = ""


TranscriptEntry = Annotated[
    SystemEntry
    | InputEntry
    | TextEntry
    | ReasoningEntry
    | ToolCallEntry
    | ToolResultEntry
    | HandoffEntry,
    Field(discriminator="type"),
]
"""Any transcript entry (a discriminated union on ``type``)."""

_ADAPTERS: list[Any] = []


def _adapters() -> tuple[TypeAdapter[TranscriptEntry], TypeAdapter[list[TranscriptEntry]]]:
    """Built on first use, so ``import lovia`` stays fast."""
    if not _ADAPTERS:
        _ADAPTERS.append(TypeAdapter[TranscriptEntry](TranscriptEntry))
        _ADAPTERS.append(TypeAdapter[list[TranscriptEntry]](list[TranscriptEntry]))
    return _ADAPTERS[0], _ADAPTERS[1]


def dump_entries(entries: Iterable[TranscriptEntry]) -> bytes:
    """Serialize entries to JSON bytes (lossless; see :func:`load_entries`)."""
    return _adapters()[1].dump_json(list(entries))


def load_entries(data: bytes | str) -> list[TranscriptEntry]:
    """Parse entries written by :func:`dump_entries`."""
    return _adapters()[1].validate_json(data)


def entry_to_dict(entry: TranscriptEntry) -> dict[str, Any]:
    """``entry.model_dump(mode="json")``, called on the model's serializer directly:
    ``model_dump`` passes a dozen keywords on every call (a third of its cost)."""
    data: dict[str, Any] = entry.__pydantic_serializer__.to_python(entry, mode="json")
    return data


def entry_from_dict(data: dict[str, Any]) -> TranscriptEntry:
    return _adapters()[0].validate_python(data)


def input_entries(value: Any) -> list[InputEntry]:
    """Normalize the run input: a str, an InputEntry, or a list of them."""
    if value is None:
        return []
    if isinstance(value, str):
        return [InputEntry(role="user", content=value)]
    if isinstance(value, InputEntry):
        return [value]
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        out: list[InputEntry] = []
        for item in cast("Sequence[object]", value):  # the caller's input: each item checked
            out.extend(input_entries(item))
        return out
    raise UserError(
        f"cannot use {type(value).__name__} as run input",
        hint="Pass a str, an InputEntry, or a list of them.",
    )


class EntriesView(Sequence[TranscriptEntry]):
    """A read-only live view of a transcript's entries (what ``ctx.entries`` returns)."""

    __slots__ = ("_items", "_start")

    def __init__(self, items: list[TranscriptEntry], start: int = 0) -> None:
        self._items = items
        self._start = start

    def __len__(self) -> int:
        return len(self._items) - self._start

    @overload
    def __getitem__(self, index: int) -> TranscriptEntry: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[TranscriptEntry]: ...
    def __getitem__(self, index: int | slice) -> TranscriptEntry | Sequence[TranscriptEntry]:
        if isinstance(index, slice):
            return self._items[self._start :][index]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._items[self._start + index]

    def __iter__(self) -> Iterator[TranscriptEntry]:
        items = self._items
        for i in range(self._start, len(items)):
            yield items[i]

    def __repr__(self) -> str:
        return f"EntriesView({len(self)} entries)"


class Transcript:
    """Append-only list of entries. There is no way to change or remove an entry."""

    __slots__ = ("_by_call", "_items")

    def __init__(self, entries: Iterable[TranscriptEntry] = ()) -> None:
        self._items: list[TranscriptEntry] = []
        self._by_call: dict[str, ToolCallEntry] = {}
        for entry in entries:
            self.append(entry)

    def append(self, entry: TranscriptEntry) -> TranscriptEntry:
        self._items.append(entry)
        if isinstance(entry, ToolCallEntry):
            self._by_call[entry.call_id] = entry
        return entry

    def extend(self, entries: Iterable[TranscriptEntry]) -> None:
        for entry in entries:
            self.append(entry)

    def call(self, call_id: str) -> ToolCallEntry | None:
        """The tool call with this id, if any."""
        return self._by_call.get(call_id)

    def view(self, start: int = 0) -> EntriesView:
        return EntriesView(self._items, start)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[TranscriptEntry]:
        return iter(self._items)

    def __getitem__(self, index: int) -> TranscriptEntry:
        return self._items[index]
