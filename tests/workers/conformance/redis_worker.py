"""A Redis Streams worker process for the conformance suite (``lovia.workers.Worker``).

Configured by environment: ``LOVIA_CONFORMANCE_{REDIS,STREAM,GROUP,STORE,NAME,
CONCURRENCY,MAX_DELIVERIES,CLAIM_IDLE_S}``. Serves the agent of ``conformance_agent``.
"""

from __future__ import annotations

import asyncio
import os

from conformance_agent import agent

from lovia.workers import RunQueue, Worker


def _env(name: str) -> str:
    return os.environ[f"LOVIA_CONFORMANCE_{name}"]


async def main() -> None:
    queue = RunQueue(_env("REDIS"), stream=_env("STREAM"), group=_env("GROUP"))
    worker = Worker(
        queue,
        {"adder": agent},
        _env("STORE"),
        name=_env("NAME"),
        concurrency=int(_env("CONCURRENCY")),
        max_deliveries=int(_env("MAX_DELIVERIES")),
        claim_idle_s=float(_env("CLAIM_IDLE_S")),
    )
    await worker.run()


asyncio.run(main())
