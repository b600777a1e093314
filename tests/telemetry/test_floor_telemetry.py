"""The benchmark's telemetry floor emits what lovia emits.

``bench/drivers/floor.py --otel`` writes lovia's spans and metrics by hand on the OTel
SDK, so that ``floor+otel`` is the least any agent pays for lovia's telemetry. That
figure is only true while the hand-written telemetry matches lovia's: the same span
tree (names, kinds, parents), the same attribute keys with values of the same types on
every span, and the same metric points (names and label sets). Both run here against
the benchmark's fake server, json and sse; a change to lovia's telemetry that the floor
does not follow fails this test.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from telemetry_helpers import Otel

from lovia import Agent, Runner, tool
from lovia.providers.openai_chat import OpenAIChat

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, str(BENCH / "fake_server.py"), "--port", "0"], stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    yield f"http://127.0.0.1:{port}/v1"
    proc.terminate()
    proc.wait(10)


@pytest.fixture
def floor(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(BENCH / "drivers"))
    return importlib.import_module("floor")


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def shape(spans: tuple[ReadableSpan, ...]) -> list[tuple[Any, ...]]:
    """Each span in start order: name, kind, its parent's name, and its attributes'
    keys with the types of their values."""
    names = {s.context.span_id: s.name for s in spans}
    out: list[tuple[Any, ...]] = []
    for s in sorted(spans, key=lambda s: s.start_time or 0):
        parent = names.get(s.parent.span_id) if s.parent is not None else None
        attrs = sorted((k, type(v).__name__) for k, v in (s.attributes or {}).items())
        out.append((s.name, s.kind.name, parent, attrs))
    return out


def points(reader: InMemoryMetricReader) -> set[tuple[str, str, frozenset[Any]]]:
    """Every metric point: instrument name, data kind and label set."""
    found: set[tuple[str, str, frozenset[Any]]] = set()
    data = reader.get_metrics_data()
    assert data is not None
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                kind = type(metric.data).__name__
                for point in metric.data.data_points:
                    found.add((metric.name, kind, frozenset((point.attributes or {}).items())))
    return found


async def floor_run(floor: Any, url: str, stream: bool) -> tuple[Any, ...]:
    tp = TracerProvider()
    exporter = InMemorySpanExporter()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    model = floor.model_name(2, 2)
    tel = floor.Telemetry(model, "127.0.0.1", httpx.URL(url).port, stream, (tp, mp))
    async with httpx.AsyncClient() as client:
        answer = await floor.run_traced(client, f"{url}/chat/completions", tel)
    return answer, exporter.get_finished_spans(), reader


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_the_floor_emits_lovias_spans_and_metrics(
    otel: Otel, server: str, floor: Any, stream: bool
) -> None:
    model = OpenAIChat(floor.model_name(2, 2), base_url=server, api_key="x", stream=stream)
    agent = Agent(name="bench", instructions=floor.INSTRUCTIONS, model=model, tools=[add])
    result = await Runner.run(agent, floor.PROMPT)
    answer, spans, reader = await floor_run(floor, server, stream)

    assert answer == result.output == importlib.import_module("_common").expected_answer(2, 2)
    lovia_shape = shape(otel.spans())
    assert len(lovia_shape) == 1 + 3 * 3 + 2 * 2  # the run; turn, view, chat ×3; 4 tools
    assert shape(spans) == lovia_shape
    assert points(reader) == points(otel.reader)
