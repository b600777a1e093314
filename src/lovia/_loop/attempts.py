"""Attempts: every lease grant of a run is recorded — when, which worker, how it ended.

The worker writes its attempt's record right after it took the lease (with the run's
first write for a new run, at once for a resume). How the attempt before it ended goes
in the same record (``previous``): what the run's row said (``paused``, ``failed``,
``cancelled``, with its ``ended_at``) or, when the row still says ``running``,
``killed`` (the old holder's process is gone) or ``lease_lost`` (its lease expired).
The last attempt's end is the run's row itself, so ending a run costs no extra write.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from ..errors import ApprovalPending, RunCancelled
from ..stores.base import RunInfo, RunSnapshot
from ..stores.lifecycle import CANCEL_REQUEST_KEY, HOST, process_gone, this_process
from ..stores.records import AttemptEnd, AttemptRecord, read_records
from .state import RunState

__all__ = ["adopt_snapshot", "lifecycle_extra", "note_attempt_start", "reopened"]

_ENDING = ("error", "hint", "waiting_on", "cancelled_by", CANCEL_REQUEST_KEY)
"""What a row says about how the run stopped (``lifecycle_extra`` and the failure's
``error``/``hint``): gone from the row while the run runs again."""


def _starts(snapshot: RunSnapshot) -> list[AttemptRecord]:
    return [r for r in read_records(snapshot, ("attempt",)) if isinstance(r, AttemptRecord)]


def adopt_snapshot(state: RunState, snapshot: RunSnapshot | None) -> None:
    """A resumed run keeps its first attempt's start time and trace; number this one."""
    if snapshot is None:
        return
    info = snapshot.info
    if info.started_at:
        state.started_wall = info.started_at
    if info.trace_id and info.span_id:
        state.first_trace = (info.trace_id, info.span_id)
    starts = _starts(snapshot)
    # a run stored without attempt records had one attempt (its summary row)
    state.attempt = (starts[-1].attempt if starts else 1) + 1


def _previous(
    state: RunState, snapshot: RunSnapshot | None
) -> tuple[AttemptEnd | None, float | None]:
    """How the attempt before this one ended, and when (None: unknown)."""
    if snapshot is None:
        return None, None
    info = snapshot.info
    if info.status == "running":  # it never ended on its own
        if state.runtime.lease.took_over is not None:
            return "killed", None
        starts = _starts(snapshot)
        last = starts[-1] if starts else None
        if last is not None and process_gone(last.host, last.pid, last.pid_started):
            return "killed", None
        return "lease_lost", None
    if info.status == "failed" and info.error_type == "RunCancelled":
        return "cancelled", info.ended_at  # stored by a lovia without "cancelled"
    how: AttemptEnd = "finished" if info.status == "completed" else info.status
    return how, info.ended_at


def note_attempt_start(state: RunState, snapshot: RunSnapshot | None) -> None:
    """Queue this attempt's record (the caller writes it; nothing without a store)."""
    if state.checkpointer is None:
        return
    pid, pid_started = this_process()
    previous, ended = _previous(state, snapshot)
    state.note(
        AttemptRecord(
            attempt=state.attempt,
            at=state.started_wall if snapshot is None else time.time(),
            host=HOST,
            pid=pid,
            pid_started=pid_started,
            fence=state.runtime.lease.token or 0,
            trace=":".join(state.trace_ids) if state.trace_ids else None,
            previous=previous,
            previous_ended_at=ended,
        )
    )


def lifecycle_extra(state: RunState, error: BaseException, extra: dict[str, Any]) -> None:
    """What the run's row says about how it stopped: the calls a paused run waits on,
    who cancelled a cancelled one, how many attempts it took."""
    extra["attempts"] = state.attempt
    if isinstance(error, ApprovalPending):
        extra["waiting_on"] = [{"call_id": c.call_id, "tool": c.name} for c in error.pending]
    elif isinstance(error, RunCancelled):
        extra["cancelled_by"] = (
            error.cancelled_by or state.ctx.cancel_token.reason or "its cancel token was set"
        )
        request = state.runtime.lease.cancel_request
        if request is not None:  # a stored request stopped it: the row keeps it (no queue
            extra[CANCEL_REQUEST_KEY] = request  # worker starts the run again)


def reopened(info: RunInfo, attempt: int) -> RunInfo:
    """The row of a run resumed after its last attempt ended it (failed, cancelled or
    paused): running again. How that attempt ended stays in this attempt's record."""
    extra = {k: v for k, v in info.extra.items() if k not in _ENDING}
    extra["attempts"] = attempt
    return replace(
        info, status="running", finish_reason=None, error_type=None, ended_at=None, extra=extra
    )
