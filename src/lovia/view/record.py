"""View records: the compact log that makes every model call reproducible, and replay.

For every model call (every attempt) the loop stores one :class:`ViewRecord` as a
checkpoint record of kind ``"view"``. Records of one run form a chain: ``seq`` counts
them from 0; a record with ``delta=False`` is self-contained, a record with
``delta=True`` only says what changed since the record before it (``seq - 1``), so a
500-turn run stores O(new entries) per call, never the whole view again.

Record format (``version`` 2; version 1 records are full records and still load):

- ``order`` — ids in view order (transcript entries and synthetic ones such as a
  summary). Full record: the whole order. Delta: the ids that follow the first ``keep``
  ids of the previous view.
- ``replaced`` — ``{id: entry dict}``: entries shown in a different form than in the
  transcript (stubs of evicted tool results, which keep the original id) and synthetic
  entries (summaries). Full record: every replacement used by this view. Delta: only
  the ones that are new or changed; ``restored`` lists ids whose earlier replacement no
  longer applies.
- ``injected`` — view-injector entries appended after the strategy's output (always
  stored in full: they are new every call).
- ``system``, ``tools``, ``settings``, ``output_schema`` — the rest of the request. In
  a delta, the ones named in ``inherit`` are equal to the previous record's and left
  empty.
- ``summary`` — the text of a summary made for this view (``None`` when none was made
  this time; the summary entry itself is in ``replaced``).
- ``summary_views`` — the self-contained records (``to_data()`` form) of the summary
  calls made while building this view: what each summarizer saw, and its hash (the
  ``lovia.view.hash`` of that ``chat`` span), so replay verifies summaries too.
- ``hash`` — ``sha256`` of :func:`canonical_request` (the ``lovia.view.hash`` span
  attribute); ``compacted`` — the view differs from the transcript.

Replay API (pure functions; ``transcript_entries`` is any iterable holding at least the
entries the views used — e.g. session history + the run's stored entries — looked up by
id, never by position):

- ``resolve_records(records) -> list[ViewRecord]`` — the run's records (in stored order)
  as self-contained full records.
- ``ResolvedRecords(records)`` — the same as a sequence resolving each record when it is
  read (what a loaded run's ``views`` are: loading stays linear in the run's length);
  ``stored_records(views)`` — the stored records, for metadata without resolving.
- ``rebuild_messages(record, by_id, previous=()) -> list[TranscriptEntry]``
- ``rebuild_request(record, transcript_entries, previous_records=()) -> ModelRequest``
- ``rebuild_view(records, transcript_entries) -> list[ModelRequest]`` — one request per
  record, in one pass.
- ``verify(record, transcript_entries, previous_records=()) -> bool`` — the rebuilt
  request hashes to ``record.hash``.
- ``view_records(checkpoint_records) -> list[ViewRecord]`` — the ``"view"`` records of a
  stored run (``(await store.load(run_id)).records``).

``previous_records`` are the records stored before ``record`` in the same run (at
least back to the last full one); extra older ones are harmless.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast, overload

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field

from .. import transcript as tr
from ..errors import LoviaError, SchemaVersionError
from ..model import ModelRequest, ModelSettings, OutputSchema, ToolSpec
from ..transcript import TranscriptEntry, entry_from_dict, entry_to_dict

__all__ = [
    "VIEW_RECORD_VERSION",
    "ResolvedRecords",
    "ViewHasher",
    "ViewRecord",
    "canonical_entry",
    "canonical_request",
    "rebuild_messages",
    "rebuild_request",
    "rebuild_view",
    "resolve_records",
    "stored_records",
    "verify",
    "view_parts",
    "view_records",
]

VIEW_RECORD_VERSION = 2

_HEAD_FIELDS = ("system", "tools", "settings", "output_schema")


class ViewRecord(BaseModel):
    """What one model call's view was made of (see the module docstring for the format)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    version: int = VIEW_RECORD_VERSION
    run_id: str = ""
    turn: int = 0
    attempt: int = 1
    agent: str = ""
    seq: int = 0
    """Position in the run's chain of view records (0-based)."""
    delta: bool = False
    """True: relative to the previous record of the run (``seq - 1``)."""
    keep: int = 0
    """Delta: how many leading ids of the previous view's order come first."""
    system: str = ""
    order: list[str] = Field(default_factory=list[str])
    replaced: dict[str, dict[str, Any]] = Field(default_factory=dict[str, dict[str, Any]])
    restored: list[str] = Field(default_factory=list[str])
    """Delta: ids whose earlier replacement no longer applies."""
    summary: str | None = None
    injected: list[dict[str, Any]] = Field(default_factory=list[dict[str, Any]])
    tools: list[dict[str, Any]] = Field(default_factory=list[dict[str, Any]])
    settings: dict[str, Any] = Field(default_factory=dict[str, Any])
    output_schema: dict[str, Any] | None = None
    inherit: list[str] = Field(default_factory=list[str])
    """Delta: which of system/tools/settings/output_schema equal the previous record's."""
    compacted: bool = False
    hash: str = ""
    model: str = ""
    provider: str = ""
    summary_views: list[dict[str, Any]] = Field(default_factory=list[dict[str, Any]])
    """Records of the summary calls made for this view (see the module docstring)."""

    def to_data(self) -> dict[str, Any]:
        """The compact JSON form stored in the checkpoint (defaults left out)."""
        data = self.model_dump(mode="json", exclude_defaults=True)
        data["version"] = self.version
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ViewRecord:
        """Load a stored record; newer versions than this lovia understands fail fast."""
        version = int(data.get("version", 1))
        if version > VIEW_RECORD_VERSION:
            raise SchemaVersionError(
                f"view record version {version} is newer than this lovia understands "
                f"({VIEW_RECORD_VERSION})",
                hint="Upgrade lovia to replay this run (pip install -U lovia).",
            )
        return cls.model_validate(dict(data))


