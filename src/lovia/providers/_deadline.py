"""Deadlines of one model call: :class:`StreamLimits` (the configuration) and the
:class:`Watchdog` that enforces them for :class:`~lovia.providers._http.HttpSeam`.

``timeout=`` on a provider is socket level: a server that trickles a byte now and then,
or sends only ``: keep-alive`` comments, never trips it. The watchdog holds the call
deadline (retries included) and the idle deadline (no complete event) on one timer.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from ..errors import ProviderError, UserError
from ._sse import DEFAULT_MAX_EVENT_SIZE

__all__ = ["DEFAULT_MAX_ANSWER_SIZE", "Alarms", "StreamLimits", "Watchdog"]

DEFAULT_MAX_ANSWER_SIZE = 32 * 1024 * 1024
"""32 MiB: far above any real answer (a 128k-token answer is well under 1 MiB of SSE)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamLimits:
    """How long one model call may take, and how large one streamed event (or a
    non-streaming response body) may be.

    Unlike ``timeout=`` (socket-level, for a client lovia creates), these hold against a
    server that trickles bytes or sends only keep-alive comments, and also apply to an
    ``http_client=`` you pass. ``None`` switches a time limit off.
    """

    call_timeout: float | None = 1800.0
    """Wall-clock seconds for the whole call, retries and backoff waits included; past it
    the call fails with ``ProviderError(code="call_timeout")``, not retried."""
    idle_timeout: float | None = 120.0
    """Seconds a streamed response may go without a complete event, counted from the
    request (comments such as ``: keep-alive`` and unfinished lines do not count). Past
    it the attempt fails with ``code="idle_timeout"``: retried before any content, a
    :class:`~lovia.errors.StreamInterrupted` with the partial answer after."""
    max_event_size: int = DEFAULT_MAX_EVENT_SIZE
    """Characters one server-sent event may hold (16 MiB); more is ``code="event_too_large"``."""
    max_body_size: int = DEFAULT_MAX_EVENT_SIZE
    """Bytes a non-streaming response body may hold (16 MiB, as one event); more is
    :class:`~lovia.errors.AnswerTooLarge` with ``code="body_too_large"``."""
    max_answer_size: int = DEFAULT_MAX_ANSWER_SIZE
    """Bytes one streamed answer may hold in all, however small its events (32 MiB); past
    it reading stops and the call fails with :class:`~lovia.errors.AnswerTooLarge`
    (``code="answer_too_large"``, not retried: the same server would send it again)."""

    def __post_init__(self) -> None:
        for name in ("call_timeout", "idle_timeout"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise UserError(
                    f"StreamLimits({name}={value!r}) must be a positive number of seconds.",
                    f"Pass a positive {name}, or None to switch it off.",
                )
        for name in ("max_event_size", "max_body_size", "max_answer_size"):
            if getattr(self, name) < 1:
                raise UserError(
                    f"StreamLimits({name}={getattr(self, name)!r}) must be positive.",
                    "Pass a size (default 16 MiB).",
                )


class _Alarm:
    """A loop timer whose target can change: it calls ``target.fire()`` when it rings."""

    __slots__ = ("handle", "loop", "target")

    def __init__(self, loop: asyncio.AbstractEventLoop, when: float, target: Watchdog) -> None:
        self.loop = loop
        self.target: Watchdog | None = target
        self.handle: asyncio.TimerHandle | None = loop.call_at(when, self._ring)

    def _ring(self) -> None:
        self.handle = None
        target, self.target = self.target, None
        if target is not None:
            target.fire()

    def when(self) -> float:
        return self.handle.when() if self.handle is not None else 0.0

    def cancel(self) -> None:
        self.target = None
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


class Alarms:
    """Timers handed on from a finished call to the next one instead of cancelled.

    A cancelled timer stays in the event loop's heap until its time comes (or until more
    than half the heap is cancelled): with a 30-minute call deadline each call left one
    behind, and every timer of the loop (the HTTP client's too) paid for the longer heap.
    A finished call's timer waits here, without a target; the next call on the same loop
    takes it over when it rings no later than that call needs (it then re-arms lazily, as
    after an event). One per provider; ``size`` spares at most, the rest are cancelled.
    """

    __slots__ = ("_spares", "size")

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._spares: list[_Alarm] = []

    def take(self, loop: asyncio.AbstractEventLoop, when: float, target: Watchdog) -> _Alarm:
        spares = self._spares
        while spares:
            alarm = spares.pop()
            if alarm.handle is None or alarm.loop is not loop:
                continue  # it rang, or belongs to another loop: let it go
            if alarm.when() <= when:
                alarm.target = target
                return alarm
            alarm.cancel()
        return _Alarm(loop, when, target)

    def give(self, alarm: _Alarm) -> None:
        if len(self._spares) < self.size and alarm.handle is not None:
            alarm.target = None
            self._spares.append(alarm)
        else:
            alarm.cancel()


class Watchdog:
    """One call's two deadlines on ONE timer: the call deadline and the idle deadline.

    The timer is re-armed lazily (an event only records the time), so the per-event cost
    is a clock read. It cancels the task only while the seam itself awaits the server
    (``armed``), never while the caller holds an item (that would interrupt the caller's
    code); time spent there does not count as idle. :meth:`take` turns the cancellation
    it caused into its reason (and undoes it); anyone else's cancellation propagates.
    """

    __slots__ = (
        "_alarms",
        "_fired",
        "_handle",
        "_last",
        "_loop",
        "_task",
        "armed",
        "deadline",
        "idle",
        "limits",
        "provider",
    )

    def __init__(self, limits: StreamLimits, provider: str, alarms: Alarms | None = None) -> None:
        self.limits = limits
        self._alarms = alarms or Alarms(0)
        self.provider = provider
        self._loop: asyncio.AbstractEventLoop | None = None  # set by the first attempt
        self._task: asyncio.Task[Any] | None = None
        self.deadline: float | None = None
        self.idle: float | None = None  # per attempt: streaming attempts only
        self._last = 0.0
        self.armed = True
        self._fired: str | None = None
        self._handle: _Alarm | None = None

    def _schedule(self) -> None:
        assert self._loop is not None
        due = self.deadline
        if self.idle is not None:
            idle_due = self._last + self.idle
            due = idle_due if due is None else min(due, idle_due)
        self._handle = None if due is None else self._alarms.take(self._loop, due, self)

    def fire(self) -> None:
        """The timer rang: cancel the task if a deadline passed, else re-arm."""
        self._handle = None
        if not self.armed or self._task is None or self._loop is None:
            return  # the caller holds an item: resume() re-arms
        now = self._loop.time()
        if self.deadline is not None and now >= self.deadline:
            self._fired = "call_timeout"
        elif self.idle is not None and now >= self._last + self.idle:
            self._fired = "idle_timeout"
        else:  # an event arrived since the timer was set
            self._schedule()
            return
        self._task.cancel()

    def attempt(self, idle: float | None, *, queued: bool = False) -> None:
        """An attempt starts (the first one starts the call's clock); idle clock restarts.

        ``queued``: it waits for a connection first, so ``idle`` is not enforced yet, but
        the timer is already set for it: when the wait is short (the usual case) the
        attempt proper keeps that timer rather than cancelling it for a new one.
        """
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
            timeout = self.limits.call_timeout
            self.deadline = None if timeout is None else loop.time() + timeout
        self._task = asyncio.current_task()
        self._last = now = loop.time()
        self.idle = None if queued else idle
        due = self.deadline
        if idle is not None:
            due = now + idle if due is None else min(due, now + idle)
        handle = self._handle
        if handle is not None:
            if due is not None and handle.when() <= due:
                return  # it rings no later than needed; fire() re-arms if it is early
            handle.cancel()
        self._handle = None if due is None else self._alarms.take(loop, due, self)

    def beat(self) -> None:
        """A complete event arrived."""
        assert self._loop is not None  # attempt() started the clock
        self._last = self._loop.time()

    def resume(self) -> None:
        """The caller asks for the next item: re-arm, or fail if the call deadline passed."""
        loop = self._loop
        if loop is None:
            return
        self._task = asyncio.current_task()
        self.armed = True
        self._last = now = loop.time()
        if self.deadline is not None and now >= self.deadline:
            raise self.error("call_timeout")
        if self._handle is None:
            self._schedule()

    def take(self) -> str | None:
        """Why this watchdog cancelled the task (undoing it), or None if it did not."""
        reason, self._fired = self._fired, None
        if reason is None or self._task is None:
            return None
        return reason if self._task.uncancel() == 0 else None

    def stop(self) -> None:
        if self._handle is not None:
            self._alarms.give(self._handle)
            self._handle = None

    def error(self, reason: str) -> ProviderError:
        if reason == "idle_timeout":
            return ProviderError(
                f"{self.provider} sent no event for {self.limits.idle_timeout:g} s "
                "(idle_timeout); the attempt was stopped.",
                "The server stalled (keep-alive comments do not count as progress); lovia "
                "retries when nothing had arrived yet. For models that think silently for "
                "longer, raise StreamLimits(idle_timeout=...).",
                retryable=True,
                provider=self.provider,
                code="idle_timeout",
            )
        return ProviderError(
            f"The call to {self.provider} did not finish within "
            f"{self.limits.call_timeout:g} s (call_timeout, retries included); it was stopped.",
            "The server is too slow or trickles its answer. For very long generations raise "
            "StreamLimits(call_timeout=...).",
            provider=self.provider,
            code="call_timeout",
        )
