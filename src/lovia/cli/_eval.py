"""``lovia pin`` and ``lovia eval``: from a recorded run to a scored regression test."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, cast

from ..agent import Agent
from ..errors import UserError
from ._common import EXIT_MISMATCH, EXIT_OK, store_url
from ._out import Out

__all__ = ["eval_command", "pin_command"]


async def pin_command(args: argparse.Namespace, out: Out) -> int:
    from ..evals import pin

    case = await pin(str(args.run), store_url(args), to=Path(args.to), name=args.name)
    folder = Path(args.to) / case.name
    if out.json_mode:
        out.json(
            {
                "case": case.name,
                "path": str(folder),
                "views": len(case.views),
                "source": case.source,
            }
        )
        return EXIT_OK
    out.line(
        f"pinned {case.name}: turn {case.start_turn}, {len(case.views)} view(s), "
        f"{len(case.tool_results)} tool result(s) -> {folder}"
    )
    for note in case.notes:
        out.line(out.style(f"note: {note}", "yellow"))
    return EXIT_OK


def _instructions(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(
            f"cannot read --instructions {path}: {exc}", hint="Pass a UTF-8 text file."
        ) from None


async def eval_command(args: argparse.Namespace, out: Out) -> int:
    from ..evals import evaluate
    from ..evals._report import progress_line, to_json, to_junit, to_rows

    agent: Agent[Any, Any] | None = None
    if args.agent:
        from .._imports import import_object

        found = import_object(
            str(args.agent), hint="Run from the folder that holds the module, or set PYTHONPATH."
        )
        if not isinstance(found, Agent):
            raise UserError(f"{args.agent} is not a lovia Agent", hint="Point --agent at an Agent.")
        agent = cast(Agent[Any, Any], found)
    if not (args.baseline or agent is not None or args.model):
        raise UserError(
            "lovia eval needs --baseline, --agent MOD:ATTR or --model M",
            hint="Start with `lovia eval DIR --baseline` to prove the cases reproduce.",
        )
    if not 0.0 <= float(args.min_pass_rate) <= 1.0:
        raise UserError(
            f"--min-pass-rate {args.min_pass_rate} is not between 0 and 1",
            hint="0.9 requires 90% of the cases to pass.",
        )
    progress = sys.stderr.isatty()

    def on_case(done: int, total: int, result: Any) -> None:
        if progress:
            sys.stderr.write("\r\x1b[2K" + progress_line(done, total, result))
            sys.stderr.flush()

    report = await evaluate(
        Path(args.cases),
        baseline=bool(args.baseline),
        agent=agent,
        model=args.model,
        instructions=_instructions(args.instructions),
        samples=int(args.samples),
        safe_live=list(args.safe_live),
        on_case=on_case,
    )
    if progress:
        sys.stderr.write("\r\x1b[2K")
    fmt = args.format or ("json" if out.json_mode else "table")
    text = to_json(report) if fmt == "json" else to_junit(report) if fmt == "junit" else None
    if args.output and text is not None:
        _write(Path(args.output), text)
    if text is not None:
        out.stream.write(text)
    else:
        _table(report, out, to_rows(report))
    return EXIT_OK if report.ok(float(args.min_pass_rate)) else EXIT_MISMATCH


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write --output {path}: {exc}", hint="Check the path.") from None


def _printable(text: str) -> str:
    """Control characters (terminal escapes included) shown, never sent to the terminal."""
    return "".join(
        ch if ch.isprintable() or ch == "\t" else ch.encode("unicode_escape").decode()
        for ch in text
    )


def _table(report: Any, out: Out, rows: list[list[str]]) -> None:
    rows = [[_printable(cell) for cell in row] for row in rows]
    out.table(
        ["case", "result", "score", "pass", "cost", "views", "diff"], rows, right=(2, 3, 4, 5)
    )
    for c in report.cases:
        if not c.passed:
            out.line()
            out.line(out.style(f"{c.case.name}:", "red", "bold"))
            for line in c.diff().splitlines():
                out.line("  " + _printable(line))
    base = report.baseline_pass_rate
    out.line()
    out.line(
        f"{report.mode}: {sum(c.passed for c in report.cases)}/{len(report.cases)} passed "
        f"({report.pass_rate:.0%}"
        + (f"; recorded outputs {base:.0%}" if base is not None else "")
        + f"), mean score {report.mean_score:.2f}, cost ${report.cost_usd:.4f}, "
        f"{report.duration_s:.2f}s"
    )
