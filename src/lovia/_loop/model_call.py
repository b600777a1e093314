"""Phases 3–5 of a turn: build the view, stream the model's answer, record it.

A context overflow before any content lets the strategy compact harder and retries the
call (``MAX_OVERFLOW_RETRIES``); after that the overflow ends the run. Provider retries
happen inside the provider and show up here as ``ProviderRetry`` events; they are not
turns.
"""

from __future__ import annotations

import inspect
import logging
import reprlib
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, cast, get_args

from .. import events as ev
from .._observers import OBSERVERS
from ..errors import ContextOverflow
from ..model import ModelRequest, ModelResponse, Provider
from ..stores.records import ViewNote
from ..transcript import (
    EntryStamp,
    InputEntry,
    TextEntry,
    ToolCallEntry,
    TranscriptEntry,
    stamped,
)
from ..view.base import BuiltView, FullView, ViewInput, ViewRecord
from ..view.compaction import Compaction
from ..view.record import ViewHasher, view_parts
from .call import Done, ModelCall, Purpose, Relay, Returned, call_model
from .lifelog import note_failed_call
from .outcomes import Answer
from .state import ActiveAgent, RunState

__all__ = ["MAX_OVERFLOW_RETRIES", "model_step", "stamp"]

logger = logging.getLogger("lovia.loop")

MAX_OVERFLOW_RETRIES = 1


def stamp(state: RunState, entry: Any) -> Any:
    """Give an entry this run's id, turn and active agent (a copy: entries are frozen)."""
    assert state.active is not None
    return stamped(entry, state.run_id, state.progress.turn, state.active.agent.name)


async def model_step(state: RunState) -> AsyncIterator[ev.Event | Answer]:
    """Build the view and call the model; on overflow compact harder and retry once.

    Ends with the :class:`Answer` (its entries appended and noted, not yet written: the
    driver commits them)."""
    attempt = 1
    purpose = _purpose(state)
    while True:
        started = ev.ViewStarted(**state.base(), attempt=attempt)  # phase 3: the view
        yield started
        span = state.span_of(started)  # the view's span: ViewBuilt is built with it
        work = _start_view(state, attempt)
        if not isinstance(work.step, Done):  # it awaits more than it did inline
            async for event in _finish_build(work):
                yield event
        assert isinstance(work.step, Done)
        for event in _compactions(state, work.step.value):
            yield event
        active = state.active
        assert active is not None
        injected = await _run_injectors(state, active) if active.injectors else []
        built, view = _end_view(state, work, injected, span)
        yield built
        call = _main_call(state, view, attempt, purpose)
        answer: Returned | None = None
        retries = 0
        try:  # phases 4-5: stream the answer; record() appends it to the transcript
            async for event in call_model(call, state, partial(_append_answer, state)):
                if isinstance(event, Returned):
                    answer = event
                    continue
                if isinstance(event, ev.ProviderRetry):
                    retries += 1
                elif isinstance(event, ev.ModelCallFailed):  # beside its view record
                    note_failed_call(
                        state, event, view_hash=call.view_hash, attempt=attempt, retries=retries
                    )
                yield event
        except ContextOverflow as exc:
            if attempt > MAX_OVERFLOW_RETRIES or getattr(exc, "_lovia_partial", False):
                raise _overflow_error(exc, attempt) from exc
            attempt += 1
            continue
        assert answer is not None  # call_model ends with its outcome or raises
        yield Answer(answer.response, tuple(answer.entries))
        return


def _purpose(state: RunState) -> Purpose:
    """``repair`` when this turn answers the structured-output repair request."""
    transcript = state.transcript
    for i in range(len(transcript) - 1, state.run_start - 1, -1):  # the turn's new input
        entry = transcript[i]
        if not isinstance(entry, InputEntry):
            break
        if entry.origin == "repair":
            return "repair"
    return "main"


def _overflow_error(exc: ContextOverflow, attempts: int) -> ContextOverflow:
    sizes = f" ({exc.tokens} tokens > limit {exc.limit})" if exc.tokens and exc.limit else ""
    err = ContextOverflow(
        f"the view still exceeds the model's context window after {attempts} attempt(s)"
        f"{sizes}: {exc.message}",
        hint="Use a model with a larger window, lower Compaction thresholds, or shorten "
        "tool results (max_result_chars).",
        tokens=exc.tokens,
        limit=exc.limit,
        status=exc.status,
        provider=exc.provider,
    )
    return err


