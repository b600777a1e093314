"""``lovia reprice`` exports ``lovia.cost.correction`` end to end: the CLI process, its
OpenTelemetry SDK meter provider (from the ``OTEL_EXPORTER_OTLP_*`` variables), OTLP/HTTP
to a receiver here. Each point is the change of the top-level runs with its attributes:
new cost (a fresh run priced with the new table) minus the stored one, labelled with the
agent and the runs' attribution labels under the cap; a dry run exports nothing."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

from lovia import Agent, Runner, Usage, pricing
from lovia.replay.reprice import correction_metric, reprice_runs
from lovia.stores import store
from lovia.stores.base import RunInfo
from lovia.testing import ScriptedModel, call, reply

from .conftest import lovia

OLD = "- {provider: test, model: rc-m, input_per_mtok: 1.0, output_per_mtok: 2.0}\n"
NEW = (
    "- {provider: test, model: rc-m, input_per_mtok: 3.0, output_per_mtok: 5.0}\n"
    "- {provider: test, model: rc-free, free: true}\n"
)
METRIC = "lovia.cost.correction"
AGENT, TENANT, USER = "gen_ai.agent.name", "lovia.label.tenant", "lovia.label.user"


def _agents() -> Agent[Any, str]:
    """``boss`` calls ``helper`` as a tool: a top-level run with a child run."""
    u = Usage(input_tokens=1000, output_tokens=500)
    helper = Agent(name="helper", model=ScriptedModel([reply("42", usage=u)], model="rc-m"))
    steps = [
        reply(tool_calls=[call("helper", input="what?", id="c1")], usage=u),
        reply("the answer is 42", usage=Usage(input_tokens=3000, output_tokens=200)),
    ]
    return Agent(name="boss", model=ScriptedModel(steps, model="rc-m"), tools=[helper.as_tool()])


async def _record(url: str, prices: Path) -> None:
    """Oldest first (the order reprice meets them, so the cap admits ``acme``)."""
    pricing.clear_prices()
    pricing.load_prices(prices)
    db = store(url)
    boss, acme = _agents, {"tenant": "acme"}
    try:
        await Runner.run(boss(), "go", store=db, run_id="acme-1", session_id="conv", labels=acme)
        await Runner.run(boss(), "more", store=db, run_id="acme-2", session_id="conv")  # inherits
        await Runner.run(boss(), "go", store=db, run_id="globex", labels={"tenant": "globex"})
        await Runner.run(boss(), "go", store=db, run_id="umbrella", labels={"tenant": "umbrella"})
        both = {"tenant": "initech", "user": "u-1"}
        await Runner.run(boss(), "go", store=db, run_id="initech", labels=both)
        free = Agent(name="local", model=ScriptedModel(["hi"], model="rc-free"))
        await Runner.run(free, "go", store=db, run_id="local")
    finally:
        await db.aclose()
        pricing.clear_prices()


async def _rows(url: str) -> dict[str, RunInfo]:
    db = store(url)
    try:
        return {r.run_id: r for r in await db.list_runs(limit=100, top_level=True)}
    finally:
        await db.aclose()


class _Receiver:
    """An OTLP/HTTP endpoint keeping the metric export requests."""

    def __init__(self) -> None:
        self.metrics: list[ExportMetricsServiceRequest] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path == "/v1/metrics":
                    receiver.metrics.append(ExportMetricsServiceRequest.FromString(body))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def corrections(self) -> list[Any]:
        return [
            m
            for req in self.metrics
            for rm in req.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == METRIC
        ]


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    r = _Receiver()
    yield r
    r.server.shutdown()
    r.server.server_close()


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[str, dict[str, RunInfo], Path]:
    """A store priced with the old table, each run's cost under the new one, the new table."""
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text(OLD)
    new.write_text(NEW)
    url, fresh = f"sqlite:///{tmp_path / 'old.db'}", f"sqlite:///{tmp_path / 'fresh.db'}"
    asyncio.run(_record(url, old))
    asyncio.run(_record(fresh, new))
    return url, asyncio.run(_rows(fresh)), new


def _points(metric: Any) -> dict[frozenset[tuple[str, str]], float]:
    return {
        frozenset((a.key, a.value.string_value) for a in p.attributes): p.as_double
        for p in metric.sum.data_points
    }


