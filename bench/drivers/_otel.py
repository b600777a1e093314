"""OpenTelemetry SDK set-up shared by the drivers that measure telemetry cost.

Installs, as the global providers, an SDK ``TracerProvider`` whose
``BatchSpanProcessor`` feeds an exporter that only counts spans (so memory does not
grow with the run), and a ``MeterProvider`` read by an ``InMemoryMetricReader``.
The returned flush function force-flushes spans and collects metrics; drivers call
it inside the timed window so export work is paid for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult


class CountingSpanExporter(SpanExporter):
    """Exporter that counts and drops spans: export work without unbounded memory."""

    def __init__(self) -> None:
        self.count = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Count the batch and report success."""
        self.count += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release."""


@dataclass
class OtelSdk:
    """The installed providers, the exporter and the metric reader."""

    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    exporter: CountingSpanExporter
    reader: InMemoryMetricReader
    metric_points: int = 0

    def flush(self) -> None:
        """Force-flush spans and collect metrics once."""
        self.tracer_provider.force_flush()
        data = self.reader.get_metrics_data()
        self.metric_points = _count_points(data)

    def summary(self) -> dict[str, Any]:
        """Figures to add to the driver's result line."""
        return {
            "otel": True,
            "spans_exported": self.exporter.count,
            "metric_points": self.metric_points,
        }


def _count_points(data: Any) -> int:
    """Number of data points in a ``MetricsData`` (0 when there is none)."""
    if data is None:
        return 0
    return sum(
        len(metric.data.data_points)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    )


def install_sdk() -> OtelSdk:
    """Create the SDK providers and set them as the global tracer and meter providers."""
    exporter = CountingSpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    return OtelSdk(tracer_provider, meter_provider, exporter, reader)


def flusher(sdk: OtelSdk | None) -> Callable[[], None] | None:
    """The flush callable to hand to ``measure`` (None without an SDK)."""
    return sdk.flush if sdk is not None else None
