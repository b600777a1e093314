"""Agents as tools: every dashboard figure about runs and spend equals the store's totals.

A manager agent asks a researcher agent (a child run) which asks a checker agent (a
grandchild, on a model without a price); a solo agent works alone; runs complete, fail
and get cancelled. lovia's own metrics are exported in the Prometheus text format
(``opentelemetry-exporter-prometheus``, the scrape a real Prometheus would see), turned
into promtool input series (no sample before the workload, the final values after), and
the dashboards' own PromQL is evaluated by ``promtool test rules``. Each figure is
checked against what the store says about the same runs: counts of top-level runs by
outcome, their cost (children included), turns and unpriced calls.

Why these figures are exact: every series is 0 before the workload and constant after,
so ``rate``/``increase`` over any window holding the step count the whole step (a counter
starting at 0 is not extrapolated before it), and ``rate`` over the 1 m
``$__rate_interval`` is the total / 60.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from ops_helpers import dashboard_queries, require_binary, run

STEP_S = 15
BEFORE, AFTER = 4, 4  # samples at 0 (before the workload), then at the final values
EVAL = f"{(BEFORE + 2) * STEP_S}s"  # the 1 m window holds a 0 sample and the last one


@dataclass
class Totals:
    """What the store says about the top-level runs."""

    runs: Counter[tuple[str, str]] = field(default_factory=Counter)  # (agent, outcome)
    cost: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    turns: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    unpriced: int = 0
    children: int = 0
    errors: Counter[tuple[str, str]] = field(default_factory=Counter)  # (agent, error type)

    def count(self, *outcomes: str, agent: str | None = None) -> int:
        return sum(
            n for (a, o), n in self.runs.items() if o in outcomes and (agent is None or a == agent)
        )


def _agents() -> list[Any]:
    from lovia import Agent, RunContext, tool
    from lovia.errors import RateLimited
    from lovia.testing import FunctionModel, call, reply
    from lovia.usage import Usage

    def usage(n: int) -> Usage:
        return Usage(input_tokens=100 * n, output_tokens=17 * n)

    def checker_says(request: Any, info: Any) -> Any:
        return reply("checked", usage=usage(3))

    checker = Agent(
        name="checker", model=FunctionModel(checker_says, provider="fake", model="no-price")
    )

    def researcher_says(request: Any, info: Any) -> Any:
        done = sum(m.type == "tool_result" for m in request.messages)
        if done == 0:
            return reply(tool_calls=[call("check", input="facts")], usage=usage(5))
        return reply("found it", usage=usage(7))

    researcher = Agent(
        name="researcher",
        model=FunctionModel(researcher_says, provider="fake", model="res-model"),
        tools=[checker.as_tool(name="check")],
    )

    @tool
    def stop_run(ctx: RunContext) -> str:
        """Stop this run (a user pressing cancel)."""
        ctx.cancel_token.cancel("the user pressed stop")
        return "stopping"

    def manager_says(request: Any, info: Any) -> Any:
        text = str(getattr(request.messages[0], "content", ""))
        done = sum(m.type == "tool_result" for m in request.messages)
        size = len(text)
        if done == 0 and "cancel" in text:
            return reply(tool_calls=[call("stop_run")], usage=usage(size))
        if done == 0 and "research" in text:
            calls = [call("ask", input="a", id="r1"), call("ask", input="b", id="r2")]
            return reply(tool_calls=calls, usage=usage(size))
        if "fail" in text:
            return RateLimited("the provider is overloaded", status=429)
        return reply("done", usage=usage(size + done))

    tools = [researcher.as_tool(name="ask"), stop_run]
    manager = Agent(
        name="manager",
        model=FunctionModel(manager_says, provider="fake", model="mgr-model"),
        tools=tools,
    )
    solo = Agent(
        name="solo",
        model=FunctionModel(manager_says, provider="fake", model="mgr-model"),
        tools=tools,
    )
    return [manager, solo]


WORK = (  # (agent index, input): completed, failed after a child ran, cancelled, solo
    (0, "research one"),
    (0, "research two, longer"),
    (0, "research three, the longest"),
    (0, "research then fail"),
    (1, "solo"),
    (1, "solo again"),
    (1, "cancel me"),
)


async def _workload(db_url: str, meter_provider: Any) -> Totals:
    from lovia import LoviaError, Runner
    from lovia.stores import store

    db = store(db_url)
    manager, solo = _agents()
    try:
        for index, text in WORK:
            agent = (manager, solo)[index]
            try:
                await Runner.run(agent, text, checkpointer=db, meter_provider=meter_provider)
            except LoviaError:
                pass  # failures and cancellations are part of the workload
        return await _store_totals(db)
    finally:
        await db.aclose()


async def _store_totals(db: Any) -> Totals:
    from lovia.stores.base import UNPRICED_KEY

    totals = Totals()
    top = await db.list_runs(top_level=True, limit=1000)
    for info in top:
        agent = info.extra.get("first_agent", info.agent)
        cancelled = info.status == "cancelled" or info.error_type == "RunCancelled"
        outcome = "cancelled" if cancelled else info.status
        totals.runs[(agent, outcome)] += 1
        totals.cost[agent] += info.cost_usd  # the run's own and its children's
        totals.turns[agent] += info.turns
        totals.unpriced += int(info.extra.get(UNPRICED_KEY, 0))
        if outcome == "failed":
            totals.errors[(agent, info.error_type or "")] += 1
        totals.children += len(await db.list_runs(parent_run_id=info.run_id, limit=1000))
    return totals


def _exposition(tmp: Path) -> tuple[str, Totals]:
    """Run the workload with lovia's metrics on a Prometheus reader: its text, the store."""
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import Resource
    from prometheus_client import CollectorRegistry, generate_latest

    from lovia.telemetry import clear_prices, set_price

    registry = CollectorRegistry()
    reader = PrometheusMetricReader(registry=registry)
    resource = Resource.create({"service.name": "nested", "deployment.environment.name": "ci"})
    provider = MeterProvider(resource=resource, metric_readers=[reader])
    set_price("fake", "mgr-model", input_per_mtok=2.0, output_per_mtok=8.0)
    set_price("fake", "res-model", input_per_mtok=1.0, output_per_mtok=4.0)
    try:
        totals = asyncio.run(_workload(f"sqlite:///{tmp / 'runs.db'}", provider))
        return generate_latest(registry).decode(), totals
    finally:
        clear_prices()
        provider.shutdown()


