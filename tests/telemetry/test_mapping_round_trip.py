"""The span table read both ways: what a run's spans say (GenAI attributes a backend or a
dashboard reads) and the typed events ``lovia trace``, the web and hooks as a span
processor rebuild from them, field by field, against what the run emitted live."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import Status, StatusCode
from pydantic import BaseModel
from telemetry_helpers import REBUILT, Hanging, Otel

from lovia import Agent, RunBudget, Runner, events, tool
from lovia.errors import BadRequest
from lovia.model import ModelSettings
from lovia.providers.base import ModelProfile, ModelRequest
from lovia.stores import MemoryStore
from lovia.telemetry import attributes as A
from lovia.telemetry import clear_prices, event_from_span, events_from_span, set_price
from lovia.telemetry.mapping import EVENTS, Finished, _back_plugin, run_outcome
from lovia.testing import FunctionModel, ScriptedModel, call, reply
from lovia.testing._models import CallInfo
from lovia.transcript import ToolCallEntry, ToolResultEntry
from lovia.usage import Usage
from lovia.view import DEFAULT_SUMMARY_PROMPT, Compaction

CONTENT = frozenset({"output", "entries", "record", "request", "span", "child_usage"})
"""Fields a span never carries (content, objects): a rebuilt event leaves them empty
(``entries`` as a count, on views, checkpoints and session writes, is kept)."""


@pytest.fixture(autouse=True)
def _prices() -> Any:
    set_price("test", "scripted", input_per_mtok=1.0, output_per_mtok=2.0)
    yield
    clear_prices()


# -- the corpus: runs that between them use every row of the table ------------------------


class City(BaseModel):
    name: str


@tool(description="Look something up.")
def lookup(q: str) -> str:
    """Look something up."""
    return "found " + q


@tool
def broken() -> str:
    """Always fails."""
    raise ValueError("boom")


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


@tool
def fetch(n: int) -> str:
    """Fetch page n."""
    return "x" * 1_500


@dataclass
class Plugin:
    """A plugin whose setup or close can fail."""

    name: str = "notes"
    fail_close: bool = False

    async def setup(self, ctx: Any) -> Any:
        from lovia.plugins.base import PluginInstance

        def close() -> None:
            if self.fail_close:
                raise OSError("notes file is gone")

        return PluginInstance(aclose=close)


@dataclass
class Scenario:
    agent: Callable[[], Agent[Any, Any]]
    options: Callable[[], dict[str, Any]] = dict
    """Run options, made afresh for each run (stores are per run)."""
    cancel_on: type[events.Event] | None = None
    """Cancel the run as soon as it emits an event of this type."""


@tool
async def wait() -> str:
    """Waits for ever (a call to cancel)."""
    await asyncio.Event().wait()
    return "never"


def _hanging_guard() -> Agent[Any, Any]:
    async def slow_check(ctx: Any, value: Any) -> str | None:
        await asyncio.Event().wait()
        return None

    return Agent(name="a", model=ScriptedModel([]), input_guardrails=[slow_check])


def _rich() -> Agent[Any, Any]:
    model = ScriptedModel(
        [
            [call("lookup", q="a"), call("broken"), call("nope")],
            reply(
                '{"name": "Oslo"}',
                usage=Usage(
                    input_tokens=70,
                    output_tokens=30,
                    cache_read_tokens=11,
                    cache_write_tokens=5,
                    reasoning_tokens=3,
                ),
            ),
        ],
        profile=ModelProfile(native_json_schema=True, usage_in_stream=True),
    )
    model.server_address, model.server_port = "llm.example", 8443
    return Agent(
        name="Trip Planner",
        description="plans trips",
        model=model,
        tools=[lookup, broken],
        output_type=City,
        plugins=[Plugin(fail_close=True)],
        model_settings=ModelSettings(
            temperature=1, top_p=0.5, max_tokens=50, stop=("END", "STOP"), seed=7
        ),
    )


def _guarded(trip: bool) -> Callable[[], Agent[Any, Any]]:
    def no_secrets(ctx: Any, value: Any) -> str | None:
        return "mentions a secret" if trip else None

    def build() -> Agent[Any, Any]:
        return Agent(
            name="guarded",
            model=ScriptedModel([] if trip else ["fine"]),
            input_guardrails=[no_secrets],
        )

    return build


def _failed_call() -> Agent[Any, Any]:
    model = ScriptedModel([call("lookup", q="a"), BadRequest("bad request")])
    return Agent(name="a", model=model, tools=[lookup])


def _paused() -> Agent[Any, Any]:
    return Agent(name="support", model=ScriptedModel([call("refund", order="o1")]), tools=[refund])


def _summary() -> Agent[Any, Any]:
    def answer(req: ModelRequest, info: CallInfo) -> Any:
        if req.system == DEFAULT_SUMMARY_PROMPT:
            return "summary so far"
        k = sum(r.system != DEFAULT_SUMMARY_PROMPT for r in info.requests)
        return call("fetch", n=k) if k < 12 else "done"

    model = FunctionModel(answer, profile=ModelProfile(context_window=4_000))
    return Agent(name="a", model=model, tools=[fetch], context=Compaction())


def _handoff() -> Agent[Any, Any]:
    expert = Agent(name="expert", model=ScriptedModel(["expert answer"]))
    return Agent(
        name="triage", model=ScriptedModel([call("transfer_to_expert")]), handoffs=[expert]
    )


def _budget() -> Agent[Any, Any]:
    big = Usage(input_tokens=1_000_000, output_tokens=10)
    model = ScriptedModel([reply(tool_calls=[call("lookup", q="a")], usage=big)])
    return Agent(name="a", model=model, tools=[lookup])


CORPUS = {
    "rich": Scenario(
        _rich,
        lambda: {"labels": {"tenant": "acme"}, "session": MemoryStore(), "session_id": "s1"},
    ),
    "guard_passes": Scenario(_guarded(False)),
    "guard_trips": Scenario(_guarded(True)),
    "failed_call": Scenario(_failed_call),
    "paused": Scenario(_paused),
    "cancelled": Scenario(lambda: Agent(name="a", model=Hanging([])), cancel_on=events.TextDelta),
    # spans the run's end closes stand for nothing: the live stream emitted no end for them
    "cancelled_in_tool": Scenario(
        lambda: Agent(name="a", model=ScriptedModel([call("wait")]), tools=[wait]),
        cancel_on=events.ToolCallStarted,
    ),
    "cancelled_in_guardrail": Scenario(_hanging_guard, cancel_on=events.GuardrailStarted),
    "summary": Scenario(_summary, lambda: {"max_turns": 20}),
    "handoff": Scenario(_handoff),
    "budget": Scenario(_budget, lambda: {"budget": RunBudget(max_cost_usd=0.5)}),
}


async def _run(otel: Otel, scenario: Scenario) -> list[events.Event]:
    """The run's live events (every run checkpoints: its writes are in the trace too)."""
    options = {"checkpointer": MemoryStore(), **scenario.options()}
    handle = Runner.stream(scenario.agent(), "go", tracer_provider=otel.tp, **options)
    live: list[events.Event] = []
    async for event in handle:
        live.append(event)
        if scenario.cancel_on is not None and isinstance(event, scenario.cancel_on):
            handle.cancel("stop")
    try:
        await handle.result()
    except Exception:
        pass
    return live


