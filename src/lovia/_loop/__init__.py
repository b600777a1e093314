"""The engine: ONE async generator of events drives every run.

``Runner.stream`` hands it to the caller; ``Runner.run`` drains it. Each event goes
through the :class:`Emitter` first — tracing opens the phase's span, hooks run on the
event built with that span (``event.span``), tracing closes the span if the phase
ended — and only then reaches the consumer. No event is changed once built. The stream
never raises while iterating: every failure becomes exactly one terminal ``RunFailed``;
the error is kept for ``await handle.result()``.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from .. import events as ev
from .._observers import OBSERVERS, notify
from ..context import RunContext
from ..errors import LeaseLost, LoviaError, RunCancelled, RunError
from ..result import RunResult
from ..stores.base import start_run
from ..telemetry.tracer import RunTracer, make_run_tracer
from ..transcript import Transcript
from ..usage import Usage
from .attempts import lifecycle_extra
from .checkpoint import end_released, finish_info, restore, run_info
from .engine import host_stop, record_host_stop
from .finish import call_close, close_plugins, finish, result_of, write_session
from .lease import stop_heartbeat
from .limits import cancelled_error, out_of_time
from .outcomes import Final
from .prepare import (
    find_agent,
    inherit_session_labels,
    load_snapshot,
    prepare,
    run_started,
    started_before,
)
from .state import CHILD_EVENT_BUFFER, Progress, RunParams, RunState, Runtime
from .turn import finalize, resume_turn, turn
from .watch import RunWatch

__all__ = ["Outcome", "RunParams", "run_events"]

logger = logging.getLogger("lovia.loop")


@dataclass(slots=True)
class Outcome:
    """Where the driver leaves the run's result or error for ``handle.result()``."""

    result: RunResult[Any] | None = None
    error: BaseException | None = None
    done: bool = False


_PARENTS = frozenset(
    {ev.RunStarted, ev.TurnStarted, ev.ViewStarted, ev.ModelCallStarted, ev.ToolCallStarted}
)
"""Events whose span a phase reads back (``RunState.span_of``): the run span gives the
run's trace ids, a tool call's span is the parent of the work inside the tool, and the
phase builds its later events with its span where that span already exists (a model
call's chunks and end, a tool call's, a view's and a turn's end): the emitter gives a
span only to the events whose span it has just opened, before anyone but the phase that
built them sees them."""


class Emitter:
    """Tracing → hooks → tracing, for every event, before the consumer sees it."""

    __slots__ = ("state", "tracer")

    def __init__(self, state: RunState, tracer: RunTracer | None) -> None:
        self.state = state
        self.tracer = tracer

    def idle(self) -> bool:
        """True when no tracer and no hook can see events (the consumer still does)."""
        return self.tracer is None and not OBSERVERS and not self.state.hooked()

    async def emit(self, event: ev.Event, *, live: bool = False) -> ev.Event:
        """The event as hooks, observers and the consumer see it: with its phase's span.

        An event whose span the tracer opens here gets it now, as the last step of its
        construction: only the phase that built it has seen it, and nothing changes it
        after this (a copy per span cost ~3 µs of the round-trip for each).

        ``live``: the run is still going (not its closing or terminal events), so the
        hooks are one of the run's waits: a cancel or the deadline ends a hook that
        hangs, with the run's error. The run's own end is not interrupted: its closing
        hooks run to their end."""
        tracer = self.tracer
        span: Any = None
        if tracer is not None:
            span = tracer.start(event)
            if span is not None:
                if type(event) in _PARENTS:  # the phase parents later work under it
                    self.state.runtime.spans[event] = span
                if event.span is not span:
                    event.span = span
        state = self.state
        hooks = (
            state.active.hooks
            if state.active is not None
            else ([(None, state.params.agent.hooks)] if state.params.agent.hooks else [])
        )
        watch = state.runtime.watch if live else None
        try:
            for plugin, h in hooks:
                if watch is None:
                    await h.dispatch(event, state.ctx, plugin=plugin)
                else:
                    await watch.wait(h.dispatch(event, state.ctx, plugin=plugin))
        finally:
            if tracer is not None:
                tracer.end(event, span)
            if OBSERVERS:
                notify(event)
        return event


def new_state(params: RunParams) -> RunState:
    run_id = params.run_id or uuid.uuid4().hex
    token = params.cancel_token
    transcript = Transcript()
    ctx: RunContext[Any] = RunContext(
        deps=params.deps,
        agent=params.agent,
        run_id=run_id,
        session_id=params.session_id,
        entries=transcript.view(),
        workspace=params.workspace,
        cancel_token=token,
        mailbox=params.mailbox,
    )
    state = RunState(
        params=params,
        run_id=run_id,
        ctx=ctx,
        transcript=transcript,
        progress=Progress(usage=ctx.usage),
        runtime=Runtime(),
    )
    budget = params.budget
    seconds = budget.max_seconds if budget is not None else None
    deadline = None if seconds is None else state.started + seconds
    state.runtime.watch = RunWatch(token, deadline, partial(_stop_error, state))
    if params.nested:
        state.runtime.child_events = asyncio.Queue(CHILD_EVENT_BUFFER)  # backpressure, no drops
    if params.parent is not None:  # the parent's budget and usage see this run live
        params.parent.state.child_started(params.parent.call_id, state)
    return state


