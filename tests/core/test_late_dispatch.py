"""A tool call's "started" is recorded as late as possible: a call still waiting for a
slot (``max_parallel_tools``) when the worker died never ran, so a resume runs it
instead of reporting its outcome unknown. Calls that had started keep their promise:
not idempotent, not run again."""

from __future__ import annotations

import asyncio
from typing import Any

from lovia import Agent, RunContext, Runner, tool
from lovia.stores import MemoryStore
from lovia.stores.records import LedgerRecord, read_records
from lovia.testing import ScriptedModel, call

ran: list[str] = []


@tool(concurrency_safe=True)
async def send(to: str) -> str:
    """Send a message (not idempotent)."""
    ran.append(to)
    if to == "b" and ran.count("b") == 1:
        await asyncio.sleep(0.05)  # "a" has finished: its slot went to "c"
        raise asyncio.CancelledError  # the worker dies while b and c run
    await asyncio.sleep(0.01 if to == "a" else 0.2)
    return f"sent to {to}"


def _agent(model: ScriptedModel) -> Agent[Any, Any]:
    return Agent(name="mailer", model=model, tools=[send], max_parallel_tools=2)


async def test_calls_waiting_for_a_slot_when_the_worker_died_run_on_resume() -> None:
    ran.clear()
    store = MemoryStore()
    calls = [call("send", to=to, id=f"c-{to}") for to in "abcd"]
    try:
        await Runner.run(_agent(ScriptedModel([calls])), "go", run_id="m1", checkpointer=store)
    except asyncio.CancelledError:
        pass
    snap = await store.load("m1")
    assert snap is not None
    ledger = [
        (r.call_id, r.status)
        for r in read_records(snap, ("ledger",))
        if isinstance(r, LedgerRecord)
    ]
    # "d" never got a slot: nothing says it started
    assert ledger == [
        ("c-a", "started"),
        ("c-b", "started"),
        ("c-a", "completed"),
        ("c-c", "started"),
    ]
    result = await Runner.run(
        _agent(ScriptedModel(["all sent"])), None, run_id="m1", checkpointer=store
    )
    assert result.output == "all sent"
    assert sorted(ran) == ["a", "b", "c", "d"]  # d ran on resume; b and c were not re-run
    contents = {e.call_id: e.content for e in result.entries if e.type == "tool_result"}
    assert contents["c-a"] == "sent to a" and contents["c-d"] == "sent to d"
    assert "unknown" in contents["c-b"] and "unknown" in contents["c-c"]


async def test_slots_are_filled_in_the_models_order_and_never_exceed_the_limit() -> None:
    running: list[int] = []
    order: list[str] = []
    now = [0]

    @tool(concurrency_safe=True)
    async def work(n: int) -> str:
        """Work a while."""
        now[0] += 1
        running.append(now[0])
        order.append(str(n))
        await asyncio.sleep(0.01 * (5 - n))
        now[0] -= 1
        return str(n)

    calls = [call("work", n=n, id=f"w{n}") for n in range(5)]
    agent = Agent(name="w", model=ScriptedModel([calls, "ok"]), tools=[work], max_parallel_tools=2)
    result = await Runner.run(agent, "go")
    assert result.output == "ok"
    assert max(running) == 2
    assert order[:2] == ["0", "1"] and sorted(order) == ["0", "1", "2", "3", "4"]
    results = [e.call_id for e in result.entries if e.type == "tool_result"]
    assert sorted(results) == [f"w{n}" for n in range(5)]


async def test_a_tool_safe_to_repeat_runs_again_on_resume_with_the_same_key() -> None:
    """``idempotent=True`` + ``ctx.idempotency_key``: the resume sends the call again with
    the key of the first attempt, so an API that deduplicates by key applies it once."""
    applied: dict[str, int] = {}
    sent: list[str] = []

    @tool(idempotent=True)
    async def pay(ctx: RunContext[Any], amount: int) -> str:
        """Pay (the API deduplicates by idempotency key)."""
        key = ctx.idempotency_key or ""
        sent.append(key)
        applied.setdefault(key, amount)
        if len(sent) == 1:
            raise asyncio.CancelledError  # the worker dies after the API got the request
        return f"paid {amount}"

    store = MemoryStore()
    model = ScriptedModel([call("pay", amount=9, id="p1")])
    agent = Agent(name="payer", model=model, tools=[pay])
    try:
        await Runner.run(agent, "pay", run_id="run:7", checkpointer=store)
    except asyncio.CancelledError:
        pass
    resumed = Agent(name="payer", model=ScriptedModel(["paid"]), tools=[pay])
    result = await Runner.run(resumed, None, run_id="run:7", checkpointer=store)
    assert result.output == "paid"
    assert sent == ["run%3A7:p1", "run%3A7:p1"] and applied == {"run%3A7:p1": 9}
    snap = await store.load("run:7")
    assert snap is not None
    keys = {r.key for r in read_records(snap, ("ledger",)) if isinstance(r, LedgerRecord)}
    assert keys == {"run%3A7:p1"}  # the ledger keeps the key the tool was given
