"""Guardrails: checks on the run's input and on its final output.

An input guardrail sees the run's input entries once, after the transcript is built; an
output guardrail sees the final output before the run is marked complete. Each is a
function ``(ctx, value)``, sync or async; it trips by returning ``True``, a reason
string, or ``GuardrailResult(tripped=True, reason=...)``. A trip ends the run with
``GuardrailTripped`` (``.guardrail``, ``.reason``) and writes nothing to the session.

Offline by default; set ``LOVIA_MODEL`` (e.g. ``openai:gpt-4.1-mini``) for a real model.

Run: python examples/12_guardrails.py
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Sequence
from typing import Any

from lovia import Agent, GuardrailResult, GuardrailTripped, RunContext, Runner, guardrail
from lovia.stores import MemoryStore
from lovia.testing import ScriptedModel
from lovia.transcript import InputEntry

CARD = re.compile(r"\b(?:\d[ -]?){13,16}\b")


@guardrail(name="no_card_numbers")
def no_card_numbers(ctx: RunContext[Any], entries: Sequence[InputEntry]) -> str | None:
    """Refuse input that contains a payment card number."""
    if any(CARD.search(e.content) for e in entries):
        return "the message contains a card number"
    return None


async def no_internal_urls(ctx: RunContext[Any], output: str) -> GuardrailResult:
    """Never send internal links to a customer."""
    return GuardrailResult(tripped="intranet.example" in output, reason="internal link")


def make_agent(answer: str) -> Agent[Any, str]:
    model = os.environ.get("LOVIA_MODEL") or ScriptedModel([answer])
    return Agent(
        name="support",
        instructions="Help the customer.",
        model=model,
        input_guardrails=[no_card_numbers],
        output_guardrails=[no_internal_urls],
    )


async def main() -> None:
    sessions = MemoryStore()
    ok = await Runner.run(
        make_agent("Your order ships today."),
        "Where is my order?",
        session=sessions,
        session_id="c1",
    )
    print("passed:", ok.output)

    for text, answer in [
        ("My card is 4111 1111 1111 1111, charge it", "unused"),
        ("How do refunds work?", "See https://intranet.example/refunds"),
    ]:
        try:
            await Runner.run(make_agent(answer), text, session=sessions, session_id="c2")
        except GuardrailTripped as exc:
            print(f"tripped: {exc.kind} guardrail {exc.guardrail!r}: {exc.reason}")
    print("session c2 entries:", len(await sessions.load_session("c2")))  # 0: nothing written


if __name__ == "__main__":
    asyncio.run(main())
