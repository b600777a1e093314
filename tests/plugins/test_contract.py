"""The plugin contract, one rule per test, with tiny test plugins."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

import pytest

from lovia import Agent, PluginInstance, RunContext, Runner, UserError, tool
from lovia.errors import RunCancelled
from lovia.stores.memory import MemoryStore
from lovia.testing import ScriptedModel, call, reply
from lovia.transcript import InputEntry, TranscriptEntry
from lovia.view.base import BuiltView, FullView, ViewInput


@dataclass
class Probe:
    """Records what the loop does with it."""

    name: str = "probe"
    log: list[str] = field(default_factory=list[str])
    setups: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    fail_close: bool = False
    instructions: str | None = None

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        self.setups.append(
            {
                "session_id": ctx.session_id,
                "run_id": ctx.run_id,
                "deps": ctx.deps,
                "entries": list(ctx.entries),
                "agent": ctx.agent.name,
            }
        )
        self.log.append(f"setup:{self.name}")
        n = len(self.setups)

        async def aclose() -> None:
            self.log.append(f"close:{self.name}")
            if self.fail_close:
                raise RuntimeError(f"{self.name} failed to close")

        text = self.instructions or f"{self.name} instructions #{n}"
        return PluginInstance(instructions=text, aclose=aclose)


async def test_duplicate_names_rejected_before_any_setup() -> None:
    a, b = Probe(name="same"), Probe(name="same")
    first = Probe(name="first")
    agent = Agent(name="x", model=ScriptedModel([]), plugins=[first, a, b])
    with pytest.raises(UserError, match="two plugins named 'same'"):
        await Runner.run(agent, "hi")
    assert first.setups == [] and a.setups == [] and b.setups == []


async def test_setup_once_per_run_with_context() -> None:
    probe = Probe()
    model = ScriptedModel([call("noop"), call("noop"), "done", "again"])

    @tool
    def noop() -> str:
        """Do nothing."""
        return "ok"

    agent = Agent(name="x", model=model, tools=[noop], plugins=[probe])
    result = await Runner.run(agent, "hi", deps={"k": 1}, run_id="run-1")
    assert result.turns == 3
    assert len(probe.setups) == 1
    seen = probe.setups[0]
    assert seen["run_id"] == "run-1" and seen["deps"] == {"k": 1} and seen["entries"] == []
    await Runner.run(agent, "again", run_id="run-2")
    assert [s["run_id"] for s in probe.setups] == ["run-1", "run-2"]


async def test_setup_sees_session_id_and_empty_entries_with_a_session() -> None:
    probe = Probe()
    store = MemoryStore()
    agent = Agent(name="x", model=ScriptedModel(["one", "two"]), plugins=[probe])
    await Runner.run(agent, "first", session=store, session_id="s1")
    await Runner.run(agent, "second", session=store, session_id="s1")
    assert [s["session_id"] for s in probe.setups] == ["s1", "s1"]
    # Seed: "entries 在运行开始时为空" — also when the session already has history.
    assert probe.setups[1]["entries"] == []


async def test_setup_again_for_handoff_target() -> None:
    mine, theirs = Probe(name="p_main"), Probe(name="p_other")
    model = ScriptedModel([call("transfer_to_other"), "from other"])
    other = Agent(name="other", model=model, plugins=[theirs])
    main = Agent(name="main", model=model, plugins=[mine], handoffs=[other])
    result = await Runner.run(main, "hi", deps="d")
    assert result.final_agent.name == "other"
    assert [s["agent"] for s in mine.setups] == ["main"]
    assert [s["agent"] for s in theirs.setups] == ["other"]
    assert theirs.setups[0]["run_id"] == mine.setups[0]["run_id"]
    assert theirs.setups[0]["deps"] == "d"
    # Target's plugin instructions are in the target's system prompt only.
    assert "p_other instructions" in model.requests[1].system
    assert "p_other instructions" not in model.requests[0].system


async def test_same_plugin_on_both_sides_of_a_handoff_is_set_up_twice() -> None:
    shared = Probe(name="shared")
    model = ScriptedModel([call("transfer_to_other"), "ok"])
    other = Agent(name="other", model=model, plugins=[shared])
    main = Agent(name="main", model=model, plugins=[shared], handoffs=[other])
    await Runner.run(main, "hi")
    assert [s["agent"] for s in shared.setups] == ["main", "other"]
    assert shared.log.count("close:shared") == 2


async def test_instructions_rendered_once_per_run() -> None:
    probe = Probe()
    model = ScriptedModel([call("noop"), "done"])

    @tool
    def noop() -> str:
        """Do nothing."""
        return "ok"

    agent = Agent(name="x", instructions="base", model=model, tools=[noop], plugins=[probe])
    await Runner.run(agent, "hi")
    first, second = model.requests
    assert first.system == second.system
    assert first.system.endswith("probe instructions #1")
    assert first.system.startswith("base")


class RecordingStrategy:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def new_state(self) -> None:
        return None

    async def build(self, inp: ViewInput, state: Any, summarize: Any) -> BuiltView:
        self.log.append("strategy")
        return await FullView().build(inp, state, summarize)


async def test_injectors_every_turn_after_strategy_and_not_persisted() -> None:
    log: list[str] = []

    @dataclass
    class Clock:
        name: str = "clock"

        async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
            def inject(ctx: RunContext[Any]) -> list[TranscriptEntry]:
                log.append("inject")
                return [
                    InputEntry(
                        role="user", content=f"<system-reminder>turn {ctx.turn}</system-reminder>"
                    )
                ]

            return PluginInstance(view_injectors=[inject])

    @tool
    def noop() -> str:
        """Do nothing."""
        return "ok"

    model = ScriptedModel([call("noop"), call("noop"), "done"])
    store = MemoryStore()
    agent = Agent(
        name="x", model=model, tools=[noop], plugins=[Clock()], context=RecordingStrategy(log)
    )
    result = await Runner.run(agent, "hi", session=store, session_id="s")
    assert log == ["strategy", "inject"] * 3
    for i, request in enumerate(model.requests, 1):
        last = request.messages[-1]
        assert isinstance(last, InputEntry) and last.content == (
            f"<system-reminder>turn {i}</system-reminder>"
        )
        reminders = [
            m for m in request.messages if "system-reminder" in str(getattr(m, "content", ""))
        ]
        assert len(reminders) == 1  # not accumulated
    assert not any("system-reminder" in str(getattr(e, "content", "")) for e in result.entries)
    stored = await store.load_session("s")
    assert not any("system-reminder" in str(getattr(e, "content", "")) for e in stored)


async def test_failing_injector_is_logged_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    @dataclass
    class Broken:
        name: str = "broken"

        async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
            def boom(ctx: RunContext[Any]) -> None:
                raise ValueError("injector exploded")

            async def fine(ctx: RunContext[Any]) -> list[TranscriptEntry]:
                return [InputEntry(role="user", content="still here")]

            return PluginInstance(view_injectors=[boom, fine])

    model = ScriptedModel(["done"])
    agent = Agent(name="x", model=model, plugins=[Broken()])
    with caplog.at_level(logging.ERROR, logger="lovia.loop"):
        result = await Runner.run(agent, "hi")
    assert result.output == "done"
    assert model.requests[0].messages[-1].content == "still here"  # type: ignore[union-attr]
    failed = [r for r in caplog.records if "injector" in r.getMessage()]
    assert failed and "'broken'" in failed[0].getMessage()
    assert failed[0].exc_info is not None


async def test_aclose_lifo_best_effort() -> None:
    log: list[str] = []
    plugins = [
        Probe(name="a", log=log),
        Probe(name="b", log=log, fail_close=True),
        Probe(name="c", log=log),
    ]
    agent = Agent(name="x", model=ScriptedModel(["ok"]), plugins=plugins)
    result = await Runner.run(agent, "hi")
    assert result.output == "ok"
    assert log == ["setup:a", "setup:b", "setup:c", "close:c", "close:b", "close:a"]


async def test_aclose_runs_when_the_run_fails() -> None:
    log: list[str] = []
    plugins = [Probe(name="a", log=log), Probe(name="b", log=log, fail_close=True)]
    agent = Agent(name="x", model=ScriptedModel([RuntimeError("model down")]), plugins=plugins)
    with pytest.raises(RuntimeError, match="model down"):
        await Runner.run(agent, "hi")
    assert log == ["setup:a", "setup:b", "close:b", "close:a"]


async def test_aclose_runs_when_a_later_setup_fails() -> None:
    log: list[str] = []

    @dataclass
    class Fails:
        name: str = "fails"

        async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
            raise OSError("cannot connect")

    agent = Agent(name="x", model=ScriptedModel([]), plugins=[Probe(name="a", log=log), Fails()])
    with pytest.raises(OSError, match="cannot connect"):
        await Runner.run(agent, "hi")
    assert log == ["setup:a", "close:a"]


async def test_aclose_runs_when_the_run_is_cancelled() -> None:
    from lovia import CancelToken

    log: list[str] = []
    token = CancelToken()
    agent = Agent(
        name="x",
        model=ScriptedModel([reply("slow", delay=5)]),
        plugins=[Probe(name="a", log=log), Probe(name="b", log=log)],
    )
    task = asyncio.create_task(Runner.run(agent, "hi", cancel_token=token))
    await asyncio.sleep(0.05)
    token.cancel("test")
    with pytest.raises(RunCancelled):
        await task
    assert log == ["setup:a", "setup:b", "close:b", "close:a"]


async def test_aclose_runs_when_the_task_is_cancelled() -> None:
    log: list[str] = []
    agent = Agent(
        name="x",
        model=ScriptedModel([reply("slow", delay=5)]),
        plugins=[Probe(name="a", log=log), Probe(name="b", log=log)],
    )
    task = asyncio.create_task(Runner.run(agent, "hi"))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert log == ["setup:a", "setup:b", "close:b", "close:a"]


async def test_plugin_tool_clash_is_a_user_error() -> None:
    @tool
    def noop() -> str:
        """Do nothing."""
        return "ok"

    @dataclass
    class Tools:
        name: str = "tools"

        async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
            return PluginInstance(tools=[noop])

    agent = Agent(name="x", model=ScriptedModel([]), tools=[noop], plugins=[Tools()])
    with pytest.raises(UserError, match="defined twice"):
        await Runner.run(agent, "hi")
