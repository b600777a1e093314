"""Input and output guardrails: when they run, how they trip, and that a trip writes
nothing to the session."""

from __future__ import annotations

from typing import Any

import pytest

from lovia import Agent, GuardrailResult, GuardrailTripped, PluginInstance, events, guardrail
from lovia.context import RunContext
from lovia.stores import MemoryStore
from lovia.testing import ScriptedModel
from lovia.transcript import InputEntry

from .helpers import Scenario, both


class GuardPlugin:
    """A plugin contributing guardrails (merged after the agent's own)."""

    name = "guards"

    def __init__(self, calls: list[str], *, trip_output: bool = False) -> None:
        self.calls = calls
        self.trip_output = trip_output

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        def plugin_input(ctx: RunContext[Any], value: Any) -> None:
            self.calls.append("plugin_input")

        async def plugin_output(ctx: RunContext[Any], value: Any) -> str | None:
            self.calls.append("plugin_output")
            return "plugin says no" if self.trip_output else None

        return PluginInstance(input_guardrails=[plugin_input], output_guardrails=[plugin_output])


def make_agent(
    model: ScriptedModel,
    *,
    calls: list[str],
    inputs: list[Any] | None = None,
    outputs: list[Any] | None = None,
    trip_output: bool = False,
) -> Agent[Any, Any]:
    return Agent(
        name="guarded",
        model=model,
        input_guardrails=inputs or [],
        output_guardrails=outputs or [],
        plugins=[GuardPlugin(calls, trip_output=trip_output)],
    )


def session_options() -> dict[str, Any]:
    return {"session": MemoryStore(), "session_id": "conv-1"}


async def test_passing_guardrails_run_once_each_in_order() -> None:
    def make() -> Scenario:
        calls: list[str] = []
        seen: dict[str, Any] = {}

        def sync_input(ctx: RunContext[Any], value: Any) -> bool:
            calls.append("agent_input")
            seen["input"] = value
            seen["transcript"] = [e.type for e in ctx.entries]
            return False

        async def async_output(ctx: RunContext[Any], value: Any) -> GuardrailResult:
            calls.append("agent_output")
            seen["output"] = value
            return GuardrailResult(tripped=False)

        model = ScriptedModel(["Hello!"])
        agent = make_agent(model, calls=calls, inputs=[sync_input], outputs=[async_output])
        return Scenario(agent, "hi", session_options(), extra=(calls, seen))

    a, b = await both(make)
    for out in (a, b):
        calls, seen = out.scenario.extra
        assert calls == ["agent_input", "plugin_input", "agent_output", "plugin_output"]
        # input guardrails see this run's input entries, after the transcript is built
        assert [e.content for e in seen["input"]] == ["hi"]
        assert seen["transcript"] == ["system", "input"]
        assert seen["output"] == "Hello!"
        store = out.scenario.options["session"]
        assert [e.type for e in await store.load_session("conv-1")] == ["system", "input", "text"]
    kinds = [(e.kind, e.guardrail) for e in b.of(events.GuardrailCompleted)]
    assert kinds == [
        ("input", "sync_input"),
        ("input", "plugin_input"),
        ("output", "async_output"),
        ("output", "plugin_output"),
    ]
    # input guardrails run before the first turn; output guardrails after the last
    types = b.types
    assert types.index("GuardrailCompleted") < types.index("TurnStarted")
    assert types.index("GuardrailStarted", types.index("TurnEnded")) < types.index("SessionWritten")


TRIPS: list[tuple[str, Any, str]] = [
    ("true", lambda ctx, value: True, "tripped"),
    ("str", lambda ctx, value: "contains a secret", "contains a secret"),
    ("result", lambda ctx, value: GuardrailResult(tripped=True, reason="nope"), "nope"),
]


async def _async_trip(ctx: RunContext[Any], value: Any) -> str:
    return "async says no"


@pytest.mark.parametrize(
    ("fn", "reason"),
    [(t[1], t[2]) for t in TRIPS] + [(_async_trip, "async says no")],
    ids=[t[0] for t in TRIPS] + ["async"],
)
async def test_input_guardrail_trip_ends_the_run(fn: Any, reason: str) -> None:
    def make() -> Scenario:
        model = ScriptedModel([])  # the model is never called
        agent = make_agent(model, calls=[], inputs=[guardrail(fn, name="screen")])
        return Scenario(
            agent, [InputEntry(content="my password is hunter2")], session_options(), extra=model
        )

    a, b = await both(make)
    for out in (a, b):
        err = out.error
        assert isinstance(err, GuardrailTripped)
        assert (err.guardrail, err.reason, err.kind) == ("screen", reason, "input")
        assert out.scenario.extra.requests == []
        assert await out.scenario.options["session"].load_session("conv-1") == []
    assert b.types[-2:] == ["GuardrailTriggered", "RunFailed"]
    tripped = b.of(events.GuardrailTriggered)[0]
    assert (tripped.kind, tripped.guardrail, tripped.reason) == ("input", "screen", reason)
    assert b.of(events.RunFailed)[0].error_type == "GuardrailTripped"
    assert "TurnStarted" not in b.types


