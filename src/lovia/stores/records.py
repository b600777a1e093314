"""Typed checkpoint records: what the loop writes and what resume and replay read back.

A :class:`~lovia.stores.base.CheckpointRecord` is the stored envelope (``version``,
``kind``, a JSON object ``data``); stores keep ``data`` as opaque JSON. This module is
the one place that knows what ``data`` holds for each kind:

| kind | typed record | built by |
|---|---|---|
| ``entries`` | :class:`EntriesRecord` | each new transcript entry |
| ``ledger`` | :class:`LedgerRecord` | a tool call started / completed / failed |
| ``state`` | :class:`StateRecord` | run counters after a model turn, a handoff, a resume |
| ``view`` | :class:`ViewNote` | the view of one model call |
| ``attempt`` | :class:`AttemptRecord` | a lease grant (and how the one before ended) |
| ``approval`` | :class:`ApprovalRecord` | a decision on a tool call that needed approval |
| ``failed_call`` | :class:`FailedCallRecord` | a model call that failed after its retries |
| ``usage`` | :class:`CallUsageRecord` | a model call that returned: usage, cost, price source |
| ``reprice`` | :class:`RepriceRecord` | ``lovia reprice`` changed the run's cost |

Each kind is described once, in :data:`RECORD_TYPES`: its stored name, its typed class,
and how it is encoded and decoded (validation included). :func:`to_checkpoint` builds
the envelope of a typed record, :func:`read_record` the typed record of an envelope, and
the stores check stored kinds against the same table; the JSON written is the v1
format, key for key.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Generic, Literal, NotRequired, TypeVar, cast

from pydantic import TypeAdapter
from typing_extensions import TypedDict

from ..transcript import TranscriptEntry, entry_from_dict, entry_to_dict
from ..usage import Usage
from .base import SCHEMA_VERSION, CheckpointRecord, RecordKind, RunSnapshot, damaged

if TYPE_CHECKING:
    from ..view.record import ViewRecord

__all__ = [
    "ApprovalRecord",
    "AttemptEnd",
    "AttemptRecord",
    "CallUsageRecord",
    "EntriesRecord",
    "FailedCallRecord",
    "LedgerRecord",
    "LedgerStatus",
    "BY_KIND",
    "RECORD_TYPES",
    "Record",
    "RecordType",
    "RepriceRecord",
    "StateRecord",
    "ViewNote",
    "read_record",
    "read_records",
    "to_checkpoint",
]

LedgerStatus = Literal["started", "completed", "failed"]
"""A tool call's progress: ``started`` before it runs, then ``completed`` or ``failed``."""


