"""OpenAI Agents SDK on the benchmark workload (Chat Completions model, tracing off).

``Runner.run`` in json mode, ``Runner.run_streamed`` (events drained) in sse mode.
"""

from __future__ import annotations

import asyncio

from _common import INSTRUCTIONS, MAX_TURNS, PROMPT, import_timer, measure, model_name, parse_args

elapsed = import_timer()
from agents import (  # noqa: E402
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    Runner,
    __version__,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI  # noqa: E402

IMPORT_S = elapsed()


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def build_agent(base_url: str, model: str) -> Agent:
    """The benchmark agent on a Chat Completions model pointed at the fake server."""
    client = AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    return Agent(
        name="bench",
        instructions=INSTRUCTIONS,
        model=OpenAIChatCompletionsModel(model=model, openai_client=client),
        model_settings=ModelSettings(include_usage=True),
        tools=[add],
    )


async def run_json(agent: Agent) -> str:
    """One non-streamed run; returns the final output."""
    result = await Runner.run(agent, PROMPT, max_turns=MAX_TURNS)
    return str(result.final_output)


async def run_sse(agent: Agent) -> str:
    """One streamed run, draining every event; returns the final output."""
    result = Runner.run_streamed(agent, PROMPT, max_turns=MAX_TURNS)
    async for _event in result.stream_events():
        pass
    return str(result.final_output)


async def main() -> None:
    """Parse options, build the agent, measure."""
    args = parse_args(__doc__.splitlines()[0])
    set_tracing_disabled(True)
    agent = build_agent(args.base_url, model_name(args.turns, args.calls))
    run = run_sse if args.mode == "sse" else run_json
    await measure(
        "openai-agents", args, lambda: run(agent), IMPORT_S, extra={"version": __version__}
    )


if __name__ == "__main__":
    asyncio.run(main())
