"""``lovia reprice``: recompute stored runs' cost with the prices in force now."""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime

from .._display import fmt_run_cost
from ..errors import UserError
from ..replay import open_store, resolve_run_id
from ..replay.reprice import Repriced, correction_metric, reprice_runs
from ..stores.base import Store
from ._common import store_url
from ._out import Out, safe_name
from ._prune import parse_age
from ._telemetry import setup_telemetry

__all__ = ["parse_when", "reprice"]

HEADERS = ("RUN", "AGENT", "BEFORE", "AFTER", "CHANGE", "NOTE")


def parse_when(text: str, now: float) -> float:
    """``2026-11-30``, ``2026-11-30T12:00`` (UTC unless it says) or an age (``7d``)."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        try:
            return now - parse_age(text)
        except UserError:
            raise UserError(
                f"{text!r} is neither a date nor an age",
                hint="Write 2026-11-30, 2026-11-30T12:00, or an age like 7d or 12h.",
            ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


async def _selected(args: argparse.Namespace, db: Store) -> list[str]:
    if args.run:
        return [await resolve_run_id(args.run, db)]
    if not (args.all or args.since or args.until):
        raise UserError(
            "say which runs to reprice",
            hint="Give a RUN id, a range (--since 7d, --until 2026-11-30), or --all.",
        )
    now = time.time()
    since = parse_when(args.since, now) if args.since else float("-inf")
    until = parse_when(args.until, now) if args.until else float("inf")
    rows = await db.list_runs(limit=10_000_000, top_level=True)
    return [r.run_id for r in reversed(rows) if since <= r.started_at < until]


async def reprice(args: argparse.Namespace, out: Out) -> int:
    dry = bool(args.dry_run)
    url = store_url(args)
    async with open_store(url, read_only=dry) as db:
        found = await reprice_runs(db, await _selected(args, db), dry_run=dry)
    if not dry:
        _export_correction(found, getattr(args, "telemetry", None), url)
    changed = [r for r in found if r.changed and r.parent_run_id is None]
    total = sum(r.after - r.before for r in changed)
    if out.json_mode:
        out.json(
            {
                "dry_run": dry,
                "runs": [_dict(r) for r in found],
                "changed": len(changed),
                "total_change_usd": total,
            }
        )
        return 0
    if not found:
        out.line("no runs")
        return 0
    out.table(HEADERS, [_row(r) for r in found], right=(2, 3, 4))
    verb = "would change" if dry else "changed"
    out.line(f"{verb} {len(changed)} of {len(found)} runs; total change {_signed(total)}")
    return 0


def _signed(usd: float) -> str:
    return f"{'+' if usd >= 0 else '-'}${abs(usd):.4f}"


def _export_correction(found: list[Repriced], flag: str | None, url: str) -> None:
    """``lovia.cost.correction`` through the process's meter provider: the one installed
    already (``opentelemetry-instrument``), else the one ``--telemetry``, ``$LOVIA_TELEMETRY``
    or the ``OTEL_EXPORTER_OTLP_*`` variables ask for, flushed before the command ends."""
    telemetry = setup_telemetry(flag, url, metrics=True)
    try:
        correction_metric(found)
    finally:
        if telemetry is not None:
            telemetry.shutdown()


def _row(r: Repriced) -> list[str]:
    name = safe_name(r.run_id) if r.parent_run_id is None else f"└ {safe_name(r.run_id)}"
    before = fmt_run_cost(r.before, r.unpriced_before)
    if r.skipped is not None:
        return [name, safe_name(r.agent), before, "-", "-", f"skipped: {r.skipped}"]
    note = "" if r.changed else "unchanged"
    after = fmt_run_cost(r.after, r.unpriced_after)
    return [name, safe_name(r.agent), before, after, _signed(r.after - r.before), note]


def _dict(r: Repriced) -> dict[str, object]:
    return {
        "run_id": r.run_id,
        "agent": r.agent,
        "parent_run_id": r.parent_run_id,
        "before_usd": r.before,
        "after_usd": r.after,
        "unpriced_before": r.unpriced_before,
        "unpriced_after": r.unpriced_after,
        "changed": r.changed,
        "skipped": r.skipped,
    }
