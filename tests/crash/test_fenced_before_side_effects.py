"""A worker whose lease another worker took while it was stalled stops before its next
side effect: it asks the model nothing more (a call nobody would keep, but paid) and
announces no tool call it will not run. In process: the stall is user code that blocks
the event loop past the lease's TTL (so the run's lease keeper cannot renew it), and
while it blocks a second worker, with its own connection to the same SQLite file, takes
the run's lease over. Nothing the run awaits lies between that code and the check under
test, so the test sees exactly the check before the call.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lovia import Agent, AgentHooks, PluginInstance, Runner, events, tool
from lovia.context import RunContext
from lovia.errors import LeaseLost
from lovia.stores import store
from lovia.testing import ScriptedModel, call

pytestmark = pytest.mark.lovia_unconsumed  # the runs end before their last step

TTL = 0.3


@pytest.fixture(autouse=True)
def _short_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOVIA_LEASE_TTL_S", str(TTL))


def _stall_and_take_over(url: str, run_id: str) -> None:
    """Block this thread (the run's event loop) past the TTL, then let another worker
    take the lease from its own thread, event loop and connection."""
    time.sleep(TTL * 1.5)
    taken: list[int | None] = []

    async def thief() -> None:
        other = store(url)
        try:
            taken.append(await other.acquire(run_id, "the-other-worker", 60.0))
        finally:
            await other.aclose()

    worker = threading.Thread(target=lambda: asyncio.run(thief()))
    worker.start()
    worker.join()
    assert taken and taken[0] is not None, "the other worker could not take the lease"


class Stalls:
    """A plugin whose view injector stalls: it runs just before the model is asked."""

    name = "stalls"

    def __init__(self, url: str, run_id: str, on_turn: int) -> None:
        self.url, self.run_id, self.on_turn = url, run_id, on_turn

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        def inject(ctx: RunContext[Any]) -> None:
            if ctx.turn == self.on_turn:
                _stall_and_take_over(self.url, self.run_id)

        return PluginInstance(view_injectors=[inject])


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_a_worker_fenced_out_before_a_model_call_does_not_make_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    db = store(url)
    model = ScriptedModel([call("add", a=1, b=2), "3"])
    agent = Agent(name="a", model=model, tools=[add], plugins=[Stalls(url, "r1", on_turn=2)])
    try:
        with pytest.raises(LeaseLost):
            await Runner.run(agent, "go", checkpointer=db, run_id="r1")
        assert len(model.requests) == 1  # turn 2's call was never made
        assert await db.lease_holder("r1") == "the-other-worker"
    finally:
        await db.aclose()


async def test_a_worker_fenced_out_before_a_tool_call_does_not_announce_it(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    db = store(url)
    seen: list[str] = []
    hooks = AgentHooks()

    @hooks.on(events.MessageCompleted)  # the model's answer is in: its tool call is next
    def stall(event: events.MessageCompleted, ctx: RunContext[Any]) -> None:
        _stall_and_take_over(url, "r2")

    @hooks.on(events.ToolCallStarted)
    def started(event: events.ToolCallStarted, ctx: RunContext[Any]) -> None:
        seen.append(event.call.name)

    model = ScriptedModel([call("add", a=1, b=2), "3"])
    agent = Agent(name="a", model=model, tools=[add], hooks=hooks)
    try:
        with pytest.raises(LeaseLost):
            await Runner.run(agent, "go", checkpointer=db, run_id="r2")
        assert seen == []  # no ToolCallStarted from a worker that no longer holds the run
        assert len(model.requests) == 1
    finally:
        await db.aclose()
