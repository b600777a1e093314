"""Jinja filters: the CLI's number/time formats, JSON, and safe internal URLs."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from .._display import fmt_cost, fmt_duration, fmt_time, fmt_tokens

__all__ = ["FILTERS", "path"]


def path(value: Any) -> str:
    """One URL path segment (a run id is stored data: it is quoted, never trusted)."""
    return quote(str(value), safe="")


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def tokens(value: int | None) -> str:
    return "-" if value is None else fmt_tokens(int(value))


def cost(value: float | None) -> str:
    return "-" if value is None else fmt_cost(float(value))


FILTERS: dict[str, Any] = {
    "cost": cost,
    "duration": fmt_duration,
    "json": pretty_json,
    "path": path,
    "time": fmt_time,
    "tokens": tokens,
}
