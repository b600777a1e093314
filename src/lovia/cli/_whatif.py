"""``lovia replay`` extras: ``--diff A B``, ``--format request``, ``--model M`` (what-if)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from ..errors import UserError
from ..replay import (
    ReplayedView,
    RunData,
    ViewDiff,
    WhatIfPolicy,
    brief,
    diff_views,
    entry_text,
    recorded_answer,
    render_bodies,
    select,
    whatif_dict,
)
from ..replay import whatif as rerun_view
from ._common import EXIT_MISMATCH, EXIT_OK
from ._out import Out, one_line

__all__ = ["diff_text", "render_requests", "whatif"]


def diff_text(out: Out, views: Sequence[ReplayedView], a: int, b: int) -> int:
    """Print what changed between the (last attempt of the) views of turns a and b."""
    view_a, view_b = _last(views, a), _last(views, b)
    diff = diff_views(view_a, view_b)
    if out.json_mode:
        out.json(diff.to_dict())
        return 0
    out.line(out.style(f"{diff.a} -> {diff.b}", "bold"))
    for line in diff_lines(diff, view_a, view_b):
        out.line(line)
    return 0


def _last(views: Sequence[ReplayedView], turn: int) -> ReplayedView:
    chosen = select(views, turn)
    if not chosen:
        turns = ", ".join(str(t) for t in sorted({v.turn for v in views}))
        raise UserError(f"this run has no view for turn {turn}", hint=f"Turns with views: {turns}.")
    return chosen[-1]


def diff_lines(diff: ViewDiff, a: ReplayedView, b: ReplayedView) -> list[str]:
    """Human-readable lines for a :class:`ViewDiff`."""
    known = {e.id: e for e in [*a.messages, *b.messages]}
    lines: list[str] = []

    def entries(title: str, ids: Sequence[str]) -> None:
        for entry_id in ids:
            entry = known.get(entry_id)
            text = f"{entry.type} {one_line(entry_text(entry), 90)}" if entry else ""
            lines.append(f"  {title:<11}{entry_id}  {text}")

    entries("+ added", diff.added)
    entries("~ evicted", diff.evicted)
    entries("~ restored", diff.restored)
    entries("- summarized", diff.summarized)
    entries("- dropped", diff.dropped)
    if diff.summary is not None:
        lines.append(f"  summary    {one_line(diff.summary, 100)}")
    lines.extend(f"  + reminder {one_line(t, 100)}" for t in diff.injected_added)
    lines.extend(f"  - reminder {one_line(t, 100)}" for t in diff.injected_removed)
    lines.extend(f"  = reminder {one_line(t, 100)}" for t in diff.injected_kept)
    if diff.agent is not None:
        lines.append(f"  agent      {diff.agent[0]} -> {diff.agent[1]}")
    if diff.system is not None:
        lines.append(f"  - system   {one_line(diff.system[0], 100)}")
        lines.append(f"  + system   {one_line(diff.system[1], 100)}")
    lines.extend(f"  + tool     {n}" for n in diff.tools_added)
    lines.extend(f"  - tool     {n}" for n in diff.tools_removed)
    lines.extend(f"  ~ tool     {n}" for n in diff.tools_changed)
    if diff.settings is not None:
        lines.append(f"  settings   {diff.settings[0]} -> {diff.settings[1]}")
    if diff.empty:
        lines.append("  (no change besides the entries' positions)")
    return lines


async def render_requests(args: argparse.Namespace, out: Out, views: Sequence[ReplayedView]) -> int:
    """Print the exact request body of each view (one view: the body itself)."""
    bodies = await render_bodies(
        views, provider=args.provider, base_url=args.base_url, stream=args.stream
    )
    if len(views) == 1:
        out.json(bodies[0])
    else:
        out.json(
            [
                {"turn": v.turn, "attempt": v.attempt, "agent": v.agent, "body": b}
                for v, b in zip(views, bodies, strict=True)
            ]
        )
    return EXIT_OK if all(v.ok for v in views) else EXIT_MISMATCH


def _key_from_env(name: str | None) -> str | None:
    """The key in environment variable ``name`` (``--api-key-env``), checked."""
    if name is None:
        return None
    key = os.environ.get(name)
    if not key:
        raise UserError(
            f"--api-key-env {name}: that environment variable is empty or not set",
            hint=f"export {name}=... first (the key itself never goes on the command line).",
        )
    return key


async def whatif(args: argparse.Namespace, out: Out, run: RunData, view: ReplayedView) -> int:
    """Send ``view`` to ``--model`` and print the new answer beside the recorded one
    (with its priced cost; traced like any model call, purpose ``what_if``)."""
    response = await rerun_view(
        view,
        str(args.model),
        base_url=args.base_url,
        stream=args.stream,
        api_key=_key_from_env(args.api_key_env),
        policy=WhatIfPolicy(("*",)),  # the user typed the URL; keys stay with their hosts
    )
    old = recorded_answer(run, view)
    if out.json_mode:
        out.json(whatif_dict(run, view, str(args.model), response))
        return 0
    state = "verified" if view.ok else "NOT VERIFIED"
    out.line(
        out.style(
            f"what-if: {view.label} · view {view.rebuilt_hash[:16]}… ({state}); "
            "nothing is written to the run",
            "bold",
        )
    )
    out.line(out.style(f"recorded ({view.provider}:{view.model}):", "bold"))
    for entry in old:
        out.line(f"  {brief(entry)['type']:<10}{one_line(entry_text(entry), 120)}")
    out.line(out.style(f"rerun ({args.model}):", "bold"))
    for entry in response.entries:
        out.line(f"  {entry.type:<10}{one_line(entry_text(entry), 120)}")
    usage = response.usage
    out.line(
        f"  finish {response.finish_reason} · {usage.input_tokens}+{usage.output_tokens} tokens"
        f" · ${usage.cost_usd:.6f}"
    )
    return 0
