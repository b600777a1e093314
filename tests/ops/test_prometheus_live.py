"""A real Prometheus scraping tests/ops/workload.py: every dashboard and rule query has data.

Starts the Debian `prometheus` binary on 127.0.0.1 (1 s scrape and rule evaluation, temp
storage, lovia's rule files loaded) and the workload process exposing lovia's metrics
through opentelemetry-exporter-prometheus, then evaluates through /api/v1/query:

* every Grafana panel expression (template variables substituted, see ops_helpers),
* every recording-rule expression and every burn-rate alert expression,
* every `label_values()` template variable,

and requires at least one finite sample from each. The workload's queue runs on the
Redis at 127.0.0.1:6379 (``LOVIA_TEST_REDIS_URL``): skipped locally without it, a failure
in CI. Alerts that cannot fire against a
fresh, healthy workload (absent metric, cost spike without a one-day baseline) must
evaluate to an empty result while every series they reference has data.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from ops_helpers import (
    RULE_FILES,
    Query,
    dashboard_queries,
    in_ci,
    require_binary,
    rule_queries,
    variable_queries,
)

WORKLOAD = Path(__file__).with_name("workload.py")
QUIET_ALERTS = {  # alert -> why it is silent against the workload
    "LoviaRunsMetricAbsent": "lovia_runs_total is present",
    "LoviaCostSpike": "no one-day spend baseline exists yet",
    "LoviaQueueStuck": "the workload's worker takes every queued task",
    "LoviaTenantSpendHigh": "no tenant spends 50 USD in the workload's minutes",
}
SELECTOR = re.compile(r"\b([a-zA-Z_]\w*:[\w:]+|lovia_\w+|gen_ai_\w+|target_info)\b")
LABELS = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)|\{[^}]*\}")
READY_TIMEOUT = 30.0
HISTOGRAMS = (
    "gen_ai_client_token_usage",
    "gen_ai_client_operation_duration_seconds",
    "gen_ai_client_operation_time_to_first_chunk_seconds",
    "gen_ai_invoke_agent_duration_seconds",
    "gen_ai_execute_tool_duration_seconds",
    "lovia_turns",
    "lovia_eval_score",
)
COUNTERS = (
    "lovia_runs_total",
    "lovia_cost_total",  # lovia.cost, unit {USD}: the annotation is dropped, no _USD_
    "lovia_tokens_total",
    "lovia_tool_calls_total",
    "lovia_tool_errors_total",
    "lovia_provider_retries_total",
    "lovia_compactions_total",
    "lovia_cost_unpriced_total",  # the helper agent's model has no price
    "lovia_eval_results_total",  # online evaluation of the completed runs
)
CONTRACT_SERIES = {f"{h}_{s}" for h in HISTOGRAMS for s in ("bucket", "sum", "count")}
CONTRACT_SERIES |= set(COUNTERS)
CONTRACT_SERIES |= {  # lovia.workers, from the workload's Redis Streams worker
    "lovia_queue_deliveries_total",
    "lovia_queue_dead_letters_total",
    "lovia_queue_runs_in_flight",  # an up-down counter: a gauge, no _total
    "lovia_queue_depth",
}
CONTRACT_SERIES.add("lovia_cost_correction")  # lovia.cost.correction, an up-down counter


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read()


def _wait_http(url: str, process: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{what} exited early with code {process.returncode}")
        try:
            _get(url, timeout=1.0)
            return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"{what} not ready at {url}")


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


class PromAPI:
    def __init__(self, base: str) -> None:
        self.base = base

    def query(self, expr: str) -> list[dict]:
        url = f"{self.base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            body = json.loads(_get(url))
        except urllib.error.HTTPError as error:
            raise AssertionError(f"{expr}\n-> HTTP {error.code}: {error.read()!r}") from error
        assert body["status"] == "success", body
        return body["data"]["result"]

    def finite(self, expr: str) -> list[float]:
        values = [float(sample["value"][1]) for sample in self.query(expr)]
        return [v for v in values if math.isfinite(v)]

    def wait_for(self, expr: str, timeout: float = READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.finite(expr):
                return
            time.sleep(0.5)
        pytest.fail(f"no data for {expr} after {timeout}s")


def _require_redis() -> None:
    """Skip locally when the workload's Redis is unreachable; fail in CI."""
    url = urllib.parse.urlsplit(os.environ.get("LOVIA_TEST_REDIS_URL", "redis://127.0.0.1:6379"))
    try:
        socket.create_connection((url.hostname or "127.0.0.1", url.port or 6379), 2).close()
    except OSError as exc:
        if in_ci():
            pytest.fail(f"Redis unreachable at {url.geturl()}: {exc}")
        pytest.skip(f"Redis unreachable at {url.geturl()} (the workload's queue needs it)")


