"""Metric names, units, buckets, bounded labels; replayed runs; pricing."""

from __future__ import annotations

from typing import Any

import pytest
from telemetry_helpers import Otel

from lovia import Agent, Runner, tool
from lovia.errors import ApprovalPending, RateLimited
from lovia.stores import MemoryStore
from lovia.telemetry import attributes as A
from lovia.telemetry import clear_prices, has_price, price_usage, set_price
from lovia.testing import ScriptedModel, call, reply
from lovia.usage import Usage

EXPECTED = {
    A.M_TOKEN_USAGE: ("{token}", "Histogram", A.TOKEN_BUCKETS),
    A.M_OPERATION_DURATION: ("s", "Histogram", A.DURATION_BUCKETS),
    A.M_TTFC: ("s", "Histogram", A.DURATION_BUCKETS),
    A.M_AGENT_DURATION: ("s", "Histogram", A.AGENT_BUCKETS),
    A.M_TOOL_DURATION: ("s", "Histogram", A.DURATION_BUCKETS),
    A.M_TURNS: ("{turn}", "Histogram", A.TURN_BUCKETS),
    A.M_RUNS: ("{run}", "Sum", None),
    A.M_COST: ("{USD}", "Sum", None),
    A.M_TOKENS: ("{token}", "Sum", None),
    A.M_TOOL_CALLS: ("{call}", "Sum", None),
    A.M_TOOL_ERRORS: ("{error}", "Sum", None),
    A.M_RETRIES: ("{retry}", "Sum", None),
}


@pytest.fixture(autouse=True)
def _prices() -> Any:
    set_price("test", "scripted", input_per_mtok=1.0, output_per_mtok=2.0)
    yield
    clear_prices()


async def _workload(otel: Otel) -> None:
    @tool(concurrency_safe=True)
    async def ok(x: int) -> str:
        """Fine."""
        return "ok"

    @tool
    async def broken() -> str:
        """Fails."""
        raise ValueError("boom")

    @tool(requires_approval=True)
    async def risky() -> str:
        """Needs a human."""
        return "done"

    from test_span_trees import RetryingModel

    model = RetryingModel(
        [
            [call("ok", x=1), call("ok", x=2)],
            call("broken"),
            reply("done", usage=Usage(input_tokens=1000, output_tokens=10, cache_read_tokens=100)),
        ]
    )
    await Runner.run(
        Agent(name="worker", model=model, tools=[ok, broken]), "go", tracer_provider=otel.tp
    )
    with pytest.raises(RateLimited):
        await Runner.run(
            Agent(name="failer", model=ScriptedModel([RateLimited("x")])),
            "go",
            tracer_provider=otel.tp,
        )
    with pytest.raises(ApprovalPending):
        await Runner.run(
            Agent(name="pauser", model=ScriptedModel([call("risky")]), tools=[risky]),
            "go",
            tracer_provider=otel.tp,
        )


async def test_metric_names_units_types_and_buckets(otel: Otel) -> None:
    await _workload(otel)
    metrics = otel.metrics()
    for name, (unit, kind, buckets) in EXPECTED.items():
        assert name in metrics, name
        metric = metrics[name]
        assert metric.unit == unit, name
        assert type(metric.data).__name__ == kind, name
        if buckets is not None:
            for point in metric.data.data_points:
                assert tuple(point.explicit_bounds) == tuple(float(b) for b in buckets), name


async def test_every_label_is_on_the_allow_list(otel: Otel) -> None:
    await _workload(otel)
    metrics = otel.metrics()
    assert set(metrics) <= set(A.METRIC_LABELS)
    for name, metric in metrics.items():
        for point in metric.data.data_points:
            assert set(point.attributes) <= A.METRIC_LABELS[name], (name, point.attributes)


def _points(otel: Otel, name: str) -> list[tuple[dict[str, Any], Any]]:
    metric = otel.metrics().get(name)
    if metric is None:
        return []
    return [
        (dict(p.attributes), getattr(p, "value", None) if hasattr(p, "value") else p.sum)
        for p in metric.data.data_points
    ]


async def test_run_outcomes_tokens_cost_and_tool_errors(otel: Otel) -> None:
    await _workload(otel)
    points = _points(otel, A.M_RUNS)
    # the series configure()/the first run creates at 0, so absent() means "pipeline broken"
    assert ({"lovia.run.outcome": "completed", "lovia.run.nested": False}, 0) in points
    runs = {
        (a["gen_ai.agent.name"], a["lovia.run.outcome"], a.get("error.type")): v
        for a, v in points
        if A.AGENT_NAME in a
    }
    assert all(a[A.RUN_NESTED] is False for a, _ in points)  # on every series, top-level
    assert runs == {
        ("worker", "completed", None): 1,
        ("failer", "failed", "RateLimited"): 1,
        ("pauser", "paused", None): 1,
    }
    tokens = {
        a["gen_ai.token.type"]: v
        for a, v in _points(otel, A.M_TOKENS)
        if a["gen_ai.agent.name"] == "worker"
    }
    assert tokens["cache_read"] == 100
    assert tokens["input"] >= 1000
    cost = sum(v for a, v in _points(otel, A.M_COST) if a["gen_ai.agent.name"] == "worker")
    assert cost == pytest.approx(tokens["input"] * 1e-6 + tokens["output"] * 2e-6)
    errors = {
        (a["gen_ai.tool.name"], a["error.type"]): v for a, v in _points(otel, A.M_TOOL_ERRORS)
    }
    assert errors[("broken", "ValueError")] == 1
    retries = _points(otel, A.M_RETRIES)
    assert retries and all(a["error.type"] == "RateLimited" for a, _ in retries)


