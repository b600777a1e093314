"""What only the Celery back-end has: cancellation by ``run_id`` across worker processes,
the submitter's trace context carried into the run, clear errors for bad setup, and
the sweep re-queueing a run with the ``deps_key`` stored with it."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import signal
import sys
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import celery
import pytest
from conformance_harness import Harness
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import lovia._loop as loop_module
from lovia import Agent, tool
from lovia.errors import UserError
from lovia.integrations.celery import CeleryRunQueue
from lovia.integrations.celery._ops import sweep
from lovia.integrations.celery._process import process_loop
from lovia.integrations.celery._task import run_delivery
from lovia.stores.base import RunInfo
from lovia.telemetry import tracer as tracer_module
from lovia.testing import FunctionModel, call

CELERY_ONLY = pytest.mark.parametrize("harness", ["celery-rabbitmq"], indirect=True)


async def _eventually(check: Any, timeout_s: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not check():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.1)


@CELERY_ONLY
@pytest.mark.slow
async def test_cancel_reaches_the_worker_running_the_run_and_drops_a_queued_one(
    harness: Harness,
) -> None:
    backend: Any = await harness.backend()
    runs: CeleryRunQueue = backend.runs
    backend.start_worker("one", concurrency=1)
    backend.start_worker("two", concurrency=1)
    await backend.submit("slow-a", "add them up", "s-slow-a")
    await backend.submit("slow-b", "add them up", "s-slow-b")
    await _eventually(lambda: sorted(harness.lines("started.log")) == ["slow-a", "slow-b"])
    await backend.submit("slow-c", "add them up", "s-slow-c")  # queued: both workers busy

    held = await asyncio.to_thread(runs.cancel, "slow-c", "not needed")
    assert held == [], "no worker runs slow-c yet: each one holds the cancel"
    running = await asyncio.to_thread(runs.cancel, "slow-a", "user pressed stop")
    workers = {f"one-{backend.tag}", f"two-{backend.tag}"}
    assert len(running) == 1 and running[0].split("@")[0] in workers, running
    snap = await backend.result("slow-a", 20)
    assert (snap.info.status, snap.info.finish_reason) == ("cancelled", "cancelled")
    assert snap.info.extra["cancelled_by"] == "user pressed stop"

    # the freed worker takes slow-c and drops it: cancelled before it started; the cancel
    # is stored on the run, so no worker (even one started later) ever starts it
    await asyncio.sleep(1.0)
    assert "slow-c" not in harness.lines("started.log")
    queued = await harness.db.load("slow-c")
    assert queued is not None and queued.records == []
    assert (queued.info.status, queued.info.extra["cancelled_by"]) == ("cancelled", "not needed")
    assert queued.info.extra["cancel_requested"]["reason"] == "not needed"
    assert await harness.db.load("slow-b") is not None  # the other worker's run goes on
    assert (await harness.db.load("slow-b")).info.status == "running"  # type: ignore[union-attr]
    assert len(await asyncio.to_thread(runs.cancel, "slow-b")) == 1  # so the workers stop now
    snap = await backend.result("slow-b", 20)
    assert snap.info.finish_reason == "cancelled"


@CELERY_ONLY
async def test_a_run_on_a_celery_worker_joins_the_submitters_trace(harness: Harness) -> None:
    backend: Any = await harness.backend()
    backend.start_worker("traced")
    with TracerProvider().get_tracer("test").start_as_current_span("POST /reports") as parent:
        await backend.submit("traced-run", "add them up", "s-traced")  # context goes along
    snap = await backend.result("traced-run", 30)
    assert snap.info.status == "completed"
    assert snap.info.trace_id == f"{parent.get_span_context().trace_id:032x}"
    assert snap.info.span_id != f"{parent.get_span_context().span_id:016x}"


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TracerProvider, Any]]:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    real = tracer_module.make_run_tracer
    monkeypatch.setattr(
        loop_module, "make_run_tracer", lambda tp=None, mp=None: real(tp or provider, mp)
    )
    yield provider, exporter
    provider.shutdown()


@tool
def double(n: int) -> int:
    """Double a number."""
    return 2 * n


def _decide(request: Any, info: Any) -> Any:
    last = request.messages[-1]
    return call("double", n=21) if last.type == "input" else f"got {last.content}"


doubler = Agent(name="doubler", model=FunctionModel(_decide), tools=[double])


def _eager_queue() -> CeleryRunQueue:
    app = celery.Celery("lovia-eager-test")
    app.conf.task_always_eager = True  # the task runs in this process, through the same body
    return CeleryRunQueue(app, "memory://celery-otel", agents=[f"{__name__}:doubler"])


def test_the_run_span_is_a_child_of_the_submitting_span(
    spans: tuple[TracerProvider, Any],
) -> None:
    provider, exporter = spans
    queue = _eager_queue()
    sent: list[dict[str, Any]] = []
    queue.task.apply_async = lambda kwargs, **_: sent.append(kwargs)  # the message, not run
    with provider.get_tracer("test").start_as_current_span("POST /reports") as parent:
        run_id = queue.submit(f"{__name__}:doubler", "double 21")
    queue.task.apply(kwargs=sent[0], task_id=run_id)  # as a worker runs it: another context
    snap = queue.get(run_id, timeout_s=10)
    assert snap.result is not None and snap.result["output"] == "got 42"
    run_span = next(s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent"))
    assert run_span.parent is not None
    assert run_span.parent.span_id == parent.get_span_context().span_id
    assert run_span.context.trace_id == parent.get_span_context().trace_id


def test_an_agent_object_instead_of_an_import_path_is_a_user_error() -> None:
    queue = _eager_queue()
    with pytest.raises(UserError) as info:
        queue.submit(doubler, "hi")  # type: ignore[arg-type]
    assert "registered name" in str(info.value) and f"{__name__}:doubler" in (info.value.hint or "")


def test_a_registered_path_that_does_not_import_is_a_failed_run() -> None:
    app = celery.Celery("lovia-eager-test")
    app.conf.task_always_eager = True
    queue = CeleryRunQueue(app, "memory://celery-otel", agents={"gone": f"{__name__}:nobody"})
    run_id = queue.submit("gone", "hi")
    snap = queue.get(run_id, timeout_s=10)
    assert snap.info.status == "failed" and "cannot import" in snap.info.extra["error"]


def test_missing_celery_package_is_a_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m.startswith(("celery", "lovia.integrations.celery"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "celery", None)
    with pytest.raises(UserError) as info:
        import lovia.integrations.celery  # noqa: F401
    assert "lovia[celery]" in (info.value.hint or "")


class _Retry(Exception):
    pass


def test_a_run_held_by_a_lost_worker_is_retried_after_the_lease_ttl(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A shorter countdown would spend deliveries on RunLeaseHeld until the dead worker's
    lease expires, and dead-letter a healthy run (10 x 5 s < the 60 s default TTL)."""
    monkeypatch.setenv("LOVIA_LEASE_TTL_S", "45")
    queue = _eager_queue()
    db = process_loop().store(queue.settings.store)
    process_loop().call(db.acquire("held-run", "otherhost:1:abcd", 45))  # died elsewhere
    countdowns: list[float] = []

    def retry(countdown: float, max_retries: Any, **options: Any) -> _Retry:
        assert options == {"kwargs": {**kwargs, "last_error": "lease_held"}, "queue": None}
        countdowns.append(countdown)
        return _Retry()

    task = SimpleNamespace(request=SimpleNamespace(retries=0, delivery_info={}), retry=retry)
    kwargs = {"run_id": "held-run", "agent": f"{__name__}:doubler", "input": "hi"}
    with pytest.raises(_Retry):
        run_delivery(task, queue.settings, kwargs)
    assert countdowns == [55.0]


