"""Phases 3–5 of a turn: build the view, stream the model's answer, record it.

A context overflow before any content lets the strategy compact harder and retries the
call (``MAX_OVERFLOW_RETRIES``); after that the overflow ends the run. Provider retries
happen inside the provider and show up here as ``ProviderRetry`` events; they are not
turns.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from .. import events as ev
from ..errors import ContextOverflow, StreamInterrupted
from ..providers.base import (
    ModelRequest,
    ModelResponse,
    Provider,
    ReasoningChunk,
    RetryNotice,
    StreamItem,
    TextChunk,
    ToolCallChunk,
)
from ..telemetry.pricing import price_usage
from ..transcript import DeltaCleaner, InputEntry, ToolCallEntry, TranscriptEntry
from ..view.base import BuiltView, ViewInput, ViewRecord
from ..view.record import view_parts
from .checkpoint import save_progress
from .state import ActiveAgent, EventBase, RunState

__all__ = ["MAX_OVERFLOW_RETRIES", "model_step", "stamp"]

logger = logging.getLogger("lovia.loop")

MAX_OVERFLOW_RETRIES = 1


def stamp(state: RunState, entry: Any) -> Any:
    """Give an entry this run's id, turn and active agent."""
    assert state.active is not None
    return entry.model_copy(
        update={"run_id": state.run_id, "turn": state.turn, "agent": state.active.agent.name}
    )


async def model_step(state: RunState) -> AsyncIterator[ev.Event]:
    """Build the view and call the model; on overflow compact harder and retry once."""
    attempt = 1
    while True:
        request: list[tuple[ModelRequest, str]] = []
        async for event in _build_view(state, attempt, request):
            yield event
        try:
            async for event in _call_model(state, *request[0], attempt):
                yield event
        except ContextOverflow as exc:
            if attempt > MAX_OVERFLOW_RETRIES or getattr(exc, "_lovia_partial", False):
                raise _overflow_error(exc, attempt) from exc
            attempt += 1
            continue
        break
    async for event in _record_response(state):
        yield event


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
    out: list[TranscriptEntry] = []
    for plugin_name, injector in active.injectors:
        try:
            result = injector(state.ctx)
            if hasattr(result, "__await__"):
                result = await result  # type: ignore[misc]
        except Exception:
            logger.exception("view injector of plugin %r failed; skipped this turn", plugin_name)
            continue
        for entry in result or ():  # type: ignore[union-attr]
            out.append(_as_injected(state, entry))
    return out


def _as_injected(state: RunState, entry: Any) -> TranscriptEntry:
    if isinstance(entry, str):
        entry = InputEntry(role="user", content=entry, origin="injected")
    elif isinstance(entry, InputEntry) and entry.origin == "input":
        entry = entry.model_copy(update={"origin": "injected"})
    return stamp(state, entry)


async def _summarize(
    state: RunState,
    entries: Sequence[TranscriptEntry],
    prompt: str,
    provider: Provider | None = None,
) -> str:
    """Ask the active model (or ``provider``) for a summary (used by compaction)."""
    assert state.active is not None
    request = ModelRequest(system=prompt, messages=list(entries))
    text: list[str] = []
    async for item in (provider or state.active.provider).stream(request):
        if isinstance(item, ModelResponse):
            text = [getattr(e, "text", "") for e in item.entries if e.type == "text"]
            state.usage.add(item.usage)
    return "".join(text)


