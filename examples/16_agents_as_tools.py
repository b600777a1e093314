"""Agents as tools: a manager delegates to two specialists that run as child runs.

``agent.as_tool()`` turns an agent into a tool. When the manager's model calls it, the
specialist runs as a **child run** inside that tool call: its own transcript and system
prompt, its final output returned as the tool result. Unlike a handoff, the manager
stays in charge and gets the answers back. The child runs are linked to the parent:

- their usage and cost are part of ``result.usage`` (``result.child_usage`` per call);
- the manager's ``RunBudget`` covers them;
- their run ids derive from the tool call, so a crashed parent resumes them;
- ``Runner.stream(..., nested=True)`` shows their events as ``ChildRunEvent``.

Here both specialists are marked ``concurrency_safe`` and run in parallel. The store is
``$LOVIA_STORE`` (the tests point it at a temporary file); try ``lovia runs --all`` and
``lovia show RUN`` afterwards. Offline by default (scripted models); set
``LOVIA_MODEL`` (e.g. ``openai:gpt-4.1-mini``) for a real model.

Run: python examples/16_agents_as_tools.py
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel

from lovia import Agent, RunBudget, Runner, Usage, events
from lovia.stores import store
from lovia.telemetry import set_price
from lovia.testing import ScriptedModel, call, reply


class Findings(BaseModel):
    """What the researcher returns (sent to the manager as JSON)."""

    facts: list[str]
    confidence: float


def model(steps: list[Any]) -> Any:
    return os.environ.get("LOVIA_MODEL") or ScriptedModel(steps, model="demo-model")


async def main() -> None:
    set_price("test", "demo-model", input_per_mtok=2.0, output_per_mtok=8.0)
    researcher = Agent(
        name="researcher",
        instructions="Find facts. Answer as JSON.",
        description="Finds facts about a topic.",
        output_type=Findings,
        model=model(
            [
                reply(
                    '{"facts": ["moths navigate by the moon"], "confidence": 0.8}',
                    usage=Usage(input_tokens=900, output_tokens=60),
                )
            ]
        ),
    )
    writer = Agent(
        name="writer",
        instructions="Write one vivid sentence.",
        description="Writes short copy.",
        model=model(
            [reply("Moths steer by moonlight.", usage=Usage(input_tokens=400, output_tokens=20))]
        ),
    )
    manager = Agent(
        name="manager",
        instructions="Use your specialists, then combine their work.",
        tools=[
            researcher.as_tool(concurrency_safe=True),
            writer.as_tool(concurrency_safe=True, max_turns=3),
        ],
        model=model(
            [
                reply(
                    tool_calls=[
                        call("researcher", input="how do moths navigate?"),
                        call("writer", input="a line about moths"),
                    ],
                    usage=Usage(input_tokens=300, output_tokens=40),
                ),
                reply(
                    "Moths steer by moonlight (confidence 0.8).",
                    usage=Usage(input_tokens=700, output_tokens=30),
                ),
            ]
        ),
    )
    db = store(os.environ.get("LOVIA_STORE", "sqlite:///.lovia/lovia.db"))
    stream = Runner.stream(
        manager,
        "Brief me on moths.",
        checkpointer=db,
        budget=RunBudget(max_cost_usd=1.0),
        nested=True,
    )
    async for event in stream:
        if isinstance(event, events.ToolCallStarted):
            print(f"manager calls {event.call.name}")
        elif isinstance(event, events.ChildRunEvent) and isinstance(
            event.event, events.RunCompleted
        ):
            print(f"  child {event.event.agent} done: {event.event.output!r}")
    result = await stream.result()
    print("output:", result.output)
    print(f"own cost ${result.own_usage.cost_usd:.6f}")
    for call_id, usage in result.child_usage.items():
        print(f"child of call {call_id}: {usage.total_tokens} tokens, ${usage.cost_usd:.6f}")
    print(f"total ${result.usage.cost_usd:.6f} in {result.usage.requests} model calls")
    children = await db.list_runs(parent_run_id=result.run_id)
    print("stored child runs:", sorted(c.agent for c in children))
    await db.aclose()


if __name__ == "__main__":
    import asyncio

    asyncio.run(main())
