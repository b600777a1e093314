"""RunBudget: every limit ends the run with BudgetExceeded (limit, usage, turn); limits are
checked before each model call and before each tool call. max_turns has a default."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterator
from typing import Any

import pytest

from lovia import (
    Agent,
    BudgetExceeded,
    MaxTurnsExceeded,
    RunBudget,
    Runner,
    Usage,
    events,
    pricing,
    tool,
)
from lovia.runner import DEFAULT_MAX_TURNS
from lovia.stores import MemoryStore
from lovia.testing import FunctionModel, ScriptedModel, call, reply

from .helpers import Scenario, both

PRICED = "control-priced"


@pytest.fixture(autouse=True)
def priced_model() -> Iterator[None]:
    pricing.set_price("test", PRICED, input_per_mtok=100.0, output_per_mtok=100.0)
    yield
    pricing._overrides.pop(("test", PRICED), None)  # pyright: ignore[reportPrivateUsage]


def make_tools(log: list[str], sleep: float = 0.0) -> list[Any]:
    @tool(concurrency_safe=True)
    async def work(n: int) -> str:
        """Do some work."""
        if sleep:
            await asyncio.sleep(sleep)
        log.append(f"work {n}")
        return f"worked {n}"

    return [work]


def u(inp: int, out: int) -> Usage:
    return Usage(input_tokens=inp, output_tokens=out)


# (id, budget, steps, output_type, expected limit, expected turn, expected tool runs)
CASES: list[tuple[str, RunBudget, list[Any], Any, str, int, int]] = [
    ("max_turns", RunBudget(max_turns=1), [call("work", n=1), "never"], str, "max_turns", 1, 1),
    ("max_turns_3", RunBudget(max_turns=3), [call("work", n=1)] * 3, str, "max_turns", 3, 3),
    # tokens reached by a model answer: the tool call it asked for is refused
    (
        "max_input_tokens",
        RunBudget(max_input_tokens=100),
        [reply(tool_calls=[call("work", n=1)], usage=u(100, 1))],
        str,
        "max_input_tokens",
        1,
        0,
    ),
    (
        "max_output_tokens",
        RunBudget(max_output_tokens=50),
        [reply(tool_calls=[call("work", n=1)], usage=u(1, 50))],
        str,
        "max_output_tokens",
        1,
        0,
    ),
    (
        "max_total_tokens",
        RunBudget(max_total_tokens=60),
        [reply(tool_calls=[call("work", n=1)], usage=u(30, 30))],
        str,
        "max_total_tokens",
        1,
        0,
    ),
    (
        "max_cost_usd",
        RunBudget(max_cost_usd=0.01),
        [reply(tool_calls=[call("work", n=1)], usage=u(60, 40))],
        str,
        "max_cost_usd",
        1,
        0,
    ),
    # before the next model call: a repair turn would follow the invalid answer
    (
        "max_output_tokens_before_model",
        RunBudget(max_output_tokens=50),
        [reply("not a number", usage=u(1, 50)), '{"result": 1}'],
        int,
        "max_output_tokens",
        1,
        0,
    ),
    (
        "max_tool_calls",
        RunBudget(max_tool_calls=1),
        [call("work", n=1), call("work", n=2), "never"],
        str,
        "max_tool_calls",
        2,
        1,
    ),
    # max_seconds is a hard wall-clock limit: the tool still running at 0.15 s is stopped
    (
        "max_seconds",
        RunBudget(max_seconds=0.15),
        [call("work", n=1), "never"],
        str,
        "max_seconds",
        1,
        0,
    ),
]


def scenario(budget: RunBudget, steps: list[Any], output_type: Any, sleep: float) -> Scenario:
    log: list[str] = []
    model = ScriptedModel(steps, model=PRICED)
    agent = Agent(name="worker", model=model, tools=make_tools(log, sleep), output_type=output_type)
    return Scenario(agent, "go", {"budget": budget}, extra=(log, model))


@pytest.mark.parametrize(
    ("budget", "steps", "output_type", "limit", "turn", "runs"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_each_limit_ends_the_run(
    budget: RunBudget, steps: list[Any], output_type: Any, limit: str, turn: int, runs: int
) -> None:
    sleep = 0.2 if limit == "max_seconds" else 0.0
    a, b = await both(lambda: scenario(budget, steps, output_type, sleep))
    for out in (a, b):
        err = out.error
        assert isinstance(err, BudgetExceeded), err
        assert err.limit == limit
        assert err.turn == turn
        assert err.finish_reason == "budget"
        assert f"{limit}=" in err.message and f"turn {turn}" in err.message
        assert "tokens in/out" in err.message and "tool calls" in err.message
        assert err.used >= getattr(budget, limit)
        log, model = out.scenario.extra
        assert len(log) == runs
        assert len(model.requests) == turn  # no model call after the limit was hit
    failed = b.of(events.RunFailed)[0]
    assert failed.error_type == "BudgetExceeded" and failed.finish_reason == "budget"
    assert failed.usage.tool_calls == runs


async def test_cost_is_priced_from_usage() -> None:
    r = await Runner.run(
        Agent(name="p", model=ScriptedModel([reply("hi", usage=u(50, 50))], model=PRICED)), "x"
    )
    assert r.usage.cost_usd == pytest.approx(0.01)


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_parallel_calls_first_runs_second_is_refused() -> None:
    def make() -> Scenario:
        log: list[str] = []
        model = ScriptedModel([[call("work", n=1), call("work", n=2)], "never"])
        agent = Agent(name="worker", model=model, tools=make_tools(log))
        return Scenario(agent, "go", {"budget": RunBudget(max_tool_calls=1)}, extra=log)

    a, b = await both(make)
    for out in (a, b):
        assert isinstance(out.error, BudgetExceeded)
        assert out.error.limit == "max_tool_calls" and out.error.turn == 1
        assert out.scenario.extra == ["work 1"]
        assert "tool calls 1" in out.error.message
    assert [e.call.call_id for e in b.of(events.ToolCallStarted)] == ["call_1"]
    assert len(b.of(events.ToolCallCompleted)) == 1


async def test_within_budget_completes() -> None:
    def make() -> Scenario:
        log: list[str] = []
        model = ScriptedModel([[call("work", n=1), call("work", n=2)], "ok"])
        agent = Agent(name="worker", model=model, tools=make_tools(log))
        budget = RunBudget(max_turns=2, max_tool_calls=2, max_total_tokens=10_000, max_seconds=30)
        return Scenario(agent, "go", {"budget": budget})

    a, _ = await both(make)
    assert a.result is not None and a.result.output == "ok"
    assert a.result.usage.tool_calls == 2


def test_default_max_turns_is_documented() -> None:
    assert DEFAULT_MAX_TURNS == 50
    from lovia._loop.state import RunParams

    (field,) = [f for f in dataclasses.fields(RunParams) if f.name == "max_turns"]
    assert field.default == DEFAULT_MAX_TURNS
    from lovia import runner

    assert runner.DEFAULT_MAX_TURNS == 50


async def test_default_max_turns_stops_an_endless_tool_loop() -> None:
    def make() -> Scenario:
        log: list[str] = []
        model = FunctionModel(lambda request, info: call("work", n=info.index))
        agent = Agent(name="loop", model=model, tools=make_tools(log))
        return Scenario(agent, "go", extra=log)

    a, b = await both(make)
    for out in (a, b):
        assert isinstance(out.error, MaxTurnsExceeded)
        assert out.error.turn == DEFAULT_MAX_TURNS
        assert len(out.scenario.extra) == DEFAULT_MAX_TURNS
    assert b.types.count("TurnStarted") == DEFAULT_MAX_TURNS


# --------------------------------------------------------------------------- hard max_seconds

DEADLINE_S = 0.3
SLACK_S = 5.0  # generous: the failure guarded against is a 60 s hang


def _hanging(steps: list[Any], run_id: str) -> Scenario:
    log: list[str] = []
    store = MemoryStore()

    @tool
    async def forever() -> str:
        """Takes a minute."""
        log.append("forever started")
        await asyncio.sleep(60)
        return "never"

    agent = Agent(name="worker", model=ScriptedModel(steps), tools=[forever])
    options = {"budget": RunBudget(max_seconds=DEADLINE_S), "checkpointer": store, "run_id": run_id}
    return Scenario(agent, "go", options, extra={"store": store, "t0": time.monotonic()})


def _assert_out_of_time(out: Any) -> None:
    elapsed = time.monotonic() - out.scenario.extra["t0"]
    assert elapsed < DEADLINE_S + SLACK_S, f"the run took {elapsed:.1f}s to stop"
    err = out.error
    assert isinstance(err, BudgetExceeded), err
    assert err.limit == "max_seconds" and err.finish_reason == "budget"
    assert err.used >= DEADLINE_S
    assert "in flight" in err.message


async def test_max_seconds_stops_a_model_call_in_flight() -> None:
    a, b = await both(lambda: _hanging([reply("slow", delay=60)], "deadline-model"))
    for out in (a, b):
        _assert_out_of_time(out)
        snap = await out.scenario.extra["store"].load(out.scenario.options["run_id"])
        assert snap is not None and snap.info.status == "failed"
        assert snap.info.error_type == "BudgetExceeded"
    assert b.types[-3:] == ["ModelCallStarted", "ModelCallFailed", "RunFailed"]
    assert b.of(events.RunFailed)[0].finish_reason == "budget"


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_max_seconds_stops_a_running_tool() -> None:
    a, b = await both(lambda: _hanging([call("forever", id="f1"), "never"], "deadline-tool"))
    for out in (a, b):
        _assert_out_of_time(out)
        assert out.error.turn == 1
    assert "ToolCallStarted" in b.types and "ToolCallCompleted" not in b.types


async def test_max_seconds_does_not_swallow_an_outer_cancellation() -> None:
    agent = Agent(name="w", model=ScriptedModel([reply("slow", delay=60)]))
    task = asyncio.ensure_future(Runner.run(agent, "go", budget=RunBudget(max_seconds=30)))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