async def _build_view(
    state: RunState, attempt: int, out: list[tuple[ModelRequest, str]]
) -> AsyncIterator[ev.Event]:
    active = state.active
    assert active is not None and active.strategy is not None
    name = active.agent.name
    yield ev.ViewStarted(**state.base(), attempt=attempt)
    inp = ViewInput(
        entries=state.transcript.view(),
        system=active.system,
        agent_name=name,
        profile=active.provider.profile,
        turn=state.turn,
        attempt=attempt,
        last_input_tokens=state.last_input_tokens,
        last_view_size=state.last_view_size,
        result_caps=_result_caps(active),
    )

    async def summarize(
        entries: Sequence[TranscriptEntry], prompt: str, provider: Provider | None = None
    ) -> str:
        return await _summarize(state, entries, prompt, provider)

    built = await active.strategy.build(inp, active.strategy_state, summarize)
    for kind, ids in built.compactions:
        yield ev.CompactionApplied(**state.base(), kind=kind, entry_ids=ids)
    injected = await _run_injectors(state, active)
    request = _request(state, active, built, injected)
    record = _record(state, active, built, injected, request, attempt)
    state.last_view_size = len(request.messages)
    out.append((request, record.hash))
    yield ev.ViewBuilt(
        **state.base(),
        view_hash=record.hash,
        entries=len(request.messages),
        injected=len(injected),
        compacted=record.compacted,
        record=record,
        attempt=attempt,
    )


def _result_caps(active: ActiveAgent) -> dict[str, int]:
    """Tool name -> the tool's own ``max_result_chars`` (the strategy stubs above it)."""
    return {n: t.max_result_chars for n, t in active.tools.items() if t.max_result_chars}


def _request(
    state: RunState, active: ActiveAgent, built: BuiltView, injected: list[TranscriptEntry]
) -> ModelRequest:
    messages = list(built.messages)
    if active.handoff_filter is not None:
        messages = list(active.handoff_filter(messages))
    messages.extend(injected)
    specs = active.specs
    if built.evicted and "recall_tool_result" not in active.tools:
        from ..view import recall_tool

        recall = recall_tool()
        active.tools[recall.name] = recall
        active.specs = specs = (*specs, recall.spec)
    output = active.output
    schema = output.schema if output is not None and output.native else None
    return ModelRequest(
        system=active.system,
        messages=messages,
        tools=specs,
        settings=active.settings,
        output_schema=schema,
    )


def _record(
    state: RunState,
    active: ActiveAgent,
    built: BuiltView,
    injected: list[TranscriptEntry],
    request: ModelRequest,
    attempt: int,
) -> ViewRecord:
    order, replaced = built.order, built.replaced
    if active.handoff_filter is not None:  # the filter may drop or rewrite entries
        shown = request.messages[: len(request.messages) - len(injected)]
        order, replaced = view_parts(built, shown)
    compacted = built.compacted
    if compacted is None:
        compacted = bool(built.replaced) or built.summary is not None
    record = state.hasher.record(
        request=request,
        order=order,
        replaced=replaced,
        injected=injected,
        run_id=state.run_id,
        turn=state.turn,
        attempt=attempt,
        agent=active.agent.name,
        summary=built.summary,
        compacted=compacted,
        model=active.provider.model,
        provider=active.provider.name,
    )
    if state.checkpointer is not None:
        state.note("view", record.to_data())
    return record


def _delta(base: EventBase, item: StreamItem, clean: DeltaCleaner) -> ev.Event | None:
    """The event for one streamed chunk (None for the final response); text is cleaned."""
    if isinstance(item, TextChunk):
        return ev.TextDelta(**base, text=clean.feed("text", item.text))
    if isinstance(item, ToolCallChunk):
        return ev.ToolCallDelta(
            **base,
            index=item.index,
            call_id=item.call_id,
            name=item.name,
            arguments=clean.feed(item.index, item.arguments),
        )
    if isinstance(item, ReasoningChunk):
        return ev.ReasoningDelta(**base, text=clean.feed("reasoning", item.text))
    if isinstance(item, RetryNotice):
        return ev.ProviderRetry(
            **base,
            attempt=item.attempt,
            error_type=type(item.error).__name__,
            message=str(item.error),
            delay_s=item.delay,
        )
    return None


def _held_back(base: EventBase, clean: DeltaCleaner) -> list[ev.Event]:
    """Deltas for half surrogate pairs that never got their other half (U+FFFD each)."""
    out: list[ev.Event] = []
    for key, text in clean.flush().items():
        if key == "text":
            out.append(ev.TextDelta(**base, text=text))
        elif key == "reasoning":
            out.append(ev.ReasoningDelta(**base, text=text))
        else:
            out.append(ev.ToolCallDelta(**base, index=key, arguments=text))
    return out