@CELERY_ONLY
@pytest.mark.slow
async def test_a_stalled_workers_run_is_taken_over_by_an_idle_worker(harness: Harness) -> None:
    """SIGSTOP a worker in the middle of a run: once its lease expired (5 s here), the idle
    worker's sweep finds the run interrupted in the store and re-queues it first; it
    completes there, the stalled worker's tool call is not run again, and the woken
    worker is fenced out (the run completes once)."""
    backend: Any = await harness.backend()
    stalled = backend.start_worker("stalled", concurrency=1)
    await backend.submit("stall-run", "add them up", "s-stall-run")
    await _eventually(lambda: harness.lines("started.log") == ["stall-run"])
    os.kill(stalled.pid, signal.SIGSTOP)
    stopped_at = time.monotonic()
    backend.start_worker("idle", concurrency=1)
    try:
        snap = await backend.result("stall-run", 40)
        took = time.monotonic() - stopped_at
    finally:
        os.kill(stalled.pid, signal.SIGCONT)
    assert snap.info.status == "completed"
    assert harness.lines("started.log") == ["stall-run"], "the stalled call is not run again"
    assert harness.lines("completed.log") == ["stall-run"]
    assert took < 25, f"taken over {took:.1f} s after the stall"
    print(f"\nstalled Celery worker's run completed by another worker {took:.1f} s after SIGSTOP")


def deps_for(deps_key: str | None) -> dict[str, str | None]:
    """The ``deps`` factory of the sweep test's queue."""
    return {"tenant": deps_key}


