"""Retention on every backend: prune by age and status, or drop only a run's records
(keeping its summary row), and what replay says about a pruned run."""

from __future__ import annotations

import time
from typing import Any

import pytest

from lovia import Agent, Runner, tool
from lovia.errors import UserError
from lovia.replay import NoViewRecords, replay_run
from lovia.stores import CheckpointRecord, RunInfo, Store
from lovia.testing import ScriptedModel, call


def info(run_id: str, **kw: Any) -> RunInfo:
    kw.setdefault("agent", "writer")
    kw.setdefault("started_at", 1_700_000_000.0)
    return RunInfo(run_id=run_id, **kw)


async def finished(db: Store, run_id: str, status: str, ended_at: float) -> None:
    await db.begin(info(run_id))
    await db.append(run_id, [CheckpointRecord(kind="state", data={"turn": 1})])
    await db.finish(info(run_id, status=status, ended_at=ended_at, turns=3), {"output": "x"})


async def test_prune_by_status_keeps_the_other_status(db: Store) -> None:
    old = time.time() - 1000
    await finished(db, "done", "completed", old)
    await finished(db, "failed", "failed", old)
    assert await db.prune(100, status="completed") == 1
    assert await db.load("done") is None
    assert await db.load("failed") is not None


async def test_prune_refuses_statuses_that_may_resume(db: Store) -> None:
    for status in ("paused", "running"):
        with pytest.raises(UserError) as caught:
            await db.prune(0, status=status)
        assert "resume" in (caught.value.hint or "")


async def test_records_only_keeps_the_summary_row(db: Store) -> None:
    old = time.time() - 1000
    await finished(db, "done", "completed", old)
    await finished(db, "recent", "completed", time.time() + 1000)
    assert await db.prune(100, records_only=True) == 1
    snap = await db.load("done")
    assert snap is not None
    assert snap.records == []
    assert snap.info.turns == 3 and snap.info.status == "completed"
    assert snap.info.extra["records_pruned_at"] > old
    assert {i.run_id for i in await db.list_runs()} == {"recent", "done"}
    recent = await db.load("recent")
    assert recent is not None and len(recent.records) == 1
    assert await db.prune(100, records_only=True) == 0  # already pruned: not counted again


@tool
async def lookup(order: str) -> str:
    """Look up an order."""
    return f"{order}: shipped"


async def test_run_option_drops_records_after_success_and_replay_says_so(db: Store) -> None:
    agent = Agent(
        name="support",
        tools=[lookup],
        model=ScriptedModel([call("lookup", order="A1"), "shipped"]),
    )
    result = await Runner.run(agent, "where is A1?", checkpointer=db, prune_records=True)
    snap = await db.load(result.run_id)
    assert snap is not None and snap.records == [] and snap.info.status == "completed"
    with pytest.raises(NoViewRecords) as caught:
        await replay_run(result.run_id, db)
    assert "were dropped" in caught.value.message
    assert "prune_records=False" in (caught.value.hint or "")


async def test_run_option_keeps_records_of_a_failed_run(db: Store) -> None:
    agent = Agent(name="support", model=ScriptedModel([RuntimeError("boom")]))
    with pytest.raises(RuntimeError):
        await Runner.run(agent, "hi", checkpointer=db, prune_records=True, run_id="r-fail")
    snap = await db.load("r-fail")
    assert snap is not None and snap.info.status == "failed" and snap.records