# ---------------------------------------------------------------------------- hashing


_CANON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
"""The canonical form: UTF-8 JSON, keys sorted, no whitespace. One encoder for every
call: ``json.dumps`` with these options builds a new one each time."""


def _canon(value: Any) -> bytes:
    return _CANON.encode(value).encode()


_SCALAR_ENTRIES: dict[type, tuple[str, ...]] = {
    cls: tuple(sorted(cls.model_fields))
    for cls in (
        tr.SystemEntry, tr.InputEntry, tr.TextEntry, tr.ReasoningEntry,
        tr.ToolCallEntry, tr.ToolResultEntry, tr.HandoffEntry,
    )
}  # fmt: skip
"""Entry types whose fields hold only text, numbers, booleans and None (a reasoning
entry's ``details`` excepted), with their field names in the canonical (sorted) order."""


def canonical_entry(entry: TranscriptEntry) -> bytes:
    """The canonical bytes of ``entry``: ``_canon(entry_to_dict(entry))``, byte for byte.

    For an entry of scalar fields, pydantic-core writes the same bytes from the fields
    in sorted order, in about a quarter of the instructions: it escapes text exactly as
    ``json`` does with ``ensure_ascii=False``, and writes a finite float as ``repr``
    does unless it is below 1e-4 in magnitude (``1e-5``, not ``1e-05``); the time stamp
    never is. Anything else (a reasoning entry with ``details``, a tiny or non-finite
    time stamp, text pydantic-core refuses) takes the ``json`` path, so the hash never
    depends on which path ran."""
    order = _SCALAR_ENTRIES.get(type(entry))
    if order is not None:
        values: Mapping[str, Any] = entry.__dict__
        ts: float = values.get("ts", 0.0)
        plain = type(ts) in (float, int) and (ts == 0 or 1e-4 <= abs(ts) < math.inf)
        if plain and values.get("details") is None:
            try:
                return pydantic_core.to_json({name: values[name] for name in order})
            except (KeyError, pydantic_core.PydanticSerializationError):
                pass
    return _canon(entry_to_dict(entry))