SECRET = "s3cr3t-tenant-token"


def test_the_sweep_requeues_with_the_stored_deps_key_and_dead_letters_a_bad_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Interrupted runs of a queue with a ``deps`` factory, as the store has them: the
    one with a good key is re-queued first with it; each hostile stored key (too long,
    a NUL, not a str) dead-letters its run without quoting it and without stopping the
    sweep; a run without a stored key is left to the broker."""
    caplog.set_level(logging.INFO)
    app = celery.Celery("lovia-sweep-test", broker="memory://")
    url = f"memory://celery-sweep-{secrets.token_hex(4)}"
    name = f"lovia.sweep.{secrets.token_hex(4)}"  # the memory broker is shared in-process
    queue = CeleryRunQueue(
        app, url, agents=[f"{__name__}:doubler"], deps=f"{__name__}:deps_for", queue=name
    )
    proc = process_loop()
    db = proc.store(url)
    stored: dict[str, dict[str, Any]] = {
        "long": {"deps_key": SECRET * 20},
        "good": {"deps_key": "tenant-7"},
        "nul": {"deps_key": f"{SECRET}\x00"},
        "number": {"deps_key": 42},
        "unknown": {},
    }
    for run_id, extra in stored.items():
        info = RunInfo(run_id=run_id, agent="doubler", status="running", started_at=time.time())
        info.extra = {"first_agent": "doubler", **extra}
        proc.call(db.begin(info))
    sent: list[tuple[dict[str, Any], dict[str, Any]]] = []
    queue.task.apply_async = lambda kwargs, **options: sent.append((kwargs, options))

    assert proc.call(sweep(queue, proc, "sweeper")) == ["good"]
    kwargs = {"run_id": "good", "agent": f"{__name__}:doubler", "input": None, "otel": {},
              "session_id": None, "deps_key": "tenant-7"}  # fmt: skip
    assert sent == [(kwargs, {"task_id": "good", "queue": f"{name}.front"})]
    said = {"long": "is 380 characters long", "nul": "control character", "number": "got int"}
    for run_id, why in said.items():
        snap = proc.call(db.load(run_id))
        assert snap is not None and snap.info.error_type == "DeadLettered"
        mark = snap.info.extra["dead_letter"]
        assert mark["reason"] == "bad_deps_key"
        assert mark["last_error"].startswith("stored deps_key") and why in mark["last_error"]
    dead = queue.dead_letters()
    assert sorted((d["run_id"], d["reason"], d["deps_key"]) for d in dead) == [
        (r, "bad_deps_key", None) for r in sorted(said)
    ]
    unknown = proc.call(db.load("unknown"))
    assert unknown is not None and unknown.info.status == "running", "left to the broker"
    assert proc.call(sweep(queue, proc, "another")) == [], "each run handled once"
    assert "run long: dead-lettered" in caplog.text  # the sweep's logs were captured
    assert SECRET not in caplog.text and SECRET not in json.dumps(dead)


built: list[Any] = []


def recording_deps(deps_key: str | None) -> str | None:
    built.append(deps_key)
    return deps_key


def test_a_delivery_with_a_hostile_deps_key_is_dead_lettered_unbuilt() -> None:
    """A task published by anyone with a bad key: the factory is never called, the run
    is dead-lettered (``bad_deps_key``) at once, not retried."""
    built.clear()
    app = celery.Celery("lovia-deps-test", broker="memory://")
    url = f"memory://celery-deps-{secrets.token_hex(4)}"
    queue = CeleryRunQueue(
        app,
        url,
        agents=[f"{__name__}:doubler"],
        deps=f"{__name__}:recording_deps",
        queue=f"lovia.deps.{secrets.token_hex(4)}",  # the memory broker is shared in-process
    )
    task = SimpleNamespace(app=app, request=SimpleNamespace(retries=0, delivery_info={}))
    kwargs = {"run_id": "hostile", "agent": f"{__name__}:doubler", "input": "hi",
              "deps_key": SECRET * 20}  # fmt: skip
    assert run_delivery(task, queue.settings, kwargs) == "dead_lettered"
    snap = process_loop().call(process_loop().store(url).load("hostile"))
    assert snap is not None and snap.info.extra["dead_letter"]["reason"] == "bad_deps_key"
    assert "deps_key is 380 characters long" in snap.info.extra["dead_letter"]["last_error"]
    assert built == [] and snap.records == []
    good = {**kwargs, "run_id": "fine", "deps_key": "tenant-7"}
    assert run_delivery(task, queue.settings, good) == "completed"
    assert built == ["tenant-7"]
