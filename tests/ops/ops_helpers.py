"""Shared helpers for the ops tests: repo paths, tool lookup, PromQL extraction."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = REPO / "dashboards"
ALERTS = DASHBOARDS / "alerts"
RULE_FILES = sorted(ALERTS.glob("*.yml"))
RULE_TESTS = sorted((ALERTS / "tests").glob("*.yml"))
DASHBOARD_FILES = sorted(DASHBOARDS.glob("*.json"))
DATASOURCES = REPO / "deploy/grafana/provisioning/datasources/datasources.yml"

# Grafana template variables -> concrete values for parsing / evaluating expressions.
SUBSTITUTIONS = {
    "$__rate_interval": "1m",
    "$__interval": "15s",
    "$__range": "5m",
    "$environment": ".*",
    "$agent": ".+",  # the variable's "All" (allValue)
    "$model": ".*",
    "$evaluator": ".+",  # the variable's "All"; a repeated panel gets one value each
    "$queue": ".*",
}


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def require_binary(name: str) -> str:
    """Path of `name`; skip locally when missing, fail when CI=true."""
    path = shutil.which(name)
    if path:
        return path
    message = f"{name} not found (install with scripts/ci-install-ops.sh)"
    if in_ci():
        pytest.fail(message)
    pytest.skip(message)
    raise AssertionError("unreachable")


def run(cmd: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def substitute(expr: str) -> str:
    for variable, value in SUBSTITUTIONS.items():
        expr = expr.replace(variable, value)
    return expr


@dataclass(frozen=True)
class Query:
    """One PromQL expression and where it comes from."""

    source: str  # e.g. "lovia-cost.json#7 Cost per run/A" or "lovia-slo.yml:LoviaX"
    expr: str
    kind: str = "panel"  # panel | record | alert
    agent_links: bool = False  # panel has data links that use the series' agent label

    @property
    def concrete(self) -> str:
        return substitute(self.expr)


def load_dashboards() -> dict[str, dict]:
    return {path.name: json.loads(path.read_text()) for path in DASHBOARD_FILES}


def iter_panels(dashboard: dict) -> list[dict]:
    panels = []
    for panel in dashboard.get("panels", []):
        panels.append(panel)
        panels.extend(panel.get("panels", []))  # collapsed rows
    return panels


def dashboard_queries() -> list[Query]:
    queries = []
    for name, dashboard in load_dashboards().items():
        for panel in iter_panels(dashboard):
            links = panel.get("fieldConfig", {}).get("defaults", {}).get("links", [])
            linked = any("gen_ai_agent_name" in json.dumps(link) for link in links)
            for target in panel.get("targets", []):
                source = f"{name}#{panel['id']} {panel['title']}/{target.get('refId')}"
                queries.append(Query(source, target.get("expr", ""), agent_links=linked))
    return queries


def rule_queries() -> list[Query]:
    queries = []
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                kind = "record" if "record" in rule else "alert"
                name = rule.get("record") or rule["alert"]
                queries.append(Query(f"{path.name}:{name}", rule["expr"].strip(), kind))
    return queries


def variable_queries() -> list[tuple[str, str, str]]:
    """(dashboard, metric, label) of every `label_values(metric, label)` variable."""
    found = set()
    pattern = re.compile(r"label_values\(\s*([a-zA-Z_:][\w:]*)\s*,\s*(\w+)\s*\)")
    for name, dashboard in load_dashboards().items():
        for variable in dashboard["templating"]["list"]:
            if variable["type"] != "query":
                continue
            match = pattern.fullmatch(variable["definition"].strip())
            assert match, f"{name}: unsupported variable query {variable['definition']!r}"
            found.add((name, match.group(1), match.group(2)))
    return sorted(found)


def datasource_uids() -> set[str]:
    data = yaml.safe_load(DATASOURCES.read_text())
    return {source["uid"] for source in data["datasources"]}


def promtool_check_exprs(promtool: str, queries: list[Query], tmp_path: Path) -> str:
    """Put every expression into one rules file as recording rules; return promtool output."""
    rules = [
        {"record": f"lovia_ops_check:expr_{index}", "expr": query.concrete}
        for index, query in enumerate(queries)
    ]
    path = tmp_path / "exprs.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "exprs", "rules": rules}]}))
    result = run([promtool, "check", "rules", str(path)])
    return result.stdout + result.stderr if result.returncode else ""
