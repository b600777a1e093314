"""Prices you control: a price file for a fine-tune and a self-hosted model, and the
source of each call's price on its span.

Offline: a price file gives a fine-tuned model its own per-token prices and a self-hosted
provider an explicit $0. Three scripted calls run: the fine-tune, the self-hosted model
(priced at $0, not unknown) and a model nobody priced (unknown: its cost reads "?"). Each
``chat`` span names what priced it in ``lovia.cost.source``.

Run: python examples/43_prices.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lovia import Agent, Runner, UserError, load_prices
from lovia.testing import FunctionModel, reply
from lovia.usage import Usage

PRICES = """\
prices:
  - provider: openai
    model: "ft:gpt-4o-mini:acme:support:abc123"
    input_per_mtok: 0.30
    output_per_mtok: 1.20
    cache_read_per_mtok: 0.15
  - provider: ollama
    model: "*"        # every model served by this provider
    free: true        # self-hosted: $0, and known to be $0
"""


def agent(provider: str, model: str) -> Agent[Any, Any]:
    def says(request: Any, info: Any) -> Any:
        usage = Usage(input_tokens=20_000, cache_read_tokens=8_000, output_tokens=1_000)
        return reply("done", usage=usage)

    return Agent(name=model, model=FunctionModel(says, provider=provider, model=model))


async def main() -> None:
    folder = Path(tempfile.mkdtemp())
    path = folder / "prices.yaml"
    path.write_text(PRICES, encoding="utf-8")
    print(f"loaded {load_prices(path)} prices")

    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    for provider, model in [
        ("openai", "ft:gpt-4o-mini:acme:support:abc123"),
        ("ollama", "llama3.3:70b"),
        ("vllm", "in-house-7b"),
    ]:
        result = await Runner.run(agent(provider, model), "go", tracer_provider=tp)
        cost = "?" if result.usage.unpriced else f"${result.usage.cost_usd:.6f}"
        print(f"{provider}:{model}: cost {cost}, unpriced calls: {result.usage.unpriced}")
    for span in exporter.get_finished_spans():
        if span.name.startswith("chat"):
            attrs = span.attributes or {}
            source = str(attrs.get("lovia.cost.source", "unknown"))
            print(f"span {span.name}: source={source.split('@')[0]}")

    bad = folder / "bad.yaml"
    bad.write_text("- {provider: openai, model: tuned, input_per_mtok: -1}\n", encoding="utf-8")
    try:
        load_prices(bad)
    except UserError as exc:
        print("bad file:", exc.message.replace(str(bad), "bad.yaml"))


if __name__ == "__main__":
    asyncio.run(main())
