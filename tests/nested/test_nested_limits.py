"""Agents as tools under attack: a self-calling agent stops at the depth limit with
every run of its tree recorded as ended; a run starting too many child runs stops;
a parent that ends (budget, deadline) ends its running children, recorded as such;
parallel children share the parent's token budget instead of each spending it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from lovia import (
    Agent,
    BudgetExceeded,
    NestingLimitExceeded,
    RunBudget,
    Runner,
    Usage,
)
from lovia.agent_tool import DEFAULT_MAX_DEPTH, child_run_id
from lovia.errors import UserError
from lovia.stores.memory import MemoryStore
from lovia.testing import FunctionModel, ScriptedModel, call, reply


def u(inp: int, out: int) -> Usage:
    return Usage(input_tokens=inp, output_tokens=out)


def self_calling(delay: float = 0.0, **limits: Any) -> Agent[Any, Any]:
    """An agent whose model always asks the agent itself again (it holds its own tool)."""

    async def again(request: Any, info: Any) -> Any:
        await asyncio.sleep(delay)
        return reply(tool_calls=[call("recurse", input="go deeper")], usage=u(3, 1))

    agent = Agent(name="recursive", model=FunctionModel(again))
    recurse = agent.as_tool("recurse", **limits)
    looped = agent.clone(tools=[recurse])
    object.__setattr__(recurse.fn, "agent", looped)  # the tool runs the agent holding it
    return looped


async def _tree(db: MemoryStore) -> list[Any]:
    return await db.list_runs(limit=100_000)


async def _assert_all_ended(db: MemoryStore, runs: list[Any]) -> None:
    assert [r.run_id for r in runs if r.status == "running"] == []
    assert [r.run_id for r in runs if await db.lease_holder(r.run_id) is not None] == []


async def test_a_self_calling_agent_stops_at_the_depth_limit() -> None:
    db = MemoryStore()
    with pytest.raises(NestingLimitExceeded) as caught:
        await asyncio.wait_for(Runner.run(self_calling(), "go", checkpointer=db, run_id="root"), 30)
    error = caught.value
    assert (error.limit, error.used) == ("max_depth", DEFAULT_MAX_DEPTH + 1)
    assert "max_depth=5" in error.message and "as_tool(max_depth=...)" in (error.hint or "")
    assert error.run_id == "root"
    runs = await _tree(db)
    assert len(runs) == DEFAULT_MAX_DEPTH + 1, "the root and one child per level, no more"
    await _assert_all_ended(db, runs)
    assert {(r.status, r.error_type) for r in runs} == {("failed", "NestingLimitExceeded")}
    parents = {r.run_id: r.parent_run_id for r in runs}
    leaf = next(r for r in parents if r not in parents.values())
    chain = [leaf]
    while parents[chain[-1]] is not None:
        chain.append(parents[chain[-1]])
    assert chain[-1] == "root" and len(chain) == DEFAULT_MAX_DEPTH + 1, "one straight line"


async def test_the_depth_limit_is_the_tools_to_set() -> None:
    db = MemoryStore()
    with pytest.raises(NestingLimitExceeded):
        await Runner.run(self_calling(max_depth=2), "go", checkpointer=db)
    assert len(await _tree(db)) == 3
    with pytest.raises(UserError, match="max_depth"):
        Agent(name="a", model=ScriptedModel([])).as_tool(max_depth=0)
    with pytest.raises(UserError, match="max_children"):
        Agent(name="a", model=ScriptedModel([])).as_tool(max_children=True)  # type: ignore[arg-type]


@pytest.mark.lovia_unconsumed  # the refused children's scripts are never read
async def test_a_run_starting_too_many_children_stops_before_the_next_one() -> None:
    models: list[ScriptedModel] = []

    def helper() -> Agent[Any, Any]:
        model = ScriptedModel(["ok"])
        models.append(model)
        return Agent(name="helper", model=model)

    boss = Agent(
        name="boss",
        model=ScriptedModel(
            [[call("helper", input=str(i), id=f"c{i}") for i in range(4)], "never"]
        ),
        tools=[helper().as_tool(max_children=2, concurrency_safe=True)],
    )
    db = MemoryStore()
    with pytest.raises(NestingLimitExceeded) as caught:
        await Runner.run(boss, "go", checkpointer=db, run_id="boss")
    assert (caught.value.limit, caught.value.used) == ("max_children", 3)
    assert "child run number 3 of run boss" in caught.value.message
    runs = await _tree(db)
    assert len(runs) <= 3  # the boss and at most the two allowed children
    await _assert_all_ended(db, runs)


async def test_children_of_a_parent_out_of_time_end_recorded_not_running() -> None:
    db = MemoryStore()
    with pytest.raises(BudgetExceeded) as caught:
        await asyncio.wait_for(
            Runner.run(
                self_calling(delay=0.05, max_depth=60),
                "go",
                checkpointer=db,
                run_id="timed",
                budget=RunBudget(max_seconds=0.6),
            ),
            30,
        )
    assert caught.value.limit == "max_seconds"
    runs = await _tree(db)
    assert len(runs) > 3, "the tree got some way down before the deadline"
    await _assert_all_ended(db, runs)
    # the run out of time failed; the children it ended were cancelled by it
    assert {r.run_id: r.status for r in runs}["timed"] == "failed"
    assert all(r.status in ("failed", "cancelled") for r in runs)


@pytest.mark.lovia_unconsumed  # children refused by the shared budget never call their model
async def test_parallel_children_share_the_parents_token_budget() -> None:
    """8 children, each one call of 600 tokens (estimated 500 from its 2,000-character
    input), against 1,000 tokens: two calls fit, the third waits for them, then the
    budget is spent and the rest are refused before calling. 1,200, not 4,800."""
    calls: list[str] = []

    async def worker_model(request: Any, info: Any) -> Any:
        calls.append("call")
        await asyncio.sleep(0.1)  # in flight together, as real calls are
        return reply("done", usage=u(500, 100))

    worker = Agent(name="worker", model=FunctionModel(worker_model))
    boss = Agent(
        name="boss",
        model=ScriptedModel(
            [
                reply(
                    tool_calls=[call("worker", input="x" * 2000, id=f"c{i}") for i in range(8)],
                    usage=u(0, 0),
                ),
                "never",
            ]
        ),
        tools=[worker.as_tool(concurrency_safe=True)],
    )
    db = MemoryStore()
    with pytest.raises(BudgetExceeded) as caught:
        await asyncio.wait_for(
            Runner.run(
                boss, "go", checkpointer=db, run_id="boss", budget=RunBudget(max_total_tokens=1000)
            ),
            30,
        )
    assert caught.value.budget_run_id == "boss"
    assert len(calls) == 2, "only the calls that fit were sent"
    runs = await _tree(db)
    spent = sum(r.input_tokens + r.output_tokens for r in runs if r.run_id != "boss")
    assert spent == 1200
    await _assert_all_ended(db, runs)


@pytest.mark.lovia_unconsumed  # the slow child's answer is never read
async def test_a_parent_failing_ends_its_running_child_recorded() -> None:
    """A sibling's recursion trips the depth limit and ends the parent mid-turn: the
    child still waiting on its model ends recorded (cancelled), not left running."""
    slow = Agent(name="slow", model=ScriptedModel([reply("late", delay=30)]))
    digger = self_calling(delay=0.1, max_depth=2)
    boss = Agent(
        name="boss",
        model=ScriptedModel(
            [[call("slow", input="wait", id="c1"), call("dig", input="go", id="c2")], "no"]
        ),
        tools=[slow.as_tool(concurrency_safe=True), digger.as_tool("dig", concurrency_safe=True)],
    )
    db = MemoryStore()
    with pytest.raises(NestingLimitExceeded):
        await asyncio.wait_for(Runner.run(boss, "go", checkpointer=db, run_id="boss"), 20)
    kid = await db.load(child_run_id("boss", "c1"))
    assert kid is not None and kid.info.status == "cancelled"  # ended by its parent
    assert kid.info.finish_reason == "cancelled"
    runs = await _tree(db)
    assert len(runs) == 4  # boss, slow, dig (depth 1) and its one recursion (depth 2)
    await _assert_all_ended(db, runs)


@pytest.mark.lovia_unconsumed  # children refused by the shared budget never call their model
async def test_parallel_children_share_a_cost_budget_too() -> None:
    """The same with dollars: $1 per input token, $2 per output token (the priced test
    model), each child's call costs $700 (estimated $500), the parent may spend $1,000."""
    from nested_support import PRICED

    calls: list[str] = []

    async def worker_model(request: Any, info: Any) -> Any:
        calls.append("call")
        await asyncio.sleep(0.1)  # in flight together, as real calls are
        return reply("done", usage=u(500, 100))

    worker = Agent(name="worker", model=FunctionModel(worker_model, model=PRICED))
    steps = [
        reply(
            tool_calls=[call("worker", input="x" * 2000, id=f"c{i}") for i in range(6)],
            usage=u(0, 0),
        ),
        "never",
    ]
    boss = Agent(
        name="boss",
        model=ScriptedModel(steps, model=PRICED),
        tools=[worker.as_tool(concurrency_safe=True)],
    )
    with pytest.raises(BudgetExceeded) as caught:
        await asyncio.wait_for(Runner.run(boss, "go", budget=RunBudget(max_cost_usd=1000)), 30)
    assert caught.value.limit == "max_cost_usd"
    assert len(calls) == 2, "two estimates fit beside each other, then the money is spent"
