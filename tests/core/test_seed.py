"""The seed's snippets (000_*.txt) run as written, on the scripted model."""

from __future__ import annotations

from dataclasses import dataclass

from lovia import Agent, InputEntry, RunContext, Runner, tool
from lovia.testing import ScriptedModel, call


@tool
async def lookup_order(order_id: str) -> str:
    """根据订单号查询订单。"""
    return f"{order_id}: 已发货"


class Database:
    def __init__(self, rows: dict[int, str]) -> None:
        self.rows = rows

    async def fetch(self, user_id: int) -> str:
        return self.rows[user_id]


@dataclass
class Deps:
    db: Database


@tool
async def lookup(ctx: RunContext[Deps], user_id: int) -> str:
    """读取用户记录。"""
    return await ctx.deps.db.fetch(user_id)


async def test_main_objects_snippet() -> None:
    model = ScriptedModel(["发布说明：……"])
    agent = Agent(name="writer", instructions="先说明对用户的影响，再介绍实现细节。", model=model)
    result = await Runner.run(agent, "写一段发布说明。")
    assert result.output == "发布说明：……"
    assert result.turns == 1
    assert result.final_agent is agent
    assert model.requests[0].system == "先说明对用户的影响，再介绍实现细节。"
    model.assert_consumed()


async def test_tool_snippet_and_context_injection() -> None:
    model = ScriptedModel([call("lookup_order", order_id="A1"), call("lookup", user_id=7), "好"])
    agent = Agent(name="support", model=model, tools=[lookup_order, lookup])
    result = await Runner.run(agent, "查一下", deps=Deps(db=Database({7: "ann"})))
    results = [e for e in result.entries if e.type == "tool_result"]
    assert [r.content for r in results] == ["A1: 已发货", "ann"]
    assert result.turns == 3
    # RunContext is injected whatever its name and absent from the schema
    assert lookup.parameters["properties"].keys() == {"user_id"}
    assert lookup.description == "读取用户记录。"


async def test_input_entry_as_input() -> None:
    model = ScriptedModel(["ok"])
    agent = Agent(name="a", model=model)
    await Runner.run(agent, InputEntry(role="user", content="你好"))
    (message,) = model.requests[0].messages
    assert isinstance(message, InputEntry) and message.content == "你好"


async def test_entries_are_only_this_runs() -> None:
    from lovia.stores import MemoryStore

    store = MemoryStore()
    agent = Agent(name="a", model=ScriptedModel(["one", "two"]))
    first = await Runner.run(agent, "1", session=store, session_id="s")
    second = await Runner.run(agent, "2", session=store, session_id="s")
    assert {e.run_id for e in second.entries} == {second.run_id}
    assert len(await store.load_session("s")) == len(first.entries) + len(second.entries)
