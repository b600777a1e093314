"""lovia on the benchmark workload (OpenAIChat provider, telemetry off unless --otel).

``--otel`` installs the OTel SDK tracer and meter providers globally (see ``_otel``)
before the run; lovia's telemetry picks up the global providers. ``--per-turn`` hands
lovia an ``httpx.AsyncClient`` whose request hook records process CPU per model call.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from _common import (
    INSTRUCTIONS,
    MAX_TURNS,
    PROMPT,
    cpu_request_hook,
    import_timer,
    measure,
    model_name,
    parse_args,
)

elapsed = import_timer()
from lovia import Agent, Runner, tool  # noqa: E402
from lovia.providers.openai_chat import OpenAIChat  # noqa: E402

IMPORT_S = elapsed()


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(name="add")
def add_sync(a: int, b: int) -> int:
    """Add two integers (a sync tool: lovia runs it in a worker thread)."""
    return a + b


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--otel", action="store_true", help="OTel SDK tracing + metrics on")
    parser.add_argument(
        "--sync-tool", action="store_true", help="declare `add` as a sync tool (thread hop)"
    )


def build_agent(args: argparse.Namespace, marks: list[float]) -> Agent:
    """The benchmark agent; with ``--per-turn`` its HTTP client records CPU per request."""
    options: dict[str, Any] = {}
    if args.per_turn:
        import httpx

        options["http_client"] = httpx.AsyncClient(
            event_hooks={"request": [cpu_request_hook(marks)]}, timeout=60.0
        )
    model = OpenAIChat(
        model_name(args.turns, args.calls),
        base_url=args.base_url,
        api_key="x",
        stream=args.mode == "sse",
        **options,
    )
    tool_fn = add_sync if args.sync_tool else add
    return Agent(name="bench", instructions=INSTRUCTIONS, model=model, tools=[tool_fn])


async def run_once(agent: Agent) -> str:
    """One run; returns the final text."""
    result = await Runner.run(agent, PROMPT, max_turns=MAX_TURNS)
    return str(result.output)


async def main() -> None:
    """Parse options, set up telemetry if asked, build the agent, measure."""
    args = parse_args(__doc__.splitlines()[0], _options)
    extra: dict[str, Any] = {"otel": False}
    sdk = None
    if args.otel:
        from _otel import install_sdk

        sdk = install_sdk()

    def flush() -> None:
        if sdk is not None:
            sdk.flush()
            extra.update(sdk.summary())

    marks: list[float] = []
    agent = build_agent(args, marks)
    contender = "lovia+otel" if sdk else "lovia"
    await measure(
        contender,
        args,
        lambda: run_once(agent),
        IMPORT_S,
        flush=flush,
        cpu_marks=marks,
        extra=extra,
    )


if __name__ == "__main__":
    asyncio.run(main())