def _series(text: str) -> list[dict[str, str]]:
    """promtool input series: each exported sample, 0 before the workload, final after."""
    from prometheus_client.parser import text_string_to_metric_families

    out = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            labels = {**sample.labels, "job": "lovia", "instance": "app:9464"}
            body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            before = sample.value if sample.name == "target_info" else 0
            values = [before] * BEFORE + [sample.value] * AFTER
            out.append(
                {"series": f"{sample.name}{{{body}}}", "values": " ".join(map(repr, values))}
            )
    return out


def _only(labels: dict[str, str]) -> str:
    """A one-element vector carrying ``labels``, to pick one series of a panel's result."""
    vector = "vector(1)"
    for key, value in labels.items():
        vector = f'label_replace({vector}, "{key}", "{value}", "", "")'
    return vector


def _check(expr: str, labels: dict[str, str], expected: float) -> dict[str, Any]:
    """A promtool test that the panel's series with ``labels`` equals ``expected``."""
    picked = f"({expr})"
    if labels:
        picked = f"(({expr}) and on ({', '.join(labels)}) {_only(labels)})"
    tolerance = 1e-9 * max(1.0, abs(expected))
    body = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {
        "expr": f"abs({picked} - {expected!r}) <= bool {tolerance!r}",
        "eval_time": EVAL,
        "exp_samples": [{"labels": "{" + body + "}", "value": 1}],
    }


