"""run_id as an idempotency key; resume from a checkpoint; the tool-call ledger."""

from __future__ import annotations

from typing import Any

import pytest

from lovia import Agent, RunContext, Runner, UserError, tool
from lovia.errors import ProviderServerError, RunLeaseHeld
from lovia.stores import MemoryStore
from lovia.stores.base import CheckpointRecord
from lovia.testing import ScriptedModel, call

calls: list[str] = []


@tool
def charge(ctx: RunContext[None], amount: int) -> str:
    """Charge a card (not idempotent)."""
    calls.append(f"charge:{amount}:{ctx.idempotency_key}")
    return f"charged {amount}"


@tool(idempotent=True)
def check(item: str) -> str:
    """Check stock (idempotent)."""
    calls.append(f"check:{item}")
    return f"{item} in stock"


@pytest.fixture(autouse=True)
def _reset() -> None:
    calls.clear()


async def test_completed_run_id_returns_stored_result_without_model_calls() -> None:
    store = MemoryStore()
    agent = Agent(name="a", model=ScriptedModel([call("check", item="x"), "done"]), tools=[check])
    first = await Runner.run(agent, "go", run_id="r1", checkpointer=store)
    again_model = ScriptedModel([])
    again = await Runner.run(agent.clone(model=again_model), "go", run_id="r1", checkpointer=store)
    assert again.output == first.output == "done"
    assert again.replayed and not first.replayed
    assert again.turns == first.turns and again.usage == first.usage
    assert [e.id for e in again.entries] == [e.id for e in first.entries]
    assert again_model.requests == [] and calls == ["check:x"]


async def test_failed_run_resumes_without_rerunning_completed_tools() -> None:
    store = MemoryStore()
    crashing = ScriptedModel(
        [
            [call("charge", amount=5, id="c1"), call("check", item="y", id="c2")],
            ProviderServerError("upstream 502", status=502),
        ]
    )
    agent = Agent(name="shop", model=crashing, tools=[charge, check])
    with pytest.raises(ProviderServerError):
        await Runner.run(agent, "buy", run_id="r2", checkpointer=store)
    info = (await store.load("r2")).info  # type: ignore[union-attr]
    assert info.status == "failed" and info.error_type == "ProviderServerError"

    fresh = ScriptedModel(["bought"])
    result = await Runner.run(agent.clone(model=fresh), None, run_id="r2", checkpointer=store)
    assert result.output == "bought"
    assert calls == ["charge:5:r2:c1", "check:y"]  # nothing re-run
    # the resumed call saw the same view the crashed worker would have built
    assert [m.type for m in fresh.requests[0].messages] == [
        "input",
        "tool_call",
        "tool_call",
        "tool_result",
        "tool_result",
    ]
    results = [e for e in result.entries if e.type == "tool_result"]
    assert len(results) == 2 and result.turns == 2


async def _crashed_mid_tools(store: MemoryStore) -> tuple[Agent[Any, Any], MemoryStore]:
    """Store a run whose tools started but whose worker died before any result."""
    model = ScriptedModel(
        [
            [call("charge", amount=9, id="k1"), call("check", item="z", id="k2")],
            ProviderServerError("boom", status=500),
        ]
    )
    agent = Agent(name="shop", model=model, tools=[charge, check])
    with pytest.raises(ProviderServerError):
        await Runner.run(agent, "buy", run_id="r3", checkpointer=store)
    snap = await store.load("r3")
    assert snap is not None
    # cut the records back to "calls started, no results": what a SIGKILL mid-tool leaves
    keep: list[CheckpointRecord] = []
    for record in snap.records:
        if record.kind == "entries" and any(
            e["type"] == "tool_result" for e in record.data["entries"]
        ):
            continue
        if record.kind == "ledger" and record.data["status"] != "started":
            continue
        keep.append(record)
    crashed = MemoryStore()  # what a SIGKILL mid-tool leaves behind
    snap.info.status = "running"
    await crashed.begin(snap.info)
    await crashed.append("r3", keep)
    calls.clear()
    return agent, crashed


async def test_started_not_completed_calls_follow_the_idempotent_flag() -> None:
    agent, store = await _crashed_mid_tools(MemoryStore())
    fresh = ScriptedModel(["ok"])
    result = await Runner.run(agent.clone(model=fresh), None, run_id="r3", checkpointer=store)
    by_call = {e.call_id: e for e in result.entries if e.type == "tool_result"}
    assert (
        by_call["k1"].is_error and "outcome of this tool call is unknown" in by_call["k1"].content
    )
    assert not by_call["k2"].is_error and calls == ["check:z"]


async def test_resume_with_another_agent_is_refused() -> None:
    store = MemoryStore()
    agent = Agent(name="one", model=ScriptedModel([ProviderServerError("x", status=500)]))
    with pytest.raises(ProviderServerError):
        await Runner.run(agent, "go", run_id="r4", checkpointer=store)
    with pytest.raises(UserError, match="started by agent 'one'"):
        await Runner.run(
            Agent(name="two", model=ScriptedModel([])), None, run_id="r4", checkpointer=store
        )


async def test_second_worker_gets_a_clear_lease_error() -> None:
    store = MemoryStore()
    assert await store.acquire("r5", "other-worker", 60)
    agent = Agent(name="a", model=ScriptedModel([]))
    with pytest.raises(RunLeaseHeld, match="another worker"):
        await Runner.run(agent, "go", run_id="r5", checkpointer=store)


async def test_session_gets_exactly_one_segment_per_run() -> None:
    store = MemoryStore()
    agent = Agent(name="a", model=ScriptedModel(["one", "two"]))
    r1 = await Runner.run(
        agent, "1", session=store, session_id="s", checkpointer=store, run_id="x1"
    )
    await Runner.run(agent, "1", session=store, session_id="s", checkpointer=store, run_id="x1")
    r2 = await Runner.run(agent, "2", session=store, session_id="s", checkpointer=store)
    history = await store.load_session("s")
    assert [e.run_id for e in history] == [r1.run_id] * len(r1.entries) + [r2.run_id] * len(
        r2.entries
    )


async def test_resubmitting_the_same_input_does_not_duplicate_it() -> None:
    store = MemoryStore()
    agent = Agent(name="a", model=ScriptedModel([ProviderServerError("x", status=500)]))
    with pytest.raises(ProviderServerError):
        await Runner.run(agent, "hello", run_id="r6", checkpointer=store)
    fresh = ScriptedModel(["hi"])
    result = await Runner.run(agent.clone(model=fresh), "hello", run_id="r6", checkpointer=store)
    inputs = [e for e in result.entries if e.type == "input"]
    assert [(e.content, e.origin) for e in inputs] == [("hello", "input")]
    steer = ScriptedModel([ProviderServerError("x", status=500)])
    with pytest.raises(ProviderServerError):
        await Runner.run(agent.clone(model=steer), "first", run_id="r7", checkpointer=store)
    fresh = ScriptedModel(["ok"])
    result = await Runner.run(
        agent.clone(model=fresh), "actually, second", run_id="r7", checkpointer=store
    )
    assert [(e.content, e.origin) for e in result.entries if e.type == "input"] == [
        ("first", "input"),
        ("actually, second", "mailbox"),
    ]


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_cost_budget_without_a_price_is_refused() -> None:
    from lovia import RunBudget

    agent = Agent(name="a", model=ScriptedModel(["x"], model="no-such-model-priced"))
    with pytest.raises(UserError, match="no price is known") as info:
        await Runner.run(agent, "go", budget=RunBudget(max_cost_usd=1.0))
    assert info.value.hint and "set_price" in info.value.hint
