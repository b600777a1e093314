"""OpenTelemetry for lovia: spans for every loop phase, metrics, cost, content policy.

The library only uses the OpenTelemetry *API*; nothing is exported until an
application configures an SDK (``lovia.telemetry.configure(...)`` is a one-liner, or
pass ``tracer_provider=`` to ``Runner.run``). Without an SDK, runs do no telemetry work
at all. See ``docs/observability.md``.

- ``mapping``: the one table between events and spans (both directions).
- ``attributes``: every name emitted, the telemetry schema version, metric buckets.
- ``price_usage`` / ``set_price`` / ``has_price``: re-exported from the core ``lovia.pricing``
  (``lovia.telemetry.pricing`` still names that module for older imports).
- ``content``: opt-in content capture and scrubbing (``REFERENCE``: references, no content).
- ``events_log``: content as log-based events on the Logs API, with trace context.
- ``semconv``: the GenAI registry followed, ``OTEL_SEMCONV_STABILITY_OPT_IN``.
- ``mcp``: MCP client spans, metrics and trace-context propagation.
- ``local``: the SQLite span store behind ``exporter="local"`` and ``lovia trace``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import pricing as pricing  # it lived here once: `from lovia.telemetry import pricing`
from .._lazy import lazy_exports
from ..pricing import (
    clear_prices,
    has_price,
    load_prices,
    price_source,
    price_table_version,
    price_usage,
    set_price,
)
from .attributes import SEMCONV_VERSION, TELEMETRY_VERSION
from .processor import event_from_span, events_from_span
from .tracer import RunTracer, make_run_tracer

if TYPE_CHECKING:
    from .local import SQLiteSpanExporter, load_spans
    from .sdk import Telemetry, configure

__all__ = [
    "SEMCONV_VERSION",
    "TELEMETRY_VERSION",
    "RunTracer",
    "SQLiteSpanExporter",
    "Telemetry",
    "clear_prices",
    "configure",
    "event_from_span",
    "events_from_span",
    "has_price",
    "load_prices",
    "load_spans",
    "make_run_tracer",
    "price_source",
    "price_table_version",
    "price_usage",
    "set_price",
]


# configure/local import lazily: nothing of the SDK is touched on `import lovia`
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "configure": ".sdk",
        "Telemetry": ".sdk",
        "load_spans": ".local",
        "SQLiteSpanExporter": ".local",
    },
)
