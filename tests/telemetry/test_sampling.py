"""A sampler that drops a run's spans drops nothing from its metrics.

Sampling is how a deployment spends less on tracing (the SDK's per-span work is most
of telemetry's cost): an unsampled run's spans are non-recording, and the metrics,
which lovia records from the same events, count every run exactly as before.
"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, Sampler

from lovia import Agent, Runner, tool
from lovia.errors import RateLimited
from lovia.testing import ScriptedModel, call, reply
from lovia.usage import Usage

TIMING = {
    "gen_ai.client.operation.duration",
    "gen_ai.invoke_agent.duration",
    "gen_ai.execute_tool.duration",
    "gen_ai.client.operation.time_to_first_chunk",
}  # histograms of durations: their counts are compared, not their sums


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def broken() -> str:
    """Fails."""
    raise ValueError("boom")


async def workload(sampler: Sampler) -> tuple[int, dict[Any, Any]]:
    """Spans exported and every metric point of a few runs under ``sampler``."""
    exporter = InMemorySpanExporter()
    tp = TracerProvider(sampler=sampler)
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    providers: dict[str, Any] = {"tracer_provider": tp, "meter_provider": mp}
    usage = Usage(input_tokens=120, output_tokens=7)
    for _ in range(3):
        script = [[call("add", a=1, b=2), call("broken")], reply("3", usage=usage)]
        agent = Agent(name="sampled", model=ScriptedModel(script), tools=[add, broken])
        await Runner.run(agent, "go", **providers)
    with pytest.raises(RateLimited):
        await Runner.run(
            Agent(name="f", model=ScriptedModel([RateLimited("x")])), "go", **providers
        )
    points: dict[Any, Any] = {}
    data = reader.get_metrics_data()
    assert data is not None
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for p in metric.data.data_points:
                    key = (metric.name, frozenset(p.attributes.items()))
                    if metric.name in TIMING:
                        points[key] = p.count
                    elif hasattr(p, "value"):  # a counter's sum
                        points[key] = p.value
                    else:  # a histogram of counts (tokens, turns)
                        points[key] = (p.count, p.sum)
    spans = len(exporter.get_finished_spans())
    tp.shutdown()
    mp.shutdown()
    return spans, points


async def test_an_unsampled_run_keeps_every_metric_point() -> None:
    recorded, everything = await workload(ALWAYS_ON)
    dropped, sampled_out = await workload(ALWAYS_OFF)
    assert recorded > 20 and dropped == 0
    assert sampled_out == everything
    runs = {k: v for k, v in everything.items() if k[0] == "lovia.runs" and v}
    assert sorted(runs.values()) == [1, 3]  # one failed run, three completed
