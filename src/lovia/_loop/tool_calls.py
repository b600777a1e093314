"""Phase 6 of a turn: the model asked for tools.

First every call is pre-checked in the model's request order (budget, unknown tool,
handoff, argument validation, approval). Only then do they run: consecutive
concurrency-safe calls in parallel, the others one at a time, in order. Each result is
appended as it completes and checkpointed (the results of a parallel group that are in
together go out in one write, before anything else happens), with a ledger entry before
the call starts, so a crash never re-runs a completed call. A tool's ordinary exception becomes an
``is_error`` result the model can react to; it does not end the run.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, cast

from opentelemetry import context as otel_context
from opentelemetry import trace

from .. import events as ev
from .._redact import redact
from ..agent import Handoff
from ..context import call_key
from ..errors import ApprovalPending, BudgetExceeded, ToolError, TooManyToolCalls
from ..stores.records import ApprovalRecord, LedgerRecord, LedgerStatus
from ..tools import Tool, ToolArgumentsError, serialize_result
from ..tools.tool import ResultNotSerializable
from ..transcript import HandoffEntry, ToolCallEntry, ToolResultEntry
from .checkpoint import commit, write_progress
from .engine import host_stop
from .lease import confirm_lease, lease_fresh
from .lifelog import approval_event, note_approval
from .limits import check_budget
from .model_call import stamp
from .outcomes import Transfer
from .state import EndRun, RunState, current_run

__all__ = ["tool_phase"]

logger = logging.getLogger("lovia.tools")

SETTLE_S = 30.0
"""How long the end of a run waits for a sync tool's thread that is still running (a
thread cannot be stopped): within it, the tool's outcome is recorded and a resume does
not run it again; past it the run ends and the outcome stays unknown."""

UNKNOWN_OUTCOME = (
    "The outcome of this tool call is unknown: the run crashed while it was running, and "
    "the tool is not marked idempotent, so it was not run again. Check its effects "
    "before retrying."
)


@dataclass(slots=True)
class Outcome:
    """What a tool call came to: its result text, and whether (and how) it failed."""

    content: str
    is_error: bool = False
    error_type: str | None = None
    """``ToolCallCompleted.error_type``: the exception's class name, or ``refused``."""
    interrupted: BaseException | None = None
    """The run was ending (cancel, ``max_seconds``) while this sync tool's thread ran; it
    finished, so its outcome is recorded, then this is raised to end the run."""


def _failed(content: str, error_type: str) -> Outcome:
    """An error result: keys in the text (an exception may quote one) are masked before
    the model sees it or the store keeps it."""
    return Outcome(redact(content), is_error=True, error_type=error_type)


@dataclass(slots=True)
class Approve:
    """Run the call."""


@dataclass(slots=True)
class Deny:
    """Do not run the call; the model gets ``reason`` as its error result."""

    reason: str


@dataclass(slots=True)
class Wait:
    """No decision yet: the run pauses until a human decides (``approvals=``)."""


Decision = Approve | Deny | Wait


@dataclass(slots=True)
class Plan:
    """What to do with one call after its pre-checks."""

    call: ToolCallEntry
    tool: Tool | None = None
    kwargs: dict[str, Any] | None = None
    refusal: str | None = None
    """An error result decided without running the tool."""
    handoff: Handoff | None = None
    over_budget: BudgetExceeded | None = None
    """The budget refused this call at its pre-check: the run ends when it is reached."""
    recovered: bool = False
    """Answered from the ledger: it was running when an earlier attempt died (outcome
    unknown), so this attempt does not run it."""
    span: Any = None
    """The call's ``execute_tool`` span once its ``ToolCallStarted`` was emitted (None:
    not traced): the tool runs under it, its ``ToolCallCompleted`` is built with it."""

    @property
    def will_run(self) -> bool:
        return self.refusal is None and self.handoff is None and self.over_budget is None


def check_call_count(state: RunState, calls: Sequence[ToolCallEntry]) -> None:
    """One answer may ask for at most ``max_tool_calls_per_turn`` calls; more ends the run
    before any of them runs (the answer itself is recorded, for the postmortem)."""
    assert state.active is not None
    limit = state.active.agent.max_tool_calls_per_turn
    if len(calls) > limit:
        raise TooManyToolCalls(
            f"the model asked for {len(calls)} tool calls in one answer; agent "
            f"{state.active.agent.name!r} allows {limit} (max_tool_calls_per_turn); "
            "none of them ran",
            hint="If the task really needs that many calls in one turn, raise "
            "Agent(max_tool_calls_per_turn=...); otherwise check the prompt and the model "
            "(lovia show RUN_ID shows the answer).",
            calls=len(calls),
            limit=limit,
        )


