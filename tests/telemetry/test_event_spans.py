"""Events are never changed once built: a traced run's stream yields events built with
their phase's span (``event.span``), the events the phases made stay as they were, and
the spans the loop parents later work under (the run's, each tool call's) stay right."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from telemetry_helpers import Otel

import lovia._loop as loop_module
import lovia._loop.tool_calls as tool_calls_module
from lovia import Agent, AgentHooks, Runner, events, tool
from lovia.stores import MemoryStore
from lovia.telemetry.tracer import make_run_tracer
from lovia.testing import ScriptedModel, call

inside: dict[str, int] = {}
"""Tool argument → span id current inside the tool (its parent is the loop's span)."""


@tool(concurrency_safe=True)
async def probe(key: str) -> str:
    """Record the span current inside the tool."""
    await asyncio.sleep(0)
    inside[key] = trace.get_current_span().get_span_context().span_id
    return f"seen {key}"


@tool
def alone(key: str) -> str:
    """A tool that is not concurrency safe: it runs alone, after its ledger write."""
    inside[key] = trace.get_current_span().get_span_context().span_id
    return f"alone {key}"


def _agent(hooks: AgentHooks | None = None) -> Agent[Any, Any]:
    model = ScriptedModel(
        [
            [call("probe", key="p1", id="c1"), call("probe", key="p2", id="c2")],
            [call("alone", key="a1", id="c3")],
            "done",
        ]
    )
    return Agent(name="spy", model=model, tools=[probe, alone], hooks=hooks)


def _fields(event: events.Event) -> dict[str, tuple[int, str]]:
    """Every field of ``event``: the object it holds and what that object reads as."""
    return {
        f.name: (id(getattr(event, f.name)), repr(getattr(event, f.name)))
        for f in dataclasses.fields(event)
    }


def _snapshot(event: events.Event) -> dict[str, tuple[int, str]]:
    out = _fields(event)
    if isinstance(event, events.ChildRunEvent):
        out.update({f"event.{k}": v for k, v in _fields(event.event).items()})
    return out


def _span_id(event: events.Event) -> int:
    assert event.span is not None, f"{type(event).__name__} has no span"
    return event.span.get_span_context().span_id


def _ids(span: ReadableSpan) -> tuple[int, int]:
    """``(trace_id, span_id)`` of a finished span."""
    assert span.context is not None
    return span.context.trace_id, span.context.span_id


def _sid(span: ReadableSpan) -> int:
    return _ids(span)[1]


def _call_id(span: ReadableSpan) -> str:
    return str((span.attributes or {})["gen_ai.tool.call.id"])


def _named(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


async def test_no_yielded_event_changes_and_hooks_see_the_yielded_ones(otel: Otel) -> None:
    inside.clear()
    hooks = AgentHooks()
    hooked: list[events.Event] = []

    @hooks.on(events.Event)
    def seen(ev: events.Event, ctx: Any) -> None:
        hooked.append(ev)

    yielded: list[tuple[events.Event, dict[str, tuple[int, str]]]] = []
    handle = Runner.stream(_agent(hooks), "go", checkpointer=MemoryStore())
    async for event in handle:
        yielded.append((event, _snapshot(event)))
    await handle.result()

    assert len(yielded) > 20
    for event, at_yield in yielded:  # nothing was set, swapped or grown after the yield
        assert _snapshot(event) == at_yield, type(event).__name__
    # hooks ran on the very objects the stream yielded, in the same order
    assert [id(e) for e in hooked] == [id(e) for e, _ in yielded]
    kinds = {type(e) for e, _ in yielded}
    assert {events.RunStarted, events.ToolCallStarted, events.TextDelta} <= kinds
    assert {events.CheckpointSaved, events.RunCompleted} <= kinds
    assert all(e.span is not None for e, _ in yielded)  # every event of a traced run


async def test_spans_on_yielded_events_are_their_phases_spans(otel: Otel) -> None:
    inside.clear()
    handle = Runner.stream(_agent(), "go")
    seen = [e async for e in handle]
    await handle.result()
    spans = otel.spans()
    ids = {_sid(s): s for s in spans}

    (run,) = _named(spans, "invoke_agent spy")
    (started,) = [e for e in seen if isinstance(e, events.RunStarted)]
    (completed,) = [e for e in seen if isinstance(e, events.RunCompleted)]
    assert _span_id(started) == _span_id(completed) == _sid(run)

    tools = {_call_id(s): s for s in spans if s.name.startswith("execute_tool")}
    assert sorted(tools) == ["c1", "c2", "c3"]
    for event in seen:
        if isinstance(event, (events.ToolCallStarted, events.ToolCallCompleted)):
            assert _span_id(event) == _sid(tools[event.call.call_id])
    chats = _named(spans, "chat scripted")
    assert len(chats) == 3
    call_spans = [
        _span_id(e) for e in seen if isinstance(e, (events.ModelCallStarted, events.TextDelta))
    ]
    assert set(call_spans) <= {_sid(s) for s in chats}
    assert any(isinstance(e, events.TextDelta) for e in seen)
    for event in seen:  # a turn's events carry their turn span
        if isinstance(event, (events.TurnStarted, events.TurnEnded)):
            assert ids[_span_id(event)].name == "lovia.turn"


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[events.Event]:
    """The ``RunStarted`` and ``ToolCallStarted`` events as the phases build them."""
    out: list[events.Event] = []
    real_started = tool_calls_module._started  # pyright: ignore[reportPrivateUsage]
    real_run_started = loop_module.run_started

    def started(*args: Any) -> events.ToolCallStarted:
        event = real_started(*args)
        out.append(event)
        return event

    def run_started(*args: Any, **kwargs: Any) -> events.RunStarted:
        event = real_run_started(*args, **kwargs)
        out.append(event)
        return event

    monkeypatch.setattr(tool_calls_module, "_started", started)
    monkeypatch.setattr(loop_module, "run_started", run_started)
    return out


async def test_phase_events_get_their_span_at_emission_and_tool_work_is_parented_right(
    otel: Otel, built: list[events.Event]
) -> None:
    """The events the phases build are the ones yielded, each given the span the emitter
    opened for it (no copy). The phases get the spans they need (work inside a tool is a
    child of its ``execute_tool`` span; the run's trace ids are stored with the run)."""
    inside.clear()
    store = MemoryStore()
    handle = Runner.stream(_agent(), "go", run_id="r1", checkpointer=store)
    seen = [e async for e in handle]
    await handle.result()

    assert [type(e).__name__ for e in built] == ["RunStarted"] + ["ToolCallStarted"] * 3
    assert {id(e) for e in built} <= {id(e) for e in seen}
    spans = otel.spans()
    by_call = {_call_id(s): s for s in spans if s.name.startswith("execute_tool")}
    for event in built[1:]:  # each ToolCallStarted carries its own execute_tool span
        assert isinstance(event, events.ToolCallStarted) and event.span is not None
        assert event.span.get_span_context().span_id == _sid(by_call[event.call.call_id])
    tools = {_call_id(s): _sid(s) for s in spans if s.name.startswith("execute_tool")}
    assert inside == {"p1": tools["c1"], "p2": tools["c2"], "a1": tools["c3"]}
    (run,) = _named(spans, "invoke_agent spy")
    snap = await store.load("r1")
    assert snap is not None
    trace_id, span_id = _ids(run)
    assert (snap.info.trace_id, snap.info.span_id) == (f"{trace_id:032x}", f"{span_id:016x}")


async def test_record_returns_the_span_and_leaves_the_event_as_built(otel: Otel) -> None:
    tracer = make_run_tracer(otel.tp)
    assert tracer is not None
    opened = events.ModelCallStarted(run_id="r", agent="a", model="m", provider="p")
    chat = tracer.record(opened)
    assert opened.span is None
    assert chat is not None and chat.get_span_context().is_valid
    done = events.MessageCompleted(run_id="r", agent="a", model="m", provider="p")
    assert tracer.record(done) is chat
    assert done.span is None
    (span,) = otel.spans()  # record ended the chat span with its completion
    assert _sid(span) == chat.get_span_context().span_id


async def test_an_untraced_run_yields_the_phases_own_events(built: list[events.Event]) -> None:
    """No tracer and no hook: the events go out as built, with no span and no copy."""
    inside.clear()
    handle = Runner.stream(_agent(), "go")
    seen = [e async for e in handle]
    await handle.result()
    assert seen and all(e.span is None for e in seen)
    assert len(built) == 4 and {id(e) for e in built} <= {id(e) for e in seen}
    assert inside == {"p1": 0, "p2": 0, "a1": 0}  # no span: the invalid span's id


async def test_only_events_that_open_a_span_get_one_from_the_emitter(
    otel: Otel, built: list[events.Event]
) -> None:
    """Chunks and ends are built with the span their phase already has; the emitter sets
    ``span`` only on the events whose span it has just opened, on the phase's own object
    (no copy), before any hook or consumer sees it."""
    inside.clear()
    handle = Runner.stream(_agent(), "go")
    seen = [e async for e in handle]
    await handle.result()
    assert any(isinstance(e, events.ToolCallDelta) for e in seen)
    assert all(e.span is not None for e in seen)
    assert built and {id(e) for e in built} <= {id(e) for e in seen}  # the phases' objects
    opened = [e for e in seen if type(e) in loop_module._PARENTS]  # pyright: ignore[reportPrivateUsage]
    names = {type(e).__name__ for e in opened}
    assert names == {
        "ModelCallStarted",
        "RunStarted",
        "ToolCallStarted",
        "TurnStarted",
        "ViewStarted",
    }
    calls = [e for e in seen if isinstance(e, events.ModelCallStarted)]
    assert len(calls) == 3 and len({id(e.span) for e in calls}) == 3  # a span each
