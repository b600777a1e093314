"""Thousands of runs in flight: what is the same in every run of an agent is kept once.

The tool specs, handoff tools, output mode, default strategy and system prompt of a
plugin-less agent are shared by its runs; each run still gets its own tools dict and
strategy state, and what a run sees (requests, tool order, errors) is unchanged. The
run's cancel token and mailbox make their containers on first use.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from lovia import Agent, PluginInstance, RunContext, Runner, UserError, tool
from lovia._loop import new_state
from lovia._loop.activate import activate
from lovia._loop.state import RunParams, RunState
from lovia.context import CancelToken, Mailbox
from lovia.testing import ScriptedModel, reply


@tool
def look(item: str) -> str:
    """Look an item up."""
    return f"{item}: found"


@tool
def other(item: str) -> str:
    """Another tool, from a plugin."""
    return item


class Adds:
    """A plugin adding one tool (``other``, or a clashing name)."""

    def __init__(self, name: str = "adds", tool_name: str = "other") -> None:
        self.name = name
        self.tool_name = tool_name

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        return PluginInstance(tools=[tool(name=self.tool_name)(other.fn)])


async def _activated(agent: Agent[Any, Any]) -> RunState:
    state = new_state(RunParams(agent=agent, input="hi"))
    async for _ in activate(state, agent):
        pass
    return state


async def test_runs_of_one_agent_share_specs_and_prompt() -> None:
    billing = Agent(name="billing", model=ScriptedModel([]))
    model = ScriptedModel([reply("one"), reply("two")])
    agent = Agent(
        name="support", instructions="You help.", model=model, tools=[look], handoffs=[billing]
    )
    assert (await Runner.run(agent, "a")).output == "one"
    assert (await Runner.run(agent, "b")).output == "two"
    first, second = model.requests
    assert [s.name for s in first.tools] == ["look", "transfer_to_billing"]
    assert first.tools == second.tools
    assert all(a is b for a, b in zip(first.tools, second.tools, strict=True))
    assert first.system == second.system == "You help."
    assert first.system is second.system


async def test_each_run_has_its_own_tools_and_strategy_state() -> None:
    agent = Agent(name="a", instructions="x", model=ScriptedModel([]), tools=[look])
    one, two = await _activated(agent), await _activated(agent)
    assert one.active is not None and two.active is not None
    assert one.active.tools is not two.active.tools
    one.active.tools["recall_tool_result"] = look  # what a run's compaction may add
    assert list((await _activated(agent)).active.tools) == ["look"]  # type: ignore[union-attr]
    assert list(two.active.tools) == ["look"]
    assert one.active.strategy is two.active.strategy  # Compaction() is frozen config
    assert one.active.strategy_state is not two.active.strategy_state
    assert one.active.specs is two.active.specs
    assert one.runtime.closers is None and one.resume_calls is None and one.undelivered == ()


async def test_a_replaced_tools_field_is_not_served_from_the_cache() -> None:
    agent = Agent(name="a", model=ScriptedModel([]), tools=[look])
    assert [s.name for s in (await _activated(agent)).active.specs] == ["look"]  # type: ignore[union-attr]
    object.__setattr__(agent, "tools", (look, other))
    state = await _activated(agent)
    assert state.active is not None
    assert [s.name for s in state.active.specs] == ["look", "other"]


async def test_plugin_tools_sit_between_agent_and_handoff_tools() -> None:
    billing = Agent(name="billing", model=ScriptedModel([]))
    agent = Agent(
        name="a", model=ScriptedModel([]), tools=[look], plugins=[Adds()], handoffs=[billing]
    )
    for _ in range(2):  # the second run reuses the shared part
        state = await _activated(agent)
        assert state.active is not None
        names = [s.name for s in state.active.specs]
        assert names == ["look", "other", "transfer_to_billing"]
        assert list(state.active.tools) == names
        assert state.active.tools["other"].source == "plugin 'adds'"
        assert list(state.active.handoffs) == ["transfer_to_billing"]


async def test_a_plugin_tool_clashing_with_a_handoff_tool_is_refused() -> None:
    billing = Agent(name="billing", model=ScriptedModel([]))
    agent = Agent(
        name="a",
        model=ScriptedModel([]),
        plugins=[Adds(tool_name="transfer_to_billing")],
        handoffs=[billing],
    )
    with pytest.raises(UserError, match="by plugin 'adds' and by handoff"):
        await _activated(agent)


async def test_an_agent_tool_clash_is_refused_every_run() -> None:
    agent = Agent(name="a", model=ScriptedModel([]), tools=[look, look])
    for _ in range(2):  # a failed build is not cached
        with pytest.raises(UserError, match="defined twice"):
            await _activated(agent)


def test_an_unused_mailbox_holds_no_queue() -> None:
    box = Mailbox()
    assert len(box) == 0 and box.drain() == []
    assert box._queue is None  # pyright: ignore[reportPrivateUsage]  # ~600 bytes per run saved
    box.put("hi")
    assert len(box) == 1 and [m.content for m in box.drain()] == ["hi"]


def test_first_puts_from_many_threads_lose_no_message() -> None:
    for _ in range(50):
        box = Mailbox()
        start = threading.Barrier(8)

        def put(i: int, box: Mailbox = box, start: threading.Barrier = start) -> None:
            start.wait()
            box.put(f"m{i}")

        threads = [threading.Thread(target=put, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(m.content for m in box.drain()) == [f"m{i}" for i in range(8)]


def test_cancel_token_listeners() -> None:
    token = CancelToken()
    token.remove_listener(print)  # nothing added yet: a no-op
    calls: list[str] = []
    token.add_listener(lambda: calls.append("before"))
    token.cancel("stop")
    token.add_listener(lambda: calls.append("after"))  # called at once
    token.cancel("again")  # the first reason stays, listeners are not called twice
    assert calls == ["before", "after"] and token.reason == "stop"
