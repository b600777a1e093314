"""Store protocols: Session (conversation history) and Checkpoint (run progress).

| | Session | Checkpoint |
|---|---|---|
| answers | what was said in this conversation so far? | how far did this run get? |
| key | ``session_id`` (yours) | ``run_id`` (unique per checkpointer) |
| holds | one segment per completed run | the run that may need resuming |
| written | once, when the run completes | after each model turn and tool result |

Both are append-only. A checkpoint is a sequence of small :class:`CheckpointRecord`
deltas (entries, tool-ledger changes, view records, run state), so its storage grows
with the number of entries, never with turns squared. Every record carries a schema
``version``; a store refuses records newer than it understands.

Fencing: every lease grant carries a fencing token, larger than any earlier grant on
that run (tokens survive release and expiry). A write given ``fence=token`` (``append``,
``finish``, ``append_segment``) happens only while ``token`` is the run's current lease
token, checked in the same transaction as the write; otherwise it raises
:class:`~lovia.errors.LeaseLost` and changes nothing. A completed run is never leased again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from ..errors import LeaseLost, SchemaVersionError, StoreError, UserError
from ..transcript import TranscriptEntry, entry_from_dict

__all__ = [
    "SCHEMA_VERSION",
    "CheckpointRecord",
    "Checkpointer",
    "Checkpoints",
    "Leases",
    "ReadOnlyStore",
    "RecordKind",
    "RunInfo",
    "RunEnd",
    "RunQueries",
    "RunSnapshot",
    "RunStatus",
    "RunWatch",
    "RunWatcher",
    "SessionStore",
    "Store",
    "Tombstone",
    "cancel_mark",
    "cancel_requests",
    "check_version",
    "damaged",
    "end_run",
    "lease_lost",
    "prune_statuses",
    "renew_many",
    "start_run",
]

SCHEMA_VERSION = 1
"""Version of persisted records. Bump on any incompatible change and keep a corpus."""

RunStatus = Literal["running", "completed", "failed", "paused", "cancelled"]
"""The status a run's worker stores; ``interrupted`` is derived, never stored (see
:mod:`lovia.stores.lifecycle`)."""

RecordKind = Literal[
    "entries", "ledger", "view", "state", "attempt", "approval", "failed_call", "usage", "reprice"
]


class CheckpointRecord(BaseModel):
    """One append-only delta of a run's checkpoint.

    - ``entries``: ``data = {"entries": [entry dicts]}`` appended to the transcript
    - ``ledger``: ``data = {"call_id", "status": started|completed|failed, "key"}``
    - ``view``: ``data = ViewRecord dict`` for one model call
    - ``state``: ``data = {"turn", "usage", "agent", ...}`` run counters after a turn
    - ``attempt``: one lease grant's start or end (see :mod:`lovia.stores.records`)
    - ``approval``: a human's (or a policy's) decision on a tool call
    - ``failed_call``: a model call that failed after its retries
    - ``usage``: one model call's usage and price (what ``lovia reprice`` reprices)
    - ``reprice``: ``lovia reprice`` changed the run's cost (before, after, prices)
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    version: int = SCHEMA_VERSION
    kind: RecordKind
    data: dict[str, Any] = Field(default_factory=dict[str, Any])


@dataclass(slots=True, kw_only=True)
class RunInfo:
    """One row of ``lovia runs``: a run's identity and outcome."""

    run_id: str
    agent: str
    session_id: str | None = None
    status: RunStatus = "running"
    finish_reason: str | None = None
    error_type: str | None = None
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    started_at: float = 0.0
    ended_at: float | None = None
    trace_id: str | None = None
    span_id: str | None = None
    history_len: int = 0
    """Session entries that preceded this run (resume reloads exactly these)."""
    version: int = SCHEMA_VERSION
    extra: dict[str, Any] = field(default_factory=dict[str, Any])
    parent_run_id: str | None = None
    """Set for a child run (an agent run as a tool): the run whose tool call started it."""
    parent_call_id: str | None = None
    """The parent's tool call that started this child run."""


