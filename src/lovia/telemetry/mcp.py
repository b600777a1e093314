"""MCP client telemetry, after the MCP semantic conventions (``mcp.client`` spans and the
``mcp.client.operation.duration`` / ``mcp.client.session.duration`` metrics).

- A tool call (``tools/call``) made while lovia's ``execute_tool {tool}`` span is current
  *enriches that span* (``mcp.method.name``, ``mcp.session.id``, ``mcp.protocol.version``,
  ``network.transport``, ``server.address``/``server.port``, ``gen_ai.tool.type=extension``:
  the tool runs on the server, not in this process) instead of opening a second span.
- Any other request (``initialize``, ``tools/list``, a call outside a run) is a CLIENT span
  ``{mcp.method.name} {target}``. Inside a run it is made on the run's own tracer (the
  ``tracer_provider`` given to ``Runner.run``, else the global one), under the current
  span or, during a plugin's setup (between the run's phases), under the run's span.
  Outside a run it goes under the current span, when there is one (a request with no
  trace around it opens no root trace of its own).
- The trace context of that span goes to the server in the request's ``params._meta``
  (``traceparent`` / ``tracestate``), so a server's spans join the run's trace.
- Durations are recorded on the global meter provider (nothing without an SDK).

The ``mcp`` package is not imported here; the plugin hands in what it knows.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry import metrics, propagate, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from . import attributes as A
from .tracer import run_span

__all__ = ["McpClientTelemetry"]

METHOD: Final = "mcp.method.name"
SESSION_ID: Final = "mcp.session.id"
PROTOCOL_VERSION: Final = "mcp.protocol.version"
NETWORK_TRANSPORT: Final = "network.transport"
NETWORK_PROTOCOL: Final = "network.protocol.name"
M_OPERATION: Final = "mcp.client.operation.duration"
M_SESSION: Final = "mcp.client.session.duration"
TOOL_ERROR: Final = "tool_error"
"""``error.type`` of a ``CallToolResult`` with ``isError`` (the convention's value)."""
MCP_BUCKETS: Final = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)


class _Instruments:
    def __init__(self, provider: Any) -> None:
        from .._version import __version__

        meter = provider.get_meter(A.SCOPE_NAME, __version__)
        self.operation = meter.create_histogram(
            M_OPERATION,
            unit="s",
            description="Duration of an MCP request, sent to answered.",
            explicit_bucket_boundaries_advisory=list(MCP_BUCKETS),
        )
        self.session = meter.create_histogram(
            M_SESSION,
            unit="s",
            description="Duration of an MCP client session.",
            explicit_bucket_boundaries_advisory=list(MCP_BUCKETS),
        )


_by_provider: dict[int, tuple[Any, _Instruments]] = {}


def _instruments() -> _Instruments | None:
    provider = metrics.get_meter_provider()
    if type(provider).__name__ in ("_ProxyMeterProvider", "NoOpMeterProvider"):
        return None
    found = _by_provider.get(id(provider))
    if found is None or found[0] is not provider:
        found = (provider, _Instruments(provider))
        _by_provider[id(provider)] = found
    return found[1]


def lovia_tool_span() -> Span | None:
    """The current span if it is a recording ``execute_tool`` span of lovia's."""
    span = trace.get_current_span()
    name = str(getattr(span, "name", ""))
    return span if span.is_recording() and name.startswith(A.SPAN_TOOL + " ") else None


@dataclass
class McpClientTelemetry:
    """The telemetry of one MCP client connection (see the module docs)."""

    server_address: str | None = None
    server_port: int | None = None
    transport: str = "pipe"
    """``pipe`` for stdio, ``tcp`` for streamable HTTP."""
    session_id: str | None = None
    protocol_version: str | None = None
    started: float = field(default_factory=time.monotonic)

    def common(self) -> dict[str, AttributeValue]:
        out: dict[str, AttributeValue] = {NETWORK_TRANSPORT: self.transport}
        if self.transport == "tcp":
            out[NETWORK_PROTOCOL] = "http"
        if self.protocol_version:
            out[PROTOCOL_VERSION] = self.protocol_version
        if self.server_address:
            out[A.SERVER_ADDRESS] = self.server_address
            if self.server_port:
                out[A.SERVER_PORT] = self.server_port
        return out

    @contextmanager
    def operation(self, method: str, tool: str | None = None) -> Generator[Operation]:
        """One request: a span (or the enriched ``execute_tool`` span), the ``_meta`` to
        send with it, and its duration metric."""
        attrs = {METHOD: method, **self.common()}
        if tool is not None:
            attrs[A.TOOL_NAME] = tool
            attrs[A.OPERATION_NAME] = A.SPAN_TOOL
        outer = lovia_tool_span() if method == "tools/call" else None
        op = Operation(attrs)
        span: Span | None = outer
        if outer is None:
            span = _client_span(f"{method} {tool}" if tool else method, attrs)
        op.span = span
        if span is not None:
            span_attrs = dict(attrs)
            if self.session_id:
                span_attrs[SESSION_ID] = self.session_id
            if outer is not None:
                span_attrs[A.TOOL_TYPE] = "extension"
            span.set_attributes(span_attrs)
            propagate.inject(op.meta, context=trace.set_span_in_context(span))
        start = time.monotonic()
        try:
            yield op
        except BaseException as exc:
            op.error_type = op.error_type or type(exc).__name__
            raise
        finally:
            self._finish(op, time.monotonic() - start, own_span=span is not outer)

    def _finish(self, op: Operation, seconds: float, own_span: bool) -> None:
        labels = dict(op.attributes)
        if op.error_type is not None:
            labels[A.ERROR_TYPE] = op.error_type
        span = op.span
        if span is not None and op.error_type is not None:
            span.set_attribute(A.ERROR_TYPE, op.error_type)
            if own_span:
                span.set_status(Status(StatusCode.ERROR, op.error_type))
        if span is not None and own_span:
            span.end()
        found = _instruments()
        if found is not None:
            found.operation.record(seconds, labels)

    def session_ended(self, error_type: str | None = None) -> None:
        """Record ``mcp.client.session.duration`` (from connect to close)."""
        found = _instruments()
        if found is None:
            return
        labels = self.common()
        if error_type is not None:
            labels[A.ERROR_TYPE] = error_type
        found.session.record(time.monotonic() - self.started, labels)


@dataclass
class Operation:
    """One MCP request in flight: set ``error_type`` for an error answered in the result."""

    attributes: dict[str, AttributeValue]
    meta: dict[str, str] = field(default_factory=dict[str, str])
    """W3C trace context (``traceparent``…) for the request's ``params._meta``."""
    span: Span | None = None
    error_type: str | None = None


def _client_span(name: str, attrs: dict[str, AttributeValue]) -> Span | None:
    """A CLIENT span for one request, on the running run's tracer (the tracer provider
    the run was given, not the global one) and under the current span, or under the
    run's span where none is current (a plugin's setup runs between the run's spans)."""
    run = run_span()
    current = trace.get_current_span().get_span_context().is_valid
    if run is None:
        if not current:
            return None
        return trace.get_tracer(A.SCOPE_NAME).start_span(
            name, kind=SpanKind.CLIENT, attributes=attrs
        )
    tracer, run_context = run
    parent = None if current else run_context
    return tracer.start_span(name, context=parent, kind=SpanKind.CLIENT, attributes=attrs)