def fields_of(e: events.Event) -> dict[str, Any]:
    """Every compared field of an event but content; a tool call by its id and name."""
    out: dict[str, Any] = {"type": type(e).__name__}
    for f in fields(e):
        value = getattr(e, f.name)
        if not f.compare or (f.name in CONTENT and not isinstance(value, int)):
            continue  # a count of entries is kept, the entries themselves are not
        if isinstance(value, ToolCallEntry):
            value = (value.call_id, value.name)
        elif isinstance(value, ToolResultEntry):
            value = (value.call_id, value.name, value.is_error)
        elif isinstance(value, BaseException):
            value = type(value).__name__
        out[f.name] = value
    return out


class FailingStore(MemoryStore):
    """Refuses its third checkpoint append (a tool result): that write's event fails."""

    appends = 0

    async def append(self, run_id: str, records: Any, *, fence: int | None = None) -> int:
        self.appends += 1
        if self.appends == 3:
            from lovia.errors import StoreError

            raise StoreError("disk full")
        return await super().append(run_id, records, fence=fence)


CORPUS["checkpoint_fails"] = Scenario(
    lambda: Agent(name="a", model=ScriptedModel([call("lookup", q="a")]), tools=[lookup]),
    lambda: {"checkpointer": FailingStore()},
)


def _stands_for(live: list[events.Event]) -> list[events.Event]:
    """The live events spans stand for (a tripped guardrail's span: the trigger only)."""
    return [
        e
        for e in live
        if isinstance(e, REBUILT) and not (isinstance(e, events.GuardrailCompleted) and e.tripped)
    ]


def as_rebuilt(e: events.Event) -> dict[str, Any]:
    """What a span keeps of a live event: every field but content, timings (checked
    against the span's own times), messages and error objects (the span's status text),
    and a compaction's entry ids (a count on the span)."""
    out = fields_of(e)
    for lost in ("message", "error", "entry_ids"):
        out.pop(lost, None)
    if not isinstance(e, events.CheckpointSaved):
        out.pop("duration_s", None)  # a write's own duration is kept on its span event
    return out


