"""Run outcomes in telemetry: cancelled is not failed, a child run is counted once and its
cost is its parent's, and a call nobody can price is counted, not priced at $0.

Offline: a manager asks a helper agent (a child run, on a model without a price) and
answers; a second run is cancelled by its user. The run spans show the own cost
(``lovia.cost.usd``) and the cost with children (``lovia.cost.total_usd``); the metrics
show ``lovia.runs`` by outcome and ``lovia.run.nested``, the spend under the manager and
the unpriced calls.

Run: python examples/42_run_outcomes.py
"""

from __future__ import annotations

import asyncio
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lovia import Agent, RunCancelled, RunContext, Runner, tool
from lovia.telemetry import set_price
from lovia.testing import FunctionModel, call, reply
from lovia.usage import Usage


@tool
def stop(ctx: RunContext) -> str:
    """Stop this run (the user pressed cancel)."""
    ctx.cancel_token.cancel("the user pressed stop")
    return "stopping"


def manager() -> Agent[Any, Any]:
    def answer(text: str, provider: str, model: str) -> FunctionModel:
        usage = Usage(input_tokens=300, output_tokens=20)
        return FunctionModel(
            lambda req, info: reply(text, usage=usage), provider=provider, model=model
        )

    helper = Agent(name="helper", model=answer("3 sources", "openai", "helper-model"))
    # no price is known for this one: its cost is unknown, never $0
    local = Agent(name="local", model=answer("no secrets found", "local", "llama-local"))

    def decide(req: Any, info: Any) -> Any:
        usage = Usage(input_tokens=1000, output_tokens=100)
        if "cancel" in str(req.messages[0].content) and len(info.requests) == 1:
            return reply(tool_calls=[call("stop")], usage=usage)
        if len(info.requests) == 1:
            asks = [call("ask_helper", input="find sources"), call("ask_local", input="scan")]
            return reply(tool_calls=asks, usage=usage)
        return reply("report written", usage=usage)

    set_price("openai", "boss-model", input_per_mtok=2.0, output_per_mtok=8.0)
    set_price("openai", "helper-model", input_per_mtok=1.0, output_per_mtok=4.0)
    return Agent(
        name="manager",
        model=FunctionModel(decide, provider="openai", model="boss-model"),
        tools=[helper.as_tool(name="ask_helper"), local.as_tool(name="ask_local"), stop],
    )


async def main() -> None:
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    mp = MeterProvider(metric_readers=[reader])

    result = await Runner.run(manager(), "write the report", tracer_provider=tp, meter_provider=mp)
    print(
        f"report: {result.output!r}, cost ${result.usage.cost_usd:.6f}, "
        f"unpriced calls: {result.usage.unpriced}"
    )
    try:
        await Runner.run(manager(), "cancel this", tracer_provider=tp, meter_provider=mp)
    except RunCancelled:
        print("the second run was cancelled")

    for span in exporter.get_finished_spans():
        a = span.attributes or {}
        if span.name.startswith("invoke_agent"):
            print(
                f"span {span.name}: outcome={a['lovia.run.outcome']} "
                f"own=${a['lovia.cost.usd']:.6f} total=${a['lovia.cost.total_usd']:.6f} "
                f"unpriced={a.get('lovia.cost.unpriced', 0)}"
            )

    data = reader.get_metrics_data()
    assert data is not None
    for metric in (
        m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
    ):
        if metric.name not in ("lovia.runs", "lovia.cost", "lovia.cost.unpriced"):
            continue
        for point in metric.data.data_points:
            labels = dict(point.attributes)
            agent = labels.get("gen_ai.agent.name", "(none: the series at 0 from start-up)")
            outcome = labels.get("lovia.run.outcome", "")
            print(
                f"metric {metric.name} agent={agent} {outcome} "
                f"nested={labels.get('lovia.run.nested')}: {point.value:g}"
            )


if __name__ == "__main__":
    asyncio.run(main())
