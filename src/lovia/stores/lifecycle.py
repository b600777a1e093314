"""A run's life, derived from the store: the one definition every surface uses.

| state | stored status | holder | means |
|---|---|---|---|
| ``running`` | ``running`` | a live lease | a worker is on it now |
| ``interrupted`` | ``running`` | none, or a gone process | its worker died or stalled: resume |
| ``paused`` | ``paused`` | — | waiting for approval of ``waits_on`` |
| ``completed`` | ``completed`` | — | finished with an answer |
| ``failed`` | ``failed`` | — | ended by an error (``error_type``) |
| ``cancelled`` | ``cancelled`` | — | its cancel token was set (``cancelled_by`` says why) |
| ``dead_lettered`` | ``failed`` | — | a task queue gave up on it (``dead_letter`` says why) |

``interrupted`` is never stored: a dead worker cannot write it. It is derived from the
lease: a ``running`` run whose lease expired unrenewed, or whose lease holder is a
process on this host that no longer exists (checked by pid and the pid's start time, so
a reused pid does not pass for the holder). The CLI (``lovia runs``/``show``), ``lovia
web`` and :func:`list_lives` all ask :func:`life_of` / :func:`state_of`.

Attempts: every lease grant is an attempt (:class:`~lovia.stores.records.AttemptRecord`,
written when it starts, saying how the one before it ended); :func:`attempts_of` folds
them, the last one ending as the run's row says. A run stored by an older lovia (no
attempt records) has one attempt, from its summary row.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, cast, get_args

from .base import CANCEL_REQUEST_KEY, Checkpointer, RunInfo, RunQueries, RunSnapshot, cancel_mark
from .records import ApprovalRecord, AttemptRecord, FailedCallRecord, read_records

__all__ = [
    "CANCEL_REQUEST_KEY",
    "CANCEL_SAID",
    "DEAD_LETTER_KEY",
    "HOST",
    "STATES",
    "Attempt",
    "Life",
    "State",
    "attempts_of",
    "cancel_request",
    "holder_gone",
    "life_of",
    "list_lives",
    "owner_id",
    "process_gone",
    "process_started",
    "this_process",
    "request_cancel",
    "state_of",
]

State = Literal[
    "running", "interrupted", "paused", "completed", "failed", "cancelled", "dead_lettered"
]
STATES: tuple[str, ...] = get_args(State)
HOST = socket.gethostname()
SCAN_LIMIT = 10_000
"""Rows scanned when a filter is on a derived state (``interrupted``, ``cancelled``)."""
DEAD_LETTER_KEY = "dead_letter"
"""``RunInfo.extra`` key of a run a task queue dead-lettered: ``{"deliveries", "kills",
"last_error", "reason", "queue", "at"}`` (its status is ``failed``)."""


logger = logging.getLogger("lovia.stores")

# -- processes ------------------------------------------------------------------------


def _stat(pid: int) -> tuple[str, str] | None:
    """``(state letter, start time in clock ticks)`` of ``pid`` (Linux), else None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()  # the name may hold spaces and ")"
    return (fields[0], fields[19]) if len(fields) > 19 else None


def process_started(pid: int) -> str:
    """The start time of ``pid`` as the kernel counts it ("" where unknown): with the pid
    it names one process, even after the pid is reused."""
    stat = _stat(pid)
    return "" if stat is None else stat[1]


_this_process: tuple[int, str] = (0, "")


def this_process() -> tuple[int, str]:
    """This process's pid and start time: read from the kernel once per process (a
    forked child has another pid, so it reads its own)."""
    global _this_process
    pid = os.getpid()
    if _this_process[0] != pid:
        _this_process = (pid, process_started(pid))
    return _this_process


def owner_id() -> str:
    """A lease owner id for this process: ``host:pid:pid_start:random``."""
    pid, started = this_process()
    return f"{HOST}:{pid}:{started or '-'}:{secrets.token_hex(4)}"


def _parse_owner(owner: str) -> tuple[str, int, str]:
    """``(host, pid, pid start)`` of an owner id (older ids have no start: "")."""
    parts = owner.split(":")
    if len(parts) < 3 or not parts[1].isdigit():
        return "", 0, ""
    started = parts[2] if len(parts) >= 4 and parts[2] != "-" else ""
    return parts[0], int(parts[1]), started


