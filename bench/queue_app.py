"""The agent and worker entry points of ``bench/queues.py`` (both queue back-ends).

Configured by environment: ``BENCH_MODEL_URL`` (the fake server), ``BENCH_STORE``, and
either ``BENCH_REDIS``/``BENCH_STREAM`` (``python bench/queue_app.py`` runs one
Redis Streams worker) or ``BENCH_BROKER``/``BENCH_QUEUE`` (``celery -A queue_app worker``).
The agent is the benchmark workload: model ``bench-t1-c2`` (two parallel ``add`` calls,
then the sum), an ``async`` tool.
"""

from __future__ import annotations

import asyncio
import os

from lovia import Agent, tool
from lovia.providers.openai_chat import OpenAIChat


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


agent = Agent(
    name="bench",
    model=OpenAIChat("bench-t1-c2", base_url=os.environ["BENCH_MODEL_URL"], api_key="x"),
    tools=[add],
)

if "BENCH_BROKER" in os.environ:
    from celery import Celery

    from lovia.integrations.celery import CeleryRunQueue

    app = Celery("lovia_bench", broker=os.environ["BENCH_BROKER"])
    app.conf.worker_prefetch_multiplier = 1
    app.conf.broker_connection_retry_on_startup = True
    runs = CeleryRunQueue(
        app, os.environ["BENCH_STORE"], agents=["queue_app:agent"], queue=os.environ["BENCH_QUEUE"]
    )


async def redis_worker() -> None:
    """One Redis Streams worker until SIGTERM."""
    import signal

    from lovia.workers import RunQueue, Worker

    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    queue = RunQueue(os.environ["BENCH_REDIS"], stream=os.environ["BENCH_STREAM"])
    concurrency = int(os.environ.get("BENCH_CONCURRENCY", "16"))
    worker = Worker(queue, {"bench": agent}, os.environ["BENCH_STORE"], concurrency=concurrency)
    await worker.run(stop)
    await queue.aclose()


if __name__ == "__main__":
    asyncio.run(redis_worker())
