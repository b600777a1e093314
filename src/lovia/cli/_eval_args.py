"""Arguments of ``lovia pin`` and ``lovia eval`` (argparse only: ``--help`` stays fast)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_eval_parsers"]


def add_eval_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``pin`` and ``eval`` on the ``lovia`` subcommand parser."""
    pin = sub.add_parser(
        "pin", parents=[common], help="pin a recorded run (or one turn) as an eval case"
    )
    pin.add_argument("run", metavar="RUN[:TURN]", help="run id (a unique prefix, or `last`)")
    pin.add_argument("--to", metavar="DIR", default="evals", help="cases folder (default evals)")
    pin.add_argument("--name", metavar="NAME", help="case name (default: the run id)")
    ev = sub.add_parser("eval", parents=[common], help="re-run pinned cases and score them")
    ev.add_argument("cases", metavar="DIR", help="a case folder or a folder of cases")
    what = ev.add_mutually_exclusive_group()
    what.add_argument(
        "--baseline",
        action="store_true",
        help="recorded model responses and tool results only: prove every view reproduces",
    )
    what.add_argument("--agent", metavar="MOD:ATTR", help="the candidate agent (pkg.mod:agent)")
    ev.add_argument("--model", metavar="M", help="candidate model (provider:model)")
    ev.add_argument("--instructions", metavar="FILE", help="candidate system prompt from FILE")
    ev.add_argument("--samples", type=int, default=1, metavar="N", help="re-runs per case")
    ev.add_argument(
        "--safe-live",
        metavar="TOOL",
        action="append",
        default=[],
        help="run this tool for real when a call has no pinned result (repeatable)",
    )
    ev.add_argument(
        "--min-pass-rate",
        type=float,
        default=1.0,
        metavar="R",
        help="exit 1 below this pass rate (0..1, default 1.0) or below the baseline's",
    )
    ev.add_argument("--format", choices=["table", "json", "junit"], default=None)
    ev.add_argument("--output", metavar="FILE", help="also write the json/junit report here")
