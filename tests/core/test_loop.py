"""The one loop: run/stream parity, terminal events, failures never raise while iterating."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from lovia import (
    Agent,
    AgentHooks,
    CancelToken,
    MaxTurnsExceeded,
    RunCancelled,
    RunContext,
    Runner,
    events,
    tool,
)
from lovia.errors import HookError, RateLimited
from lovia.testing import ScriptedModel, ScriptError, call, reply

DELTAS = (events.TextDelta, events.ReasoningDelta, events.ToolCallDelta)


@tool(concurrency_safe=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def script() -> list[Any]:
    return [
        reply(
            "thinking aloud",
            tool_calls=[call("add", a=1, b=2), call("add", a=3, b=4)],
            reasoning="let me add",
        ),
        call("add", a=3, b=7),
        "the sums are 3, 7 and 10",
    ]


def _shape(entries: Any) -> list[tuple[Any, ...]]:
    return [
        (e.type, e.turn, e.agent, getattr(e, "content", None) or getattr(e, "text", None))
        for e in entries
    ]


async def test_run_and_stream_are_the_same_loop() -> None:
    seen_run: list[str] = []
    hooks = AgentHooks()

    @hooks.on(events.Event)
    def record(ev: events.Event, ctx: Any) -> None:
        seen_run.append(type(ev).__name__)

    agent = Agent(name="calc", model=ScriptedModel(script()), tools=[add], hooks=hooks)
    ran = await Runner.run(agent, "add things")
    first_run = list(seen_run)  # the clone shares the hooks: keep the first run's events

    streamed_agent = agent.clone(model=ScriptedModel(script()))
    handle = Runner.stream(streamed_agent, "add things")
    seen_stream = [type(ev).__name__ async for ev in handle]
    streamed = await handle.result()

    assert _shape(ran.entries) == _shape(streamed.entries)
    assert (ran.usage, ran.turns, ran.finish_reason, ran.output) == (
        streamed.usage,
        streamed.turns,
        streamed.finish_reason,
        streamed.output,
    )
    names = {d.__name__ for d in DELTAS}
    assert [n for n in first_run if n not in names] == [n for n in seen_stream if n not in names]
    assert seen_stream[0] == "RunStarted" and seen_stream[-1] == "RunCompleted"
    assert ran.turns == 3 and ran.usage.tool_calls == 3 and ran.usage.requests == 3


async def collect(handle: Any) -> list[events.Event]:
    return [ev async for ev in handle]


async def _terminal_only(agent: Agent[Any, Any], **kw: Any) -> tuple[list[events.Event], Any]:
    handle = Runner.stream(agent, "go", **kw)
    evs = await collect(handle)  # must not raise
    terminals = [e for e in evs if isinstance(e, (events.RunCompleted, events.RunFailed))]
    assert len(terminals) == 1 and evs[-1] is terminals[0]
    return evs, handle


async def test_model_error_ends_stream_with_one_run_failed() -> None:
    agent = Agent(name="a", model=ScriptedModel([RateLimited("slow down", status=429)]))
    evs, handle = await _terminal_only(agent)
    failed = evs[-1]
    assert isinstance(failed, events.RunFailed) and failed.error_type == "RateLimited"
    assert any(isinstance(e, events.ModelCallFailed) for e in evs)
    with pytest.raises(RateLimited):
        await handle.result()


async def test_tool_crash_does_not_end_the_run() -> None:
    @tool
    def crash() -> str:
        raise RuntimeError("tool exploded")

    agent = Agent(name="a", model=ScriptedModel([call("crash"), "fine"]), tools=[crash])
    evs, handle = await _terminal_only(agent)
    assert isinstance(evs[-1], events.RunCompleted)
    done = [e for e in evs if isinstance(e, events.ToolCallCompleted)]
    assert done[0].is_error and done[0].error_type == "RuntimeError"
    assert (await handle.result()).output == "fine"


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_strict_hook_crash_fails_the_run_cleanly() -> None:
    hooks = AgentHooks(strict=True)

    @hooks.on(events.TurnStarted)
    def bad(ev: events.TurnStarted, ctx: Any) -> None:
        raise ValueError("hook bug")

    agent = Agent(name="a", model=ScriptedModel(["never"]), hooks=hooks)
    evs, handle = await _terminal_only(agent)
    assert isinstance(evs[-1], events.RunFailed) and evs[-1].error_type == "HookError"
    with pytest.raises(HookError, match="hook bug") as info:
        await handle.result()
    assert isinstance(info.value.__cause__, ValueError)


async def test_lenient_hook_crash_is_logged_and_run_goes_on(caplog: Any) -> None:
    hooks = AgentHooks()

    @hooks.on(events.TurnStarted)
    def bad(ev: events.TurnStarted, ctx: Any) -> None:
        raise ValueError("hook bug")

    agent = Agent(name="a", model=ScriptedModel(["ok"]), hooks=hooks)
    evs, _ = await _terminal_only(agent)
    assert isinstance(evs[-1], events.RunCompleted)
    assert "hook" in caplog.text and "ValueError" in caplog.text


async def test_cancellation_during_model_stream_ends_quickly() -> None:
    token = CancelToken()
    agent = Agent(name="a", model=ScriptedModel([reply("late", delay=60)]))
    handle = Runner.stream(agent, "go", cancel_token=token)

    async def consume() -> list[events.Event]:
        return await collect(handle)

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.05)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    token.cancel("user pressed stop")
    evs = await asyncio.wait_for(task, 5)
    assert loop.time() - t0 < 2
    assert isinstance(evs[-1], events.RunFailed) and evs[-1].error_type == "RunCancelled"
    with pytest.raises(RunCancelled):
        await handle.result()


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_cancellation_from_inside_a_tool() -> None:
    @tool
    async def stop(ctx: RunContext[None]) -> str:
        ctx.cancel_token.cancel("tool asked")
        await asyncio.sleep(60)
        return "never"

    agent = Agent(name="a", model=ScriptedModel([call("stop"), "never"]), tools=[stop])
    with pytest.raises(RunCancelled):
        await asyncio.wait_for(Runner.run(agent, "go"), 5)


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_max_turns_counts_model_steps() -> None:
    agent = Agent(name="a", model=ScriptedModel([call("add", a=1, b=1)] * 3), tools=[add])
    with pytest.raises(MaxTurnsExceeded) as info:
        await Runner.run(agent, "loop", max_turns=2)
    assert info.value.turn == 2 and "max_turns=2" in str(info.value)


async def test_unexpected_extra_model_call_is_reported() -> None:
    agent = Agent(name="a", model=ScriptedModel([call("add", a=1, b=1)]), tools=[add])
    with pytest.raises(ScriptError, match="unexpected model call #2"):
        await Runner.run(agent, "go")


async def test_two_hundred_concurrent_runs_share_no_state() -> None:
    @tool
    async def whoami(ctx: RunContext[int]) -> str:
        await asyncio.sleep(0)
        return str(ctx.deps)

    from lovia.testing import FunctionModel

    def reply_for(request: Any, info: Any) -> Any:
        results = [m for m in request.messages if m.type == "tool_result"]
        if not results:
            return call("whoami")
        return f"I am {results[0].content}"

    agent = Agent(name="shared", model=FunctionModel(reply_for), tools=[whoami])
    results = await asyncio.gather(*(Runner.run(agent, "who?", deps=i) for i in range(200)))
    assert [r.output for r in results] == [f"I am {i}" for i in range(200)]
    assert len({r.run_id for r in results}) == 200
    for r in results:
        assert {e.run_id for e in r.entries} == {r.run_id}


def test_run_sync_inside_and_outside_a_loop() -> None:
    agent = Agent(name="a", model=ScriptedModel(["one", "two"]))
    assert Runner.run_sync(agent, "x").output == "one"

    async def inside() -> str:
        return Runner.run_sync(agent, "y").output

    assert asyncio.run(inside()) == "two"


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_result_without_iterating_and_abandoned_stream_closes_plugins() -> None:
    from lovia import PluginInstance

    closed: list[str] = []

    class P:
        name = "p"

        async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
            async def aclose() -> None:
                closed.append("p")

            return PluginInstance(aclose=aclose)

    agent = Agent(name="a", model=ScriptedModel(["a", "b"]), plugins=[P()])
    assert (await Runner.stream(agent, "x").result()).output == "a"
    handle = Runner.stream(agent, "x")
    async for ev in handle:
        if isinstance(ev, events.TurnStarted):
            break
    await handle.aclose()
    assert closed == ["p", "p"]


async def test_cancel_token_wait_from_another_thread() -> None:
    import threading

    token = CancelToken()
    waiter = asyncio.create_task(token.wait())
    await asyncio.sleep(0)
    threading.Thread(target=token.cancel, args=("from a thread",)).start()
    assert await asyncio.wait_for(waiter, 5) == "from a thread"
    assert await token.wait() == "from a thread"  # already cancelled: returns at once
