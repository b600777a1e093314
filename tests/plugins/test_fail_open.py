"""Plugins provide capabilities, never control flow: a view injector that
returns the wrong type, or a plugin hook that raises (even a strict one), is logged with
its name and skipped; only the agent's own strict hooks fail a run, with HookError. A
plugin's aclose may be sync or async."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from lovia import Agent, AgentHooks, PluginInstance, RunContext, Runner, events, tool
from lovia.errors import HookError
from lovia.testing import ScriptedModel, call
from lovia.transcript import InputEntry


@dataclass
class Injecting:
    """A plugin whose injectors return whatever the test gives it."""

    injectors: list[Callable[[RunContext[Any]], Any]]
    name: str = "injecting"

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        return PluginInstance(view_injectors=self.injectors)


@tool
def noop() -> str:
    """Do nothing."""
    return "ok"


async def test_a_bare_str_is_one_reminder_not_one_message_per_character() -> None:
    def remind(ctx: RunContext[Any]) -> str:
        return "<system-reminder>be brief</system-reminder>"

    model = ScriptedModel(["done"])
    await Runner.run(Agent(name="x", model=model, plugins=[Injecting([remind])]), "hi")
    (request,) = model.requests
    assert [m.type for m in request.messages] == ["input", "input"]
    last = request.messages[-1]
    assert isinstance(last, InputEntry) and last.origin == "injected"
    assert last.content == "<system-reminder>be brief</system-reminder>"


async def test_an_empty_str_injects_nothing() -> None:
    model = ScriptedModel(["done"])
    await Runner.run(Agent(name="x", model=model, plugins=[Injecting([lambda c: "  "])]), "hi")
    assert [m.type for m in model.requests[0].messages] == ["input"]


@pytest.mark.parametrize(
    ("returned", "described"),
    [
        ({"role": "user", "content": "hi"}, "dict {'content': 'hi', 'role': 'user'}"),
        (42, "int 42"),
        ([InputEntry(role="user", content="ok"), 7], "list [InputEntry("),
        (b"bytes", "bytes b'bytes'"),
    ],
    ids=["dict", "int", "list-with-int", "bytes"],
)
async def test_a_wrong_return_type_is_logged_by_name_and_skipped(
    caplog: pytest.LogCaptureFixture, returned: Any, described: str
) -> None:
    def wrong(ctx: RunContext[Any]) -> Any:
        return returned

    async def fine(ctx: RunContext[Any]) -> list[InputEntry]:
        return [InputEntry(role="user", content="still here")]

    model = ScriptedModel([call("noop"), "done"])
    agent = Agent(name="x", model=model, tools=[noop], plugins=[Injecting([wrong, fine])])
    with caplog.at_level(logging.ERROR, logger="lovia.loop"):
        result = await Runner.run(agent, "hi")
    assert result.output == "done" and len(model.requests) == 2
    for request in model.requests:  # only the good injector's entry, every turn
        injected = [m for m in request.messages if getattr(m, "origin", "") == "injected"]
        assert [m.content for m in injected] == ["still here"]  # type: ignore[union-attr]
    logged = [r.getMessage() for r in caplog.records if "view injector" in r.getMessage()]
    assert len(logged) == 2  # once per turn
    assert "wrong" in logged[0] and "plugin 'injecting'" in logged[0]
    assert f"returned {described}" in logged[0]


@dataclass
class Watching:
    """A plugin contributing (strict) hooks that raise."""

    strict: bool = True
    name: str = "watcher"
    seen: list[str] = field(default_factory=list[str])

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        hooks = AgentHooks(strict=self.strict)

        @hooks.on(events.TurnStarted)
        def explode(ev: events.TurnStarted, ctx: Any) -> None:
            self.seen.append("turn")
            raise RuntimeError("plugin hook bug")

        return PluginInstance(hooks=hooks)


@pytest.mark.parametrize("strict", [True, False])
async def test_a_plugin_hook_cannot_stop_the_run(
    caplog: pytest.LogCaptureFixture, strict: bool
) -> None:
    watcher = Watching(strict=strict)
    agent = Agent(
        name="x", model=ScriptedModel([call("noop"), "done"]), tools=[noop], plugins=[watcher]
    )
    with caplog.at_level(logging.ERROR, logger="lovia.hooks"):
        result = await Runner.run(agent, "hi")
    assert result.output == "done" and watcher.seen == ["turn", "turn"]
    logged = [r for r in caplog.records if "plugin 'watcher'" in r.getMessage()]
    assert len(logged) == 2 and "explode" in logged[0].getMessage()
    assert logged[0].exc_info is not None and "plugin hook bug" in str(logged[0].exc_info[1])


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_the_agents_own_strict_hook_fails_the_run_with_hook_error() -> None:
    hooks = AgentHooks(strict=True)

    @hooks.on(events.TurnStarted)
    def bad(ev: events.TurnStarted, ctx: Any) -> None:
        raise ValueError("hook bug")

    stream = Runner.stream(Agent(name="a", model=ScriptedModel(["never"]), hooks=hooks), "hi")
    seen = [e async for e in stream]
    assert isinstance(seen[-1], events.RunFailed) and seen[-1].error_type == "HookError"
    with pytest.raises(HookError) as info:
        await stream.result()
    assert info.value.hook.endswith("bad") and info.value.event == "TurnStarted"
    assert "ValueError: hook bug" in info.value.message and info.value.hint
    assert isinstance(info.value.__cause__, ValueError)
    assert info.value.run_id == seen[-1].run_id and info.value.turn == 1


@dataclass
class Closing:
    """A plugin whose aclose is whatever the test gives it."""

    aclose: Callable[[], Any]
    name: str = "closing"

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        return PluginInstance(aclose=self.aclose)


async def _closed(aclose: Callable[[], Any]) -> events.PluginClosed:
    stream = Runner.stream(
        Agent(name="x", model=ScriptedModel(["ok"]), plugins=[Closing(aclose)]), "hi"
    )
    closed = [e async for e in stream if isinstance(e, events.PluginClosed)]
    assert (await stream.result()).output == "ok"
    (event,) = closed
    return event


async def test_a_sync_aclose_runs_and_is_not_reported_as_failed() -> None:
    log: list[str] = []
    event = await _closed(lambda: log.append("closed"))
    assert log == ["closed"] and event.error is None and event.plugin == "closing"


async def test_an_aclose_returning_an_awaitable_is_awaited() -> None:
    log: list[str] = []

    async def really_close() -> None:
        log.append("closed")

    event = await _closed(lambda: really_close())
    assert log == ["closed"] and event.error is None


async def test_a_failing_sync_aclose_is_reported_with_its_error() -> None:
    def broken() -> None:
        raise OSError("socket gone")

    event = await _closed(broken)
    assert isinstance(event.error, OSError)
