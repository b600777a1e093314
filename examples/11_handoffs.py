"""Handoffs: a triage agent transfers the conversation to a specialist.

Each handoff target becomes a tool (``transfer_to_<name>``) of the agent that may hand
off. Calling it switches the active agent after the turn: the target's system prompt
is used from then on, but the transcript stays ONE conversation (with a ``handoff``
entry and the new system prompt recorded). ``result.final_agent`` is the agent that
answered. ``Handoff(agent, description=..., input_filter=...)`` customises the tool's
description and what the target sees of the conversation (its view only).

Offline by default (the scripted model plays both agents); set ``LOVIA_MODEL`` (e.g.
``openai:gpt-4.1-mini``) for a real model.

Run: python examples/11_handoffs.py
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from lovia import Agent, Handoff, Runner, events
from lovia.testing import ScriptedModel, call
from lovia.transcript import InputEntry


def user_messages_only(entries: Sequence[Any]) -> list[Any]:
    """The billing agent sees only what the user said (not triage's tool calls)."""
    return [e for e in entries if isinstance(e, InputEntry)]


async def main() -> None:
    model = os.environ.get("LOVIA_MODEL") or ScriptedModel(
        [
            call("transfer_to_billing"),
            "I have refunded invoice 42; the money arrives in 3 days.",
        ]
    )
    billing = Agent(
        name="billing",
        instructions="You handle invoices and refunds. Be precise.",
        description="Invoices, refunds and payments.",
        model=model,
    )
    triage = Agent(
        name="triage",
        instructions="Route the user to the right specialist.",
        model=model,
        handoffs=[
            Handoff(
                agent=billing,
                description="Billing questions: invoices, refunds.",
                input_filter=user_messages_only,
            )
        ],
    )
    handle = Runner.stream(triage, "Please refund invoice 42, it was charged twice.")
    async for event in handle:
        if isinstance(event, events.HandoffOccurred):
            print(f"handoff: {event.from_agent} -> {event.to_agent}")
        elif isinstance(event, events.MessageCompleted):
            print(f"[{event.agent}] answered (turn {event.turn})")
    result = await handle.result()
    print("final agent:", result.final_agent.name)
    print("output:", result.output)
    print("transcript:", [e.type for e in result.entries])


if __name__ == "__main__":
    import asyncio

    asyncio.run(main())
