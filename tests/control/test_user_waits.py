"""User code the loop itself awaits — a guardrail, a dynamic instruction, a view injector,
a plugin's setup, an async hook on the run's events — is one of the run's waits: a cancel
or ``max_seconds`` ends it, even when the code hangs on a stalled server or swallows its
cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from lovia import (
    Agent,
    AgentHooks,
    BudgetExceeded,
    PluginInstance,
    RunBudget,
    RunCancelled,
    Runner,
    events,
)
from lovia.context import RunContext
from lovia.stores import MemoryStore
from lovia.testing import ScriptedModel

pytestmark = pytest.mark.lovia_unconsumed  # the runs stop before the model is asked


async def _hang(*_args: Any) -> Any:
    await asyncio.Event().wait()  # a retrieval or moderation call that never answers


async def _swallow(*_args: Any) -> Any:
    """Swallows the cancellation and answers anyway: the run still stops."""
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        pass
    return "late"


class Injects:
    """A plugin whose view injector is ``fn``."""

    name = "rag"

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        return PluginInstance(view_injectors=[self.fn])


class SlowSetup:
    """A plugin whose setup hangs (a connection to a server that never accepts)."""

    name = "slow"

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        await _hang()
        return PluginInstance()


def _agent(where: str, fn: Callable[..., Any] = _hang) -> Agent[Any, Any]:
    model = ScriptedModel(["ok"])
    if where == "instruction":
        agent = Agent(name="a", model=model)
        agent.instruction(fn)
        return agent
    if where == "injector":
        return Agent(name="a", model=model, plugins=[Injects(fn)])
    if where == "setup":
        return Agent(name="a", model=model, plugins=[SlowSetup()])
    if where == "hook":  # an audit hook posting to a webhook that never answers
        hooks = AgentHooks()
        hooks.on(events.ModelCallStarted)(fn)
        return Agent(name="a", model=model, hooks=hooks)
    if where == "plugin-hook":
        return Agent(name="a", model=model, plugins=[Hooks(fn)])
    assert where == "guardrail"
    return Agent(name="a", model=model, input_guardrails=[fn])


class Hooks:
    """A plugin whose hook on every model call is ``fn`` (plugin hooks are fail-open)."""

    name = "audit"

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        hooks = AgentHooks()
        hooks.on(events.ModelCallStarted)(self.fn)
        return PluginInstance(hooks=hooks)


WHERE = ["instruction", "injector", "setup", "guardrail", "hook", "plugin-hook"]


@pytest.mark.parametrize("where", WHERE)
async def test_the_deadline_stops_user_code_that_hangs(where: str) -> None:
    store = MemoryStore()
    run = Runner.run(
        _agent(where), "hi", budget=RunBudget(max_seconds=0.1), checkpointer=store, run_id="r"
    )
    with pytest.raises(BudgetExceeded) as info:
        await asyncio.wait_for(run, 5)
    assert info.value.limit == "max_seconds" and "in flight" in info.value.message
    snap = await store.load("r")
    assert snap is not None and snap.info.status == "failed"


@pytest.mark.parametrize("where", WHERE)
async def test_a_cancel_stops_user_code_that_hangs(where: str) -> None:
    handle = Runner.stream(_agent(where), "hi")
    asyncio.get_running_loop().call_later(0.05, handle.cancel, "user pressed stop")
    seen: list[type[events.Event]] = []
    with pytest.raises(RunCancelled):
        async with asyncio.timeout(5):
            async for event in handle:
                seen.append(type(event))
            await handle.result()
    assert seen[-1] is events.RunFailed


@pytest.mark.parametrize("where", ["instruction", "injector", "guardrail", "hook"])
async def test_code_that_swallows_its_cancellation_does_not_keep_the_run(where: str) -> None:
    run = Runner.run(_agent(where, _swallow), "hi", budget=RunBudget(max_seconds=0.1))
    with pytest.raises(BudgetExceeded):
        await asyncio.wait_for(run, 5)


async def test_an_injector_that_fails_on_its_own_is_still_skipped() -> None:
    async def broken(ctx: Any) -> Any:
        raise ConnectionError("vector store down")

    agent = Agent(name="a", model=ScriptedModel(["ok"]), plugins=[Injects(broken)])
    result = await Runner.run(agent, "hi", budget=RunBudget(max_seconds=5))
    assert result.output == "ok"


async def test_hooks_on_the_runs_end_run_to_their_end_after_a_cancel() -> None:
    """The closing and terminal events' hooks are not cut short: the run is already
    stopping, and an audit hook on RunFailed must still record why."""
    hooks = AgentHooks()
    seen: list[str] = []

    @hooks.on(events.ModelCallStarted)
    async def hang(event: Any, ctx: Any) -> None:
        await _hang()

    @hooks.on(events.RunFailed)
    async def audit(event: events.RunFailed, ctx: Any) -> None:
        await asyncio.sleep(0.01)  # a real await: an armed wait would end it at once
        seen.append(event.error_type)

    agent = Agent(name="a", model=ScriptedModel(["ok"]), hooks=hooks)
    handle = Runner.stream(agent, "hi")
    asyncio.get_running_loop().call_later(0.05, handle.cancel, "stop")
    with pytest.raises(RunCancelled):
        async with asyncio.timeout(5):
            async for _ in handle:
                pass
            await handle.result()
    assert seen == ["RunCancelled"]


async def test_a_hook_that_answers_in_time_is_not_disturbed() -> None:
    hooks = AgentHooks()
    calls: list[int] = []

    @hooks.on(events.ModelCallStarted)
    async def slow(event: Any, ctx: Any) -> None:
        await asyncio.sleep(0.01)
        calls.append(1)

    agent = Agent(name="a", model=ScriptedModel(["ok"]), hooks=hooks)
    result = await Runner.run(agent, "hi", budget=RunBudget(max_seconds=5))
    assert result.output == "ok" and calls == [1]


async def test_a_hook_after_the_run_was_asked_to_stop_ends_at_its_first_await() -> None:
    """The tool sets the token; its ToolCallCompleted hook starts, and its first await is
    the run's next wait: the run ends cancelled there, not after the hook's sleep."""
    from lovia import tool
    from lovia.testing import call

    @tool
    def stop(ctx: RunContext[Any]) -> str:
        """Stop the run from inside a tool."""
        ctx.cancel_token.cancel("the tool said stop")
        return "stopping"

    hooks = AgentHooks()
    reached: list[str] = []

    @hooks.on(events.ToolCallCompleted)
    async def audit(event: Any, ctx: Any) -> None:
        reached.append("started")
        await asyncio.sleep(30)
        reached.append("finished")

    agent = Agent(name="a", model=ScriptedModel([call("stop"), "ok"]), tools=[stop], hooks=hooks)
    with pytest.raises(RunCancelled):
        await asyncio.wait_for(Runner.run(agent, "hi"), 5)
    assert reached == ["started"]