def process_gone(host: str, pid: int, started: str = "") -> bool:
    """True when ``pid`` on ``host`` is this host's and no longer runs: no such process, a
    zombie (killed, not yet reaped), or another process that reused the pid."""
    if host != HOST or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # it exists (another user's)
    stat = _stat(pid)
    if stat is None:
        return False
    return stat[0] in ("Z", "X") or (bool(started) and stat[1] != started)


def holder_gone(owner: str) -> bool:
    """True when the lease ``owner`` is a process on this host that no longer runs."""
    host, pid, started = _parse_owner(owner)
    return process_gone(host, pid, started)


# -- attempts -------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class Attempt:
    """One lease grant of a run."""

    attempt: int
    started_at: float
    ended_at: float | None = None
    how: str | None = None
    """``finished``/``failed``/``paused``/``cancelled`` (its worker said so), ``killed`` /
    ``lease_lost`` (the next attempt or the lease said so); None while it runs."""
    host: str = ""
    pid: int = 0
    trace_id: str | None = None
    span_id: str | None = None
    end_estimated: bool = False
    """The worker died without saying when: ``ended_at`` is its last recorded entry."""

    @property
    def active_s(self) -> float:
        end = self.ended_at if self.ended_at is not None else time.time()
        return max(0.0, end - self.started_at)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["active_s"] = self.active_s
        return out


def _trace(text: str | None) -> tuple[str | None, str | None]:
    if not text or ":" not in text:
        return None, None
    trace_id, span_id = text.split(":", 1)
    return trace_id, span_id


def _last_activity(snapshot: RunSnapshot | None, start: float, until: float | None) -> float:
    """The newest entry time in ``[start, until)``: when a killed attempt last did work."""
    if snapshot is None:
        return start
    stamps = [e.ts for e in snapshot.entries() if e.ts >= start and (until is None or e.ts < until)]
    return max([start, *stamps])


def _implicit(info: RunInfo, state: State) -> list[Attempt]:
    """A run of an older lovia (no attempt records): one attempt from its row."""
    how = {"completed": "finished", "running": None, "interrupted": "lease_lost"}.get(state, state)
    return [
        Attempt(
            attempt=1,
            started_at=info.started_at,
            ended_at=info.ended_at,
            how=how,
            trace_id=info.trace_id,
            span_id=info.span_id,
        )
    ]


def attempts_of(
    info: RunInfo, snapshot: RunSnapshot | None, state: State, holder: str | None = None
) -> list[Attempt]:
    """The run's attempts, oldest first (see the module docs)."""
    starts = [
        r
        for r in (read_records(snapshot, ("attempt",)) if snapshot is not None else ())
        if isinstance(r, AttemptRecord)
    ]
    if not starts:
        return _implicit(info, state)
    out: list[Attempt] = []
    for i, start in enumerate(starts):
        trace_id, span_id = _trace(start.trace)
        a = Attempt(
            attempt=start.attempt,
            started_at=start.at,
            host=start.host,
            pid=start.pid,
            trace_id=trace_id,
            span_id=span_id,
        )
        nxt = starts[i + 1] if i + 1 < len(starts) else None
        if nxt is not None:  # the attempt after it said how it ended
            a.how = nxt.previous or "lease_lost"
            a.ended_at = nxt.previous_ended_at
            if a.ended_at is None:
                a.ended_at, a.end_estimated = _last_activity(snapshot, start.at, nxt.at), True
        elif state == "interrupted":
            gone = process_gone(start.host, start.pid, start.pid_started) or (
                holder is not None and holder_gone(holder)
            )
            a.how = "killed" if gone else "lease_lost"
            a.ended_at, a.end_estimated = _last_activity(snapshot, start.at, None), True
        elif state != "running":  # the last attempt ended the run: the row says how
            a.ended_at, a.how = info.ended_at, _how(state)
        out.append(a)
    return out


def _how(state: State) -> str:
    return "finished" if state == "completed" else state


# -- the state ------------------------------------------------------------------------


