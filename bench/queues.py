"""Runs/s and worker CPU per run through each queue back-end, 1 and 4 worker processes.

Back-ends: ``lovia.workers`` (Redis Streams, ``Worker(concurrency=16)``) and
``lovia.integrations.celery`` on RabbitMQ (``celery worker --pool threads -c 16``). The
runs do real model calls to ``bench/fake_server.py`` (``bench-t1-c2``: two parallel
``add`` calls, then the sum) and checkpoint into PostgreSQL (a fresh schema; SQLite
when PostgreSQL is unreachable). Per configuration: start the workers, warm them up,
submit ``--runs`` runs at once and time until the last one completed (read from the
store); CPU is the worker processes' user+system time over that window (from
``/proc``), divided by the runs. Writes its section of ``docs/performance.md``
(between the ``queues`` markers) unless ``--no-docs``.

Run: python bench/queues.py [--runs 300] [--no-docs]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT / "src"))

from lovia.stores import store  # noqa: E402
from lovia.workers.execute import wait_for_run  # noqa: E402

PG = os.environ.get("LOVIA_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("LOVIA_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
AMQP = os.environ.get("LOVIA_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")
NOTE = "Reading: with 16 runs in flight, `--pool prefork` needs 16 child processes (one run each, one event loop each): about 15x the memory and twice the CPU per run of one `--pool threads` process carrying the same 16 runs on one loop, which is why the threads pool is the one to use. On this shared 2-core machine (load average 7-14 during the run) every configuration is CPU-bound at a few ms per run, so more processes or more runs in flight do not add throughput here; with a real model (seconds per call) runs/s grows with the runs in flight until the CPU is used."
BEGIN, END = "<!-- queues:begin -->", "<!-- queues:end -->"
TICK = os.sysconf("SC_CLK_TCK")
CONFIGS = (("threads", 1, 16), ("threads", 4, 16), ("threads", 1, 64), ("prefork", 1, 16))
"""(Celery pool, worker processes, runs in flight per process); Redis Streams workers are
asyncio processes, so the pool only matters to Celery (prefork: 16 child processes)."""


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (a prefork worker's children)."""
    children = [
        int(c)
        for task in Path(f"/proc/{pid}/task").iterdir()
        for c in (task / "children").read_text().split()
    ]
    return [pid, *(p for c in children for p in tree(c))]


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its descendants, in MiB."""
    total = 0
    for p in tree(pid):
        for line in Path(f"/proc/{p}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process and its descendants (prefork)."""
    total = 0
    for p in tree(pid):
        fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / TICK


async def store_url() -> tuple[str, str | None]:
    """A fresh PostgreSQL schema when the server answers, else a SQLite file."""
    try:
        import asyncpg  # type: ignore[import-untyped]

        conn = await asyncpg.connect(PG, timeout=3)
        await conn.close()
        schema = f"bench_queues_{secrets.token_hex(4)}"
        return f"{PG}?schema={schema}", schema
    except Exception:
        return f"sqlite:///{BENCH / 'results' / 'queues.db'}", None


class Backend:
    """Start workers, submit runs; one subclass per queue back-end."""

    name = ""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.tag = secrets.token_hex(3)
        self.concurrency = 16
        self.pool = "threads"

    def start(self, index: int) -> subprocess.Popen[bytes]:
        raise NotImplementedError

    async def submit(self, run_id: str) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        pass


class RedisStreams(Backend):
    name = "Redis Streams (`lovia.workers`)"

    def __init__(self, env: dict[str, str]) -> None:
        super().__init__(env)
        from lovia.workers import RunQueue

        self.queue = RunQueue(REDIS, stream=f"lovia:bench:{self.tag}")
        self.env = {**env, "BENCH_REDIS": REDIS, "BENCH_STREAM": self.queue.stream}

    def start(self, index: int) -> subprocess.Popen[bytes]:
        env = {**self.env, "BENCH_CONCURRENCY": str(self.concurrency)}
        return subprocess.Popen([sys.executable, str(BENCH / "queue_app.py")], env=env, cwd=BENCH)

    async def submit(self, run_id: str) -> None:
        await self.queue.submit("bench", "add them up", run_id=run_id)

    async def close(self) -> None:
        await self.queue.delete()
        await self.queue.aclose()


class CeleryRabbitMQ(Backend):
    name = "Celery on RabbitMQ (`lovia.integrations.celery`)"

    def __init__(self, env: dict[str, str]) -> None:
        super().__init__(env)
        self.env = {**env, "BENCH_BROKER": AMQP, "BENCH_QUEUE": f"lovia.bench.{self.tag}"}
        os.environ.update(self.env)
        import queue_app

        self.runs: Any = queue_app.runs

    def start(self, index: int) -> subprocess.Popen[bytes]:
        args = [sys.executable, "-m", "celery", "-A", "queue_app", "worker", "--pool",
                self.pool, "-c", str(self.concurrency), "-Q", self.env["BENCH_QUEUE"], "-n",
                f"bench{index}-{self.tag}@%h", "--without-mingle", "--without-gossip",
                "--loglevel", "WARNING"]  # fmt: skip
        return subprocess.Popen(args, env=self.env, cwd=BENCH)

    async def submit(self, run_id: str) -> None:
        self.runs.submit("queue_app:agent", "add them up", run_id=run_id)


