"""Run start: resolve stores and resume state, activate the agent, build the transcript
(system prompt + session history + this input), run input guardrails once."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator
from typing import Any, cast

from .. import events as ev
from ..agent import Agent
from ..errors import LoviaError, UserError
from ..labels import MAX_LABELS
from ..stores.base import DEPS_KEY, LABELS_KEY, PRUNED_KEY, RunInfo, RunSnapshot, cancel_requests
from ..stores.session_labels import SessionLabels, SessionOpener
from ..transcript import InputEntry, SystemEntry, TranscriptEntry, input_entries
from ..view.record import ViewRecord, resolve_records, view_records
from .activate import activate, resolve_provider
from .attempts import adopt_snapshot, note_attempt_start, reopened
from .checkpoint import commit, open_calls, run_info
from .finish import run_guardrails
from .lease import cancel_if_asked, lease_held, start_heartbeat, take_lease
from .model_call import stamp
from .state import Progress, RunState

__all__ = ["find_agent", "inherit_session_labels", "load_snapshot", "prepare"]

logger = logging.getLogger("lovia.loop")


def find_agent(root: Agent[Any, Any], name: str) -> Agent[Any, Any] | None:
    """The agent called ``name`` in ``root``'s handoff graph."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        agent = stack.pop()
        if id(agent) in seen:
            continue
        seen.add(id(agent))
        if agent.name == name:
            return agent
        stack.extend(h.agent for h in agent.handoff_targets())
    return None


async def load_snapshot(state: RunState) -> RunSnapshot | None:
    """Take the lease of ``run_id``, then load the stored run (None: a new run).

    Loading under the lease means no other worker can append after what was loaded. A
    completed run is never leased: its stored snapshot is returned for replay.
    """
    cp = state.checkpointer
    if cp is None:
        return None
    if not await take_lease(state):
        snapshot = await cp.load(state.run_id)
        if snapshot is not None and snapshot.info.status == "completed":
            return snapshot
        raise await lease_held(state)
    start_heartbeat(state)
    snapshot = await cp.load(state.run_id)
    state.runtime.row = snapshot is not None
    if snapshot is not None and snapshot.info.status != "completed":
        if PRUNED_KEY in snapshot.info.extra:
            raise UserError(
                f"run {state.run_id} cannot resume: its checkpoint records (transcript and "
                "tool ledger) were pruned",
                hint="Resuming it would start over and run its completed tools again; "
                "start a new run (a new run_id) instead.",
            )
        first = snapshot.info.extra.get("first_agent", snapshot.info.agent)
        if first != state.params.agent.name and started_before(snapshot):
            raise UserError(
                f"run {state.run_id} was started by agent {first!r}, not "
                f"{state.params.agent.name!r}",
                hint="Resume a run with the agent that started it, or use a new run_id.",
            )
        adopt_snapshot(state, snapshot)
        stored = snapshot.info.extra.get(LABELS_KEY)
        if not state.params.labels and isinstance(stored, dict):
            labels = cast("dict[str, str]", stored)  # a resume keeps them
            state.params = dataclasses.replace(state.params, labels=labels)
        key = snapshot.info.extra.get(DEPS_KEY)
        if state.params.deps_key is None and isinstance(key, str):  # kept for a later sweep
            state.params = dataclasses.replace(state.params, deps_key=key)
    return snapshot


def started_before(snapshot: RunSnapshot) -> bool:
    """Whether a stored run has begun: False for a row with only attempt records (it
    failed before its start was written) or none (cancelled while queued). Nothing to
    resume then: it starts afresh, by whichever agent runs it."""
    return any(r.kind != "attempt" for r in snapshot.records)


