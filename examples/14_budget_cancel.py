"""Budgets, cancellation and the mailbox: steering a run that is already going.

- ``RunBudget`` caps turns, tokens, cost, tool calls and wall time; it is checked before
  every model call and every tool call, and hitting a limit ends the run with
  ``BudgetExceeded`` (``.limit``, ``.turn``). ``max_turns`` alone defaults to 50.
  ``max_seconds`` also stops a model call or tool still in flight.
- A ``CancelToken`` (passed in, or ``handle.cancel()``) interrupts an in-flight model
  stream or a running tool and ends the run with ``RunCancelled``; the checkpoint stays
  resumable: resubmit the ``run_id`` to finish the run.
- ``ctx.mailbox.put(...)`` (from a tool or a hook) or ``handle.mailbox.put(...)`` (from
  outside) adds a user message at the start of the next turn.

Offline by default; set ``LOVIA_MODEL`` (e.g. ``openai:gpt-4.1-mini``) for a real model.

Run: python examples/14_budget_cancel.py
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from lovia import (
    Agent,
    BudgetExceeded,
    CancelToken,
    RunBudget,
    RunCancelled,
    RunContext,
    Runner,
    tool,
)
from lovia.stores import MemoryStore
from lovia.testing import ScriptedModel, call, reply


@tool
async def crawl(ctx: RunContext[Any], url: str) -> str:
    """Fetch a page (slowly)."""
    await asyncio.sleep(0.05 if "fast" in url else 30)
    ctx.mailbox.put(f"note: {url} was crawled; summarise before crawling more")
    return f"<html>{url}</html>"


def agent(steps: list[Any]) -> Agent[Any, str]:
    model = os.environ.get("LOVIA_MODEL") or ScriptedModel(steps)
    return Agent(
        name="crawler", instructions="Crawl what the user asks.", model=model, tools=[crawl]
    )


async def main() -> None:
    # 1. a budget: the second crawl is refused, the run ends with BudgetExceeded
    steps = [
        call("crawl", url="https://fast.example/1"),
        call("crawl", url="https://fast.example/2"),
    ]
    try:
        await Runner.run(agent(steps), "crawl two pages", budget=RunBudget(max_tool_calls=1))
    except BudgetExceeded as exc:
        print(f"budget: {exc.limit} hit at turn {exc.turn}")

    # 2. cancel a slow tool after 0.2 s, then resume the run from its checkpoint
    store, token = MemoryStore(), CancelToken()
    asyncio.get_running_loop().call_later(0.2, token.cancel, "user pressed stop")
    t0 = time.monotonic()
    try:
        await Runner.run(
            agent([call("crawl", url="https://slow.example")]),
            "crawl it",
            run_id="crawl-1",
            checkpointer=store,
            cancel_token=token,
        )
    except RunCancelled as exc:
        print(f"cancelled after {time.monotonic() - t0:.1f}s: {exc.message}")
    resumed = await Runner.run(
        agent(["The slow page could not be crawled."]), None, run_id="crawl-1", checkpointer=store
    )
    print("resumed:", resumed.output)

    # 3. the mailbox: the tool's note is delivered at the next turn, as a user message
    result = await Runner.run(
        agent([call("crawl", url="https://fast.example/3"), reply("Summary: one page crawled.")]),
        "crawl page 3",
    )
    print(
        "mailbox:",
        [e.content for e in result.entries if e.type == "input" and e.origin == "mailbox"],
    )


if __name__ == "__main__":
    asyncio.run(main())
