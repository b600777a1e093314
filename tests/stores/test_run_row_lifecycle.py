"""What a run's row says across its attempts, on every store backend.

A run that fails before its start is written — a plugin's setup raises, or a cancel or
the deadline interrupts a setup or an instruction that hangs — is still recorded: its row
says failed (or cancelled), why, and what to do; submitted again it starts afresh. A run
resumed after it ended is running while its new attempt runs."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from lovia import Agent, BudgetExceeded, PluginInstance, RunBudget, Runner
from lovia.context import RunContext
from lovia.stores import Store
from lovia.stores.lifecycle import life_of
from lovia.testing import ScriptedModel


class Flaky:
    """A plugin whose setup fails until ``fixed`` (a config file not yet deployed)."""

    name = "flaky"

    def __init__(self) -> None:
        self.fixed = False

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        if not self.fixed:
            raise FileNotFoundError("notes.yaml is missing")
        return PluginInstance(instructions="Use the notes.")


class Hangs:
    name = "hangs"

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        await asyncio.Event().wait()
        return PluginInstance()


@pytest.mark.lovia_unconsumed
async def test_a_run_whose_plugin_setup_fails_is_recorded_as_failed(
    db: Store, caplog: pytest.LogCaptureFixture
) -> None:
    agent = Agent(name="notes", model=ScriptedModel(["ok"]), plugins=[Flaky()])
    with caplog.at_level(logging.WARNING, logger="lovia"), pytest.raises(FileNotFoundError):
        await Runner.run(agent, "hi", checkpointer=db, run_id="r1")
    assert not [r for r in caplog.records if "could not record" in r.getMessage()]
    snap = await db.load("r1")
    assert snap is not None
    info = snap.info
    assert (info.status, info.error_type, info.turns) == ("failed", "FileNotFoundError", 0)
    assert info.extra["error"] == "notes.yaml is missing"
    life = await life_of(db, info, snap)
    assert life.state == "failed" and len(life.attempts) == 1
    assert await db.lease_holder("r1") is None  # released: a retry may take it at once


async def test_submitted_again_it_starts_afresh_as_its_second_attempt(db: Store) -> None:
    from lovia import tool
    from lovia.testing import call

    seen: list[tuple[str, str]] = []

    @tool
    async def look() -> str:
        """Look at the run from outside while it runs."""
        snap = await db.load("r2")
        assert snap is not None
        seen.append((snap.info.status, (await life_of(db, snap.info, snap)).state))
        return "seen"

    plugin = Flaky()
    model = ScriptedModel([call("look"), "done"])
    agent = Agent(
        name="notes", model=model, instructions="Be brief.", plugins=[plugin], tools=[look]
    )
    with pytest.raises(FileNotFoundError):
        await Runner.run(agent, "summarize", checkpointer=db, run_id="r2")
    plugin.fixed = True
    result = await Runner.run(agent, "summarize", checkpointer=db, run_id="r2")
    assert result.output == "done"
    assert seen == [("running", "running")]  # not the failure of the attempt before
    request = model.requests[0]
    assert request.system == "Be brief.\n\nUse the notes."  # the plugin is set up this time
    assert [(e.type, getattr(e, "origin", None)) for e in request.messages] == [("input", "input")]
    snap = await db.load("r2")
    assert snap is not None and snap.info.status == "completed"
    assert [e.type for e in snap.entries()] == [
        "system", "input", "tool_call", "tool_result", "text"
    ]  # fmt: skip
    life = await life_of(db, snap.info, snap)
    assert [a.attempt for a in life.attempts] == [1, 2]
    assert life.attempts[0].how == "failed"


@pytest.mark.lovia_unconsumed
async def test_the_deadline_during_a_setup_that_hangs_is_recorded(db: Store) -> None:
    agent = Agent(name="a", model=ScriptedModel(["ok"]), plugins=[Hangs()])
    budget = RunBudget(max_seconds=0.1)
    with pytest.raises(BudgetExceeded):
        await asyncio.wait_for(
            Runner.run(agent, "hi", checkpointer=db, run_id="r3", budget=budget), 5
        )
    snap = await db.load("r3")
    assert snap is not None
    assert (snap.info.status, snap.info.error_type) == ("failed", "BudgetExceeded")


async def test_a_resumed_run_is_running_while_its_new_attempt_runs(db: Store) -> None:
    """The row said how the last attempt ended (cancelled); while the run is resumed the
    store, lovia runs and the web must say running, then how the run ended."""
    from lovia import CancelToken, RunCancelled, tool
    from lovia.testing import call

    seen: list[tuple[str, str]] = []

    @tool
    async def look() -> str:
        """Look at the run from outside while it runs."""
        snap = await db.load("r4")
        assert snap is not None
        seen.append((snap.info.status, (await life_of(db, snap.info, snap)).state))
        return "seen"

    agent = Agent(name="a", model=ScriptedModel([call("look"), "done"]), tools=[look])
    stop = CancelToken()
    stop.cancel("user pressed stop")
    with pytest.raises(RunCancelled):
        await Runner.run(agent, "go", checkpointer=db, run_id="r4", cancel_token=stop)
    snap = await db.load("r4")
    assert snap is not None and snap.info.status == "cancelled"
    result = await Runner.run(agent, "go", checkpointer=db, run_id="r4")
    assert result.output == "done"
    assert seen == [("running", "running")]
    snap = await db.load("r4")
    assert snap is not None and snap.info.status == "completed"
    assert snap.info.ended_at is not None and snap.info.error_type is None
    life = await life_of(db, snap.info, snap)
    assert [(a.attempt, a.how) for a in life.attempts] == [(1, "cancelled"), (2, "finished")]
