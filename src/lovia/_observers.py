"""Process-wide event observers: the seam behind ``lovia.testing.capture_events``.

The loop's emitter hands every event to each open observer list after tracing and hooks
have seen it. Nothing is registered in production, so the emitter's fast path (no
tracer, no hooks) stays a single truthiness check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .events import Event

__all__ = ["OBSERVERS", "notify"]

OBSERVERS: list[list[Event]] = []
"""Open capture lists, innermost last. Mutated only by ``capture_events``."""


def notify(event: Event) -> None:
    for seen in OBSERVERS:
        seen.append(event)