@dataclass(slots=True, kw_only=True)
class RunSnapshot:
    """A run as stored: its info, its records in order, and its result when finished."""

    info: RunInfo
    records: list[CheckpointRecord]
    result: dict[str, Any] | None = None

    def entries(self) -> list[TranscriptEntry]:
        """The run's transcript entries, in the order they were checkpointed.

        Raises :class:`StoreError` naming the record when a stored entry does not load.
        """
        out: list[TranscriptEntry] = []
        for seq, record in enumerate(self.records, 1):  # records are numbered from 1
            if record.kind != "entries":
                continue
            try:
                out.extend(entry_from_dict(e) for e in record.data.get("entries", ()))
            except (ValueError, TypeError, AttributeError) as exc:
                what = f"checkpoint record {seq} of run {self.info.run_id}"
                raise damaged(what, f"an entry in it does not load ({exc})") from None
        return out


PRUNABLE = ("completed", "failed", "cancelled")
PRUNED_KEY = "records_pruned_at"
"""``RunInfo.extra`` key set when a run's checkpoint records were pruned."""
CANCEL_REQUEST_KEY = "cancel_requested"
"""``RunInfo.extra`` key of a run cancelled by request (``lovia cancel``, the web app, a
queue's ``cancel``): ``{"reason", "at"}``. A queue worker never starts a run that carries
it, and the worker running it stops at its next lease renewal."""
UNPRICED_KEY = "unpriced"
"""``RunInfo.extra`` key: model calls of the run (children included) whose cost is
unknown; when set, ``cost_usd`` is a lower bound and surfaces show the cost as unknown."""
LABELS_KEY = "labels"
"""``RunInfo.extra`` key: the run's attribution labels (``{"tenant": "acme"}``);
``list_runs(labels=...)`` filters on them."""
DEPS_KEY = "deps_key"
"""``RunInfo.extra`` key: the ``deps_key`` the run's deps were built from (a task queue's
``deps(deps_key)`` factory), so a queue's sweep re-queues the run with it. Stored only
here: never on spans, metrics or logs."""
USAGE_MISSING_KEY = "usage_missing"
"""``RunInfo.extra`` key, ``True`` when a provider reported no usage for a call of the run:
its token counts are incomplete and surfaces show them as unknown."""


RESUMABLE_SQL = (
    "NOT (status IN ('failed', 'cancelled') AND EXISTS (SELECT 1 FROM {records} AS rl "
    "WHERE rl.run_id = {runs}.run_id AND rl.kind = 'ledger'))"
)
"""The prune filter that keeps a failed or cancelled run with a tool ledger (it can still
resume, and its ledger is what stops a resume from running a completed tool again)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Tombstone:
    """What is left of a run that ``prune`` deleted: that it existed, how it ended, when
    it was pruned (``lovia replay``/``show`` say "pruned", not "no run")."""

    run_id: str
    status: str
    ended_at: float | None
    pruned_at: float


def prune_statuses(status: str | None) -> tuple[str, ...]:
    """The statuses ``prune(status=...)`` deletes; only finished runs can be pruned."""
    if status is None:
        return PRUNABLE
    if status not in PRUNABLE:
        raise UserError(
            f"cannot prune runs with status {status!r}",
            hint="Only finished runs are pruned: status 'completed', 'failed' or 'cancelled' "
            "(running and paused runs may still resume).",
        )
    return (status,)


def check_version(version: int, what: str) -> None:
    """Fail fast on records written by a newer lovia."""
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{what} has schema version {version}; this lovia understands up to {SCHEMA_VERSION}",
            hint="Upgrade lovia to read this store (pip install -U lovia).",
        )


def damaged(what: str, problem: str) -> StoreError:
    """The error for a stored value that does not decode: what it is and what is wrong."""
    return StoreError(
        f"{what} is damaged: {problem}",
        hint="It was changed outside lovia or the store is corrupt. Delete the run "
        "(store.delete_run(run_id)) or restore the store from a backup; other runs are "
        "unaffected.",
    )


def lease_lost(run_id: str, fence: int) -> LeaseLost:
    """The error when ``fence`` is no longer the run's lease token (a write is refused)."""
    return LeaseLost(
        f"run {run_id}: lease token {fence} is stale: another worker took the run over, "
        "so this worker's writes are refused",
        hint="This worker stalled past its lease (LOVIA_LEASE_TTL_S) and another worker "
        "now owns the run; this one stopped without writing. No action is needed.",
    )


