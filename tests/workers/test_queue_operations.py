"""Operating the Redis Streams queue: cancel by run id (queued and running), a bounded
shutdown that hands runs back to the front, and the store's view of both."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from worker_helpers import Start, eventually

from lovia import Agent, RunContext, tool
from lovia.stores import store
from lovia.stores.base import RunInfo
from lovia.stores.lifecycle import life_of
from lovia.stores.records import AttemptRecord, to_checkpoint
from lovia.testing import FunctionModel, call
from lovia.workers import RunQueue, Worker
from lovia.workers import metrics as queue_metrics_module

started: list[str] = []


@tool
async def wait(ctx: RunContext[Any], seconds: float) -> str:
    """Wait a while (something to cancel or to stop at shutdown)."""
    started.append(ctx.run_id)
    await asyncio.sleep(seconds)
    return "waited"


def _decide(request: Any, info: Any) -> Any:
    last = request.messages[-1]
    return call("wait", seconds=30) if last.type == "input" else f"got {last.content}"


waiter = Agent(name="waiter", model=FunctionModel(_decide), tools=[wait])


async def test_cancel_by_run_id_stops_a_running_run_and_a_queued_one_never_starts(
    queue: RunQueue, store_file: str, start: Start
) -> None:
    started.clear()
    db = store(store_file)
    worker = Worker(queue, {"waiter": waiter}, db, name="w", concurrency=1, claim_idle_s=3)
    running = await queue.submit("waiter", "go", run_id="running-1")
    queued = await queue.submit("waiter", "go", run_id="queued-1")
    start(worker)
    while started != ["running-1"]:
        await asyncio.sleep(0.05)

    assert await queue.cancel("queued-1", db, "not needed") == "queued"
    assert await queue.cancel("running-1", db, "user pressed stop") == "running"
    snap = await queue.result(running, db, timeout_s=10)  # cancelled within a tick (1 s)
    assert (snap.info.status, snap.info.extra["cancelled_by"]) == ("cancelled", "user pressed stop")
    later = await queue.result(queued, db, timeout_s=10)
    assert (later.info.status, later.records) == ("cancelled", [])
    assert started == ["running-1"], "the queued run never started"
    assert (worker.stats["cancelled"], worker.stats["refused"]) == (1, 1)
    assert await queue.pending() == 0, "both tasks acknowledged"
    assert await queue.cancel("running-1", db) == "ended"
    await db.aclose()


async def test_shutdown_hands_an_unfinished_run_back_to_the_front_of_the_queue(
    queue: RunQueue, store_file: str, start: Start
) -> None:
    started.clear()
    db = store(store_file)
    first = Worker(queue, {"waiter": waiter}, db, name="first", drain_timeout_s=0.5)
    stop = asyncio.Event()
    task = asyncio.create_task(first.run(stop))
    run_id = await queue.submit("waiter", "go", run_id="handed-1")
    while started != ["handed-1"]:
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(task, 10)  # bounded: 0.5 s of drain, then the run stops

    assert first.stats["requeued"] == 1
    snap = await db.load(run_id)
    assert snap is not None and snap.info.status == "cancelled"
    assert await db.lease_holder(run_id) is None, "its lease was released"
    life = await life_of(db, snap.info, snap)
    assert [a.how for a in life.attempts] == ["cancelled"]
    second = Worker(queue, {"waiter": waiter}, db, name="second", claim_idle_s=60)
    start(second)  # takes it at once (front), not after claim_idle_s
    done = await queue.result(run_id, db, timeout_s=10)
    assert done.info.status == "completed"
    assert second.stats["completed"] == 1
    await db.aclose()


@pytest.fixture
def reader(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemoryMetricReader]:
    """The queue instruments on a local meter provider read in memory."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    monkeypatch.setattr(queue_metrics_module, "_made", None)
    monkeypatch.setattr(
        queue_metrics_module.metrics, "get_meter", lambda name: provider.get_meter(name)
    )
    yield reader
    provider.shutdown()


def _points(reader: InMemoryMetricReader) -> dict[str, dict[frozenset[Any], Any]]:
    data = reader.get_metrics_data()
    found: dict[str, dict[frozenset[Any], Any]] = {}
    assert data is not None
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                found[m.name] = {
                    frozenset(p.attributes.items()): p.value  # type: ignore[union-attr]
                    for p in m.data.data_points
                }
    return found


