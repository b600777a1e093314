"""A fleet on one machine: worker "hosts" sharing PostgreSQL through PgBouncer.

``--hosts`` worker processes (each a separate ``lovia.workers.Worker`` on the Redis
stream, each with its own connection pool) run ``--runs`` runs of an agent whose model
is ``bench/fake_server.py`` (``bench-t<T>-c<C>``: T turns of C ``add`` calls, then the
sum of every result) and whose store is PostgreSQL (database ``lovia_pgfleet``, a fresh
schema) through a private PgBouncer in transaction mode capped at ``--budget`` server
connections. ``--kills`` times during the run a random worker is SIGKILLed and a new
one started: its runs are taken over (Redis claims the task, the lease expires, the
checkpoint resumes). Every worker's traffic passes a counting proxy
(``tests/stores/pg_wire.py``) in front of PgBouncer.

Reports: runs/s; run latency (submit → ended, which includes waiting in the queue)
p50/p99, a run's own overhead over the model's time (ended − started − turns ×
``--latency-ms``), and the latency of runs that were taken over; connections (peak
server connections of the database from ``pg_stat_activity``, peak client connections
at the proxy); round trips per model turn; lost runs (not completed). Tool calls: each
``add`` counts its executions in Redis under its idempotency key and applies its
effect there — once per key with ``--tool idempotent`` (the default:
``@tool(idempotent=True)``, re-run after a crash and deduplicated by the key), or once
per execution with ``--tool plain`` (never re-run: a call cut by a crash is reported to
the model as of unknown outcome). Reported: effects duplicated and lost (must be 0),
re-executions, unknown outcomes, wrong final answers, dead letters.

Run: python bench/fleet.py [--quick] [--runs 1000] [--hosts 4] [--kills 3]
Needs PostgreSQL, Redis and Debian's pgbouncer on this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "stores"))
sys.path.insert(0, str(BENCH / "drivers"))

from _common import expected_answer, model_name  # noqa: E402

PG = os.environ.get("LOVIA_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("LOVIA_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
DATABASE = "lovia_pgfleet"
LEASE_TTL_S = 3.0
CLAIM_IDLE_S = 4.0
ME = "lovia-fleet-bench"
"""The bench's own connections (not counted as the fleet's)."""


# -- one worker host ---------------------------------------------------------------------


def worker_main() -> None:
    """A worker process: ``Worker`` on the stream until SIGTERM (or SIGKILL)."""
    import redis.asyncio as aioredis

    from lovia import Agent, RunContext, tool
    from lovia.providers.openai_chat import OpenAIChat
    from lovia.workers import RunQueue, Worker

    env = os.environ
    effects = aioredis.from_url(env["FLEET_REDIS"], decode_responses=True)

    idempotent = env["FLEET_TOOL"] == "idempotent"

    @tool(idempotent=idempotent)
    async def add(ctx: RunContext[None], a: int, b: int) -> int:
        """Add two integers."""
        key = ctx.idempotency_key or "?"
        await effects.hincrby(f"{env['FLEET_EFFECTS']}:runs", key, 1)  # executions
        if idempotent:  # the effect, once per idempotency key
            await effects.hsetnx(env["FLEET_EFFECTS"], key, 1)
        else:
            await effects.hincrby(env["FLEET_EFFECTS"], key, 1)
        return a + b

    agent = Agent(
        name="fleet",
        model=OpenAIChat(env["FLEET_MODEL"], base_url=env["FLEET_MODEL_URL"], api_key="x"),
        tools=[add],
    )

    async def main() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        queue = RunQueue(env["FLEET_REDIS"], stream=env["FLEET_STREAM"])
        worker = Worker(
            queue,
            {"fleet": agent},
            env["FLEET_STORE"],
            name=env["FLEET_NAME"],
            concurrency=int(env["FLEET_CONCURRENCY"]),
            claim_idle_s=CLAIM_IDLE_S,
            drain_timeout_s=5.0,
        )
        await effects.sadd(f"{env['FLEET_STREAM']}:ready", env["FLEET_NAME"])  # imports done
        await worker.run(stop)
        await queue.aclose()
        await effects.aclose()

    asyncio.run(main())


# -- the fleet ---------------------------------------------------------------------------


async def ensure_database() -> None:
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(PG, timeout=5)
    try:
        found = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", DATABASE)
        if not found:
            await conn.execute(f"CREATE DATABASE {DATABASE}")
    finally:
        await conn.close()


def direct_url(database: str) -> str:
    base = PG.rsplit("/", 1)[0]
    return f"{base}/{database}"


class Fleet:
    """The worker processes, started and killed by the bench."""

    def __init__(self, env: dict[str, str], concurrency: int) -> None:
        self.env, self.concurrency = env, concurrency
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.started = 0
        self.logs = Path(os.environ.get("TMPDIR", "/tmp")) / f"lovia-fleet-{os.getpid()}"
        self.logs.mkdir(exist_ok=True)

    def start(self) -> None:
        self.started += 1
        name = f"host{self.started}"
        env = {
            **os.environ,
            **self.env,
            "FLEET_NAME": name,
            "FLEET_CONCURRENCY": str(self.concurrency),
            "LOVIA_LEASE_TTL_S": str(LEASE_TTL_S),
            "PYTHONPATH": str(ROOT / "src"),
        }
        log = (self.logs / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs[name] = proc

    async def ready(self, redis: Any, stream: str, timeout_s: float = 120.0) -> None:
        """Wait until every worker has said it is ready (its imports done)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if set(await redis.smembers(f"{stream}:ready")) >= set(self.procs):
                return
            await asyncio.sleep(0.2)
        raise TimeoutError("workers did not start")

    async def kill_busiest(self, redis: Any, stream: str) -> int:
        """SIGKILL the worker with the most tasks in flight, start a new one; its count."""
        summary = await redis.xpending(stream, "lovia-workers")
        pending = {c["name"]: int(c["pending"]) for c in summary.get("consumers") or []}
        name = max(self.procs, key=lambda n: pending.get(n, 0))
        victim = self.procs.pop(name)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        self.start()
        return pending.get(name, 0)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def sample_connections(peak: dict[str, int], stop: asyncio.Event) -> None:
    """Peak server connections of the fleet's database, from ``pg_stat_activity``
    (PgBouncer's server connections; the bench's own are left out)."""
    import asyncpg

    conn = await asyncpg.connect(PG, timeout=5)
    try:
        while not stop.is_set():
            n = await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 "
                "AND application_name <> $2",
                DATABASE,
                ME,
            )
            peak["server"] = max(peak.get("server", 0), int(n))
            await asyncio.sleep(0.2)
    finally:
        await conn.close()