Lease = tuple[str, str, int]
"""``(run_id, owner, fence)`` of one lease to renew."""


class _RenewsMany(Protocol):
    async def renew_many(self, leases: Sequence[Lease], ttl_s: float) -> set[str]: ...


async def renew_many(cp: Leases, leases: Sequence[Lease], ttl_s: float) -> set[str]:
    """Renew several leases; the run ids NOT renewed (a later grant replaced them).

    Calls the store's optional ``renew_many`` (one statement / transaction for all of
    them; SQLite, PostgreSQL and memory have it), else ``renew`` once per lease. An
    exception from the store propagates: none of the leases is then known renewed.
    """
    if getattr(cp, "renew_many", None) is not None:
        return await cast("_RenewsMany", cp).renew_many(leases, ttl_s)
    return {
        run_id for run_id, owner, fence in leases if not await cp.renew(run_id, owner, fence, ttl_s)
    }


def cancel_mark(info: RunInfo) -> dict[str, Any] | None:
    """The cancel request stored on a run's row (``{"reason", "at"}``), if the row says
    ``cancelled`` and carries one."""
    mark: Any = info.extra.get(CANCEL_REQUEST_KEY)
    if info.status != "cancelled" or not isinstance(mark, dict):
        return None
    return cast("dict[str, Any]", mark)  # stored JSON: its fields are read with checks


class _CancelRequests(Protocol):
    async def cancel_requests(self, run_ids: Sequence[str]) -> dict[str, Any]: ...


async def cancel_requests(cp: RunQueries, run_ids: Sequence[str]) -> dict[str, Any]:
    """The cancel requests stored on the rows of ``run_ids``: run id -> ``{"reason",
    "at"}``, for the runs whose row says ``cancelled`` with a request.

    Calls the store's optional ``cancel_requests`` (one query for all of them; SQLite,
    PostgreSQL and memory have it), else loads each run.
    """
    if getattr(cp, "cancel_requests", None) is not None:
        return await cast("_CancelRequests", cp).cancel_requests(run_ids)
    found: dict[str, Any] = {}
    for run_id in run_ids:
        snap = await cp.load(run_id)
        mark = None if snap is None else cancel_mark(snap.info)
        if mark is not None:
            found[run_id] = mark
    return found


@dataclass(frozen=True, slots=True)
class RunEnd:
    """Everything the end of a run writes: its last records, its outcome, its session
    segment and the release of its lease, for :func:`end_run`."""

    info: RunInfo
    result: dict[str, Any] | None
    fence: int | None = None
    records: Sequence[CheckpointRecord] = ()
    """Records noted since the last append, written before the outcome."""
    session_id: str | None = None
    """When set, the run's segment (``entries``) is written to this session of the same
    store, once, under the same fence."""
    entries: Sequence[TranscriptEntry] = ()
    release: str | None = None
    """The lease owner whose lease is freed after the writes (None: keep the lease)."""


class _EndsRuns(Protocol):
    async def end_run(self, end: RunEnd) -> int: ...


async def end_run(cp: Checkpointer, end: RunEnd) -> int:
    """Write a run's end; the bytes of its records.

    Calls the store's optional ``end_run`` (SQLite and PostgreSQL have it: everything in
    one transaction, one round trip; memory: everything encoded and fenced before any of
    it is written), else ``append``, ``finish``, ``append_segment`` and ``release`` in
    that order (``append_segment`` when ``session_id`` is set: the store must then also
    be a :class:`SessionStore`). Either way a write refused by the fence raises
    :class:`~lovia.errors.LeaseLost`; with ``end_run`` nothing is written then, nor when
    something of the end cannot be stored.
    """
    if getattr(cp, "end_run", None) is not None:
        return await cast("_EndsRuns", cp).end_run(end)
    run_id = end.info.run_id
    size = await cp.append(run_id, end.records, fence=end.fence) if end.records else 0
    await cp.finish(end.info, end.result, fence=end.fence)
    if end.session_id is not None:
        session = cast("SessionStore", cp)
        await session.append_segment(end.session_id, run_id, end.entries, fence=end.fence)
    if end.release is not None:
        await cp.release(run_id, end.release)
    return size


