"""Replay: rebuild exactly what the model saw on each turn of a stored run (offline).

Runs an agent with a SQLite store (tools, a reminder injector, a handoff), then uses
the Python API of ``lovia.replay`` to rebuild every view, verify its hash, diff two
turns and render the request body a provider would get. The same from a shell, with
the store URL this script prints:

    lovia runs --store URL
    lovia replay RUN --store URL

Run: python examples/50_replay.py
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from lovia import Agent, Runner, replay, tool
from lovia.plugins import PluginInstance
from lovia.stores import store
from lovia.testing import ScriptedModel, call


@tool
async def lookup_order(order_id: str) -> str:
    """Look up an order by id."""
    return f"{order_id}: shipped yesterday"


class Reminders:
    """Adds a reminder to every view (never to the transcript)."""

    name = "reminders"

    async def setup(self, ctx: Any) -> PluginInstance:
        return PluginInstance(view_injectors=[lambda c: ["<reminder>be brief</reminder>"]])


async def main() -> None:
    url = f"sqlite:///{Path(tempfile.mkdtemp()) / 'lovia.db'}"
    db = store(url)
    billing = Agent(
        name="billing", instructions="You handle refunds.", model=ScriptedModel(["Refund issued."])
    )
    support = Agent(
        name="support",
        instructions="You help with orders.",
        tools=[lookup_order],
        plugins=[Reminders()],
        handoffs=[billing],
        model=ScriptedModel([call("lookup_order", order_id="A1"), call("transfer_to_billing")]),
    )
    result = await Runner.run(
        support, "Where is A1? Refund it.", checkpointer=db, session=db, session_id="demo"
    )
    await db.aclose()
    print(f"store {url}")
    print(f"run {result.run_id}: {result.output!r} after {result.turns} turns")

    views = await replay.views(str(result.run_id), url)
    for view in views:
        state = "ok" if view.ok else "MISMATCH"
        print(
            f"  {view.label} {view.agent:8} {len(view.messages)} entries "
            f"{view.rebuilt_hash[:16]}… {state}"
        )

    report = await replay.verify_run(str(result.run_id), url)
    print("verified:", report.ok)

    diff = replay.diff_views(views[0], views[-1])
    print(
        "turn 1 -> last: added",
        len(diff.added),
        "entries; agent",
        diff.agent,
        "; reminders removed",
        diff.injected_removed,
    )

    from lovia.providers.openai_chat import OpenAIChat

    # the exact Chat Completions body for the first view (no key needed to render)
    openai = OpenAIChat("gpt-4.1", api_key="sk-render-only")
    body = replay.render_request(views[0], openai)
    await openai.aclose()
    print(json.dumps(body, indent=2)[:400], "…")


if __name__ == "__main__":
    asyncio.run(main())
