"""Pydantic AI on the benchmark workload (OpenAIChatModel + OpenAIProvider).

``agent.run`` in json mode, ``agent.run_stream`` in sse mode (the only text output is
the final answer, so the stream runs every tool turn). ``--instrument`` turns on Pydantic
AI's OpenTelemetry instrumentation with the SDK providers of ``_otel``.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from _common import INSTRUCTIONS, PROMPT, import_timer, measure, model_name, parse_args

elapsed = import_timer()
from pydantic_ai import Agent, UsageLimits, __version__  # noqa: E402
from pydantic_ai.models.instrumented import InstrumentationSettings  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402

IMPORT_S = elapsed()
NO_LIMITS = UsageLimits(request_limit=None)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--instrument", action="store_true", help="OTel SDK tracing + metrics on")


def build_agent(base_url: str, model: str) -> Agent:
    """The benchmark agent on an OpenAI Chat Completions model pointed at the fake server."""
    provider = OpenAIProvider(base_url=base_url, api_key="x")
    return Agent(OpenAIChatModel(model, provider=provider), instructions=INSTRUCTIONS, tools=[add])


async def run_json(agent: Agent) -> str:
    """One non-streamed run; returns the output."""
    result = await agent.run(PROMPT, usage_limits=NO_LIMITS)
    return str(result.output)


async def run_sse(agent: Agent) -> str:
    """One streamed run; returns the output once fully streamed."""
    async with agent.run_stream(PROMPT, usage_limits=NO_LIMITS) as result:
        return str(await result.get_output())


async def main() -> None:
    """Parse options, build the agent (instrumented or not), measure."""
    args = parse_args(__doc__.splitlines()[0], _options)
    agent = build_agent(args.base_url, model_name(args.turns, args.calls))
    sdk = None
    if args.instrument:
        from _otel import install_sdk

        sdk = install_sdk()
        agent.instrument = InstrumentationSettings(
            tracer_provider=sdk.tracer_provider, meter_provider=sdk.meter_provider
        )
    extra: dict[str, Any] = {"version": __version__, "otel": False}

    def flush() -> None:
        if sdk is not None:
            sdk.flush()
            extra.update(sdk.summary())

    run = run_sse if args.mode == "sse" else run_json
    contender = "pydantic-ai+otel" if sdk else "pydantic-ai"
    await measure(contender, args, lambda: run(agent), IMPORT_S, flush=flush, extra=extra)


if __name__ == "__main__":
    asyncio.run(main())
