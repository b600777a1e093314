"""One failover suite, every queue back-end: Redis Streams (``lovia.workers``) and Celery
on RabbitMQ (``lovia.integrations.celery``), with real worker processes and real model
calls to the bench fake server.

- 50 runs; one worker SIGKILLed inside a tool, one in the middle of a model call; a fresh
  worker finishes: 50/50 complete, no tool side effect twice, one session segment per
  run, no run completed twice.
- a run no delivery can get through (its lease is held elsewhere) is dead-lettered
  after ``max_deliveries`` deliveries, with the model never called; so is a run that
  SIGKILLs every worker it reaches (a redelivery after a lost worker counts);
- submitting a completed ``run_id`` again changes nothing: no model call, no tool, no
  second completion or session segment.
- a run of a queue with a ``deps`` factory whose worker stalls is re-queued by another
  worker's sweep and completes there, its ``deps_key`` (read from the store on Celery)
  reaching that worker's factory again.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conformance_harness import Harness

from lovia.stores.lifecycle import life_of

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "drivers"))
from _common import expected_answer

pytestmark = pytest.mark.slow

RUNS = 50


async def _killed(proc: subprocess.Popen[bytes], timeout_s: float) -> int | None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while proc.poll() is None and loop.time() < deadline:
        await asyncio.sleep(0.1)
    return proc.poll()


async def _session_segments(h: Harness, run_id: str) -> Counter[str]:
    """Input entries per run in the run's session: exactly {run_id: 1} when one segment."""
    history = await h.db.load_session(f"s-{run_id}")
    return Counter(e.run_id for e in history if e.type == "input")


# The test's own bounds (60 s for the kills, 180 s for the results) decide, not the
# suite's 120 s default: a slow recovery then fails naming the runs still waiting.
@pytest.mark.timeout(300)
async def test_fifty_runs_survive_workers_killed_mid_tool_and_mid_model_call(
    harness: Harness,
) -> None:
    backend = await harness.backend()
    tag = secrets.token_hex(3)
    run_ids = [f"run-{i:02d}-{tag}" for i in range(RUNS)]
    run_ids[3] = f"die-in-tool-{tag}"
    inputs = dict.fromkeys(run_ids, "add them up")
    inputs[run_ids[6]] = "die-in-model: add them up"
    for run_id in run_ids:
        await backend.submit(run_id, inputs[run_id], f"s-{run_id}")

    first = [backend.start_worker("a"), backend.start_worker("b")]
    codes = [await _killed(p, 60) for p in first]
    assert codes == [-signal.SIGKILL] * 2, f"both workers die in a trap{harness_logs(backend)}"
    assert (harness.dir / "trap-tool").exists() and (harness.dir / "trap-model").exists()

    backend.start_worker("c")
    # Recovery normally takes seconds; the bound is generous because this test is about
    # nothing lost and nothing run twice, not latency. A run still waiting fails the test
    # with the workers' logs.
    t0 = time.monotonic()
    try:
        snaps = await asyncio.gather(*(backend.result(r, 180) for r in run_ids))
    except Exception as exc:
        raise AssertionError(f"{exc!r}{harness_logs(backend)}") from exc
    print(f"\n{backend.name}: 50 runs recovered {time.monotonic() - t0:.1f} s after the kills")

    assert [s.info.status for s in snaps] == ["completed"] * RUNS
    outputs = {s.info.run_id: s.result["output"] for s in snaps if s.result is not None}
    effects = Counter(harness.lines("tools.log"))
    assert [line for line, n in effects.items() if n > 1] == [], "a tool ran twice"
    per_run = Counter(line.split()[0] for line in effects)
    interrupted = {r for r in run_ids if outputs[r] != expected_answer(1, 2)}
    # a call in flight in a killed worker is not run again: the model is told its outcome
    # is unknown (the bench server then answers "sum=invalid(...)"); every other run's
    # two calls ran exactly once
    assert run_ids[3] in interrupted and run_ids[6] not in interrupted
    assert len(interrupted) <= 8, "at most the runs in flight in the two killed workers"
    assert all(outputs[r].startswith("sum=invalid") for r in interrupted)
    assert all(1 <= per_run[r] <= 2 for r in interrupted)
    assert all(per_run[r] == 2 for r in run_ids if r not in interrupted)
    completed = Counter(harness.lines("completed.log"))
    assert [r for r, n in completed.items() if n > 1] == [], "no run completed twice"
    assert set(completed) <= set(run_ids)
    # a worker SIGKILLed between a run's completion record and its RunCompleted hook (another
    # run of the same worker hit the trap) leaves that run completed in the store but not in
    # the log; the fresh worker then replays it (replayed=True, not logged). Only runs that
    # were in flight in the two killed workers can be missing.
    assert len(set(run_ids) - set(completed)) <= 8
    for run_id in run_ids:
        assert await _session_segments(harness, run_id) == Counter({run_id: 1})