class _StartsRuns(Protocol):
    async def start_run(
        self, info: RunInfo, records: Sequence[CheckpointRecord], *, fence: int | None = None
    ) -> int: ...


async def start_run(
    cp: Checkpointer,
    info: RunInfo,
    records: Sequence[CheckpointRecord],
    *,
    fence: int | None = None,
) -> int:
    """Write a new run's row and its first records; the records' bytes.

    Calls the store's optional ``start_run`` (SQLite and PostgreSQL have it: one
    transaction, one round trip; a stale ``fence`` writes neither), else ``begin`` then
    ``append``. Either way a write refused by the fence raises
    :class:`~lovia.errors.LeaseLost`, and a run that already exists keeps its row (the
    records are appended to it).
    """
    if getattr(cp, "start_run", None) is not None:
        return await cast("_StartsRuns", cp).start_run(info, records, fence=fence)
    await cp.begin(info)
    return await cp.append(info.run_id, records, fence=fence) if records else 0


@runtime_checkable
class Checkpoints(Protocol):
    """Writing a run's progress, keyed by ``run_id``: append-only deltas (what the loop
    writes after each turn and tool result), and deleting finished runs."""

    async def begin(self, info: RunInfo) -> None:
        """Create the run (no-op when it exists: resume)."""
        ...

    async def append(
        self, run_id: str, records: Sequence[CheckpointRecord], *, fence: int | None = None
    ) -> int:
        """Append deltas in order; return bytes written. ``fence``: see the module docs."""
        ...

    async def load(self, run_id: str) -> RunSnapshot | None:
        """The run as stored (resume folds its records), or None for an unknown run."""
        ...

    async def finish(
        self, info: RunInfo, result: dict[str, Any] | None, *, fence: int | None = None
    ) -> None:
        """Mark the run completed / failed / paused with its result."""
        ...

    async def delete_run(self, run_id: str) -> None: ...

    async def prune(
        self,
        older_than_s: float,
        *,
        status: str | None = None,
        run_id: str | None = None,
        records_only: bool = False,
        force: bool = False,
    ) -> int:
        """Delete finished runs that ended more than ``older_than_s`` ago; return count.

        ``status``: only ``completed``, ``failed`` or ``cancelled`` runs (default all; running
        and paused runs are never pruned: they may resume). ``run_id``: only that run.
        ``records_only``: keep each run's summary row (``lovia runs``) and drop its
        checkpoint records; its ``extra["records_pruned_at"]`` says when.

        A failed run whose tool ledger holds a call is kept (records included) unless
        ``force``: it can still resume, and without its ledger a resume would run its
        completed tools again. A run deleted whole leaves a :class:`Tombstone`
        (``tombstone(run_id)`` on the bundled stores).
        """
        ...


@runtime_checkable
class Leases(Protocol):
    """One worker per ``run_id``: leases with fencing tokens (see the module docs)."""

    async def acquire(self, run_id: str, owner: str, ttl_s: float) -> int | None:
        """Grant a new lease; its fencing token (>= 1), or None when the lease is held by
        another owner (unexpired) or the run is completed."""
        ...

    async def renew(self, run_id: str, owner: str, fence: int, ttl_s: float) -> bool:
        """Extend the lease granted with ``fence``; False when a later grant replaced it.

        A store may also define ``renew_many(leases, ttl_s) -> set[str]`` (optional,
        see :func:`renew_many`): the same for many ``(run_id, owner, fence)`` in one call,
        returning the run ids it could not renew. A process renews all its runs' leases
        on one store with it, once per third of the TTL."""
        ...

    async def release(self, run_id: str, owner: str) -> None:
        """Free the lease if ``owner`` holds it (its token is kept)."""
        ...

    async def lease_holder(self, run_id: str) -> str | None:
        """The owner of the unexpired lease on ``run_id``, if any."""
        ...


