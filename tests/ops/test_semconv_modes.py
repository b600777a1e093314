"""Dashboards and alert rules work with either set of GenAI metric names: the released one
(default) and OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental.

promtool evaluates every panel and rule expression that reads a renamed metric against
series of the one mode, then of the other, and both must give the same answer."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from ops_helpers import Query, dashboard_queries, rule_queries, run

RENAMED = {  # released series → the latest-experimental series that replace them
    "gen_ai_client_token_usage": (
        "gen_ai_client_inference_operation_input_tokens",
        "gen_ai_client_inference_operation_output_tokens",
    ),
}
METRIC = re.compile(r"\b(gen_ai_[a-z_]+?)(?:_bucket|_sum|_count|_total)?\b")
P95 = 94.99999999999999  # 0.95 × 100 as promtool computes it (rank / count × bucket width)
TARGET = 'target_info{job="svc", instance="i1", deployment_environment_name="prod"}'
LABELS = 'job="svc", instance="i1", gen_ai_agent_name="a", gen_ai_request_model="m"'


def _reads(query: Query, names: set[str]) -> bool:
    return bool(names & set(METRIC.findall(query.expr)))


def _series(mode: str) -> list[dict[str, str]]:
    """Token histograms of one mode: every call used ≤ 100 tokens, 1 call per minute each
    way (so the p95 is 0.95 × 100 = 95 for input and for output)."""
    out = [{"series": TARGET, "values": "1+0x10"}]
    buckets = {"100": "0+1x10", "+Inf": "0+1x10"}
    if mode == "released":
        for kind in ("input", "output"):
            for le, values in buckets.items():
                labels = f'{LABELS}, gen_ai_token_type="{kind}", le="{le}"'
                out.append(
                    {"series": f"gen_ai_client_token_usage_bucket{{{labels}}}", "values": values}
                )
    else:
        for name in RENAMED["gen_ai_client_token_usage"]:
            for le, values in buckets.items():
                out.append({"series": f'{name}_bucket{{{LABELS}, le="{le}"}}', "values": values})
    return out


def test_every_renamed_metric_has_its_replacement_beside_it() -> None:
    """A query keyed on a released name alone would read "no data" after the opt-in."""
    for query in dashboard_queries() + rule_queries():
        used = set(METRIC.findall(query.expr))
        for old, new in RENAMED.items():
            if old in used:
                assert used >= set(new), f"{query.source} reads {old} without {new}"


def test_queries_give_the_same_answer_in_both_modes(promtool: str, tmp_path: Path) -> None:
    renamed = set(RENAMED) | {n for new in RENAMED.values() for n in new}
    queries = [q for q in dashboard_queries() + rule_queries() if _reads(q, renamed)]
    assert queries, "no dashboard panel reads the token histograms"
    expected = [
        {"labels": f'{{gen_ai_request_model="m", gen_ai_token_type="{kind}"}}', "value": P95}
        for kind in ("input", "output")
    ]
    tests = [
        {
            "interval": "1m",
            "input_series": _series(mode),
            "promql_expr_test": [
                {"expr": q.concrete, "eval_time": "10m", "exp_samples": expected} for q in queries
            ],
        }
        for mode in ("released", "latest")
    ]
    path = tmp_path / "modes.test.yml"
    path.write_text(yaml.safe_dump({"rule_files": [], "tests": tests}))
    result = run([promtool, "test", "rules", str(path)], timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_mode_test_fails_on_a_released_only_query(promtool: str, tmp_path: Path) -> None:
    """Guard: the released-only expression gives nothing for the latest series."""
    (query,) = [q for q in dashboard_queries() if "gen_ai_client_token_usage" in q.expr]
    released_only = query.concrete.split(" or sum by")[0] + ")"
    tests = [
        {
            "interval": "1m",
            "input_series": _series("latest"),
            "promql_expr_test": [
                {
                    "expr": released_only,
                    "eval_time": "10m",
                    "exp_samples": [
                        {
                            "labels": '{gen_ai_request_model="m", gen_ai_token_type="input"}',
                            "value": P95,
                        }
                    ],
                }
            ],
        }
    ]
    path = tmp_path / "guard.test.yml"
    path.write_text(yaml.safe_dump({"rule_files": [], "tests": tests}))
    result = run([promtool, "test", "rules", str(path)], timeout=120)
    assert result.returncode != 0
