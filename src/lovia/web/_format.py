"""Jinja filters: the CLI's number/time formats, JSON, and safe internal URLs."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any
from urllib.parse import quote

from .._display import fmt_cost, fmt_duration, fmt_time, fmt_tokens, safe_name

__all__ = ["FILTERS", "path", "run_id_param"]

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
    "name": safe_name,  # bidi overrides and invisible characters in names shown visibly
    "path": path,
    "path_id": path_id,
    "time": fmt_time,
    "tokens": tokens,
}