@pytest.mark.parametrize("name", sorted(CORPUS))
async def test_every_span_turns_back_into_the_event_the_run_emitted(otel: Otel, name: str) -> None:
    scenario = CORPUS[name]
    live = await _run(otel, scenario)
    rebuilt = [e for s in otel.spans() for e in events_from_span(s)]
    # the order spans end in is pinned by the hook tests; here: the same events, every field
    assert sorted(map(as_rebuilt, rebuilt), key=repr) == sorted(
        map(as_rebuilt, _stands_for(live)), key=repr
    )


def _status_text(span: ReadableSpan) -> str:
    return span.status.description or "" if span.status.status_code == StatusCode.ERROR else ""


@pytest.mark.parametrize("name", sorted(CORPUS))
async def test_a_rebuilt_event_takes_its_duration_and_error_text_from_the_span(
    otel: Otel, name: str
) -> None:
    scenario = CORPUS[name]
    await _run(otel, scenario)
    for span in otel.spans():
        own = event_from_span(span)
        if own is None:
            continue
        if hasattr(own, "duration_s"):
            assert own.duration_s == (span.end_time - span.start_time) / 1e9  # type: ignore[operator]
        message = getattr(own, "message", None)
        if message is not None:
            assert message == _status_text(span)
        if isinstance(own, events.PluginSetup | events.PluginClosed | events.CheckpointSaved):
            error = own.error
            failed = span.status.status_code == StatusCode.ERROR
            assert (str(error) if error is not None else None) == (
                _status_text(span) if failed else None
            )


async def test_the_corpus_rebuilds_every_kind_of_event_a_span_stands_for(otel: Otel) -> None:
    for scenario in CORPUS.values():
        await _run(otel, scenario)
    rebuilt = [e for s in otel.spans() for e in events_from_span(s)]
    kinds = {type(e) for e in rebuilt}
    assert kinds >= {k for k in REBUILT if k is not events.ModelCallCompleted} | {
        events.MessageCompleted,
        events.SummaryCompleted,
    }
    outcomes = {(type(e).__name__, getattr(e, "error_type", None)) for e in rebuilt}
    assert {("RunFailed", "RunCancelled"), ("RunFailed", "ApprovalPending")} <= outcomes
    assert any(isinstance(e, events.PluginClosed) and e.error is not None for e in rebuilt)
    assert any(isinstance(e, events.CheckpointSaved) and e.error is not None for e in rebuilt)


# -- forward: what the spans say ----------------------------------------------------------

VOLATILE = frozenset({A.RESPONSE_ID, A.RESPONSE_TTFC, A.VIEW_HASH, A.PRICE_TABLE_VERSION})
"""Attributes whose value differs on every run (ids, timings, hashes of random ids)."""


def attrs_of(span: ReadableSpan) -> dict[str, Any]:
    """A span's attributes, the run id written ``<run>``, sequences as lists."""
    attrs = dict(span.attributes or {})
    run_id = str(attrs[A.RUN_ID])
    out: dict[str, Any] = {}
    for key, value in attrs.items():
        if key in VOLATILE:
            continue
        if isinstance(value, str):
            value = value.replace(run_id, "<run>")
        elif isinstance(value, tuple):
            value = list(value)  # type: ignore[arg-type]
        out[key] = value
    return out


def spans_named(otel: Otel, name: str) -> list[ReadableSpan]:
    return [s for s in otel.spans() if s.name == name]


RUN = {A.VERSION: A.TELEMETRY_VERSION, A.RUN_ID: "<run>", A.CONVERSATION_ID: "s1"}