def _tool_dict(t: ToolSpec) -> dict[str, Any]:
    return {
        "name": t.name,
        "description": t.description,
        "parameters": dict(t.parameters),
        "strict": t.strict,
    }


def _schema_dict(s: OutputSchema | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {"name": s.name, "schema": dict(s.schema), "strict": s.strict}


def _head(request: ModelRequest) -> dict[str, Any]:
    return {
        "system": request.system,
        "tools": [_tool_dict(t) for t in request.tools],
        "settings": request.settings.to_dict(),
        "output_schema": _schema_dict(request.output_schema),
    }


def canonical_request(request: ModelRequest) -> dict[str, Any]:
    """The canonical JSON form of a request (what the view hash is computed over)."""
    return {**_head(request), "messages": [entry_to_dict(e) for e in request.messages]}


@dataclass(slots=True)
class _Chain:
    """The previous record of a run, as the encoder needs it for the next delta."""

    seq: int
    order: list[str]
    known: dict[str, TranscriptEntry]
    system: str
    tools: Sequence[ToolSpec]
    settings: ModelSettings
    output_schema: OutputSchema | None


class ViewHasher:
    """Per-run view bookkeeping: the view hash (entry bytes cached) and the record chain.

    ``hash(request)`` is sha256 over the canonical serialization; each entry is
    serialized once while it stays in the view. ``record(...)`` encodes the next
    :class:`ViewRecord` of the run as a delta against the previous one; ``resume(last)``
    continues the chain of a stored run (the next record is a delta against ``last``).
    """

    __slots__ = ("_cache", "_chain", "_head", "_last", "_states")

    STRIDE = 32
    """Hash states are kept every STRIDE entries and at the end of the view, so a view
    that shares a prefix with the previous one rehashes only from the last state inside
    that prefix (a view that extends the previous one: only its new entries)."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[TranscriptEntry, bytes]] = {}
        self._head: tuple[tuple[object, ...], bytes] | None = None
        self._last: tuple[ModelRequest, str] | None = None
        self._chain: _Chain | None = None
        # previous view: its head bytes, its messages, and sha256 states by position
        self._states: tuple[bytes, Sequence[TranscriptEntry], dict[int, Any]] | None = None

    def resume(self, last: ViewRecord) -> None:
        """Continue a stored run's chain after ``last``, its last record, resolved.

        The next :meth:`record` gets ``seq = last.seq + 1`` and is a delta against ``last``.
        """
        if last.delta:
            raise LoviaError(
                "ViewHasher.resume() needs a resolved record (delta=False)",
                hint="Pass the last record of resolve_records(records).",
            )
        tools, settings, schema = _head_objects(last)
        self._chain = _Chain(
            last.seq,
            list(last.order),
            {k: entry_from_dict(v) for k, v in last.replaced.items()},
            last.system,
            tools,
            settings,
            schema,
        )

    def head_bytes(self, request: ModelRequest) -> bytes:
        """Canonical bytes of system + tools + settings + schema (cached by identity)."""
        key = (request.system, request.tools, request.settings, request.output_schema)
        cached = self._head
        if cached is not None and all(a is b for a, b in zip(cached[0], key, strict=True)):
            return cached[1]
        data = _canon(_head(request))
        self._head = (key, data)
        return data

    def entry_bytes(self, entry: TranscriptEntry) -> bytes:
        hit = self._cache.get(id(entry))
        if hit is not None and hit[0] is entry:
            return hit[1]
        data = canonical_entry(entry)
        self._cache[id(entry)] = (entry, data)
        return data

    def hash(self, request: ModelRequest) -> str:
        """sha256 of the canonical serialization (head, then each message on its line).

        Incremental: the common prefix with the previous view (by entry identity) is not
        hashed again, so a turn costs in proportion to what changed.
        """
        last = self._last
        if last is not None and last[0] is request:
            return last[1]
        head, messages = self.head_bytes(request), request.messages
        start, h = self._resume_state(head, messages)
        states: dict[int, Any] = (
            {k: v for k, v in (self._states or (b"", (), {}))[2].items() if k <= start}
            if start
            else {}
        )
        for index in range(start, len(messages)):
            if index % self.STRIDE == 0 and index not in states:
                states[index] = h.copy()
            h.update(b"\n")
            h.update(self.entry_bytes(messages[index]))
        # the state after the whole view: the next view (this one plus the answer and
        # the tool results) continues from it; never updated again (resumes copy it)
        states[len(messages)] = h
        digest = h.hexdigest()
        self._states = (head, list(messages), states)
        self._last = (request, digest)
        if len(self._cache) > 4 * len(messages) + 256:
            self._prune(messages)
        return digest

    def _resume_state(self, head: bytes, messages: Sequence[TranscriptEntry]) -> tuple[int, Any]:
        """(position, sha256 state) to continue from: the last state inside the prefix."""
        prev = self._states
        if prev is not None and prev[0] is head:
            old = prev[1]
            limit = min(len(old), len(messages))
            same = 0
            while same < limit and old[same] is messages[same]:
                same += 1
            best = max((k for k in prev[2] if k <= same), default=-1)
            if best >= 0:
                return best, prev[2][best].copy()
        h = hashlib.sha256()
        h.update(head)
        return 0, h

    def _prune(self, messages: Sequence[TranscriptEntry]) -> None:
        keep = {id(e) for e in messages}
        self._cache = {k: v for k, v in self._cache.items() if k in keep}

    def record(
        self,
        *,
        request: ModelRequest,
        order: Sequence[str],
        replaced: Mapping[str, TranscriptEntry],
        injected: Sequence[TranscriptEntry],
        **meta: Any,
    ) -> ViewRecord:
        """The next record of this run (``meta``: run_id, turn, attempt, agent, …)."""
        chain = self._chain
        order = list(order)
        if chain is None:
            body = _full_body(request, order, replaced)
            seq = 0
        else:
            body = _delta_body(chain, request, order, replaced)
            seq = chain.seq + 1
        self._chain = _Chain(
            seq,
            order,
            dict(replaced),
            request.system,
            request.tools,
            request.settings,
            request.output_schema,
        )
        fields: dict[str, Any] = {**meta, **body}
        fields.update(
            version=VIEW_RECORD_VERSION,
            seq=seq,
            hash=self.hash(request),
            injected=[entry_to_dict(e) for e in injected],
        )
        return _construct(fields)


def _construct(fields: dict[str, Any]) -> ViewRecord:
    """The record, built by its validator: pydantic-core checks the 23 fields in about
    half the time of ``model_construct``'s Python loop over them."""
    return ViewRecord.model_validate(fields)


def _full_body(
    request: ModelRequest, order: list[str], replaced: Mapping[str, TranscriptEntry]
) -> dict[str, Any]:
    return {
        "delta": False,
        "keep": 0,
        "order": order,
        "restored": [],
        "inherit": [],
        "replaced": {k: entry_to_dict(v) for k, v in replaced.items()},
        **_head(request),
    }


def _delta_body(
    chain: _Chain, request: ModelRequest, order: list[str], replaced: Mapping[str, TranscriptEntry]
) -> dict[str, Any]:
    keep = _common_prefix(chain.order, order)
    known = chain.known
    new = {k: entry_to_dict(v) for k, v in replaced.items() if not _same(known.get(k), v)}
    restored = [k for k in known if k not in replaced]
    inherit: list[str] = []
    head = _head_delta(chain, request, inherit)
    return {
        "delta": True,
        "keep": keep,
        "order": order[keep:],
        "replaced": new,
        "restored": restored,
        "inherit": inherit,
        **head,
    }


def _head_delta(chain: _Chain, request: ModelRequest, inherit: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"system": "", "tools": [], "settings": {}, "output_schema": None}
    if request.system is chain.system or request.system == chain.system:
        inherit.append("system")
    else:
        out["system"] = request.system
    if request.tools is chain.tools or tuple(request.tools) == tuple(chain.tools):
        inherit.append("tools")
    else:
        out["tools"] = [_tool_dict(t) for t in request.tools]
    if request.settings is chain.settings or request.settings == chain.settings:
        inherit.append("settings")
    else:
        out["settings"] = request.settings.to_dict()
    if request.output_schema == chain.output_schema:
        inherit.append("output_schema")
    else:
        out["output_schema"] = _schema_dict(request.output_schema)
    return out


def _same(old: TranscriptEntry | None, new: TranscriptEntry) -> bool:
    """The same replacement: the same object (always, but after a resume), or equal."""
    return old is new or (old is not None and old == new)


def _common_prefix(a: list[str], b: list[str]) -> int:
    n = len(a)
    if len(b) >= n and b[:n] == a:
        return n
    i = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        i += 1
    return i


def view_parts(
    built: Any, messages: Sequence[TranscriptEntry]
) -> tuple[list[str], dict[str, TranscriptEntry]]:
    """Order and replacements of ``messages`` derived from ``built`` by a filter.

    Entries the strategy took verbatim from the transcript stay references; anything
    else (a stub, a summary, an entry the filter made) is recorded in full.
    """
    replaced_by_strategy: Mapping[str, TranscriptEntry] = built.replaced
    verbatim = {id(m) for m in built.messages if replaced_by_strategy.get(m.id) is not m}
    order: list[str] = []
    replaced: dict[str, TranscriptEntry] = {}
    for m in messages:
        order.append(m.id)
        if id(m) not in verbatim:
            replaced[m.id] = m
    return order, replaced


# ---------------------------------------------------------------------------- replay


@dataclass(slots=True)
class _Fold:
    """Folds a run's records in order into self-contained ones.

    :meth:`advance` costs what the record stores (a delta: its new ids and
    replacements; the ids it drops are counted out one by one), never the whole view;
    :meth:`resolved` copies the view it reached (the only part proportional to the
    view's length, paid only for the records asked for).
    """

    seq: int | None = None
    order: list[str] = field(default_factory=list[str])
    count: dict[str, int] = field(default_factory=dict[str, int])
    """How many times each id is in ``order`` (replacements of ids not in it are not
    shown)."""
    replaced: dict[str, dict[str, Any]] = field(default_factory=dict[str, dict[str, Any]])
    head: dict[str, Any] = field(default_factory=dict[str, Any])

    def advance(self, record: ViewRecord) -> None:
        if not record.delta:
            self.order = list(record.order)
            self.count = {}
            self._add(self.order)
            self.replaced = dict(record.replaced)
            self.head = {f: getattr(record, f) for f in _HEAD_FIELDS}
        else:
            if self.seq is None or record.seq != self.seq + 1:
                raise _missing_before(record)
            count = self.count
            for entry_id in self.order[record.keep :]:
                left = count[entry_id] - 1
                if left:
                    count[entry_id] = left
                else:
                    del count[entry_id]
            del self.order[record.keep :]
            self.order += record.order
            self._add(record.order)
            self.replaced.update(record.replaced)
            for key in record.restored:
                self.replaced.pop(key, None)
            for f in _HEAD_FIELDS:
                if f not in record.inherit:
                    self.head[f] = getattr(record, f)
        self.seq = record.seq

    def _add(self, ids: Iterable[str]) -> None:
        count = self.count
        for entry_id in ids:
            count[entry_id] = count.get(entry_id, 0) + 1

    def resolved(self, record: ViewRecord) -> ViewRecord:
        """``record`` (the last one advanced over) as a self-contained record."""
        count = self.count
        replaced = {k: v for k, v in self.replaced.items() if k in count}
        return record.model_copy(
            update={
                **self.head,
                "delta": False,
                "keep": 0,
                "order": list(self.order),
                "replaced": replaced,
                "restored": [],
                "inherit": [],
            }
        )

    def apply(self, record: ViewRecord) -> ViewRecord:
        self.advance(record)
        return self.resolved(record)


def _missing_before(record: ViewRecord) -> LoviaError:
    return LoviaError(
        f"view record seq {record.seq} of run {record.run_id!r} is a delta, but "
        f"the record before it (seq {record.seq - 1}) is missing",
        hint="Pass all of the run's view records, in stored order.",
    )


def resolve_records(records: Iterable[ViewRecord]) -> list[ViewRecord]:
    """A run's records (in stored order) as self-contained (``delta=False``) records."""
    fold = _Fold()
    return [fold.apply(r) for r in records]


class ResolvedRecords(Sequence[ViewRecord]):
    """A run's records, each resolved into a self-contained record when it is read.

    What :func:`resolve_records` returns, without holding every view at once (a run's
    views together are quadratic in its length: each holds the whole transcript so
    far). Building it checks the chain once, in linear time; reading record ``i``
    folds the deltas since the last record read (or since the full record before
    ``i``) and copies view ``i``. :attr:`stored` are the records as stored: their
    metadata (turn, attempt, agent, model, hash, summary, injected entries) is what the
    resolved ones carry, read without resolving anything.
    """

    __slots__ = ("_cursor", "_full", "_last", "_lock", "stored")

    def __init__(self, records: Iterable[ViewRecord]) -> None:
        self.stored: list[ViewRecord] = list(records)
        self._full: list[int] = []
        seq: int | None = None
        for at, record in enumerate(self.stored):
            if not record.delta:
                self._full.append(at)
            elif seq is None or record.seq != seq + 1:
                raise _missing_before(record)
            seq = record.seq
        self._cursor: tuple[int, _Fold] | None = None
        self._last: tuple[int, ViewRecord] | None = None
        self._lock = threading.Lock()  # pages read a run's views on worker threads

    def __len__(self) -> int:
        return len(self.stored)

    @overload
    def __getitem__(self, index: int) -> ViewRecord: ...
    @overload
    def __getitem__(self, index: slice) -> list[ViewRecord]: ...
    def __getitem__(self, index: int | slice) -> ViewRecord | list[ViewRecord]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self.stored)))]
        at = index + len(self.stored) if index < 0 else index
        if not 0 <= at < len(self.stored):
            raise IndexError(f"view record {index} of {len(self.stored)}")
        with self._lock:
            last = self._last
            if last is not None and last[0] == at:
                return last[1]
            found = self._resolve(at)
            self._last = (at, found)
            return found

    def _resolve(self, at: int) -> ViewRecord:
        base = self._full[bisect_right(self._full, at) - 1]  # the chain was checked
        cursor = self._cursor
        if cursor is not None and base <= cursor[0] <= at:
            start, fold = cursor[0] + 1, cursor[1]  # reading forward: only the new deltas
        else:
            start, fold = base, _Fold()
        for record in self.stored[start : at + 1]:
            fold.advance(record)
        self._cursor = (at, fold)
        return fold.resolved(self.stored[at])

    def __iter__(self) -> Iterator[ViewRecord]:
        fold = _Fold()
        for record in self.stored:
            yield fold.apply(record)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ResolvedRecords):
            return self.stored == other.stored
        if isinstance(other, list):
            return list(self) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a list: unhashable like one

    def __repr__(self) -> str:
        return f"ResolvedRecords({len(self.stored)} records)"


