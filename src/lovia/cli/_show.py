"""``lovia show RUN``: the transcript, turn by turn, tool calls paired with results."""

from __future__ import annotations

import argparse
from collections.abc import Collection, Mapping, Sequence
from typing import Any, cast

from .._display import fmt_run_cost, fmt_turns
from ..replay import (
    ContentRef,
    RunData,
    entry_label,
    entry_text,
    find_view,
    load_run,
    open_store,
    parse_ref,
    rebuild_views,
    require_views,
    run_dict,
)
from ..stores.base import RunInfo, RunQueries
from ..stores.lifecycle import Attempt, Life, build_life
from ..stores.records import ApprovalRecord, FailedCallRecord
from ..transcript import ToolCallEntry, ToolResultEntry, TranscriptEntry, entry_to_dict
from ._common import EXIT_MISMATCH, info_dict, store_url
from ._out import Out, fmt_duration, fmt_time, info_cost, info_tokens, one_line, safe_name
from ._runs import STATE_COLORS, state_text

__all__ = ["child_runs", "header", "render_transcript", "run_json", "show"]

WIDTH = 160


async def show(args: argparse.Namespace, out: Out) -> int:
    ref = parse_ref(str(args.run))  # a chat span's lovia.content.ref: that call's view
    if ref is not None:
        return await _show_ref(args, out, ref)
    async with open_store(store_url(args)) as db:
        run = await load_run(args.run, db)
        children = await child_runs(db, run.info.run_id)
    entries = run.entries or list(run.session_copies.values())
    if out.json_mode:
        out.json(
            {
                "run": run_json(run),
                "history": [entry_to_dict(e) for e in run.history],
                "entries": [entry_to_dict(e) for e in entries],
                "children": {k: info_dict(i) for k, i in children.items()},
            }
        )
        return 0
    header(out, run)
    if run.history:
        out.line(
            out.style(
                f"({len(run.history)} earlier entries from session "
                f"{run.info.session_id} precede this run)",
                "dim",
            )
        )
    render_transcript(
        out,
        entries,
        width=None if args.full else WIDTH,
        children=children,
        running=run.info.status == "running",
        approvals=approvals_by_call(run),
        waiting={str(w.get("call_id")) for w in _life(run).waits_on},
    )
    lifecycle_lines(out, run)
    return 0


def run_json(run: RunData) -> dict[str, Any]:
    """The run's JSON with its lifecycle (attempts, approvals, failed calls)."""
    return run_dict(run.info, _life(run), full=True)


def _life(run: RunData) -> Life:
    return run.life if run.life is not None else build_life(run.info, None)


def approvals_by_call(run: RunData) -> dict[str, ApprovalRecord]:
    return {a.call_id: a for a in _life(run).approvals}


def lifecycle_lines(out: Out, run: RunData) -> None:
    """Attempts (when more than one) and failed model calls, after the transcript."""
    life = _life(run)
    if len(life.attempts) > 1:
        out.line(out.style(f"{len(life.attempts)} attempts", "bold"))
        for a in life.attempts:
            out.line("  " + attempt_line(a))
    for f in life.failed_calls:
        out.line(out.style(failed_call_line(f, run.info.run_id), "red"))


def attempt_line(a: Attempt) -> str:
    """``#2 host:pid  12:01:02 → 12:01:09 (7.0s)  killed``."""
    end = "…" if a.ended_at is None else fmt_time(a.ended_at)
    approx = "~" if a.end_estimated else ""
    how = a.how or "running"
    return (
        f"#{a.attempt} {a.host or '?'}:{a.pid or '?'}  {fmt_time(a.started_at)} → {end} "
        f"({approx}{fmt_duration(a.active_s)})  {how}"
    )


def failed_call_line(f: FailedCallRecord, run_id: str) -> str:
    status = f" HTTP {f.status}" if f.status is not None else ""
    return (
        f"turn {f.turn}: model call failed after {f.retries} retr"
        f"{'y' if f.retries == 1 else 'ies'}: {f.error_type}{status}: {one_line(f.message, 120)}"
        f"  (its view: lovia replay {run_id} --turn {f.turn})"
    )


async def _show_ref(args: argparse.Namespace, out: Out, ref: ContentRef) -> int:
    """The messages of the model call a content reference names, verified by its hash."""
    async with open_store(store_url(args)) as db:
        run = await load_run(ref.run_id, db)
    require_views(run)
    view = find_view(rebuild_views(run), ref)
    if out.json_mode:
        out.json({"run": info_dict(run.info), "view": view.to_dict()})
        return 0 if view.ok else EXIT_MISMATCH
    header(out, run)
    verdict = out.style("verified", "green") if view.ok else out.style("MISMATCH", "red", "bold")
    out.line(f"{view.label} · {view.provider}:{view.model} · view {view.recorded_hash}  {verdict}")
    for problem in view.problems:
        out.line("  " + out.style(problem, "red"))
    if view.system:
        out.line(out.style(f"system: {one_line(view.system, WIDTH)}", "dim"))
    render_transcript(out, view.messages, width=None if args.full else WIDTH)
    return 0 if view.ok else EXIT_MISMATCH


async def child_runs(db: RunQueries, run_id: str) -> dict[str, RunInfo]:
    """The child runs (agents run as tools) of ``run_id``, by the call that started them."""
    found = await db.list_runs(parent_run_id=run_id, limit=10_000)
    return {i.parent_call_id: i for i in reversed(found) if i.parent_call_id is not None}


