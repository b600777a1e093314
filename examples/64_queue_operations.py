"""Operating a run queue: cancel by id, a bounded shutdown, dead letters (needs Redis).

One ``Worker`` on a Redis Streams ``RunQueue`` (offline: a scripted model). It shows:

- ``queue.cancel(run_id, store)`` on a run that is running and on one still queued: the
  running one stops at its next step, the queued one never starts (the cancel is stored
  on the run, where every worker looks before it starts a delivery);
- a shutdown with ``drain_timeout_s``: a run still going is stopped, its lease released
  and its task handed back to the front of the queue, where the next worker resumes it;
- a run whose worker was lost three times is dead-lettered at its next delivery, and the
  store says so (``lovia runs --status dead_lettered``).

Without a Redis server on 127.0.0.1:6379 it says so and exits.

Run: python examples/64_queue_operations.py
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections import defaultdict
from typing import Any

from lovia import Agent, RunContext, tool
from lovia.stores import store
from lovia.stores.base import RunInfo
from lovia.stores.lifecycle import life_of
from lovia.stores.records import AttemptRecord, to_checkpoint
from lovia.testing import FunctionModel, call
from lovia.workers import RunQueue, Worker

REDIS_URL = os.environ.get("LOVIA_REDIS_URL", "redis://127.0.0.1:6379/0")
started: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)


@tool
async def export_data(ctx: RunContext[Any], rows: int) -> str:
    """Export rows to the warehouse (slow: something to cancel or interrupt)."""
    started[ctx.run_id].set()
    await asyncio.sleep(rows / 1000)
    return f"exported {rows} rows"


def scripted(request: Any, info: Any) -> Any:
    """Stands in for a real model: export, then report."""
    last = request.messages[-1]
    if last.type == "input":
        return call("export_data", rows=int(last.content.split()[-1]))
    return f"Done: {last.content}"


async def wait_started(run_id: str) -> None:
    await asyncio.wait_for(started[run_id].wait(), 15)


async def main() -> None:
    queue = RunQueue(REDIS_URL, stream=f"lovia:example:{secrets.token_hex(3)}")
    try:
        await queue.client.ping()  # type: ignore[reportUnknownMemberType]
    except Exception:
        print(f"This example needs a Redis server at {REDIS_URL} (start one with redis-server).")
        await queue.aclose()
        return
    db = store()  # $LOVIA_STORE, else sqlite:///.lovia/lovia.db; PostgreSQL in production
    agents = {
        "exporter": Agent(name="exporter", model=FunctionModel(scripted), tools=[export_data])
    }
    try:
        # 1. cancel by id: one run running, one queued behind it (concurrency 1)
        stop = asyncio.Event()
        worker = Worker(queue, agents, db, name="w1", concurrency=1, drain_timeout_s=0.5)
        task = asyncio.create_task(worker.run(stop))
        busy = await queue.submit("exporter", "export 60000")
        queued = await queue.submit("exporter", "export 10")
        await wait_started(busy)
        print("cancel queued run:", await queue.cancel(queued, db, "not needed any more"))
        print("cancel running run:", await queue.cancel(busy, db, "operator pressed stop"))
        for run_id in (busy, queued):
            snap = await queue.result(run_id, db, timeout_s=15)
            print(f"  {run_id[:8]} -> {snap.info.status} ({snap.info.extra['cancelled_by']})")

        # 2. a bounded shutdown hands an unfinished run back to the front of the queue
        long = await queue.submit("exporter", "export 60000")
        await wait_started(long)
        t0 = time.monotonic()
        stop.set()
        await task
        print(
            f"shutdown took {time.monotonic() - t0:.1f} s; handed back: {worker.stats['requeued']}"
        )
        stop = asyncio.Event()
        fresh = Worker(queue, agents, db, name="w2", concurrency=2)
        task = asyncio.create_task(fresh.run(stop))
        snap = await queue.result(long, db, timeout_s=15)
        print(f"  {long[:8]} resumed by w2 -> {snap.info.status}")

        # 3. a run whose worker was lost three times (here: three attempt records of dead
        # processes) is dead-lettered instead of started a fourth time
        poison = "poison-" + secrets.token_hex(3)
        await db.begin(RunInfo(run_id=poison, agent="exporter", started_at=time.time()))
        lost = [AttemptRecord(attempt=n, at=time.time(), host="gone", pid=n) for n in (1, 2, 3)]
        await db.append(poison, [to_checkpoint(r) for r in lost])
        await queue.submit("exporter", "export 10", run_id=poison)
        snap = await queue.result(poison, db, timeout_s=15)
        life = await life_of(db, snap.info, snap)
        print(f"  {poison} -> {life.state}: {life.detail}")
        print("dead letters:", [(d["run_id"], d["reason"]) for d in await queue.dead_letters()])
        stop.set()
        await task
    finally:
        await queue.delete()
        await queue.aclose()
        await db.aclose()


if __name__ == "__main__":
    asyncio.run(main())
