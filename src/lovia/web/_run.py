"""A run: its transcript by turn, its trace, its lineage, live updates and export.

The page prints one page of turns and the first :data:`TEXT_LIMIT` characters of each
message or tool result (the rest on demand from ``/api/runs/RUN/entries/ID``). While
the run is in flight the page asks ``/api/runs/RUN/live`` (a few bytes) and swaps in
the changed parts; it stops when the run ends or its holder died.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import asdict
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..errors import UserError
from ..replay import SpanRow, Turn, attempt_parts, entry_text, info_dict, run_dict
from ..stores.base import RunInfo
from ..stores.lifecycle import Attempt, build_life, state_of
from ..transcript import entry_to_dict
from ._cache import Loaded, off_loop
from ._config import WebConfig
from ._format import TEXT_LIMIT, path
from ._list import run_index, unpriced
from ._pages import config_of, db_of, int_param, loaded_run, render
from ._trace import (
    Bar,
    axis_ticks,
    by_attempt,
    minimap,
    run_spans,
    span_link,
    trace_link,
    waterfall,
)

__all__ = ["ROUTES", "lineage", "page_of_turn"]

LIVE = ("running",)
"""Statuses whose page keeps asking for updates (while the run's holder is alive)."""


def page_of_turn(loaded: Loaded, turn: int, size: int) -> int:
    """The run page (of ``size`` turns) that shows ``turn``."""
    for at, t in enumerate(loaded.turns()):
        if t.turn >= turn:
            return at // size
    return 0


async def lineage(request: Request, info: RunInfo, loaded: Loaded | None = None) -> dict[str, Any]:
    """The run's ancestors (root first), its child runs and which call started each
    (kept with the ``loaded`` run once it ended)."""
    cached: dict[str, Any] | None = loaded.extra.get("lineage") if loaded else None
    if cached is not None:
        return cached
    index = await run_index(request)
    ancestors: list[dict[str, Any]] = []
    parent = info.parent_run_id
    while parent is not None and len(ancestors) < 32:
        found = index.by_id.get(parent)
        ancestors.insert(0, {"run_id": parent, "agent": found.agent if found else "?"})
        parent = found.parent_run_id if found else None
    kids = await db_of(request).list_runs(parent_run_id=info.run_id, limit=1000)
    kids.reverse()
    children_cost = sum(k.cost_usd or 0.0 for k in kids)
    children_unpriced = sum(unpriced(k) for k in kids)
    found = {
        "ancestors": ancestors,
        "children": [info_dict(k) for k in kids],
        "child_by_call": {k.parent_call_id: k.run_id for k in kids if k.parent_call_id},
        "children_cost_usd": children_cost,
        "own_cost_usd": max(0.0, (info.cost_usd or 0.0) - children_cost),
        "children_unpriced": children_unpriced,
        "own_unpriced": max(0, unpriced(info) - children_unpriced),
    }
    if loaded is not None and info.status not in LIVE:  # a live run may start children
        loaded.extra["lineage"] = found
    return found


def needs_approval(config: WebConfig, waiting: list[Any]) -> list[Any]:
    """The waiting calls of a paused run that wait for a human: with ``--agent``, those
    whose tool requires approval (the others just run on resume); else all of them."""
    if config.agent is None or not waiting:
        return waiting
    from ._live import agent_of

    tools = {t.name: t for t in agent_of(config).tools if hasattr(t, "requires_approval")}
    return [
        i
        for i in waiting
        if i.entry.name not in tools or tools[i.entry.name].requires_approval is not False
    ]


def _page_window(page: list[Turn]) -> tuple[float, float] | None:
    stamps = [i.entry.ts for t in page for i in t.items]
    return (min(stamps), max(stamps)) if stamps else None


async def run_data(request: Request) -> dict[str, Any]:
    """A run: info, lineage, one page of turns, the trace of that page, approvals."""
    config = config_of(request)
    loaded = await loaded_run(request)
    run = loaded.run
    all_turns = loaded.turns()
    size = config.turns_per_page
    pages = max(1, -(-len(all_turns) // size))
    page = min(int_param(request.query_params.get("page"), "page"), pages - 1)
    shown = all_turns[page * size : (page + 1) * size]
    spans, source = await run_spans(loaded, config.store)
    life = run.life if run.life is not None else build_life(run.info, None)
    bars: list[Bar] | None = loaded.extra.get(f"bars:{page}")
    if bars is None:  # drawn once per page of a loaded run
        window = _page_window(shown) if pages > 1 else None
        bars = await off_loop(waterfall, spans, window, life.attempts)
        loaded.extra[f"bars:{page}"] = bars
    pending = needs_approval(
        config, [i for t in all_turns for i in t.items if i.mark == "approval"]
    )
    return {
        "run": run_dict(run.info, life, full=True),
        "approvals": {a.call_id: asdict(a) for a in life.approvals},
        "span_notes": span_notes(life.attempts, spans) if source == "span store" else [],
        "lineage": await lineage(request, run.info, loaded),
        "first_agent": run.info.extra.get("first_agent", run.info.agent),
        "history_len": len(run.history),
        "turns": shown,
        "page": page,
        "pages": pages,
        "bars": bars,
        "groups": by_attempt(bars, life.attempts),
        "minimap": minimap(bars),
        "ticks": axis_ticks(bars),
        "bookkeeping": sum(1 for b in bars if b.bookkeeping),
        "span_source": source,
        "trace_link": trace_link(config.trace_url, run.info.trace_id),
        "pending": pending,
        "view_turns": set(loaded.view_turns()),
        "live": life.state in LIVE,
        "text_limit": TEXT_LIMIT,
    }


def span_notes(attempts: list[Attempt], spans: list[SpanRow]) -> list[dict[str, Any]]:
    """Per attempt whose spans (or root span) died with its process: what is missing."""
    if len(attempts) < 2 and all(a.how not in ("killed", "lease_lost") for a in attempts):
        return []
    return [
        {"attempt": p.attempt, "how": p.how, "note": p.note}
        for p in attempt_parts(attempts, spans)
        if p.note
    ]


async def run_html(request: Request) -> Response:
    return render(request, "run.html", **await run_data(request))


async def run_json(request: Request) -> Response:
    data = await run_data(request)
    data["turns"] = [t.to_dict() for t in data["turns"]]
    data["bars"] = [b.to_dict() for b in data["bars"]]
    data["groups"] = [
        {
            "attempt": None if g.attempt is None else g.attempt.to_dict(),
            "title": g.title,
            "spans": [b.span.span_id for b in g.bars],
        }
        for g in data["groups"]
    ]
    data["pending"] = [i.to_dict() for i in data["pending"]]
    data["view_turns"] = sorted(data["view_turns"])
    data.pop("ticks")
    return JSONResponse(data)


async def live_json(request: Request) -> Response:
    """A few bytes saying whether the run changed and whether to keep asking."""
    db = db_of(request)
    loaded = await loaded_run(request)
    info = loaded.run.info
    holder = await db.lease_holder(info.run_id) if info.status in LIVE else None
    # the lifecycle's own derivation: no holder, or a holder whose process is gone
    # (its lease not yet expired) is interrupted, and nothing is left to wait for
    state, detail = state_of(info, holder)
    orphaned = info.status in LIVE and state == "interrupted"
    return JSONResponse(
        {
            "status": state,
            "detail": detail,
            "turns": info.turns,
            "version": len(loaded.run.entries) + len(loaded.run.views) + len(loaded.run.states),
            "holder": holder if state in LIVE else None,
            "orphaned": orphaned,
            "live": state in LIVE,
        }
    )


async def entry_json(request: Request) -> Response:
    """``/api/runs/RUN/entries/ID``: one transcript entry in full (the "show all" button)."""
    loaded = await loaded_run(request)
    wanted = request.path_params["entry_id"]
    for entry in loaded.run.transcript:
        if entry.id == wanted:
            return JSONResponse({**entry_to_dict(entry), "text": entry_text(entry)})
    raise UserError(f"run {loaded.run.info.run_id} has no entry {wanted!r}")


async def span_json(request: Request) -> Response:
    """``/api/runs/RUN/spans/ID``: the detail panel of one span of the run's trace."""
    config = config_of(request)
    loaded = await loaded_run(request)
    spans, _source = await run_spans(loaded, config.store)
    wanted = request.path_params["span_id"]
    bars = [b for b in waterfall(spans) if b.span.span_id == wanted]
    if not bars:
        raise UserError(f"run {loaded.run.info.run_id} has no span {wanted!r}")
    bar = bars[0]
    data = bar.to_dict()
    data["events"] = loaded.extra.get("span_events", {}).get(wanted, [])
    trace_id = bar.span.trace_id
    data["traceparent"] = f"00-{trace_id}-{wanted}-01" if trace_id and len(wanted) == 16 else None
    data["link"] = span_link(config.trace_url, trace_id, wanted)
    run_id = path(loaded.run.info.run_id)
    if bar.turn is not None and bar.turn in loaded.view_turns() and bar.purpose:
        data["view_url"] = f"/runs/{run_id}/turns/{bar.turn}"
    if bar.call_id is not None and bar.turn is not None:
        page = page_of_turn(loaded, bar.turn, config.turns_per_page)
        data["call_url"] = f"/runs/{run_id}?page={page}#call-{path(bar.call_id)}"
    return JSONResponse(data)


async def export_jsonl(request: Request) -> Response:
    """The run as JSON Lines: its summary, then each entry, view record and state."""
    loaded = await loaded_run(request)
    run = loaded.run

    def line(kind: str, data: Any) -> bytes:
        return (json.dumps({"kind": kind, **data}, ensure_ascii=False, default=str) + "\n").encode()

    async def lines() -> AsyncIterator[bytes]:
        yield line("run", info_dict(run.info))
        for entry in run.entries:
            yield line("entry", entry_to_dict(entry))
        for record in run.views:
            yield line("view", record.to_data())
        for state in run.states:
            usage = state.usage
            yield line(
                "state",
                {
                    "turn": state.turn,
                    "agent": state.agent,
                    "input_tokens": usage.input_tokens,
                    "output_tokens": usage.output_tokens,
                    "cost_usd": usage.cost_usd,
                },
            )
        if run.result is not None:
            yield line("result", {"result": run.result})

    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in run.info.run_id)
    return StreamingResponse(
        lines(),
        media_type="application/x-ndjson",
        headers={"content-disposition": f'attachment; filename="{name}.jsonl"'},
    )


ROUTES = [
    Route("/runs/{run_id}", run_html),
    Route("/api/runs/{run_id}", run_json),
    Route("/api/runs/{run_id}/live", live_json),
    Route("/api/runs/{run_id}/entries/{entry_id}", entry_json),
    Route("/api/runs/{run_id}/spans/{span_id}", span_json),
    Route("/api/runs/{run_id}/export.jsonl", export_jsonl),
]
