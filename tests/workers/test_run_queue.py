"""The Redis Streams task queue with in-process workers: every run exactly once, duplicate
deliveries replayed from the store, unknown agents and held leases handled."""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from typing import Any

import pytest
from worker_helpers import Start, counting_agent, eventually

from lovia import Agent, tool
from lovia.errors import UserError
from lovia.stores import store
from lovia.testing import FunctionModel, ScriptedModel, call
from lovia.workers import RunQueue, Worker


async def test_twenty_runs_on_two_workers_run_once_each(
    queue: RunQueue, store_file: str, start: Start
) -> None:
    counts: Counter[str] = Counter()
    agent = counting_agent(counts)
    db = store(store_file)
    workers = [
        Worker(queue, {"counter": agent}, store_file, name="w1", concurrency=4),
        Worker(queue, {"counter": agent}, db, name="w2", concurrency=4),
    ]
    run_ids = [
        await queue.submit("counter", f"task {i}", session_id=f"s{i % 3}") for i in range(20)
    ]
    for w in workers:
        start(w)
    snaps = await asyncio.gather(*(queue.result(r, db, timeout_s=30) for r in run_ids))

    assert [s.info.status for s in snaps] == ["completed"] * 20
    assert counts == Counter({f"task {i}": 1 for i in range(20)}), "a tool ran twice"
    assert snaps[7].result is not None
    assert snaps[7].result["output"] == "done: bumped task 7"
    await eventually(lambda: sum(w.stats["completed"] for w in workers) == 20)
    assert await queue.pending() == 0
    segments = {e.run_id for k in range(3) for e in await db.load_session(f"s{k}")}
    assert segments == set(run_ids), "one session segment per run"
    await db.aclose()


async def test_resubmitted_completed_run_is_acked_without_a_model_call(
    queue: RunQueue, store_file: str, start: Start
) -> None:
    counts: Counter[str] = Counter()
    first = Worker(queue, {"counter": counting_agent(counts)}, store_file, concurrency=1)
    stop = asyncio.Event()
    task = asyncio.create_task(first.run(stop))
    run_id = await queue.submit("counter", "once", run_id="fixed-id", session_id="s")
    assert run_id == "fixed-id"
    await queue.result(run_id, store_file)
    stop.set()
    await task

    silent = ScriptedModel([])  # any model call would fail the run
    again = Agent(name="counter", model=silent, tools=[counting_agent(counts).tools[0]])
    second = Worker(queue, {"counter": again}, store_file)
    start(second)
    await queue.submit("counter", "once", run_id="fixed-id", session_id="s")
    await eventually(lambda: second.stats["replayed"] == 1)
    assert silent.requests == []
    assert counts["once"] == 1
    await eventually(lambda: _zero(queue))  # the ack follows the run's end
    db = store(store_file)
    assert len({e.run_id for e in await db.load_session("s")}) == 1
    await db.aclose()


async def test_unknown_agent_is_acked_and_recorded_as_failed(
    queue: RunQueue, store_file: str, start: Start
) -> None:
    worker = Worker(queue, {"counter": counting_agent(Counter())}, store_file)
    start(worker)
    run_id = await queue.submit("nobody", "hello")
    snap = await queue.result(run_id, store_file, timeout_s=10)
    assert snap.info.status == "failed"
    assert snap.info.error_type == "UnknownAgent"
    await eventually(lambda: worker.stats["unknown_agent"] == 1)
    await eventually(lambda: _zero(queue))


async def _zero(queue: RunQueue) -> bool:
    return await queue.pending() == 0


async def test_held_lease_is_not_acked_and_is_retried_later(
    queue: RunQueue, store_file: str, start: Start
) -> None:
    counts: Counter[str] = Counter()
    db = store(store_file)
    await db.acquire("busy-run", "elsewhere:1:abcd", 60)  # a live worker on another host
    worker = Worker(queue, {"counter": counting_agent(counts)}, db, claim_idle_s=0.3)
    start(worker)
    await queue.submit("counter", "later", run_id="busy-run")
    await eventually(lambda: worker.stats["lease_held"] >= 1)
    assert await queue.pending() == 1, "a run held elsewhere must stay pending"
    assert counts["later"] == 0

    await db.release("busy-run", "elsewhere:1:abcd")  # that worker is done with it
    snap = await queue.result("busy-run", db, timeout_s=10)
    assert snap.info.status == "completed"
    await eventually(lambda: _zero(queue))
    assert worker.stats["completed"] == 1 and counts["later"] == 1
    await db.aclose()


