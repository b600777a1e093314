"""Parenting, hooks as span processors, usage totals, run/stream parity, zero overhead."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from telemetry_helpers import Otel, span_tree

from lovia import Agent, AgentHooks, Runner, events, tool
from lovia.errors import HookError, MaxTurnsExceeded, RateLimited
from lovia.telemetry import event_from_span, make_run_tracer
from lovia.testing import ScriptedModel, call, reply
from lovia.usage import Usage

VOLATILE = {
    "lovia.run.id",
    "gen_ai.response.id",
    "gen_ai.response.time_to_first_chunk",
    "lovia.tool.idempotency_key",
    "lovia.view.hash",
    "lovia.price_table.version",
}


def by_name(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


async def test_nested_run_inside_a_tool_is_a_child_of_the_tool_span(otel: Otel) -> None:
    inner = Agent(name="researcher", model=ScriptedModel(["42"]))

    @tool
    async def ask_researcher(question: str) -> str:
        """Ask the research agent."""
        result = await Runner.run(inner, question, tracer_provider=otel.tp)
        return str(result.output)

    outer = Agent(
        name="lead",
        model=ScriptedModel([call("ask_researcher", question="q"), "ok"]),
        tools=[ask_researcher],
    )
    await Runner.run(outer, "go", tracer_provider=otel.tp)
    spans = otel.spans()
    (tool_span,) = by_name(spans, "execute_tool ask_researcher")
    (inner_run,) = by_name(spans, "invoke_agent researcher")
    (outer_run,) = by_name(spans, "invoke_agent lead")
    assert inner_run.parent is not None
    assert inner_run.parent.span_id == tool_span.context.span_id
    assert inner_run.context.trace_id == outer_run.context.trace_id
    (inner_chat,) = [
        s
        for s in by_name(spans, "chat ")
        if s.attributes and s.attributes["gen_ai.agent.name"] == "researcher"
    ]
    assert inner_chat.context.trace_id == outer_run.context.trace_id


async def test_run_inside_a_user_span_is_its_child(otel: Otel) -> None:
    user_tracer = otel.tp.get_tracer("app")
    with user_tracer.start_as_current_span("handle_request") as request_span:
        await Runner.run(Agent(name="a", model=ScriptedModel(["hi"])), "x", tracer_provider=otel.tp)
    (run,) = by_name(otel.spans(), "invoke_agent a")
    assert run.parent is not None
    assert run.parent.span_id == request_span.get_span_context().span_id


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_one_run_failed_handler_sees_every_agent(otel: Otel) -> None:
    hooks = AgentHooks()
    seen: list[tuple[str, str]] = []
    seen_async: list[str] = []

    @hooks.on(events.RunFailed)
    def page(ev: events.RunFailed, ctx: Any) -> None:
        assert ctx is None
        seen.append((ev.agent, ev.error_type))

    @hooks.on(events.RunFailed)
    async def page_async(ev: events.RunFailed, ctx: Any) -> None:
        seen_async.append(ev.agent)

    otel.tp.add_span_processor(hooks)  # type: ignore[arg-type]
    looping = Agent(name="looper", model=ScriptedModel([call("noop"), call("noop")]))
    flaky = Agent(name="flaky", model=ScriptedModel([RateLimited("429")]))
    with pytest.raises(MaxTurnsExceeded):
        await Runner.run(looping, "go", max_turns=1, tracer_provider=otel.tp)
    with pytest.raises(RateLimited):
        await Runner.run(flaky, "go", tracer_provider=otel.tp)
    await Runner.run(Agent(name="fine", model=ScriptedModel(["ok"])), "go", tracer_provider=otel.tp)
    await asyncio.sleep(0)
    assert seen == [("looper", "MaxTurnsExceeded"), ("flaky", "RateLimited")]
    assert seen_async == ["looper", "flaky"]


async def test_spans_turn_back_into_typed_events(otel: Otel) -> None:
    hooks = AgentHooks()
    got: list[events.Event] = []
    hooks.on(events.Event)(lambda ev, ctx: got.append(ev))
    otel.tp.add_span_processor(hooks)  # type: ignore[arg-type]
    model = ScriptedModel(
        [
            call("weather", city="Oslo"),
            reply("cold", usage=Usage(input_tokens=30, output_tokens=5, cache_read_tokens=10)),
        ]
    )

    @tool
    async def weather(city: str) -> str:
        """Weather."""
        return "cold"

    result = await Runner.run(
        Agent(name="w", model=model, tools=[weather]), "go", tracer_provider=otel.tp
    )
    kinds = [type(e).__name__ for e in got]
    assert kinds == [
        "ViewBuilt",
        "MessageCompleted",
        "ToolCallCompleted",
        "TurnEnded",
        "ViewBuilt",
        "MessageCompleted",
        "TurnEnded",
        "RunCompleted",
    ]
    done = got[-1]
    assert isinstance(done, events.RunCompleted)
    assert (done.agent, done.run_id, done.turns, done.finish_reason) == (
        "w",
        result.run_id,
        2,
        "stop",
    )
    assert done.usage.input_tokens == result.usage.input_tokens
    msg = got[5]
    assert isinstance(msg, events.MessageCompleted)
    assert (msg.usage.input_tokens, msg.usage.cache_read_tokens, msg.finish_reason) == (
        30,
        10,
        "stop",
    )
    tool_done = got[2]
    assert isinstance(tool_done, events.ToolCallCompleted)
    assert (tool_done.call.name, tool_done.call.call_id, tool_done.is_error) == (
        "weather",
        "call_1",
        False,
    )
    assert event_from_span(otel.tp.get_tracer("x").start_span("not lovia")) is None


async def test_usage_totals_only_on_chat_spans(otel: Otel) -> None:
    model = ScriptedModel(
        [
            call("weather", city="A"),
            reply(
                "done",
                usage=Usage(
                    input_tokens=100,
                    output_tokens=20,
                    cache_read_tokens=40,
                    cache_write_tokens=5,
                    reasoning_tokens=3,
                ),
            ),
        ]
    )

    @tool
    async def weather(city: str) -> str:
        """Weather."""
        return "sun"

    result = await Runner.run(
        Agent(name="u", model=model, tools=[weather]), "go", tracer_provider=otel.tp
    )
    spans = otel.spans()
    total = sum(int((s.attributes or {}).get("gen_ai.usage.input_tokens", 0)) for s in spans)
    assert total == result.usage.input_tokens
    out = sum(int((s.attributes or {}).get("gen_ai.usage.output_tokens", 0)) for s in spans)
    assert out == result.usage.output_tokens
    for s in spans:
        usage_keys = [k for k in (s.attributes or {}) if k.startswith("gen_ai.usage.")]
        assert not usage_keys or s.name.startswith("chat "), s.name
    (run,) = by_name(spans, "invoke_agent")
    assert run.attributes is not None
    assert run.attributes["lovia.run.usage.input_tokens"] == result.usage.input_tokens
    assert run.attributes["lovia.run.usage.cache_read_tokens"] == 40


def _full_tree(spans: tuple[ReadableSpan, ...]) -> list[dict[str, Any]]:
    keys = sorted({k for s in spans for k in (s.attributes or {})} - VOLATILE)
    return span_tree(spans, keys, events=True)


@pytest.mark.parametrize("fail", [False, True])
async def test_run_and_stream_export_the_same_tree(otel: Otel, fail: bool) -> None:
    def agent() -> Agent[Any, Any]:
        steps: list[Any] = [call("weather", city="X"), RateLimited("429") if fail else "ok"]

        @tool
        async def weather(city: str) -> str:
            """Weather."""
            return "sun"

        return Agent(name="p", model=ScriptedModel(steps), tools=[weather])

    try:
        await Runner.run(agent(), "go", run_id="same", tracer_provider=otel.tp)
    except RateLimited:
        assert fail
    via_run = _full_tree(otel.spans())
    otel.exporter.clear()
    stream = Runner.stream(agent(), "go", run_id="same", tracer_provider=otel.tp)
    async for _ in stream:
        pass
    via_stream = _full_tree(otel.spans())
    assert via_run == via_stream
    assert via_run[0].get("status") == ("ERROR" if fail else None)


def test_make_run_tracer_is_none_without_an_sdk() -> None:
    code = (
        "import lovia, lovia.telemetry\n"
        "from opentelemetry import trace, metrics\n"
        "from lovia.telemetry import make_run_tracer\n"
        "assert make_run_tracer() is None\n"
        "assert type(trace.get_tracer_provider()).__name__ == 'ProxyTracerProvider'\n"
        "assert type(metrics.get_meter_provider()).__name__ == '_ProxyMeterProvider'\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "assert make_run_tracer(TracerProvider()) is not None\n"
        "import sys; assert 'lovia.telemetry.sdk' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


async def test_deltas_do_no_span_work(otel: Otel) -> None:
    tracer = make_run_tracer(otel.tp)
    assert tracer is not None
    started = events.RunStarted(run_id="r", agent="a", model="m", provider="p")
    tracer.start(started)
    chat = tracer.start(
        events.ModelCallStarted(run_id="r", agent="a", turn=1, model="m", provider="p")
    )
    delta = events.TextDelta(run_id="r", agent="a", turn=1, text="x")
    assert tracer.start(delta) is chat
    tracer.end(delta, chat)
    assert trace.get_current_span() is trace.INVALID_SPAN
    assert otel.spans() == ()


def test_the_tracers_delta_shortcut_agrees_with_the_mapping_table() -> None:
    """``RunTracer`` returns the chat span for streamed chunks before the table lookup;
    the table says the same for exactly those types (no other event is skipped)."""
    from lovia.telemetry.mapping import EVENTS
    from lovia.telemetry.tracer import _DELTAS  # pyright: ignore[reportPrivateUsage]

    chunks = {t for t, p in EVENTS.items() if (p.action, p.slot) == ("attach", "chat")}
    assert set(_DELTAS) == chunks - {events.ProviderRetry}


async def test_run_span_links_from_trace_links(otel: Otel) -> None:
    tracer = make_run_tracer(otel.tp)
    assert tracer is not None
    link = f"{7:032x}:{9:016x}"
    ev = events.RunStarted(run_id="r", agent="a", resumed=True, trace_links=(link, link, "bad"))
    tracer.start(ev)
    done = events.RunCompleted(run_id="r", agent="a", turns=1)
    tracer.end(done, tracer.start(done))
    (run,) = otel.spans()
    assert [(lk.context.trace_id, lk.context.span_id) for lk in run.links] == [(7, 9)]


@pytest.mark.parametrize("is_async", [False, True])
async def test_a_strict_hook_on_a_span_fails_with_a_typed_hook_error(
    otel: Otel, is_async: bool
) -> None:
    """The span-processor path fails the way live hooks do: a HookError naming the
    handler and the event, with a hint, the handler's own error as ``__cause__``."""
    await Runner.run(Agent(name="a", model=ScriptedModel(["hi"])), "go", tracer_provider=otel.tp)
    (run_span,) = by_name(otel.spans(), "invoke_agent a")
    hooks = AgentHooks(strict=True)

    def broken(ev: events.RunCompleted, ctx: Any) -> None:
        raise ValueError("boom")

    async def broken_async(ev: events.RunCompleted, ctx: Any) -> None:
        raise ValueError("boom")

    handler = broken_async if is_async else broken
    hooks.on(events.RunCompleted)(handler)
    if is_async:  # no running loop in this thread: the handler runs to completion
        with pytest.raises(HookError) as info:
            await asyncio.to_thread(hooks.on_end, run_span)
    else:
        with pytest.raises(HookError) as info:
            hooks.on_end(run_span)
    assert info.value.event == "RunCompleted" and handler.__name__ in info.value.hook
    assert info.value.hint and isinstance(info.value.__cause__, ValueError)
