"""Evaluators, the LLM judge, and the evaluation events and metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lovia import Usage, evals
from lovia.errors import UserError
from lovia.stores import store
from lovia.testing import FunctionModel, ScriptedModel
from lovia.transcript import ToolCallEntry

from .conftest import record_tools


def _sample(output: Any, **kw: Any) -> evals.Sample:
    case = evals.Case(
        name="c",
        source={},
        start_turn=1,
        start_entries=0,
        start_usage=Usage(),
        start_agent="a",
        agent={},
        transcript=[],
        views=[],
        responses=[],
        tool_results=[],
        expected={"output": "Both shipped."},
    )
    return evals.Sample(case=case, output=output, **kw)


def test_builtin_evaluators_pass_and_fail() -> None:
    ok, bad = _sample("Both shipped."), _sample("Only one shipped")
    assert evals.Equals().evaluate(ok).passed and not evals.Equals().evaluate(bad).passed
    assert evals.Contains("BOTH").evaluate(ok).passed
    assert not evals.Contains("BOTH", case_sensitive=True).evaluate(ok).passed
    assert evals.Matches(r"^Both \w+\.$").evaluate(ok).passed
    assert not evals.Matches(r"^Both").evaluate(bad).passed
    with pytest.raises(UserError, match="bad pattern"):
        evals.Matches("(")
    call = ToolCallEntry(call_id="c1", name="refund", arguments='{"order": "A1", "amount": 5}')
    s = _sample("x", tool_calls=[call])
    assert evals.ToolCalled("refund", {"order": "A1"}).evaluate(s).passed
    assert not evals.ToolCalled("refund", {"order": "B2"}).evaluate(s).passed
    assert not evals.ToolCalled("refund", called=False).evaluate(s).passed
    assert evals.ToolCalled("delete", called=False).evaluate(s).passed
    slow = _sample("x", turns=4, cost_usd=0.02, latency_s=3.0)
    assert evals.Within(max_turns=4, max_cost_usd=0.02, max_latency_s=3).evaluate(slow).passed
    verdict = evals.Within(max_turns=3, max_latency_s=1).evaluate(slow)
    assert (
        not verdict.passed
        and "turns 4 > 3" in verdict.explanation
        and "latency" in verdict.explanation
    )
    from pydantic import BaseModel

    class Out(BaseModel):
        total: int

    assert evals.ValidOutput(Out).evaluate(_sample({"total": 3})).passed
    assert not evals.ValidOutput(Out).evaluate(_sample({"total": "x"})).passed
    assert not evals.ValidOutput().evaluate(_sample(None, error="boom")).passed
    assert isinstance(evals.from_spec({"kind": "contains", "text": "a"}), evals.Contains)
    assert evals.from_spec({"kind": "tool_not_called", "tool": "t"}).evaluate(s).passed
    with pytest.raises(UserError, match="unknown evaluator kind"):
        evals.from_spec({"kind": "nope"})


async def test_llm_judge_is_priced_traced_as_eval_and_budgeted() -> None:
    from lovia.telemetry import set_price

    set_price("test", "judge-model", input_per_mtok=1_000_000, output_per_mtok=1_000_000)
    spans = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(spans))
    model = ScriptedModel(['{"score": 0.8, "explanation": "close enough"}'], model="judge-model")
    judge = evals.LLMJudge(
        model=model, rubric="Says both shipped.", max_cost_usd=0.000001, tracer_provider=tp
    )
    score = await judge.evaluate(_sample("Both shipped."))
    assert score.value == 0.8 and score.passed and score.explanation == "close enough"
    assert score.cost_usd > 0 and judge.spent_usd == score.cost_usd
    over = await judge.evaluate(_sample("Both shipped."))  # no step left: not called
    assert not over.passed and "judge budget exhausted" in over.explanation
    chat = [s for s in spans.get_finished_spans() if s.name.startswith("chat")]
    assert len(chat) == 1 and (chat[0].attributes or {})["lovia.call.purpose"] == "eval"
    assert "Says both shipped." in model.requests[0].messages[0].content  # type: ignore[union-attr]


async def test_each_score_is_an_event_in_the_run_trace_and_a_metric(tmp_path: Path) -> None:
    db = store(f"sqlite:///{tmp_path / 'lovia.db'}")
    case = await evals.pin(await record_tools(db), db)
    await db.aclose()
    spans = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(spans))
    logs = InMemoryLogRecordExporter()
    lp = LoggerProvider()
    lp.add_log_record_processor(SimpleLogRecordProcessor(logs))
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    model = FunctionModel(lambda r, i: "Both shipped (0).")
    report = await evals.evaluate(
        [case],
        model=model,
        evaluators=[evals.Equals(), evals.Contains("lost")],
        tracer_provider=tp,
        meter_provider=mp,
        logger_provider=lp,
    )
    assert report.cases[0].samples[0].scores[0].passed
    run_span = next(s for s in spans.get_finished_spans() if s.name.startswith("invoke_agent"))
    events = [r.log_record for r in logs.get_finished_logs()]
    assert [e.event_name for e in events] == ["gen_ai.evaluation.result"] * 2
    for event in events:
        assert event.trace_id == run_span.context.trace_id
        assert event.span_id == run_span.context.span_id
    attrs = [dict(e.attributes or {}) for e in events]
    assert attrs[0]["gen_ai.evaluation.name"] == "equals"
    assert attrs[0]["gen_ai.evaluation.score.label"] == "pass"
    assert attrs[1]["gen_ai.evaluation.score.value"] == 0.0
    assert attrs[1]["gen_ai.evaluation.explanation"] == "missing 'lost'"
    data = reader.get_metrics_data()
    assert data is not None
    points = {
        (
            m.name,
            p.attributes["gen_ai.evaluation.name"],
            p.attributes.get("gen_ai.evaluation.score.label"),
        ): p
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        for p in m.data.data_points
        if m.name.startswith("lovia.eval")
    }
    assert points[("lovia.eval.results", "equals", "pass")].value == 1
    assert points[("lovia.eval.results", "contains", "fail")].value == 1
    assert points[("lovia.eval.score", "equals", None)].sum == 1.0
