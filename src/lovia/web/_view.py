"""A turn's exact view: verified hash, compaction, reminders, diff, messages, body.

Only the view shown (and the one it is diffed against) is rebuilt; a view of turn 499
does not rebuild the 498 before it. The page prints the newest messages of the view
and the first :data:`TEXT_LIMIT` characters of each; the rest loads on demand
(``/api/runs/RUN/turns/N/messages``), so a view holding 100 MB of tool output is
still a small page.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ..errors import LoviaError, UserError
from ..replay import (
    ReplayedView,
    RunData,
    diff_views,
    entry_text,
    explain_mismatch,
    failed_call,
    find_view,
    info_dict,
    parse_ref,
    recorded_answer,
    render_bodies,
    require_views,
)
from ..transcript import TranscriptEntry
from ._cache import Loaded, off_loop
from ._format import TEXT_LIMIT, clip, path
from ._pages import config_of, int_param, loaded_run, render
from ._run import lineage, page_of_turn

__all__ = ["ROUTES", "turn_ranges"]

MESSAGES_SHOWN = 30
"""Newest messages of a view printed in the page (earlier ones load on demand)."""
DIFF_KEYS = ("added", "evicted", "restored", "summarized", "dropped")


def turn_ranges(turns: list[int]) -> str:
    """``1–40, 42`` for a hint naming many turns."""
    out: list[str] = []
    for t in turns:
        if out and t == int(out[-1].split("–")[-1]) + 1:
            out[-1] = f"{out[-1].split('–')[0]}–{t}"
        else:
            out.append(str(t))
    return ", ".join(out)


async def chosen_view(request: Request, turn: int | None = None) -> tuple[Loaded, ReplayedView]:
    """The run of the path and the view of its turn (``?attempt=``), rebuilt alone."""
    loaded = await loaded_run(request)
    require_views(loaded.run)
    turn = int(request.path_params["turn"]) if turn is None else turn
    attempt = int_param(request.query_params.get("attempt"), "attempt") or None
    index = loaded.view_index(turn, attempt)
    if index is None:
        raise UserError(
            f"this run has no view for turn {turn}",
            hint=f"Turns with views: {turn_ranges(loaded.view_turns())}.",
        )
    return loaded, await off_loop(loaded.view, index)


def _origins(view: ReplayedView) -> list[str]:
    return [
        *("replaced" if i in view.record.replaced else "" for i in view.record.order),
        *("injected" for _ in view.record.injected),
    ]


def message_rows(view: ReplayedView, start: int, stop: int, limit: int | None) -> list[Any]:
    """Messages ``start:stop`` of a view: index, role, origin, text (clipped to ``limit``)."""
    origins = _origins(view)
    rows: list[dict[str, Any]] = []
    for index in range(max(0, start), min(stop, len(view.messages))):
        entry = view.messages[index]
        text = entry_text(entry)
        rows.append(
            {
                "index": index,
                "type": entry.type,
                "role": str(getattr(entry, "role", "") or entry.type),
                "how": origins[index] if index < len(origins) else "",
                "text": text if limit is None else clip(text, limit),
                "chars": len(text),
            }
        )
    return rows


def _neighbours(turns: list[int], turn: int) -> tuple[int | None, int | None]:
    at = turns.index(turn) if turn in turns else -1
    before = turns[at - 1] if at > 0 else None
    after = turns[at + 1] if 0 <= at < len(turns) - 1 else None
    return before, after


async def _diff(
    request: Request, loaded: Loaded, view: ReplayedView, before: int | None
) -> tuple[dict[str, Any] | None, int | None, dict[str, str]]:
    """The diff against ``?diff=N`` (the previous turn by default, ``diff=none`` for none)."""
    raw = request.query_params.get("diff")
    if raw == "none":
        return None, None, {}
    other = int_param(raw, "diff") if raw else before
    if other is None:
        return None, None, {}
    index = loaded.view_index(other, None)
    if index is None:
        raise UserError(f"this run has no view for turn {other}")
    key = f"diff:{index}:{id(view)}"
    cached: tuple[dict[str, Any], dict[str, str]] | None = loaded.extra.get(key)
    if cached is None:
        base = await off_loop(loaded.view, index)
        cached = loaded.extra[key] = await off_loop(_diff_of, base, view)
    return cached[0], other, cached[1]


def _diff_of(base: ReplayedView, view: ReplayedView) -> tuple[dict[str, Any], dict[str, str]]:
    """What changed from ``base`` to ``view``, and a line of text per entry named."""
    diff = diff_views(base, view)
    wanted = {i for key in DIFF_KEYS for i in getattr(diff, key)}
    known: dict[str, TranscriptEntry] = {
        e.id: e for e in [*base.messages, *view.messages] if e.id in wanted
    }
    return diff.to_dict(), {i: clip(entry_text(e), 160) for i, e in known.items()}


async def view_page(request: Request) -> dict[str, Any]:
    """What the view page prints: bounded, whatever the run's size."""
    loaded, view = await chosen_view(request)
    run = loaded.run
    mismatch = None
    if not view.ok:
        mismatch = explain_mismatch(view, run, await off_loop(loaded.all_views))
    turns = loaded.view_turns()
    before, after = _neighbours(turns, view.turn)
    diff, diff_turn, diff_text = await _diff(request, loaded, view, before)
    total = len(view.messages)
    first = max(0, total - MESSAGES_SHOWN)
    size = config_of(request).turns_per_page
    return {
        "run": info_dict(run.info),
        "lineage": await lineage(request, run.info, loaded),
        "view": view,
        "label": view.label,
        "mismatch": mismatch,
        "attempts": loaded.attempts(view.turn),
        "first_turn": turns[0],
        "last_turn": turns[-1],
        "prev_turn": before,
        "next_turn": after,
        "run_page": page_of_turn(loaded, view.turn, size),
        "messages": message_rows(view, first, total, TEXT_LIMIT),
        "hidden_messages": first,
        "text_limit": TEXT_LIMIT,
        "replaced": {i: clip(entry_text(e), 400) for i, e in _replaced(view).items()},
        "injected": [clip(entry_text(e), 400) for e in view.injected],
        "diff": diff,
        "diff_turn": diff_turn,
        "diff_text": diff_text,
        "recorded": [
            {"type": e.type, "text": clip(entry_text(e))} for e in recorded_answer(run, view)
        ],
        "failed_call": failed_call_of(run, view),
    }


