"""The run's stop signals — its cancel token and its ``max_seconds`` deadline — as an
``asyncio.timeout`` around each of the loop's own awaits.

``async with state.runtime.watch.armed():`` wraps a model call's stream, a wait for tools, a
wait for budget room, and (``wait()``) the user code the loop itself awaits (guardrails,
instructions, injectors, plugin setup, async hooks on a live run's events); never the
consumer's code: around each event a stream hands to its consumer
the block is paused (``pause()`` / ``resume()``: one timeout per call, rescheduled), so
stopping never interrupts the caller's own code. Inside, the deadline is the timeout's;
a cancel token set from any thread moves the timeout to now (``Timeout.reschedule``).
A timeout that expires leaves the block as the run's error (``RunCancelled``,
``BudgetExceeded(max_seconds)`` or ``LeaseLost``), never as a bare ``CancelledError``;
the caller's own cancellation of the task is asyncio's business and propagates untouched.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar

__all__ = ["Armed", "RunWatch"]

T = TypeVar("T")


class RunWatch:
    """One run's token and deadline (a ``time.monotonic()`` instant, or None)."""

    __slots__ = ("_stop", "deadline", "loop", "stopped", "timeout", "token")

    def __init__(
        self, token: Any, deadline: float | None, stop: Callable[[], BaseException]
    ) -> None:
        self.token = token
        self.deadline = deadline
        self._stop = stop
        """Builds the run's error once a stop signal ended an armed await."""
        self.stopped: BaseException | None = None
        """The run's error, once a stop signal interrupted it."""
        self.timeout: asyncio.Timeout | None = None
        """The armed await's timeout (None: nothing armed)."""
        self.loop: asyncio.AbstractEventLoop | None = None

    def armed(self) -> Armed:
        """The context for one of the loop's own awaits."""
        return Armed(self)

    def fire(self) -> None:
        """The token's listener (any thread): end the await in progress, if any."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._now)

    def _now(self) -> None:
        timeout = self.timeout
        if timeout is not None and not timeout.expired():
            timeout.reschedule(asyncio.get_running_loop().time())

    async def wait(self, awaitable: Awaitable[T]) -> T:
        """``await awaitable`` as one of the run's waits (user code the loop awaits: a
        guardrail, an instruction, an injector, a plugin's setup): a stop signal ends it
        with the run's error, even when the code swallowed its cancellation."""
        async with self.armed():
            value = await awaitable
        if self.stopped is not None:
            raise self.stopped
        return value

    def error(self) -> BaseException:
        """The run's error for a stop signal (built once)."""
        if self.stopped is None:
            self.stopped = self._stop()
        return self.stopped

    def when(self, loop: asyncio.AbstractEventLoop) -> float | None:
        if self.token.cancelled:  # set while the consumer's code ran: act at once
            return loop.time()
        if self.deadline is None:
            return None
        return loop.time() + (self.deadline - time.monotonic())


class Armed:
    """``asyncio.timeout_at`` at the run's deadline, reschedulable by the token."""

    __slots__ = ("_outer", "_timeout", "_watch")

    def __init__(self, watch: RunWatch) -> None:
        self._watch = watch
        self._timeout: asyncio.Timeout | None = None
        self._outer: asyncio.Timeout | None = None
        """The armed await this one is inside (None: none, or it is paused)."""

    def pause(self) -> None:
        """Disarm while the caller's code runs (a consumer of the streamed events): the
        timeout stays entered, with no deadline, and the token leaves it alone."""
        watch, timeout = self._watch, self._timeout
        assert timeout is not None
        watch.timeout = None
        timeout.reschedule(None)

    def resume(self) -> None:
        """Arm again (a token set or a deadline passed meanwhile acts at once)."""
        watch, timeout = self._watch, self._timeout
        assert timeout is not None and watch.loop is not None
        watch.timeout = timeout
        timeout.reschedule(watch.when(watch.loop))

    async def __aenter__(self) -> Armed:
        watch = self._watch
        loop = watch.loop = asyncio.get_running_loop()
        timeout = asyncio.timeout_at(watch.when(loop))
        await timeout.__aenter__()
        self._outer = watch.timeout
        self._timeout = watch.timeout = timeout
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        watch, timeout = self._watch, self._timeout
        assert timeout is not None
        watch.timeout = self._outer  # the token reaches the enclosing await again
        try:
            await timeout.__aexit__(exc_type, exc, tb)
        except TimeoutError:
            raise watch.error() from None
        if timeout.expired():
            error = watch.error()
            if exc is not None:  # the await turned the stop into an error of its own
                raise error from exc
            # else it swallowed the stop (a sync tool settled): the caller raises it