def _failed(
    base: EventBase, provider: Provider, exc: BaseException, t0: float
) -> ev.ModelCallFailed:
    return ev.ModelCallFailed(
        **base,
        model=provider.model,
        provider=provider.name,
        error_type=type(exc).__name__,
        message=str(exc),
        error=exc,
        duration_s=time.perf_counter() - t0,
    )


def _started(
    state: RunState, provider: Provider, request: ModelRequest, view_hash: str, attempt: int
) -> ev.ModelCallStarted:
    return ev.ModelCallStarted(
        **state.base(),
        model=provider.model,
        provider=provider.name,
        view_hash=view_hash,
        stream=provider.profile.streaming,
        settings=request.settings.to_dict(),
        server_address=getattr(provider, "server_address", None),
        server_port=getattr(provider, "server_port", None),
        compacted=attempt > 1,
        request=request,
    )


async def _call_model(
    state: RunState, request: ModelRequest, view_hash: str, attempt: int
) -> AsyncIterator[ev.Event]:
    """Stream one model call (phase 4); the guard makes a cancel interrupt the read."""
    active = state.active
    assert active is not None and state.guard is not None
    provider, guard, base = active.provider, state.guard, state.base()
    yield _started(state, provider, request, view_hash, attempt)
    t0 = time.perf_counter()
    first: float | None = None
    response: ModelResponse | None = None
    stream = provider.stream(request)
    clean = DeltaCleaner()
    try:
        while True:
            guard.arm()
            try:
                item = await anext(stream)
            except StopAsyncIteration:
                break
            finally:
                guard.disarm()
            event = _delta(base, item, clean)
            if event is None:
                response = item  # type: ignore[assignment]
                for held in _held_back(base, clean):
                    yield held
                continue
            if first is None and not isinstance(item, RetryNotice):
                first = time.perf_counter()
            yield event
    except (Exception, asyncio.CancelledError) as exc:
        await _close_quietly(stream)
        if first is not None:
            exc._lovia_partial = True  # type: ignore[attr-defined]
        yield _failed(base, provider, exc, t0)
        raise
    if response is None:
        exc = StreamInterrupted(
            "the provider's stream ended without a final response",
            hint="Check the provider adapter or server; this is a bug.",
        )
        yield _failed(base, provider, exc, t0)
        raise exc
    state.response = (response, first - t0 if first else None, time.perf_counter() - t0)


async def _close_quietly(stream: Any) -> None:
    try:
        await stream.aclose()
    except BaseException:
        logger.debug("provider stream failed to close", exc_info=True)


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


async def _record_response(state: RunState) -> AsyncIterator[ev.Event]:
    """Phase 5: append the answer to the transcript, then checkpoint."""
    active = state.active
    assert active is not None
    response, ttfc, duration = state.response
    entries = [stamp(state, e) for e in _unique_call_ids(state, response.entries)]
    state.transcript.extend(entries)
    usage = response.usage
    usage.cost_usd = price_usage(
        active.provider.name, response.model or active.provider.model, usage
    )
    state.usage.add(usage)
    if not usage.missing:
        state.last_input_tokens = usage.input_tokens
    state.note_entries(entries)
    state.note(
        "state",
        {
            "turn": state.turn,
            "usage": state.usage.to_dict(),
            "agent": active.agent.name,
            "last_input_tokens": state.last_input_tokens,
        },
    )
    yield ev.MessageCompleted(
        **state.base(),
        entries=entries,
        usage=usage,
        finish_reason=response.finish_reason,
        raw_finish_reason=response.raw_finish_reason,
        response_id=response.response_id,
        response_model=response.model,
        model=active.provider.model,
        provider=active.provider.name,
        time_to_first_chunk_s=ttfc,
        duration_s=duration,
    )
    async for event in save_progress(state):
        yield event
