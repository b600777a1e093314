"""The quality SLO's rules (online evaluation failure ratio): promtool check and tests.

They live in ``dashboards/alerts/quality/`` (Prometheus loads ``rules/quality/*.yml``):
the live-Prometheus workload of the run SLO does not emit evaluation results.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml
from ops_helpers import ALERTS, run

QUALITY = ALERTS / "quality"
RULES = QUALITY / "lovia-quality.yml"
TESTS = QUALITY / "tests" / "lovia-quality.test.yml"
PAGES = {"LoviaQualityBudgetBurn1h": "14.4", "LoviaQualityBudgetBurn6h": "6"}


def test_promtool_checks_and_tests_the_quality_rules(promtool: str) -> None:
    checked = run([promtool, "check", "rules", str(RULES)])
    assert checked.returncode == 0 and "SUCCESS: 19 rules found" in checked.stdout, checked.stderr
    tested = run([promtool, "test", "rules", str(TESTS)], timeout=120)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_quality_tests_fail_when_the_objective_moves(promtool: str, tmp_path: Path) -> None:
    """At 96 % the 14.3x agent pages and the 0.9x agent tickets: the tests must break."""
    (tmp_path / "tests").mkdir()
    text = RULES.read_text()
    assert "vector(0.95)" in text
    (tmp_path / RULES.name).write_text(text.replace("vector(0.95)", "vector(0.96)"))
    shutil.copy(TESTS, tmp_path / "tests")
    result = run([promtool, "test", "rules", str(tmp_path / "tests" / TESTS.name)])
    assert result.returncode != 0
    assert "LoviaQualityBudgetBurn1h" in result.stdout + result.stderr


def test_only_online_results_count_and_pages_are_pages() -> None:
    rules = {
        r.get("record") or r["alert"]: r
        for g in yaml.safe_load(RULES.read_text())["groups"]
        for r in g["rules"]
    }
    for name, rule in rules.items():
        if "lovia_eval_results_total" in rule["expr"]:
            assert rule["expr"].count('lovia_eval_mode="online"') == rule["expr"].count(
                "lovia_eval_results_total"
            ), name
    for alert, burn in PAGES.items():
        assert rules[alert]["labels"] == {**rules[alert]["labels"], "severity": "page"}
        assert rules[alert]["labels"]["burn_rate"] == burn
    prometheus = (ALERTS.parents[1] / "deploy/prometheus/prometheus.yml").read_text()
    assert "/etc/prometheus/rules/quality/*.yml" in prometheus


def test_the_rules_select_the_series_lovia_exports() -> None:
    """lovia.eval.results reaches Prometheus under the name and labels the rules use."""
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider
    from prometheus_client import REGISTRY, generate_latest

    from lovia.evals import Score
    from lovia.evals._telemetry import record_metrics

    reader = PrometheusMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    try:
        bad = Score(name="judge", value=0.0, passed=False)
        record_metrics(bad, mode="online", agent="support", meter_provider=provider)
        text = generate_latest(REGISTRY).decode()
    finally:
        provider.shutdown()
    line = next(x for x in text.splitlines() if x.startswith("lovia_eval_results_total{"))
    for label in (
        'gen_ai_agent_name="support"',
        'gen_ai_evaluation_name="judge"',
        'gen_ai_evaluation_score_label="fail"',
        'lovia_eval_mode="online"',
    ):
        assert label in line
    assert "lovia_eval_results_total{" in RULES.read_text()
