"""The cost board's correction panels count every ``lovia reprice`` process's correction,
after the collector's Prometheus exporter dropped its series.

Series as Prometheus scrapes them from the collector (``metric_expiration: 15m``): a worker
(instance ``w``) whose ``lovia_cost_total`` reaches 2 USD; two reprice processes with the
same labels (agent ``boss``, tenant ``acme``) in environment ``prod``, each its own
``service.instance.id`` (so ``instance``), exporting +0.50 and +0.25 USD; one in
``staging`` exporting -0.125 USD. Each reprice series (and its ``target_info``) lives for
the 15 minutes after its process, then goes stale. promtool evaluates the panels' own
PromQL two hours in, when none of the correction series is left.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from ops_helpers import REPO, dashboard_queries, run, substitute

BOARD = "lovia-cost.json"
TOTAL = "Cost corrections reported in time range"
CORRECTED = "Spend in time range, corrections included"
BY_TENANT = "Cost corrections in time range by agent and tenant"
EVAL = "120m"
SPENT = 2.0  # the worker's lovia_cost_total
REPRICES = (  # (instance, environment, first minute, USD)
    ("r1", "prod", 30, 0.5),
    ("r2", "prod", 60, 0.25),
    ("r3", "staging", 60, -0.125),
)
EXPIRY = 15  # minutes the exporter keeps a series without updates
LABELS = 'gen_ai_agent_name="boss", lovia_label_tenant="acme"'


def _target(instance: str, environment: str) -> str:
    labels = f'job="lovia", instance="{instance}", deployment_environment_name="{environment}"'
    return f"target_info{{{labels}}}"


def _correction(instance: str) -> str:
    return f'lovia_cost_correction{{job="lovia", instance="{instance}", {LABELS}}}'


def _live(start: int, value: float) -> str:
    """Absent until minute ``start``, then ``value`` for EXPIRY minutes, then stale."""
    return f"_x{start} {value!r}x{EXPIRY - 1} stale"


def _series() -> list[dict[str, str]]:
    cost = (
        'lovia_cost_total{job="lovia", instance="w", gen_ai_provider_name="test", '
        f'gen_ai_request_model="m", lovia_call_purpose="main", {LABELS}}}'
    )
    out = [
        {"series": _target("w", "prod"), "values": "1x130"},
        {"series": cost, "values": "0x10 0+0.2x10 2x110"},
    ]
    for instance, environment, start, usd in REPRICES:
        out.append({"series": _target(instance, environment), "values": _live(start, 1)})
        out.append({"series": _correction(instance), "values": _live(start, usd)})
    return out


def _collided_series() -> list[dict[str, str]]:
    """The prod reprices as they were scraped when both processes had the same resource
    (no ``service.instance.id``): one series, r1's value, then r2's."""
    (r1, r2) = [(start, usd) for _, env, start, usd in REPRICES if env == "prod"]
    gap = r2[0] - r1[0] - EXPIRY
    values = f"_x{r1[0]} {r1[1]!r}x{EXPIRY - 1} stale _x{gap - 1} {r2[1]!r}x{EXPIRY - 1} stale"
    ones = f"_x{r1[0]} 1x{EXPIRY - 1} stale _x{gap - 1} 1x{EXPIRY - 1} stale"
    return [
        {"series": _target("shared", "prod"), "values": ones},
        {"series": _correction("shared"), "values": values},
    ]


def _panel(title: str) -> str:
    board = [q for q in dashboard_queries() if q.source.startswith(f"{BOARD}#")]
    (query,) = [q for q in board if f" {title}/" in q.source]
    return query.expr


def _query(title: str, window: str, environment: str = ".*") -> str:
    expr = _panel(title).replace("$__range", window).replace("$environment", environment)
    return substitute(expr)


def _near(expr: str, expected: float, labels: str = "{}") -> dict[str, Any]:
    tolerance = 1e-9 * max(1.0, abs(expected))
    return {
        "expr": f"abs(({expr}) - {expected!r}) <= bool {tolerance!r}",
        "eval_time": EVAL,
        "exp_samples": [{"labels": labels, "value": 1}],
    }


def _promtool(promtool: str, tmp_path: Path, series: list[dict[str, str]], checks: list[Any]):
    tests = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": checks}],
    }
    path = tmp_path / "corrections.test.yml"
    path.write_text(yaml.safe_dump(tests, width=10_000))
    return run([promtool, "test", "rules", str(path)], timeout=120)


def test_both_reprice_processes_count_after_their_series_expired(
    promtool: str, tmp_path: Path
) -> None:
    prod = 0.5 + 0.25
    by_tenant = _query(BY_TENANT, "2h", "prod")
    checks = [
        # the exporter dropped every correction series: a plain instant query sees none
        {
            "expr": "absent(lovia_cost_correction)",
            "eval_time": EVAL,
            "exp_samples": [{"labels": "{}", "value": 1}],
        },
        _near(_query(TOTAL, "2h"), prod - 0.125),  # every environment, both signs
        _near(_query(TOTAL, "2h", "prod"), prod),  # the two processes with the same labels
        _near(f"sum({by_tenant})", prod),
        {
            "expr": by_tenant,
            "eval_time": EVAL,
            "exp_samples": [
                {"labels": '{gen_ai_agent_name="boss", lovia_label_tenant="acme"}', "value": prod}
            ],
        },
        _near(_query(CORRECTED, "2h", "prod"), SPENT + prod),
        _near(_query(CORRECTED, "2h", "staging"), -0.125),  # no spend there, a correction
        # the last 30 minutes: no correction reported in them, no spend either
        {"expr": _query(TOTAL, "30m"), "eval_time": EVAL, "exp_samples": []},
        _near(_query(CORRECTED, "30m", "prod"), 0.0),
        # the first reprice only (the second reported after 60 m)
        {
            "expr": _query(TOTAL, "30m", "prod"),
            "eval_time": "50m",
            "exp_samples": [{"labels": "{}", "value": 0.5}],
        },
    ]
    result = _promtool(promtool, tmp_path, _series(), checks)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def test_without_an_instance_id_the_later_reprice_replaces_the_earlier(
    promtool: str, tmp_path: Path
) -> None:
    """Guard: the same panels over the series the processes made when they shared one
    resource count only the later correction. Distinct instances are what fixes it."""
    check = {
        "expr": _query(TOTAL, "2h", "prod"),
        "eval_time": EVAL,
        "exp_samples": [{"labels": "{}", "value": 0.25}],
    }
    result = _promtool(promtool, tmp_path, _collided_series(), [check])
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def test_the_costs_page_shows_the_panels_query() -> None:
    """docs/costs.md says how dashboards see corrections: with the board's own query."""
    page = (Path(__file__).resolve().parents[2] / "docs/costs.md").read_text()
    section = page.split("### How dashboards see corrections", 1)[1]
    block = section.split("```text\n", 1)[1].split("```", 1)[0]
    flat = " ".join(block.split()).replace("( ", "(").replace(" )", ")")
    assert flat == _panel(BY_TENANT)


def test_the_shipped_collector_expires_series_as_simulated() -> None:
    """The series above expire as the shipped collector config makes them, and its
    resources stay in target_info (instance from service.instance.id)."""
    config = yaml.safe_load((REPO / "deploy/otel-collector/config.yaml").read_text())
    prometheus = config["exporters"]["prometheus"]
    assert prometheus["metric_expiration"] == f"{EXPIRY}m"
    assert not prometheus.get("resource_to_telemetry_conversion", {}).get("enabled", False)
