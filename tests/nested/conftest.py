"""Fixtures for the agents-as-tools tests: a priced scripted model, private OTel providers."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lovia import pricing

sys.path.insert(0, str(Path(__file__).parents[1] / "telemetry"))
from telemetry_helpers import CountingIds, Otel

PRICED = "nested-priced"
"""$1 per input token, $2 per output token: every cost is a whole number (sums are exact)."""


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


def otel_options(otel: Otel) -> dict[str, Any]:
    return {"tracer_provider": otel.tp, "meter_provider": otel.mp}