async def test_a_chat_span_names_the_request_settings_server_answer_format_and_usage(
    otel: Otel,
) -> None:
    await _run(otel, CORPUS["rich"])
    first, second = spans_named(otel, "chat scripted")
    assert first.kind.name == "CLIENT"
    request = {
        **RUN,
        A.AGENT_NAME: "Trip Planner",
        A.OPERATION_NAME: "chat",
        A.PROVIDER_NAME: "test",
        A.REQUEST_MODEL: "scripted",
        A.REQUEST_STREAM: True,
        A.CALL_PURPOSE: "main",
        A.REQUEST_TEMPERATURE: 1.0,
        A.REQUEST_TOP_P: 0.5,
        A.REQUEST_MAX_TOKENS: 50,
        A.REQUEST_STOP_SEQUENCES: ["END", "STOP"],
        A.REQUEST_SEED: 7,
        A.SERVER_ADDRESS: "llm.example",
        A.SERVER_PORT: 8443,
        A.OUTPUT_TYPE: "json",
        A.RESPONSE_MODEL: "scripted",
    }
    answer = attrs_of(second)
    assert answer.pop(A.COST_SOURCE).startswith("overrides@")  # set_price priced it
    assert answer == {
        **request,
        A.TURN_INDEX: 2,
        A.COST_USD: pytest.approx(70 * 1e-6 + 30 * 2e-6),
        A.RESPONSE_FINISH_REASONS: ["stop"],
        A.FINISH_REASON_RAW: "stop",
        A.USAGE_INPUT: 70,
        A.USAGE_OUTPUT: 30,
        A.USAGE_CACHE_READ: 11,
        A.USAGE_CACHE_WRITE: 5,
        A.USAGE_REASONING: 3,
    }
    assert type(attrs_of(first)[A.REQUEST_TEMPERATURE]) is float  # the registry's double
    assert attrs_of(first)[A.RESPONSE_FINISH_REASONS] == ["tool_calls"]


async def test_tool_spans_say_what_each_call_came_to(otel: Otel) -> None:
    """Executed, failed in the tool, or refused (an unknown tool): each span says so."""
    await _run(otel, CORPUS["rich"])
    (ran,) = spans_named(otel, "execute_tool lookup")
    (failed,) = spans_named(otel, "execute_tool broken")
    (refused,) = spans_named(otel, "execute_tool nope")
    base = {**RUN, A.AGENT_NAME: "Trip Planner", A.TURN_INDEX: 1, A.OPERATION_NAME: "execute_tool"}
    assert attrs_of(ran) == {
        **base,
        A.TOOL_NAME: "lookup",
        A.TOOL_CALL_ID: "call_1",
        A.TOOL_TYPE: "function",
        A.TOOL_DESCRIPTION: "Look something up.",
        A.TOOL_IDEMPOTENCY_KEY: "<run>:call_1",
        A.TOOL_IS_ERROR: False,
        A.TOOL_OUTCOME: "executed",
    }
    assert attrs_of(failed) == {
        **base,
        A.TOOL_NAME: "broken",
        A.TOOL_CALL_ID: "call_2",
        A.TOOL_TYPE: "function",
        A.TOOL_DESCRIPTION: "Always fails.",
        A.TOOL_IDEMPOTENCY_KEY: "<run>:call_2",
        A.TOOL_IS_ERROR: True,
        A.TOOL_OUTCOME: "executed",
        A.ERROR_TYPE: "ValueError",
    }
    assert attrs_of(refused) == {
        **base,
        A.TOOL_NAME: "nope",
        A.TOOL_CALL_ID: "call_3",
        A.TOOL_TYPE: "function",
        A.TOOL_STARTED: False,
        A.TOOL_KNOWN: False,  # the model named a tool the agent does not have
        A.TOOL_IS_ERROR: True,
        A.TOOL_OUTCOME: "refused",
        A.ERROR_TYPE: "refused",
    }
    assert [s.status.status_code for s in (ran, failed, refused)] == [
        StatusCode.UNSET,
        StatusCode.ERROR,
        StatusCode.ERROR,
    ]


async def test_a_run_span_sums_up_the_run(otel: Otel) -> None:
    await _run(otel, CORPUS["rich"])
    (run,) = spans_named(otel, "invoke_agent Trip Planner")
    usage = {"input_tokens": 71, "output_tokens": 37, "cache_read_tokens": 11}
    usage |= {"cache_write_tokens": 5, "reasoning_tokens": 3, "requests": 2, "tool_calls": 2}
    cost = 71 * 1e-6 + 37 * 2e-6
    assert attrs_of(run) == {
        **RUN,
        A.AGENT_NAME: "Trip Planner",
        A.OPERATION_NAME: "invoke_agent",
        A.PROVIDER_NAME: "test",
        A.REQUEST_MODEL: "scripted",
        A.AGENT_DESCRIPTION: "plans trips",
        A.LABEL_PREFIX + "tenant": "acme",
        **{A.RUN_USAGE_PREFIX + k: v for k, v in usage.items()},
        A.RUN_USAGE_PREFIX + "cost_usd": pytest.approx(cost),
        A.RUN_TURNS: 2,
        A.RUN_FINISH_REASON: "stop",
        A.RUN_FINAL_AGENT: "Trip Planner",
        A.COST_USD: pytest.approx(cost),
        A.COST_TOTAL_USD: pytest.approx(cost),
        A.RUN_OUTCOME: "completed",
    }