async def test_a_replayed_run_is_not_counted_again(otel: Otel) -> None:
    store = MemoryStore()
    agent = Agent(name="once", model=ScriptedModel(["answer"]))
    first = await Runner.run(agent, "go", run_id="r1", checkpointer=store, tracer_provider=otel.tp)
    again = await Runner.run(agent, "go", run_id="r1", checkpointer=store, tracer_provider=otel.tp)
    assert again.output == first.output
    assert [v for a, v in _points(otel, A.M_RUNS) if a.get(A.AGENT_NAME) == "once"] == [1]
    runs = [s for s in otel.spans() if s.name == "invoke_agent once"]
    assert [(s.attributes or {}).get("lovia.run.replayed") for s in runs] == [None, True]


def test_prices_match_genai_prices_and_overrides_win() -> None:
    from genai_prices import Usage as PriceUsage
    from genai_prices import calc_price

    usage = Usage(
        input_tokens=300_000, output_tokens=500, cache_read_tokens=200, cache_write_tokens=100
    )
    for provider, model in (("openai", "gpt-4o"), ("anthropic", "claude-sonnet-4-5")):
        for n in (1000, 300_000):
            usage.input_tokens = n
            expected = calc_price(
                PriceUsage(
                    input_tokens=n, output_tokens=500, cache_read_tokens=200, cache_write_tokens=100
                ),
                model,
                provider_id=provider,
            ).total_price
            assert price_usage(provider, model, usage) == pytest.approx(float(expected))
    assert has_price("openai", "gpt-4o")
    assert not has_price("nobody", "no-such-model")
    assert price_usage("nobody", "no-such-model", usage) == 0.0
    set_price("openai", "gpt-4o", input_per_mtok=1, output_per_mtok=1, cache_read_per_mtok=0)
    usage.input_tokens = 1000
    assert price_usage("openai", "gpt-4o", usage) == pytest.approx((800 + 500) / 1e6)


def _sums(reader: Any, name: str) -> dict[frozenset[tuple[str, Any]], Any]:
    data = reader.get_metrics_data()
    out: dict[frozenset[tuple[str, Any]], Any] = {}
    for rm in data.resource_metrics if data is not None else ():
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name == name:
                    assert type(m.data).__name__ == "Sum" and m.data.is_monotonic
                    for p in m.data.data_points:
                        out[frozenset(p.attributes.items())] = p.value
    return out


@pytest.mark.parametrize("delta", [False, True])
def test_counters_export_what_an_sdk_counter_exports(delta: bool) -> None:
    """lovia's counters keep their sums and the SDK observes them at each collection:
    the points equal those of an SDK ``Counter`` given the same adds, cumulative or delta."""
    from opentelemetry.sdk.metrics import Counter, MeterProvider, ObservableCounter
    from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader

    from lovia.telemetry.metrics import instruments_for

    kinds = (Counter, ObservableCounter)
    temporality = dict.fromkeys(kinds, AggregationTemporality.DELTA) if delta else None
    reader = InMemoryMetricReader(preferred_temporality=temporality)
    mp = MeterProvider(metric_readers=[reader])
    ours = instruments_for(mp).tool_calls
    theirs = mp.get_meter("reference").create_counter(A.M_TOOL_CALLS)
    a = {A.TOOL_NAME: "add", A.AGENT_NAME: "bench"}
    b = {A.AGENT_NAME: "bench", A.TOOL_NAME: "mul"}
    for batch in ([(1, a), (1, a), (2, b)], [(1, a)], [], [(3, b), (-1, b)]):
        for amount, labels in batch:
            ours.add(amount, labels)
            theirs.add(amount, labels)
        data = reader.get_metrics_data()
        points: dict[str, dict[frozenset[tuple[str, Any]], Any]] = {}
        for sm in data.resource_metrics[0].scope_metrics if data is not None else ():
            for m in sm.metrics:
                points[sm.scope.name] = {
                    frozenset(p.attributes.items()): p.value for p in m.data.data_points
                }
        got, want = points.get(A.SCOPE_NAME, {}), points.get("reference", {})
        if delta:  # an unchanged observed sum is a zero delta; the SDK counter omits it
            got = {k: v for k, v in got.items() if v}
        assert got == want
    mp.shutdown()


def test_a_provider_without_weakrefs_gets_one_set_of_instruments() -> None:
    """Instruments are created once per provider even when it cannot be weakly referenced:
    a second set would register no second callback and its counts would be lost."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from lovia.telemetry.metrics import instruments_for

    class Slotted:
        __slots__ = ("inner",)

        def __init__(self, inner: MeterProvider) -> None:
            self.inner = inner

        def get_meter(self, *args: Any, **kwargs: Any) -> Any:
            return self.inner.get_meter(*args, **kwargs)

    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    provider: Any = Slotted(mp)
    first, second = instruments_for(provider), instruments_for(provider)
    assert first is second
    second.runs.add(1, {A.AGENT_NAME: "x"})
    assert sorted(_sums(reader, A.M_RUNS).values()) == [0, 1]  # [0]: the seed series
    mp.shutdown()
