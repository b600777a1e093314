"""Jinja filters: the CLI's number/time formats, JSON, and safe internal URLs."""

from __future__ import annotations

import base64
import binascii
import json
import math
from typing import Any, cast
from urllib.parse import quote, urlencode

from .._display import (
    fmt_duration,
    fmt_time,
    fmt_token_total,
    fmt_tokens,
    fmt_turns,
    fmt_usage,
    safe_name,
    safe_text,
)

__all__ = ["FILTERS", "TEXT_LIMIT", "clip", "cost_text", "path", "query", "run_id_param"]

TEXT_LIMIT = 2_000
"""Characters of one message or tool result printed in a page; the rest on demand."""
_ENCODED = "~"
"""Marks a run id carried in base64url: one with ``/``, ``\\`` or ``%`` in it, ``.`` or
``..``, or one that starts with ``~`` (servers decode ``%2F`` before routing, some
twice, and browsers resolve dot segments, so quoting alone cannot carry these)."""


def path(value: Any) -> str:
    """One URL path segment (a run id is stored data: it is quoted, never trusted)."""
    return quote(path_id(value), safe="")


def path_id(value: Any) -> str:
    """The segment for a run id before quoting (``data-run`` for scripts that quote it)."""
    text = str(value)
    if text in (".", "..") or text.startswith(_ENCODED) or any(c in text for c in "/\\%"):
        raw = text.encode("utf-8", "surrogatepass")
        text = _ENCODED + base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
    return text


def run_id_param(segment: str) -> str:
    """The run id a :func:`path` segment carries (an undecodable one is itself)."""
    if not segment.startswith(_ENCODED):
        return segment
    body = segment[len(_ENCODED) :]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        return raw.decode("utf-8", "surrogatepass")
    except (binascii.Error, ValueError):
        return segment


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


def cost(value: float | None, used_tokens: int | None = None, unpriced: int = 0) -> str:
    """``cost_text``; a total with ``unpriced`` calls in it is a lower bound: ``$x+?``
    (``?`` when nothing in it was priced)."""
    if unpriced:
        return f"{cost_text(value)}+?" if value else "?"
    return cost_text(value, used_tokens)


def _field(item: Any, name: str, default: Any = None) -> Any:
    """A run (``info_dict``) or a turn (``Turn``): dict key or attribute."""
    if isinstance(item, dict):
        return cast("dict[str, Any]", item).get(name, default)
    return getattr(item, name, default)


def usage_cost(item: Any) -> str:
    """A run's or a turn's cost (adaptive precision); ``?`` / ``$x+?`` when some calls
    have no known price."""
    usd = float(_field(item, "cost_usd") or 0.0)
    if int(_field(item, "unpriced", 0) or 0):
        return f"{cost_text(usd)}+?" if usd else "?"
    used = int(_field(item, "input_tokens") or 0) + int(_field(item, "output_tokens") or 0)
    return cost_text(usd, used)


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


def clip(text: str | None, limit: int = TEXT_LIMIT) -> str:
    """The first ``limit`` characters (the page offers the rest)."""
    text = text or ""
    return text if len(text) <= limit else text[:limit]


FILTERS: dict[str, Any] = {
    "clip": clip,
    "cost": cost,
    "duration": fmt_duration,
    "json": pretty_json,
    "name": safe_name,  # bidi overrides and invisible characters in names shown visibly
    "text": safe_text,  # the same in multi-line text (line breaks and tabs kept)
    "path": path,
    "run_turns": run_turns,
    "path_id": path_id,
    "time": fmt_time,
    "tokens": tokens,
    "total_tokens": total_tokens,
    "usage_cost": usage_cost,
    "usage_tokens": usage_tokens,
}
