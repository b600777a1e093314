"""The view seam: what one model call receives, and the record that reproduces it.

A :class:`ContextStrategy` turns the transcript into the messages of one model call.
It never changes the transcript. Whatever it does is written to a :class:`ViewRecord`,
from which :func:`rebuild_messages` (a pure function) gives back the exact same
messages; ``sha256`` of the canonical serialization of the request is the view hash,
stored in the record and put on the ``chat`` span as ``lovia.view.hash``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from ..providers.base import ModelProfile, ModelRequest
from ..transcript import SystemEntry, TranscriptEntry, entry_from_dict, entry_to_dict

__all__ = [
    "VIEW_RECORD_VERSION",
    "BuiltView",
    "ContextStrategy",
    "FullView",
    "ViewHasher",
    "ViewInput",
    "ViewRecord",
    "canonical_request",
    "rebuild_messages",
]

VIEW_RECORD_VERSION = 1


class ViewRecord(BaseModel):
    """Everything needed to rebuild one model call's view from the transcript.

    ``order`` lists, in view order, the ids of transcript entries and of synthetic
    entries (summaries, stubs) whose full form is in ``replaced``. ``injected`` are view
    injector entries appended after the strategy's output.
    """

    model_config = ConfigDict(extra="forbid")

    version: int = VIEW_RECORD_VERSION
    run_id: str = ""
    turn: int = 0
    attempt: int = 1
    agent: str = ""
    system: str = ""
    order: list[str] = Field(default_factory=list[str])
    replaced: dict[str, dict[str, Any]] = Field(default_factory=dict[str, dict[str, Any]])
    summary: str | None = None
    injected: list[dict[str, Any]] = Field(default_factory=list[dict[str, Any]])
    tools: list[dict[str, Any]] = Field(default_factory=list[dict[str, Any]])
    settings: dict[str, Any] = Field(default_factory=dict[str, Any])
    output_schema: dict[str, Any] | None = None
    compacted: bool = False
    hash: str = ""
    model: str = ""
    provider: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewInput:
    """What a strategy sees when building one view."""

    entries: Sequence[TranscriptEntry]
    """The whole transcript (session history + this run), read-only."""
    system: str
    agent_name: str
    profile: ModelProfile
    turn: int
    attempt: int = 1
    """1 for the first try; 2+ after a context overflow (compact harder)."""
    last_input_tokens: int | None = None
    """Input tokens the provider reported for the previous call of this run."""
    last_view_size: int = 0
    """Number of entries in the previous view (to estimate tokens added since)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BuiltView:
    """A strategy's output: the messages and how they relate to the transcript."""

    messages: Sequence[TranscriptEntry]
    order: Sequence[str]
    replaced: Mapping[str, TranscriptEntry] = field(default_factory=dict[str, TranscriptEntry])
    summary: str | None = None
    compactions: Sequence[tuple[str, tuple[str, ...]]] = ()
    """``(kind, entry_ids)`` for each transformation applied this time."""
    evicted: bool = False
    """True when ``recall_tool_result`` should be offered (something was evicted)."""


@runtime_checkable
class ContextStrategy(Protocol):
    """Builds the view of each model call. Per-run state goes in ``state``, never on self."""

    def new_state(self) -> Any:
        """Fresh per-run state (passed back to every ``build`` of that run)."""
        ...

    async def build(self, inp: ViewInput, state: Any, summarize: Any) -> BuiltView:
        """Build the view; ``summarize(entries) -> str`` calls a model if needed."""
        ...


class FullView:
    """The whole transcript, unchanged (no compaction)."""

    def new_state(self) -> None:
        return None

    async def build(self, inp: ViewInput, state: Any, summarize: Any) -> BuiltView:
        messages = [e for e in inp.entries if not isinstance(e, SystemEntry)]
        return BuiltView(messages=messages, order=[e.id for e in messages])


class ViewHasher:
    """Canonical serialization + sha256 of a request, caching each entry's bytes."""

    __slots__ = ("_cache", "_head")

    def __init__(self) -> None:
        self._cache: dict[int, tuple[TranscriptEntry, bytes]] = {}
        self._head: tuple[tuple[object, ...], bytes] | None = None

    def entry_bytes(self, entry: TranscriptEntry) -> bytes:
        hit = self._cache.get(id(entry))
        if hit is not None and hit[0] is entry:
            return hit[1]
        data = _canon(entry_to_dict(entry))
        self._cache[id(entry)] = (entry, data)
        return data

    def head_bytes(self, request: ModelRequest) -> bytes:
        key = (request.system, request.tools, request.settings, request.output_schema)
        cached = self._head
        if cached is not None and all(a is b for a, b in zip(cached[0], key, strict=True)):
            return cached[1]
        data = _canon(_head(request))
        self._head = (key, data)
        return data

    def hash(self, request: ModelRequest) -> str:
        h = hashlib.sha256()
        h.update(self.head_bytes(request))
        for entry in request.messages:
            h.update(b"\n")
            h.update(self.entry_bytes(entry))
        return h.hexdigest()


def _canon(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _head(request: ModelRequest) -> dict[str, Any]:
    return {
        "system": request.system,
        "tools": [
            {
                "name": t.name,
                "description": t.description,
                "parameters": dict(t.parameters),
                "strict": t.strict,
            }
            for t in request.tools
        ],
        "settings": request.settings.to_dict(),
        "output_schema": None
        if request.output_schema is None
        else {
            "name": request.output_schema.name,
            "schema": dict(request.output_schema.schema),
            "strict": request.output_schema.strict,
        },
    }


def canonical_request(request: ModelRequest) -> dict[str, Any]:
    """The canonical JSON form of a request (what the view hash is computed over)."""
    return {**_head(request), "messages": [entry_to_dict(e) for e in request.messages]}


def rebuild_messages(
    record: ViewRecord, by_id: Mapping[str, TranscriptEntry]
) -> list[TranscriptEntry]:
    """Rebuild a view's messages from the transcript (``by_id``) and its record."""
    out: list[TranscriptEntry] = []
    for entry_id in record.order:
        replacement = record.replaced.get(entry_id)
        if replacement is not None:
            out.append(entry_from_dict(replacement))
        else:
            out.append(by_id[entry_id])
    out.extend(entry_from_dict(e) for e in record.injected)
    return out