async def _run_injectors(state: RunState, active: ActiveAgent) -> list[TranscriptEntry]:
    """Every injector's entries for this view; an injector never aborts a run:
    one that raises or returns something unusable is logged by name and skipped. A
    cancel or the run's deadline interrupts one that hangs, and ends the run."""
    out: list[TranscriptEntry] = []
    for plugin_name, injector in active.injectors:
        name = getattr(injector, "__qualname__", None) or repr(injector)
        try:
            result = injector(state.ctx)
            if inspect.isawaitable(result):
                assert state.runtime.watch is not None
                result = await state.runtime.watch.wait(result)  # a stalled retrieval
        except Exception:
            if state.runtime.watch is not None and state.runtime.watch.stopped is not None:
                raise  # the run's cancel or deadline: not the injector's failure
            logger.exception(
                "view injector %s of plugin %r failed; skipped this turn", name, plugin_name
            )
            continue
        items = _injected_items(result)
        if items is None:
            logger.error(
                "view injector %s of plugin %r returned %s %s; it must return a str, a "
                "TranscriptEntry, a list of them, or None; skipped this turn",
                name,
                plugin_name,
                type(result).__name__,
                reprlib.repr(result),
            )
            continue
        out.extend(_as_injected(state, entry) for entry in items)
    return out


_ENTRY_TYPES: tuple[type, ...] = get_args(get_args(TranscriptEntry)[0])
"""The entry classes of the TranscriptEntry union (for isinstance checks)."""


def _injected_items(result: Any) -> list[Any] | None:
    """What an injector returned, as a list of reminders/entries (None: unusable)."""
    if result is None or (isinstance(result, str) and not result.strip()):
        return []  # nothing this turn (an empty reminder would be an empty message)
    if isinstance(result, (str, *_ENTRY_TYPES)):
        return [result]  # a bare str is one reminder, not one message per character
    items = _as_list(result)
    if items is not None and all(isinstance(i, (str, *_ENTRY_TYPES)) for i in items):
        return items
    return None


def _as_list(value: Any) -> list[Any] | None:
    return list(cast("Sequence[Any]", value)) if isinstance(value, (list, tuple)) else None


def _as_injected(state: RunState, entry: Any) -> TranscriptEntry:
    if isinstance(entry, str):
        entry = InputEntry(role="user", content=entry, origin="injected")
    elif isinstance(entry, InputEntry) and entry.origin == "input":
        entry = entry.model_copy(update={"origin": "injected"})
    return stamp(state, entry)


async def _summarize(
    state: RunState,
    relay: Relay,
    entries: Sequence[TranscriptEntry],
    prompt: str,
    provider: Provider | None = None,
    views: list[ViewRecord] | None = None,
) -> str:
    """A summary for compaction, asked of the active model (or ``provider``): a model
    call like any other (events through ``relay``, usage, cost, budget). Its view is
    recorded and hashed like a main call's (appended to ``views`` before it is sent)."""
    assert state.active is not None
    provider = provider or state.active.provider
    request = ModelRequest(system=prompt, messages=list(entries))
    view_hash = ""
    if views_read(state):
        record = _summary_record(state, request, provider)
        view_hash = record.hash
        if views is not None:
            views.append(record)
    call = ModelCall(
        provider=provider,
        request=request,
        base=state.base(),
        purpose="summary",
        view_hash=view_hash,
        deltas=False,
    )
    out: Returned | None = None
    async for item in call_model(call, state):
        if isinstance(item, Returned):
            out = item
        else:
            await relay.send(item)
    assert out is not None  # call_model ends with its outcome or raises
    return "".join(e.text for e in out.response.entries if isinstance(e, TextEntry))


def _summary_record(state: RunState, request: ModelRequest, provider: Provider) -> ViewRecord:
    """The self-contained view record of a summary call: transcript entries by id, the
    rest (the previous summary, stubs, the request to summarize) in full."""
    assert state.active is not None
    known = {id(e) for e in state.transcript}
    return ViewHasher().record(
        request=request,
        order=[e.id for e in request.messages],
        replaced={e.id: e for e in request.messages if id(e) not in known},
        injected=(),
        run_id=state.run_id,
        turn=state.progress.turn,
        attempt=1,
        agent=state.active.agent.name,
        model=provider.model,
        provider=provider.name,
    )


_INLINE: frozenset[type] = frozenset({Compaction, FullView})
"""Strategies whose ``build`` suspends only in ``summarize`` (see ``Relay.run_inline``)."""


