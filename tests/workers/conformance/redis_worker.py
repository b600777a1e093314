"""A Redis Streams worker process for the conformance suite (``lovia.workers.Worker``).

Configured by environment: ``LOVIA_CONFORMANCE_{REDIS,STREAM,GROUP,STORE,NAME,
CONCURRENCY,MAX_DELIVERIES,CLAIM_IDLE_S,SWEEP_S,DEPS}``. Serves the agent of
``conformance_agent`` (with its ``deps`` factory when ``DEPS`` is set).
"""

from __future__ import annotations

import asyncio
import os

from conformance_agent import agent, deps

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
        sweep_s=float(os.environ.get("LOVIA_CONFORMANCE_SWEEP_S", "10")),
        deps=deps if os.environ.get("LOVIA_CONFORMANCE_DEPS") else None,
    )
    await worker.run()


asyncio.run(main())