async def _phases(state: RunState) -> AsyncIterator[ev.Event | Final]:
    """The run, phase by phase, in the documented order: its start, then turns until one
    ends with the final output (a resumed run first finishes the turn it stopped in),
    the run's end, and the :class:`Final` last (nothing for a run completed before).
    The turns' items come straight from here: a generator between costs every item."""
    async for event in _start(state):
        yield event
    if state.runtime.completed_result is not None:
        return
    final: Final | None = None
    if state.resume_calls:
        async for item in resume_turn(state, state.resume_calls):
            if isinstance(item, Final):
                final = item
            else:
                yield item
    elif state.resume_calls is not None and _ends_with_answer(state):
        step = finalize(state, _last_response(state), None)
        final = step if isinstance(step, Final) else None
    while final is None:
        async for item in turn(state):
            if isinstance(item, Final):
                final = item
            else:
                yield item
    async for event in finish(state, final):
        yield event
    yield final


async def _start(state: RunState) -> AsyncIterator[ev.Event]:
    """The run's start: its stored state loaded (a completed run is answered from it, and
    ``completed_result`` set), ``RunStarted``, then the preparation."""
    snapshot = await load_snapshot(state)
    if snapshot is not None and snapshot.info.status == "completed":
        state.runtime.completed_result = RunResult.from_stored(
            snapshot, state.params.agent, find_agent
        )
        yield run_started(state, resumed=True)
        async for event in write_session(state, state.runtime.completed_result.entries):
            yield event  # idempotent: finishes a run that crashed before its session write
        return
    history = stored = None
    if snapshot is not None and started_before(snapshot):
        stored = restore(snapshot)  # folded once: the links now, the rest in prepare
        state.progress.trace_links = stored.trace_links
    else:  # a new run, or one that failed before its start was written: starts afresh
        history = await inherit_session_labels(state)  # a resumed run keeps its labels
    started = run_started(state, resumed=snapshot is not None)
    yield started
    span = state.span_of(started)
    if span is not None:
        sc = span.get_span_context()
        if sc.is_valid:
            state.trace_ids = (f"{sc.trace_id:032x}", f"{sc.span_id:016x}")
    async for event in prepare(state, snapshot, stored, history):
        yield event


def _last_response(state: RunState) -> list[Any]:
    entries = state.new_entries()
    out: list[Any] = []
    for entry in reversed(entries):
        if entry.type in ("text", "reasoning") and entry.turn == state.progress.turn:
            out.append(entry)
        else:
            break
    out.reverse()
    return out


def _ends_with_answer(state: RunState) -> bool:
    entries = state.new_entries()
    return bool(entries) and entries[-1].type == "text" and state.progress.turn > 0


def _stop_error(state: RunState) -> BaseException:
    """The run's error when its token or deadline stopped one of its awaits."""
    if state.runtime.lease.lost is not None:
        return state.runtime.lease.lost
    return cancelled_error(state) if state.ctx.cancel_token.cancelled else out_of_time(state)


def _run_error(state: RunState, exc: BaseException) -> BaseException:
    """The run's error for an exception that ended it (stamped with run id and turn)."""
    if isinstance(exc, RunError):
        exc.run_id = exc.run_id or state.run_id
        exc.turn = exc.turn if exc.turn is not None else state.progress.turn
    return exc


def _failed(state: RunState, error: BaseException) -> ev.RunFailed:
    message = error.message if isinstance(error, LoviaError) else str(error)
    return ev.RunFailed(
        **state.base(),
        error_type=type(error).__name__,
        message=message,
        error=error,
        usage=state.total_usage(),
        turns=state.progress.turn,
        finish_reason=getattr(error, "finish_reason", "error"),
        duration_s=state.elapsed(),
        child_usage=_children_total(state.child_usage().values()),
    )


def _children_total(usages: Iterable[Usage]) -> Usage | None:
    """The sum of the child runs' usages (None: the run started no child run)."""
    items = list(usages)
    if not items:
        return None
    total = Usage()
    for usage in items:
        total.add(usage)
    return total