@dataclass(slots=True)
class PreparedView:
    """Phase 3's product: the request to send and the hash of its view."""

    request: ModelRequest
    view_hash: str


@dataclass(slots=True)
class ViewWork:
    """Phase 3 under way: the strategy's build (its :class:`Done` once it returned)."""

    step: Awaitable[BuiltView] | Done[BuiltView]
    relay: Relay
    summaries: list[ViewRecord]
    """The view records of the summaries it asked for."""
    attempt: int


def _start_view(state: RunState, attempt: int) -> ViewWork:
    """Phase 3 begins (``ViewStarted`` emitted): the strategy builds the view, inline
    when it awaits nothing but ``summarize`` and asks for no summary (the common case:
    then no generator is made for it)."""
    active = state.active
    assert active is not None and active.strategy is not None
    inp = ViewInput(
        entries=state.transcript.view(),
        system=active.system,
        agent_name=active.agent.name,
        profile=active.provider.profile,
        turn=state.progress.turn,
        attempt=attempt,
        last_input_tokens=state.progress.last_input_tokens,
        last_view_size=state.last_view_size,
        result_caps=_result_caps(active),
    )
    relay = Relay()
    summaries: list[ViewRecord] = []

    async def summarize(
        entries: Sequence[TranscriptEntry], prompt: str, provider: Provider | None = None
    ) -> str:
        await relay.detach()
        return await _summarize(state, relay, entries, prompt, provider, summaries)

    strategy = active.strategy
    step: Awaitable[BuiltView] | Done[BuiltView]
    step = strategy.build(inp, active.strategy_state, summarize)
    # lovia's own strategies await nothing but summarize: their build runs inline
    if type(strategy) in _INLINE and inspect.iscoroutine(step):
        step = relay.step_inline(step)
    return ViewWork(step, relay, summaries, attempt)


async def _finish_build(work: ViewWork) -> AsyncIterator[ev.Event]:
    """A build that awaits more than it did inline: the events its summaries send."""
    assert not isinstance(work.step, Done)
    async for item in work.relay.run(work.step):
        if isinstance(item, Done):
            work.step = item
        else:
            yield item


def _compactions(state: RunState, built: BuiltView) -> list[ev.CompactionApplied]:
    before, after = built.tokens_before, built.tokens_after
    return [
        ev.CompactionApplied(
            **state.base(), kind=kind, entry_ids=ids, tokens_before=before, tokens_after=after
        )
        for kind, ids in built.compactions
    ]


def _end_view(
    state: RunState, work: ViewWork, injected: list[TranscriptEntry], span: Any
) -> tuple[ev.ViewBuilt, PreparedView]:
    """Phase 3 ends: the request, its record (when someone reads it) and ``ViewBuilt``."""
    active = state.active
    assert active is not None and isinstance(work.step, Done)
    built = work.step.value
    if built.evicted:  # a tool result was stubbed: the model may read it back
        _add_recall_tool(active)
    stamp = EntryStamp(run_id=state.run_id, turn=state.progress.turn, agent=active.agent.name)
    request = _request(active, built, injected, stamp)
    compacted = _compacted(built)
    record = None
    if views_read(state):
        record = _record(
            state, active, built, injected, request, work.attempt, work.summaries, compacted
        )
    state.last_view_size = len(request.messages)
    view_hash = record.hash if record is not None else ""
    event = ev.ViewBuilt(
        **state.base(),
        view_hash=view_hash,
        entries=len(request.messages),
        injected=len(injected),
        compacted=compacted,
        record=record,
        attempt=work.attempt,
        span=span,
    )
    return event, PreparedView(request, view_hash)


def views_read(state: RunState) -> bool:
    """Whether anyone can read this run's view records and hashes: a store, a tracer, a
    stream's consumer, a hook or an observer: whoever sees the chunks (``_deltas_seen``),
    and a store or a tracer (known at the start). Nobody, under ``Runner.run`` of an
    agent without hooks: its views are neither hashed nor recorded. Once true, true for
    the run."""
    runtime = state.runtime
    if not runtime.views_read and _deltas_seen(state):
        runtime.views_read = True
    return runtime.views_read


def _compacted(built: BuiltView) -> bool:
    """Whether the view differs from the transcript (the strategy says, or it stubbed
    or summarized)."""
    if built.compacted is not None:
        return built.compacted
    return bool(built.replaced) or built.summary is not None


