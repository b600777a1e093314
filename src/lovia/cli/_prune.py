"""``lovia prune --older-than 30d``: retention for a run store."""

from __future__ import annotations

import argparse
import re

from ..errors import UserError
from ..replay import open_store
from ._common import store_url
from ._out import Out

__all__ = ["parse_age", "prune"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")


def parse_age(text: str) -> float:
    """``30d`` / ``12h`` / ``90m`` / ``45s`` / ``2w`` (a bare number is seconds)."""
    match = _AGE.match(text)
    if match is None:
        raise UserError(
            f"--older-than {text!r} is not an age",
            hint="Write a number and a unit: 30d, 12h, 90m, 45s or 2w.",
        )
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


async def prune(args: argparse.Namespace, out: Out) -> int:
    age = parse_age(str(args.older_than))
    force = bool(args.force)
    async with open_store(store_url(args), read_only=False) as db:
        count = await db.prune(
            age, status=args.status, records_only=bool(args.records_only), force=force
        )
    what = "records of " if args.records_only else ""
    if out.json_mode:
        out.json({"pruned": count, "records_only": bool(args.records_only), "force": force})
        return 0
    out.line(
        f"pruned the {what}{count} run{'' if count == 1 else 's'} "
        f"that ended more than {args.older_than} ago"
    )
    if not force and args.status != "completed":
        out.line(
            "(failed and cancelled runs that ran tools were kept: they can resume without "
            "running a tool twice; --force prunes them too)"
        )
    return 0
