"""Distributed workers: a Redis Streams task queue for runs (offline, needs a local Redis).

Submits six runs to a ``RunQueue``, runs two ``Worker`` s in this process (in production:
one or more per machine, sharing a PostgreSQL store), waits for the results, shows that
resubmitting a finished ``run_id`` replays its stored result without a model call, and
stops the workers gracefully. Without a Redis server on 127.0.0.1:6379 it says so and
exits. Start one with ``redis-server`` (or ``docker run -p 6379:6379 redis``).

Run: python examples/60_workers.py
"""

from __future__ import annotations

import asyncio
import os
import secrets
from typing import Any

from lovia import Agent, tool
from lovia.stores import store
from lovia.testing import FunctionModel, call
from lovia.workers import RunQueue, Worker

REDIS_URL = os.environ.get("LOVIA_REDIS_URL", "redis://127.0.0.1:6379/0")


@tool
def fetch_report(day: str) -> str:
    """Fetch the sales report of a day."""
    return f"{day}: {int(day[-2:]) * 3} orders"


def scripted(request: Any, info: Any) -> Any:
    """Stands in for a real model: fetch the report of the day asked for, then answer."""
    last = request.messages[-1]
    if last.type == "input":
        return call("fetch_report", day=last.content.split()[-1])
    return f"Summary: {last.content}"


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
        "reporter": Agent(name="reporter", model=FunctionModel(scripted), tools=[fetch_report])
    }
    stop = asyncio.Event()
    workers = [Worker(queue, agents, db, name=f"worker-{i}", concurrency=2) for i in (1, 2)]
    running = [asyncio.create_task(w.run(stop)) for w in workers]
    try:
        days = [f"2026-11-{d:02d}" for d in range(20, 26)]
        run_ids = [await queue.submit("reporter", f"Summarize {day}") for day in days]
        for run_id in run_ids:
            snap = await queue.result(run_id, db, timeout_s=30)
            assert snap.result is not None
            print(f"{snap.info.status}: {snap.result['output']}")

        # a duplicate delivery: the stored result, no model call, the task acknowledged
        await queue.submit("reporter", f"Summarize {days[0]}", run_id=run_ids[0])
        for _ in range(600):  # the workers' stats count outcomes
            if sum(w.stats["replayed"] for w in workers):
                break
            await asyncio.sleep(0.05)
        print("resubmitted:", run_ids[0][:8], "replayed from the store")

        # anyone who can write to the stream picks the agent name: workers run only
        # their registered agents, so this is recorded as failed and dead-lettered
        hostile = await queue.submit("os:abort", "anything")
        snap = await queue.result(hostile, db, timeout_s=30)
        print(f"os:abort -> {snap.info.status} ({snap.info.error_type}), nothing imported")
    finally:
        stop.set()
        await asyncio.gather(*running)  # in-flight runs finish (or are handed back)
        print("per worker:", {w.name: dict(w.stats) for w in workers})
        print("pending tasks:", await queue.pending())
        await queue.delete()
        await queue.aclose()
        await db.aclose()


if __name__ == "__main__":
    asyncio.run(main())