def stored_records(views: Sequence[ViewRecord]) -> Sequence[ViewRecord]:
    """Records to read metadata from (turn, attempt, agent, model, hash, summary) without
    resolving views: :attr:`ResolvedRecords.stored`, or ``views`` itself."""
    return views.stored if isinstance(views, ResolvedRecords) else views


def _resolve_one(record: ViewRecord, previous: Iterable[ViewRecord]) -> ViewRecord:
    if not record.delta:
        return record
    fold = _Fold()
    for r in previous:
        fold.apply(r)
    return fold.apply(record)


def _messages(record: ViewRecord, by_id: Mapping[str, TranscriptEntry]) -> list[TranscriptEntry]:
    out: list[TranscriptEntry] = []
    for entry_id in record.order:
        replacement = record.replaced.get(entry_id)
        if replacement is not None:
            out.append(entry_from_dict(replacement))
            continue
        entry = by_id.get(entry_id)
        if entry is None:
            raise LoviaError(
                f"view of turn {record.turn} uses entry {entry_id!r}, which is "
                "not in the transcript given",
                hint="Pass the session history together with the run's entries.",
            )
        out.append(entry)
    out.extend(entry_from_dict(e) for e in record.injected)
    return out


def rebuild_messages(
    record: ViewRecord, by_id: Mapping[str, TranscriptEntry], previous: Iterable[ViewRecord] = ()
) -> list[TranscriptEntry]:
    """Rebuild a view's messages (incl. injected) from the transcript (``by_id``)."""
    return _messages(_resolve_one(record, previous), by_id)


