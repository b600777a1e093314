"""Tracing: every loop phase a span, every token priced, one hook paging for all agents.

Offline: a scripted model plays the model's part. Spans go to an in-memory exporter
(printed as a tree) or, with ``--console``, to the console exporter; metrics go to an
in-memory reader (printed). A custom price makes the scripted model "cost" something.

Run: python examples/40_tracing.py [--console]
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lovia import Agent, AgentHooks, Runner, events, tool
from lovia.errors import RateLimited
from lovia.telemetry import set_price
from lovia.testing import ScriptedModel, call

# Hooks double as span processors: this handler sees the failure of *every* agent whose
# spans end in this process, without being attached to any agent.
pager = AgentHooks()


@pager.on(events.RunFailed)
def page(ev: events.RunFailed, ctx: Any) -> None:
    print(f"PAGE: agent {ev.agent!r} run {ev.run_id[:8]} failed with {ev.error_type}")


@tool(concurrency_safe=True)
def weather(city: str) -> str:
    """Current weather for a city."""
    return {"Paris": "sunny, 21°C", "Oslo": "snow, -3°C"}.get(city, "unknown")


def print_tree(spans: tuple[ReadableSpan, ...]) -> None:
    children: dict[int | None, list[ReadableSpan]] = {}
    for s in spans:
        children.setdefault(s.parent.span_id if s.parent else None, []).append(s)

    def show(span: ReadableSpan, depth: int) -> None:
        attrs = span.attributes or {}
        extra = [
            f"{k}={attrs[k]}"
            for k in ("gen_ai.usage.input_tokens", "lovia.cost.usd", "error.type")
            if k in attrs
        ]
        ms = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
        print(f"{'  ' * depth}{span.name}  [{ms:.1f} ms] {' '.join(extra)}")
        for child in sorted(
            children.get(span.context.span_id, []), key=lambda c: c.start_time or 0
        ):
            show(child, depth + 1)

    for root in children.get(None, []):
        show(root, 0)


async def main(console: bool) -> None:
    memory = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter() if console else memory))
    tp.add_span_processor(pager)  # type: ignore[arg-type]
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    # In an application: lovia.telemetry.configure(service_name="my-app") instead.
    from opentelemetry import metrics

    metrics.set_meter_provider(mp)
    set_price("test", "scripted", input_per_mtok=2.5, output_per_mtok=10.0)

    model = ScriptedModel(
        [
            [call("weather", city="Paris"), call("weather", city="Oslo")],
            "Paris is sunny; Oslo has snow.",
        ]
    )
    agent = Agent(name="forecaster", model=model, tools=[weather])
    result = await Runner.run(agent, "Weather in Paris and Oslo?", tracer_provider=tp)
    print("answer:", result.output, f"(cost ${result.usage.cost_usd:.6f})")

    flaky = Agent(name="flaky", model=ScriptedModel([RateLimited("429 from the provider")]))
    try:
        await Runner.run(flaky, "hello", tracer_provider=tp)
    except RateLimited:
        pass

    if not console:
        print_tree(memory.get_finished_spans())
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                print(f"metric {m.name} ({m.unit}): {len(m.data.data_points)} series")
    tp.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--console", action="store_true", help="print spans as JSON")
    asyncio.run(main(parser.parse_args().console))