async def test_a_poison_run_is_dead_lettered_after_max_deliveries(harness: Harness) -> None:
    backend = await harness.backend(max_deliveries=3, retry_s=0.3)
    poison = f"poison-{secrets.token_hex(3)}"
    assert await harness.db.acquire(poison, "elsewhere:1:abcd", 600)  # a live worker elsewhere
    backend.start_worker("w")
    await backend.submit(poison, "add them up", f"s-{poison}")

    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while poison not in (dead := await backend.dead_letters()):
        assert loop.time() < deadline, f"not dead-lettered{harness_logs(backend)}"
        await asyncio.sleep(0.2)
    assert dead[poison] >= 3, "dead-lettered only after max_deliveries deliveries"
    assert harness.model.requests() == 0 and harness.lines("tools.log") == []

    healthy = f"after-{poison}"  # the worker goes on serving other runs
    await backend.submit(healthy, "add them up", f"s-{healthy}")
    snap = await backend.result(healthy, 30)
    assert snap.info.status == "completed"
    assert list(await backend.dead_letters()) == [poison]


async def _deaths_until_dead_lettered(
    backend: Any, poison: str, *, concurrency: int, most: int
) -> int:
    """Start a fresh worker each time the poison run SIGKILLs one (at most ``most``) until
    it is dead-lettered; the number of workers it killed."""
    deaths = 0
    for n in range(most):
        worker = backend.start_worker(f"w{n}", concurrency=concurrency)
        while worker.poll() is None and poison not in await backend.dead_letters():
            await asyncio.sleep(0.2)
        if worker.poll() is None:
            break
        assert worker.returncode == -signal.SIGKILL, harness_logs(backend)
        deaths += 1
    return deaths


async def test_a_run_that_kills_every_worker_it_reaches_is_dead_lettered(
    harness: Harness,
) -> None:
    backend = await harness.backend(max_deliveries=2, retry_s=0.3)
    poison = f"crasher-{secrets.token_hex(3)}"
    await backend.submit(poison, "always-die: add them up", f"s-{poison}")
    deaths = await _deaths_until_dead_lettered(backend, poison, concurrency=1, most=5)
    assert poison in await backend.dead_letters(), f"never dead-lettered{harness_logs(backend)}"
    assert deaths == 2, "dead-lettered after max_deliveries deliveries, not before or later"
    assert harness.lines("tools.log") == []