def _head_objects(
    full: ViewRecord,
) -> tuple[tuple[ToolSpec, ...], ModelSettings, OutputSchema | None]:
    settings = dict(full.settings)
    if isinstance(settings.get("stop"), list):
        settings["stop"] = tuple(settings["stop"])
    schema = full.output_schema
    tools = tuple(
        ToolSpec(
            name=t["name"],
            description=t["description"],
            parameters=t["parameters"],
            strict=t.get("strict", False),
        )
        for t in full.tools
    )
    output_schema = (
        None
        if schema is None
        else OutputSchema(
            name=schema["name"], schema=schema["schema"], strict=schema.get("strict", True)
        )
    )
    return tools, ModelSettings(**settings), output_schema


def _request(full: ViewRecord, by_id: Mapping[str, TranscriptEntry]) -> ModelRequest:
    tools, settings, output_schema = _head_objects(full)
    return ModelRequest(
        system=full.system,
        messages=_messages(full, by_id),
        tools=tools,
        settings=settings,
        output_schema=output_schema,
    )


def _by_id(
    entries: Mapping[str, TranscriptEntry] | Iterable[TranscriptEntry],
) -> Mapping[str, TranscriptEntry]:
    """Entries by id; a mapping (already by id) is used as is."""
    if isinstance(entries, Mapping):
        return cast(Mapping[str, TranscriptEntry], entries)
    return {e.id: e for e in entries}


