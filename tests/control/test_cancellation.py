"""Cancellation: a CancelToken (passed in, or handle.cancel()) interrupts an in-flight model
stream or a running tool promptly, ends with RunFailed(RunCancelled), and leaves a
resumable checkpoint. The failure these tests guard against is a hang, so the bounds are
wall-clock and generous."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import pytest

from lovia import Agent, CancelToken, RunCancelled, RunContext, Runner, events, tool
from lovia.stores import MemoryStore
from lovia.testing import ScriptedModel, call, reply

from .helpers import Scenario, both, stream_mode

BOUND_S = 2.0
CANCEL_AFTER_S = 0.1


def make_tools(log: list[str]) -> list[Any]:
    @tool
    async def quick(n: int) -> str:
        """Fast."""
        log.append(f"quick {n}")
        return f"quick {n}"

    @tool
    async def forever() -> str:
        """Takes a minute."""
        log.append("forever started")
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            log.append("forever cancelled")
            raise
        return "never"

    return [quick, forever]


def cancelling(steps: list[Any], run_id: str, **extra: Any) -> Scenario:
    log: list[str] = []
    token = CancelToken()
    store = MemoryStore()
    model = ScriptedModel(steps)
    agent = Agent(name="worker", model=model, tools=make_tools(log))
    asyncio.get_running_loop().call_later(CANCEL_AFTER_S, token.cancel, "user pressed stop")
    return Scenario(
        agent,
        "go",
        {"cancel_token": token, "checkpointer": store, "run_id": run_id, **extra},
        extra={"log": log, "store": store, "t0": time.monotonic()},
    )


def assert_cancelled(out: Any) -> None:
    elapsed = time.monotonic() - out.scenario.extra["t0"]
    assert elapsed < CANCEL_AFTER_S + BOUND_S, f"the run took {elapsed:.1f}s to stop"
    err = out.error
    assert isinstance(err, RunCancelled), err
    assert "user pressed stop" in err.message
    assert err.finish_reason == "cancelled"
    failed = out.events[-1]
    assert isinstance(failed, events.RunFailed)
    assert failed.error_type == "RunCancelled" and failed.finish_reason == "cancelled"


async def resume(out: Any, steps: list[Any]) -> Any:
    """Resubmit the run_id with a fresh model on the same store."""
    log: list[str] = []
    model = ScriptedModel(steps)
    agent = Agent(name="worker", model=model, tools=make_tools(log))
    result = await Runner.run(
        agent, None, run_id=out.scenario.options["run_id"], checkpointer=out.scenario.extra["store"]
    )
    return result, model, log


async def test_cancel_interrupts_an_in_flight_model_stream() -> None:
    a, b = await both(
        lambda: cancelling([call("quick", n=1), reply("slow answer", delay=60)], "r-model")
    )
    for out in (a, b):
        assert_cancelled(out)
        assert out.error.turn == 2
        assert out.scenario.extra["log"] == ["quick 1"]
        # partial work is kept: the checkpoint holds turn 1 and is not completed
        snap = await out.scenario.extra["store"].load("r-model")
        assert snap is not None and snap.info.status == "cancelled"  # not a failure
        assert snap.info.error_type == "RunCancelled"
        assert snap.info.extra["cancelled_by"] == "user pressed stop"
        result, model, log = await resume(out, ["finished"])
        assert result.output == "finished" and log == []  # the tool is not re-run
        assert [m.type for m in model.requests[0].messages] == ["input", "tool_call", "tool_result"]
        assert [e.type for e in result.entries] == [
            "system",
            "input",
            "tool_call",
            "tool_result",
            "text",
        ]
    assert b.types[-3:] == ["ModelCallStarted", "ModelCallFailed", "RunFailed"]


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_cancel_interrupts_a_running_tool() -> None:
    a, b = await both(lambda: cancelling([call("forever", id="f1"), "never"], "r-tool"))
    for out in (a, b):
        assert_cancelled(out)
        assert out.error.turn == 1
        assert out.scenario.extra["log"] == ["forever started", "forever cancelled"]
        # resuming: the tool is not idempotent, its outcome is unknown, so it is not re-run
        result, model, log = await resume(out, ["recovered"])
        assert result.output == "recovered" and log == []
        stub = model.requests[0].messages[-1]
        assert stub.type == "tool_result" and stub.is_error
        assert "unknown" in stub.content
    assert "ToolCallStarted" in b.types and "ToolCallCompleted" not in b.types


async def test_cancel_from_another_task_while_streaming_events() -> None:
    token = CancelToken()
    model = ScriptedModel([reply("x" * 400, chunk_delay=0.05)])
    handle = Runner.stream(Agent(name="a", model=model), "go", cancel_token=token)
    assert handle.cancel_token is token
    deltas = 0
    t0 = time.monotonic()
    async for event in handle:
        if isinstance(event, events.TextDelta):
            deltas += 1
            if deltas == 2:
                asyncio.get_running_loop().call_later(0.01, handle.cancel)
    assert time.monotonic() - t0 < BOUND_S
    assert deltas < 25  # not streamed to the end
    with pytest.raises(RunCancelled):
        await handle.result()


@pytest.mark.timeout(10)
async def test_consumer_cancel_inside_the_loop_interrupts_the_model() -> None:
    model = ScriptedModel([reply("late", delay=60)])
    handle = Runner.stream(Agent(name="a", model=model), "go")
    t0 = time.monotonic()

    async def consume() -> None:
        async for event in handle:
            if isinstance(event, events.ModelCallStarted):
                handle.cancel("stop")

    # wait_for bounds the hang; its own timeout is swallowed by the loop (the token is
    # cancelled, so the CancelledError becomes RunCancelled), hence the clock check
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(consume(), BOUND_S + 1)
    elapsed = time.monotonic() - t0
    await handle.aclose()
    assert elapsed < BOUND_S, f"the run took {elapsed:.1f}s to stop after the cancel"
    with pytest.raises(RunCancelled):
        await handle.result()


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_consumer_cancel_between_turns_is_seen_at_the_next_boundary() -> None:
    log: list[str] = []
    model = ScriptedModel([call("quick", n=1), "never"])
    agent = Agent(name="a", model=model, tools=make_tools(log))

    def stop(handle: Any, event: events.Event) -> None:
        if isinstance(event, events.ToolCallCompleted):
            handle.cancel("enough")

    out = await stream_mode(Scenario(agent, "go"), on_event=stop)
    assert isinstance(out.error, RunCancelled)
    assert len(model.requests) == 1 and log == ["quick 1"]
    assert "TurnEnded" not in out.types  # checked before the turn ends


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_cancel_from_inside_a_tool() -> None:
    @tool
    async def stop(ctx: RunContext[Any]) -> str:
        """Stop the run."""
        ctx.cancel_token.cancel("tool asked to stop")
        return "stopping"

    def make() -> Scenario:
        model = ScriptedModel([call("stop"), "never"])
        return Scenario(Agent(name="a", model=model, tools=[stop]), "go", extra=model)

    a, b = await both(make)
    for out in (a, b):
        assert isinstance(out.error, RunCancelled)
        assert "tool asked to stop" in out.error.message
        assert len(out.scenario.extra.requests) == 1
    assert b.types[-2:] == ["ToolCallCompleted", "RunFailed"]  # the tool finished first


async def test_already_cancelled_token_never_calls_the_model() -> None:
    def make() -> Scenario:
        token = CancelToken()
        token.cancel("before start")
        model = ScriptedModel([])
        return Scenario(Agent(name="a", model=model), "go", {"cancel_token": token}, extra=model)

    a, b = await both(make)
    for out in (a, b):
        assert isinstance(out.error, RunCancelled) and out.error.turn == 0
        assert out.scenario.extra.requests == []
    assert "TurnStarted" not in b.types


async def test_outer_task_cancellation_is_not_swallowed() -> None:
    token = CancelToken()
    agent = Agent(name="a", model=ScriptedModel([reply("late", delay=60)]))

    async def go() -> None:
        with contextlib.suppress(RunCancelled):
            await Runner.run(agent, "go", cancel_token=token)

    task = asyncio.create_task(go())
    await asyncio.sleep(0.05)
    token.cancel("stop")
    task.cancel()  # the caller cancels too (e.g. its own timeout)
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, BOUND_S)


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_a_cancel_that_lands_after_the_run_does_not_hit_the_caller() -> None:
    """The guard schedules task.cancel() with call_soon; if the awaited work finished
    first, that late cancel must not fall on the caller's next await."""

    @tool
    async def stop(ctx: RunContext[Any]) -> str:
        """Cancel the run and return at once (no await after the cancel)."""
        ctx.cancel_token.cancel("tool asked to stop")
        return "stopping"

    agent = Agent(name="a", model=ScriptedModel([call("stop"), "never"]), tools=[stop])
    with pytest.raises(RunCancelled):
        await Runner.run(agent, "go")
    for _ in range(3):
        await asyncio.sleep(0)  # the caller's own awaits: never cancelled by lovia
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
