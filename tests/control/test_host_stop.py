"""A run inside a host engine (DBOS, Temporal, any task owner) is stopped by the host's
own control flow. That flow passes through tool execution (the model never sees it as a
tool error) and the run ends *cancelled* in the store — never ``failed``, never left
``running`` — while the host's exception goes on to the host."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from lovia import Agent, Runner, tool
from lovia.stores import MemoryStore
from lovia.stores.records import AttemptRecord, read_records
from lovia.testing import ScriptedModel, call, reply

pytestmark = pytest.mark.lovia_unconsumed  # every run here is stopped before its script ends


class EngineStop(BaseException):
    """A host's control-flow exception (not an Exception, as DBOS's and Temporal's are)."""


async def _stopped(store: MemoryStore, run_id: str, cancelled_by: str) -> None:
    snap = await store.load(run_id)
    assert snap is not None
    assert (snap.info.status, snap.info.finish_reason, snap.info.error_type) == (
        "cancelled",
        "cancelled",
        "RunCancelled",
    )
    assert snap.info.extra["cancelled_by"] == cancelled_by
    assert snap.info.extra["error"].startswith(f"run {run_id} was stopped by its host at turn 1")
    results = [e for e in snap.entries() if e.type == "tool_result"]
    assert results == []  # the model never got the host's exception as a tool result


def _agent(raised: BaseException, answer: str = "x") -> Agent[Any, Any]:
    @tool
    async def pay(amount: int) -> str:
        """Pay (not idempotent)."""
        raise raised

    model = ScriptedModel([call("pay", amount=3, id="c1"), answer])
    return Agent(name="payer", model=model, tools=[pay])


async def test_a_base_exception_from_a_tool_ends_the_run_cancelled_and_reaches_the_host() -> None:
    store = MemoryStore()
    with pytest.raises(EngineStop):
        await Runner.run(_agent(EngineStop()), "go", run_id="h1", checkpointer=store)
    await _stopped(store, "h1", "host: EngineStop")


async def test_dbos_workflow_cancellation_passes_through_a_tool() -> None:
    dbos_error = pytest.importorskip("dbos._error")
    store = MemoryStore()
    stop = dbos_error.DBOSWorkflowCancelledError("workflow wf1 is cancelled")
    with pytest.raises(dbos_error.DBOSWorkflowCancelledError):
        await Runner.run(_agent(stop), "go", run_id="h2", checkpointer=store)
    await _stopped(store, "h2", "host: DBOSWorkflowCancelledError")


async def test_temporal_cancellation_is_an_exception_yet_never_a_tool_error() -> None:
    exceptions = pytest.importorskip("temporalio.exceptions")
    store = MemoryStore()
    with pytest.raises(exceptions.CancelledError):
        await Runner.run(
            _agent(exceptions.CancelledError("activity cancelled")),
            "go",
            run_id="h3",
            checkpointer=store,
        )
    await _stopped(store, "h3", "host: CancelledError")


async def test_an_ordinary_exception_is_still_a_tool_error_the_model_sees() -> None:
    store = MemoryStore()
    agent = _agent(RuntimeError("card declined"), answer="sorry")
    result = await Runner.run(agent, "go", run_id="h4", checkpointer=store)
    assert result.output == "sorry"
    (res,) = [e for e in result.entries if e.type == "tool_result"]
    assert res.is_error and "card declined" in res.content


async def _cancel_when(started: asyncio.Event, task: asyncio.Task[Any]) -> None:
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()


async def test_a_task_cancelled_during_an_async_tool_ends_cancelled_and_resumes() -> None:
    store = MemoryStore()
    started = asyncio.Event()
    runs: list[int] = []

    @tool
    async def wait_for_bank(amount: int) -> str:
        """Wait for the bank (not idempotent)."""
        runs.append(amount)
        started.set()
        await asyncio.sleep(60)
        return "paid"

    model = ScriptedModel([call("wait_for_bank", amount=7, id="c1"), "checked"])
    agent = Agent(name="payer", model=model, tools=[wait_for_bank])
    task = asyncio.ensure_future(Runner.run(agent, "go", run_id="h5", checkpointer=store))
    await _cancel_when(started, task)
    with pytest.raises(asyncio.CancelledError):
        await task
    await _stopped(store, "h5", "host: CancelledError")
    # resumable: the engine's recovery runs it again; the cut call is reported unknown
    result = await Runner.run(agent, None, run_id="h5", checkpointer=store)
    assert result.output == "checked" and runs == [7]
    (res,) = [e for e in result.entries if e.type == "tool_result"]
    assert res.is_error and "unknown" in res.content
    snap = await store.load("h5")
    assert snap is not None
    attempts = [r for r in read_records(snap, ("attempt",)) if isinstance(r, AttemptRecord)]
    assert [(a.attempt, a.previous) for a in attempts] == [(1, None), (2, "cancelled")]


async def test_a_task_cancelled_during_a_sync_tool_records_the_tools_outcome() -> None:
    store = MemoryStore()
    started = threading.Event()
    done: list[str] = []

    @tool
    def ship(order: str) -> str:
        """Ship an order (a thread cannot be stopped: its outcome is recorded)."""
        started.set()
        time.sleep(0.3)
        done.append(order)
        return f"shipped {order}"

    model = ScriptedModel([call("ship", order="o1", id="c1"), "never"])
    agent = Agent(name="shipper", model=model, tools=[ship])
    task = asyncio.ensure_future(Runner.run(agent, "go", run_id="h6", checkpointer=store))
    await asyncio.to_thread(started.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert done == ["o1"]
    snap = await store.load("h6")
    assert snap is not None and snap.info.status == "cancelled"
    (res,) = [e for e in snap.entries() if e.type == "tool_result"]
    assert (res.content, res.is_error) == ("shipped o1", False)


async def test_a_task_cancelled_during_a_model_call_ends_cancelled() -> None:
    store = MemoryStore()
    agent = Agent(name="slow", model=ScriptedModel([reply("late", delay=60)]))
    task = asyncio.ensure_future(Runner.run(agent, "go", run_id="h7", checkpointer=store))
    for _ in range(200):  # until the model call is in flight (the run row exists)
        await asyncio.sleep(0.01)
        snap = await store.load("h7")
        if snap is not None:
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    snap = await store.load("h7")
    assert snap is not None
    assert (snap.info.status, snap.info.extra["cancelled_by"]) == (
        "cancelled",
        "host: CancelledError",
    )
    assert await store.lease_holder("h7") is None  # released: a resume need not wait


async def test_a_cancelled_error_raised_by_code_is_not_a_host_stop() -> None:
    """Not a task.cancel(): the process is treated as dying (the run stays resumable as
    it was, ``running``), as the crash simulations rely on."""
    store = MemoryStore()

    @tool
    async def die() -> str:
        """Simulate the worker dying."""
        raise asyncio.CancelledError

    agent = Agent(name="d", model=ScriptedModel([call("die", id="c1"), "x"]), tools=[die])
    with pytest.raises(asyncio.CancelledError):
        await Runner.run(agent, "go", run_id="h8", checkpointer=store)
    snap = await store.load("h8")
    assert snap is not None and snap.info.status == "running"
