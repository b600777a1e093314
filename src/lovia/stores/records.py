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

:func:`to_checkpoint` builds the envelope of a typed record, :func:`read_record` the
typed record of an envelope; the JSON written is the v1 format, key for key.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal, assert_never

from pydantic import BaseModel, ConfigDict

from ..transcript import TranscriptEntry, entry_from_dict, entry_to_dict
from ..usage import Usage
from .base import SCHEMA_VERSION, CheckpointRecord, RecordKind, RunSnapshot, damaged

if TYPE_CHECKING:
    from ..view.record import ViewRecord

__all__ = [
    "ApprovalRecord",
    "AttemptEnd",
    "CallUsageRecord",
    "AttemptRecord",
    "EntriesRecord",
    "FailedCallRecord",
    "LedgerRecord",
    "LedgerStatus",
    "Record",
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

_PLAIN: dict[type, RecordKind] = {
    AttemptRecord: "attempt",
    ApprovalRecord: "approval",
    FailedCallRecord: "failed_call",
    RepriceRecord: "reprice",
}
"""Records stored as their fields (None values left out)."""


class _Ledger(BaseModel):
    model_config = ConfigDict(frozen=True)

    call_id: str
    status: LedgerStatus
    key: str = ""
    child_usage: dict[str, int | float | bool] | None = None


class _State(BaseModel):
    model_config = ConfigDict(frozen=True)

    turn: int
    usage: dict[str, int | float | bool] = {}
    agent: str | None = None
    last_input_tokens: int | None = None
    trace: str | None = None


class _Attempt(BaseModel):
    model_config = ConfigDict(frozen=True)

    attempt: int
    at: float
    host: str = ""
    pid: int = 0
    pid_started: str = ""
    fence: int = 0
    trace: str | None = None
    previous: AttemptEnd | None = None
    previous_ended_at: float | None = None


class _Approval(BaseModel):
    model_config = ConfigDict(frozen=True)

    call_id: str
    tool: str
    decision: Literal["approved", "denied"]
    actor: str
    at: float
    reason: str | None = None


class _FailedCall(BaseModel):
    model_config = ConfigDict(frozen=True)

    turn: int
    attempt: int
    view_hash: str
    error_type: str
    message: str
    status: int | None = None
    retries: int = 0
    provider: str = ""
    model: str = ""
    at: float = 0.0


class _CallUsage(BaseModel):
    model_config = ConfigDict(frozen=True)

    turn: int
    purpose: str = "main"
    provider: str = ""
    model: str = ""
    usage: dict[str, int | float | bool] = {}
    source: str | None = None


class _Reprice(BaseModel):
    model_config = ConfigDict(frozen=True)

    at: float
    prices: str = ""
    own_before: float
    own_after: float
    cost_before: float
    cost_after: float
    unpriced_before: int = 0
    unpriced_after: int = 0


def to_checkpoint(record: Record) -> CheckpointRecord:
    """The stored envelope of ``record`` (v1 JSON keys)."""
    if isinstance(record, EntriesRecord):
        kind, data = "entries", {"entries": [entry_to_dict(e) for e in record.entries]}
    elif isinstance(record, LedgerRecord):
        kind, data = "ledger", _ledger_data(record)
    elif isinstance(record, StateRecord):
        kind, data = "state", _state_data(record)
    elif isinstance(record, ViewNote):
        kind, data = "view", record.view.to_data()
    elif isinstance(record, CallUsageRecord):
        kind = "usage"
        data = {k: v for k, v in asdict(record).items() if v is not None}
        data["usage"] = record.usage.to_dict()
    else:
        kind = _PLAIN[type(record)]
        data = {k: v for k, v in asdict(record).items() if v is not None}
    return CheckpointRecord.model_construct(version=SCHEMA_VERSION, kind=kind, data=data)


def _ledger_data(record: LedgerRecord) -> dict[str, Any]:
    data: dict[str, Any] = {"call_id": record.call_id, "status": record.status, "key": record.key}
    if record.child_usage is not None:
        data["child_usage"] = record.child_usage.to_dict()
    return data


def _state_data(record: StateRecord) -> dict[str, Any]:
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


def read_record(record: CheckpointRecord) -> Record:
    """The typed record stored in ``record``.

    Raises ``ValueError`` (pydantic's ``ValidationError`` included), ``TypeError`` or
    ``KeyError`` when its data does not fit its kind, and
    :class:`~lovia.errors.SchemaVersionError` for a view record from a newer lovia; the
    caller names the record in a :class:`~lovia.errors.StoreError`.
    """
    data: Mapping[str, Any] = record.data
    kind = record.kind
    if kind == "entries":
        entries: Sequence[dict[str, Any]] = data.get("entries", ())
        return EntriesRecord(tuple(entry_from_dict(e) for e in entries))
    if kind == "ledger":
        ledger = _Ledger.model_validate(data)
        child = None if ledger.child_usage is None else Usage.from_dict(ledger.child_usage)
        return LedgerRecord(
            call_id=ledger.call_id, status=ledger.status, key=ledger.key, child_usage=child
        )
    if kind == "state":
        state = _State.model_validate(data)
        return StateRecord(
            turn=state.turn,
            usage=Usage.from_dict(state.usage),
            agent=state.agent,
            last_input_tokens=state.last_input_tokens,
            tokens_recorded="last_input_tokens" in data,
            trace=state.trace or None,
        )
    if kind == "view":
        from ..view.record import ViewRecord  # stores sit below view: see the layer table

        return ViewNote(ViewRecord.from_data(data))
    if kind == "attempt":
        return AttemptRecord(**_Attempt.model_validate(data).model_dump())
    if kind == "approval":
        return ApprovalRecord(**_Approval.model_validate(data).model_dump())
    if kind == "failed_call":
        return FailedCallRecord(**_FailedCall.model_validate(data).model_dump())
    if kind == "usage":
        call = _CallUsage.model_validate(data)
        return CallUsageRecord(
            turn=call.turn,
            purpose=call.purpose,
            provider=call.provider,
            model=call.model,
            usage=Usage.from_dict(call.usage),
            source=call.source,
        )
    if kind == "reprice":
        return RepriceRecord(**_Reprice.model_validate(data).model_dump())
    assert_never(kind)


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