async def test_output_guardrail_trip_writes_nothing_to_the_session() -> None:
    def make() -> Scenario:
        calls: list[str] = []

        def no_secrets(ctx: RunContext[Any], value: Any) -> str | None:
            calls.append("agent_output")
            return "leaks a secret" if "hunter2" in value else None

        model = ScriptedModel(["the password is hunter2"])
        agent = make_agent(model, calls=calls, outputs=[no_secrets])
        return Scenario(agent, "tell me", session_options(), extra=calls)

    a, b = await both(make)
    for out in (a, b):
        err = out.error
        assert isinstance(err, GuardrailTripped)
        assert (err.guardrail, err.reason, err.kind) == ("no_secrets", "leaks a secret", "output")
        assert out.scenario.extra == ["plugin_input", "agent_output"]  # plugin's not reached
        assert await out.scenario.options["session"].load_session("conv-1") == []
    assert b.types[-2:] == ["GuardrailTriggered", "RunFailed"]
    assert "SessionWritten" not in b.types


async def test_plugin_output_guardrail_trips_and_checkpoint_is_not_completed() -> None:
    def make() -> Scenario:
        store = MemoryStore()
        model = ScriptedModel(["fine answer"])
        agent = make_agent(model, calls=[], trip_output=True)
        return Scenario(
            agent,
            "q",
            {"session": store, "session_id": "conv-1", "checkpointer": store, "run_id": "r-guard"},
        )

    a, b = await both(make)
    for out in (a, b):
        assert isinstance(out.error, GuardrailTripped)
        assert out.error.guardrail == "plugin_output"
        store = out.scenario.options["session"]
        assert await store.load_session("conv-1") == []
        snap = await store.load("r-guard")
        assert snap is not None and snap.info.status != "completed"
        assert snap.result is None


def test_bad_guardrail_return_value_is_a_user_error() -> None:
    import asyncio

    from lovia import UserError

    g = guardrail(lambda ctx, value: 42, name="bad")
    with pytest.raises(UserError):
        asyncio.run(g.check(None, "x"))  # type: ignore[arg-type]


def test_the_events_old_name_still_works_with_a_deprecation_warning() -> None:
    # the event was renamed so it no longer shares a name with the error it precedes
    with pytest.warns(DeprecationWarning, match="GuardrailTriggered"):
        old = events.GuardrailTripped  # type: ignore[attr-defined]
    assert old is events.GuardrailTriggered
    assert "GuardrailTripped" not in events.__all__


async def _hangs(ctx: RunContext[Any], value: Any) -> None:
    import asyncio

    await asyncio.Event().wait()  # a moderation call to a server that never answers


@pytest.mark.parametrize("kind", ["input", "output"])
async def test_the_runs_deadline_stops_a_guardrail_that_hangs(kind: str) -> None:
    """A check is one of the run's waits: max_seconds ends it, the run is resumable."""
    import asyncio

    from lovia import BudgetExceeded, RunBudget, Runner

    guards: dict[str, Any] = {f"{kind}_guardrails": [_hangs]}
    agent = Agent(name="a", model=ScriptedModel([] if kind == "input" else ["ok"]), **guards)
    store = MemoryStore()
    with pytest.raises(BudgetExceeded) as info:
        await asyncio.wait_for(
            Runner.run(
                agent, "hi", budget=RunBudget(max_seconds=0.1), checkpointer=store, run_id="g"
            ),
            5,
        )
    assert info.value.limit == "max_seconds"
    assert "in flight" in info.value.message
    snap = await store.load("g")
    assert snap is not None and snap.info.status == "failed"


async def test_a_cancel_stops_a_guardrail_that_hangs() -> None:
    import asyncio

    from lovia import RunCancelled, Runner

    agent = Agent(name="a", model=ScriptedModel([]), input_guardrails=[_hangs])
    handle = Runner.stream(agent, "hi")
    seen: list[str] = []
    async for event in handle:
        seen.append(type(event).__name__)
        if isinstance(event, events.GuardrailStarted):
            handle.cancel("user pressed stop")
    with pytest.raises(RunCancelled):
        await asyncio.wait_for(handle.result(), 5)
    assert seen[-2:] == ["GuardrailStarted", "RunFailed"]
