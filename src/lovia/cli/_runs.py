"""``lovia runs``: recent runs, newest first, with their lifecycle state."""

from __future__ import annotations

import argparse

from .._display import fmt_run_cost, fmt_token_total
from ..labels import parse_label
from ..replay import open_store, run_dict
from ..stores.base import UNPRICED_KEY, USAGE_MISSING_KEY, RunInfo
from ..stores.lifecycle import Life, list_lives
from ._common import store_url
from ._out import Out, fmt_duration, fmt_time, info_cost, safe_name

__all__ = ["STATE_COLORS", "runs", "state_text"]

HEADERS = ("RUN", "AGENT", "SESSION", "STATE", "TURNS", "TOKENS", "COST", "STARTED", "WALL")

STATE_COLORS = {
    "completed": "green",
    "failed": "red",
    "paused": "yellow",
    "interrupted": "magenta",
    "cancelled": "dim",
    "dead_lettered": "red",
}


async def runs(args: argparse.Namespace, out: Out) -> int:
    labels = dict(parse_label(text) for text in args.label or ())
    async with open_store(store_url(args)) as db:
        found = await list_lives(
            db,
            state=args.status,
            session_id=args.session,
            agent=args.agent,
            limit=args.limit,
            top_level=not args.all,  # child runs are part of their parent's row
            labels=labels,
        )
    if out.json_mode:
        out.json([run_dict(info, life) for info, life in found])
        return 0
    if not found:
        out.line("no runs")
        return 0
    out.table(HEADERS, [_row(out, i, life) for i, life in found], right=(4, 5, 6, 8))
    if labels:
        out.line(_totals(labels, [info for info, _ in found]))
    if args.status == "interrupted":
        out.line(out.style("resume one with: lovia resume RUN --agent pkg.module:agent", "dim"))
    return 0


def _totals(labels: dict[str, str], infos: list[RunInfo]) -> str:
    """``total for tenant=acme: 3 runs, 1,234 tokens, $0.0123`` over the runs listed
    (a top-level run's cost includes its child runs')."""
    which = " ".join(f"{k}={safe_name(v)}" for k, v in labels.items())
    tokens = sum(i.input_tokens + i.output_tokens for i in infos)
    cost = fmt_run_cost(
        sum(i.cost_usd for i in infos), sum(int(i.extra.get(UNPRICED_KEY, 0)) for i in infos)
    )
    return f"total for {which}: {len(infos)} runs, {tokens:,} tokens, {cost}"


def state_text(out: Out, info: RunInfo, life: Life) -> str:
    """``failed/ProviderError``, ``interrupted``, ``paused/approval_pending``: colored."""
    reason = None
    if life.state == "failed":
        reason = info.error_type or info.finish_reason
    elif life.state in ("completed", "paused"):
        reason = info.finish_reason
    text = f"{life.state}/{reason}" if reason else life.state
    color = STATE_COLORS.get(life.state)
    return out.style(text, color) if color else text


def _row(out: Out, info: RunInfo, life: Life) -> list[str]:
    return [
        safe_name(info.run_id) if info.parent_run_id is None else f"└ {safe_name(info.run_id)}",
        safe_name(info.agent),
        safe_name(info.session_id or "-"),
        state_text(out, info, life),
        str(info.turns),
        fmt_token_total(
            info.input_tokens + info.output_tokens,
            bool(info.extra.get(USAGE_MISSING_KEY, False)),
        ),
        info_cost(info),
        fmt_time(info.started_at),
        fmt_duration(life.wall_s),
    ]
