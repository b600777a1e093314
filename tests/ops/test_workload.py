"""tests/ops/workload.py: workload selection and the emitted metric contract."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

WORKLOAD_PATH = Path(__file__).with_name("workload.py")


@pytest.fixture(scope="module")
def workload():
    spec = importlib.util.spec_from_file_location("lovia_ops_workload", WORKLOAD_PATH)
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def test_unknown_workload_is_rejected(workload, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOVIA_OPS_WORKLOAD", "nope")
    with pytest.raises(SystemExit) as exc:
        workload.main(["--port", "1"])
    assert exc.value.code == 2


def test_lovia_workload_runs_every_outcome(workload) -> None:
    """The real-lovia workload completes, fails (two ways), pauses and hits tool errors."""
    import asyncio

    from lovia import LoviaError, Runner

    agents = workload._lovia_agents()

    async def outcomes() -> dict[str, int]:
        seen: dict[str, int] = {}
        for index in range(30):
            text, max_turns = workload._lovia_input(index)
            try:
                result = await Runner.run(agents[index % 2], text, max_turns=max_turns)
                errors = sum(e.type == "tool_result" and e.is_error for e in result.entries)
                kind = "completed+toolerror" if errors else "completed"
            except LoviaError as exc:
                kind = type(exc).__name__
            seen[kind] = seen.get(kind, 0) + 1
        return seen

    seen = asyncio.run(outcomes())
    assert set(seen) == {
        "completed",
        "completed+toolerror",
        "MaxTurnsExceeded",
        "RateLimited",
        "ApprovalPending",
        "RunCancelled",
    }
    failed = seen["MaxTurnsExceeded"] + seen["RateLimited"]
    assert failed / 30 == pytest.approx(1 / workload.FAILURE_EVERY)


def _collect(workload, runs: int) -> dict[str, list]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], views=workload._views())
    instruments = workload.make_instruments(provider.get_meter("lovia"))
    rnd = random.Random(0)
    for index in range(runs):
        workload.one_run(instruments, index, rnd)
    data = reader.get_metrics_data()
    assert data
    return {
        metric.name: metric
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }


def test_emits_every_contract_metric_with_units(workload) -> None:
    metrics = _collect(workload, 20)
    units = {name: metric.unit for name, metric in metrics.items()}
    assert units == {
        "gen_ai.client.token.usage": "{token}",
        "gen_ai.client.operation.duration": "s",
        "gen_ai.client.operation.time_to_first_chunk": "s",
        "gen_ai.invoke_agent.duration": "s",
        "gen_ai.execute_tool.duration": "s",
        "lovia.runs": "{run}",
        "lovia.turns": "{turn}",
        "lovia.cost": "{USD}",
        "lovia.tokens": "{token}",
        "lovia.tool.calls": "{call}",
        "lovia.tool.errors": "{error}",
        "lovia.provider.retries": "{retry}",
        "lovia.compactions": "{compaction}",
        "lovia.cost.unpriced": "{call}",
        "lovia.eval.results": "{result}",
        "lovia.eval.score": "",
    }
    agent_duration = metrics["gen_ai.invoke_agent.duration"].data.data_points[0]
    assert list(agent_duration.explicit_bounds) == pytest.approx([0.1 * 2**i for i in range(13)])


def test_runs_fail_one_in_five_with_error_type(workload) -> None:
    points = _collect(workload, 50)["lovia.runs"].data.data_points
    by_outcome: dict[str, int] = {}
    for point in points:
        outcome = point.attributes["lovia.run.outcome"]
        by_outcome[outcome] = by_outcome.get(outcome, 0) + point.value
        assert ("error.type" in point.attributes) == (outcome == "failed")
    assert by_outcome["failed"] == 10
    assert sum(by_outcome.values()) == 50
    assert by_outcome["paused"] >= 1


def test_completed_runs_are_scored_as_lovias_online_evaluation_records_them(workload) -> None:
    """Both workloads score each completed run with two evaluators: the SDK one emits what
    lovia.evals records (names, units, labels, score buckets)."""
    from lovia.evals import Score
    from lovia.evals._telemetry import record_metrics

    sdk = _collect(workload, 20)
    completed = sum(
        p.value
        for p in sdk["lovia.runs"].data.data_points
        if p.attributes["lovia.run.outcome"] == "completed"
    )
    results = sdk["lovia.eval.results"].data.data_points
    assert sum(p.value for p in results) == 2 * completed
    by_label: dict[tuple[str, str], int] = {}
    for p in results:
        key = (
            str(p.attributes["gen_ai.evaluation.name"]),
            str(p.attributes["gen_ai.evaluation.score.label"]),
        )
        by_label[key] = by_label.get(key, 0) + int(p.value)
    assert {name for name, _ in by_label} == set(workload.EVALUATORS)
    assert by_label.get(("exact_match", "fail"), 0) > 0 and by_label.get(("judge", "fail"), 0) > 0

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    try:
        record_metrics(
            Score(name="judge", value=0.3, passed=False),
            mode="online",
            agent="triage",
            meter_provider=provider,
        )
        data = reader.get_metrics_data()
    finally:
        provider.shutdown()
    assert data
    real = {m.name: m for r in data.resource_metrics for sc in r.scope_metrics for m in sc.metrics}
    for name in ("lovia.eval.results", "lovia.eval.score"):
        assert real[name].unit == sdk[name].unit, name
        real_keys = {frozenset(p.attributes) for p in real[name].data.data_points}
        sdk_keys = {frozenset(p.attributes) for p in sdk[name].data.data_points}
        assert real_keys == sdk_keys, name
    real_bounds = real["lovia.eval.score"].data.data_points[0].explicit_bounds
    sdk_bounds = sdk["lovia.eval.score"].data.data_points[0].explicit_bounds
    assert list(real_bounds) == list(sdk_bounds) == list(workload.SCORE_BUCKETS)