@runtime_checkable
class RunQueries(Protocol):
    """Reading recorded runs: what ``lovia runs``, replay and the web app ask a store.

    Every method only reads. ``lease_holder`` tells a live ``running`` run from one
    whose worker is gone (see :mod:`lovia.stores.lifecycle`).
    """

    async def load(self, run_id: str) -> RunSnapshot | None:
        """The run's info, its records in order and its result; None for an unknown run."""
        ...

    async def list_runs(
        self,
        *,
        session_id: str | None = None,
        agent: str | None = None,
        status: str | None = None,
        limit: int = 50,
        parent_run_id: str | None = None,
        top_level: bool = False,
        labels: Mapping[str, str] | None = None,
    ) -> list[RunInfo]:
        """Newest first; ``parent_run_id``: the child runs of that run; ``top_level``:
        only runs that are not child runs; ``labels``: runs carrying every one of these
        attribution labels (``{"tenant": "acme"}``)."""
        ...

    async def find_run_by_trace(self, trace_id: str) -> RunInfo | None:
        """The newest run recorded with this OpenTelemetry trace id (``lovia replay``)."""
        ...

    async def lease_holder(self, run_id: str) -> str | None:
        """The owner of the unexpired lease on ``run_id``, if any."""
        ...


@runtime_checkable
class Checkpointer(Checkpoints, Leases, RunQueries, Protocol):
    """Run progress, keyed by ``run_id``: all three of :class:`Checkpoints`,
    :class:`Leases` and :class:`RunQueries` (what the run loop needs)."""


@runtime_checkable
class SessionStore(Protocol):
    """Conversation history, keyed by ``session_id``; one segment per completed run."""

    async def load_session(self, session_id: str) -> list[TranscriptEntry]: ...

    async def append_segment(
        self,
        session_id: str,
        run_id: str,
        entries: Sequence[TranscriptEntry],
        *,
        fence: int | None = None,
    ) -> bool:
        """Write a run's segment once; False (and no change) if it already exists.

        ``fence``: write only while it is ``run_id``'s lease token (this store's leases).
        """
        ...


@runtime_checkable
class ReadOnlyStore(RunQueries, Protocol):
    """A store that is only read: :class:`RunQueries`, each run's session history, its
    ``url`` and ``aclose()``. Enough for ``lovia runs``, replay, and ``lovia web``
    without ``--agent``; an export or an archive can serve them without leases or
    writes (see the docs page on sessions)."""

    url: str

    async def load_session(self, session_id: str) -> list[TranscriptEntry]:
        """Every segment's entries of the session, in order (``[]`` when none)."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class Store(Checkpointer, SessionStore, ReadOnlyStore, Protocol):
    """A store that is both a :class:`Checkpointer` and a :class:`SessionStore` (every
    built-in store is), with ``url`` and ``aclose()``."""

    url: str

    async def aclose(self) -> None: ...


class RunWatch(Protocol):
    """Interest in one run's changes (see :class:`RunWatcher`)."""

    @property
    def listening(self) -> bool:
        """True while the store pushes changes (False: a waiter should poll)."""
        ...

    async def listen(self) -> bool:
        """Reconnect to the store's notifications if needed; True while they arrive."""
        ...

    async def wait(self, timeout_s: float) -> bool:
        """Wait for word that the run may have changed (True) or ``timeout_s`` (False)."""
        ...


@runtime_checkable
class RunWatcher(Protocol):
    """A store that can say when a run ends instead of being polled (PostgreSQL's
    ``LISTEN``/``NOTIFY``). Enter the watch *before* reading the run, so an end that
    lands between the read and the wait is not missed; re-read after every wake-up."""

    def watch_run(self, run_id: str) -> AbstractAsyncContextManager[RunWatch]: ...
