"""OpenTelemetry for lovia: spans for every loop phase, metrics, cost, content policy.

The library only uses the OpenTelemetry *API*; nothing is exported until an
application configures an SDK (``lovia.telemetry.configure(...)`` is a one-liner).
"""

from __future__ import annotations

from .tracer import RunTracer, make_run_tracer

__all__ = ["RunTracer", "make_run_tracer"]
