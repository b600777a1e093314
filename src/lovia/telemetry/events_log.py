"""Content events on the OpenTelemetry Logs API: log records with an event name and the
trace context of the span they describe.

With ``EVENT_ONLY`` (or ``SPAN_AND_EVENT``) content capture, a model call's content goes
out as one ``gen_ai.client.inference.operation.details`` event (its attributes in
structured form, as the GenAI conventions require for events), a tool call's arguments as
``lovia.tool.call.arguments`` and its result as ``lovia.tool.call.result``. Each record
carries the trace and span id of its ``chat`` / ``execute_tool`` span, so a backend shows
it with the trace, while the trace pipeline itself ships no content (``EVENT_ONLY``).

The records go to the ``LoggerProvider`` that ``lovia.telemetry.configure`` paired with the
run's tracer provider, else to the global one (``opentelemetry._logs.set_logger_provider``).
With neither, content events have nowhere to go: lovia says so once, and sends nothing.
"""

from __future__ import annotations

import json
import logging
import time
import weakref
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span

from . import attributes as A

__all__ = ["ContentEvents", "events_for", "pair"]

logger = logging.getLogger("lovia.telemetry")

_paired: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_warned = False


def pair(tracer_provider: Any, logger_provider: Any) -> None:
    """Send the content events of runs traced by ``tracer_provider`` to ``logger_provider``."""
    _paired[tracer_provider] = logger_provider


def _no_sdk(provider: Any) -> bool:
    return type(provider).__name__ in ("ProxyLoggerProvider", "NoOpLoggerProvider")


def events_for(tracer_provider: Any) -> ContentEvents | None:
    """The content-event emitter for runs traced by ``tracer_provider`` (None: no logs SDK)."""
    from opentelemetry import _logs

    provider = None
    if tracer_provider is not None:
        try:
            provider = _paired.get(tracer_provider)
        except TypeError:  # not weak-referenceable: never paired
            provider = None
    if provider is None:
        provider = _logs.get_logger_provider()
        if _no_sdk(provider):
            return None
    from .._version import __version__

    return ContentEvents(provider.get_logger(A.SCOPE_NAME, __version__))


def warn_no_logs() -> None:
    """Say once that event capture is on but no LoggerProvider takes the events."""
    global _warned
    if not _warned:
        _warned = True
        logger.warning(
            "content capture sends events, but no OpenTelemetry LoggerProvider is set up: "
            "the content events are dropped (lovia.telemetry.configure sets one up, or "
            "call opentelemetry._logs.set_logger_provider)"
        )


def structured(value: Any) -> Any:
    """``value`` as plain JSON data (dicts, lists, strings, numbers): what a log record's
    ``AnyValue`` attributes can hold; anything else becomes its ``str``."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


class ContentEvents:
    """Emits log-based events parented to spans (one per run tracer)."""

    __slots__ = ("_logger",)

    def __init__(self, otel_logger: Any) -> None:
        self._logger = otel_logger

    def emit(self, name: str, span: Span, attributes: Mapping[str, Any]) -> None:
        """One event named ``name`` in ``span``'s trace context."""
        from opentelemetry._logs import SeverityNumber

        self._logger.emit(
            timestamp=time.time_ns(),
            context=trace.set_span_in_context(span),
            severity_number=SeverityNumber.INFO,
            attributes=dict(attributes),
            event_name=name,
        )
