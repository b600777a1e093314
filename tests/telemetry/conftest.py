"""Fixture ``otel``: private tracer/meter providers bound to every run of a test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from telemetry_helpers import CountingIds, Otel

import lovia._loop as loop_module
from lovia.telemetry import events_log
from lovia.telemetry import tracer as tracer_module


@pytest.fixture
def otel(monkeypatch: pytest.MonkeyPatch) -> Iterator[Otel]:
    tp = TracerProvider(id_generator=CountingIds())
    exporter = InMemorySpanExporter()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    logs = InMemoryLogRecordExporter()
    lp = LoggerProvider()
    lp.add_log_record_processor(SimpleLogRecordProcessor(logs))
    events_log.pair(tp, lp)  # content events of these runs go to the in-memory log exporter
    real = tracer_module.make_run_tracer

    def bound(tracer_provider: Any = None, meter_provider: Any = None) -> Any:
        return real(tracer_provider if tracer_provider is not None else tp, meter_provider or mp)

    monkeypatch.setattr(loop_module, "make_run_tracer", bound)
    yield Otel(tp, exporter, reader, mp, logs)
    tp.shutdown()
    mp.shutdown()
    lp.shutdown()
