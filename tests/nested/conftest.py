"""Fixtures for the agents-as-tools tests: a priced scripted model, private OTel providers."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lovia import pricing

sys.path.insert(0, str(Path(__file__).parents[1] / "telemetry"))
from nested_support import PRICED
from telemetry_helpers import CountingIds, Otel


@pytest.fixture(autouse=True)
def priced_model() -> Iterator[None]:
    pricing.set_price("test", PRICED, input_per_mtok=1_000_000.0, output_per_mtok=2_000_000.0)
    yield
    pricing._overrides.pop(("test", PRICED), None)  # pyright: ignore[reportPrivateUsage]


@pytest.fixture
def otel() -> Iterator[Otel]:
    """Providers passed explicitly to the parent run (a child run inherits them)."""
    tp = TracerProvider(id_generator=CountingIds())
    exporter = InMemorySpanExporter()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    yield Otel(tp, exporter, reader, mp)
    tp.shutdown()
    mp.shutdown()