async def inherit_session_labels(state: RunState) -> list[TranscriptEntry] | None:
    """A new top-level run of a session: record its labels as the session's when the
    session has none yet, and take the session's labels for every key it does not give
    (a key it gives keeps its value, for this run only; the session's stay as recorded).

    Returns the session's history when the store read it with the labels (one round
    trip for both), else None.
    """
    params = state.params
    store = state.session
    if params.parent is not None or params.session_id is None:
        return None  # a child run has its parent's labels
    history: list[TranscriptEntry] | None = None
    if isinstance(store, SessionOpener):
        history, recorded = await store.open_session(params.session_id, record=params.labels)
    elif isinstance(store, SessionLabels):
        recorded = await store.session_labels(params.session_id, record=params.labels)
    else:
        return None  # a session store without labels: the run keeps what it was given
    labels = {**recorded, **params.labels}
    if labels == params.labels:
        return history
    if len(labels) > MAX_LABELS:
        raise UserError(
            f"run {state.run_id} would have {len(labels)} labels: its own and those of "
            f"session {params.session_id!r} ({', '.join(sorted(recorded))}); at most "
            f"{MAX_LABELS}",
            hint="Give this run fewer labels of its own: it inherits the session's.",
        )
    state.params = dataclasses.replace(params, labels=labels)
    return history


def _check_cost_budget(state: RunState) -> None:
    """A cost limit needs a price: refuse to run blind rather than never stop.

    A child run (an agent run as a tool) is under its parents' budgets too.
    """
    if state.active is None or not _cost_limited(state):
        return
    from ..pricing import has_price

    provider = state.active.provider
    if not has_price(provider.name, provider.model):
        raise UserError(
            f"RunBudget(max_cost_usd=...) is set but no price is known for "
            f"{provider.name}:{provider.model}",
            hint="pip install 'lovia[otel]' (genai-prices), or register one with "
            "lovia.telemetry.set_price(provider, model, input_per_mtok=..., "
            "output_per_mtok=...).",
        )


def _cost_limited(state: RunState) -> bool:
    run: RunState | None = state
    while run is not None:
        budget = run.params.budget
        if budget is not None and budget.max_cost_usd is not None:
            return True
        run = run.params.parent.state if run.params.parent is not None else None
    return False


def _new_input(state: RunState, given: list[InputEntry]) -> list[InputEntry]:
    """On resume, input equal to the run's original input is a retry, not a new message.

    A task queue redelivering the same task must not duplicate the user's message;
    different input is delivered as steering (a mailbox message) at the next turn.
    """
    original = [
        e.content for e in state.new_entries() if isinstance(e, InputEntry) and e.origin == "input"
    ]
    if [e.content for e in given] == original:
        return []
    return given


def run_started(state: RunState, resumed: bool) -> ev.RunStarted:
    provider = resolve_provider(state.params.agent)
    return ev.RunStarted(
        run_id=state.run_id,
        agent=state.params.agent.name,
        turn=state.progress.turn,
        session_id=state.params.session_id,
        model=provider.model,
        provider=provider.name,
        resumed=resumed,
        attempt=state.attempt,
        trace_links=state.progress.trace_links,
        parent_run_id=state.params.parent.run_id if state.params.parent else None,
        parent_call_id=state.params.parent.call_id if state.params.parent else None,
        root_agent=_root_agent(state),
        description=state.params.agent.description,
        labels=tuple(state.params.labels.items()),
    )


def _root_agent(state: RunState) -> str | None:
    """A child run's top-level run's starting agent (None for a top-level run)."""
    link = state.params.parent
    if link is None:
        return None
    root = link.state
    while root.params.parent is not None:
        root = root.params.parent.state
    return root.params.agent.name


async def prepare(
    state: RunState,
    snapshot: RunSnapshot | None,
    stored: Progress | None,
    loaded: list[TranscriptEntry] | None = None,
) -> AsyncIterator[ev.Event]:
    """Everything before the first turn. The RunStarted event is emitted by the driver.
    ``stored``: the snapshot's progress (``restore``); ``loaded``: the session's history
    when it was already read (with its labels)."""
    if state.session is not None and state.params.session_id is not None:
        history = loaded
        if history is None:
            history = await state.session.load_session(state.params.session_id)
        if snapshot is not None:
            history = history[: snapshot.info.history_len]
        state.history = history
        state.transcript.extend(history)
    state.run_start = len(state.transcript)
    note_attempt_start(state, snapshot)
    if snapshot is not None and stored is not None:
        async for event in commit(state, "attempt"):  # at once: it may die soon
            yield event
        if snapshot.info.status != "running":  # the row said how the last attempt ended
            await _reopen(state, snapshot.info)
        async for event in _resume(state, snapshot, stored):
            yield event
        return
    async for event in activate(state, state.params.agent):
        yield event
    assert state.active is not None
    _check_cost_budget(state)
    state.repairs_left = state.params.agent.output_repairs
    new: list[TranscriptEntry] = [stamp(state, SystemEntry(content=state.active.system))]
    inputs = [stamp(state, e) for e in input_entries(state.params.input)]
    new.extend(inputs)
    state.transcript.extend(new)
    state.note_entries(new)
    begin = run_info(state) if state.checkpointer is not None else None
    async for event in commit(state, "start", begin=begin):  # the row and the records
        yield event
    if snapshot is not None and snapshot.info.status != "running":  # it failed at setup,
        assert begin is not None  # or was cancelled while queued: this run's row now
        await _reopen(state, begin)
    guards = state.active.input_guardrails
    if guards:  # (no generator for none: every run passes here)
        async for event in run_guardrails(state, "input", guards, inputs):
            yield event