@dataclass(slots=True)
class Checked:
    """The pre-checks' product: a plan per call, what waits for a human, what was decided."""

    plans: list[Plan] = field(default_factory=list[Plan])
    waiting: list[ToolCallEntry] = field(default_factory=list[ToolCallEntry])
    decided: list[ApprovalRecord] = field(default_factory=list[ApprovalRecord])
    handoff: Handoff | None = None
    """The handoff called in this turn (at most one)."""


async def tool_phase(
    state: RunState, calls: Sequence[ToolCallEntry], *, rides: bool = False
) -> AsyncIterator[ev.Event | Transfer]:
    """Phase 6, with its commit points; ends with a :class:`Transfer` when a handoff was
    called. ``rides``: the model's answer is not written yet (it goes with the first
    commit, before any tool starts)."""
    check_call_count(state, calls)
    checked = await _prechecks(state, calls)
    for record in checked.decided:
        yield approval_event(state, record)
    if checked.waiting:
        async for event in commit(state, "progress"):
            yield event
        raise _pending(checked.waiting)
    carried = False  # results of earlier groups are noted, not yet written
    for group in _groups(state, checked.plans):
        stop = group[0].over_budget
        if stop is not None:  # the answer (and the results so far) are kept, then it ends
            async for event in commit(state, "tool_result" if carried else "progress"):
                yield event
            check_budget(state, extra_tool_calls=0)  # the same limit, with the usage of now
            raise stop
        if _parallel(state, group):
            async for event in _run_parallel(state, group, carried):
                yield event
        else:
            async for event in _run_one(state, group[0], carried):
                yield event
        carried = True
    # commit point: every result is durable before the next model call (a run with no
    # checkpointer notes nothing: no commit, and no generator made for it, per call)
    if state.runtime.pending:
        async for event in commit(state, "tool_result" if carried or not rides else "ledger"):
            yield event
    if checked.handoff is not None:
        yield Transfer(checked.handoff)


def _pending(waiting: Sequence[ToolCallEntry]) -> ApprovalPending:
    return ApprovalPending(
        f"{len(waiting)} tool call(s) wait for approval: "
        + ", ".join(f"{c.name} ({c.call_id})" for c in waiting),
        hint="Resume with Runner.run(agent, None, run_id=..., approvals={call_id: True "
        "or False or 'reason to deny'}), or pass an approval policy.",
        pending=tuple(waiting),
    )


async def _prechecks(state: RunState, calls: Sequence[ToolCallEntry]) -> Checked:
    """Every call's pre-checks, in the model's order (calls the ledger has an outcome
    for are skipped: a resumed turn answers only the open ones)."""
    checked = Checked()
    planned = 0  # calls of this turn that will run (they count for the budget)
    for call in calls:
        if state.progress.ledger.get(call.call_id) in ("completed", "failed"):
            continue
        plan = await _precheck(state, call, planned, checked)
        if plan.handoff is not None:
            checked.handoff = plan.handoff
        checked.plans.append(plan)
        planned += plan.will_run
    return checked


async def _precheck(state: RunState, call: ToolCallEntry, planned: int, checked: Checked) -> Plan:
    """``planned``: earlier calls of this turn that will run (they count for the budget)."""
    active = state.active
    assert active is not None
    try:
        check_budget(state, extra_tool_calls=planned)
    except BudgetExceeded as exc:  # the calls before it still run; the run ends here
        return Plan(call, over_budget=exc)
    handoff = active.handoffs.get(call.name)
    if handoff is not None:
        if checked.handoff is not None:
            return Plan(
                call,
                refusal="Only one handoff per turn; the conversation is already "
                f"being transferred to {checked.handoff.agent.name}.",
            )
        return Plan(call, handoff=handoff)
    t = active.tools.get(call.name)
    if t is None:
        names = ", ".join(sorted(active.tools)) or "(none)"
        return Plan(call, refusal=f"Unknown tool {call.name!r}. Available tools: {names}.")
    try:
        kwargs = t.validate(call.arguments)
    except ToolArgumentsError as exc:
        return Plan(call, t, refusal=str(exc))
    if state.progress.ledger.get(call.call_id) == "started" and not t.idempotent:
        return Plan(call, t, refusal=UNKNOWN_OUTCOME, recovered=True)
    if not t.requires_approval:  # the common case: no approval step, no await for it
        return Plan(call, t, kwargs)
    decision = await _approval(state, t, call, checked.decided)
    if isinstance(decision, Wait):
        checked.waiting.append(call)
    elif isinstance(decision, Deny):
        return Plan(call, t, refusal=f"The call was denied: {decision.reason}")
    return Plan(call, t, kwargs)


