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
