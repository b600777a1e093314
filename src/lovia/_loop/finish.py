"""Run end: output guardrails → one transaction: last records, checkpoint marked
complete, session segment, lease released.

When the session lives in the run's store, the segment is written in the same
transaction as the completed row, so a run is never completed without its segment.
With a session in another store the order is fixed: a crash after the checkpoint is
complete but before the session write is finished by resubmitting the run_id (the
stored result is returned and the segment written once).
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from .. import errors
from .. import events as ev
from ..guardrails import Guardrail
from ..result import RunResult
from ..stores.base import SessionStore
from .checkpoint import end_released, entries_in, finish_info, store_name
from .outcomes import Final
from .state import RunState

__all__ = [
    "call_close",
    "close_plugins",
    "finish",
    "result_of",
    "run_guardrails",
    "write_session",
]

logger = logging.getLogger("lovia.loop")


async def run_guardrails(
    state: RunState, kind: str, guards: Sequence[Guardrail], value: Any
) -> AsyncIterator[ev.Event]:
    """Run guardrails in order; a trip raises GuardrailTripped after its events.

    A check is one of the run's waits, like a tool: a cancel or the run's deadline
    interrupts a check that hangs (a moderation call to a stalled server)."""
    assert state.active is not None and state.runtime.watch is not None
    for guard in guards:
        yield ev.GuardrailStarted(**state.base(), kind=kind, guardrail=guard.name)
        result = await state.runtime.watch.wait(guard.check(state.ctx, value))
        yield ev.GuardrailCompleted(
            **state.base(),
            kind=kind,
            guardrail=guard.name,
            tripped=result.tripped,
            reason=result.reason,
        )
        if result.tripped:
            yield ev.GuardrailTriggered(
                **state.base(),
                kind=kind,
                guardrail=guard.name,
                reason=result.reason,
            )
            raise errors.GuardrailTripped(
                f"{kind} guardrail {guard.name!r} tripped: {result.reason}",
                hint="The run ended without an answer and nothing was written to the session.",
                guardrail=guard.name,
                reason=result.reason,
                kind=kind,
            )


def result_payload(state: RunState, final: Final) -> dict[str, Any]:
    assert state.active is not None and state.active.output is not None
    return {
        "output": state.active.output.dump(final.output),
        "output_raw": final.raw,
        "usage": state.total_usage().to_dict(),
        "turns": state.progress.turn,
        "finish_reason": final.finish_reason,
        "final_agent": state.active.agent.name,
        **_child_payload(state),
    }


def _child_payload(state: RunState) -> dict[str, Any]:
    """Own and per-child usage, stored only for a run that had child runs."""
    if not state.child_count():
        return {}
    return {
        "own_usage": state.progress.usage.to_dict(),
        "child_usage": {k: u.to_dict() for k, u in state.child_usage().items()},
    }


async def finish(state: RunState, final: Final) -> AsyncIterator[ev.Event]:
    assert state.active is not None
    guards = state.active.output_guardrails
    if guards:  # (no generator for none: every run passes here)
        async for event in run_guardrails(state, "output", guards, final.output):
            yield event
    state.undelivered = list(state.ctx.mailbox.drain())
    cp = state.checkpointer
    if cp is None:
        if _session_of(state) is not None:  # (no generator for none)
            async for event in write_session(state, state.new_entries()):
                yield event
        return
    together = state.params.session_id is not None and _same(state.session, cp)
    async for event in _write_end(state, final, together):
        yield event
    if not together:
        async for event in write_session(state, state.new_entries()):
            yield event
    if state.params.prune_records:
        # records are optionally deleted after success: the summary row stays
        await cp.prune(0.0, run_id=state.run_id, records_only=True)


async def _write_end(state: RunState, final: Final, together: bool) -> AsyncIterator[ev.Event]:
    """The run's end in one store transaction: the records noted since the last commit,
    the completed row with its result, the session segment (when the session lives in
    the same store) and the release of the lease."""
    info = finish_info(state, "completed", final.finish_reason)
    info.extra["attempts"] = state.attempt  # its end is the row's: status, ended_at
    session_id = state.params.session_id if together else None
    entries = state.new_entries() if together else ()
    store = store_name(state)
    n = entries_in(state.runtime.pending)
    t0 = time.perf_counter()
    try:
        written = await end_released(state, info, result_payload(state, final), session_id, entries)
    except Exception as exc:  # the failed write is still reported (its own span)
        duration = time.perf_counter() - t0
        yield ev.CheckpointSaved(
            **state.base(), kind="complete", store=store, entries=n, duration_s=duration,
            error=exc,
        )  # fmt: skip
        raise
    duration = time.perf_counter() - t0
    yield ev.CheckpointSaved(
        **state.base(), kind="complete", store=store, entries=n, bytes=written,
        duration_s=duration,
    )  # fmt: skip
    if together:
        yield ev.SessionWritten(
            **state.base(),
            session_id=session_id or "",
            entries=len(entries),
            store=store,
            duration_s=0.0,  # written in the end's transaction, timed there
        )


def _session_of(state: RunState) -> tuple[SessionStore, str] | None:
    """Where the run writes its session segment at its end (None: it writes none)."""
    session, session_id = state.session, state.params.session_id
    return None if session is None or session_id is None else (session, session_id)


async def write_session(state: RunState, entries: Sequence[Any]) -> AsyncIterator[ev.Event]:
    target = _session_of(state)
    if target is None:
        return
    session, session_id = target
    t0 = time.perf_counter()
    # fenced when the session lives in the checkpointer's store (its leases are there)
    fence = state.runtime.lease.token if _same(session, state.checkpointer) else None
    await session.append_segment(session_id, state.run_id, entries, fence=fence)
    yield ev.SessionWritten(
        **state.base(),
        session_id=session_id,
        entries=len(entries),
        store=str(getattr(session, "url", "")).split(":", 1)[0],
        duration_s=time.perf_counter() - t0,
    )


async def call_close(aclose: Any) -> None:
    """Call a plugin's ``aclose``: async, or sync (``conn.close``) — awaited if it
    returns an awaitable."""
    result = aclose()
    if inspect.isawaitable(result):
        await result


def _same(a: object, b: object) -> bool:
    return a is b


async def close_plugins(state: RunState) -> AsyncIterator[ev.Event]:
    """Await every plugin's ``aclose`` in LIFO order; one failing does not stop the rest."""
    while state.runtime.closers:
        name, aclose = state.runtime.closers.pop()
        t0 = time.perf_counter()
        error: BaseException | None = None
        try:
            await call_close(aclose)
        except Exception as exc:
            error = exc
            logger.exception("plugin %r failed to close (ignored)", name)
        yield ev.PluginClosed(
            **state.base(),
            plugin=name,
            duration_s=time.perf_counter() - t0,
            error=error,
        )


def result_of(state: RunState, final: Final) -> RunResult[Any]:
    """The finished run's :class:`RunResult`: its final output and its state."""
    assert state.active is not None
    return RunResult(
        output=final.output,
        usage=state.total_usage(),
        own_usage=state.progress.usage.copy(),
        child_usage=state.child_usage(),
        turns=state.progress.turn,
        finish_reason=final.finish_reason,
        final_agent=state.active.agent,
        entries=tuple(state.new_entries()),
        run_id=state.run_id,
        session_id=state.params.session_id,
        undelivered=tuple(state.undelivered),
    )
