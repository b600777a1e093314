"""The two queue back-ends behind one interface: submit, start a worker process, wait for
a result, read the dead letters. Workers are real processes (``celery worker`` for
Celery) serving ``conformance_agent:agent``; every name on a broker is random per test."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any, Protocol

from lovia.stores import Store
from lovia.stores.base import RunSnapshot

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[2] / "src"
REDIS_URL = os.environ.get("LOVIA_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
AMQP_URL = os.environ.get("LOVIA_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")


class Backend(Protocol):
    """What the conformance tests need from a queue back-end."""

    name: str

    async def submit(
        self, run_id: str, input: str, session_id: str, deps_key: str | None = None
    ) -> None: ...

    def start_worker(
        self, name: str, concurrency: int = 4, *, deps: bool = False
    ) -> subprocess.Popen[bytes]:
        """A worker process; ``deps``: with ``conformance_agent:deps`` as its factory."""
        ...

    async def result(self, run_id: str, timeout_s: float) -> RunSnapshot: ...

    async def dead_letters(self) -> dict[str, int]:
        """``run_id`` -> deliveries, for every dead-lettered task."""
        ...

    async def aclose(self) -> None: ...


class Common:
    """Worker processes and their environment, shared by both back-ends."""

    def __init__(
        self, workdir: Path, model_url: str, store_url: str, db: Store, max_deliveries: int
    ) -> None:
        self.workdir, self.store_url, self.db = workdir, store_url, db
        self.max_deliveries = max_deliveries
        self.tag = secrets.token_hex(4)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)]),
            "LOVIA_CONFORMANCE_DIR": str(workdir),
            "LOVIA_CONFORMANCE_MODEL_URL": model_url,
            "LOVIA_CONFORMANCE_STORE": store_url,
            "LOVIA_CONFORMANCE_MAX_DELIVERIES": str(max_deliveries),
            "LOVIA_LEASE_TTL_S": "5",
        }

    def spawn(self, args: list[str], name: str, **env: str) -> subprocess.Popen[bytes]:
        log = (self.workdir / f"worker-{name}.log").open("wb")
        proc = subprocess.Popen(
            args, cwd=HERE, env={**self.env, **env}, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        self.procs.append(proc)
        return proc

    def stop_workers(self) -> None:
        """Stop the worker processes this test started (only those)."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name} ---\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.workdir.glob("worker-*.log"))
        )


class RedisStreams(Common):
    """``lovia.workers``: ``RunQueue`` + ``Worker`` processes on a Redis stream."""

    name = "redis-streams"

    def __init__(self, *args: Any, claim_idle_s: float) -> None:
        super().__init__(*args)
        from lovia.workers import RunQueue

        self.queue = RunQueue(
            REDIS_URL, stream=f"lovia:conf:{self.tag}", group=f"lovia-conf-{self.tag}"
        )
        self.claim_idle_s = claim_idle_s

    async def ready(self) -> None:
        await self.queue.client.ping()  # type: ignore[reportUnknownMemberType]
        await self.queue.ensure_group()

    async def submit(
        self, run_id: str, input: str, session_id: str, deps_key: str | None = None
    ) -> None:
        await self.queue.submit(
            "adder", input, run_id=run_id, session_id=session_id, deps_key=deps_key
        )

    def start_worker(
        self, name: str, concurrency: int = 4, *, deps: bool = False
    ) -> subprocess.Popen[bytes]:
        q = self.queue
        return self.spawn(
            [sys.executable, str(HERE / "redis_worker.py")],
            name,
            LOVIA_CONFORMANCE_REDIS=q.url,
            LOVIA_CONFORMANCE_STREAM=q.stream,
            LOVIA_CONFORMANCE_GROUP=q.group,
            LOVIA_CONFORMANCE_NAME=name,
            LOVIA_CONFORMANCE_CONCURRENCY=str(concurrency),
            LOVIA_CONFORMANCE_CLAIM_IDLE_S=str(self.claim_idle_s),
            LOVIA_CONFORMANCE_SWEEP_S="1",
            LOVIA_CONFORMANCE_DEPS="1" if deps else "",
        )

    async def result(self, run_id: str, timeout_s: float) -> RunSnapshot:
        return await self.queue.result(run_id, self.db, timeout_s=timeout_s)

    async def dead_letters(self) -> dict[str, int]:
        dead: Any = await self.queue.client.xrange(f"{self.queue.stream}:dead")
        return {json.loads(f["task"])["run_id"]: int(f["deliveries"]) for _, f in dead}

    async def aclose(self) -> None:
        self.stop_workers()
        await self.queue.delete()
        await self.queue.aclose()


class CeleryRabbitMQ(Common):
    """``lovia.integrations.celery`` on RabbitMQ, ``celery worker --pool threads``."""

    name = "celery-rabbitmq"

    def __init__(self, *args: Any, retry_s: float) -> None:
        super().__init__(*args)
        from celery_app import make

        self.queue_name = f"lovia.conf.{self.tag}"
        self.retry_s = retry_s
        self.app, self.runs = make(
            AMQP_URL, self.store_url, self.queue_name, self.max_deliveries, retry_s
        )

    async def ready(self) -> None:
        def connect() -> None:
            with self.app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=1)

        await asyncio.to_thread(connect)

    async def submit(
        self, run_id: str, input: str, session_id: str, deps_key: str | None = None
    ) -> None:
        await asyncio.to_thread(
            self.runs.submit,
            "conformance_agent:agent",
            input,
            run_id=run_id,
            session_id=session_id,
            deps_key=deps_key,
        )

    def start_worker(
        self, name: str, concurrency: int = 4, *, deps: bool = False
    ) -> subprocess.Popen[bytes]:
        args = [sys.executable, "-m", "celery", "-A", "celery_app", "worker", "--pool",
                "threads", "--concurrency", str(concurrency), "-Q", self.queue_name,
                "-n", f"{name}-{self.tag}@%h", "--without-mingle", "--without-gossip",
                "--loglevel", "WARNING"]  # fmt: skip
        return self.spawn(
            args,
            name,
            LOVIA_CONFORMANCE_BROKER=AMQP_URL,
            LOVIA_CONFORMANCE_QUEUE=self.queue_name,
            LOVIA_CONFORMANCE_RETRY_S=str(self.retry_s),
            LOVIA_CONFORMANCE_DEPS="conformance_agent:deps" if deps else "",
        )

    async def result(self, run_id: str, timeout_s: float) -> RunSnapshot:
        return await self.runs.result(run_id, timeout_s=timeout_s)

    async def dead_letters(self) -> dict[str, int]:
        found = await asyncio.to_thread(self.runs.dead_letters)
        return {d["run_id"]: int(d["deliveries"]) for d in found}

    async def aclose(self) -> None:
        self.stop_workers()

        def delete() -> None:
            from kombu import Queue

            with self.app.connection_for_write() as conn:
                for name in (self.queue_name, f"{self.queue_name}.dead"):
                    Queue(name)(conn.default_channel).delete()

        await asyncio.to_thread(delete)
