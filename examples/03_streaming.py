"""Streaming: watch a run event by event, then take its result.

``Runner.stream`` returns a handle that is an async iterator of typed events
(``lovia.events``) and has ``await handle.result()``. Iterating never raises because of
the run: the last event is always ``RunCompleted`` or ``RunFailed``, and the run's error
(if any) is raised by ``result()``. ``Runner.run`` drains this same stream.

Offline by default (a scripted model plays the model's part); set ``LOVIA_MODEL``
(e.g. ``openai:gpt-4.1-mini``) to use a real one.

Run: python examples/03_streaming.py
"""

from __future__ import annotations

import asyncio
import os

from lovia import Agent, Runner, events, tool
from lovia.testing import ScriptedModel, call


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"{city}: 18 °C, light rain"


async def main() -> None:
    model = os.environ.get("LOVIA_MODEL") or ScriptedModel(
        [call("get_weather", city="Lisbon"), "It is 18 °C with light rain in Lisbon."]
    )
    agent = Agent(name="weather", model=model, tools=[get_weather])
    handle = Runner.stream(agent, "What's the weather in Lisbon?")
    async for ev in handle:
        if isinstance(ev, events.TurnStarted):
            print(f"-- turn {ev.turn}")
        elif isinstance(ev, events.ToolCallStarted):
            print(f"   tool {ev.call.name}({ev.call.arguments})")
        elif isinstance(ev, events.ToolCallCompleted):
            print(f"   -> {ev.result.content}")
        elif isinstance(ev, events.TextDelta):
            print(ev.text, end="", flush=True)
        elif isinstance(ev, (events.RunCompleted, events.RunFailed)):
            print(f"\n-- {type(ev).__name__}")
    result = await handle.result()  # raises here if the run failed
    print(f"{result.turns} turns, finish_reason={result.finish_reason}")


if __name__ == "__main__":
    asyncio.run(main())
