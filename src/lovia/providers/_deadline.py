"""Deadlines of one model call: :class:`StreamLimits` (the configuration) and
:class:`Deadlines`, which enforces them for :class:`~lovia.providers._http.HttpSeam`.

``timeout=`` on a provider is socket level: a server that trickles a byte now and then,
or sends only ``: keep-alive`` comments, never trips it. :class:`Deadlines` holds the
call deadline (retries and backoff included) and the idle deadline (no complete event)
as ``asyncio.timeout_at`` scopes around the seam's own awaits, never around a ``yield``:
time the caller spends with an item is neither cancelled nor counted as idle.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TypeVar

from ..errors import ProviderError, UserError
from ._sse import DEFAULT_MAX_EVENT_SIZE

__all__ = ["DEFAULT_MAX_ANSWER_SIZE", "Deadlines", "StreamLimits"]

T = TypeVar("T")

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


@dataclass(slots=True)
class Deadlines:
    """One call's deadlines. The call's clock starts at its first scope; the idle clock
    restarts at :meth:`mark` (the request is sent, an event completes, the caller asks
    for the next item)."""

    limits: StreamLimits
    provider: str
    deadline: float | None = None
    """The call deadline on the event loop's clock (set by the first scope)."""
    last: float = 0.0
    """When the idle clock last restarted."""
    started: bool = field(default=False, repr=False)
    reason: str = field(default="call_timeout", repr=False)
    """Which deadline the last :meth:`due` returned (what a scope ending there stopped)."""

    def _now(self) -> float:
        now = asyncio.get_running_loop().time()
        if not self.started:
            self.started = True
            timeout = self.limits.call_timeout
            self.deadline = None if timeout is None else now + timeout
            self.last = now
        return now

    def mark(self) -> None:
        """Restart the idle clock."""
        self.last = self._now()

    def due(self, idle: bool) -> float | None:
        """When the current wait must end: the call deadline, or (``idle``) the idle
        deadline when that comes first."""
        self._now()
        due, seconds = self.deadline, self.limits.idle_timeout
        self.reason = "call_timeout"
        if idle and seconds is not None and (due is None or self.last + seconds < due):
            due, self.reason = self.last + seconds, "idle_timeout"
        return due

    def scope(self, idle: bool = False) -> asyncio.Timeout:
        """A timeout scope ending at :meth:`due`; :meth:`expired` names what it stopped."""
        return asyncio.timeout_at(self.due(idle))

    def check(self) -> None:
        """Fail now if the call deadline passed (the caller asks for more after it)."""
        if self.deadline is not None and self._now() >= self.deadline:
            raise self.error("call_timeout")

    async def bound(self, awaitable: Awaitable[T], idle: bool = False) -> T:
        """``await awaitable`` within the call deadline (and the idle one, if ``idle``); a
        deadline already passed stops it at its first suspension."""
        scope = self.scope(idle)
        try:
            async with scope:
                return await awaitable
        except TimeoutError:
            if not scope.expired():
                raise
            raise self.expired() from None

    def expired(self) -> ProviderError:
        """The error for the scope that ran out (scopes of one call never overlap)."""
        return self.error(self.reason)

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
