"""Jinja filters: the CLI's number/time formats, JSON, and safe internal URLs."""

from __future__ import annotations

import json
from typing import Any, cast
from urllib.parse import quote

from .._display import (
    fmt_cost,
    fmt_duration,
    fmt_run_cost,
    fmt_time,
    fmt_token_total,
    fmt_tokens,
    fmt_turns,
    fmt_usage,
)

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


def _field(item: Any, name: str, default: Any = None) -> Any:
    """A run (``info_dict``) or a turn (``Turn``): dict key or attribute."""
    if isinstance(item, dict):
        return cast("dict[str, Any]", item).get(name, default)
    return getattr(item, name, default)


def usage_cost(item: Any) -> str:
    """A run's or a turn's cost; ``?`` / ``$x+?`` when some calls have no known price."""
    return fmt_run_cost(float(_field(item, "cost_usd") or 0.0), int(_field(item, "unpriced", 0)))


def usage_tokens(item: Any) -> str:
    """``input+output`` tokens; ``?`` when the provider reported none."""
    missing = bool(_field(item, "usage_missing", False))
    tokens_in = int(_field(item, "input_tokens") or 0)
    return fmt_usage(tokens_in, int(_field(item, "output_tokens") or 0), missing)


def total_tokens(item: Any) -> str:
    total = int(_field(item, "input_tokens") or 0) + int(_field(item, "output_tokens") or 0)
    return fmt_token_total(total, bool(_field(item, "usage_missing", False)))


def run_turns(run: Any) -> str:
    """``3 turns``; ``in turn 1`` while the run is running."""
    return fmt_turns(int(_field(run, "turns", 0)), running=_field(run, "status") == "running")


FILTERS: dict[str, Any] = {
    "cost": cost,
    "run_turns": run_turns,
    "total_tokens": total_tokens,
    "usage_cost": usage_cost,
    "usage_tokens": usage_tokens,
    "duration": fmt_duration,
    "json": pretty_json,
    "path": path,
    "time": fmt_time,
    "tokens": tokens,
}