def rebuild_request(
    record: ViewRecord,
    transcript_entries: Mapping[str, TranscriptEntry] | Iterable[TranscriptEntry],
    previous_records: Iterable[ViewRecord] = (),
) -> ModelRequest:
    """The exact :class:`ModelRequest` of one model call (entries, or entries by id)."""
    return _request(_resolve_one(record, previous_records), _by_id(transcript_entries))


def rebuild_view(
    records: Iterable[ViewRecord], transcript_entries: Iterable[TranscriptEntry]
) -> list[ModelRequest]:
    """Every model call's request of a run, from all its records in stored order."""
    by_id = _by_id(transcript_entries)
    return [_request(full, by_id) for full in resolve_records(records)]


def verify(
    record: ViewRecord,
    transcript_entries: Iterable[TranscriptEntry],
    previous_records: Iterable[ViewRecord] = (),
) -> bool:
    """True when the rebuilt request hashes to ``record.hash``."""
    request = rebuild_request(record, transcript_entries, previous_records)
    return ViewHasher().hash(request) == record.hash


def view_records(checkpoint_records: Iterable[Any]) -> list[ViewRecord]:
    """The view records among a stored run's checkpoint records (kind ``"view"``)."""
    return [ViewRecord.from_data(r.data) for r in checkpoint_records if r.kind == "view"]
