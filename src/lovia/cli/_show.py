"""``lovia show RUN``: the transcript, turn by turn, tool calls paired with results."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence

from .._display import fmt_turns
from ..replay import RunData, entry_text, load_run, open_store
from ..replay._query import entry_label
from ..stores.base import RunInfo, Store
from ..transcript import ToolCallEntry, ToolResultEntry, TranscriptEntry, entry_to_dict
from ._common import info_dict, store_url
from ._out import Out, fmt_duration, fmt_time, info_cost, info_tokens, one_line, safe_name

__all__ = ["child_runs", "header", "render_transcript", "show"]

WIDTH = 160


async def show(args: argparse.Namespace, out: Out) -> int:
    async with open_store(store_url(args)) as db:
        run = await load_run(args.run, db)
        children = await child_runs(db, run.info.run_id)
    entries = run.entries or list(run.session_copies.values())
    if out.json_mode:
        out.json(
            {
                "run": info_dict(run.info),
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
    width = None if args.full else WIDTH
    running = run.info.status == "running"
    render_transcript(out, entries, width=width, children=children, running=running)
    return 0


async def child_runs(db: Store, run_id: str) -> dict[str, RunInfo]:
    """The child runs (agents run as tools) of ``run_id``, by the call that started them."""
    found = await db.list_runs(parent_run_id=run_id, limit=10_000)
    return {i.parent_call_id: i for i in reversed(found) if i.parent_call_id is not None}


def header(out: Out, run: RunData) -> None:
    """One line naming the run and its outcome."""
    info = run.info
    first = str(info.extra.get("first_agent", info.agent))
    agent = safe_name(info.agent)
    agents = agent if first == info.agent else f"{safe_name(first)} -> {agent}"
    reason = info.error_type or info.finish_reason
    status = f"{info.status} ({reason})" if reason else info.status
    duration = None if info.ended_at is None else info.ended_at - info.started_at
    out.line(out.style(f"run {safe_name(info.run_id)}", "bold"))
    turns = fmt_turns(info.turns, running=info.status == "running")
    out.line(
        f"agent {agents} · session {safe_name(info.session_id or '-')} · {status} · {turns} · "
        f"{info_tokens(info)} tokens · "
        f"{info_cost(info)} · {fmt_time(info.started_at)} · "
        f"{fmt_duration(duration)}"
    )


def render_transcript(
    out: Out,
    entries: Sequence[TranscriptEntry],
    width: int | None = WIDTH,
    children: Mapping[str, RunInfo] | None = None,
    running: bool = False,
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
            result = results.get(entry.call_id)
            if result is None:
                pending = "(running)" if running else "(no result)"
                out.line(out.style(f"      -> {pending}", "yellow"))
            else:
                mark = "error" if result.is_error else "->"
                text = _cut(result.content, width)
                out.line("      " + out.style(f"{mark} {text}", "red" if result.is_error else ""))
            child = (children or {}).get(entry.call_id)
            if child is not None:
                out.line("      " + out.style(_child_line(child), "magenta"))


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