async def test_a_run_that_waits_for_approval_is_paused_not_failed(otel: Otel) -> None:
    await _run(otel, CORPUS["paused"])
    (run,) = spans_named(otel, "invoke_agent support")
    attrs = attrs_of(run)
    assert attrs[A.RUN_OUTCOME] == "paused"
    assert A.ERROR_TYPE not in attrs
    assert run.status.status_code == StatusCode.UNSET
    rebuilt = event_from_span(run)
    assert isinstance(rebuilt, events.RunFailed)
    assert (rebuilt.error_type, rebuilt.message, rebuilt.finish_reason) == (
        "ApprovalPending",
        "",
        "approval_pending",
    )


async def test_a_failed_model_call_says_error_as_its_finish_reason(otel: Otel) -> None:
    await _run(otel, CORPUS["failed_call"])
    _, failed = spans_named(otel, "chat scripted")
    attrs = attrs_of(failed)
    assert (attrs[A.ERROR_TYPE], attrs[A.RESPONSE_FINISH_REASONS]) == ("BadRequest", ["error"])
    assert not any(k.startswith("gen_ai.usage.") for k in attrs)


async def test_a_call_on_a_compacted_conversation_says_so(otel: Otel) -> None:
    await _run(otel, CORPUS["summary"])
    chats = [attrs_of(s) for s in otel.spans() if s.name.startswith("chat ")]
    flags = [(a[A.CALL_PURPOSE], a.get(A.CONVERSATION_COMPACTED)) for a in chats]
    assert ("main", True) in flags and ("main", None) in flags
    assert {f for f in flags if f[1] is not None} <= {("main", True), ("summary", True)}


async def test_a_tripped_guardrail_span_gives_its_reason(otel: Otel) -> None:
    await _run(otel, CORPUS["guard_trips"])
    (guard,) = spans_named(otel, "lovia.guardrail no_secrets")
    assert attrs_of(guard) == {
        A.VERSION: A.TELEMETRY_VERSION,
        A.RUN_ID: "<run>",
        A.AGENT_NAME: "guarded",
        A.GUARDRAIL_NAME: "no_secrets",
        A.GUARDRAIL_KIND: "input",
        A.GUARDRAIL_TRIPPED: True,
        A.ERROR_TYPE: "GuardrailTripped",
        A.GUARDRAIL_REASON: "mentions a secret",
    }


async def test_a_child_run_names_the_run_and_the_call_that_started_it(otel: Otel) -> None:
    aide = Agent(name="aide", model=ScriptedModel(["noted"]))
    boss = Agent(
        name="boss",
        model=ScriptedModel([call("ask_aide", input="x", id="c1"), "done"]),
        tools=[aide.as_tool(name="ask_aide")],
    )
    result = await Runner.run(boss, "go", tracer_provider=otel.tp)
    (child,) = spans_named(otel, "invoke_agent aide")
    attrs = dict(child.attributes or {})
    assert (attrs[A.RUN_PARENT_ID], attrs[A.RUN_PARENT_CALL_ID]) == (result.run_id, "c1")
    (parent,) = spans_named(otel, "invoke_agent boss")
    assert A.RUN_PARENT_ID not in (parent.attributes or {})


# -- backward: spans that lost attributes -------------------------------------------------


def _span(
    otel: Otel, name: str, attrs: dict[str, Any] | None = None, *, failed: bool = False
) -> ReadableSpan:
    """A finished lovia span (it has the version attribute) with only ``attrs`` on it."""
    span = otel.tp.get_tracer("other").start_span(
        name, attributes={A.VERSION: A.TELEMETRY_VERSION, **(attrs or {})}
    )
    if failed:
        span.set_status(Status(StatusCode.ERROR))
    span.end()
    return otel.spans()[-1]


NOBODY = {"run_id": "", "agent": "", "turn": 0}


def _bare_events() -> dict[str, events.Event]:
    call_entry = ToolCallEntry(call_id="", name="")
    return {
        "invoke_agent a": events.RunCompleted(**NOBODY, finish_reason=""),
        "chat m": events.MessageCompleted(
            **NOBODY, usage=Usage(requests=1, missing=True), finish_reason="stop"
        ),
        "execute_tool t": events.ToolCallCompleted(
            **NOBODY,
            call=call_entry,
            result=ToolResultEntry(call_id="", name="", content=""),
        ),
        "lovia.turn": events.TurnEnded(**NOBODY),
        "lovia.view": events.ViewBuilt(**NOBODY, view_hash="", entries=0),
        "lovia.guardrail g": events.GuardrailCompleted(**NOBODY, kind="", guardrail=""),
        "lovia.handoff": events.HandoffOccurred(**NOBODY, from_agent="", to_agent=""),
        "lovia.compaction": events.CompactionApplied(**NOBODY, kind=""),
        "lovia.checkpoint.write": events.CheckpointSaved(**NOBODY, kind=""),
        "lovia.session.write": events.SessionWritten(**NOBODY, session_id=""),
        "lovia.plugin.setup p": events.PluginSetup(**NOBODY, plugin=""),
        "lovia.plugin.close p": events.PluginClosed(**NOBODY, plugin=""),
    }