def test_reprice_exports_each_runs_change_with_its_labels(
    recorded: tuple[str, dict[str, RunInfo], Path], receiver: _Receiver
) -> None:
    url, fresh, new = recorded
    before = asyncio.run(_rows(url))
    assert before["acme-2"].extra["labels"] == {"tenant": "acme"}  # from its session
    env = {
        "LOVIA_PRICES": str(new),
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_METRIC_EXPORT_INTERVAL": "600000",  # one export: the flush at the end
        "LOVIA_LABEL_VALUES_MAX": "1",  # tenant: acme keeps its name, the rest are other
    }
    dry = lovia("reprice", "--all", "--dry-run", "--store", url, env=env)
    assert dry.code == 0, dry.err
    assert "would change 6 of 11 runs" in dry.out  # 5 child runs listed too
    assert receiver.metrics == []  # a dry run changes nothing, so corrects nothing

    done = lovia("reprice", "--all", "--json", "--store", url, env=env)
    assert done.code == 0, done.err
    (metric,) = receiver.corrections()
    assert metric.unit == "{USD}"
    assert not metric.sum.is_monotonic  # an up-down counter: prices go both ways
    change = {r: fresh[r].cost_usd - before[r].cost_usd for r in fresh}
    assert all(change[r] > 0 for r in fresh if r != "local")
    boss = (AGENT, "boss")
    expected = {
        frozenset({boss, (TENANT, "acme")}): change["acme-1"] + change["acme-2"],
        frozenset({boss, (TENANT, "other")}): change["globex"] + change["umbrella"],
        frozenset({boss, (TENANT, "other"), (USER, "u-1")}): change["initech"],
        frozenset({(AGENT, "local")}): 0.0,  # unpriced before, free now: changed, $0
    }
    got = _points(metric)
    assert got.keys() == expected.keys()
    for attrs, value in expected.items():
        assert got[attrs] == pytest.approx(value, rel=1e-9, abs=1e-15), sorted(attrs)
    report = json.loads(done.out)
    assert sum(got.values()) == pytest.approx(report["total_change_usd"], rel=1e-9)
    after = asyncio.run(_rows(url))
    for run_id, info in fresh.items():  # the store holds the corrected figures
        assert after[run_id].cost_usd == pytest.approx(info.cost_usd, rel=1e-12)


async def test_the_correction_is_the_prometheus_gauge_lovia_cost_correction(
    recorded: tuple[str, dict[str, RunInfo], Path],
) -> None:
    from lovia.telemetry import configure

    url, fresh, new = recorded
    pricing.load_prices(new)
    db = store(url)
    try:
        found = await reprice_runs(db, ["acme-1"], dry_run=True)
        before = (await db.load("acme-1")).info.cost_usd  # type: ignore[union-attr]
    finally:
        await db.aclose()
        pricing.clear_prices()
    handle = configure(exporter="none", metrics="prometheus", prometheus_port=0, set_global=False)
    try:
        correction_metric(found, meter_provider=handle.meter_provider)
        port = handle.prometheus_server.server_port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
    finally:
        handle.shutdown()
    assert "# TYPE lovia_cost_correction gauge" in text
    (line,) = [x for x in text.splitlines() if x.startswith("lovia_cost_correction{")]
    assert 'gen_ai_agent_name="boss"' in line and 'lovia_label_tenant="acme"' in line
    value = float(line.rsplit(" ", 1)[1])
    assert value == pytest.approx(fresh["acme-1"].cost_usd - before, rel=1e-9)


def test_two_reprice_processes_export_as_two_instances(
    recorded: tuple[str, dict[str, RunInfo], Path], receiver: _Receiver, tmp_path: Path
) -> None:
    """Each ``lovia reprice`` exports its own sum from 0 under its own
    ``service.instance.id``: two runs with the same labels stay two series (the collector's
    ``instance`` label), and together they make the store's whole change."""
    url, _fresh, new = recorded
    newer = tmp_path / "newer.yaml"
    newer.write_text(NEW.replace("input_per_mtok: 3.0", "input_per_mtok: 4.0"))
    original = asyncio.run(_rows(url))["acme-1"].cost_usd
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_METRIC_EXPORT_INTERVAL": "600000"}
    for prices in (new, newer):
        done = lovia("reprice", "acme-1", "--store", url, env={**env, "LOVIA_PRICES": str(prices)})
        assert done.code == 0, done.err
    exports = [
        (
            {a.key: a.value.string_value for a in rm.resource.attributes},
            [m for sm in rm.scope_metrics for m in sm.metrics if m.name == METRIC],
        )
        for req in receiver.metrics
        for rm in req.resource_metrics
    ]
    assert len(exports) == 2
    ids = [resource.get("service.instance.id", "") for resource, _ in exports]
    assert all(ids) and ids[0] != ids[1]
    acme = frozenset({(AGENT, "boss"), (TENANT, "acme")})
    firsts = [_points(metric) for _, (metric,) in exports]
    assert [p.keys() for p in firsts] == [{acme}, {acme}]
    first, second = (p[acme] for p in firsts)
    assert first > 0 and second > 0  # each process's own change, not a running total
    after = asyncio.run(_rows(url))["acme-1"].cost_usd
    assert first + second == pytest.approx(after - original, rel=1e-9)
