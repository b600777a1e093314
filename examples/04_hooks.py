"""Hooks: react to run events without touching the loop.

``AgentHooks`` collects handlers registered with ``@hooks.on(EventType)``; each handler
gets ``(event, ctx)`` and may be sync or async. Handlers for one event run in
registration order; a handler registered for ``events.Event`` sees every event. Here:
a tool-call log and a per-run cost line.

Offline by default (a scripted model plays the model's part); set ``LOVIA_MODEL``
(e.g. ``openai:gpt-4.1-mini``) to use a real one.

Run: python examples/04_hooks.py
"""

from __future__ import annotations

import os
from typing import Any

from lovia import Agent, AgentHooks, RunContext, Runner, events, tool
from lovia.testing import ScriptedModel, call

hooks = AgentHooks()


@hooks.on(events.ToolCallCompleted)
def log_tool(ev: events.ToolCallCompleted, ctx: RunContext[Any]) -> None:
    status = "error" if ev.is_error else "ok"
    print(f"[turn {ev.turn}] {ev.call.name} -> {status}: {ev.result.content}")


@hooks.on(events.RunCompleted)
async def report(ev: events.RunCompleted, ctx: RunContext[Any]) -> None:
    u = ev.usage
    print(f"[run {ev.run_id[:8]}] {ev.turns} turns, {u.input_tokens} in / {u.output_tokens} out")


@tool
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


def main() -> None:
    model = os.environ.get("LOVIA_MODEL") or ScriptedModel(
        [
            call("divide", a=1, b=0),  # raises ZeroDivisionError: the model sees an error
            call("divide", a=10, b=4),
            "10 / 4 = 2.5 (and 1 / 0 is undefined).",
        ]
    )
    agent = Agent(name="calc", model=model, tools=[divide], hooks=hooks)
    result = Runner.run_sync(agent, "Compute 1/0 and 10/4.")
    print(result.output)


if __name__ == "__main__":
    main()