async def test_a_span_that_lost_its_attributes_rebuilds_with_empty_names_and_zero_counts(
    otel: Otel,
) -> None:
    """A lovia span cut by an attribute limit or written by another version still turns
    back into its event: empty names, zero counts, unknown usage, never the text None."""
    for name, expected in _bare_events().items():
        span = _span(otel, name)
        rebuilt = event_from_span(span)
        assert rebuilt is not None, name
        duration = (span.end_time - span.start_time) / 1e9  # type: ignore[operator]
        if hasattr(expected, "duration_s"):
            expected = replace(expected, duration_s=duration)
        assert fields_of(rebuilt) == fields_of(expected), name


async def test_a_failed_span_without_attributes_rebuilds_as_a_failure_of_unknown_type(
    otel: Otel,
) -> None:
    run = event_from_span(_span(otel, "invoke_agent a", failed=True))
    assert isinstance(run, events.RunFailed)
    unknown = {"error_type": "_OTHER", "message": "", "duration_s": run.duration_s}
    assert fields_of(run) == fields_of(events.RunFailed(**NOBODY, **unknown, finish_reason=""))
    chat = event_from_span(_span(otel, "chat m", failed=True))
    assert isinstance(chat, events.ModelCallFailed)
    unknown["duration_s"] = chat.duration_s
    assert fields_of(chat) == fields_of(
        events.ModelCallFailed(**NOBODY, **unknown, model="", provider="")
    )
    tool = event_from_span(_span(otel, "execute_tool t", failed=True))
    assert isinstance(tool, events.ToolCallCompleted)
    assert (tool.is_error, tool.result.is_error, tool.error_type) == (True, True, None)
    assert event_from_span(_span(otel, "lovia.turn", failed=True)) is None


async def test_a_failed_write_whose_status_has_no_text_is_named_by_its_error_type(
    otel: Otel,
) -> None:
    for name in ("lovia.plugin.setup p", "lovia.plugin.close p", "lovia.checkpoint.write"):
        rebuilt = event_from_span(_span(otel, name, {A.ERROR_TYPE: "OSError"}, failed=True))
        error = getattr(rebuilt, "error", None)
        assert isinstance(error, RuntimeError) and str(error) == "OSError", name


async def test_a_run_span_is_read_by_its_outcome_when_its_status_was_not_kept(
    otel: Otel,
) -> None:
    """Some pipelines drop span status: ``lovia.run.outcome`` still says how it ended."""
    for outcome in ("failed", "cancelled", "interrupted"):
        attrs = {A.RUN_OUTCOME: outcome, A.ERROR_TYPE: "Boom"}
        rebuilt = event_from_span(_span(otel, "invoke_agent a", attrs))
        assert isinstance(rebuilt, events.RunFailed), outcome
        assert (rebuilt.error_type, rebuilt.message) == ("Boom", ""), outcome
    paused = event_from_span(_span(otel, "invoke_agent a", {A.RUN_OUTCOME: "paused"}))
    assert isinstance(paused, events.RunFailed) and paused.error_type == "ApprovalPending"
    replayed = {A.RUN_OUTCOME: "completed", A.RUN_REPLAYED: True}
    done = event_from_span(_span(otel, "invoke_agent a", replayed))
    assert isinstance(done, events.RunCompleted) and done.replayed is True


async def test_a_span_rebuilds_the_usage_it_carries(otel: Otel) -> None:
    run_usage = {A.RUN_USAGE_PREFIX + "input_tokens": 5, A.RUN_USAGE_PREFIX + "missing": True}
    run_usage |= {A.RUN_USAGE_PREFIX + "cost_usd": 0.25, A.COST_UNPRICED: 3}
    run = event_from_span(_span(otel, "invoke_agent a", run_usage))
    assert isinstance(run, events.RunCompleted)
    assert run.usage == Usage(input_tokens=5, cost_usd=0.25, missing=True, unpriced=3)
    turn = event_from_span(_span(otel, "lovia.turn", {A.TURN_USAGE_PREFIX + "output_tokens": 2}))
    assert isinstance(turn, events.TurnEnded) and turn.usage == Usage(output_tokens=2)
    unpriced = {A.TURN_USAGE_PREFIX + "output_tokens": 2, A.COST_UNPRICED: 2}
    turn = event_from_span(_span(otel, "lovia.turn", unpriced))  # unknown is not zero
    assert isinstance(turn, events.TurnEnded) and turn.usage == Usage(output_tokens=2, unpriced=2)
    chat = {A.USAGE_INPUT: 9, A.COST_USD: 0.5, A.COST_UNPRICED: 1}
    message = event_from_span(_span(otel, "chat m", chat))
    assert isinstance(message, events.MessageCompleted)
    assert message.usage == Usage(input_tokens=9, requests=1, cost_usd=0.5, unpriced=1)