async def _approval(
    state: RunState, t: Tool, call: ToolCallEntry, decided: list[ApprovalRecord]
) -> Decision:
    """Whether the call runs, is denied, or waits for a human (a decision is recorded
    in ``decided``: who, when, why)."""
    needs = t.requires_approval
    if callable(needs):
        needs = needs(state.ctx, call)
        if inspect.isawaitable(needs):
            needs = await needs
    if not needs:
        return Approve()
    decisions = state.params.approvals or {}
    if call.call_id in decisions:
        decision = _decision(decisions[call.call_id])
        actor = state.params.approved_by or "api"
    else:
        policy = state.params.approval or (state.active.agent.approval if state.active else None)
        if policy is None:
            return Wait()
        verdict = policy(state.ctx, call)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        decision = _decision(verdict)
        actor = f"policy:{getattr(policy, '__qualname__', None) or type(policy).__name__}"
    denied = isinstance(decision, Deny)
    reason = decision.reason if denied and decision.reason != DENIED else None
    verdict_text = "denied" if denied else "approved"
    decided.append(note_approval(state, call.call_id, call.name, verdict_text, actor, reason))
    return decision


DENIED = "denied by the approver."


def _decision(value: object) -> Approve | Deny:
    """A user's verdict: True / "approve" runs; False / None / "deny" denies; any other
    value denies with its text as the reason."""
    if value is True or value == "approve":
        return Approve()
    if value is False or value is None or value == "deny":
        return Deny(DENIED)
    return Deny(str(value))


def _groups(state: RunState, plans: list[Plan]) -> list[list[Plan]]:
    """Consecutive concurrency-safe calls form one parallel group; others run alone."""
    groups: list[list[Plan]] = []
    for plan in plans:
        safe = plan.tool is not None and plan.tool.concurrency_safe and plan.refusal is None
        if safe and groups and groups[-1][-1].tool is not None and _safe(groups[-1][-1]):
            groups[-1].append(plan)
        else:
            groups.append([plan])
    return groups


def _safe(plan: Plan) -> bool:
    return plan.tool is not None and plan.tool.concurrency_safe and plan.refusal is None


def _started(state: RunState, plan: Plan) -> ev.ToolCallStarted:
    assert state.active is not None
    return ev.ToolCallStarted(
        **state.base(),
        call=plan.call,
        idempotency_key=call_key(state.run_id, plan.call.call_id),
        description=plan.tool.description if plan.tool else "",
    )


def _ledger(state: RunState, plan: Plan, status: LedgerStatus) -> None:
    call_id = plan.call.call_id
    state.progress.ledger[call_id] = status
    # an agent tool: its child run's usage, kept with the result
    total = state.settle_child(call_id) if status != "started" else None
    if state.checkpointer is None:
        return  # nothing is noted without a checkpointer: no record to build
    key = call_key(state.run_id, call_id)  # the key the tool saw as ctx.idempotency_key
    state.note(LedgerRecord(call_id=call_id, status=status, key=key, child_usage=total))


async def _run_one(state: RunState, plan: Plan, carried: bool) -> AsyncIterator[ev.Event]:
    """One call that runs alone (or is answered without running: refused, a handoff);
    its ledger entry is committed first (``carried``: with earlier groups' results)."""
    if not plan.will_run:
        yield _complete(state, plan, _decided(plan), 0.0, started=False)
        return
    if not lease_fresh(state):
        await confirm_lease(state)
    started = _started(state, plan)
    yield started
    _ledger(state, plan, "started")
    # commit point: no tool starts before its ledger entry is durable
    if state.runtime.pending:
        async for event in commit(state, "tool_result" if carried else "ledger"):
            yield event
    watch = state.runtime.watch
    assert watch is not None
    t0 = time.perf_counter()
    async with watch.armed():
        plan.span = state.span_of(started)
        outcome = await _execute(state, plan)
    yield _complete(state, plan, outcome, time.perf_counter() - t0)
    if outcome.interrupted is not None:  # recorded: now the run ends
        raise watch.stopped or outcome.interrupted


def _parallel(state: RunState, group: list[Plan]) -> bool:
    """A group of several calls runs in parallel; so does one call under a nested stream
    (it waits on tasks, so child runs' events surface while tools run)."""
    return group[0].will_run and (len(group) > 1 or state.runtime.child_events is not None)


