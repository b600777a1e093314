"""Every model call lovia makes is counted once, everywhere: summaries, repairs, the
main call; spans, metrics, usage, cost and the budget agree."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel
from telemetry_helpers import Otel

from lovia import Agent, RunBudget, Runner, events, tool
from lovia.errors import BudgetExceeded, RunCancelled
from lovia.providers.base import ModelProfile, ModelRequest
from lovia.stores import MemoryStore
from lovia.telemetry import attributes as A
from lovia.telemetry import clear_prices, set_price
from lovia.telemetry.metrics import RUNS_SEED
from lovia.testing import FunctionModel, ScriptedModel, call, reply
from lovia.testing._models import CallInfo
from lovia.usage import Usage
from lovia.view import DEFAULT_SUMMARY_PROMPT, Compaction


@pytest.fixture(autouse=True)
def _prices() -> Any:
    set_price("test", "function", input_per_mtok=1.0, output_per_mtok=2.0)
    set_price("test", "scripted", input_per_mtok=1.0, output_per_mtok=2.0)
    set_price("test", "summarizer", input_per_mtok=500.0, output_per_mtok=1000.0)
    yield
    clear_prices()


@tool
def fetch(n: int) -> str:
    """Fetch page n."""
    return f"page {n}: " + "x" * 1_500


def is_summary(req: ModelRequest) -> bool:
    return req.system == DEFAULT_SUMMARY_PROMPT


def crawler(turns: int, *, summary_model: Any = None) -> tuple[Agent[Any, Any], FunctionModel]:
    def answer(req: ModelRequest, info: CallInfo) -> Any:
        if is_summary(req):
            return "summary of the pages so far"
        k = sum(not is_summary(r) for r in info.requests)
        return call("fetch", n=k) if k <= turns else "done"

    model = FunctionModel(answer, profile=ModelProfile(context_window=4_000))
    strategy = Compaction(summary_model=summary_model)
    return Agent(name="crawler", model=model, tools=[fetch], context=strategy), model


def summarizer() -> FunctionModel:
    return FunctionModel(lambda req, info: "summary of the pages so far", model="summarizer")


def chat_spans(otel: Otel) -> list[Any]:
    return [s for s in otel.spans() if s.name.startswith("chat ")]


def metric_sum(otel: Otel, name: str, **match: Any) -> float:
    metric = otel.metrics().get(name)
    if metric is None:
        return 0.0
    total = 0.0
    for p in metric.data.data_points:
        attrs = dict(p.attributes)
        if all(attrs.get(k) == v for k, v in match.items()):
            total += p.sum if hasattr(p, "sum") else p.value
    return total


async def test_summary_calls_are_counted_like_every_model_call(otel: Otel) -> None:
    agent, model = crawler(14)
    seen: list[events.Event] = []
    handle = Runner.stream(agent, "crawl", max_turns=30, tracer_provider=otel.tp)
    async for event in handle:
        seen.append(event)
    result = await handle.result()
    summaries = [r for r in model.requests if is_summary(r)]
    assert len(summaries) >= 2  # the scenario compacts

    started = [e for e in seen if isinstance(e, events.ModelCallStarted)]
    done = [e for e in seen if isinstance(e, events.ModelCallCompleted)]
    assert len(started) == len(done) == len(model.requests)
    assert sum(e.purpose == "summary" for e in done) == len(summaries)
    # plugin hooks (LoopGuard) read MessageCompleted as "the model answered the run's view"
    assert all(isinstance(e, events.SummaryCompleted) == (e.purpose == "summary") for e in done)
    assert not any(isinstance(e, events.MessageCompleted) for e in done if e.purpose == "summary")
    assert sum(e.usage.cost_usd for e in done) == pytest.approx(result.usage.cost_usd)

    spans = chat_spans(otel)
    assert len(spans) == len(model.requests)
    purposes = [(s.attributes or {})[A.CALL_PURPOSE] for s in spans]
    assert purposes.count("summary") == len(summaries)
    views = {s.context.span_id: s for s in otel.spans() if s.name == A.SPAN_VIEW}
    for span in spans:  # a summary is made while the view is built: its child
        attrs = span.attributes or {}
        under_view = span.parent is not None and span.parent.span_id in views
        assert under_view == (attrs[A.CALL_PURPOSE] == "summary")
    tokens_in = sum((s.attributes or {})[A.USAGE_INPUT] for s in spans)
    tokens_out = sum((s.attributes or {})[A.USAGE_OUTPUT] for s in spans)
    cost = sum((s.attributes or {})[A.COST_USD] for s in spans)
    (run,) = [s for s in otel.spans() if s.name == "invoke_agent crawler"]
    run_attrs = run.attributes or {}
    assert (tokens_in, tokens_out) == (result.usage.input_tokens, result.usage.output_tokens)
    assert run_attrs[A.RUN_USAGE_PREFIX + "input_tokens"] == tokens_in
    assert result.usage.cost_usd == pytest.approx(cost)
    assert run_attrs[A.COST_USD] == pytest.approx(cost)
    assert metric_sum(otel, A.M_COST) == pytest.approx(cost)
    assert metric_sum(otel, A.M_TOKENS, **{A.TOKEN_TYPE: "input"}) == tokens_in
    assert metric_sum(otel, A.M_COST, **{A.CALL_PURPOSE: "summary"}) > 0


async def test_summary_calls_stream_no_deltas_into_the_answer() -> None:
    agent, model = crawler(14)
    handle = Runner.stream(agent, "crawl", max_turns=30)
    texts = [e.text async for e in handle if isinstance(e, events.TextDelta)]
    await handle.result()
    assert any(is_summary(r) for r in model.requests)
    assert "summary of the pages so far" not in "".join(texts)


async def test_a_cost_budget_trips_on_summary_spend() -> None:
    # the main calls of the whole run cost < $0.05; one summary costs > $0.5
    expensive = summarizer()
    agent, _ = crawler(14, summary_model=expensive)
    with pytest.raises(BudgetExceeded) as info:
        await Runner.run(agent, "crawl", max_turns=30, budget=RunBudget(max_cost_usd=0.2))
    assert len(expensive.requests) == 1  # the first summary spent it; the next call stops
    assert info.value.limit == "max_cost_usd"
    assert info.value.used > 0.2
    cheap, _ = crawler(14)  # the same run without the expensive summaries fits the budget
    result = await Runner.run(cheap, "crawl", max_turns=30, budget=RunBudget(max_cost_usd=0.2))
    assert result.output == "done" and result.usage.cost_usd < 0.05


async def test_a_repair_call_is_marked_repair(otel: Otel) -> None:
    class Answer(BaseModel):
        n: int

    model = ScriptedModel(["not json", '{"n": 3}'])
    agent = Agent(name="typed", model=model, output_type=Answer, output_repairs=1)
    result = await Runner.run(agent, "go", tracer_provider=otel.tp)
    assert result.output == Answer(n=3)
    purposes = [(s.attributes or {})[A.CALL_PURPOSE] for s in chat_spans(otel)]
    assert purposes == ["main", "repair"]


async def test_unknown_and_refused_tools_count_as_calls_with_bounded_labels(otel: Otel) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    invented = [f"made_up_{i}" for i in range(5)]
    model = ScriptedModel(
        [
            [call(name) for name in invented],
            call("add", a="not a number", b=1),  # refused: invalid arguments
            call("add", a=1, b=2),
            "done",
        ]
    )
    await Runner.run(Agent(name="t", model=model, tools=[add]), "go", tracer_provider=otel.tp)
    metrics = otel.metrics()
    calls = {p.attributes[A.TOOL_NAME]: p.value for p in metrics[A.M_TOOL_CALLS].data.data_points}
    errors = {p.attributes[A.TOOL_NAME]: p.value for p in metrics[A.M_TOOL_ERRORS].data.data_points}
    assert calls == {A.UNKNOWN_TOOL: 5, "add": 2}
    assert errors == {A.UNKNOWN_TOOL: 5, "add": 1}
    assert all(errors[name] <= calls[name] for name in errors)


class SlowModel(ScriptedModel):
    """Streams one chunk, then waits forever (until cancelled)."""

    async def stream(self, request: ModelRequest) -> Any:
        self.requests.append(request)
        from lovia.providers.base import TextChunk

        yield TextChunk("thinking")
        await asyncio.Event().wait()


async def test_a_cancelled_run_has_one_error_type_everywhere(otel: Otel) -> None:
    handle = Runner.stream(Agent(name="c", model=SlowModel([])), "go", tracer_provider=otel.tp)
    seen: list[events.Event] = []
    async for event in handle:
        seen.append(event)
        if isinstance(event, events.TextDelta):
            handle.cancel("stop")
    with pytest.raises(RunCancelled):
        await handle.result()
    failed = [e for e in seen if isinstance(e, events.ModelCallFailed)]
    assert [e.error_type for e in failed] == ["RunCancelled"]
    types = {s.name.split(" ")[0]: (s.attributes or {}).get(A.ERROR_TYPE) for s in otel.spans()}
    assert types["chat"] == types["lovia.turn"] == types["invoke_agent"] == "RunCancelled"


async def test_a_replayed_run_records_no_run_duration(otel: Otel) -> None:
    store = MemoryStore()
    agent = Agent(name="once", model=ScriptedModel(["answer"]))
    for _ in range(3):
        await Runner.run(agent, "go", run_id="r1", checkpointer=store, tracer_provider=otel.tp)
    (point,) = otel.metrics()[A.M_AGENT_DURATION].data.data_points
    assert point.count == 1
    runs = [s for s in otel.spans() if s.name == "invoke_agent once"]
    assert [(s.attributes or {}).get(A.RUN_REPLAYED) for s in runs] == [None, True, True]


async def test_handoff_metrics_are_labelled_with_the_starting_agent(otel: Otel) -> None:
    expert = Agent(
        name="expert",
        model=ScriptedModel(
            [reply("answer", usage=Usage(input_tokens=10_000, output_tokens=1_000))]
        ),
    )
    triage = Agent(
        name="triage",
        model=ScriptedModel([call("transfer_to_expert")]),
        handoffs=[expert],
    )
    result = await Runner.run(triage, "help", tracer_provider=otel.tp)
    assert result.final_agent.name == "expert"
    labels = {
        dict(p.attributes).get(A.AGENT_NAME)
        for m in otel.metrics().values()
        for p in m.data.data_points
        if dict(p.attributes) != RUNS_SEED  # the agent-less series lovia.runs starts with
    }
    assert labels == {"triage"}
    cost_per_run = metric_sum(otel, A.M_COST, **{A.AGENT_NAME: "triage"}) / metric_sum(
        otel, A.M_RUNS, **{A.AGENT_NAME: "triage"}
    )
    assert cost_per_run == pytest.approx(result.usage.cost_usd)
    chats = {(s.attributes or {})[A.AGENT_NAME] for s in chat_spans(otel)}
    assert chats == {"triage", "expert"}  # spans keep the agent that did the work


def _openai_server(streamed: bool) -> Any:
    import httpx

    completion = {
        "id": "c1",
        "model": "gpt-x",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1},
    }
    sse = (
        'data: {"id":"c1","model":"gpt-x","choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
        'data: {"id":"c1","model":"gpt-x","choices":[{"index":0,"delta":{},'
        '"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1}}\n\n'
        "data: [DONE]\n\n"
    )

    def handler(request: httpx.Request) -> httpx.Response:
        import json

        assert json.loads(request.content).get("stream", False) is streamed
        if streamed:
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=sse)
        return httpx.Response(200, json=completion)

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


@pytest.mark.parametrize("streamed", [True, False])
async def test_stream_attribute_and_ttfc_follow_what_was_sent(otel: Otel, streamed: bool) -> None:
    from lovia.providers import OpenAIChat

    client = _openai_server(streamed)
    model = OpenAIChat(
        "gpt-x", base_url="http://127.0.0.1:9/v1", api_key="k", http_client=client, stream=streamed
    )
    seen: list[events.Event] = []
    handle = Runner.stream(Agent(name="s", model=model), "go", tracer_provider=otel.tp)
    async for event in handle:
        seen.append(event)
    assert (await handle.result()).output == "hi"
    (started,) = [e for e in seen if isinstance(e, events.ModelCallStarted)]
    (done,) = [e for e in seen if isinstance(e, events.MessageCompleted)]
    assert started.stream is streamed
    assert (done.time_to_first_chunk_s is not None) is streamed
    (span,) = chat_spans(otel)
    attrs = span.attributes or {}
    assert attrs[A.REQUEST_STREAM] is streamed
    assert (A.RESPONSE_TTFC in attrs) is streamed
    ttfc = otel.metrics().get(A.M_TTFC)
    assert (ttfc is not None and sum(p.count for p in ttfc.data.data_points) == 1) is streamed


async def test_a_what_if_call_is_priced_and_traced(otel: Otel) -> None:
    from lovia import replay

    store = MemoryStore()
    agent = Agent(name="w", model=ScriptedModel(["recorded answer"]))
    await Runner.run(agent, "go", run_id="w1", checkpointer=store)
    (view,) = await replay.views("w1", store)
    other = ScriptedModel([reply("new answer", usage=Usage(input_tokens=1000, output_tokens=100))])
    response = await replay.rerun(view, other, tracer_provider=otel.tp, meter_provider=otel.mp)
    assert response.usage.cost_usd == pytest.approx(1000e-6 + 100 * 2e-6)
    recorded, span = chat_spans(otel)
    assert (recorded.attributes or {})[A.CALL_PURPOSE] == "main"
    attrs = span.attributes or {}
    assert attrs[A.CALL_PURPOSE] == "what_if"
    assert attrs[A.COST_USD] == pytest.approx(response.usage.cost_usd)
    assert attrs[A.RUN_ID] == "w1" and attrs[A.VIEW_HASH] == view.rebuilt_hash
    what_if = metric_sum(otel, A.M_COST, **{A.CALL_PURPOSE: "what_if"})
    assert what_if == pytest.approx(response.usage.cost_usd)


async def test_cancelling_during_a_summary_ends_the_run_cleanly(otel: Otel) -> None:
    async def hang(req: ModelRequest, info: CallInfo) -> Any:
        await asyncio.Event().wait()  # a summary model that never answers

    agent, _ = crawler(14, summary_model=FunctionModel(hang, model="summarizer"))
    handle = Runner.stream(agent, "crawl", max_turns=30, tracer_provider=otel.tp)
    seen: list[events.Event] = []
    async for event in handle:
        seen.append(event)
        if isinstance(event, events.ModelCallStarted) and event.purpose == "summary":
            handle.cancel("stop")
    with pytest.raises(RunCancelled):
        await asyncio.wait_for(handle.result(), 10)
    (failed,) = [e for e in seen if isinstance(e, events.ModelCallFailed)]
    assert (failed.purpose, failed.error_type) == ("summary", "RunCancelled")
    assert isinstance(seen[-1], events.RunFailed) and seen[-1].error_type == "RunCancelled"
    errors = {s.name.split(" ")[0]: (s.attributes or {}).get(A.ERROR_TYPE) for s in otel.spans()}
    assert errors["chat"] == errors["lovia.view"] == errors["invoke_agent"] == "RunCancelled"
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
