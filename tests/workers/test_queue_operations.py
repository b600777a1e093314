"""Operating the Redis Streams queue: cancel by run id (queued and running), a bounded
shutdown that hands runs back to the front, and the store's view of both."""

from __future__ import annotations

import asyncio
from typing import Any

from worker_helpers import Start

from lovia import Agent, RunContext, tool
from lovia.stores import store
from lovia.stores.lifecycle import life_of
from lovia.testing import FunctionModel, call
from lovia.workers import RunQueue, Worker

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