async def measure(backend: Backend, procs: int, runs: int, db_url: str) -> dict[str, float]:
    workers = [backend.start(i) for i in range(procs)]
    db = store(db_url)
    try:
        warm = [
            f"warm-{backend.tag}-{backend.pool}-{procs}x{backend.concurrency}-{i}"
            for i in range(8 * procs)
        ]
        for run_id in warm:
            await backend.submit(run_id)
        for run_id in warm:
            await wait_for_run(db, run_id, timeout_s=120, poll_s=0.05)
        ids = [
            f"run-{backend.tag}-{backend.pool}-{procs}x{backend.concurrency}-{i}"
            for i in range(runs)
        ]
        assert all([await db.load(r) is None for r in (ids[0], ids[-1])]), "fresh run ids"
        cpu0, t0 = sum(cpu_s(w.pid) for w in workers), time.perf_counter()
        for run_id in ids:
            await backend.submit(run_id)
        for run_id in ids:
            snap = await wait_for_run(db, run_id, timeout_s=300, poll_s=0.02)
            assert snap.result is not None and snap.result["output"] == "sum=10", snap.result
        wall, cpu = time.perf_counter() - t0, sum(cpu_s(w.pid) for w in workers) - cpu0
        rss = sum(rss_mb(w.pid) for w in workers)
    finally:
        for w in workers:
            w.terminate()
        for w in workers:
            w.wait(30)
        await db.aclose()
    return {
        "runs_per_s": runs / wall,
        "cpu_ms_per_run": 1000 * cpu / runs,
        "wall_s": wall,
        "rss_mb": rss,
    }


def render(
    rows: list[tuple[str, int, int, dict[str, float]]], args: argparse.Namespace, store: str
) -> str:
    lines = [
        BEGIN,
        "## Queue back-ends: runs/s and worker CPU per run",
        "",
        f"`python bench/queues.py --runs {args.runs} --latency-ms {args.latency_ms:g}`: "
        f"{args.runs} runs submitted at once, each two model calls to the fake server "
        f"(`bench-t1-c2`, {args.latency_ms:g} ms per call) and one tool turn, checkpointed "
        f"in {store}. CPU is the worker "
        "processes' user+system time per run (the broker, the store and the fake server "
        "are not counted). Measured on the shared 2-core machine while other work ran: "
        "compare rows, not machines.",
        "",
        "| back-end | worker processes | runs in flight per process | runs/s | worker CPU per run | worker memory (RSS) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, procs, conc, r in rows:
        lines.append(
            f"| {name} | {procs} | {conc} | {r['runs_per_s']:.0f} | {r['cpu_ms_per_run']:.1f} ms "
            f"| {r['rss_mb']:.0f} MiB |"
        )
    lines += ["", NOTE]
    lines += ["", f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
              f"Python {platform.python_version()}, {os.cpu_count()} CPUs.", END]  # fmt: skip
    return "\n".join(lines)


def write_docs(section: str) -> None:
    path = ROOT / "docs" / "performance.md"
    text = path.read_text()
    if BEGIN in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        head, sep, tail = text.partition("## Environment")
        text = f"{head}{section}\n\n{sep}{tail}" if sep else f"{text}\n{section}\n"
    path.write_text(text)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--no-docs", action="store_true")
    parser.add_argument("--only", choices=["redis", "celery"], help="one back-end")
    parser.add_argument("--latency-ms", type=float, default=100.0, help="per model call")
    args = parser.parse_args()
    server = subprocess.Popen(
        [sys.executable, str(BENCH / "fake_server.py"), "--port", "0", "--latency-ms",
         str(args.latency_ms)],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    assert server.stdout is not None
    port = int(server.stdout.readline())
    db_url, schema = await store_url()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(BENCH)]),
        "BENCH_MODEL_URL": f"http://127.0.0.1:{port}/v1",
        "BENCH_STORE": db_url,
    }
    rows: list[tuple[str, int, int, dict[str, float]]] = []
    try:
        kinds = {"redis": RedisStreams, "celery": CeleryRabbitMQ}
        for key, kind in kinds.items():
            if args.only not in (None, key):
                continue
            backend = kind(env)
            try:
                for pool, procs, concurrency in CONFIGS:
                    if pool != "threads" and key != "celery":
                        continue
                    backend.pool, backend.concurrency = pool, concurrency
                    result = await measure(backend, procs, args.runs, db_url)
                    name = f"{backend.name}, `--pool {pool}`" if key == "celery" else backend.name
                    print(f"{name}, {procs} x {concurrency}: {result}", flush=True)
                    rows.append((name, procs, concurrency, result))
            finally:
                await backend.close()
    finally:
        server.terminate()
        server.wait(10)
        if schema is not None:
            import asyncpg  # type: ignore[import-untyped]

            conn = await asyncpg.connect(PG)
            await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            await conn.close()
    section = render(rows, args, "PostgreSQL" if schema else "SQLite")
    print(section)
    if not args.no_docs:
        write_docs(section)


if __name__ == "__main__":
    asyncio.run(main())