async def test_a_checkpoint_write_noted_on_a_span_is_the_carriers_agents(otel: Otel) -> None:
    tracer = otel.tp.get_tracer("other")
    span = tracer.start_span(
        "lovia.turn", attributes={A.VERSION: A.TELEMETRY_VERSION, A.AGENT_NAME: "a"}
    )
    span.add_event(A.EVENT_CHECKPOINT, {})
    span.end()
    noted, _ = events_from_span(otel.spans()[-1])
    assert fields_of(noted) == fields_of(
        events.CheckpointSaved(run_id="", agent="a", turn=0, kind="")
    )


# -- rows of the table no scripted run reaches ---------------------------------------------


def row(event: events.Event) -> dict[str, Any]:
    """The attributes the table gives ``event`` (what its span gets)."""
    phase = EVENTS[type(event)]
    assert phase.attrs is not None
    return dict(phase.attrs(event))


def test_a_compaction_that_counted_its_tokens_puts_them_on_its_span() -> None:
    counted = events.CompactionApplied(
        **NOBODY, kind="summarize", entry_ids=("e1", "e2"), tokens_before=900, tokens_after=120
    )
    assert row(counted) == {
        A.COMPACTION_KIND: "summarize",
        A.COMPACTION_ENTRIES: 2,
        A.COMPACTION_TOKENS_BEFORE: 900,
        A.COMPACTION_TOKENS_AFTER: 120,
    }
    assert row(events.CompactionApplied(**NOBODY, kind="trim")) == {
        A.COMPACTION_KIND: "trim",
        A.COMPACTION_ENTRIES: 0,
    }


def test_a_tool_error_of_no_named_type_is_a_tool_error() -> None:
    """The span's error.type is the same as the tool-error metric's label."""
    failed = events.ToolCallCompleted(
        **NOBODY,
        call=ToolCallEntry(call_id="c1", name="t"),
        result=ToolResultEntry(call_id="c1", name="t", content="", is_error=True),
        is_error=True,
    )
    assert row(failed)[A.ERROR_TYPE] == "ToolError"


def test_a_child_run_without_a_known_call_still_names_its_parent_call_as_text() -> None:
    child = events.RunStarted(**NOBODY, parent_run_id="p1", parent_call_id=None)
    attrs = row(child)
    assert (attrs[A.RUN_PARENT_ID], attrs[A.RUN_PARENT_CALL_ID]) == ("p1", "")


def test_a_replayed_run_is_marked_replayed_by_the_table() -> None:
    replayed = row(events.RunCompleted(**NOBODY, replayed=True))
    assert replayed[A.RUN_REPLAYED] is True
    assert A.RUN_REPLAYED not in row(events.RunCompleted(**NOBODY))


def test_a_run_that_stopped_for_an_approval_is_paused_whatever_error_class_said_so() -> None:
    """The same rule as the run's stored status: the finish reason decides."""
    waiting = events.RunFailed(
        **NOBODY, error_type="PendingRefund", message="m", finish_reason="approval_pending"
    )
    assert run_outcome(waiting) == "paused"
    assert A.ERROR_TYPE not in row(waiting)
    failed = events.RunFailed(**NOBODY, error_type="PendingRefund", message="m")
    assert run_outcome(failed) == "failed"


def test_a_retried_call_on_a_compacted_view_says_so() -> None:
    """A retry after a context overflow runs on a compacted view: its span says so."""
    retry = events.ModelCallStarted(**NOBODY, model="m", provider="p", compacted=True)
    assert row(retry)[A.CONVERSATION_COMPACTED] is True
    first = events.ModelCallStarted(**NOBODY, model="m", provider="p")
    assert A.CONVERSATION_COMPACTED not in row(first)