def _figures(t: Totals) -> dict[str, list[tuple[dict[str, str], float]]]:
    """panel source prefix -> [(series labels, the value the store says)]."""
    agents = sorted({a for a, _ in t.runs})
    ended = t.count("completed", "failed", "cancelled")
    counted = t.count("completed", "failed")
    all_cost = sum(t.cost.values())

    def per_agent(value: Any) -> list[tuple[dict[str, str], float]]:
        return [({"gen_ai_agent_name": a}, value(a)) for a in agents]

    def ended_of(a: str) -> int:
        return t.count("completed", "failed", "cancelled", agent=a)

    def runs_of(a: str) -> int:
        return sum(n for (agent, _), n in t.runs.items() if agent == a)

    return {
        "lovia-overview.json#1 Runs/s/A": [({}, ended / 60)],
        "lovia-overview.json#2 Run failure ratio/A": [({}, t.count("failed") / counted)],
        "lovia-overview.json#6 Run failure ratio by agent/A": per_agent(
            lambda a: t.count("failed", agent=a) / t.count("completed", "failed", agent=a)
        ),
        "lovia-overview.json#5 Runs/s by agent and outcome/A": [
            ({"gen_ai_agent_name": a, "lovia_run_outcome": o}, n / 60)
            for (a, o), n in t.runs.items()
        ],
        "lovia-overview.json#8 Turns per run (p50 / p95 / mean) by agent/C": per_agent(
            lambda a: t.turns[a] / runs_of(a)
        ),
        "lovia-cost.json#1 Spend in time range/A": [({}, all_cost)],
        "lovia-cost.json#2 USD per hour (now)/A": [({}, all_cost / 60 * 3600)],
        "lovia-cost.json#4 Cost per run/A": [({}, all_cost / ended)],
        "lovia-cost.json#5 Unpriced model calls in time range/A": [({}, t.unpriced)],
        "lovia-cost.json#6 USD per hour by agent/A": per_agent(lambda a: t.cost[a] * 60),
        "lovia-cost.json#8 USD per day (rolling 24 h) by agent/A": per_agent(lambda a: t.cost[a]),
        "lovia-cost.json#12 Cost per run by agent/A": per_agent(lambda a: t.cost[a] / ended_of(a)),
        "lovia-slo.json#1 Run success ratio (30 d)/A": [({}, t.count("completed") / counted)],
        "lovia-slo.json#5 Run success ratio vs objective by agent/A": per_agent(
            lambda a: t.count("completed", agent=a) / t.count("completed", "failed", agent=a)
        ),
        "lovia-slo.json#11 Failed runs/s by error type/A": [
            ({"gen_ai_agent_name": a, "error_type": e}, n / 60) for (a, e), n in t.errors.items()
        ],
        "lovia-slo.json#12 Cancelled runs/s by agent (not in the SLI)/A": [
            ({"gen_ai_agent_name": a}, t.count("cancelled", agent=a) / 60)
            for a in agents
            if t.count("cancelled", agent=a)
        ],
    }


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Totals]:
    return _exposition(tmp_path_factory.mktemp("nested"))


def test_the_workload_is_nested_priced_and_unpriced(measured: tuple[str, Totals]) -> None:
    text, totals = measured
    assert totals.children == 8  # each manager run asks two researchers
    assert totals.unpriced == 8  # one checker call under each researcher, unpriced
    assert totals.count("completed") == 5
    assert totals.count("failed") == totals.count("cancelled") == 1
    assert 'lovia_run_nested="true"' in text and 'lovia_run_nested="false"' in text


def test_every_figure_equals_the_store(measured: tuple[str, Totals], tmp_path: Path) -> None:
    promtool = require_binary("promtool")
    text, totals = measured
    figures = _figures(totals)
    queries = {q.source: q for q in dashboard_queries()}
    assert set(figures) <= set(queries), set(figures) - set(queries)
    checks = [
        _check(queries[source].concrete, labels, value)
        for source, expected in figures.items()
        for labels, value in expected
    ]
    tests = {
        "rule_files": [],
        "evaluation_interval": "15s",
        "tests": [
            {
                "interval": f"{STEP_S}s",
                "input_series": _series(text),
                "promql_expr_test": checks,
            }
        ],
    }
    path = tmp_path / "figures.test.yml"
    path.write_text(yaml.safe_dump(tests, width=10_000))
    result = run([promtool, "test", "rules", str(path)])
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert len(checks) == 25
