"""Call accounting: every model call — the agent's turns and compaction's summaries — is
priced, traced and counted against the budget the same way.

Offline: a scripted model with a small context window fetches pages until compaction
summarizes the early conversation with a (pricier) summary model. The ``chat`` spans
are listed with their ``lovia.call.purpose`` and cost; their sum is the run's cost.
Then the same run with ``RunBudget(max_cost_usd=0.05)`` stops on summary spend.

Run: python examples/41_call_accounting.py
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lovia import Agent, BudgetExceeded, RunBudget, Runner, tool
from lovia.providers import ModelProfile, ModelRequest
from lovia.telemetry import set_price
from lovia.testing import FunctionModel, call
from lovia.view import Compaction


@tool
def fetch(n: int) -> str:
    """Fetch page n."""
    return f"page {n}: " + "lorem ipsum " * 150


def crawler() -> Agent[Any, Any]:
    def answer(req: ModelRequest, info: Any) -> Any:
        k = len(info.requests)  # this model is never asked for summaries
        return call("fetch", n=k) if k <= 12 else "read 12 pages"

    summarizer = FunctionModel(lambda req, info: "pages 1..n were fetched", model="summarizer")
    return Agent(
        name="crawler",
        model=FunctionModel(answer, profile=ModelProfile(context_window=4_000)),
        tools=[fetch],
        context=Compaction(summary_model=summarizer),
    )


async def main() -> None:
    set_price("test", "function", input_per_mtok=1.0, output_per_mtok=4.0)
    set_price("test", "summarizer", input_per_mtok=50.0, output_per_mtok=200.0)
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))

    result = await Runner.run(crawler(), "read the site", max_turns=20, tracer_provider=tp)
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    by_purpose: Counter[str] = Counter()
    cost: Counter[str] = Counter()
    for span in chats:
        attrs = span.attributes or {}
        purpose = str(attrs["lovia.call.purpose"])
        by_purpose[purpose] += 1
        cost[purpose] += float(attrs["lovia.cost.usd"])  # type: ignore[arg-type]
    for purpose in sorted(by_purpose):
        print(f"{purpose:<8} {by_purpose[purpose]:>3} calls  ${cost[purpose]:.6f}")
    print(f"chat spans total ${sum(cost.values()):.6f} = run ${result.usage.cost_usd:.6f}")

    # the main calls alone cost about $0.02: the budget trips on the first summary's spend
    budget = RunBudget(max_cost_usd=0.05)
    try:
        await Runner.run(crawler(), "read the site", max_turns=20, budget=budget)
    except BudgetExceeded as exc:
        print(f"budget: stopped at turn {exc.turn} ({exc.limit}, used ${exc.used:.4f})")


if __name__ == "__main__":
    asyncio.run(main())
