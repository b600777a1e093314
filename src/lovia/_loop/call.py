"""ONE path for every model call lovia makes: main, repair, summary and what-if.

:func:`call_model` checks the run budget and the lease, emits ``ModelCallStarted``, streams the
provider (the run's watch armed around each read), prices the response, adds it to
the run's usage and emits ``MessageCompleted`` — or ``ModelCallFailed`` and re-raises.
Its last item is the call's outcome, :class:`Returned` (the response and the entries
``MessageCompleted`` carried), which the caller takes: nothing comes back through the
call object.
Tracing, metrics, hooks and budgets therefore see every call the same way; only
``purpose`` (``lovia.call.purpose`` on the ``chat`` span) tells them apart.

Calls made while the context strategy builds a view (summaries) run inside the
strategy's ``build``, which is awaited, not iterated: :class:`Relay` runs the build in
its own task and hands each event of those calls to the loop's generator, the call
waiting until the loop has emitted it (hooks and spans see it in real time).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Generator,
    Sequence,
)
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, cast

from .. import events as ev
from ..errors import StreamInterrupted
from ..model import (
    ModelRequest,
    ModelResponse,
    Provider,
    ReasoningChunk,
    RetryNotice,
    TextChunk,
    ToolCallChunk,
)
from ..pricing import price_call
from ..transcript import DeltaCleaner, TranscriptEntry, clean_text
from .lease import confirm_lease, lease_fresh
from .limits import cancelled_error, check_budget
from .share import budgeted_runs, reserve
from .spend import check_spend, note_usage, settle
from .state import EventBase, RunState
from .watch import RunWatch

__all__ = ["Done", "ModelCall", "Purpose", "Relay", "Returned", "call_model"]

logger = logging.getLogger("lovia.loop")

Purpose = Literal["main", "repair", "summary", "what_if", "eval"]
T = TypeVar("T")


@dataclass(slots=True)
class Done(Generic[T]):
    """The last item of a :class:`Relay` stream: the step's own result."""

    value: T


@dataclass(slots=True)
class Returned:
    """The outcome of :func:`call_model`, its last item: the response, priced, and the
    entries its ``MessageCompleted`` (or ``SummaryCompleted``) carried."""

    response: ModelResponse
    entries: Sequence[TranscriptEntry]


@dataclass(slots=True, kw_only=True)
class ModelCall:
    """One model call: what to send, to whom, why; how long it took and its span."""

    provider: Provider
    request: ModelRequest
    base: EventBase
    purpose: Purpose = "main"
    view_hash: str = ""
    compacted: bool = False
    deltas: bool = True
    """Emit streamed chunks as events (off for summaries: they are not the answer)."""
    ttfc: float | None = None
    """Seconds to the first streamed chunk (None when the call did not stream)."""
    duration: float = 0.0
    span: Any = None
    """The call's ``chat`` span once ``ModelCallStarted`` was emitted (None: not traced):
    its deltas and its end event are built with it (the emitter then copies none)."""


Record = Callable[[ModelResponse], Sequence[TranscriptEntry]]


async def call_model(
    call: ModelCall, state: RunState | None, record: Record | None = None
) -> AsyncIterator[ev.Event | Returned]:
    """Make ``call``: budget, events, pricing, usage; ends with its :class:`Returned`.
    ``state`` is None outside a run.

    ``record(response)`` returns the entries ``MessageCompleted`` carries (the main call
    appends them to the transcript there); default: the response's own entries.
    """
    hold = spend = response = None
    provider = call.provider
    if state is not None:  # each await only where it has work: a guard costs less
        check_budget(state, before="call")
        if not lease_fresh(state):  # a worker fenced out while stalled stops unpaid
            await confirm_lease(state)
        runs = budgeted_runs(state)
        if runs:  # parallel children share the budget
            hold = await reserve(state, runs, call.request, provider)
    try:
        if state is not None and state.params.labels:  # spend limits apply by label
            spend = await check_spend(state, call.request, provider)
        started = _started(call)
        yield started
        call.span = state.span_of(started) if state is not None else None
        t0 = time.perf_counter()
        try:
            async for item in _stream(call, state.runtime.watch if state is not None else None):
                if isinstance(item, ModelResponse):
                    response = item
                else:
                    yield item
        except (Exception, asyncio.CancelledError) as exc:
            yield _failed(call, _reported(state, exc), t0)
            raise
        assert response is not None  # _stream ends with the response or raises
        call.duration = time.perf_counter() - t0
        if not provider.profile.streaming:
            call.ttfc = None  # one-shot: "first chunk" would be the whole latency
        usage = response.usage
        cost = price_call(provider.name, response.model or provider.model, usage)
        usage.cost_usd, usage.unpriced = (0.0, 1) if cost is None else (cost, 0)
        if state is not None:
            state.progress.usage.add(usage)
            note_usage(state, call.purpose, provider.name, response.model or provider.model, usage)
    finally:
        if hold is not None:
            hold.release()  # the usage is counted: calls waiting for room check again
        if spend is not None:  # spend limits: the real cost replaces the estimate
            await settle(spend, response)
    assert response is not None
    entries = record(response) if record is not None else response.entries
    done = ev.SummaryCompleted if call.purpose == "summary" else ev.MessageCompleted
    yield done(
        **call.base,
        entries=entries,
        usage=usage,
        finish_reason=response.finish_reason,
        raw_finish_reason=response.raw_finish_reason,
        response_id=response.response_id,
        response_model=response.model,
        model=provider.model,
        provider=provider.name,
        time_to_first_chunk_s=call.ttfc,
        duration_s=call.duration,
        purpose=call.purpose,
        span=call.span,
    )
    yield Returned(response, entries)