def _result_caps(active: ActiveAgent) -> dict[str, int]:
    """Tool name -> the tool's own ``max_result_chars`` (the strategy stubs above it)."""
    return {n: t.max_result_chars for n, t in active.tools.items() if t.max_result_chars}


def _add_recall_tool(active: ActiveAgent) -> None:
    """Give the active agent ``recall_tool_result`` (once) for the rest of the run."""
    if "recall_tool_result" not in active.tools:
        from ..view import recall_tool

        recall = recall_tool()
        active.tools[recall.name] = recall
        active.specs = (*active.specs, recall.spec)


def _request(
    active: ActiveAgent, built: BuiltView, injected: list[TranscriptEntry], stamp: EntryStamp
) -> ModelRequest:
    """The request for this view (pure: reads the active agent, changes nothing);
    ``stamp``: what its answer's entries are recorded with."""
    messages = list(built.messages)
    if active.handoff_filter is not None:
        messages = list(active.handoff_filter(messages))
    messages.extend(injected)
    specs = active.specs
    output = active.output
    schema = output.schema if output is not None and output.native else None
    return ModelRequest(
        system=active.system,
        messages=messages,
        tools=specs,
        settings=active.settings,
        output_schema=schema,
        stamp=stamp,
    )


def _record(
    state: RunState,
    active: ActiveAgent,
    built: BuiltView,
    injected: list[TranscriptEntry],
    request: ModelRequest,
    attempt: int,
    summaries: Sequence[ViewRecord],
    compacted: bool,
) -> ViewRecord:
    order, replaced = built.order, built.replaced
    if active.handoff_filter is not None:  # the filter may drop or rewrite entries
        shown = request.messages[: len(request.messages) - len(injected)]
        order, replaced = view_parts(built, shown)
    record = state.hasher.record(
        request=request,
        order=order,
        replaced=replaced,
        injected=injected,
        run_id=state.run_id,
        turn=state.progress.turn,
        attempt=attempt,
        agent=active.agent.name,
        summary=built.summary,
        compacted=compacted,
        model=active.provider.model,
        provider=active.provider.name,
        summary_views=[s.to_data() for s in summaries],
    )
    if state.checkpointer is not None:
        state.note(ViewNote(record))
    return record


def _main_call(state: RunState, view: PreparedView, attempt: int, purpose: Purpose) -> ModelCall:
    """The turn's model call for ``view`` (a retry after an overflow is ``compacted``)."""
    active = state.active
    assert active is not None
    return ModelCall(
        provider=active.provider,
        request=view.request,
        base=state.base(),
        purpose=purpose,
        view_hash=view.view_hash,
        compacted=attempt > 1,
        deltas=_deltas_seen(state),
    )


def _deltas_seen(state: RunState) -> bool:
    """Whether anyone sees the chunks of a streamed answer: the stream's consumer, a hook
    or an observer. ``Runner.run``'s caller awaits only the result, and the tracer does
    nothing with chunks."""
    return not state.params.drained or bool(OBSERVERS) or state.hooked()


def _unique_call_ids(state: RunState, entries: Sequence[Any]) -> list[Any]:
    """Give every tool call an id unique in the transcript.

    Pairing, the tool ledger and idempotency keys rely on it; some servers send empty or
    repeated ids (``call_0`` every turn). A renamed call keeps the provider's id as a
    prefix; the provider gets the new id back with the result.
    """
    out: list[Any] = []
    seen: set[str] = set()
    for entry in entries:
        if isinstance(entry, ToolCallEntry):
            call_id = entry.call_id
            if not call_id or call_id in seen or state.transcript.call(call_id) is not None:
                base, n = call_id or "call", 2
                while f"{base}_{n}" in seen or state.transcript.call(f"{base}_{n}"):
                    n += 1
                call_id = f"{base}_{n}"
                entry = entry.model_copy(update={"call_id": call_id})
            seen.add(call_id)
        out.append(entry)
    return out


def _append_answer(state: RunState, response: ModelResponse) -> list[TranscriptEntry]:
    """Phase 5: append the answer to the transcript and note it (the driver commits it);
    the entries go into ``MessageCompleted`` and the call's ``Returned``."""
    active = state.active
    assert active is not None
    entries = [stamp(state, e) for e in _unique_call_ids(state, response.entries)]
    state.transcript.extend(entries)
    if not response.usage.missing:
        state.progress.last_input_tokens = response.usage.input_tokens
    state.note_entries(entries)
    state.note_state(active.agent.name)
    return entries