def failed_call_of(run: RunData, view: ReplayedView) -> dict[str, Any] | None:
    """The failure of the model call this view was sent in, if it failed."""
    found = failed_call(run, view)
    return None if found is None else asdict(found)


async def content_ref(request: Request) -> Response:
    """A content reference (``lovia.content.ref``, or ``LOVIA_CONTENT_URL`` pointing here):
    the page of the turn whose view it names (a summary call's: the turn it was made for)."""
    ref = parse_ref(
        f"lovia:run/{request.path_params['run_id']}/view/{request.path_params['view_hash']}"
    )
    assert ref is not None
    loaded = await loaded_run(request)
    require_views(loaded.run)
    found = find_view(await off_loop(loaded.all_views), ref)
    attempt = f"?attempt={found.attempt}" if found.attempt > 1 else ""
    url = f"/runs/{path(loaded.run.info.run_id)}/turns/{found.turn}{attempt}"
    return RedirectResponse(url, status_code=303)


def _replaced(view: ReplayedView) -> dict[str, TranscriptEntry]:
    from ..transcript import entry_from_dict

    return {i: entry_from_dict(stub) for i, stub in view.record.replaced.items()}


async def view_html(request: Request) -> Response:
    return render(request, "view.html", **await view_page(request))


async def request_body(view: ReplayedView) -> tuple[Any, str | None]:
    """The provider request body of a view (``--format request``), or why there is none."""
    try:
        return (await render_bodies([view]))[0], None
    except LoviaError as exc:
        return None, f"{exc.message} ({exc.hint})" if exc.hint else exc.message


async def view_json(request: Request) -> Response:
    """The whole view as JSON (every message in full, the request body)."""
    loaded, view = await chosen_view(request)
    run = loaded.run
    mismatch = None
    if not view.ok:
        mismatch = explain_mismatch(view, run, await off_loop(loaded.all_views))
    before, _after = _neighbours(loaded.view_turns(), view.turn)
    diff, diff_turn, _texts = await _diff(request, loaded, view, before)
    body, body_error = await request_body(view)
    return JSONResponse(
        {
            "run": info_dict(run.info),
            "view": view.to_dict(),
            "label": view.label,
            "mismatch": mismatch,
            "attempts": loaded.attempts(view.turn),
            "turns": loaded.view_turns(),
            "messages": message_rows(view, 0, len(view.messages), None),
            "injected": [entry_text(e) for e in view.injected],
            "diff": diff,
            "diff_turn": diff_turn,
            "body": body,
            "body_error": body_error,
            "recorded": [
                {"type": e.type, "text": entry_text(e)} for e in recorded_answer(run, view)
            ],
            "failed_call": failed_call_of(run, view),
        }
    )


async def messages_json(request: Request) -> Response:
    """``…/turns/N/messages?start=I&count=K``: messages of the view in full (the page's
    "earlier messages" and "show all" buttons)."""
    _loaded, view = await chosen_view(request)
    q = request.query_params
    start = int_param(q.get("start"), "start")
    count = min(int_param(q.get("count"), "count", 100), 500)
    limit = None if q.get("full") else TEXT_LIMIT
    rows = message_rows(view, start, start + count, limit)
    return JSONResponse({"total": len(view.messages), "messages": rows})


async def body_json(request: Request) -> Response:
    """``/api/runs/{id}/turns/{n}/request``: the exact provider request body."""
    _loaded, view = await chosen_view(request)
    body, error = await request_body(view)
    if error is not None:
        raise UserError(error)
    return JSONResponse(body)


async def diff_json(request: Request) -> Response:
    """``/api/runs/{id}/diff?a=A&b=B``: what changed between the views of turns A and B."""
    q = request.query_params
    _loaded, a = await chosen_view(request, int_param(q.get("a"), "a"))
    _loaded, b = await chosen_view(request, int_param(q.get("b"), "b"))
    return JSONResponse(diff_views(a, b).to_dict())


ROUTES = [
    Route("/runs/{run_id}/turns/{turn:int}", view_html),
    Route("/api/runs/{run_id}/turns/{turn:int}", view_json),
    Route("/api/runs/{run_id}/turns/{turn:int}/messages", messages_json),
    Route("/api/runs/{run_id}/turns/{turn:int}/request", body_json),
    Route("/api/runs/{run_id}/diff", diff_json),
    Route("/ref/{run_id}/{view_hash}", content_ref),
]