async def _stream(
    call: ModelCall, watch: RunWatch | None
) -> AsyncIterator[ev.Event | ModelResponse]:
    """The provider's stream as events, and its response when it arrives; sets
    ``call.ttfc``. The run's watch (None outside a run) is armed while the provider is
    read, paused while an item is out. One generator for both: a generator per call
    costs more than the checks for ``armed``."""
    async with watch.armed() if watch is not None else nullcontext() as armed:
        t0 = time.perf_counter()
        stream = call.provider.stream(call.request)
        response: ModelResponse | None = None
        first = False
        clean = DeltaCleaner()  # a surrogate pair split across chunks reaches consumers whole
        deltas = call.deltas
        try:
            async for item in stream:
                if isinstance(item, ModelResponse):
                    response = item
                    yield item  # known at once: spend is settled with it whatever follows
                    if deltas:
                        for held in _held_back(call.base, clean, call.span):
                            if armed is not None:
                                armed.pause()
                            yield held
                            if armed is not None:
                                armed.resume()
                    continue
                retry = isinstance(item, RetryNotice)
                if not first and not retry:
                    first = True
                    call.ttfc = time.perf_counter() - t0
                if deltas or retry:  # a chunk nobody sees is not made an event
                    event = _delta(call.base, item, clean, call.span)
                    if armed is not None:
                        armed.pause()
                    yield event
                    if armed is not None:
                        armed.resume()
        except (Exception, asyncio.CancelledError) as exc:
            await _close_quietly(stream)
            if first:
                exc._lovia_partial = True  # pyright: ignore[reportAttributeAccessIssue] -- a marker model_step reads: no retry after partial output
            raise
        if response is None:
            raise StreamInterrupted(
                "the provider's stream ended without a final response",
                hint="Check the provider adapter or server; this is a bug.",
            )


def _reported(state: RunState | None, exc: BaseException) -> BaseException:
    """The error the events report: the run's own cancellation is ``RunCancelled``."""
    if (
        isinstance(exc, asyncio.CancelledError)
        and state is not None
        and state.ctx.cancel_token.cancelled
    ):
        return cancelled_error(state)
    return exc


def _started(call: ModelCall) -> ev.ModelCallStarted:
    provider = call.provider
    return ev.ModelCallStarted(
        **call.base,
        model=provider.model,
        provider=provider.name,
        view_hash=call.view_hash,
        stream=provider.profile.streaming,
        settings=call.request.settings.to_dict(),
        server_address=getattr(provider, "server_address", None),
        server_port=getattr(provider, "server_port", None),
        compacted=call.compacted,
        request=call.request,
        purpose=call.purpose,
    )


def _failed(call: ModelCall, exc: BaseException, t0: float) -> ev.ModelCallFailed:
    return ev.ModelCallFailed(
        **call.base,
        model=call.provider.model,
        provider=call.provider.name,
        error_type=type(exc).__name__,
        message=clean_text(str(exc)),  # a server's text may carry lone surrogates
        error=exc,
        duration_s=time.perf_counter() - t0,
        purpose=call.purpose,
        span=call.span,
    )


