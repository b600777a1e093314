"""Jinja filters: the CLI's number/time formats, JSON, and safe internal URLs."""

from __future__ import annotations

import json
import math
from typing import Any
from urllib.parse import quote, urlencode

from .._display import fmt_duration, fmt_time, fmt_tokens

__all__ = ["FILTERS", "TEXT_LIMIT", "clip", "cost_text", "path", "query"]

TEXT_LIMIT = 2_000
"""Characters of one message or tool result printed in a page; the rest on demand."""


def path(value: Any) -> str:
    """One URL path segment (a run id is stored data: it is quoted, never trusted)."""
    return quote(str(value), safe="")


def query(**fields: Any) -> str:
    """A query string of the fields that have a value (shared URLs carry no empty ones)."""
    kept = {k: 1 if v is True else v for k, v in fields.items() if v not in (None, "", 0, False)}
    return urlencode(kept)


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def tokens(value: int | None) -> str:
    return "-" if value is None else fmt_tokens(int(value))


def cost_text(usd: float | None, used_tokens: int | None = None) -> str:
    """Dollars with as many decimals as the amount needs (two significant digits below
    a cent, never ``$0.0000`` for a run that used tokens): ``?`` when the price is
    unknown (no cost, or none recorded for tokens that were used)."""
    if usd is None or (usd == 0 and used_tokens):
        return "?"
    if usd <= 0:
        return "-"
    if usd >= 1:
        return f"${usd:,.2f}"
    decimals = max(2, 1 - math.floor(math.log10(usd)))
    return f"${usd:.{decimals}f}"


def cost(value: float | None, used_tokens: int | None = None) -> str:
    return cost_text(value, used_tokens)


def clip(text: str | None, limit: int = TEXT_LIMIT) -> str:
    """The first ``limit`` characters (the page offers the rest)."""
    text = text or ""
    return text if len(text) <= limit else text[:limit]


FILTERS: dict[str, Any] = {
    "clip": clip,
    "cost": cost,
    "duration": fmt_duration,
    "json": pretty_json,
    "path": path,
    "time": fmt_time,
    "tokens": tokens,
}
