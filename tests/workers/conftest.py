"""Fixtures for the Redis task-queue tests: a real Redis on 127.0.0.1 (skipped locally
when unreachable, a failure in CI), one fresh stream and group per test."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from worker_helpers import Start, in_ci

from lovia.workers import RunQueue, Worker

REDIS_URL = os.environ.get("LOVIA_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture
async def queue() -> AsyncIterator[RunQueue]:
    tag = secrets.token_hex(4)
    q = RunQueue(REDIS_URL, stream=f"lovia:test:{tag}", group=f"lovia-test-{tag}")
    try:
        await q.client.ping()  # type: ignore[reportUnknownMemberType]
    except Exception as exc:
        await q.aclose()
        if in_ci():
            pytest.fail(f"Redis unreachable at {REDIS_URL}: {exc}")
        pytest.skip(f"Redis unreachable at {REDIS_URL}")
    yield q
    await q.delete()
    await q.aclose()


@pytest.fixture
def store_file(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.fixture
async def start() -> AsyncIterator[Start]:
    """Start workers in the background; the fixture stops them (gracefully) at the end."""
    running: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

    def _start(worker: Worker) -> asyncio.Task[None]:
        stop = asyncio.Event()
        task = asyncio.create_task(worker.run(stop))
        running.append((stop, task))
        return task

    yield _start
    for stop, _ in running:
        stop.set()
    await asyncio.gather(*(task for _, task in running))