def _delta(
    base: EventBase,
    item: TextChunk | ToolCallChunk | ReasoningChunk | RetryNotice,
    clean: DeltaCleaner,
    span: Any,
) -> ev.Event:
    """The event for one streamed chunk; text is cleaned. ``span``: the call's chat span
    (every chunk's span)."""
    if isinstance(item, TextChunk):
        return ev.TextDelta(**base, text=clean.feed("text", item.text), span=span)
    if isinstance(item, ToolCallChunk):
        return ev.ToolCallDelta(
            **base,
            index=item.index,
            call_id=_clean(item.call_id),  # server-supplied, like the name
            name=_clean(item.name),
            arguments=clean.feed(item.index, item.arguments),
            span=span,
        )
    if isinstance(item, ReasoningChunk):
        return ev.ReasoningDelta(**base, text=clean.feed("reasoning", item.text), span=span)
    return ev.ProviderRetry(
        **base,
        attempt=item.attempt,
        error_type=type(item.error).__name__,
        message=clean_text(str(item.error)),
        delay_s=item.delay,
        span=span,
    )


def _clean(text: str | None) -> str | None:
    return None if text is None else clean_text(text)


def _held_back(base: EventBase, clean: DeltaCleaner, span: Any) -> list[ev.Event]:
    """Deltas for half surrogate pairs that never got their other half (U+FFFD each)."""
    out: list[ev.Event] = []
    for key, text in clean.flush().items():
        if key == "text":
            out.append(ev.TextDelta(**base, text=text, span=span))
        elif key == "reasoning":
            out.append(ev.ReasoningDelta(**base, text=text, span=span))
        else:
            out.append(ev.ToolCallDelta(**base, index=key, arguments=text, span=span))
    return out


async def _close_quietly(stream: Any) -> None:
    try:
        await stream.aclose()
    except BaseException:
        logger.debug("provider stream failed to close", exc_info=True)


class Relay:
    """Runs an awaited step (the strategy's ``build``) in its own task and yields the
    events its model calls :meth:`send`, one at a time, to the loop's generator.

    :meth:`run_inline` first steps a coroutine in the loop's own task: a build that needs
    no model call (the common case) finishes there, with no task and no loop round-trips.
    Only for steps whose one suspension point is the ``summarize`` callable, which calls
    :meth:`detach` first: the step then moves to its own task before any I/O starts.
    """

    __slots__ = ("_inline", "_queue")

    def __init__(self) -> None:
        self._queue: asyncio.Queue[tuple[ev.Event, asyncio.Future[None]] | None] = asyncio.Queue()
        self._inline = False

    async def detach(self) -> None:
        """Called by a step before its first model call: leaves the inline first step."""
        if self._inline:
            await asyncio.sleep(0)  # suspends: run_inline hands the step to a task

    async def send(self, event: ev.Event) -> None:
        """Hand ``event`` to the loop; return once the loop has emitted it."""
        emitted = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((event, emitted))
        await emitted

    def step_inline(self, step: Coroutine[Any, Any, T]) -> Done[T] | Awaitable[T]:
        """Step ``step`` here until it finishes (returns its :class:`Done`) or detaches
        (returns the rest of it, for :meth:`run`). No generator: the common case costs
        the loop no async generator at all."""
        self._inline = True
        try:
            first = step.send(None)
        except StopIteration as stop:
            return Done(cast("T", stop.value))
        finally:
            self._inline = False
        return _resume(step, first)

    async def run_inline(self, step: Coroutine[Any, Any, T]) -> AsyncGenerator[ev.Event | Done[T]]:
        """:meth:`run`, first stepping ``step`` here until it finishes or detaches."""
        rest = self.step_inline(step)
        if isinstance(rest, Done):
            yield rest
            return
        async for item in self.run(rest):
            yield item

    async def run(self, step: Awaitable[T]) -> AsyncGenerator[ev.Event | Done[T]]:
        """Yield the events sent while ``step`` runs; then its result (:class:`Done`)."""
        task = asyncio.ensure_future(step)
        task.add_done_callback(lambda _: self._queue.put_nowait(None))
        try:
            while (item := await self._queue.get()) is not None:
                event, emitted = item
                try:
                    yield event
                finally:
                    if not emitted.done():
                        emitted.set_result(None)
        finally:
            if not task.done():
                task.cancel()
        yield Done(task.result())


class _Continue(Generic[T]):
    """Awaits the rest of a coroutine that was stepped once (its first yield given)."""

    __slots__ = ("_coro", "_first")

    def __init__(self, coro: Coroutine[Any, Any, T], first: Any) -> None:
        self._coro = coro
        self._first = first

    def __await__(self) -> Generator[Any, Any, T]:
        coro, value = self._coro, self._first
        while True:  # what ``yield from coro`` does, resumed after its first step
            try:
                sent = yield value
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:
                try:
                    value = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    value = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


async def _resume(coro: Coroutine[Any, Any, T], first: Any) -> T:
    return await _Continue(coro, first)