async def _run_parallel(
    state: RunState, group: list[Plan], carried: bool
) -> AsyncIterator[ev.Event]:
    """At most ``max_parallel_tools`` calls run at once. A call's "started" is recorded
    only when it gets its slot (with the results that freed it, in one commit), so a
    crash never leaves a call that was still waiting for a slot with an unknown outcome.
    ``carried``: results of earlier groups ride with the first commit."""
    assert state.active is not None
    tasks: dict[asyncio.Task[Outcome], tuple[Plan, float]] = {}
    queue = list(group)
    await confirm_lease(state)
    starting = _take_slots(state, queue, max(1, state.active.agent.max_parallel_tools))
    for _, started in starting:
        yield started
    # commit point: no tool starts before its ledger entry is durable
    async for event in commit(state, "tool_result" if carried else "ledger"):
        yield event
    _launch(state, starting, tasks)
    order = {id(p): i for i, p in enumerate(group)}
    try:
        while tasks:
            done, first = await _wait(state, tasks)
            if first is not None:
                yield first
            if state.runtime.child_events is not None:
                async for event in _child_events(state):
                    yield event
            for task in sorted(done, key=lambda t: order[id(tasks[t][0])]):
                plan, t0 = tasks.pop(task)
                yield _complete(state, plan, task.result(), time.perf_counter() - t0)
            starting = _take_slots(state, queue, len(done))  # their slots are free
            for _, started in starting:
                yield started
            if tasks or starting:  # commit point: results in while siblings still run,
                async for event in commit(state, "tool_result"):  # with the next starts
                    yield event
            _launch(state, starting, tasks)
    finally:
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
            await _record_settled(state, tasks)


async def _record_settled(
    state: RunState, tasks: dict[asyncio.Task[Outcome], tuple[Plan, float]]
) -> None:
    """The run is ending: the results of sync tools whose threads finished meanwhile are
    recorded (ledger and result) and written with the others noted, so a resume does not
    run them again (the events have no consumer left)."""
    for task, (plan, t0) in tasks.items():
        if not task.cancelled() and task.exception() is None:
            _complete(state, plan, task.result(), time.perf_counter() - t0)
    if (
        state.runtime.pending
        and state.checkpointer is not None
        and state.runtime.lease.lost is None
    ):
        saved = await write_progress(state, "tool_result")
        if saved.error is not None:  # the run's own error is what the caller gets
            logger.error(
                "recording the tool results of run %s failed: %s", state.run_id, saved.error
            )


Starting = list[tuple[Plan, ev.ToolCallStarted]]
"""Calls that just got a slot, with their ``ToolCallStarted`` (its span: ``state.span_of``
once emitted)."""


def _take_slots(state: RunState, queue: list[Plan], free: int) -> Starting:
    """The next ``free`` queued calls get a slot: their "started" is noted now (the
    caller commits it, then launches them)."""
    starting: Starting = []
    while queue and len(starting) < free:
        plan = queue.pop(0)
        _ledger(state, plan, "started")
        starting.append((plan, _started(state, plan)))
    return starting


def _launch(
    state: RunState, starting: Starting, tasks: dict[asyncio.Task[Outcome], tuple[Plan, float]]
) -> None:
    """Start the calls whose "started" was just committed."""
    for plan, started in starting:
        plan.span = state.span_of(started)
        task = asyncio.ensure_future(_execute(state, plan))
        tasks[task] = (plan, time.perf_counter())


async def _wait(
    state: RunState, tasks: Collection[asyncio.Task[Any]]
) -> tuple[list[asyncio.Task[Any]], ev.Event | None]:
    """Wait for the first tool to finish, or (nested stream) for a child run's event."""
    assert state.runtime.watch is not None
    queue = state.runtime.child_events
    waiting: set[asyncio.Future[Any]] = set(tasks)
    getter = asyncio.ensure_future(queue.get()) if queue is not None else None
    if getter is not None:
        waiting.add(getter)
    try:
        async with state.runtime.watch.armed():
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if getter is not None:
            getter.cancel()  # an item it had not taken yet stays in the queue
    taken = getter is not None and getter.done() and not getter.cancelled()
    first = getter.result() if getter is not None and taken else None
    return [t for t in tasks if t in done], first


async def _child_events(state: RunState) -> AsyncIterator[ev.Event]:
    queue = state.runtime.child_events
    while queue is not None and not queue.empty():
        yield queue.get_nowait()


def _decided(plan: Plan) -> Outcome:
    if plan.handoff is not None:
        return Outcome(f"Transferred to {plan.handoff.agent.name}.")
    return _failed(plan.refusal or "", "refused")


