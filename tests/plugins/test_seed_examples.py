"""The LoopGuard and GlossaryPlugin examples, run from examples/."""

from __future__ import annotations

import asyncio
from typing import Any

from lovia import Agent, Runner, ToolError, tool
from lovia.errors import ContextOverflow
from lovia.providers.base import ModelRequest
from lovia.stores.memory import MemoryStore
from lovia.testing import FunctionModel, ScriptedModel, call
from lovia.transcript import InputEntry

from .conftest import load_example

loop_guard = load_example("26_loop_guard.py")
glossary = load_example("25_custom_plugin.py")

FLAKY_CALLS: list[int] = []


@tool
async def fetch(url: str) -> str:
    """Fetch a URL (always fails)."""
    raise ToolError("connection refused")


@tool
async def ok() -> str:
    """Succeed."""
    return "fine"


def reminders(request: ModelRequest) -> list[str]:
    return [
        m.content
        for m in request.messages
        if isinstance(m, InputEntry) and "<system-reminder>" in m.content
    ]


async def test_loop_guard_reminds_once_per_streak_in_view_only() -> None:
    same = call("fetch", url="http://x")
    model = ScriptedModel([same, same, same, same, same, call("ok"), same, same, same, "done"])
    store = MemoryStore()
    agent = Agent(
        name="b", model=model, tools=[fetch, ok], plugins=[loop_guard.LoopGuard(threshold=3)]
    )
    result = await Runner.run(agent, "go", session=store, session_id="s")
    counts = [len(reminders(r)) for r in model.requests]
    # After the 3rd identical failure (request index 3) and, after a success resets
    # the streak, after the next 3rd (request index 9); never again in between.
    assert counts == [0, 0, 0, 1, 0, 0, 0, 0, 0, 1]
    assert "`fetch` with identical arguments 3 times" in reminders(model.requests[3])[0]
    assert not any("system-reminder" in str(getattr(e, "content", "")) for e in result.entries)
    stored = await store.load_session("s")
    assert not any("system-reminder" in str(getattr(e, "content", "")) for e in stored)


async def test_loop_guard_key_order_does_not_matter_but_args_do() -> None:
    model = ScriptedModel(
        [
            call("fetch", '{"url": "a"}'),
            call("fetch", '{ "url":"a" }'),
            call("fetch", url="b"),
            call("fetch", url="b"),
            "done",
        ]
    )
    agent = Agent(name="b", model=model, tools=[fetch], plugins=[loop_guard.LoopGuard(2)])
    await Runner.run(agent, "go")
    assert [len(reminders(r)) for r in model.requests] == [0, 0, 1, 0, 1]


async def test_loop_guard_reminder_survives_an_overflow_retry() -> None:
    same = call("fetch", url="u")
    plan: list[Any] = [same, same, same, ContextOverflow("too long", tokens=10, limit=5), "done"]

    def respond(request: ModelRequest, info: Any) -> Any:
        if not request.tools:  # a compaction summary request, not an agent turn
            return "summary"
        return plan.pop(0)

    model = FunctionModel(respond)
    agent = Agent(name="b", model=model, tools=[fetch], plugins=[loop_guard.LoopGuard()])
    result = await Runner.run(agent, "go")
    assert result.output == "done"
    turns = [r for r in model.requests if r.tools]
    assert len(turns) == 5
    assert len(reminders(turns[3])) == 1  # the attempt that overflowed
    assert len(reminders(turns[4])) == 1  # its retry still carries it


async def test_glossary_plugin_across_two_runs_sharing_a_store() -> None:
    store = glossary.MyGlossary()
    first = ScriptedModel([call("define", term="SLO", meaning="service level objective"), "ok"])
    second = ScriptedModel([call("lookup", term="slo"), "ok"])
    for model in (first, second):
        agent = Agent(name="a", model=model, plugins=[glossary.GlossaryPlugin(store)])
        await Runner.run(agent, "hi")
        assert "`define`" in model.requests[0].system
    looked_up = second.requests[1].messages[-1]
    assert getattr(looked_up, "content", None) == "service level objective"


async def test_glossary_concurrent_runs_share_the_store_safely() -> None:
    store = glossary.MyGlossary()
    plugin = glossary.GlossaryPlugin(store)

    async def one(i: int) -> None:
        model = ScriptedModel([call("define", term=f"t{i}", meaning=f"m{i}"), "ok"])
        await Runner.run(Agent(name="a", model=model, plugins=[plugin]), "hi")

    await asyncio.gather(*(one(i) for i in range(10)))
    for i in range(10):
        assert await store.lookup(f"t{i}") == f"m{i}"
