"""Fencing inside one process: a run whose lease another worker took stops at once.

A blocking ``time.sleep`` stands in for a stall (SIGSTOP, a GC pause): the event loop,
heartbeat included, does not run while it lasts. The subprocess version of the attack,
on SQLite and PostgreSQL, is ``tests/crash/test_stall_fencing.py``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from lovia import Agent, AgentHooks, Runner, events, tool
from lovia.errors import LeaseLost
from lovia.stores import MemoryStore
from lovia.testing import FunctionModel, ScriptedModel, call

TTL = 0.2


@pytest.fixture(autouse=True)
def _short_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOVIA_LEASE_TTL_S", str(TTL))


async def _drain(agent: Agent[Any, Any], store: MemoryStore, run_id: str) -> list[Any]:
    handle = Runner.stream(
        agent, "go", run_id=run_id, checkpointer=store, session=store, session_id="s"
    )
    return [event async for event in handle]


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_a_run_whose_lease_was_taken_mid_tool_stops_without_writing() -> None:
    store = MemoryStore()
    effects: list[int] = []
    seen: dict[str, Any] = {}

    @tool
    async def charge(n: int) -> str:
        """Charge a card (not idempotent)."""
        effects.append(n)
        if n == 1:
            time.sleep(TTL * 1.5)  # stalled: the lease expires, another worker takes it
            assert await store.acquire("r1", "thief", 30) is not None
            seen["snapshot"] = await store.load("r1")
        return f"charged {n}"

    model = ScriptedModel([call("charge", n=1), call("charge", n=2), "done"])
    stream = await _drain(Agent(name="a", model=model, tools=[charge]), store, "r1")

    assert effects == [1]  # the second charge never started
    assert [type(e).__name__ for e in stream].count("ToolCallStarted") == 1
    terminal = [e for e in stream if isinstance(e, events.RunFailed | events.RunCompleted)]
    assert len(terminal) == 1 and isinstance(terminal[0], events.RunFailed)
    assert isinstance(terminal[0].error, LeaseLost) and terminal[0].error.hint
    assert stream[-1] is terminal[0]
    after = await store.load("r1")
    assert after == seen["snapshot"]  # no result, no failure mark: the run is the thief's
    assert after is not None and after.info.status == "running"
    assert await store.load_session("s") == []
    assert await store.lease_holder("r1") == "thief"  # and its lease was not released


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_the_heartbeat_finding_the_lease_taken_also_ends_with_lease_lost() -> None:
    store = MemoryStore()

    @tool
    async def wait() -> str:
        """Wait for something slow."""
        time.sleep(TTL * 1.5)
        assert await store.acquire("r2", "thief", 30) is not None
        await asyncio.sleep(30)  # the heartbeat's renewal fails and stops the run
        return "waited"

    model = ScriptedModel([call("wait"), "done"])
    with pytest.raises(LeaseLost):
        await Runner.run(
            Agent(name="a", model=model, tools=[wait]), "go", run_id="r2", checkpointer=store
        )
    snap = await store.load("r2")
    assert snap is not None and snap.info.status == "running"


async def test_a_tool_starting_after_a_stall_renews_the_expired_lease_first() -> None:
    """Nobody took the lease while the model call stalled: the run goes on, and the
    lease is live again before the tool starts (no one can take it mid-tool)."""
    store = MemoryStore()
    holders: list[str | None] = []

    @tool
    async def charge() -> str:
        """Charge a card (not idempotent)."""
        holders.append(await store.lease_holder("r3"))
        return "charged"

    def decide(request: Any, info: Any) -> Any:
        if not any(m.type == "tool_result" for m in request.messages):
            time.sleep(TTL * 1.5)  # stalled in the model call: the lease expired
            return call("charge")
        return "done"

    agent = Agent(name="a", model=FunctionModel(decide), tools=[charge])
    result = await Runner.run(agent, "go", run_id="r3", checkpointer=store)
    assert result.output == "done"
    assert holders[0] is not None


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_a_worker_fenced_out_before_a_model_call_stops_without_paying_for_it() -> None:
    """A stall before the model call (here in a hook) past the lease, another worker
    takes the run: the woken worker makes no model call, not even one refused later."""
    store = MemoryStore()
    calls: list[int] = []
    hooks = AgentHooks()

    @hooks.on(events.TurnStarted)
    async def stall(event: events.TurnStarted, ctx: Any) -> None:
        time.sleep(TTL * 1.5)  # stalled: the lease expires, another worker takes it
        assert await store.acquire("r4", "thief", 30) is not None

    def decide(request: Any, info: Any) -> Any:
        calls.append(1)
        return "done"

    agent = Agent(name="a", model=FunctionModel(decide), hooks=hooks)
    stream = await _drain(agent, store, "r4")
    assert calls == []  # the paid call never went out
    assert not any(isinstance(e, events.ModelCallStarted) for e in stream)
    assert isinstance(stream[-1], events.RunFailed)
    assert isinstance(stream[-1].error, LeaseLost)
    assert await store.lease_holder("r4") == "thief"


class _TakenWhileLoading(MemoryStore):
    """A store where another worker takes the lease while this one loads the run (a
    stall between the grant and the start write)."""

    async def load(self, run_id: str) -> Any:
        snapshot = await super().load(run_id)
        await self.release(run_id, (await self.lease_holder(run_id)) or "")
        assert await self.acquire(run_id, "thief", 30) is not None
        return snapshot


@pytest.mark.lovia_unconsumed  # the run ends before its model is called, on purpose
async def test_a_worker_fenced_out_before_its_start_write_stores_nothing_of_the_run() -> None:
    store = _TakenWhileLoading()
    model = ScriptedModel(["done"])
    stream = await _drain(Agent(name="a", model=model), store, "r-start")
    terminal = stream[-1]
    assert isinstance(terminal, events.RunFailed) and isinstance(terminal.error, LeaseLost)
    assert model.requests == []  # nothing was asked of the model either
    snapshot = await store.load("r-start")
    assert snapshot is None or snapshot.records == []  # neither its input nor its attempt