def _completed(state: RunState, final: Final | None) -> tuple[ev.RunCompleted, RunResult[Any]]:
    result = state.runtime.completed_result
    if result is None:
        assert final is not None
        result = result_of(state, final)
    agent = result.final_agent.name
    event = ev.RunCompleted(
        run_id=state.run_id,
        agent=agent,
        turn=result.turns,
        replayed=result.replayed,
        output=result.output,
        usage=result.usage,
        turns=result.turns,
        finish_reason=result.finish_reason,
        duration_s=state.elapsed(),
        child_usage=_children_total(result.child_usage.values()),
    )
    return event, result


def _stored_status(error: BaseException) -> Literal["paused", "cancelled", "failed"]:
    """What a run that ended with ``error`` is stored as."""
    if getattr(error, "finish_reason", "") == "approval_pending":
        return "paused"
    return "cancelled" if isinstance(error, RunCancelled) else "failed"


async def _mark_failed(state: RunState, error: BaseException) -> None:
    cp = state.checkpointer
    if cp is None or state.runtime.completed_result is not None or state.active is None:
        return
    if isinstance(error, LeaseLost) or state.runtime.lease.lost is not None:
        return  # the run belongs to the worker that took it over: write nothing
    status = _stored_status(error)
    try:
        info = finish_info(
            state, status, getattr(error, "finish_reason", "error"), type(error).__name__
        )
        # the postmortem's first question: what went wrong, and what to do about it
        info.extra["error"] = error.message if isinstance(error, LoviaError) else str(error)
        info.extra["hint"] = getattr(error, "hint", None)
        lifecycle_extra(state, error, info.extra)
        if not state.runtime.row:  # it failed before its start was written: write the
            # row now, so the failed run can be found (lovia runs, the web app)
            await start_run(cp, run_info(state), [], fence=state.runtime.lease.token)
        await end_released(state, info, None)  # records, row, lease: one transaction
    except LeaseLost:
        logger.warning("run %s: lease lost; its failure is not recorded", state.run_id)
    except Exception:
        logger.exception("could not record the failure of run %s", state.run_id)


async def _release(state: RunState) -> None:
    await stop_heartbeat(state)
    if state.checkpointer is not None and state.runtime.lease.owner is not None:
        try:
            await state.checkpointer.release(state.run_id, state.runtime.lease.owner)
        except Exception:
            logger.exception("could not release the lease of run %s", state.run_id)


async def run_events(params: RunParams, outcome: Outcome) -> AsyncGenerator[ev.Event]:
    """Drive one run, yielding every event; ends with one RunCompleted or RunFailed."""
    state = new_state(params)
    tracer = make_run_tracer(params.tracer_provider, params.meter_provider)
    emitter = Emitter(state, tracer)
    state.runtime.views_read = tracer is not None or params.checkpointer is not None
    watch = state.runtime.watch
    assert watch is not None  # new_state gives every run its watch
    watch.token.add_listener(watch.fire)
    error: BaseException | None = None
    final: Final | None = None
    finished = False
    try:
        try:
            async for item in _phases(state):
                if isinstance(item, Final):
                    final = item
                else:
                    yield item if emitter.idle() else await emitter.emit(item, live=True)
        except GeneratorExit:
            raise
        except BaseException as exc:
            error = _run_error(state, exc)
            if host_stop(error):  # a host engine's control flow: recorded cancelled, re-raised
                await record_host_stop(state, error, _mark_failed)
                raise
            if isinstance(error, asyncio.CancelledError):
                raise
        async for event in _closing(state, emitter, error):
            yield event
        terminal, error = await _terminal(state, error, final, outcome)
        try:
            terminal = await emitter.emit(terminal)
        except Exception:
            logger.exception("a hook failed on the terminal event of run %s", state.run_id)
        finished = True
        yield terminal
    finally:
        if not finished and tracer is not None:
            tracer.abandon()
        watch.token.remove_listener(watch.fire)
        await _cleanup(state)
        outcome.done = True


async def _closing(
    state: RunState, emitter: Emitter, error: BaseException | None
) -> AsyncIterator[ev.Event]:
    try:
        if state.runtime.closers:  # most runs open no plugin that needs closing
            async for event in close_plugins(state):
                yield await emitter.emit(event)
    except Exception:
        logger.exception("closing plugins of run %s failed", state.run_id)
    if error is not None:
        await _mark_failed(state, error)


async def _terminal(
    state: RunState, error: BaseException | None, final: Final | None, outcome: Outcome
) -> tuple[ev.Event, BaseException | None]:
    if error is None:
        try:
            terminal, result = _completed(state, final)
            outcome.result = result
            return terminal, None
        except Exception as exc:  # building the result failed: report it as the run's error
            error = exc
    outcome.error = error
    return _failed(state, error), error


async def _cleanup(state: RunState) -> None:
    """Best effort when the consumer abandoned the stream or the run was torn down."""
    while state.runtime.closers:
        name, aclose = state.runtime.closers.pop()
        try:
            await call_close(aclose)
        except Exception:
            logger.exception("plugin %r failed to close (ignored)", name)
    await _release(state)