async def test_queue_metrics_count_deliveries_dead_letters_busy_runs_and_depth(
    queue: RunQueue, store_file: str, start: Start, reader: InMemoryMetricReader
) -> None:
    db = store(store_file)
    worker = Worker(queue, {"waiter": waiter}, db, name="m", concurrency=2)
    await queue.submit("no-such-agent", "go", run_id="unknown-1")
    await queue.submit("waiter", "go", run_id="waits-1")
    start(worker)
    started.clear()
    while started != ["waits-1"]:
        await asyncio.sleep(0.05)
    labels = {"lovia.queue.backend": "redis", "lovia.queue.name": queue.stream}
    key = frozenset(labels.items())
    await eventually(lambda: worker.stats["dead_lettered"] == 1)
    worker._next_tick = 0  # measure the depth at the next loop turn  # pyright: ignore[reportPrivateUsage]
    await asyncio.sleep(1.5)
    points = _points(reader)
    assert points["lovia.queue.deliveries"] == {
        frozenset({**labels, "lovia.queue.redelivery": False}.items()): 2
    }
    assert points["lovia.queue.dead_letters"] == {
        frozenset({**labels, "lovia.queue.dead_letter_reason": "unknown_agent"}.items()): 1
    }
    assert points["lovia.queue.runs_in_flight"] == {key: 1}, "the waiting run is in flight"
    depth = {dict(k)["lovia.queue.state"]: v for k, v in points["lovia.queue.depth"].items()}
    assert depth == {"waiting": 0, "pending": 1, "dead": 1}
    assert await queue.cancel("waits-1", db) == "running"
    await eventually(lambda: worker.stats["cancelled"] == 1)
    assert _points(reader)["lovia.queue.runs_in_flight"] == {key: 0}
    await db.aclose()


events: list[tuple[str, str]] = []


@tool
async def work(ctx: RunContext[Any], seconds: float) -> str:
    """Work a while; note when it starts and ends."""
    events.append(("start", ctx.run_id))
    await asyncio.sleep(seconds)
    events.append(("end", ctx.run_id))
    return "worked"


def _work(request: Any, info: Any) -> Any:
    last = request.messages[-1]
    return call("work", seconds=float(last.content)) if last.type == "input" else "ok"


worker_agent = Agent(name="worker", model=FunctionModel(_work), tools=[work])


async def test_a_run_that_lost_a_worker_runs_alone(
    queue: RunQueue, store_file: str, start: Start
) -> None:
    """A suspect (one lost worker in its attempts) waits until the runs in flight ended,
    and no other task starts on its worker until it ended: if it kills this worker too,
    it takes nothing else with it."""
    events.clear()
    db = store(store_file)
    await db.begin(RunInfo(run_id="suspect", agent="worker", started_at=time.time()))
    lost = AttemptRecord(attempt=1, at=time.time(), host="elsewhere", pid=4242)
    await db.append("suspect", [to_checkpoint(lost)])
    worker = Worker(queue, {"worker": worker_agent}, db, name="alone", concurrency=4)
    await queue.submit("worker", "0.6", run_id="before")
    start(worker)
    await eventually(lambda: ("start", "before") in events)
    await queue.submit("worker", "0.3", run_id="suspect")
    await eventually(lambda: worker._alone is not None)  # pyright: ignore[reportPrivateUsage]
    await queue.submit("worker", "0.1", run_id="after")
    for run_id in ("before", "suspect", "after"):
        assert (await queue.result(run_id, db, timeout_s=15)).info.status == "completed"
    assert events == [
        ("start", "before"),
        ("end", "before"),
        ("start", "suspect"),
        ("end", "suspect"),
        ("start", "after"),
        ("end", "after"),
    ]
    await db.aclose()


async def test_a_run_that_lost_max_kills_workers_is_dead_lettered_unstarted(
    queue: RunQueue, store_file: str, start: Start
) -> None:
    events.clear()
    db = store(store_file)
    await db.begin(RunInfo(run_id="poison", agent="worker", started_at=time.time()))
    lost = [AttemptRecord(attempt=n, at=time.time(), host="elsewhere", pid=n) for n in (1, 2)]
    await db.append("poison", [to_checkpoint(r) for r in lost])
    worker = Worker(queue, {"worker": worker_agent}, db, name="w", max_kills=2)
    await queue.submit("worker", "0.1", run_id="poison")
    start(worker)
    snap = await queue.result("poison", db, timeout_s=15)
    assert events == [], "never started again"
    assert snap.info.status == "failed"
    assert snap.info.extra["dead_letter"] == {
        "deliveries": 1,
        "kills": 2,
        "last_error": "its worker was lost (killed or stalled) in 2 attempts",
        "reason": "poison",
        "queue": queue.stream,
        "at": snap.info.extra["dead_letter"]["at"],
    }
    assert [(d["run_id"], d["reason"]) for d in await queue.dead_letters()] == [
        ("poison", "poison")
    ]
    assert await queue.pending() == 0
    await db.aclose()
