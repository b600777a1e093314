"""The built-in tracing: a consumer of the run's event stream (one table, see mapping)."""

from __future__ import annotations

from typing import Any

from ..events import Event

__all__ = ["RunTracer", "make_run_tracer"]


class RunTracer:
    """Opens and closes spans (and records metrics) from a run's events."""

    def start(self, event: Event) -> Any:
        """Called before hooks see ``event``; returns the live span of its phase."""
        return None

    def end(self, event: Event) -> None:
        """Called after hooks saw ``event``; ends the span if the phase ended."""
        return None


def make_run_tracer(tracer_provider: Any = None, meter_provider: Any = None) -> RunTracer | None:
    """A tracer for one run, or None when no OpenTelemetry SDK is configured."""
    return None
