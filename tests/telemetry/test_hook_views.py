"""The same run seen by live hooks and by hooks as a span processor gives equal event
sequences — over a corpus of scenarios (completed, tool error, failed turn, cancelled,
budget trip, handoff, summary)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from telemetry_helpers import REBUILT, Hanging, Otel

from lovia import Agent, AgentHooks, RunBudget, Runner, events, tool
from lovia.errors import BadRequest
from lovia.providers.base import ModelProfile, ModelRequest
from lovia.stores import MemoryStore
from lovia.telemetry import clear_prices, set_price
from lovia.testing import FunctionModel, ScriptedModel, call, reply
from lovia.testing._models import CallInfo
from lovia.usage import Usage
from lovia.view import DEFAULT_SUMMARY_PROMPT, Compaction

"""The event types a span can stand for (what hooks as a span processor receive)."""


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return "found " + q


@tool
def broken() -> str:
    """Always fails."""
    raise ValueError("boom")


@tool
def fetch(n: int) -> str:
    """Fetch page n."""
    return "x" * 1_500


@dataclass
class Scenario:
    agent: Callable[[AgentHooks], Agent[Any, Any]]
    options: dict[str, Any]
    cancel_on_delta: bool = False


def _completed(h: AgentHooks) -> Agent[Any, Any]:
    model = ScriptedModel([call("lookup", q="a"), reply("done", usage=Usage(input_tokens=7))])
    return Agent(name="a", model=model, tools=[lookup], hooks=h)


def _tool_error(h: AgentHooks) -> Agent[Any, Any]:
    model = ScriptedModel([[call("broken"), call("nope")], "recovered"])
    return Agent(name="a", model=model, tools=[broken], hooks=h)


def _failed_turn(h: AgentHooks) -> Agent[Any, Any]:
    model = ScriptedModel([call("lookup", q="a"), BadRequest("bad request")])
    return Agent(name="a", model=model, tools=[lookup], hooks=h)


def _cancelled(h: AgentHooks) -> Agent[Any, Any]:
    return Agent(name="a", model=Hanging([]), hooks=h)


def _budget(h: AgentHooks) -> Agent[Any, Any]:
    big = Usage(input_tokens=1_000_000, output_tokens=10)
    model = ScriptedModel([reply(tool_calls=[call("lookup", q="a")], usage=big)])
    return Agent(name="a", model=model, tools=[lookup], hooks=h)


def _handoff(h: AgentHooks) -> Agent[Any, Any]:
    expert = Agent(name="expert", model=ScriptedModel(["expert answer"]), hooks=h)
    model = ScriptedModel([call("transfer_to_expert")])
    return Agent(name="triage", model=model, handoffs=[expert], hooks=h)


def _summary(h: AgentHooks) -> Agent[Any, Any]:
    def answer(req: ModelRequest, info: CallInfo) -> Any:
        if req.system == DEFAULT_SUMMARY_PROMPT:
            return "summary so far"
        k = sum(r.system != DEFAULT_SUMMARY_PROMPT for r in info.requests)
        return call("fetch", n=k) if k < 12 else "done"

    model = FunctionModel(answer, profile=ModelProfile(context_window=4_000))
    return Agent(name="a", model=model, tools=[fetch], context=Compaction(), hooks=h)


CORPUS = {
    "completed": Scenario(_completed, {}),
    "tool_error": Scenario(_tool_error, {}),
    "failed_turn": Scenario(_failed_turn, {}),
    "cancelled": Scenario(_cancelled, {}, cancel_on_delta=True),
    "budget_trip": Scenario(_budget, {"budget": RunBudget(max_cost_usd=0.5)}),
    "handoff": Scenario(_handoff, {}),
    "summary": Scenario(_summary, {"max_turns": 20}),
}


def key(e: events.Event) -> tuple[Any, ...]:
    """What both views must agree on for one event."""
    out: tuple[Any, ...] = (type(e).__name__, e.run_id, e.agent, e.turn)
    if isinstance(e, events.ModelCallCompleted):
        u = e.usage
        out += (
            getattr(e, "purpose", "main"),
            e.model,
            u.input_tokens,
            u.output_tokens,
            u.cost_usd,
            e.finish_reason,
        )
    elif isinstance(e, events.ModelCallFailed):
        out += (getattr(e, "purpose", "main"), e.model, e.error_type)
    elif isinstance(e, events.ToolCallCompleted):
        out += (e.call.name, e.call.call_id, e.is_error, e.error_type, e.started)
    elif isinstance(e, events.TurnEnded):
        out += (e.usage.input_tokens, e.usage.output_tokens, e.usage.cost_usd, e.tool_calls)
    elif isinstance(e, events.RunCompleted | events.RunFailed):
        u = e.usage
        out += (e.turns, e.finish_reason, u.input_tokens, u.output_tokens, u.cost_usd)
        if isinstance(e, events.RunFailed):
            out += (e.error_type,)
    elif isinstance(e, events.ViewBuilt):
        out += (e.view_hash, e.entries, e.injected, e.compacted, e.attempt)
    elif isinstance(e, events.HandoffOccurred):
        out += (e.from_agent, e.to_agent)
    elif isinstance(e, events.CompactionApplied):
        out += (e.kind,)
    elif isinstance(e, events.CheckpointSaved):
        out += (e.kind, e.entries, e.bytes)
    return out


@pytest.fixture(autouse=True)
def _prices() -> Any:
    set_price("test", "scripted", input_per_mtok=1.0, output_per_mtok=2.0)
    set_price("test", "function", input_per_mtok=1.0, output_per_mtok=2.0)
    yield
    clear_prices()


@pytest.mark.parametrize("checkpointed", [False, True])
@pytest.mark.parametrize("name", sorted(CORPUS))
async def test_live_hooks_and_span_hooks_see_the_same_run(
    otel: Otel, name: str, checkpointed: bool
) -> None:
    scenario = CORPUS[name]
    live: list[events.Event] = []
    rebuilt: list[events.Event] = []
    live_hooks, span_hooks = AgentHooks(), AgentHooks()
    live_hooks.on(events.Event)(lambda e, ctx: live.append(e))
    span_hooks.on(events.Event)(lambda e, ctx: rebuilt.append(e))
    otel.tp.add_span_processor(span_hooks)
    options = dict(scenario.options)
    if checkpointed:
        options["checkpointer"] = MemoryStore()
    handle = Runner.stream(scenario.agent(live_hooks), "go", tracer_provider=otel.tp, **options)
    async for event in handle:
        if scenario.cancel_on_delta and isinstance(event, events.TextDelta):
            handle.cancel("stop")
    try:
        await handle.result()
    except Exception:
        pass
    terminal = live[-1]
    assert isinstance(terminal, events.RunCompleted | events.RunFailed)
    expected = [key(e) for e in as_span_processor_order(live) if isinstance(e, REBUILT)]
    assert [key(e) for e in rebuilt] == expected
    if checkpointed:
        assert any(isinstance(e, events.CheckpointSaved) for e in rebuilt)


def as_span_processor_order(live: list[events.Event]) -> list[events.Event]:
    """The live sequence with each checkpoint write moved to where the span carrying
    it as a span event ends: just before that span's own event (the innermost open
    view, turn or run; a turn the run failed in ends right before the run)."""
    out: list[events.Event] = []
    carriers: list[tuple[str, list[events.Event]]] = []
    for e in live:
        if isinstance(e, events.RunStarted | events.TurnStarted | events.ViewStarted):
            carriers.append((type(e).__name__, []))
        elif isinstance(e, events.CheckpointSaved) and carriers:
            carriers[-1][1].append(e)
            continue
        elif isinstance(e, events.ViewBuilt | events.TurnEnded):
            out.extend(carriers.pop()[1])
        elif isinstance(e, events.RunCompleted | events.RunFailed):
            while carriers:
                out.extend(carriers.pop()[1])
        out.append(e)
    return out
