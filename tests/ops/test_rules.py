"""Prometheus alert/recording rules: syntax, unit tests, and the SLO contract."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml
from ops_helpers import ALERTS, RULE_FILES, RULE_TESTS, rule_queries, run

BURN_PAIRS = {  # alert -> (long window, short window, burn rate, severity)
    "LoviaRunErrorBudgetBurn1h": ("1h", "5m", "14.4", "page"),
    "LoviaRunErrorBudgetBurn6h": ("6h", "30m", "6", "page"),
    "LoviaRunErrorBudgetBurn1d": ("1d", "2h", "3", "ticket"),
    "LoviaRunErrorBudgetBurn3d": ("3d", "6h", "1", "ticket"),
}
WINDOWS = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")


def _rules(file_name: str) -> dict[str, dict]:
    groups = yaml.safe_load((ALERTS / file_name).read_text())["groups"]
    return {rule.get("record") or rule["alert"]: rule for g in groups for rule in g["rules"]}


def test_rule_files_exist() -> None:
    assert {p.name for p in RULE_FILES} >= {"lovia-slo.yml", "lovia-ops.yml"}
    assert len(RULE_TESTS) >= len(RULE_FILES)


def test_promtool_check_rules(promtool: str) -> None:
    result = run([promtool, "check", "rules", *map(str, RULE_FILES)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(RULE_FILES)


def test_promtool_unit_tests(promtool: str) -> None:
    result = run([promtool, "test", "rules", *map(str, RULE_TESTS)], timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(RULE_TESTS)


def test_promtool_unit_tests_fail_when_threshold_breaks(promtool: str, tmp_path: Path) -> None:
    """Guard against tests that cannot fail: a 99.5 % objective must break them."""
    (tmp_path / "tests").mkdir()
    slo = (ALERTS / "lovia-slo.yml").read_text()
    assert "vector(0.99)" in slo
    (tmp_path / "lovia-slo.yml").write_text(slo.replace("vector(0.99)", "vector(0.995)"))
    shutil.copy(ALERTS / "tests/lovia-slo.test.yml", tmp_path / "tests")
    result = run([promtool, "test", "rules", str(tmp_path / "tests/lovia-slo.test.yml")])
    assert result.returncode != 0
    assert "LoviaRunErrorBudgetBurn" in result.stdout + result.stderr


def test_recording_rules_cover_every_window() -> None:
    rules = _rules("lovia-slo.yml")
    for window in WINDOWS:
        ratio = rules[f"lovia:run_failure:ratio_rate{window}"]["expr"]
        assert f"[{window}]" in ratio
        # bad: failed top-level runs; total: those that completed or failed
        assert 'lovia_run_nested!="true", lovia_run_outcome="failed"' in ratio
        assert 'lovia_run_nested!="true", lovia_run_outcome=~"completed|failed"' in ratio
        assert "error_type" not in ratio  # a cancelled run has one, and does not burn
        total = rules[f"lovia:runs:rate{window}"]["expr"]
        assert 'lovia_run_nested!="true", lovia_run_outcome=~"completed|failed"' in total
    assert rules["lovia:run_success:objective"]["expr"].strip() == "vector(0.99)"


@pytest.mark.parametrize("alert", sorted(BURN_PAIRS))
def test_burn_rate_alert_shape(alert: str) -> None:
    long, short, burn, severity = BURN_PAIRS[alert]
    rule = _rules("lovia-slo.yml")[alert]
    expr = rule["expr"]
    assert f"lovia:run_failure:ratio_rate{long}\n" in expr
    assert f"lovia:run_failure:ratio_rate{short}\n" in expr
    assert expr.count(f"({burn} * (1 - lovia:run_success:objective))") == 2
    assert re.search(rf"lovia:runs:rate{long} \* \d+ >= 20", expr), "low-traffic guard"
    assert rule["labels"]["severity"] == severity
    assert rule["labels"]["burn_rate"] == burn


def test_absent_and_cost_alerts() -> None:
    rules = _rules("lovia-ops.yml")
    assert rules["LoviaRunsMetricAbsent"]["expr"].strip() == "absent(lovia_runs_total)"
    assert "lovia_cost_total" in rules["LoviaCostSpike"]["expr"]


def test_queue_alerts_watch_dead_letters_and_a_stuck_backlog() -> None:
    rules = _rules("lovia-ops.yml")
    assert "lovia_queue_dead_letters_total" in rules["LoviaQueueDeadLetters"]["expr"]
    stuck = rules["LoviaQueueStuck"]
    # every worker process (its own instance) measures the whole queue: max, not sum
    assert (
        'max by (lovia_queue_name) (lovia_queue_depth{lovia_queue_state="waiting"})'
        in (stuck["expr"])
    )
    assert "lovia_queue_deliveries_total" in stuck["expr"]
    assert (stuck["for"], stuck["labels"]["severity"]) == ("10m", "page")


def test_rule_queries_are_collected() -> None:
    kinds = [q.kind for q in rule_queries()]
    assert kinds.count("record") == 1 + 2 * len(WINDOWS) + 1 + 1  # + spend per tenant
    assert kinds.count("alert") == len(BURN_PAIRS) + 4 + 2  # + tenant spend, unpriced calls


def test_spend_rules_watch_labelled_spend_and_unpriced_calls() -> None:
    rules = _rules("lovia-spend.yml")
    assert 'lovia_label_tenant!=""' in rules["lovia:cost_usd:tenant_24h"]["expr"]
    assert "[1d]" in rules["lovia:cost_usd:tenant_24h"]["expr"]
    assert "lovia:cost_usd:tenant_24h > 50" in rules["LoviaTenantSpendHigh"]["expr"]
    assert "lovia_cost_unpriced_total" in rules["LoviaUnpricedCalls"]["expr"]