async def _reopen(state: RunState, info: RunInfo) -> None:
    """Mark the row running again, so the store, ``lovia runs`` and the web say what the
    run does now (a second write, on resume only; fenced like every write).

    A cancel request stored since this worker took the run (``lovia cancel`` while it
    was loading) is read first and honoured: the row stays ``cancelled`` and the run
    stops at its next wait, instead of the reopened row wiping the request out."""
    cp = state.checkpointer
    assert cp is not None
    asked = await cancel_requests(cp, [state.run_id])
    if cancel_if_asked(state, asked.get(state.run_id)):
        return
    row = reopened(info, state.attempt)
    await cp.finish(row, None, fence=state.runtime.lease.token)


async def _resume(
    state: RunState, snapshot: RunSnapshot, stored: Progress
) -> AsyncIterator[ev.Event]:
    """Continue from the stored run: its entries and progress, its agent, its views."""
    state.transcript.extend(snapshot.entries())
    state.progress.usage.add(stored.usage)
    stored.usage = state.progress.usage  # the same object as ``ctx.usage``
    state.progress = stored
    agent = find_agent(state.params.agent, stored.agent or state.params.agent.name)
    if agent is None:
        raise UserError(
            f"run {state.run_id} stopped in agent {stored.agent!r}, which is not "
            "reachable from this agent's handoffs",
            hint="Resume with the same agent graph the run started with.",
        )
    async for event in activate(state, state.params.agent):
        yield event
    if agent is not state.params.agent:
        async for event in activate(state, agent):
            yield event
    _restore_views(state, snapshot, [state.params.agent, agent])
    state.repairs_left = agent.output_repairs
    for entry in _new_input(state, input_entries(state.params.input)):
        state.ctx.mailbox.put(entry)
    if state.trace_ids:
        state.note_state(agent.name, trace=":".join(state.trace_ids))
    state.resume_calls = open_calls(state.new_entries())


def _restore_views(state: RunState, snapshot: RunSnapshot, agents: list[Agent[Any, Any]]) -> None:
    """Continue the run's view-record chain and put each agent's context state back.

    The next view record is a delta against the last stored one; each agent's strategy
    gets its last view record through the optional ``restore`` hook (see
    ``lovia.view.base``), so the resumed run builds the view the crashed worker would have.
    """
    try:
        records = resolve_records(view_records(snapshot.records))
    except LoviaError:
        logger.warning(
            "run %s: stored view records do not resolve; views are re-decided",
            state.run_id,
            exc_info=True,
        )
        return
    if not records:
        return
    last = records[-1]
    state.hasher.resume(last)
    state.last_view_size = len(last.order) + len(last.injected)
    entries = list(state.transcript)
    done: set[int] = set()
    for agent in agents:
        active = state.runtime.activated.get(id(agent))
        if active is None or id(agent) in done or active.strategy is None:
            continue
        done.add(id(agent))
        mine = _last_of(records, agent.name)
        hook = getattr(active.strategy, "restore", None)
        if mine is None or not callable(hook):
            continue
        try:
            hook(active.strategy_state, mine, entries)
        except Exception:
            logger.warning(
                "run %s: restoring the context state of agent %r failed; it starts fresh",
                state.run_id,
                agent.name,
                exc_info=True,
            )
            active.strategy_state = active.strategy.new_state()


def _last_of(records: list[ViewRecord], agent: str) -> ViewRecord | None:
    return next((r for r in reversed(records) if r.agent == agent), None)
