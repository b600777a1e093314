"""Tools that use your own dependencies through ``RunContext[Deps]``.

A tool receives the run's ``RunContext`` by annotating one parameter with it (any name);
that parameter is injected by lovia and is not part of the tool's JSON schema. Your
dependencies (a database, an HTTP client, the current user) go in ``deps`` when you start
the run and reach every tool, hook and guardrail of that run as ``ctx.deps``.

Offline by default (a scripted model plays the model's part); set ``LOVIA_MODEL``
(e.g. ``openai:gpt-4.1-mini``) to use a real one.

Run: python examples/02_tools_and_context.py
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from lovia import Agent, RunContext, Runner, tool
from lovia.testing import ScriptedModel, call


@dataclass
class Deps:
    """What the tools need; one instance per run (or shared, if it is safe to share)."""

    user_id: str
    orders: dict[str, list[str]] = field(default_factory=dict)


@tool
def my_orders(ctx: RunContext[Deps]) -> list[str]:
    """List the current user's orders."""
    return ctx.deps.orders.get(ctx.deps.user_id, [])


def main() -> None:
    model = os.environ.get("LOVIA_MODEL") or ScriptedModel(
        [call("my_orders"), "You have two orders: A-1001 and A-1002."]
    )
    agent = Agent(
        name="support",
        instructions="Answer questions about the user's orders. Use the tools.",
        model=model,
        tools=[my_orders],
    )
    print("schema:", my_orders.parameters)  # no ctx parameter in it
    deps = Deps(user_id="u-42", orders={"u-42": ["A-1001", "A-1002"]})
    result = Runner.run_sync(agent, "Which orders do I have?", deps=deps)
    print(result.output)


if __name__ == "__main__":
    main()
