"""Failover times of the queue back-ends, with real worker processes at a given lease TTL.

- ``stall``: a worker is SIGSTOPped in the middle of a run (in a tool); an idle worker
  is started. Measured: seconds from the SIGSTOP until another worker starts the run
  (an attempt record from another process in the store).
- ``drop`` (Celery): the worker's broker connection is cut (through a TCP proxy on
  127.0.0.1, so nothing else on the broker is touched) while a run is in flight; a new
  run is submitted at once. Measured: seconds until it completed, with lovia's
  ``CELERY_DEFAULTS`` and with Celery's own (``--celery-defaults``).
- ``poison``: a run SIGKILLs every worker that makes a model call for it; a fresh
  worker is started after each death. Measured: seconds from the submit until the run
  is in the dead-letter queue, and how many workers died.

Uses the conformance suite's agent and back-ends (``tests/workers/conformance``), the
bench fake model server and a temporary SQLite store; needs Redis and RabbitMQ on
127.0.0.1. Defaults are lovia's (60 s lease TTL, claim/retry after TTL + 10 s)::

    python bench/queue_failover.py                      # both scenarios, both back-ends
    python bench/queue_failover.py --ttl 5 --what stall
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "tests" / "workers" / "conformance"
sys.path[:0] = [str(ROOT / "src"), str(CONF), str(ROOT / "tests" / "workers")]


CELERY_OWN = '{"worker_enable_prefetch_count_reduction": true, "broker_heartbeat": 120}'


def _make(kind: str, workdir: Path, model_url: str, ttl: float, db: Any, url: str) -> Any:
    from backends import CeleryRabbitMQ, RedisStreams

    common = (workdir, model_url, url, db, 10)
    if kind == "redis":
        backend: Any = RedisStreams(*common, claim_idle_s=ttl + 10)
    else:
        backend = CeleryRabbitMQ(*common, retry_s=ttl + 10)
    backend.env["LOVIA_LEASE_TTL_S"] = str(ttl)
    backend.env["LOVIA_CONFORMANCE_SWEEP_S"] = "10"
    return backend


async def _other_attempt(db: Any, run_id: str, pid: int, timeout_s: float) -> float | None:
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        snap = await db.load(run_id)
        pids = [r.data.get("pid") for r in (snap.records if snap else []) if r.kind == "attempt"]
        if any(p != pid for p in pids):
            return time.monotonic() - start
        await asyncio.sleep(0.2)
    return None


async def stall(backend: Any, db: Any, workdir: Path) -> str:
    stalled = backend.start_worker("stalled", concurrency=1)
    await backend.submit("slow-stall", "add them up", "s-slow-stall")
    log = workdir / "started.log"
    while not log.exists():
        await asyncio.sleep(0.1)
    os.kill(stalled.pid, signal.SIGSTOP)
    backend.start_worker("idle", concurrency=1)
    took = await _other_attempt(db, "slow-stall", stalled.pid, 300)
    os.kill(stalled.pid, signal.SIGCONT)
    return "not taken over in 300 s" if took is None else f"taken over after {took:.1f} s"


class Proxy:
    """A TCP proxy to the broker whose open connections can be cut."""

    def __init__(self, port: int) -> None:
        self.upstream, self.conns, self.server = port, set[asyncio.StreamWriter](), None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection("127.0.0.1", self.upstream)
        self.conns |= {writer, up_w}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_w), pipe(up_r, writer))

    def cut(self) -> None:
        for w in list(self.conns):
            w.transport.abort()
        self.conns.clear()


async def drop(backend: Any, db: Any, workdir: Path) -> str:
    proxy = Proxy(5672)
    port = await proxy.start()
    backend.env["LOVIA_CONFORMANCE_BROKER"] = f"amqp://guest:guest@127.0.0.1:{port}//"
    backend.start_worker("dropped", concurrency=2)
    await backend.submit("warm-up", "add them up", "s-warm-up")
    await backend.result("warm-up", 60)
    await backend.submit("stall-busy", "add them up", "s-stall-busy")  # in flight at the cut
    while not (workdir / "started.log").exists():
        await asyncio.sleep(0.1)
    proxy.cut()
    start = time.monotonic()
    await backend.submit("after-drop", "add them up", "s-after-drop")
    try:
        await backend.result("after-drop", 400)
    except TimeoutError:
        return "not completed in 400 s after the drop"
    return f"a run submitted at the drop completed after {time.monotonic() - start:.1f} s"


async def poison(backend: Any, db: Any, workdir: Path) -> str:
    start = time.monotonic()
    await backend.submit("crasher", "always-die: add them up", "s-crasher")
    deaths = 0
    while time.monotonic() - start < 1800:
        worker = backend.start_worker(f"w{deaths}", concurrency=4)
        while worker.poll() is None and "crasher" not in await backend.dead_letters():
            await asyncio.sleep(0.5)
        if worker.poll() is None:
            took = time.monotonic() - start
            return f"dead-lettered after {took:.0f} s, {deaths} workers killed"
        deaths += 1
    return f"not dead-lettered in 1800 s, {deaths} workers killed"


async def main() -> None:
    from conformance_harness import ModelServer

    from lovia.stores import store

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ttl", type=float, default=60.0, help="lease TTL, seconds")
    parser.add_argument("--what", default="stall,poison")
    parser.add_argument("--backends", default="celery,redis")
    parser.add_argument(
        "--celery-defaults", action="store_true", help="Celery's own settings, not lovia's"
    )
    args = parser.parse_args()
    server = ModelServer()
    try:
        for what in args.what.split(","):
            for kind in args.backends.split(","):
                with tempfile.TemporaryDirectory() as tmp:
                    workdir = Path(tmp)
                    url = f"sqlite:///{workdir / 'runs.db'}"
                    db = store(url)
                    backend = _make(kind, workdir, server.url, args.ttl, db, url)
                    await backend.ready()
                    try:
                        scenario = {"stall": stall, "poison": poison, "drop": drop}[what]
                        if args.celery_defaults:
                            backend.env["LOVIA_CONFORMANCE_CELERY_CONF"] = CELERY_OWN
                        said = await scenario(backend, db, workdir)
                    finally:
                        await backend.aclose()
                        await db.aclose()
                    print(f"{what:7} {kind:7} ttl={args.ttl:g}s: {said}", flush=True)
    finally:
        server.close()


if __name__ == "__main__":
    os.environ.setdefault("LOVIA_CONFORMANCE_DIR", tempfile.gettempdir())
    asyncio.run(main())