def state_of(info: RunInfo, holder: str | None) -> tuple[State, str]:
    """The run's state and a sentence saying why, from its row and its lease holder.

    ``holder``: the owner of the run's unexpired lease (``store.lease_holder``), None
    when nobody holds it.
    """
    status = info.status
    if status == "running":
        if holder is None:
            return "interrupted", "no worker holds its lease (it expired unrenewed)"
        if holder_gone(holder):
            return "interrupted", f"its worker {holder} is gone (the process no longer runs)"
        return "running", f"worker {holder}"
    if status == "failed" and info.error_type == "RunCancelled":
        return "cancelled", _cancelled_by(info)  # stored by a lovia without "cancelled"
    if status == "cancelled":
        if holder is not None and not holder_gone(holder) and cancel_request(info) is not None:
            return "cancelled", (  # asked from outside: its worker has not stopped yet
                f"{_cancelled_by(info)}; stopping: worker {holder} still runs it and stops "
                "it at its next lease renewal"
            )
        return "cancelled", _cancelled_by(info)
    if status == "paused":
        waits = _waits_on(info)
        names = ", ".join(f"{w.get('tool', '?')} ({w.get('call_id', '?')})" for w in waits)
        return "paused", f"waiting for approval of {names or 'tool calls'}"
    if status == "failed" and isinstance(info.extra.get(DEAD_LETTER_KEY), dict):
        return "dead_lettered", _dead_letter_detail(info)
    if status == "failed":
        return "failed", f"{info.error_type or 'error'}: {info.extra.get('error') or ''}".rstrip(
            ": "
        )
    return "completed", info.finish_reason or "stop"


def _dead_letter_detail(info: RunInfo) -> str:
    dead = cast("dict[str, Any]", info.extra[DEAD_LETTER_KEY])
    n, kills = dead.get("deliveries", "?"), dead.get("kills")
    text = f"dead-lettered after {n} {'delivery' if n == 1 else 'deliveries'}"
    if kills:
        text += f", {kills} lost {'worker' if kills == 1 else 'workers'}"
    return f"{text}: {dead.get('last_error') or dead.get('reason') or 'no error recorded'}"


def _cancelled_by(info: RunInfo) -> str:
    return f"cancelled: {info.extra.get('cancelled_by') or 'its cancel token was set'}"


def _waits_on(info: RunInfo) -> list[dict[str, Any]]:
    raw: Any = info.extra.get("waiting_on") or []
    if not isinstance(raw, list):
        return []
    items = cast("list[Any]", raw)  # stored JSON: checked item by item
    return [cast("dict[str, Any]", w) for w in items if isinstance(w, dict)]


