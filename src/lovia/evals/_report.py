"""Render an :class:`EvalReport`: a table for people, JSON, or JUnit XML for CI."""

from __future__ import annotations

import json
from xml.sax.saxutils import escape, quoteattr

from ._run import CaseResult, EvalReport

__all__ = ["progress_line", "to_json", "to_junit", "to_rows"]


def progress_line(done: int, total: int, result: CaseResult) -> str:
    mark = "ok" if result.passed else "FAIL"
    return f"[{done}/{total}] {mark} {result.case.name}"


def to_rows(report: EvalReport) -> list[list[str]]:
    """case, result, score, pass rate, cost, views, diff (first line)."""
    rows: list[list[str]] = []
    for c in report.cases:
        views = sum(s.execution.views_reproduced for s in c.samples)
        checked = sum(s.execution.views_checked for s in c.samples)
        first = c.diff().splitlines()
        rows.append(
            [
                c.case.name,
                "pass" if c.passed else "FAIL",
                f"{c.mean_score:.2f}",
                f"{c.pass_rate:.0%}",
                f"${c.cost_usd:.4f}",
                f"{views}/{checked}",
                first[0] if first else "",
            ]
        )
    return rows


def to_json(report: EvalReport) -> str:
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False, default=str)


def to_junit(report: EvalReport) -> str:
    """One ``<testcase>`` per case; a failing case carries its diff as the failure text."""
    failures = sum(not c.passed for c in report.cases)
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<testsuite name={quoteattr("lovia eval " + report.mode)} tests="{len(report.cases)}" '
        f'failures="{failures}" time="{report.duration_s:.3f}">',
    ]
    for c in report.cases:
        latency = sum(s.sample.latency_s for s in c.samples)
        parts.append(
            f"  <testcase classname={quoteattr('lovia.eval.' + report.mode)} "
            f'name={quoteattr(c.case.name)} time="{latency:.3f}">'
        )
        if not c.passed:
            first = (c.diff().splitlines() or ["failed"])[0]
            parts.append(
                f"    <failure message={quoteattr(first)}>{escape(_clean(c.diff()))}</failure>"
            )
        parts.append("  </testcase>")
    parts.append("</testsuite>")
    return "\n".join(parts) + "\n"


def _clean(text: str) -> str:
    """XML 1.0 allows no control characters but tab, newline, carriage return."""
    return "".join(ch if ch >= " " or ch in "\t\n\r" else "\ufffd" for ch in text)
