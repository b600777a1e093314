"""Checkpoint writes and resume: the loop's only contact with the checkpointer.

Phases note small append-only records; the drivers write them at fixed commit points
(:func:`commit`), everything a phase boundary produced in one append. Resuming rebuilds
the run's progress (turn counter, usage, tool ledger) and transcript from those records;
what the crashed worker had completed is never redone.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from .. import events as ev
from ..stores.base import (
    DEPS_KEY,
    LABELS_KEY,
    UNPRICED_KEY,
    USAGE_MISSING_KEY,
    CheckpointRecord,
    RunEnd,
    RunInfo,
    RunSnapshot,
    RunStatus,
    end_run,
    start_run,
)
from ..stores.records import LedgerRecord, StateRecord, read_records
from ..transcript import ToolCallEntry, ToolResultEntry, TranscriptEntry
from ..usage import Usage
from .lease import stop_heartbeat
from .state import Progress, RunParams, RunState

__all__ = [
    "commit",
    "end_released",
    "entries_in",
    "finish_info",
    "restore",
    "rides_with_tools",
    "run_info",
    "store_name",
    "write_progress",
]


def store_name(state: RunState) -> str:
    cp = state.checkpointer
    url = getattr(cp, "url", "") or type(cp).__name__
    return str(url).split(":", 1)[0]


async def commit(
    state: RunState, kind: str = "progress", *, begin: RunInfo | None = None
) -> AsyncIterator[ev.Event]:
    """A commit point: write every record noted since the last one in ONE append, emit
    ``CheckpointSaved``, and end the run with the store's error if the write failed.

    Only the drivers call it, at fixed points (see ``docs/sessions.md``): after the run's
    start (``begin``: the new run's row, in the same transaction), after a model answer,
    before a tool that is not idempotent starts, at the end of the tool phase, and before
    a pause or a stop. Phases only note records.
    """
    if state.checkpointer is None or not (state.runtime.pending or begin is not None):
        state.runtime.pending.clear()
        return
    saved = await write_progress(state, kind, begin)
    yield saved
    if saved.error is not None:
        raise saved.error


def entries_in(records: Sequence[CheckpointRecord]) -> int:
    """How many transcript entries ``records`` carry (what ``CheckpointSaved`` reports)."""
    return sum(len(r.data["entries"]) for r in records if r.kind == "entries")


async def end_released(
    state: RunState,
    info: RunInfo,
    result: dict[str, Any] | None,
    session_id: str | None = None,
    entries: Sequence[TranscriptEntry] = (),
) -> int:
    """Write the run's end in one store transaction that also releases its lease: the
    records noted since the last commit, its row, and with ``session_id`` its session
    segment (``entries``); the records' bytes. The heartbeat stops first; the lease counts
    as released once the write succeeded."""
    cp = state.checkpointer
    assert cp is not None
    records, state.runtime.pending = state.runtime.pending, []
    end = RunEnd(
        info=info, result=result, fence=state.runtime.lease.token, records=records,
        session_id=session_id, entries=entries, release=state.runtime.lease.owner,
    )  # fmt: skip
    await stop_heartbeat(state)
    written = await end_run(cp, end)
    state.runtime.lease.owner = None
    return written


async def write_progress(
    state: RunState, kind: str, begin: RunInfo | None = None
) -> ev.CheckpointSaved:
    """Write the noted records in one append (``begin``: the new run's row with them,
    in one transaction where the store can).

    Returns the ``CheckpointSaved`` to emit; when its ``error`` is set the write failed
    (:func:`commit` raises it once the event is out).
    """
    cp = state.checkpointer
    assert cp is not None
    records, state.runtime.pending = state.runtime.pending, []
    entries = entries_in(records)
    t0 = time.perf_counter()
    written, error = 0, None
    try:
        fence = state.runtime.lease.token
        if begin is not None:
            written = await start_run(cp, begin, records, fence=fence)
            state.runtime.row = True
        else:
            written = await cp.append(state.run_id, records, fence=fence)
    except Exception as exc:  # the failed write is still reported (its own span), then raised
        error = exc
    return ev.CheckpointSaved(
        **state.base(),
        entries=entries,
        bytes=written,
        kind=kind,
        store=store_name(state),
        duration_s=time.perf_counter() - t0,
        error=error,
    )


def rides_with_tools(state: RunState, calls: Sequence[ToolCallEntry]) -> bool:
    """True when the model answer just noted may go out with the tool phase's first
    commit (one append instead of two).

    That commit comes before any tool starts and before anything that depends on the
    answer being stored (the ledger of the first call to start, a refused call's result,
    the stop at a budget), and nothing between the two waits on user code: every call is
    to a known tool that needs no approval (an approval policy may take long, and a pause
    for approval commits the answer anyway). A crash before that commit is then a crash
    during the answer's own write: resume asks the model again, and no tool had run.
    """
    active = state.active
    if not calls or active is None:
        return False
    for call in calls:
        t = active.tools.get(call.name)
        if t is None or t.requires_approval:
            return False
    return True


def run_info(state: RunState, status: RunStatus = "running") -> RunInfo:
    agent = state.active.agent.name if state.active else state.params.agent.name
    usage = state.total_usage()
    link = state.params.parent
    trace = state.first_trace or state.trace_ids  # the run's row keeps its first trace
    return RunInfo(
        run_id=state.run_id,
        agent=agent,
        session_id=state.params.session_id,
        status=status,
        turns=state.progress.turn,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cost_usd=usage.cost_usd,
        started_at=state.started_wall,
        trace_id=trace[0] if trace else None,
        span_id=trace[1] if trace else None,
        history_len=len(state.history),
        extra=_usage_extra(state.params, usage),
        parent_run_id=link.run_id if link is not None else None,
        parent_call_id=link.call_id if link is not None else None,
    )


def _usage_extra(params: RunParams, usage: Usage) -> dict[str, Any]:
    """``RunInfo.extra``: the first agent, the labels, the deps key, and what of the usage
    is unknown (unknown is not zero: ``unpriced`` calls make ``cost_usd`` a lower bound,
    ``usage_missing`` says a provider reported no tokens)."""
    extra: dict[str, Any] = {"first_agent": params.agent.name}
    if params.labels:
        extra[LABELS_KEY] = dict(params.labels)
    if params.deps_key is not None:
        extra[DEPS_KEY] = params.deps_key
    if usage.unpriced:
        extra[UNPRICED_KEY] = usage.unpriced
    if usage.missing:
        extra[USAGE_MISSING_KEY] = True
    return extra


def finish_info(
    state: RunState, status: RunStatus, finish_reason: str, error_type: str | None = None
) -> RunInfo:
    info = run_info(state, status)
    if state.active is not None:  # for `lovia web`'s model filter
        info.extra["model"] = f"{state.active.provider.name}:{state.active.provider.model}"
    info.finish_reason = finish_reason
    info.error_type = error_type
    info.ended_at = time.time()
    return info


def restore(snapshot: RunSnapshot) -> Progress:
    """Fold a run's ledger and state records into its progress (StoreError naming a
    damaged record); its entries are ``snapshot.entries()``, its views ``view_records``."""
    progress = Progress()
    links: list[str] = []
    for record in read_records(snapshot, ("ledger", "state")):
        if isinstance(record, LedgerRecord):
            progress.ledger[record.call_id] = record.status
            if record.child_usage is not None:  # an agent run as a tool: it rolls up
                progress.children[record.call_id] = record.child_usage
        elif isinstance(record, StateRecord):
            progress.turn = record.turn
            progress.usage = record.usage
            progress.agent = record.agent or progress.agent
            if record.tokens_recorded:
                progress.last_input_tokens = record.last_input_tokens
            if record.trace:
                links.append(record.trace)
    if snapshot.info.trace_id and snapshot.info.span_id:
        links.append(f"{snapshot.info.trace_id}:{snapshot.info.span_id}")
    progress.trace_links = tuple(links)
    return progress


def open_calls(entries: list[TranscriptEntry]) -> list[ToolCallEntry]:
    """Tool calls of the latest model response that have no result yet."""
    latest = next((e for e in reversed(entries) if isinstance(e, ToolCallEntry)), None)
    if latest is None:
        return []
    answered = {e.call_id for e in entries if isinstance(e, ToolResultEntry)}
    return [
        e
        for e in entries
        if isinstance(e, ToolCallEntry)
        and e.message_id == latest.message_id
        and e.turn == latest.turn
        and e.call_id not in answered
    ]
