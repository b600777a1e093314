"""``lovia replay``: rebuild each model view of a run, verify it, render or re-send it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from ..errors import RunNotFound, UserError
from ..replay import (
    HASH_ATTRIBUTE,
    ReplayedView,
    RunData,
    Verification,
    entry_text,
    failed_call,
    find_view,
    load_run,
    open_store,
    parse_ref,
    rebuild_views,
    require_views,
    select,
)
from ..replay import verify as verify_views
from ..stores.base import ReadOnlyStore
from ._common import EXIT_MISMATCH, EXIT_OK, info_dict, store_url
from ._out import Out, one_line, safe_name
from ._whatif import diff_text, render_requests, whatif

__all__ = ["replay"]

WIDTH = 120


async def replay(args: argparse.Namespace, out: Out) -> int:
    ref = parse_ref(str(args.run)) if args.run else None  # a chat span's lovia.content.ref
    if ref is not None:
        args.run = ref.run_id
    async with open_store(store_url(args)) as db:
        run = await load_run(await _run_id(args, db), db)
    require_views(run)
    report = verify_views(run, rebuild_views(run))
    if args.diff:
        return diff_text(out, report.views, args.diff[0], args.diff[1])
    chosen = [find_view(report.views, ref)] if ref is not None else _chosen(report.views, args)
    if args.model:
        return await whatif(args, out, run, chosen[-1])
    fmt = args.format or ("json" if args.json else "text")
    if fmt == "request":
        return await render_requests(args, out, chosen)
    shown = {id(v) for v in chosen} | {id(s) for v in chosen for s in v.summaries}
    bad = [m for m in report.mismatches if id(m.view) in shown]
    if fmt == "json":
        out.json(
            {
                "run": info_dict(run.info),
                "ok": not bad,
                "views": [_json_view(run, v, report) for v in chosen],
            }
        )
    else:
        _text(out, run, chosen, report, width=None if args.full else WIDTH)
    for mismatch in bad:
        sys.stderr.write(
            f"error: the view of {mismatch.view.label} does not match its recorded hash\n"
        )
    return EXIT_MISMATCH if bad else EXIT_OK


async def _run_id(args: argparse.Namespace, db: ReadOnlyStore) -> str:
    run_id = await _parent_id(args, db)
    if not args.child:
        return run_id
    from ..replay import resolve_run_id
    from ._show import child_runs

    parent = await resolve_run_id(run_id, db)
    children = await child_runs(db, parent)
    child = children.get(str(args.child))
    if child is None:
        raise RunNotFound(
            f"run {parent} has no child run started by tool call {args.child!r}",
            hint=f"Its child runs were started by: {', '.join(children) or '(none)'} "
            f"(lovia show {parent} shows them under their tool calls).",
        )
    return child.run_id


async def _parent_id(args: argparse.Namespace, db: ReadOnlyStore) -> str:
    if args.run and args.trace_id:
        raise UserError("give a run id or --trace-id, not both")
    if args.run:
        return str(args.run)
    if not args.trace_id:
        raise UserError(
            "which run?",
            hint="lovia replay RUN, or lovia replay --trace-id T; `lovia runs` lists recent runs.",
        )
    trace_id = str(args.trace_id).strip().lower()
    info = await db.find_run_by_trace(trace_id)
    if info is None:
        raise RunNotFound(
            f"no run with trace id {trace_id} in this store",
            hint="Trace ids are stored when the run had an OpenTelemetry SDK configured; "
            "check --store / $LOVIA_STORE.",
        )
    return info.run_id


def _chosen(views: list[ReplayedView], args: argparse.Namespace) -> list[ReplayedView]:
    chosen = select(views, args.turn, args.attempt)
    if args.model and args.turn is None:
        raise UserError(
            "--model needs --turn N (which view to re-send)",
            hint=f"Turns with views: {_turns(views)}.",
        )
    if not chosen:
        want = f"turn {args.turn}" + (f" attempt {args.attempt}" if args.attempt else "")
        raise UserError(
            f"this run has no view for {want}", hint=f"Turns with views: {_turns(views)}."
        )
    return chosen


def _turns(views: Sequence[ReplayedView]) -> str:
    return ", ".join(str(t) for t in sorted({v.turn for v in views}))


def _json_view(run: RunData, view: ReplayedView, report: Verification) -> dict[str, Any]:
    data = view.to_dict()
    data["mismatch"] = next((m.details for m in report.mismatches if m.view is view), None)
    failed = failed_call(run, view)
    data["failed_call"] = None if failed is None else asdict(failed)
    return data


def _text(
    out: Out, run: RunData, views: Sequence[ReplayedView], report: Verification, width: int | None
) -> None:
    info = run.info
    out.line(
        out.style(f"run {safe_name(info.run_id)}", "bold") + f" · {len(run.views)} views · "
        f"session {safe_name(info.session_id or '-')} · {info.status}"
    )
    for view in views:
        out.line()
        _view_block(out, view, report, width)
        failed = failed_call(run, view)
        if failed is not None:  # the request above is what was sent when the call failed
            status = f" HTTP {failed.status}" if failed.status is not None else ""
            out.line(
                out.style(
                    f"  this call FAILED after {failed.retries} retries: {failed.error_type}"
                    f"{status}: {failed.message}",
                    "red",
                )
            )
    calls = [*views, *(s for v in views for s in v.summaries)]
    good = sum(1 for v in calls if v.ok)
    verdict = "all verified" if good == len(calls) else f"{len(calls) - good} MISMATCHED"
    summaries = len(calls) - len(views)
    also = f", {summaries} of them summary calls" if summaries else ""
    out.line()
    out.line(
        out.style(
            f"{good}/{len(calls)} views rebuilt with the recorded hash{also} ({verdict})",
            "green" if good == len(calls) else "red",
        )
    )


def _view_block(out: Out, view: ReplayedView, report: Verification, width: int | None) -> None:
    out.line(
        out.style(
            f"{view.label} · {safe_name(view.agent)} · {view.provider}:{safe_name(view.model)}",
            "bold",
            "blue",
        )
    )
    out.line(f"  recorded  {view.recorded_hash}")
    if view.ok:
        out.line(
            f"  rebuilt   {view.rebuilt_hash}  "
            + out.style(f"ok (same hash as span attribute {HASH_ATTRIBUTE})", "green")
        )
    else:
        out.line(
            f"  rebuilt   {view.rebuilt_hash or '(not rebuilt)'}  "
            + out.style("MISMATCH", "red", "bold")
        )
        mismatch = next(m for m in report.mismatches if m.view is view)
        for line in mismatch.details:
            out.line("    " + out.style(line, "red"))
    out.line(f"  system    {_cut(view.system, width)}")
    tools = ", ".join(safe_name(str(t["name"])) for t in view.tools) or "-"
    out.line(f"  tools     {tools}")
    out.line(f"  settings  {view.settings or '{}'}")
    if view.record.summary is not None:
        out.line(f"  summary   {_cut(view.record.summary, width)}")
    for summary in view.summaries:  # the summarizer's own view, verified like this one
        state = out.style("ok", "green") if summary.ok else out.style("MISMATCH", "red", "bold")
        out.line(
            f"  summary call  {summary.provider}:{summary.model} · "
            f"{len(summary.messages)} entries · {summary.recorded_hash}  {state}"
        )
        for line in summary.problems:
            out.line("    " + out.style(line, "red"))
    injected = len(view.record.injected)
    stubs = sum(1 for i in view.record.order if i in view.record.replaced)
    out.line(f"  view      {len(view.messages)} entries ({stubs} replaced, {injected} injected)")
    _messages(out, view, width)


def _messages(out: Out, view: ReplayedView, width: int | None) -> None:
    origin = [
        *("replaced" if i in view.record.replaced else "" for i in view.record.order),
        *("injected" for _ in view.record.injected),
    ]
    for entry, how in zip(view.messages, origin, strict=False):
        role = _role(entry)
        mark = out.style(f" ({how})", "yellow") if how else ""
        out.line(f"    {role.ljust(12)}{_cut(entry_text(entry), width)}{mark}")


def _role(entry: Any) -> str:
    if entry.type == "input":
        return str(entry.role)
    return {
        "text": "assistant",
        "tool_call": "tool_call",
        "tool_result": "tool_result",
        "reasoning": "reasoning",
        "handoff": "handoff",
        "system": "system",
    }[entry.type]


def _cut(text: str, width: int | None) -> str:
    return text if width is None else one_line(text, width)