def test_the_plugin_span_builders_rebuild_name_timing_and_error() -> None:
    """Built when lovia is imported (``SPANS``), so called here afresh: a rebuilt plugin
    event names its plugin, run, agent and turn, and a failure by its status text or,
    with none, its error type."""
    attrs = {A.RUN_ID: "r1", A.AGENT_NAME: "a", A.TURN_INDEX: 2, A.PLUGIN_NAME: "notes"}
    for cls in (events.PluginSetup, events.PluginClosed):
        build = _back_plugin(cls)
        fine = build(Finished(attrs, False, "", 0.5))
        expected = cls(run_id="r1", agent="a", turn=2, plugin="notes", duration_s=0.5)
        assert fields_of(fine) == fields_of(expected)
        assert fine.error is None  # type: ignore[attr-defined]
        failed = build(Finished({**attrs, A.ERROR_TYPE: "OSError"}, True, "OSError: gone", 0.5))
        assert isinstance(failed, cls)
        assert type(failed.error) is RuntimeError and str(failed.error) == "OSError: gone"
        unnamed = build(Finished({**attrs, A.ERROR_TYPE: "OSError"}, True, "", 0.5))
        assert isinstance(unnamed, cls) and str(unnamed.error) == "OSError"
        bare = build(Finished({}, False, "", 0.0))
        assert fields_of(bare) == fields_of(cls(**NOBODY, plugin=""))


async def test_a_tool_span_without_status_is_read_by_its_attributes(otel: Otel) -> None:
    """A failed or ledger-recovered call says so in attributes, not only in the status."""
    attrs = {A.TOOL_CALL_ID: "c1", A.TOOL_NAME: "t", A.TOOL_IS_ERROR: True}
    attrs |= {A.TOOL_RECOVERED: True, A.TOOL_STARTED: False, A.ERROR_TYPE: "ValueError"}
    rebuilt = event_from_span(_span(otel, "execute_tool t", attrs))
    assert isinstance(rebuilt, events.ToolCallCompleted)
    assert fields_of(rebuilt) | {"duration_s": 0} == {
        "type": "ToolCallCompleted",
        **NOBODY,
        "call": ("c1", "t"),
        "result": ("c1", "t", True),
        "is_error": True,
        "error_type": "ValueError",
        "duration_s": 0,
        "started": False,
        "known": True,
        "recovered": True,
    }
    assert rebuilt.result.content == ""  # spans carry no tool result text


async def test_a_failed_summary_call_is_still_a_summary_call(otel: Otel) -> None:
    failed = event_from_span(_span(otel, "chat m", {A.CALL_PURPOSE: "summary"}, failed=True))
    assert isinstance(failed, events.ModelCallFailed) and failed.purpose == "summary"


async def test_a_call_to_a_tool_the_agent_lacks_rebuilds_as_unknown(otel: Otel) -> None:
    """``known`` survives the span: a refused call to a missing tool reads back as such,
    a refused call to a tool the agent has (denied, bad arguments) as known."""
    attrs = {A.TOOL_CALL_ID: "c1", A.TOOL_NAME: "nope", A.TOOL_IS_ERROR: True}
    attrs |= {A.TOOL_STARTED: False, A.ERROR_TYPE: "refused"}
    missing = event_from_span(_span(otel, "execute_tool nope", {**attrs, A.TOOL_KNOWN: False}))
    denied = event_from_span(_span(otel, "execute_tool nope", attrs))
    assert isinstance(missing, events.ToolCallCompleted)
    assert isinstance(denied, events.ToolCallCompleted)
    assert (missing.known, missing.started) == (False, False)
    assert (denied.known, denied.started) == (True, False)


async def test_a_span_the_runs_end_closed_says_so_and_stands_for_nothing(otel: Otel) -> None:
    """A tool cancelled mid-call: its span carries the run's error and the interrupted
    mark, and no ToolCallCompleted is rebuilt from it (the stream emitted none)."""
    live = await _run(otel, CORPUS["cancelled_in_tool"])
    assert not [e for e in live if isinstance(e, events.ToolCallCompleted)]
    (span,) = spans_named(otel, "execute_tool wait")
    assert attrs_of(span)[A.SPAN_INTERRUPTED] is True
    assert attrs_of(span)[A.ERROR_TYPE] == "RunCancelled"
    assert span.status.status_code == StatusCode.ERROR
    assert event_from_span(span) is None
    (run,) = spans_named(otel, "invoke_agent a")
    assert A.SPAN_INTERRUPTED not in attrs_of(run)  # the run span ends with its own event
    assert isinstance(event_from_span(run), events.RunFailed)


async def test_a_tool_span_that_finished_is_not_marked_interrupted(otel: Otel) -> None:
    await _run(otel, CORPUS["rich"])
    spans = [s for s in otel.spans() if str(s.name).startswith("execute_tool")]
    assert spans and not [s for s in spans if A.SPAN_INTERRUPTED in attrs_of(s)]