async def test_a_run_fenced_out_mid_run_stays_pending_and_is_resumed_later(
    queue: RunQueue, store_file: str, start: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker froze past its lease mid-tool and another took the run: LeaseLost is
    not a failure; the task stays pending, and once the other worker lets go it is
    resumed without re-running the frozen (non-idempotent) call."""
    monkeypatch.setenv("LOVIA_LEASE_TTL_S", "0.3")
    db = store(store_file)
    effects: list[int] = []

    @tool
    async def pay(n: int) -> str:
        """Pay an invoice (not idempotent)."""
        effects.append(n)
        if len(effects) == 1:
            time.sleep(0.5)  # frozen past the lease; meanwhile another worker takes the run
            assert await db.acquire("fenced-run", "elsewhere:1:abcd", 60) is not None
        return "paid"

    def decide(request: Any, info: Any) -> Any:
        if not any(m.type == "tool_result" for m in request.messages):
            return call("pay", n=1)
        return "done"

    agent = Agent(name="payer", model=FunctionModel(decide), tools=[pay])
    worker = Worker(queue, {"payer": agent}, db, claim_idle_s=0.3)
    start(worker)
    await queue.submit("payer", "pay it", run_id="fenced-run")
    await eventually(lambda: worker.stats["lease_held"] >= 1)
    assert await queue.pending() == 1 and worker.stats["failed"] == 0
    snap = await db.load("fenced-run")
    assert snap is not None and snap.info.status == "running"  # not marked failed

    await db.release("fenced-run", "elsewhere:1:abcd")
    snap = await queue.result("fenced-run", db, timeout_s=10)
    assert snap.info.status == "completed"
    assert effects == [1]  # the frozen call's outcome is unknown: not paid twice
    await eventually(lambda: _zero(queue))
    await db.aclose()


async def test_a_task_that_never_gets_through_is_dead_lettered(
    queue: RunQueue, store_file: str, start: Start
) -> None:
    counts: Counter[str] = Counter()
    db = store(store_file)
    await db.acquire("stuck-run", "elsewhere:1:abcd", 600)  # held by a live worker elsewhere
    worker = Worker(
        queue, {"counter": counting_agent(counts)}, db, claim_idle_s=0.2, max_deliveries=2
    )
    start(worker)
    await queue.submit("counter", "never", run_id="stuck-run")
    await eventually(lambda: worker.stats["dead_lettered"] == 1)
    assert await queue.pending() == 0, "dead-lettered tasks are acknowledged"
    dead: Any = await queue.client.xrange(f"{queue.stream}:dead")
    assert len(dead) == 1
    assert int(dead[0][1]["deliveries"]) == 3 and "stuck-run" in dead[0][1]["task"]
    assert counts["never"] == 0  # the model was never called: the run stays resumable
    await db.aclose()


async def test_shutdown_cancels_slow_runs_and_hands_them_back(
    queue: RunQueue, store_file: str, start: Start
) -> None:
    started = asyncio.Event()

    @tool
    async def slow(n: int) -> str:
        """Take a long time."""
        started.set()
        await asyncio.sleep(30)
        return "slow"

    def decide(request: Any, info: Any) -> Any:
        if not any(m.type == "tool_result" for m in request.messages):
            return call("slow", n=1)
        return "finished"

    slow_agent = Agent(name="slow", model=FunctionModel(decide), tools=[slow])
    first = Worker(queue, {"slow": slow_agent}, store_file, drain_timeout_s=0.2)
    stop = asyncio.Event()
    task = asyncio.create_task(first.run(stop))
    run_id = await queue.submit("slow", "go")
    await asyncio.wait_for(started.wait(), 10)
    stop.set()
    await asyncio.wait_for(task, 10)
    assert first.stats["cancelled"] == 1 and first.stats["requeued"] == 1

    quick = FunctionModel(lambda request, info: "finished")
    second = Worker(queue, {"slow": Agent(name="slow", model=quick, tools=[slow])}, store_file)
    start(second)
    snap = await queue.result(run_id, store_file, timeout_s=10)
    assert snap.info.status == "completed"
    await eventually(lambda: second.stats["completed"] == 1)
    await eventually(lambda: _zero(queue))


def test_missing_redis_package_is_a_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    monkeypatch.setitem(sys.modules, "redis.asyncio", None)
    with pytest.raises(UserError) as info:
        _ = RunQueue().client
    assert "lovia[redis]" in (info.value.hint or "")
