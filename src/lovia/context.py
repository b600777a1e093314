"""The live handle tools, hooks, guardrails, plugins and instructions receive.

``RunContext`` is created per run by the loop and shared by everything in that run;
nothing in it lives on the ``Agent``. ``CancelToken`` and ``Mailbox`` are the two ways
to steer a run from the inside (a tool, a hook) or the outside (the stream handle).
"""

from __future__ import annotations

import asyncio
import dataclasses
import operator
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .transcript import InputEntry, ToolCallEntry, TranscriptEntry
from .usage import Usage

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["CancelToken", "Mailbox", "RunContext", "call_key"]

DepsT = TypeVar("DepsT")


class CancelToken:
    """Request cancellation of a run; the loop checks it at every phase boundary.

    Setting it also interrupts an in-flight model stream and running tools. Safe to call
    from any thread.
    """

    __slots__ = ("_listeners", "_lock", "_reason")

    def __init__(self) -> None:
        self._reason: str | None = None
        self._listeners: list[Callable[[], None]] | None = None  # made by the first add
        self._lock = threading.Lock()

    def add_listener(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` (from the cancelling thread) when the token is cancelled."""
        with self._lock:
            fire = self._reason is not None
            if not fire:
                if self._listeners is None:
                    self._listeners = []
                self._listeners.append(fn)
        if fire:
            fn()

    def remove_listener(self, fn: Callable[[], None]) -> None:
        with self._lock:
            if self._listeners is not None and fn in self._listeners:
                self._listeners.remove(fn)

    @property
    def cancelled(self) -> bool:
        return self._reason is not None

    @property
    def reason(self) -> str | None:
        return self._reason

    def cancel(self, reason: str = "cancelled") -> None:
        """Cancel the run(s) using this token; later calls keep the first reason."""
        with self._lock:
            if self._reason is not None:
                return
            self._reason = reason
            listeners = self._listeners or ()
            self._listeners = None  # every later add_listener calls its fn at once
        for fn in listeners:
            fn()

    async def wait(self) -> str:
        """Wait until cancelled; return the reason."""
        loop = asyncio.get_running_loop()
        event = asyncio.Event()

        def wake() -> None:  # may run on the cancelling thread
            if not loop.is_closed():
                loop.call_soon_threadsafe(event.set)

        self.add_listener(wake)
        try:
            await event.wait()
        finally:
            self.remove_listener(wake)
        return self._reason or "cancelled"


class Mailbox:
    """Messages for the model, delivered as user entries at the start of the next turn.

    ``put`` is safe from any thread and from outside the run (the stream handle holds
    the same mailbox). Messages put after the final answer are reported in
    ``RunResult.undelivered``, never lost.
    """

    __slots__ = ("_queue",)

    def __init__(self) -> None:
        self._queue: deque[InputEntry] | None = None
        """Made by the first ``put``: most runs get no message (a deque is ~600 bytes)."""

    def put(self, message: str | InputEntry) -> None:
        if isinstance(message, str):
            message = InputEntry(role="user", content=message, origin="mailbox")
        elif message.origin == "input":
            message = message.model_copy(update={"origin": "mailbox"})
        queue = self._queue
        if queue is None:
            with _FIRST_PUT:  # two threads' first puts must not make two queues
                if self._queue is None:
                    self._queue = deque()
                queue = self._queue
        queue.append(message)

    def drain(self) -> list[InputEntry]:
        """Take every queued message (oldest first)."""
        out: list[InputEntry] = []
        queue = self._queue
        while queue:
            out.append(queue.popleft())
        return out

    def __len__(self) -> int:
        return 0 if self._queue is None else len(self._queue)


_FIRST_PUT = threading.Lock()
"""Guards only the creation of a mailbox's queue (once per mailbox that gets a message)."""


def call_key(run_id: str, call_id: str) -> str:
    """The key of tool call ``call_id`` of run ``run_id``: ``run_id:call_id``, with
    ``%`` and ``:`` in the run id written ``%25`` and ``%3A``.

    Unambiguous: the run id ends at the first ``:``, so run ``a:b`` + call ``c`` and run
    ``a`` + call ``b:c`` get different keys (a plain join gives both ``a:b:c``). Ids
    holding neither character (UUIDs, the usual case) keep the readable plain form.
    """
    escaped = run_id.replace("%", "%25").replace(":", "%3A")
    return f"{escaped}:{call_id}"


@dataclass(slots=True, kw_only=True)
class RunContext(Generic[DepsT]):
    """State of one run, as seen by tools, hooks, guardrails, plugins and instructions.

    Treat ``entries`` as read-only; it is a live view of the transcript.
    """

    deps: DepsT
    """Your dependencies, passed as ``Runner.run(..., deps=...)``."""
    agent: Agent[Any, Any]
    """The agent active right now (changes on handoff)."""
    run_id: str
    """Unique id of this run; resubmitting it returns or resumes the run."""
    session_id: str | None = None
    """The conversation this run belongs to, when a session is used."""
    entries: Sequence[TranscriptEntry] = ()
    """Live read-only view of the transcript (session history + this run)."""
    usage: Usage = field(default_factory=Usage)
    """Usage so far in this run (live)."""
    workspace: Any = None
    """The run's workspace (a folder the agent works in), if any."""
    cancel_token: CancelToken = field(default_factory=CancelToken)
    mailbox: Mailbox = field(default_factory=Mailbox)
    turn: int = 0
    """Current turn (1-based; 0 before the first)."""
    tool_call: ToolCallEntry | None = None
    """Inside a tool: the call being executed."""

    @property
    def idempotency_key(self) -> str | None:
        """Inside a tool: ``run_id:call_id`` (see :func:`call_key`), stable across
        retries and resume, and different for every (run, call) pair."""
        if self.tool_call is None:
            return None
        return call_key(self.run_id, self.tool_call.call_id)

    def for_call(self, call: ToolCallEntry) -> RunContext[DepsT]:
        """A copy of this context for one tool call (shares everything else)."""
        cls = type(self)
        known = _FIELDS.get(cls)
        if known is None:
            names = tuple(f.name for f in dataclasses.fields(cls))
            known = _FIELDS[cls] = (names, operator.attrgetter(*names))
        names, read = known
        new = cls.__new__(cls)  # a field-by-field copy: dataclasses.replace re-runs __init__
        for name, value in zip(names, read(self), strict=True):  # every value in one call
            setattr(new, name, value)
        new.tool_call = call
        return new


_FIELDS: dict[type, tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]] = {}
"""Field names of RunContext and its subclasses, and a reader of all their values (for
``for_call``)."""
