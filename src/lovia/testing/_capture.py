"""``capture_events``: every event of every run, for assertions, without touching the loop."""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager

from .. import _observers
from ..events import Event

__all__ = ["capture_events"]


@contextmanager
def capture_events() -> Generator[list[Event]]:
    """Collect every event any run in this process emits while the block is open.

    The list grows as events happen, in emission order (runs that overlap interleave;
    filter by ``ev.run_id``). It sees what ``Runner.stream`` would yield and what hooks
    receive, so a test of ``Runner.run`` can assert on events too::

        with capture_events() as seen:
            await Runner.run(agent, "hi")
        assert isinstance(seen[-1], events.RunCompleted)
    """
    seen: list[Event] = []
    _observers.OBSERVERS.append(seen)
    try:
        yield seen
    finally:
        _observers.OBSERVERS.remove(seen)