def header(out: Out, run: RunData) -> None:
    """One line naming the run and its outcome; one saying why it is in its state."""
    info, life = run.info, _life(run)
    first = str(info.extra.get("first_agent", info.agent))
    agent = safe_name(info.agent)
    agents = agent if first == info.agent else f"{safe_name(first)} -> {agent}"
    out.line(out.style(f"run {safe_name(info.run_id)}", "bold"))
    turns = fmt_turns(info.turns, running=info.status == "running")
    active = ""
    if life.active_s is not None and len(life.attempts) > 1:
        active = f" ({fmt_duration(life.active_s)} active in {len(life.attempts)} attempts)"
    out.line(
        f"agent {agents} · session {safe_name(info.session_id or '-')} · "
        f"{state_text(out, info, life)} · {turns} · "
        f"{info_tokens(info)} tokens · "
        f"{info_cost(info)} · {fmt_time(info.started_at)} · "
        f"{fmt_duration(life.wall_s)}{active}"
    )
    repriced = info.extra.get("repriced")
    if isinstance(repriced, dict):  # lovia reprice changed the cost: say from what, when
        note = cast("dict[str, Any]", repriced)
        out.line(
            out.style(
                f"cost repriced {fmt_time(float(note.get('at', 0)))} with "
                f"{safe_name(str(note.get('prices', '?')))} "
                f"(was {fmt_run_cost(float(note.get('original_usd', 0)))})",
                "dim",
            )
        )
    if life.state != "completed":  # why it stopped, what it waits on, who cancelled it
        out.line(out.style(f"{life.state}: {life.detail}", STATE_COLORS.get(life.state, "dim")))
    if life.state == "interrupted":
        out.line(f"resume it: lovia resume {info.run_id} --agent pkg.module:agent")


def render_transcript(
    out: Out,
    entries: Sequence[TranscriptEntry],
    width: int | None = WIDTH,
    children: Mapping[str, RunInfo] | None = None,
    running: bool = False,
    approvals: Mapping[str, ApprovalRecord] | None = None,
    waiting: Collection[str] = (),
) -> None:
    """Entries grouped by turn; each tool call followed by its result (by call_id) and
    by the child run it started, if any (``running``: a call without a result is in
    flight, not failed)."""
    results = {e.call_id: e for e in entries if isinstance(e, ToolResultEntry)}
    calls = {e.call_id for e in entries if isinstance(e, ToolCallEntry)}
    turn: tuple[int, str] | None = None
    for entry in entries:
        if isinstance(entry, ToolResultEntry) and entry.call_id in calls:
            continue  # printed under its call
        if (entry.turn, entry.agent) != turn:
            turn = (entry.turn, entry.agent)
            out.line(out.style(f"turn {entry.turn} · {safe_name(entry.agent)}", "bold", "blue"))
        _entry(out, entry, width)
        if isinstance(entry, ToolCallEntry):
            decided = (approvals or {}).get(entry.call_id)
            if decided is not None:
                out.line("      " + out.style(approval_line(decided), "yellow"))
            result = results.get(entry.call_id)
            if result is None:
                if entry.call_id in waiting:
                    what = "waiting for approval"
                else:
                    what = "running" if running else "no result"
                out.line(out.style(f"      -> ({what})", "yellow"))
            else:
                mark = "error" if result.is_error else "->"
                text = _cut(result.content, width)
                out.line("      " + out.style(f"{mark} {text}", "red" if result.is_error else ""))
            child = (children or {}).get(entry.call_id)
            if child is not None:
                out.line("      " + out.style(_child_line(child), "magenta"))


def approval_line(a: ApprovalRecord) -> str:
    """``approved by cli:alice at 12:00:01 (reason)``."""
    why = f" ({a.reason})" if a.reason else ""
    return f"{a.decision} by {a.actor} at {fmt_time(a.at)}{why}"


def _child_line(info: RunInfo) -> str:
    reason = info.error_type or info.finish_reason
    status = f"{info.status} ({reason})" if reason else info.status
    run_id = safe_name(info.run_id)
    return (
        f"child run {run_id} · {safe_name(info.agent)} · {status} · "
        f"{fmt_turns(info.turns, running=info.status == 'running')} · "
        f"{info_tokens(info)} tokens · {info_cost(info)}  "
        f"(lovia show {run_id})"
    )


_COLORS = {
    "system": "dim",
    "assistant": "green",
    "tool": "cyan",
    "handoff": "magenta",
    "reasoning": "dim",
}


def _entry(out: Out, entry: TranscriptEntry, width: int | None) -> None:
    label = entry_label(entry)
    if isinstance(entry, ToolCallEntry):  # a tool's name is shown as a name
        text = f"{_cut(f'{safe_name(entry.name)}({entry.arguments})', width)}"
        text = f"{text}  [{safe_name(entry.call_id)}]"
    else:
        text = _cut(entry_text(entry), width)
    if isinstance(entry, ToolResultEntry):
        text = f"{text}  [{safe_name(entry.call_id)}, no call in this run]"
    out.line(f"  {out.style(label.ljust(10), _COLORS.get(label, 'bold'))}{text}")


def _cut(text: str, width: int | None) -> str:
    if width is None:
        return text.replace("\n", "\n            ")
    return one_line(text, width)