@dataclass(slots=True, kw_only=True)
class Life:
    """A run's state, why, and its attempts, approvals and failed model calls."""

    state: State
    detail: str
    holder: str | None = None
    waits_on: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    cancelled_by: str | None = None
    attempts: list[Attempt] = field(default_factory=list[Attempt])
    approvals: list[ApprovalRecord] = field(default_factory=list[ApprovalRecord])
    failed_calls: list[FailedCallRecord] = field(default_factory=list[FailedCallRecord])
    wall_s: float | None = None
    """First attempt's start to the run's end (now, while it is not finished)."""
    active_s: float | None = None
    """Time some worker was on it: the attempts' durations summed."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "detail": self.detail,
            "holder": self.holder,
            "waits_on": self.waits_on,
            "cancelled_by": self.cancelled_by,
            "attempts": [a.to_dict() for a in self.attempts],
            "approvals": [asdict(a) for a in self.approvals],
            "failed_calls": [asdict(f) for f in self.failed_calls],
            "wall_s": self.wall_s,
            "active_s": self.active_s,
        }


def _times(info: RunInfo, state: State, attempts: Sequence[Attempt]) -> tuple[float, float]:
    """Wall time (first start to the end; to now while unfinished, interrupted included)
    and active time (the attempts' durations summed)."""
    finished = info.ended_at is not None and state not in ("running", "interrupted")
    end = info.ended_at if finished and info.ended_at is not None else time.time()
    return max(0.0, end - info.started_at), sum(a.active_s for a in attempts)


def build_life(info: RunInfo, holder: str | None, snapshot: RunSnapshot | None = None) -> Life:
    """The run's :class:`Life` from its row, lease holder and (for attempts, approvals
    and failed calls) its stored records."""
    state, detail = state_of(info, holder)
    life = Life(state=state, detail=detail, holder=holder if state == "running" else None)
    if state == "paused":
        life.waits_on = _waits_on(info)
    if state == "cancelled":
        life.cancelled_by = str(info.extra.get("cancelled_by") or "") or None
    if snapshot is not None:
        life.attempts = attempts_of(info, snapshot, state, holder)
        for r in read_records(snapshot, ("approval", "failed_call")):
            if isinstance(r, ApprovalRecord):
                life.approvals.append(r)
            elif isinstance(r, FailedCallRecord):
                life.failed_calls.append(r)
    else:
        life.attempts = _implicit(info, state)
    life.wall_s, life.active_s = _times(info, state, life.attempts)
    return life


async def life_of(db: RunQueries, info: RunInfo, snapshot: RunSnapshot | None = None) -> Life:
    """:func:`build_life` with the lease holder read from ``db`` (only for a running run,
    or one cancelled by a request its worker may not have acted on yet)."""
    asked = cancel_mark(info) is not None
    holder = await db.lease_holder(info.run_id) if info.status == "running" or asked else None
    return build_life(info, holder, snapshot)


async def list_lives(
    db: RunQueries,
    *,
    state: str | None = None,
    limit: int = 50,
    session_id: str | None = None,
    agent: str | None = None,
    top_level: bool = False,
    parent_run_id: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> list[tuple[RunInfo, Life]]:
    """Runs newest first with their :class:`Life`; ``state`` filters on the derived state
    (``interrupted`` lists what needs resuming); ``labels``: runs carrying all of them."""
    stored: tuple[str | None, ...] = (state,)
    if state in ("running", "interrupted"):
        stored = ("running",)
    elif state in ("cancelled", "failed", "dead_lettered"):
        stored = ("cancelled", "failed")  # older stores kept cancellations as failed
    scan = limit if state is None or stored == (state,) else SCAN_LIMIT
    rows: list[RunInfo] = []
    for status in stored:
        rows += await db.list_runs(
            session_id=session_id,
            agent=agent,
            status=status,
            limit=scan,
            top_level=top_level,
            parent_run_id=parent_run_id,
            **({"labels": labels} if labels else {}),  # stores from before labels: no kwarg
        )
    rows.sort(key=lambda r: r.started_at, reverse=True)
    out: list[tuple[RunInfo, Life]] = []
    for info in rows:
        life = await life_of(db, info)
        if state is None or life.state == state:
            out.append((info, life))
        if len(out) >= limit:
            break
    return out


# -- cancel requests ------------------------------------------------------------------


def cancel_request(info: RunInfo) -> str | None:
    """The reason of the cancel request stored on the run, if it carries one."""
    mark = cancel_mark(info)
    return None if mark is None else str(mark.get("reason") or "cancelled")


CANCEL_SAID: Mapping[str, str] = {
    "queued": "cancelled before it started: no worker will start it",
    "running": "cancelled: no worker will start it again; a worker running it now stops "
    "it at its next lease renewal (within a third of LOVIA_LEASE_TTL_S)",
    "paused": "cancelled while it waited for approval",
    "requested": "a cancel was requested before: it stands (its worker stops the run at its "
    "next lease renewal, if it still runs)",
    "ended": "already finished: nothing to cancel",
}
"""What a cancel request did, by what :func:`request_cancel` returns (the CLI and the
web app say the same)."""


async def request_cancel(db: Checkpointer, run_id: str, reason: str = "cancelled") -> str:
    """Store a cancel request for ``run_id``; return the state the run was in.

    A run not stored yet (still queued) gets a ``cancelled`` row at once; a stored run
    that has not finished is marked ``cancelled`` (a worker running it right now sets its
    cancel token at its next lease renewal and ends it with its own row). A run already
    cancelled by a request is left as it is (``"requested"``), and so is a finished one
    (completed, failed, cancelled by its caller, dead-lettered): ``"ended"``.
    """
    snap = await db.load(run_id)
    now = time.time()
    mark = {"reason": reason, "at": now}
    if snap is not None and cancel_request(snap.info) is not None:
        return "requested"  # asked before: its worker stops it (or has), nothing to add
    if snap is None:
        info = RunInfo(run_id=run_id, agent="?", status="cancelled", started_at=now)
        before = "queued"
    elif snap.info.status in ("running", "paused"):
        info, before = replace(snap.info, extra=dict(snap.info.extra)), snap.info.status
        info.status = "cancelled"
    else:
        return "ended"
    info.ended_at, info.finish_reason = now, "cancelled"
    info.extra.update({CANCEL_REQUEST_KEY: mark, "cancelled_by": reason})
    await db.finish(info, None)
    logger.info("run %s: cancel requested (%s; it was %s)", run_id, reason, before)
    return before