async def wait_done(
    schema: str, runs: int, timeout_s: float, fleet: Fleet, kills: int, redis: Any, stream: str
) -> tuple[float, int]:
    """Wait until every run completed; kill the busiest worker each time another
    ``runs / (kills + 1)`` runs completed. The end time and the tasks the kills hit."""
    import asyncpg

    conn = await asyncpg.connect(
        direct_url(DATABASE), timeout=5, server_settings={"application_name": ME}
    )
    deadline = time.monotonic() + timeout_s
    marks = [runs * (k + 1) // (kills + 1) for k in range(kills)]
    hit = 0
    try:
        while time.monotonic() < deadline:
            done = await conn.fetchval(
                f"SELECT count(*) FROM \"{schema}\".lovia_runs WHERE status = 'completed'"
            )
            if done >= runs:
                return time.time(), hit
            if marks and done >= marks[0]:
                marks.pop(0)
                hit += await fleet.kill_busiest(redis, stream)
            await asyncio.sleep(0.1)
    finally:
        await conn.close()
    raise TimeoutError(f"runs not all completed within {timeout_s:g} s")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    import redis.asyncio as aioredis
    from pg_bouncer import PgBouncer
    from pg_wire import WireCounter

    from lovia.stores import store
    from lovia.workers import RunQueue

    await ensure_database()
    tag = secrets.token_hex(4)
    schema = f"fleet_{tag}"
    server = subprocess.Popen(
        [
            sys.executable,
            str(BENCH / "fake_server.py"),
            "--port",
            "0",
            "--latency-ms",
            str(args.latency_ms),
        ],
        stdout=subprocess.PIPE,
    )
    assert server.stdout is not None
    port = int(server.stdout.readline().split()[-1].decode().rsplit(":", 1)[-1])
    bouncer = PgBouncer(pool_size=args.budget, max_db_connections=args.budget).start()
    wire = WireCounter(upstream_port=bouncer.port)
    await wire.start()
    store_url = wire.url(
        DATABASE,
        query=f"schema={schema}&statement_cache_size=0&pool_max={args.pool_max}"
        "&application_name=lovia-fleet",
    )
    stream = f"lovia:fleet:{tag}"
    effects_key = f"{stream}:effects"
    env = {
        "FLEET_REDIS": REDIS,
        "FLEET_STREAM": stream,
        "FLEET_EFFECTS": effects_key,
        "FLEET_TOOL": args.tool,
        "FLEET_STORE": store_url,
        "FLEET_MODEL": model_name(args.turns, args.calls),
        "FLEET_MODEL_URL": f"http://127.0.0.1:{port}/v1",
    }
    queue = RunQueue(REDIS, stream=stream)
    redis = aioredis.from_url(REDIS, decode_responses=True)
    fleet = Fleet(env, args.concurrency)
    peak: dict[str, int] = {}
    stop = asyncio.Event()
    sampler = asyncio.ensure_future(sample_connections(peak, stop))
    db = store(f"{direct_url(DATABASE)}?schema={schema}&application_name={ME}&listen=off")
    try:
        await db.load("-")  # creates the schema before the workers start
        await queue.ensure_group()
        for _ in range(args.hosts):
            fleet.start()
        await fleet.ready(redis, stream)
        wire.reset()
        submitted: dict[str, float] = {}
        t0 = time.time()
        for i in range(args.runs):
            run_id = f"run-{tag}-{i:05d}"
            submitted[run_id] = time.time()
            await queue.submit("fleet", f"task {i}", run_id=run_id, session_id=run_id)
        end, hit = await wait_done(
            schema, args.runs, args.timeout, fleet, args.kills, redis, stream
        )
        stop.set()
        await sampler
        result = await report(args, db, redis, wire, submitted, t0, end, peak, effects_key)
        return {**result, "tasks_in_flight_on_killed_hosts": hit, "hosts_started": fleet.started}
    finally:
        stop.set()
        fleet.stop()
        await queue.delete()
        await queue.aclose()
        await redis.delete(effects_key, f"{effects_key}:runs", f"{stream}:ready")
        await redis.aclose()
        await db.aclose()
        await wire.aclose()
        bouncer.stop()
        server.terminate()
        server.wait()
        if not args.keep:
            await drop_schema(schema)


async def drop_schema(schema: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(direct_url(DATABASE), timeout=5)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


async def lease_grants(schema: str) -> dict[str, int]:
    """How many times each run's lease was granted (its fencing token)."""
    import asyncpg

    conn = await asyncpg.connect(direct_url(DATABASE), timeout=5)
    try:
        rows = await conn.fetch(f'SELECT run_id, token FROM "{schema}".lovia_leases')
    finally:
        await conn.close()
    return {str(row[0]): int(row[1]) for row in rows}


async def report(
    args: argparse.Namespace,
    db: Any,
    redis: Any,
    wire: Any,
    submitted: dict[str, float],
    t0: float,
    end: float,
    peak: dict[str, int],
    effects_key: str,
) -> dict[str, Any]:
    """Read every run back and count what went wrong."""
    answer = expected_answer(args.turns, args.calls)
    floor_s = (args.turns + 1) * args.latency_ms / 1000
    effects: dict[str, str] = await redis.hgetall(effects_key)
    per_run: dict[str, int] = {}
    for key in effects:
        run_id = key.rsplit(":", 1)[0]
        per_run[run_id] = per_run.get(run_id, 0) + 1
    duplicated = sum(1 for count in effects.values() if int(count) > 1)
    executions: dict[str, str] = await redis.hgetall(f"{effects_key}:runs")
    reexecuted = sum(1 for count in executions.values() if int(count) > 1)
    lost = wrong = turns = unknown = lost_effects = 0
    latency: list[float] = []
    overhead: list[float] = []
    taken_over: list[float] = []
    grants = await lease_grants(db.schema)
    for run_id, at in submitted.items():
        snap = await db.load(run_id)
        if snap is None or snap.info.status != "completed":
            lost += 1
            continue
        turns += snap.info.turns
        cut = sum(  # calls a crash cut: the model was told their outcome is unknown
            1
            for r in snap.records
            if r.kind == "entries" and "outcome of this tool call is unknown" in str(r.data)
        )
        unknown += cut
        lost_effects += max(0, args.turns * args.calls - per_run.get(run_id, 0) - cut)
        output = (snap.result or {}).get("output")
        wrong += output != answer
        ended = snap.info.ended_at or end
        if grants.get(run_id, 0) > 1:  # a second worker took the run over
            taken_over.append(ended - at)
            continue
        latency.append(ended - at)
        overhead.append(ended - snap.info.started_at - floor_s)
    dead = await redis.xlen(f"{effects_key.rsplit(':', 1)[0]}:dead")
    return {
        "runs": args.runs,
        "hosts": args.hosts,
        "concurrency_per_host": args.concurrency,
        "pool_max": args.pool_max,
        "budget": args.budget,
        "kills": args.kills,
        "model_latency_ms": args.latency_ms,
        "turns_per_run": args.turns + 1,
        "wall_s": round(end - t0, 2),
        "runs_per_s": round(args.runs / (end - t0), 1),
        "queued_latency_p50_s": round(pct(latency, 0.5), 3),
        "queued_latency_p99_s": round(pct(latency, 0.99), 3),
        "run_overhead_p50_s": round(pct(overhead, 0.5), 3),
        "run_overhead_p99_s": round(pct(overhead, 0.99), 3),
        "taken_over_runs": len(taken_over),
        "taken_over_latency_p99_s": round(pct(taken_over, 0.99), 3),
        "peak_server_connections": peak.get("server", 0),
        "peak_client_connections": wire.peak_open,
        "round_trips": wire.round_trips,
        "round_trips_per_turn": round(wire.round_trips / max(turns, 1), 2),
        "lost_runs": lost,
        "tool": args.tool,
        "duplicated_effects": duplicated,
        "lost_effects": lost_effects,
        "tool_reexecutions": reexecuted,
        "unknown_outcomes": unknown,
        "wrong_answers": wrong,
        "dead_letters": dead,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="200 runs, 3 hosts, 2 kills")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=16, help="runs in flight per host")
    parser.add_argument("--pool-max", type=int, default=4, help="connections per host")
    parser.add_argument("--budget", type=int, default=100, help="PgBouncer server connections")
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--turns", type=int, default=2, help="tool turns per run (T)")
    parser.add_argument("--calls", type=int, default=1, help="parallel calls per turn (C)")
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--tool", choices=("idempotent", "plain"), default="idempotent")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--keep", action="store_true", help="keep the schema afterwards")
    args = parser.parse_args()
    if args.worker:
        worker_main()
        return
    if args.quick:
        args.runs, args.hosts, args.kills = 200, 3, 2
    print(json.dumps(asyncio.run(bench(args)), indent=2))


if __name__ == "__main__":
    main()
