"""Structured output: ask for a typed answer and get a validated object back.

``Agent(output_type=...)`` accepts a pydantic model, a dataclass, a TypedDict, a union,
a scalar or a list. When the provider supports JSON-schema output natively the schema
is sent with the request; otherwise a contract with the schema is appended to the system
prompt. An answer that does not validate gets one repair turn (``output_repairs=1``).

Offline by default: the scripted model first answers with an invalid object (a string
where a number belongs), gets the validation errors back, and fixes it. Set
``LOVIA_MODEL`` (e.g. ``openai:gpt-4.1-mini``) to ask a real model instead.

Run: python examples/10_structured_output.py
"""

from __future__ import annotations

import os

from pydantic import BaseModel, Field

from lovia import Agent, Runner
from lovia.testing import ScriptedModel


class Invoice(BaseModel):
    """The fields we want from a free-text invoice."""

    vendor: str
    total: float = Field(description="Amount due, in the invoice's currency")
    currency: str = Field(pattern="^[A-Z]{3}$")


def main() -> None:
    scripted = ScriptedModel(
        [
            '{"vendor": "ACME", "total": "one hundred", "currency": "EUR"}',  # invalid
            '```json\n{"vendor": "ACME", "total": 100.0, "currency": "EUR"}\n```',  # repaired
        ]
    )
    model = os.environ.get("LOVIA_MODEL") or scripted
    agent = Agent(
        name="extractor",
        instructions="Extract the invoice fields from the user's text.",
        model=model,
        output_type=Invoice,
        output_repairs=1,
    )
    result = Runner.run_sync(agent, "ACME GmbH — total due: EUR 100.00 by March 1st.")
    invoice: Invoice = result.output
    print(f"{invoice.vendor}: {invoice.total:.2f} {invoice.currency} (turns: {result.turns})")
    if model is scripted:
        repair = scripted.requests[1].messages[-1]
        print("repair message:", repair.content)


if __name__ == "__main__":
    main()