async def _execute(state: RunState, plan: Plan) -> Outcome:
    """Run the tool with timeout and retries."""
    t = plan.tool
    assert t is not None and plan.kwargs is not None
    span = plan.span
    token = otel_context.attach(trace.set_span_in_context(span)) if span is not None else None
    running = current_run.set(state)
    try:
        ctx = state.ctx.for_call(plan.call)
        for attempt in range(t.retries + 1):
            call: Any = None
            try:
                async with _time_limit(t.timeout):
                    call = t.start(ctx, plan.kwargs)
                    thread = isinstance(call, asyncio.Future)
                    value = await (asyncio.shield(call) if thread else call)
                return Outcome(serialize_result(value))
            except asyncio.CancelledError as exc:
                if not isinstance(call, asyncio.Future):
                    raise
                return await _settle(state, t, cast("asyncio.Future[Any]", call), exc)
            except ResultNotSerializable as exc:  # the tool ran: do not retry it
                logger.warning("tool %s %s", t.name, exc)
                return _failed(f"Tool {t.name!r} {exc}", "ResultNotSerializable")
            except ToolError as exc:
                return _failed(exc.message, "ToolError")
            except EndRun as exc:  # a child run hit this run's limit: the run ends
                raise exc.error from None
            except TimeoutError:
                return _failed(f"Tool {t.name!r} timed out after {t.timeout} s.", "TimeoutError")
            except Exception as exc:
                if host_stop(exc):  # an engine's cancellation: not the tool's failure
                    raise
                if attempt < t.retries:
                    logger.info("tool %s failed (%s); retrying", t.name, exc)
                    continue
                name = type(exc).__name__
                return _failed(f"Tool {t.name!r} failed: {name}: {exc}", name)
        raise AssertionError("unreachable")  # pragma: no cover
    finally:
        current_run.reset(running)
        if token is not None:
            otel_context.detach(token)


_NO_LIMIT: AbstractAsyncContextManager[object] = nullcontext()
"""A tool with no timeout: no ``asyncio.Timeout`` made and entered per call."""


def _time_limit(seconds: float | None) -> AbstractAsyncContextManager[object]:
    return _NO_LIMIT if seconds is None else asyncio.timeout(seconds)


async def _settle(
    state: RunState, t: Tool, thread: asyncio.Future[Any], cancel: asyncio.CancelledError
) -> Outcome:
    """The run is ending while a sync tool runs in its thread: wait (up to ``SETTLE_S``)
    for the thread so its outcome is recorded, then end the run (``interrupted``)."""
    try:
        async with asyncio.timeout(SETTLE_S):
            value = await asyncio.shield(thread)
        return Outcome(serialize_result(value), interrupted=cancel)
    except TimeoutError:
        logger.warning(
            "run %s ended while tool %s was still running after %.0f s; its outcome is unknown",
            state.run_id,
            t.name,
            SETTLE_S,
        )
        raise cancel from None
    except Exception as exc:  # the tool failed (or its result cannot be serialized)
        name = type(exc).__name__
        return Outcome(
            redact(f"Tool {t.name!r} failed: {name}: {exc}"),
            is_error=True,
            error_type=name,
            interrupted=cancel,
        )


def _complete(
    state: RunState, plan: Plan, outcome: Outcome, duration: float, *, started: bool = True
) -> ev.ToolCallCompleted:
    """Append the result (and handoff) and note it with its ledger entry (the tool phase
    commits it); returns the ToolCallCompleted to emit."""
    assert state.active is not None
    is_error = outcome.is_error
    result = ToolResultEntry(  # stamped as built (what stamp() does, without a copy)
        run_id=state.run_id,
        turn=state.progress.turn,
        agent=state.active.agent.name,
        call_id=plan.call.call_id,
        name=plan.call.name,
        content=outcome.content,
        is_error=is_error,
    )
    new = [result]
    if plan.handoff is not None:
        new.append(
            stamp(
                state,
                HandoffEntry(
                    from_agent=state.active.agent.name,
                    to_agent=plan.handoff.agent.name,
                    call_id=plan.call.call_id,
                ),
            )
        )
    state.transcript.extend(new)
    state.progress.usage.tool_calls += 1 if started else 0
    state.note_entries(new)
    if started or plan.handoff is not None:
        _ledger(state, plan, "failed" if is_error else "completed")
    return ev.ToolCallCompleted(
        **state.base(),
        call=plan.call,
        result=result,
        is_error=is_error,
        error_type=outcome.error_type,
        duration_s=duration,
        started=started,
        known=plan.call.name in state.active.tools or plan.call.name in state.active.handoffs,
        recovered=plan.recovered,
        span=plan.span,
    )
