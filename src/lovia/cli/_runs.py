"""``lovia runs``: recent runs, newest first."""

from __future__ import annotations

import argparse

from .._display import fmt_token_total
from ..replay import open_store
from ..stores.base import USAGE_MISSING_KEY, RunInfo
from ._common import info_dict, store_url
from ._out import Out, fmt_duration, fmt_time, info_cost, safe_name

__all__ = ["runs"]

HEADERS = ("RUN", "AGENT", "SESSION", "STATUS", "TURNS", "TOKENS", "COST", "STARTED", "DURATION")


async def runs(args: argparse.Namespace, out: Out) -> int:
    async with open_store(store_url(args)) as db:
        found = await db.list_runs(
            session_id=args.session,
            agent=args.agent,
            status=args.status,
            limit=args.limit,
            top_level=not args.all,  # child runs are part of their parent's row
        )
    if out.json_mode:
        out.json([info_dict(i) for i in found])
        return 0
    if not found:
        out.line("no runs")
        return 0
    out.table(HEADERS, [_row(out, i) for i in found], right=(4, 5, 6, 8))
    return 0


def _status(out: Out, info: RunInfo) -> str:
    reason = info.error_type or info.finish_reason
    text = f"{info.status}/{reason}" if reason else info.status
    color = {"completed": "green", "failed": "red", "paused": "yellow"}.get(info.status)
    return out.style(text, color) if color else text


def _row(out: Out, info: RunInfo) -> list[str]:
    duration = None if info.ended_at is None else max(0.0, info.ended_at - info.started_at)
    return [
        safe_name(info.run_id) if info.parent_run_id is None else f"└ {safe_name(info.run_id)}",
        safe_name(info.agent),
        safe_name(info.session_id or "-"),
        _status(out, info),
        str(info.turns),
        fmt_token_total(
            info.input_tokens + info.output_tokens,
            bool(info.extra.get(USAGE_MISSING_KEY, False)),
        ),
        info_cost(info),
        fmt_time(info.started_at),
        fmt_duration(duration),
    ]
