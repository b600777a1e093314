"""A worker process for the crash test: serves the ``crashy`` agent until it kills itself.

Usage: python queue_worker.py REDIS_URL STREAM GROUP STORE_URL KILL_AT LOG_PATH
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from worker_helpers import crashy_agent

from lovia.workers import RunQueue, Worker

REDIS_URL, STREAM, GROUP, STORE_URL, KILL_AT, LOG = sys.argv[1:7]


async def main() -> None:
    queue = RunQueue(REDIS_URL, stream=STREAM, group=GROUP)
    agent = crashy_agent(Path(LOG), KILL_AT)
    worker = Worker(queue, {"crashy": agent}, STORE_URL, name="doomed", concurrency=1)
    await worker.run()


asyncio.run(main())