async def test_a_run_that_kills_three_workers_is_dead_lettered_as_poison(
    harness: Harness,
) -> None:
    """Lost workers are counted from the store's attempts, not from deliveries: the third
    lost worker dead-letters the run (reason ``poison``), however many deliveries its
    lease made it wait, and the store shows it ``dead_lettered`` with the count."""
    backend = await harness.backend(max_deliveries=100, retry_s=0.5)
    poison = f"crasher-{secrets.token_hex(3)}"
    await backend.submit(poison, "always-die: add them up", f"s-{poison}")
    started = time.monotonic()
    deaths = await _deaths_until_dead_lettered(backend, poison, concurrency=2, most=6)
    took = time.monotonic() - started
    assert deaths == 3, f"dead-lettered at the third lost worker{harness_logs(backend)}"
    snap = await harness.db.load(poison)
    assert snap is not None
    life = await life_of(harness.db, snap.info, snap)
    dead = snap.info.extra["dead_letter"]
    assert (life.state, snap.info.error_type) == ("dead_lettered", "DeadLettered")
    assert (dead["kills"], dead["reason"]) == (3, "poison")
    assert "lost (killed or stalled) in 3 attempts" in dead["last_error"]
    assert harness.lines("tools.log") == []
    print(f"\n{backend.name}: poison run dead-lettered {took:.1f} s after submit (TTL 5 s)")


async def test_a_duplicate_submit_of_a_run_id_is_a_no_op(harness: Harness) -> None:
    backend = await harness.backend()
    backend.start_worker("solo", concurrency=1)
    run_id = f"dup-{secrets.token_hex(3)}"
    await backend.submit(run_id, "add them up", f"s-{run_id}")
    first = await backend.result(run_id, 30)
    assert first.info.status == "completed"
    requests, effects = harness.model.requests(), harness.lines("tools.log")

    await backend.submit(run_id, "add them up", f"s-{run_id}")
    sentinel = f"{run_id}-next"  # one worker, one run at a time: the duplicate went first
    await backend.submit(sentinel, "add them up", f"s-{sentinel}")
    assert (await backend.result(sentinel, 30)).info.status == "completed"

    assert harness.model.requests() == requests + 2, "only the sentinel called the model"
    assert [e for e in harness.lines("tools.log") if e.startswith(f"{run_id} ")] == [
        e for e in effects if e.startswith(f"{run_id} ")
    ]
    assert harness.lines("completed.log").count(run_id) == 1
    assert await _session_segments(harness, run_id) == Counter({run_id: 1})
    again = await backend.result(run_id, 5)
    assert again.result == first.result


def harness_logs(backend: object) -> str:
    logs = getattr(backend, "logs", None)
    return "\n" + logs() if callable(logs) else ""


async def test_a_swept_run_keeps_its_deps_key(harness: Harness) -> None:
    """SIGSTOP a worker of a queue with a ``deps`` factory in the middle of a run: the
    broker keeps the run's message with the stopped worker (and Redis' take-over waits
    60 s here), so only the sweep recovers it once its lease expired (5 s). The run is
    stored with its deps key and completes on the other worker, whose factory is given
    the same key."""
    backend = await harness.backend(retry_s=60.0)
    stalled = backend.start_worker("stalled", concurrency=1, deps=True)
    await backend.submit("stall-deps", "add them up", "s-stall-deps", deps_key="tenant-7")
    await _until(lambda: harness.lines("started.log") == ["stall-deps"], 20)
    os.kill(stalled.pid, signal.SIGSTOP)
    stopped_at = time.monotonic()
    backend.start_worker("sweeper", concurrency=1, deps=True)
    try:
        snap = await backend.result("stall-deps", 40)
        took = time.monotonic() - stopped_at
    finally:
        os.kill(stalled.pid, signal.SIGCONT)
    assert snap.info.status == "completed"
    assert snap.info.extra["deps_key"] == "tenant-7", "stored with the run"
    assert harness.lines("deps.log") == ["tenant-7", "tenant-7"], "both factories got the key"
    assert harness.lines("completed.log") == ["stall-deps"]
    assert took < 25, f"re-queued {took:.1f} s after the stall"
    print(f"\n{backend.name}: stalled run with a deps key completed {took:.1f} s after SIGSTOP")


async def _until(check: Any, timeout_s: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not check():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.1)