@dataclass(frozen=True, slots=True)
class EntriesRecord:
    """Transcript entries appended to the run, in order."""

    entries: tuple[TranscriptEntry, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerRecord:
    """A change of one tool call's status (what resume must not redo)."""

    call_id: str
    status: LedgerStatus
    key: str
    """The call's idempotency key, ``{run_id}:{call_id}``."""
    child_usage: Usage | None = None
    """For an agent run as a tool, once it finished: the child run's total usage."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StateRecord:
    """The run's counters after a turn, a handoff or a resume."""

    turn: int
    usage: Usage
    agent: str | None
    """The active agent (lovia always writes it; None keeps the earlier record's)."""
    last_input_tokens: int | None = None
    """Input tokens of the run's last model call (None: not reported)."""
    tokens_recorded: bool = True
    """False for a record that does not carry ``last_input_tokens`` (it keeps the value
    of the records before it); only handoff and resume records of an older lovia."""
    trace: str | None = None
    """``trace_id:span_id`` of the worker that resumed the run (resume records only)."""


@dataclass(frozen=True, slots=True)
class ViewNote:
    """The view record of one model call (``lovia replay`` rebuilds the request from it)."""

    view: ViewRecord


AttemptEnd = Literal["finished", "failed", "paused", "cancelled", "killed", "lease_lost"]
"""How an attempt ended: ``finished``/``failed``/``paused``/``cancelled`` (the run's row
said so when the next attempt began), ``killed`` (its worker's process was gone) or
``lease_lost`` (its lease expired unrenewed: a stall, or a death on another host)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptRecord:
    """One lease grant of the run, written when it starts.

    It carries the worker (host, pid, the pid's start time against pid reuse), its
    fencing token and trace, and how the attempt before it ended (``previous``, at
    ``previous_ended_at`` when known): a killed worker cannot say so itself, and the run
    row that says how a paused or failed attempt ended is rewritten by the next one.
    The last attempt's end is the run row's (status, ``ended_at``).
    """

    attempt: int
    at: float
    host: str = ""
    pid: int = 0
    pid_started: str = ""
    fence: int = 0
    trace: str | None = None
    """``trace_id:span_id`` of the attempt's root span (None: no telemetry)."""
    previous: AttemptEnd | None = None
    previous_ended_at: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRecord:
    """A decision on a tool call that needed approval: who, when, why."""

    call_id: str
    tool: str
    decision: Literal["approved", "denied"]
    actor: str
    """``cli:USER``, ``web:IDENTITY``, ``api:CALLER`` or ``policy:NAME``."""
    at: float
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FailedCallRecord:
    """A model call that failed after its retries; its view record is stored beside it
    (same turn and attempt, hash ``view_hash``), so it can be replayed and re-sent."""

    turn: int
    attempt: int
    view_hash: str
    error_type: str
    message: str
    """The provider's message, redacted (API keys masked) and cut."""
    status: int | None = None
    retries: int = 0
    provider: str = ""
    model: str = ""
    at: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class CallUsageRecord:
    """One model call that returned: what it used and what it was priced at, so a later
    ``lovia reprice`` can price it again from the usage itself."""

    turn: int
    purpose: str
    provider: str
    model: str
    """The model priced (the response's model when it named one)."""
    usage: Usage
    source: str | None = None
    """What priced it (``genai-prices==X``, ``overrides@<hash>``); None: unpriced."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RepriceRecord:
    """``lovia reprice`` changed the run's cost (the transcript is never rewritten)."""

    at: float
    prices: str
    """The prices applied (``price_table_version()``)."""
    own_before: float
    own_after: float
    """The run's own calls' cost before and after (child runs have their own record)."""
    cost_before: float
    cost_after: float
    """The run's stored cost (children included) before and after."""
    unpriced_before: int = 0
    unpriced_after: int = 0


Record = (
    EntriesRecord
    | LedgerRecord
    | StateRecord
    | ViewNote
    | AttemptRecord
    | ApprovalRecord
    | FailedCallRecord
    | CallUsageRecord
    | RepriceRecord
)
"""One checkpoint record, by kind."""

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class RecordType(Generic[R]):
    """One record kind: its stored name, its typed class and the two halves of its codec.

    ``encode`` gives the stored ``data`` (a JSON object) of a record; ``decode`` validates
    stored ``data`` and builds the typed record, raising ``ValueError``, ``TypeError`` or
    ``KeyError`` when it does not fit.
    """

    kind: RecordKind
    cls: type[R]
    encode: Callable[[R], dict[str, Any]]
    decode: Callable[[Mapping[str, Any]], R]


def plain(kind: RecordKind, cls: type[R]) -> RecordType[R]:
    """The record type of a dataclass of scalar fields stored as its fields, None values
    left out, and validated on read against the dataclass's own field types (no second
    description)."""
    adapter: list[TypeAdapter[R]] = []  # built on first read
    names = tuple(f.name for f in fields(cast("Any", cls)))

    def encode(record: R) -> dict[str, Any]:
        values = ((name, getattr(record, name)) for name in names)
        return {name: value for name, value in values if value is not None}

    def decode(data: Mapping[str, Any]) -> R:
        if not adapter:
            adapter.append(TypeAdapter(cls))
        return adapter[0].validate_python(dict(data))

    return RecordType(kind, cls, encode, decode)


def _encode_entries(record: EntriesRecord) -> dict[str, Any]:
    return {"entries": [entry_to_dict(e) for e in record.entries]}


def _decode_entries(data: Mapping[str, Any]) -> EntriesRecord:
    entries: Sequence[dict[str, Any]] = data.get("entries", ())
    return EntriesRecord(tuple(entry_from_dict(e) for e in entries))


class _Ledger(TypedDict):
    call_id: str
    status: LedgerStatus
    key: NotRequired[str]
    child_usage: NotRequired[dict[str, int | float | bool] | None]


_LEDGER = TypeAdapter(_Ledger)


def _encode_ledger(record: LedgerRecord) -> dict[str, Any]:
    data: dict[str, Any] = {"call_id": record.call_id, "status": record.status, "key": record.key}
    if record.child_usage is not None:
        data["child_usage"] = record.child_usage.to_dict()
    return data


def _decode_ledger(data: Mapping[str, Any]) -> LedgerRecord:
    ledger = _LEDGER.validate_python(data)
    child = ledger.get("child_usage")
    return LedgerRecord(
        call_id=ledger["call_id"],
        status=ledger["status"],
        key=ledger.get("key", ""),
        child_usage=None if child is None else Usage.from_dict(child),
    )


class _State(TypedDict):
    turn: int
    usage: NotRequired[dict[str, int | float | bool]]
    agent: NotRequired[str | None]
    last_input_tokens: NotRequired[int | None]
    trace: NotRequired[str | None]


_STATE = TypeAdapter(_State)


def _encode_state(record: StateRecord) -> dict[str, Any]:
    data: dict[str, Any] = {
        "turn": record.turn,
        "usage": record.usage.to_dict(),
        "agent": record.agent,
    }
    if record.tokens_recorded:
        data["last_input_tokens"] = record.last_input_tokens
    if record.trace is not None:
        data["trace"] = record.trace
    return data


def _decode_state(data: Mapping[str, Any]) -> StateRecord:
    state = _STATE.validate_python(data)
    return StateRecord(
        turn=state["turn"],
        usage=Usage.from_dict(state.get("usage", {})),
        agent=state.get("agent"),
        last_input_tokens=state.get("last_input_tokens"),
        tokens_recorded="last_input_tokens" in data,
        trace=state.get("trace") or None,
    )


class _CallUsage(TypedDict):
    turn: int
    purpose: NotRequired[str]
    provider: NotRequired[str]
    model: NotRequired[str]
    usage: NotRequired[dict[str, int | float | bool]]
    source: NotRequired[str | None]


_CALL_USAGE = TypeAdapter(_CallUsage)


def _encode_usage(record: CallUsageRecord) -> dict[str, Any]:
    data: dict[str, Any] = {
        "turn": record.turn,
        "purpose": record.purpose,
        "provider": record.provider,
        "model": record.model,
        "usage": record.usage.to_dict(),
    }
    if record.source is not None:
        data["source"] = record.source
    return data


def _decode_usage(data: Mapping[str, Any]) -> CallUsageRecord:
    call = _CALL_USAGE.validate_python(data)
    return CallUsageRecord(
        turn=call["turn"],
        purpose=call.get("purpose", "main"),
        provider=call.get("provider", ""),
        model=call.get("model", ""),
        usage=Usage.from_dict(call.get("usage", {})),
        source=call.get("source"),
    )


def _decode_view(data: Mapping[str, Any]) -> ViewNote:
    from ..view.record import ViewRecord  # stores sit below view: see the layer table

    return ViewNote(ViewRecord.from_data(data))


RECORD_TYPES: tuple[RecordType[Any], ...] = (
    RecordType("entries", EntriesRecord, _encode_entries, _decode_entries),
    RecordType("ledger", LedgerRecord, _encode_ledger, _decode_ledger),
    RecordType("view", ViewNote, lambda note: note.view.to_data(), _decode_view),
    RecordType("state", StateRecord, _encode_state, _decode_state),
    plain("attempt", AttemptRecord),
    plain("approval", ApprovalRecord),
    plain("failed_call", FailedCallRecord),
    RecordType("usage", CallUsageRecord, _encode_usage, _decode_usage),
    plain("reprice", RepriceRecord),
)
"""Every record kind, once: the stored name, the typed class, encode and decode. To add
a kind, add its name to :data:`~lovia.stores.base.RecordKind`, its dataclass above
(and to :data:`Record`) and its row here; a test keeps the three in step."""

BY_KIND: dict[str, RecordType[Any]] = {t.kind: t for t in RECORD_TYPES}
BY_CLASS: dict[type, RecordType[Any]] = {t.cls: t for t in RECORD_TYPES}


def to_checkpoint(record: Record) -> CheckpointRecord:
    """The stored envelope of ``record`` (v1 JSON keys).

    Built by the model's validator: pydantic-core does it in half the instructions of
    ``model_construct``'s Python loop (and the encoders give valid envelopes)."""
    kind = BY_CLASS[type(record)]
    envelope = {"version": SCHEMA_VERSION, "kind": kind.kind, "data": kind.encode(record)}
    built = CheckpointRecord.__pydantic_validator__.validate_python(envelope)
    return cast("CheckpointRecord", built)


def read_record(record: CheckpointRecord) -> Record:
    """The typed record stored in ``record``.

    Raises ``ValueError`` (pydantic's ``ValidationError`` included), ``TypeError`` or
    ``KeyError`` when its data does not fit its kind, and
    :class:`~lovia.errors.SchemaVersionError` for a view record from a newer lovia; the
    caller names the record in a :class:`~lovia.errors.StoreError`.
    """
    return BY_KIND[record.kind].decode(record.data)


def read_records(snapshot: RunSnapshot, kinds: Collection[RecordKind]) -> Iterator[Record]:
    """The typed records of ``kinds`` in a stored run, in order.

    Raises :class:`~lovia.errors.StoreError` naming the first record that does not load.
    """
    for seq, stored in enumerate(snapshot.records, 1):  # records are numbered from 1
        if stored.kind not in kinds:
            continue
        try:
            record = read_record(stored)
        except (KeyError, TypeError, ValueError) as exc:
            what = f"checkpoint record {seq} of run {snapshot.info.run_id}"
            raise damaged(what, f"its {stored.kind} data does not load ({exc!r})") from None
        yield record
