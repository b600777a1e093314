"""Grafana dashboards: structure, datasources, variables, Jaeger links, PromQL syntax."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from ops_helpers import (
    DASHBOARDS,
    SUBSTITUTIONS,
    Query,
    dashboard_queries,
    datasource_uids,
    iter_panels,
    load_dashboards,
    promtool_check_exprs,
    rule_queries,
)

EXPECTED = {"lovia-overview.json", "lovia-cost.json", "lovia-slo.json"}
RAW_METRIC = re.compile(r"\b(lovia_[a-z_]+|gen_ai_[a-z_]+)\{")


def _walk(node, path=""):
    """Yield (path, dict) for every dict nested in a JSON document."""
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _walk(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, f"{path}[{index}]")


@pytest.fixture(scope="module")
def dashboards() -> dict[str, dict]:
    return load_dashboards()


def test_expected_dashboards_exist(dashboards: dict[str, dict]) -> None:
    assert set(dashboards) >= EXPECTED
    uids = [d["uid"] for d in dashboards.values()]
    assert len(uids) == len(set(uids))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_dashboard_structure(dashboards: dict[str, dict], name: str) -> None:
    dashboard = dashboards[name]
    assert dashboard["schemaVersion"] >= 39
    panels = iter_panels(dashboard)
    assert len(panels) >= 8
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), f"duplicate panel ids in {name}"
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] >= 0, panel["title"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":  # a heading: the panels after it are its own
            assert grid == {"x": 0, "y": grid["y"], "w": 24, "h": 1}, panel["title"]
            assert "targets" not in panel, panel["title"]
            continue
        assert panel["targets"], f"{name}: panel {panel['title']!r} has no targets"
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), panel["title"]
        for target in panel["targets"]:
            assert target.get("expr", "").strip(), f"{name}: {panel['title']} has an empty expr"
            assert target["datasource"]["uid"] == "prometheus"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_template_variables(dashboards: dict[str, dict], name: str) -> None:
    variables = {v["name"]: v for v in dashboards[name]["templating"]["list"]}
    assert {"agent", "model", "environment"} <= set(variables)
    environment = variables["environment"]["definition"]
    assert environment == "label_values(target_info, deployment_environment_name)"
    for key in ("agent", "model", "environment"):
        assert variables[key]["includeAll"]
    assert variables["model"]["allValue"] == variables["environment"]["allValue"] == ".*"
    # "All" agents: every series that names one, not the agent-less series lovia.runs
    # starts with at 0 (it keeps absent() quiet on an idle deploy)
    assert variables["agent"]["allValue"] == ".+"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_spend_by_agent_panels_state_the_handoff_rule(
    dashboards: dict[str, dict], name: str
) -> None:
    """Metrics name the run's starting agent (handed-to agents' spend counts there):
    every panel that splits spend by agent, and the $agent variable, say so."""
    rule = "the agent each run started with"
    variables = {v["name"]: v for v in dashboards[name]["templating"]["list"]}
    assert rule in variables["agent"]["description"]
    for panel in iter_panels(dashboards[name]):
        exprs = " ".join(t.get("expr", "") for t in panel.get("targets", []))
        spend = "lovia_cost_total" in exprs or "lovia_tokens_total" in exprs
        if spend and "by (gen_ai_agent_name" in exprs:
            assert rule in panel["description"], (name, panel["title"])


def test_the_quality_row_has_a_score_panel_per_evaluator(dashboards: dict[str, dict]) -> None:
    """The SLO board's Quality row: mean score over time, one panel per evaluator (Grafana
    repeats it over $evaluator, whose values are the evaluators lovia scored with), by
    agent and mode; and the share of failing results per evaluator."""
    board = dashboards["lovia-slo.json"]
    panels = board["panels"]
    (row_at,) = [i for i, p in enumerate(panels) if p["type"] == "row"]
    row = panels[row_at]
    assert row["title"] == "Quality: evaluator scores" and row["collapsed"] is False
    below = panels[row_at + 1 :]
    assert all(p["gridPos"]["y"] > row["gridPos"]["y"] for p in below)
    assert all(p["gridPos"]["y"] < row["gridPos"]["y"] for p in panels[:row_at])
    score, failing = below
    assert score["title"] == "Mean score: $evaluator"
    assert (score["repeat"], score["repeatDirection"], score["maxPerRow"]) == ("evaluator", "h", 3)
    (target,) = score["targets"]
    expr = target["expr"]
    assert expr.count('gen_ai_evaluation_name=~"$evaluator"') == 2
    assert "sum by (gen_ai_agent_name, lovia_eval_mode) (rate(lovia_eval_score_sum{" in expr
    assert "sum by (gen_ai_agent_name, lovia_eval_mode) (rate(lovia_eval_score_count{" in expr
    assert target["legendFormat"] == "{{gen_ai_agent_name}} {{lovia_eval_mode}}"
    defaults = score["fieldConfig"]["defaults"]
    assert (defaults["min"], defaults["max"]) == (0, 1)
    (fail,) = failing["targets"]
    assert 'gen_ai_evaluation_score_label="fail"' in fail["expr"]
    assert "sum by (gen_ai_evaluation_name, lovia_eval_mode)" in fail["expr"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    evaluator = variables["evaluator"]
    assert evaluator["definition"] == (
        "label_values(lovia_eval_score_count, gen_ai_evaluation_name)"
    )
    assert evaluator["includeAll"] and evaluator["multi"] and evaluator["allValue"] == ".+"
    others = [d for n, d in dashboards.items() if n != "lovia-slo.json"]
    assert all("evaluator" not in {v["name"] for v in d["templating"]["list"]} for d in others)


def test_every_datasource_uid_is_provisioned(dashboards: dict[str, dict]) -> None:
    provisioned = datasource_uids()
    assert provisioned >= {"prometheus", "jaeger"}
    seen = set()
    for name, dashboard in dashboards.items():
        for path, node in _walk(dashboard):
            uid = node.get("uid") if path.endswith(".datasource") else node.get("datasourceUid")
            if uid is not None:
                assert uid in provisioned, f"{name}{path}: unknown datasource uid {uid!r}"
                seen.add(uid)
    assert seen == {"prometheus", "jaeger"}


def test_raw_metric_queries_filter_by_environment() -> None:
    for query in dashboard_queries():
        if RAW_METRIC.search(query.expr):
            assert 'target_info{deployment_environment_name=~"$environment"}' in query.expr, (
                query.source
            )
            scoped = ("$queue",) if "lovia_queue_" in query.expr else ("$agent", "$model")
            assert any(v in query.expr for v in scoped), query.source


def test_only_known_template_variables_are_used() -> None:
    known = set(SUBSTITUTIONS)
    for query in dashboard_queries():
        used = set(re.findall(r"\$[_a-zA-Z]+", query.expr))
        assert used <= known, f"{query.source}: {used - known}"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_jaeger_data_links(dashboards: dict[str, dict], name: str) -> None:
    internal, external = [], []
    for panel in iter_panels(dashboards[name]):
        if panel["type"] == "row":
            continue
        for link in panel["fieldConfig"]["defaults"].get("links", []):
            if "internal" in link:
                internal.append(link["internal"])
            else:
                external.append(link["url"])
    assert internal, f"{name} has no panel linking to the Jaeger datasource"
    for link in internal:
        assert link["datasourceUid"] == "jaeger"
        assert link["query"]["service"] == "${service}"
        assert link["query"]["operation"].startswith("invoke_agent ")
    assert all(url.startswith("${jaeger_url}/search?service=${service}") for url in external)


def test_dashboards_cover_required_metrics() -> None:
    exprs = " ".join(q.expr for q in dashboard_queries())
    for metric in (
        "lovia_runs_total",
        "lovia_turns_bucket",
        "lovia_cost_total",
        "lovia_tokens_total",
        "lovia_tool_calls_total",
        "lovia_tool_errors_total",
        "lovia_provider_retries_total",
        "lovia_compactions_total",
        "gen_ai_client_token_usage_bucket",
        "gen_ai_client_operation_duration_seconds_bucket",
        "gen_ai_client_operation_time_to_first_chunk_seconds_bucket",
        "gen_ai_invoke_agent_duration_seconds_bucket",
        "gen_ai_execute_tool_duration_seconds_bucket",
        "lovia:run_failure:ratio_rate5m",
        "lovia:run_failure:ratio_rate3d",
        "lovia_eval_score_sum",
        "lovia_eval_score_count",
        "lovia_eval_results_total",
        "lovia_queue_depth",
        "lovia_queue_deliveries_total",
        "lovia_queue_dead_letters_total",
        "lovia_queue_runs_in_flight",
        "topk(",
    ):
        assert metric in exprs, metric
    for token_type in ("cache_read", "input"):
        assert f'gen_ai_token_type="{token_type}"' in exprs


def test_every_expression_parses(promtool: str, tmp_path: Path) -> None:
    queries = dashboard_queries() + rule_queries()
    errors = promtool_check_exprs(promtool, queries, tmp_path)
    assert not errors, errors


def test_expression_check_detects_bad_promql(promtool: str, tmp_path: Path) -> None:
    first = dashboard_queries()[0]
    bad = [Query(first.source, first.expr + " +")]
    assert "parse error" in promtool_check_exprs(promtool, bad, tmp_path)


def test_json_matches_generator() -> None:
    spec = importlib.util.spec_from_file_location("lovia_dash_gen", DASHBOARDS / "generate.py")
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, text in module.render().items():
        assert (DASHBOARDS / name).read_text() == text, (
            f"run python dashboards/generate.py ({name})"
        )
