"""Recorded runs for the eval tests: tools, a compacted run, an agent run as a tool."""

from __future__ import annotations

from typing import Any

from lovia import Agent, Compaction, ModelProfile, PluginInstance, Runner, tool
from lovia.stores.base import Store
from lovia.testing import FunctionModel, ScriptedModel, call
from lovia.view.compaction import DEFAULT_SUMMARY_PROMPT

LIVE: list[str] = []
"""Every real tool execution (the baseline must add none)."""


@tool
async def lookup(order_id: str) -> str:
    """Look up an order."""
    LIVE.append(order_id)
    return f"{order_id}: shipped"


@tool
async def fetch_page(n: int) -> str:
    """Fetch a page (even pages are long enough to be evicted)."""
    LIVE.append(f"page {n}")
    return f"page {n}: " + "lorem ipsum dolor " * (200 if n % 2 == 0 else 60)


@tool
async def note(text: str) -> str:
    """Take a note."""
    LIVE.append(f"note {text}")
    return "noted " + text


class Reminder:
    name = "reminder"

    async def setup(self, ctx: Any) -> PluginInstance:
        return PluginInstance(view_injectors=[lambda c: ["<system-reminder>be brief"]])


async def record_tools(db: Store, n: int = 0) -> str:
    model = ScriptedModel(
        [call("lookup", order_id=f"A{n}"), call("lookup", order_id=f"B{n}"), f"Both shipped ({n})."]
    )
    agent = Agent(name="support", instructions="Be brief.", model=model, tools=[lookup])
    result = await Runner.run(agent, f"where are A{n} and B{n}?", checkpointer=db)
    return result.run_id


async def record_compacted(db: Store, pages: int = 12) -> str:
    fetched: list[int] = []

    def decide(request: Any, info: Any) -> Any:
        if request.system == DEFAULT_SUMMARY_PROMPT or not request.tools:
            return "Summary: pages fetched."
        if len(fetched) >= pages:
            return "All pages are in."
        fetched.append(1)
        return call("fetch_page", n=len(fetched))

    model = FunctionModel(decide, profile=ModelProfile(context_window=2_500))
    agent = Agent(
        name="reader",
        model=model,
        tools=[fetch_page],
        plugins=[Reminder()],
        context=Compaction(max_result_tokens=400, keep_recent_turns=2),
    )
    result = await Runner.run(
        agent, "fetch the pages", checkpointer=db, session=db, session_id="reader"
    )
    return result.run_id


async def record_nested(db: Store, n: int = 0) -> str:
    child = Agent(
        name="researcher",
        model=ScriptedModel([call("note", text=f"x{n}"), f"found {n}"]),
        tools=[note],
    )
    parent = Agent(
        name="manager",
        model=ScriptedModel([call("researcher", input=f"dig {n}"), f"done: found {n}"]),
        tools=[child.as_tool()],
    )
    result = await Runner.run(parent, "research", checkpointer=db)
    return result.run_id


async def record_handoff(db: Store, n: int = 0) -> str:
    billing = Agent(
        name="billing",
        instructions="You handle refunds.",
        description="refunds and invoices",
        model=ScriptedModel([call("lookup", order_id=f"R{n}"), f"Refunded R{n}."]),
        tools=[lookup],
    )
    triage = Agent(
        name="triage",
        instructions="Route the user.",
        model=ScriptedModel([call("transfer_to_billing")]),
        handoffs=[billing],
    )
    result = await Runner.run(triage, f"refund R{n}", checkpointer=db)
    assert result.final_agent.name == "billing"
    return result.run_id


async def record_parallel(db: Store) -> str:
    import asyncio

    @tool(concurrency_safe=True)
    async def slow(n: int) -> str:
        """Slow for a small n."""
        await asyncio.sleep(0.05 * (3 - n))
        LIVE.append(f"slow {n}")
        return f"slow {n} done"

    model = ScriptedModel(
        [[call("slow", n=0), call("slow", n=1), call("slow", n=2)], "All three done."]
    )
    agent = Agent(name="fan", model=model, tools=[slow])
    result = await Runner.run(agent, "run three", checkpointer=db)
    return result.run_id
