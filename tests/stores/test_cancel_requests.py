"""A cancel request stored on a run (``lovia cancel``, a queue's ``cancel``) stops the
worker running it, on every store backend, even when no queue runs it: the worker's
lease heartbeat reads the requests of its runs, and the run ends ``cancelled`` for the
reason given, keeping the request on its row. A request made before a worker took the
run (an explicit resume overrides it) does not stop that worker."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from lovia import Agent, ApprovalPending, PluginInstance, RunCancelled, Runner, tool
from lovia.context import RunContext
from lovia.stores import MemoryStore, Store
from lovia.stores.base import (
    CANCEL_REQUEST_KEY,
    CheckpointRecord,
    RunInfo,
    RunSnapshot,
    cancel_requests,
)
from lovia.stores.lifecycle import cancel_request, life_of, owner_id, request_cancel, state_of
from lovia.testing import ScriptedModel, call

TTL = 0.3
"""Lease TTL for these tests: the heartbeat ticks every 0.1 s."""


@pytest.fixture(autouse=True)
def _short_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOVIA_LEASE_TTL_S", str(TTL))


class SlowSetup:
    """A plugin whose setup takes a few heartbeats (it connects to a slow server)."""

    name = "slow"

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        await asyncio.sleep(4 * TTL / 3)
        return PluginInstance()


def _agent(seconds: float, started: asyncio.Event, *, slow_setup: bool = False) -> Agent[Any, Any]:
    @tool
    async def crawl(url: str) -> str:
        """Crawl a site (slow)."""
        started.set()
        await asyncio.sleep(seconds)
        return "crawled"

    return Agent(
        name="crawler",
        model=ScriptedModel([call("crawl", url="x"), "done"]),
        tools=[crawl],
        plugins=[SlowSetup()] if slow_setup else [],
    )


@pytest.mark.lovia_unconsumed  # stopped before the model answers again
async def test_a_cancel_request_stops_a_run_that_no_queue_runs(db: Store) -> None:
    started = asyncio.Event()
    run = asyncio.create_task(Runner.run(_agent(30, started), "go", checkpointer=db, run_id="r"))
    await asyncio.wait_for(started.wait(), 5)
    assert await request_cancel(db, "r", "ops: runaway crawler") == "running"
    assert await request_cancel(db, "r", "again, louder") == "requested"  # the first stands
    with pytest.raises(RunCancelled) as info:
        await asyncio.wait_for(run, 5)  # within a few heartbeats, not the tool's 30 s
    assert "ops: runaway crawler" in info.value.message
    snap = await db.load("r")
    assert snap is not None
    row = snap.info
    assert (row.status, row.finish_reason) == ("cancelled", "cancelled")
    assert row.extra["cancelled_by"] == "ops: runaway crawler"
    assert row.extra[CANCEL_REQUEST_KEY]["reason"] == "ops: runaway crawler"
    assert cancel_request(row) == "ops: runaway crawler"  # a queue worker will not start it
    assert (await life_of(db, row, snap)).state == "cancelled"
    assert await db.lease_holder("r") is None


async def test_a_request_made_before_the_worker_took_the_run_does_not_stop_it(db: Store) -> None:
    """Cancelled while queued, then run on purpose: the old request does not stop it,
    though the heartbeat ticks while the row still carries it (during the plugin's
    setup, before the run's start is written) and while its tool runs."""
    assert await request_cancel(db, "r", "queued by mistake") == "queued"
    started = asyncio.Event()
    agent = _agent(4 * TTL, started, slow_setup=True)
    result = await asyncio.wait_for(Runner.run(agent, "go", checkpointer=db, run_id="r"), 10)
    assert result.output == "done"
    snap = await db.load("r")
    assert snap is not None and snap.info.status == "completed"
    assert CANCEL_REQUEST_KEY not in snap.info.extra


async def test_cancel_requests_reads_only_runs_cancelled_by_request(db: Store) -> None:
    for run_id in ("asked", "token", "live"):
        await db.begin(RunInfo(run_id=run_id, agent="a", status="running", started_at=1.0))
    await request_cancel(db, "asked", "stop it")
    await request_cancel(db, "queued", "never start")  # no row yet: a cancelled one now
    snap = await db.load("token")
    assert snap is not None
    by_token = replace(snap.info, status="cancelled", finish_reason="cancelled")
    await db.finish(by_token, None)  # cancelled by its own token: no request
    found = await cancel_requests(db, ["asked", "token", "live", "queued", "unknown"])
    assert set(found) == {"asked", "queued"}
    assert found["asked"]["reason"] == "stop it" and isinstance(found["asked"]["at"], float)
    assert await cancel_requests(db, []) == {}


class Minimal:
    """A third-party store with only ``load``: the helper falls back to loading each run."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.loaded: list[str] = []

    async def load(self, run_id: str) -> RunSnapshot | None:
        self.loaded.append(run_id)
        return await self.inner.load(run_id)

    async def list_runs(self, **_: Any) -> Sequence[RunInfo]:
        raise AssertionError("not used")


async def test_a_store_without_the_query_is_read_run_by_run(db: Store) -> None:
    await db.begin(RunInfo(run_id="a", agent="a", status="running", started_at=1.0))
    await db.begin(RunInfo(run_id="b", agent="a", status="running", started_at=1.0))
    await request_cancel(db, "b", "enough")
    store = Minimal(db)
    found = await cancel_requests(store, ["a", "b", "c"])  # type: ignore[arg-type]
    assert list(found) == ["b"] and found["b"]["reason"] == "enough"
    assert store.loaded == ["a", "b", "c"]


def test_a_request_counts_as_new_unless_its_time_says_it_is_older() -> None:
    from lovia._loop.lease import _after  # pyright: ignore[reportPrivateUsage]

    assert not _after({"at": 5.0}, 10.0)  # before this worker took the run: overridden
    assert _after({"at": 10.0}, 10.0) and _after({"at": 11}, 10.0)
    for damaged in ({}, {"at": "yesterday"}, {"at": True}, {"at": None}):
        assert _after(damaged, 10.0)  # a request whose time is unusable still stops it


class CancelWhileLoading(MemoryStore):
    """``lovia cancel`` lands while a worker resumes the run: after it loaded the row,
    before it marks the row running again (with its first write, the attempt record)."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False

    async def append(
        self, run_id: str, records: Sequence[CheckpointRecord], *, fence: int | None = None
    ) -> int:
        size = await super().append(run_id, records, fence=fence)
        if self.armed:
            self.armed = False
            await request_cancel(self, run_id, "ops: cancelled during the resume")
        return size


@pytest.mark.lovia_unconsumed  # the resumed run stops before the model answers
async def test_a_request_landing_while_a_run_resumes_is_not_wiped_out() -> None:
    @tool(requires_approval=True)
    def refund(order: str) -> str:
        """Refund an order (a person approves it first)."""
        return "refunded"

    db = CancelWhileLoading()
    model = ScriptedModel([call("refund", order="A1", id="c1"), "done"])
    agent = Agent(name="a", model=model, tools=[refund])
    with pytest.raises(ApprovalPending):
        await Runner.run(agent, "go", checkpointer=db, run_id="r")
    first = await db.load("r")
    assert first is not None and first.info.status == "paused"
    db.armed = True  # approved, and cancelled by someone else while the resume loads
    resume = Runner.run(agent, None, checkpointer=db, run_id="r", approvals={"c1": True})
    with pytest.raises(RunCancelled) as info:
        await asyncio.wait_for(resume, 5)
    assert "ops: cancelled during the resume" in info.value.message
    snap = await db.load("r")
    assert snap is not None and snap.info.status == "cancelled"
    assert snap.info.extra[CANCEL_REQUEST_KEY]["reason"] == "ops: cancelled during the resume"


def test_a_cancelled_run_its_worker_still_runs_says_it_is_stopping() -> None:
    mark = {"reason": "ops: stop", "at": 1.0}
    info = RunInfo(
        run_id="r",
        agent="a",
        status="cancelled",
        started_at=1.0,
        extra={CANCEL_REQUEST_KEY: mark, "cancelled_by": "ops: stop"},
    )
    me = owner_id()  # this process: alive
    assert state_of(info, me) == (
        "cancelled",
        f"cancelled: ops: stop; stopping: worker {me} still runs it and stops it at its "
        "next lease renewal",
    )
    assert state_of(info, None) == ("cancelled", "cancelled: ops: stop")
    by_token = RunInfo(
        run_id="t", agent="a", status="cancelled", started_at=1.0, extra={"cancelled_by": "x"}
    )
    assert state_of(by_token, me) == ("cancelled", "cancelled: x")  # no request: done


async def test_life_of_reads_the_holder_of_a_run_cancelled_from_outside(db: Store) -> None:
    await db.begin(RunInfo(run_id="r", agent="a", status="running", started_at=1.0))
    me = owner_id()
    assert await db.acquire("r", me, 60.0) is not None  # a live worker runs it
    await request_cancel(db, "r", "ops: stop")
    snap = await db.load("r")
    assert snap is not None
    life = await life_of(db, snap.info)
    assert life.state == "cancelled" and "stopping: worker" in life.detail
    await db.release("r", me)  # its worker stopped it
    assert (await life_of(db, snap.info)).detail == "cancelled: ops: stop"