def _write_config(tmp: Path, workload_port: int) -> Path:
    rules = tmp / "rules"
    rules.mkdir()
    for path in RULE_FILES:  # evaluate every group each second instead of every 30 s
        data = yaml.safe_load(path.read_text())
        for group in data["groups"]:
            group["interval"] = "1s"
        (rules / path.name).write_text(yaml.safe_dump(data))
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules / "*.yml")],
        "scrape_configs": [
            {
                "job_name": "lovia-workload",
                "static_configs": [{"targets": [f"127.0.0.1:{workload_port}"]}],
            }
        ],
    }
    path = tmp / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def _start_workload(port: int, log: Path) -> subprocess.Popen:
    env = {**os.environ, "LOVIA_OPS_WORKLOAD": os.environ.get("LOVIA_OPS_WORKLOAD", "lovia")}
    command = [sys.executable, str(WORKLOAD), "--port", str(port)]
    return subprocess.Popen(command, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)


def _start_prometheus(binary: str, config: Path, tmp: Path, port: int) -> subprocess.Popen:
    command = [
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={tmp / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    log = (tmp / "prometheus.log").open("w")
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PromAPI]:
    binary = require_binary("prometheus")
    _require_redis()
    tmp = tmp_path_factory.mktemp("prometheus")
    workload_port, prom_port = _free_port(), _free_port()
    processes: list[subprocess.Popen] = []
    try:
        processes.append(_start_workload(workload_port, tmp / "workload.log"))
        _wait_http(f"http://127.0.0.1:{workload_port}/metrics", processes[0], "workload")
        config = _write_config(tmp, workload_port)
        processes.append(_start_prometheus(binary, config, tmp, prom_port))
        _wait_http(f"http://127.0.0.1:{prom_port}/-/ready", processes[1], "prometheus")
        api = PromAPI(f"http://127.0.0.1:{prom_port}")
        # enough scrapes for rate() plus one evaluation of every rule group
        api.wait_for('count_over_time(lovia_runs_total{error_type!=""}[1m]) >= 4')
        # enough runs per agent that the failure ratio is not young-series noise
        api.wait_for(
            'min(sum by (gen_ai_agent_name) (lovia_runs_total{gen_ai_agent_name!=""})) >= 60'
        )
        api.wait_for("lovia:run_failure:ratio_rate3d")
        api.wait_for('ALERTS{alertname="LoviaRunErrorBudgetBurn1h"}')
        # a dead letter between two scrapes, so increase() sees it
        api.wait_for("sum(increase(lovia_queue_dead_letters_total[1m])) > 0")
        yield api
    finally:
        for process in reversed(processes):
            _stop(process)


def _selectors(expr: str) -> set[str]:
    """Metric and recording-rule names an expression reads (label lists removed)."""
    return set(SELECTOR.findall(LABELS.sub("", expr)))


def _id(query: Query) -> str:
    return query.source


@pytest.mark.parametrize("query", dashboard_queries(), ids=_id)
def test_dashboard_query_returns_data(prom: PromAPI, query: Query) -> None:
    result = prom.query(query.concrete)
    finite = [s for s in result if math.isfinite(float(s["value"][1]))]
    assert finite, f"{query.source}: no finite sample for\n{query.concrete}"
    if query.agent_links and query.expr != "lovia:run_success:objective":
        # the panel's Jaeger links interpolate the series' gen_ai_agent_name label
        assert all(s["metric"].get("gen_ai_agent_name") for s in result), query.source


@pytest.mark.parametrize("query", rule_queries(), ids=_id)
def test_rule_query_against_workload(prom: PromAPI, query: Query) -> None:
    name = query.source.split(":", 1)[1]
    if name not in QUIET_ALERTS:
        assert prom.finite(query.expr), f"{query.source}: no finite sample for\n{query.expr}"
        return
    assert prom.query(query.expr) == [], f"{name} fires although {QUIET_ALERTS[name]}"
    selectors = _selectors(query.expr)
    assert selectors
    for selector in selectors:
        assert prom.query(selector), f"{query.source}: {selector} has no series"


@pytest.mark.parametrize(("dashboard", "metric", "label"), variable_queries())
def test_template_variable_has_values(prom: PromAPI, dashboard: str, metric: str, label: str):
    values = {s["metric"].get(label, "") for s in prom.query(f"count by ({label}) ({metric})")}
    assert values - {""}, f"{dashboard}: label_values({metric}, {label}) is empty"


def test_series_names_match_the_contract(prom: PromAPI) -> None:
    """lovia's OTel metrics land under exactly these Prometheus names."""
    result = prom.query('count by (__name__) ({__name__=~"lovia_.+|gen_ai_.+"})')
    names = {sample["metric"]["__name__"] for sample in result}
    assert names == CONTRACT_SERIES


def test_failure_ratio_matches_workload(prom: PromAPI) -> None:
    """The workload fails one run in five; the recorded SLI must say so."""
    ratios = prom.finite("lovia:run_failure:ratio_rate5m")
    assert len(ratios) == 2  # one series per agent
    assert all(0.1 < r < 0.3 for r in ratios), ratios


def test_environment_join_filters(prom: PromAPI) -> None:
    joined = (
        "sum(rate(lovia_runs_total[1m]) * on (job, instance) group_left "
        '(deployment_environment_name) target_info{deployment_environment_name=~"%s"})'
    )
    assert prom.finite(joined % "ci")
    assert prom.query(joined % "production") == []
